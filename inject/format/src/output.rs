//! Where a trace is written: the output path pattern (`RTRACE_OUTPUT`) and the host name its
//! `%h` stands for. librtrace.so expands the pattern to name its file; `rtrace record` expands
//! it the same way to find the files a run wrote.

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
}

/// The pieces of an output pattern, in order ([`pattern_pieces`]).
#[derive(Clone, Debug)]
pub struct PatternPieces<'a> {
    rest: &'a [u8],
}

/// The pieces of `pattern`: `%p` is [`PatternPiece::Pid`], `%h` [`PatternPiece::Host`], `%%`
/// a literal `%`; any other `%` (before another byte, or last) stands for itself, and the byte
/// after it is read as usual.
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

/// `pattern` with `%p` → `pid`, `%h` → `host` and `%%` → `%` (see [`pattern_pieces`]).
pub fn expand_output(pattern: &[u8], pid: u32, host: &[u8]) -> Vec<u8> {
    let pid = pid.to_string();
    let mut out = Vec::with_capacity(pattern.len() + 16);
    for piece in pattern_pieces(pattern) {
        out.extend_from_slice(match piece {
            PatternPiece::Literal(bytes) => bytes,
            PatternPiece::Pid => pid.as_bytes(),
            PatternPiece::Host => host,
        });
    }
    out
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
        String::from_utf8(expand_output(pattern.as_bytes(), pid, host.as_bytes())).unwrap()
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
    }

    #[test]
    fn patterns_split_into_pieces() {
        use PatternPiece::*;
        let pieces: Vec<_> = pattern_pieces(b"/t/%h-%%p-%p%").collect();
        assert_eq!(
            pieces,
            [
                Literal(b"/t/"),
                Host,
                Literal(b"-"),
                Literal(b"%"),
                Literal(b"p-"),
                Pid,
                Literal(b"%"),
            ]
        );
        assert_eq!(pattern_pieces(b"").count(), 0);
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
