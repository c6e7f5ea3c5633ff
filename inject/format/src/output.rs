//! Where a trace is written: the output path pattern (`RTRACE_OUTPUT`) and the host name its
//! `%h` stands for. librtrace.so expands the pattern to name its file; `rtrace record` expands
//! it the same way to find the files a run wrote. One implementation of the pattern
//! ([`pattern_pieces`], [`expand_output`]) serves both.
//!
//! librtrace.so creates its file exclusively: where the name is taken (by anything: a file, a
//! link, a FIFO, a device; an earlier image of the same process after `exec`; another process
//! given the same fixed name), it writes beside it, under the first free of
//! [`collision_path`]`(name, 1)`, `(name, 2)`, ... up to [`MAX_COLLISION_SUFFIX`] (or, with
//! [`crate::env::FORCE_OVERWRITE`], replaces an earlier run's regular file of its user).

/// The output pattern when none is given: `rtrace-<pid>.bin` in the current directory.
pub const DEFAULT_OUTPUT: &str = "rtrace-%p.bin";

/// What the host name is when it cannot be read.
pub const UNKNOWN_HOST: &str = "unknown";

/// A piece of an output pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatternPiece<'a> {
    /// Bytes that stand for themselves.
    Literal(&'a [u8]),
    /// `%p`: the process id.
    Pid,
    /// `%h`: the host name.
    Host,
    /// `%q{VAR}`: the value of the environment variable VAR in the traced process (empty when
    /// it is unset, as in Nsight Systems), e.g. `%q{RANK}` under torchrun or
    /// `%q{OMPI_COMM_WORLD_RANK}` under Open MPI.
    Var(&'a [u8]),
}

/// The pieces of an output pattern, in order ([`pattern_pieces`]).
#[derive(Clone, Debug)]
pub struct PatternPieces<'a> {
    rest: &'a [u8],
}

/// The pieces of `pattern`: `%p` is [`PatternPiece::Pid`], `%h` [`PatternPiece::Host`],
/// `%q{VAR}` [`PatternPiece::Var`] (VAR: one or more bytes other than `}`), `%%` a literal
/// `%`; any other `%` (before another byte, or last; `%q` without a closed, non-empty `{VAR}`)
/// stands for itself, and the byte after it is read as usual.
pub fn pattern_pieces(pattern: &[u8]) -> PatternPieces<'_> {
    PatternPieces { rest: pattern }
}

impl<'a> Iterator for PatternPieces<'a> {
    type Item = PatternPiece<'a>;

    fn next(&mut self) -> Option<PatternPiece<'a>> {
        let rest = self.rest;
        let (&first, after) = rest.split_first()?;
        let (piece, used) = if first == b'%' {
            match after.first() {
                Some(b'p') => (PatternPiece::Pid, 2),
                Some(b'h') => (PatternPiece::Host, 2),
                Some(b'%') => (PatternPiece::Literal(&rest[..1]), 2),
                Some(b'q') if after.get(1) == Some(&b'{') => {
                    match after[2..].iter().position(|&b| b == b'}') {
                        Some(n) if n > 0 => (PatternPiece::Var(&after[2..2 + n]), n + 4),
                        _ => (PatternPiece::Literal(&rest[..1]), 1),
                    }
                }
                _ => (PatternPiece::Literal(&rest[..1]), 1),
            }
        } else {
            let n = rest.iter().position(|&b| b == b'%').unwrap_or(rest.len());
            (PatternPiece::Literal(&rest[..n]), n)
        };
        self.rest = &rest[used..];
        Some(piece)
    }
}

/// `pattern` with `%p` → `pid`, `%h` → `host`, `%q{VAR}` → `var(VAR)` (empty for `None`) and
/// `%%` → `%` (see [`pattern_pieces`]).
pub fn expand_output(
    pattern: &[u8],
    pid: u32,
    host: &[u8],
    var: &dyn Fn(&[u8]) -> Option<Vec<u8>>,
) -> Vec<u8> {
    let pid = pid.to_string();
    let mut out = Vec::with_capacity(pattern.len() + 16);
    for piece in pattern_pieces(pattern) {
        match piece {
            PatternPiece::Literal(bytes) => out.extend_from_slice(bytes),
            PatternPiece::Pid => out.extend_from_slice(pid.as_bytes()),
            PatternPiece::Host => out.extend_from_slice(host),
            PatternPiece::Var(name) => out.extend_from_slice(&var(name).unwrap_or_default()),
        }
    }
    out
}

/// The names of the variables `pattern`'s `%q{VAR}` pieces read, in order.
pub fn pattern_vars(pattern: &[u8]) -> Vec<&[u8]> {
    pattern_pieces(pattern)
        .filter_map(|piece| match piece {
            PatternPiece::Var(name) => Some(name),
            _ => None,
        })
        .collect()
}

/// The value of the environment variable `name` of this process, as [`expand_output`] takes
/// it (`None`: unset).
pub fn process_var(name: &[u8]) -> Option<Vec<u8>> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    std::env::var_os(std::ffi::OsStr::from_bytes(name)).map(|v| v.into_vec())
}

/// In `RTRACE_STATUS_DIR` ([`crate::env::STATUS_DIR`]): the prefix of the file that names a
/// trace librtrace.so created (`trace-<pid>`, holding the trace's path).
pub const STATUS_TRACE: &str = "trace-";
/// In `RTRACE_STATUS_DIR`: the prefix of the file that says why tracing turned itself off in
/// a process (`off-<pid>`, holding the reason on one line).
pub const STATUS_OFF: &str = "off-";
/// In `RTRACE_STATUS_DIR`: the prefix of the empty file by which a process claims a module
/// image's content for its trace (`image-<hash>`, the [`crate::image_hash`] in 16 hex digits),
/// created exclusively: the run's first process to load the content stores it, the others
/// name it ([`crate::IMAGE_IN_RUN`]).
pub const STATUS_IMAGE: &str = "image-";

/// The most names tried beside a taken one: `.1` to `.4096` ([`collision_path`]).
pub const MAX_COLLISION_SUFFIX: u32 = 4096;

/// Where the extension of the last component of `path` starts: its last `.`, unless that is
/// the component's first byte (`.hidden`); `path.len()` when there is none.
fn extension_at(path: &[u8]) -> usize {
    let name_at = path.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
    match path[name_at..].iter().rposition(|&b| b == b'.') {
        Some(i) if i > 0 => name_at + i,
        _ => path.len(),
    }
}

/// The `n`th name tried beside the taken trace path `path`: `.n` before the extension of its
/// last component (`trace.bin` → `trace.1.bin`, `a.b.c` → `a.b.1.c`), or at its end when it
/// has none (`trace` → `trace.1`, `.hidden` → `.hidden.1`).
pub fn collision_path(path: &[u8], n: u32) -> Vec<u8> {
    let at = extension_at(path);
    let mut out = Vec::with_capacity(path.len() + 11);
    out.extend_from_slice(&path[..at]);
    out.push(b'.');
    out.extend_from_slice(n.to_string().as_bytes());
    out.extend_from_slice(&path[at..]);
    out
}

/// What the GPU metrics sampler's trace is named by, given the output pattern of the program's
/// (`rtrace record -o`): [`GPU_SAMPLER_SUFFIX`] before the extension of its last component
/// (`rtrace-%p.bin` → `rtrace-%p.gpu-metrics.bin`, `gm.bin` → `gm.gpu-metrics.bin`), so that a
/// fixed name stays the program's and a directory of traces holds the sampler's too.
pub fn gpu_sampler_pattern(pattern: &[u8]) -> Vec<u8> {
    let at = extension_at(pattern);
    [
        &pattern[..at],
        GPU_SAMPLER_SUFFIX.as_bytes(),
        &pattern[at..],
    ]
    .concat()
}

/// What [`gpu_sampler_pattern`] puts before the extension.
pub const GPU_SAMPLER_SUFFIX: &str = ".gpu-metrics";

/// The taken name and the `n` of a name [`collision_path`] made (`n` in
/// 1..=[`MAX_COLLISION_SUFFIX`]); `None` for any other name.
pub fn collision_base(path: &[u8]) -> Option<(Vec<u8>, u32)> {
    let number = |digits: &[u8]| -> Option<u32> {
        let ok = !digits.is_empty() && digits[0] != b'0' && digits.iter().all(u8::is_ascii_digit);
        let n: u32 = std::str::from_utf8(digits).ok()?.parse().ok()?;
        (ok && n <= MAX_COLLISION_SUFFIX).then_some(n)
    };
    let last_dot = path.iter().rposition(|&b| b == b'.')?;
    // `.n` at the end: a name without an extension.
    let at_end = number(&path[last_dot + 1..]).map(|n| (path[..last_dot].to_vec(), n));
    // `.n` before the extension.
    let before_ext = path[..last_dot]
        .iter()
        .rposition(|&b| b == b'.')
        .and_then(|dot| {
            let n = number(&path[dot + 1..last_dot])?;
            Some(([&path[..dot], &path[last_dot..]].concat(), n))
        });
    [at_end, before_ext]
        .into_iter()
        .flatten()
        .filter(|(base, _)| !base.is_empty() && !base.ends_with(b"/"))
        .find(|(base, n)| collision_path(base, *n) == path)
}

/// The host name `%h` stands for and trace headers carry: `/proc/sys/kernel/hostname` (the
/// name `gethostname` gives), or [`UNKNOWN_HOST`] when it cannot be read.
pub fn hostname() -> String {
    match std::fs::read("/proc/sys/kernel/hostname") {
        Ok(bytes) => {
            let name = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
            String::from_utf8_lossy(name).into_owned()
        }
        Err(_) => UNKNOWN_HOST.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(pattern: &str, pid: u32, host: &str) -> String {
        let var = |name: &[u8]| match name {
            b"RANK" => Some(b"3".to_vec()),
            b"EMPTY" => Some(Vec::new()),
            b"PCT" => Some(b"%p".to_vec()),
            _ => None,
        };
        String::from_utf8(expand_output(
            pattern.as_bytes(),
            pid,
            host.as_bytes(),
            &var,
        ))
        .unwrap()
    }

    #[test]
    fn patterns_expand() {
        assert_eq!(expand("t-%p-%h.bin", 42, "box"), "t-42-box.bin");
        assert_eq!(expand(DEFAULT_OUTPUT, 7, "h"), "rtrace-7.bin");
        assert_eq!(expand("%%p%x%", 7, "h"), "%p%x%");
        assert_eq!(expand("a%%%p", 7, "h"), "a%7");
        assert_eq!(expand("%%%%h", 7, "h"), "%%h");
        assert_eq!(expand("%", 7, "h"), "%");
        assert_eq!(expand("t%", 7, "h"), "t%");
        assert_eq!(expand("%x%p", 7, "h"), "%x7");
        assert_eq!(expand("/d/%P%H", 7, "h"), "/d/%P%H");
        assert_eq!(expand("", 7, "h"), "");
        assert_eq!(expand("%p%p", 0, ""), "00");
        assert_eq!(expand("%h/%p", u32::MAX, "a.b"), "a.b/4294967295");
        // `%%` before `%p` is one `%` (issue 20 found the CLI looking for `x%%-PID.bin`).
        assert_eq!(expand("x%%-%p.bin", 42, "h"), "x%-42.bin");
    }

    #[test]
    fn variables_expand_to_their_value_or_nothing() {
        assert_eq!(expand("t-%q{RANK}-%p.bin", 7, "h"), "t-3-7.bin");
        assert_eq!(expand("t-%q{UNSET}.bin", 7, "h"), "t-.bin");
        assert_eq!(expand("t-%q{EMPTY}.bin", 7, "h"), "t-.bin");
        // A value is taken as it is, never read as a pattern.
        assert_eq!(expand("%q{PCT}", 7, "h"), "%p");
        // Not a variable: `%q` without a closed, non-empty `{VAR}`, or after `%%`.
        assert_eq!(expand("%q{}x", 7, "h"), "%q{}x");
        assert_eq!(expand("%q{RANK", 7, "h"), "%q{RANK");
        assert_eq!(expand("%qRANK", 7, "h"), "%qRANK");
        assert_eq!(expand("%%q{RANK}", 7, "h"), "%q{RANK}");
        assert_eq!(expand("%q{%p}", 7, "h"), "");
        assert_eq!(
            pattern_vars(b"/d/%q{A}/%p-%q{B}%%q{C}"),
            [b"A".as_slice(), b"B".as_slice()]
        );
    }

    #[test]
    fn patterns_split_into_pieces() {
        use PatternPiece::*;
        let pieces: Vec<_> = pattern_pieces(b"/t/%h-%%p-%p%q{R}%").collect();
        assert_eq!(
            pieces,
            [
                Literal(b"/t/"),
                Host,
                Literal(b"-"),
                Literal(b"%"),
                Literal(b"p-"),
                Pid,
                Var(b"R"),
                Literal(b"%"),
            ]
        );
        assert_eq!(pattern_pieces(b"").count(), 0);
    }

    #[test]
    fn the_gpu_samplers_trace_goes_beside_the_programs() {
        let g = |p: &str| String::from_utf8(gpu_sampler_pattern(p.as_bytes())).unwrap();
        assert_eq!(g("rtrace-%p.bin"), "rtrace-%p.gpu-metrics.bin");
        assert_eq!(g("/d/gm.bin"), "/d/gm.gpu-metrics.bin");
        assert_eq!(g("/d.x/trace"), "/d.x/trace.gpu-metrics");
        assert_eq!(g("run/%q{RANK}.bin"), "run/%q{RANK}.gpu-metrics.bin");
    }

    #[test]
    fn collision_names_go_beside_the_extension() {
        let c = |p: &str, n| String::from_utf8(collision_path(p.as_bytes(), n)).unwrap();
        assert_eq!(c("/d/trace.bin", 1), "/d/trace.1.bin");
        assert_eq!(c("trace.bin", 4096), "trace.4096.bin");
        assert_eq!(c("/d/a.b.c", 2), "/d/a.b.2.c");
        assert_eq!(c("/d/trace", 3), "/d/trace.3");
        assert_eq!(c("/d/.hidden", 1), "/d/.hidden.1");
        assert_eq!(c("/d.x/trace", 1), "/d.x/trace.1");
        assert_eq!(c("/dev/null", 1), "/dev/null.1");
        assert_eq!(c("rtrace-42.bin", 7), "rtrace-42.7.bin");
        for (path, n) in [
            ("/d/trace.bin", 1),
            ("/d/a.b.c", 2),
            ("/d/trace", 3),
            ("/d/.hidden", 1),
            ("/d.x/trace", 12),
            ("t.1.bin", 2),
            ("t.bin", MAX_COLLISION_SUFFIX),
        ] {
            let made = collision_path(path.as_bytes(), n);
            assert_eq!(
                collision_base(&made),
                Some((path.as_bytes().to_vec(), n)),
                "{path}"
            );
        }
        let base =
            |p: &str| collision_base(p.as_bytes()).map(|(b, n)| (String::from_utf8(b).unwrap(), n));
        assert_eq!(base("trace.bin"), None);
        assert_eq!(base("trace.0.bin"), None);
        assert_eq!(base("trace.01.bin"), None);
        assert_eq!(base("trace.4097.bin"), None);
        assert_eq!(base("trace.x.bin"), None);
        assert_eq!(base(".1"), None);
        assert_eq!(base("/d/.1"), None);
        assert_eq!(base("rtrace-42.bin"), None);
        assert_eq!(base("trace.3"), Some(("trace".into(), 3)));
        assert_eq!(base("t.1.2"), Some(("t.2".into(), 1)));
    }

    #[test]
    fn hostname_is_one_line() {
        let h = hostname();
        assert!(!h.contains('\n'));
        if let Ok(proc) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
            assert_eq!(h, proc.trim_end_matches('\n'));
        }
    }
}
