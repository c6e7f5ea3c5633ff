//! `rtrace record`: run a program with librtrace.so preloaded and find the
//! traces it wrote ([`session`]: exactly those whose header carries the run's token).

mod pattern;
mod sampler;
pub mod session;
mod summary;
mod traced;

use crate::sys::signals;
pub use crate::sys::signals::signal_name;
pub use pattern::OutputPattern;
pub use session::{contents, Contents, Found, Session, TraceFile};
pub use summary::summary_lines;
pub use traced::{Traced, TRACE_NAMES};

use crate::read::inputs::io_message;
use rtrace_format::{env, DEFAULT_OUTPUT};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

/// File name of the injected library.
pub const LIB_NAME: &str = "librtrace.so";

/// What to record, as `rtrace record` takes it.
#[derive(Clone, Debug, Default)]
pub struct RecordOptions {
    /// Trace path pattern (`%p` → pid, `%h` → host name, `%q{VAR}` → VAR's value, `%%` →
    /// `%`); [`DEFAULT_OUTPUT`] if `None`.
    pub output: Option<PathBuf>,
    /// librtrace.so to preload; see [`locate_lib`] for the search when `None`.
    pub lib: Option<PathBuf>,
    /// `RTRACE_BUFFER_RECORDS` for the child, if given.
    pub buffer_records: Option<u64>,
    /// `RTRACE_FLUSH_MS` for the child, if given.
    pub flush_ms: Option<u64>,
    /// What to record (`RTRACE_GPU_ACTIVITY`, `RTRACE_NVTX`, `RTRACE_DISABLE` for the child).
    pub traced: Traced,
    /// Replace an earlier run's file at a trace's name (`RTRACE_FORCE_OVERWRITE`).
    pub force_overwrite: bool,
    /// More `RTRACE_*` settings for the child (capture control), as (variable, value).
    pub env: Vec<(String, String)>,
    /// The program and its arguments.
    pub command: Vec<OsString>,
    /// The program's stdout and stderr go to /dev/null.
    pub quiet: bool,
    /// GPU metrics over time: samples a second, by a sampler process beside the program.
    pub gpu_metrics: Option<u64>,
}

/// A finished recording.
#[derive(Debug)]
pub struct Recording {
    /// The child's pid.
    pub pid: u32,
    /// How the child ended.
    pub status: ExitStatus,
    /// The traces the run made (their header carries its token): the child's own first,
    /// then those of the processes it forked or ran, in the order they started; why
    /// tracing turned itself off where it did.
    pub found: Found,
    /// Why `rtrace record` could not make its status directory (then it cannot say why
    /// tracing turned itself off).
    pub status_error: Option<String>,
    /// Why GPU metrics were not sampled, or not to the program's end (`--gpu-metrics`).
    pub sampler_error: Option<String>,
}

/// Why a recording could not be made.
#[derive(Debug)]
pub enum RecordError {
    /// Nothing was run: librtrace.so not found, a bad option, ... (exit 2).
    Setup(String),
    /// The program could not be started (exit 127).
    Spawn { program: OsString, error: io::Error },
    /// Waiting for the program failed (exit 2).
    Wait(io::Error),
    /// Application replay: a run's ranges differ from the first run's (exit 2).
    Diverged(String),
}

impl RecordError {
    /// The exit code `rtrace record` uses for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            // As `env` and `timeout` do: 127 when the program is not there, 126 when it is
            // but cannot be run (a directory, no execute permission, not an executable).
            RecordError::Spawn { error, .. } if error.kind() == std::io::ErrorKind::NotFound => 127,
            RecordError::Spawn { .. } => 126,
            RecordError::Setup(_) | RecordError::Wait(_) | RecordError::Diverged(_) => 2,
        }
    }
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::Setup(why) | RecordError::Diverged(why) => f.write_str(why),
            RecordError::Spawn { program, error } => write!(
                f,
                "cannot run {}: {}",
                Path::new(program).display(),
                io_message(error)
            ),
            RecordError::Wait(e) => write!(f, "waiting for the program: {}", io_message(e)),
        }
    }
}

impl std::error::Error for RecordError {}

/// Finds librtrace.so: `explicit` (from `--lib`), else `$RTRACE_LIB`, else
/// `librtrace.so` next to the running executable (for a test binary in
/// `target/<profile>/deps/`, also in its parent). The result is absolute.
pub fn locate_lib(explicit: Option<&Path>) -> Result<PathBuf, RecordError> {
    let from_env = std::env::var_os(env::LIB).filter(|v| !v.is_empty());
    let (lib, origin) = match (explicit, from_env) {
        (Some(p), _) => (p.to_path_buf(), "--lib"),
        (None, Some(p)) => (PathBuf::from(p), env::LIB),
        (None, None) => {
            let exe = std::env::current_exe().map_err(|e| {
                RecordError::Setup(format!(
                    "cannot find {LIB_NAME}: where is the rtrace executable? {}",
                    io_message(&e)
                ))
            })?;
            let dir = exe.parent().unwrap_or(Path::new("/"));
            let mut candidates = vec![dir.join(LIB_NAME)];
            if dir.file_name() == Some(OsStr::new("deps")) {
                if let Some(parent) = dir.parent() {
                    candidates.push(parent.join(LIB_NAME));
                }
            }
            let found = candidates
                .into_iter()
                .find(|c| c.is_file())
                .ok_or_else(|| {
                    RecordError::Setup(format!(
                        "cannot find {LIB_NAME} next to the rtrace executable (in {}): \
                     build it (cargo build -p rtrace-inject), or give --lib PATH or RTRACE_LIB",
                        dir.display()
                    ))
                })?;
            (found, BESIDE_RTRACE)
        }
    };
    let abs = std::fs::canonicalize(&lib).map_err(|e| {
        RecordError::Setup(format!("{origin} {}: {}", lib.display(), io_message(&e)))
    })?;
    if !abs.is_file() {
        return Err(RecordError::Setup(format!(
            "{origin} {}: not a file",
            lib.display()
        )));
    }
    // The one beside rtrace is its own build's; another is checked (reading it takes a few ms).
    if origin != BESIDE_RTRACE && !is_rtrace_library(&abs) {
        return Err(RecordError::Setup(format!(
            "{origin} {}: not {LIB_NAME} (an ELF shared library that exports {MARKER_SYMBOL})",
            lib.display()
        )));
    }
    if abs
        .as_os_str()
        .as_bytes()
        .iter()
        .any(|b| b" :\t\n".contains(b))
    {
        return Err(RecordError::Setup(format!(
            "{origin} {}: LD_PRELOAD cannot hold a path with a space or ':'; \
             copy or link the library elsewhere",
            abs.display()
        )));
    }
    Ok(abs)
}

/// Where [`locate_lib`] found the library when neither `--lib` nor `RTRACE_LIB` named one.
const BESIDE_RTRACE: &str = "next to rtrace";

/// A symbol only librtrace.so exports (its C ABI, `inject/rtrace.h`): by its name in the file,
/// a library given with `--lib` is taken for librtrace.so.
const MARKER_SYMBOL: &str = "rtrace_push_external_correlation";

/// Whether `path` is an ELF file holding [`MARKER_SYMBOL`]'s name (a library without it
/// would be preloaded, record nothing, and leave the run without a word of why).
fn is_rtrace_library(path: &Path) -> bool {
    let Ok(bytes) = std::fs::read(path) else {
        return false;
    };
    let marker = format!("{MARKER_SYMBOL}\0");
    bytes.starts_with(b"\x7fELF") && bytes.windows(marker.len()).any(|w| w == marker.as_bytes())
}

/// `lib` in front of an existing `LD_PRELOAD` list.
fn preload_value(lib: &Path, existing: Option<OsString>) -> OsString {
    let mut v = lib.as_os_str().to_os_string();
    if let Some(old) = existing.filter(|o| !o.is_empty()) {
        v.push(":");
        v.push(old);
    }
    v
}

/// Runs the program under librtrace.so, waits for it (passing on the signals
/// other processes send to rtrace: SIGINT, SIGTERM, SIGUSR1, ...), and
/// finds the traces it wrote. Blocks those signals in the calling thread:
/// meant for the `rtrace` command's main thread.
pub fn record(opts: &RecordOptions) -> Result<Recording, RecordError> {
    let Some(program) = opts.command.first() else {
        return Err(RecordError::Setup("no program to record".into()));
    };
    let lib = locate_lib(opts.lib.as_deref())?;
    let cwd = std::env::current_dir()
        .map_err(|e| RecordError::Setup(format!("the current directory: {}", io_message(&e))))?;
    let default = PathBuf::from(DEFAULT_OUTPUT);
    let pattern = OutputPattern::new(opts.output.as_ref().unwrap_or(&default), &cwd);
    let host = rtrace_format::hostname().into_bytes();
    let raw = pattern.as_os_string();
    let per_process_dir = Path::new(&raw)
        .parent()
        .is_some_and(|d| pattern::varies(d.as_os_str().as_bytes()));
    if let Some(dir) = pattern.expand(0, &host).parent() {
        if !per_process_dir {
            let d = dir.display();
            let why = match std::fs::metadata(dir) {
                Err(_) => Some(format!("the directory {d} does not exist")),
                Ok(m) if !m.is_dir() => Some(format!("{d} is not a directory")),
                Ok(_) if !crate::sys::writable_dir(dir) => {
                    Some(format!("the directory {d} is not writable"))
                }
                Ok(_) => None,
            };
            if let Some(why) = why {
                return Err(RecordError::Setup(format!("--output: {why}")));
            }
        }
    }
    let name_holds_pid = pattern::holds_pid(raw.as_bytes());
    let fixed = pattern.expand(0, &host);
    if raw.as_bytes().ends_with(b"/") || (!name_holds_pid && fixed.is_dir()) {
        return Err(RecordError::Setup(format!(
            "--output: {} is a directory; give a file name pattern, e.g. {}",
            fixed.display(),
            fixed.join(DEFAULT_OUTPUT).display()
        )));
    }
    let session = Session::new()
        .map_err(|e| RecordError::Setup(format!("drawing a session token: {}", io_message(&e))))?;

    let mut cmd = Command::new(program);
    cmd.args(&opts.command[1..])
        .env(
            "LD_PRELOAD",
            preload_value(&lib, std::env::var_os("LD_PRELOAD")),
        )
        .env(env::OUTPUT, pattern.as_os_string())
        .envs(session.env());
    // NVTX in the program loads the library this names (librtrace.so itself), unless the
    // caller points it at another tool.
    let nvtx = opts.traced.nvtx && !opts.traced.nothing;
    if nvtx && std::env::var_os(env::NVTX_INJECTION64_PATH).is_none() {
        cmd.env(env::NVTX_INJECTION64_PATH, &lib);
    }
    cmd.envs(opts.traced.env());
    if opts.force_overwrite {
        cmd.env(env::FORCE_OVERWRITE, "1");
    }
    if let Some(n) = opts.buffer_records {
        cmd.env(env::BUFFER_RECORDS, n.to_string());
    }
    if let Some(ms) = opts.flush_ms {
        cmd.env(env::FLUSH_MS, ms.to_string());
    }
    for (k, v) in &opts.env {
        cmd.env(k, v);
    }
    if opts.quiet {
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
    }

    // GPU metrics: the sampler first, so that it samples the program's first kernels.
    let (sampler, mut sampler_error) = match opts.gpu_metrics {
        Some(hz) => sampler::start(hz, &pattern.as_os_string(), &session, opts.force_overwrite)
            .map_err(RecordError::Setup)?,
        None => (None, None),
    };
    let sigs = signals::Signals::block()
        .map_err(|e| RecordError::Setup(format!("blocking signals: {}", io_message(&e))))?;
    sigs.unblock_in_child(&mut cmd);
    // A standard descriptor closed when rtrace started is closed in the program too (its
    // output and error are set to /dev/null by --quiet, not inherited).
    crate::sys::stdio::close_in_child(&mut cmd, if opts.quiet { 0b110 } else { 0 });
    let mut child = cmd.spawn().map_err(|error| RecordError::Spawn {
        program: program.clone(),
        error,
    })?;
    let pid = child.id();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(RecordError::Wait)? {
            break status;
        }
        match sigs.wait(250).map_err(RecordError::Wait)? {
            signals::Event::Forward(sig) => signals::forward(pid, sig),
            signals::Event::Child | signals::Event::Shared(_) => {}
        }
    };
    if let Some(s) = sampler {
        sampler_error = sampler_error.or(s.stop());
    }
    Ok(Recording {
        pid,
        status,
        found: wait_for_outliving(&sigs, &session, &pattern, &host, pid),
        status_error: session.status_error.clone(),
        sampler_error,
    })
}

/// The run's traces once the traced processes the program left running (a child it did not
/// wait for) have ended, as nsys waits for them: looked at every 100 ms. A signal stops the
/// wait (one sent to rtrace goes on to them), a second later; those still running then are
/// [`Found::running`], their traces being written still.
fn wait_for_outliving(
    sigs: &signals::Signals,
    session: &Session,
    pattern: &OutputPattern,
    host: &[u8],
    main: u32,
) -> Found {
    let mut said = false;
    let mut stop_at = None;
    loop {
        let mut found = session.found(pattern, host, main);
        found.note_running(main);
        let now = std::time::Instant::now();
        if found.running.is_empty() || stop_at.is_some_and(|t| now >= t) {
            return found;
        }
        if !said {
            let pids: Vec<String> = found.running.iter().map(u32::to_string).collect();
            // Said while it waits: the summary comes only after.
            eprintln!(
                "rtrace: waiting for the traced processes the program left running (pid {}) to \
                 finish their traces; a signal (Ctrl-C) stops the wait",
                pids.join(", ")
            );
            said = true;
        }
        let grace = now + std::time::Duration::from_secs(1);
        match sigs.wait(100) {
            Ok(signals::Event::Forward(sig)) => {
                for &p in &found.running {
                    signals::forward(p, sig);
                }
                stop_at.get_or_insert(grace);
            }
            // The terminal's Ctrl-C (the processes got it too); not its resizes.
            Ok(signals::Event::Shared(sig)) if sig != libc::SIGWINCH && sig != libc::SIGURG => {
                stop_at.get_or_insert(grace);
            }
            Ok(signals::Event::Shared(_)) => {}
            Ok(signals::Event::Child) => {}
            Err(_) => return found,
        }
    }
}

/// `rtrace record`'s exit code for a child that ended with `status`, and the
/// line to print when a signal killed it.
pub fn exit_code(program: &OsStr, status: ExitStatus) -> (u8, Option<String>) {
    if let Some(code) = status.code() {
        return (code as u8, None);
    }
    match status.signal() {
        Some(sig) => (
            128u8.wrapping_add(sig as u8),
            Some(format!(
                "{} was killed by signal {sig} ({}){}",
                Path::new(program).display(),
                signal_name(sig),
                if status.core_dumped() {
                    ", core dumped"
                } else {
                    ""
                }
            )),
        ),
        None => (1, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preload_is_prepended() {
        let lib = Path::new("/x/librtrace.so");
        assert_eq!(preload_value(lib, None), "/x/librtrace.so");
        assert_eq!(preload_value(lib, Some("".into())), "/x/librtrace.so");
        assert_eq!(
            preload_value(lib, Some("/y/libz.so".into())),
            "/x/librtrace.so:/y/libz.so"
        );
    }

    #[test]
    fn exit_codes() {
        let sh = OsStr::new("sh");
        assert_eq!(exit_code(sh, ExitStatus::from_raw(3 << 8)), (3, None));
        let (code, msg) = exit_code(sh, ExitStatus::from_raw(9));
        assert_eq!(code, 137);
        assert_eq!(msg.unwrap(), "sh was killed by signal 9 (SIGKILL)");
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(0), "unknown signal");
    }

    /// A shared library that preloads without a word and passes for librtrace.so: a copy of
    /// this process's libc with [`MARKER_SYMBOL`]'s name after its end (ld.so reads what its
    /// headers name, not the bytes past them).
    fn some_shared_lib() -> PathBuf {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let line = maps
            .lines()
            .find(|l| l.contains("/libc.so") || l.contains("/libc-"))
            .expect("libc in /proc/self/maps");
        let mut bytes = std::fs::read(line.split_whitespace().last().unwrap()).unwrap();
        bytes.extend_from_slice(format!("{MARKER_SYMBOL}\0").as_bytes());
        let lib = std::env::temp_dir().join(format!("rtrace-record-lib-{}.so", std::process::id()));
        // Written whole, then renamed into place: tests running at once each see a whole file.
        let tmp = lib.with_extension(format!("{:?}.tmp", std::thread::current().id()));
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, &lib).unwrap();
        lib
    }

    #[test]
    fn a_library_that_is_not_librtrace_is_refused() {
        let libc = std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .lines()
            .find(|l| l.contains("/libc.so") || l.contains("/libc-"))
            .map(|l| PathBuf::from(l.split_whitespace().last().unwrap()))
            .unwrap();
        for lib in [libc, PathBuf::from("/bin/sh"), PathBuf::from("/etc/passwd")] {
            let e = locate_lib(Some(&lib)).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert_eq!(
                e.to_string(),
                format!(
                    "--lib {}: not librtrace.so (an ELF shared library that exports \
                     rtrace_push_external_correlation)",
                    lib.display()
                )
            );
        }
        assert!(locate_lib(Some(&some_shared_lib())).is_ok());
    }

    #[test]
    fn record_runs_the_program_and_lists_only_its_traces() {
        let dir = std::env::temp_dir().join(format!("rtrace-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // The program writes files that match the pattern but are not traces of this run,
        // says in the status directory why tracing turned itself off, and checks the
        // environment it was given.
        let script = r#"
            test "$RTRACE_BUFFER_RECORDS" = 1024 || exit 9
            test "$RTRACE_FLUSH_MS" = 5 || exit 9
            test "$RTRACE_GPU_ACTIVITY,$RTRACE_NVTX,$RTRACE_FORCE_OVERWRITE" = 0,0,1 || exit 9
            test -z "${NVTX_INJECTION64_PATH+set}" || exit 9
            case "$LD_PRELOAD" in /*) ;; *) exit 9;; esac
            test ${#RTRACE_SESSION} = 32 || exit 9
            test "$(stat -c %a "$RTRACE_STATUS_DIR")" = 700 || exit 9
            echo "$RTRACE_STATUS_DIR" > "$(echo "$RTRACE_OUTPUT" | sed "s/%p/0/")"
            f=$(echo "$RTRACE_OUTPUT" | sed "s/%p/$$/")
            echo main > "$f"
            echo child > "$(echo "$RTRACE_OUTPUT" | sed "s/%p/1$$/")"
            printf 'cannot create x: Permission denied\n' > "$RTRACE_STATUS_DIR/off-$$"
            exit 3
        "#;
        let opts = RecordOptions {
            output: Some(dir.join("t-%p.bin")),
            lib: Some(some_shared_lib()),
            buffer_records: Some(1024),
            flush_ms: Some(5),
            traced: Traced::parse("cuda").unwrap(),
            force_overwrite: true,
            env: vec![("RTRACE_DELAY".into(), "0".into())],
            command: vec!["sh".into(), "-c".into(), script.into()],
            quiet: false,
            gpu_metrics: None,
        };
        let rec = record(&opts).unwrap();
        assert_eq!(exit_code(OsStr::new("sh"), rec.status), (3, None));
        assert_eq!(rec.found.traces, vec![]);
        assert_eq!(
            rec.found.off,
            vec![(rec.pid, "cannot create x: Permission denied".to_string())]
        );
        assert_eq!(rec.status_error, None);
        // The status directory is gone.
        let status = std::fs::read_to_string(dir.join("t-0.bin")).unwrap();
        assert!(!Path::new(status.trim_end()).exists(), "{status}");

        let opts = RecordOptions {
            command: vec!["/nonexistent/program".into()],
            ..opts
        };
        let e = record(&opts).unwrap_err();
        assert_eq!(e.exit_code(), 127);
        assert_eq!(
            e.to_string(),
            "cannot run /nonexistent/program: No such file or directory"
        );

        let not_runnable = RecordOptions {
            command: vec![dir.clone().into_os_string()],
            ..opts.clone()
        };
        let e = record(&not_runnable).unwrap_err();
        assert_eq!(
            (e.exit_code(), e.to_string()),
            (
                126,
                format!("cannot run {}: Permission denied", dir.display())
            )
        );

        let as_dir = RecordOptions {
            output: Some(dir.clone()),
            ..opts.clone()
        };
        let e = record(&as_dir).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            format!(
                "--output: {} is a directory; give a file name pattern, e.g. {}",
                dir.display(),
                dir.join("rtrace-%p.bin").display()
            )
        );

        std::fs::remove_dir_all(&dir).unwrap();
        let e = record(&opts).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            format!("--output: the directory {} does not exist", dir.display())
        );
        // A file where the directory should be.
        std::fs::write(&dir, b"a file").unwrap();
        let e = record(&opts).unwrap_err();
        assert_eq!(
            (e.exit_code(), e.to_string()),
            (2, format!("--output: {} is not a directory", dir.display()))
        );
        std::fs::remove_file(&dir).unwrap();
    }

    #[test]
    fn missing_lib_is_a_setup_error() {
        let e = locate_lib(Some(Path::new("/nonexistent/librtrace.so"))).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "--lib /nonexistent/librtrace.so: No such file or directory"
        );
    }
}
