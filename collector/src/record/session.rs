//! How `rtrace record` knows exactly which traces a run made, and why tracing turned itself
//! off: a random token (`RTRACE_SESSION`) that librtrace.so writes into each trace's header,
//! and a private status directory (`RTRACE_STATUS_DIR`, mode 0700, removed afterwards) where
//! librtrace.so names each trace it created and says why tracing turned itself off in a
//! process. A trace is the run's only when it is a regular file of this user whose header
//! carries the token: a file that merely matches the output pattern, or changed during the run,
//! is not.

use super::pattern::OutputPattern;
use crate::model::Trace;
use crate::read::inputs::{read_header, LoadError};
use crate::read::{RecordSink, Records};
use rtrace_format::{
    collision_base, env, Chunk, NvtxKind, ProcessHeader, CAPTURE_NOTICE, STATUS_OFF, STATUS_TRACE,
};
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// One `rtrace record` run's token and status directory.
#[derive(Debug)]
pub struct Session {
    token: String,
    /// `None` when it could not be created (the reason is in `status_error`).
    status_dir: Option<PathBuf>,
    /// Why there is no status directory.
    pub status_error: Option<String>,
}

/// A trace the run made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceFile {
    pub path: PathBuf,
    /// The process that wrote it.
    pub pid: u32,
    /// The name the output pattern gave it, when that was taken and the trace went beside it
    /// ([`rtrace_format::collision_path`]).
    pub beside: Option<PathBuf>,
}

/// What a run left: its traces (the program's own first, then in the order they were
/// started) and why tracing turned itself off where it did.
#[derive(Debug, Default)]
pub struct Found {
    pub traces: Vec<TraceFile>,
    /// Traces librtrace.so said it created whose header cannot be read: (path, why).
    pub unreadable: Vec<(PathBuf, String)>,
    /// (pid, reason) for each process image where tracing turned itself off.
    pub off: Vec<(u32, String)>,
    /// Processes of [`Found::traces`] other than the program's own still running when the
    /// run ended (they outlived the program, and a signal stopped the wait for them).
    pub running: Vec<u32>,
}

/// 16 random bytes from the kernel, in hex.
fn random_hex() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

impl Found {
    /// Sets [`Found::running`]: the processes of the traces, other than `main`, still running
    /// (the process that wrote each, not one that took its pid since).
    pub fn note_running(&mut self, main: u32) {
        let mut running: Vec<u32> = self
            .traces
            .iter()
            .filter(|t| t.pid != main)
            .filter_map(|t| {
                let h = header_of(&t.path).ok()?;
                crate::sys::signals::running_since(t.pid, h.start.monotonic_ns).then_some(t.pid)
            })
            .collect();
        running.sort_unstable();
        running.dedup();
        self.running = running;
    }
}

impl Session {
    /// A new token, and its status directory in the temporary directory (mode 0700, created
    /// new). Fails only when no token can be drawn; without a status directory, traces are
    /// still found by their token.
    pub fn new() -> io::Result<Session> {
        let token = random_hex()?;
        // A name of its own: the token is not shown to whoever lists the directory.
        let dir = std::env::temp_dir().join(format!("rtrace-status-{}", random_hex()?));
        let (status_dir, status_error) = match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => (Some(dir), None),
            Err(e) => (
                None,
                Some(format!(
                    "cannot create {}: {}",
                    dir.display(),
                    crate::read::inputs::io_message(&e)
                )),
            ),
        };
        Ok(Session {
            token,
            status_dir,
            status_error,
        })
    }

    /// The token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The variables that hand the session to librtrace.so.
    pub fn env(&self) -> Vec<(&'static str, OsString)> {
        let mut v = vec![(env::SESSION, OsString::from(&self.token))];
        if let Some(dir) = &self.status_dir {
            v.push((env::STATUS_DIR, dir.clone().into_os_string()));
        }
        v
    }

    /// The traces of this session, from the files in `pattern`'s directory and those the
    /// status directory names, each kept only when its header carries the token; `main` is
    /// the program's pid, whose traces come first.
    pub fn found(&self, pattern: &OutputPattern, host: &[u8], main: u32) -> Found {
        let mut found = Found::default();
        let mut paths = pattern.candidates(host);
        let mut named = Vec::new();
        if let Some(dir) = &self.status_dir {
            for (prefix, pid, text) in status_entries(dir) {
                if prefix == STATUS_TRACE {
                    let path = PathBuf::from(OsString::from_vec(text));
                    named.push(path.clone());
                    paths.push(path);
                } else {
                    let reason = String::from_utf8_lossy(&text).trim_end().to_string();
                    found.off.push((pid, reason));
                }
            }
        }
        paths.sort();
        paths.dedup();
        let mut ours: Vec<(ProcessHeader, TraceFile)> = Vec::new();
        for path in paths {
            match header_of(&path) {
                Ok(h) if h.session == self.token => {
                    let beside = (pattern.expand(h.pid, h.hostname.as_bytes()) != path)
                        .then(|| collision_base(path.as_os_str().as_bytes()))
                        .flatten()
                        .map(|(base, _)| PathBuf::from(OsString::from_vec(base)));
                    let pid = h.pid;
                    ours.push((h, TraceFile { path, pid, beside }));
                }
                // Named by this run's library, now another run's (--force-overwrite there).
                Ok(_) if named.contains(&path) => found.unreadable.push((
                    path,
                    "replaced by another run's trace while this one ran".into(),
                )),
                Ok(_) => {}
                Err(e) if named.contains(&path) => found.unreadable.push((path, e.to_string())),
                Err(_) => {}
            }
        }
        ours.sort_by_key(|(h, t)| (h.pid != main, h.start.monotonic_ns, t.path.clone()));
        found.traces = ours.into_iter().map(|(_, t)| t).collect();
        found.off.sort();
        found
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(dir) = &self.status_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The status directory's entries: (prefix, pid, content), for the names librtrace.so makes
/// (`trace-<pid>`, `off-<pid>`, each perhaps with a collision suffix).
fn status_entries(dir: &Path) -> Vec<(&'static str, u32, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.as_bytes();
        let base = collision_base(name).map_or(name.to_vec(), |(base, _)| base);
        for prefix in [STATUS_TRACE, STATUS_OFF] {
            let Some(pid) = base.strip_prefix(prefix.as_bytes()) else {
                continue;
            };
            let Some(pid) = std::str::from_utf8(pid).ok().and_then(|p| p.parse().ok()) else {
                continue;
            };
            let mut text = Vec::new();
            if open_regular(&entry.path())
                .and_then(|mut f| f.read_to_end(&mut text))
                .is_ok()
            {
                while text.last() == Some(&b'\n') {
                    text.pop();
                }
                out.push((prefix, pid, text));
            }
        }
    }
    out
}

/// Opens `path` for reading only if it is a regular file of this user: never through a link,
/// and never waiting on a FIFO.
fn open_regular(path: &Path) -> io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        Err(io::Error::other("not a regular file"))
    } else if meta.uid() != crate::sys::effective_uid() {
        Err(io::Error::other("owned by another user"))
    } else {
        Ok(file)
    }
}

/// The header of the trace at `path`.
fn header_of(path: &Path) -> Result<ProcessHeader, LoadError> {
    let file = open_regular(path).map_err(|error| LoadError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    read_header(path, file)
}

/// What one trace holds, as `rtrace record` says it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Contents {
    /// The file's size, for people ([`crate::text::file_size`]).
    pub size: String,
    /// API records.
    pub api: u64,
    /// Kernel records (graphs' kernels included).
    pub kernels: u64,
    /// Memory copies, peer-to-peer ones included.
    pub copies: u64,
    pub memsets: u64,
    /// Allocations and frees.
    pub memory: u64,
    /// Host synchronizations.
    pub syncs: u64,
    /// NVTX ranges (pushed or started).
    pub nvtx_ranges: u64,
    /// NVTX marks.
    pub nvtx_marks: u64,
    /// API records lost because a buffer was full ([`Trace::dropped`]).
    pub dropped: u64,
    /// What librtrace.so said of GPU activity: the rest of its `GPU activity on` notice, or
    /// `Err` with the reason of its `GPU activity off` one; `None` when it said neither (GPU
    /// activity was not asked for, or never started: the driver never initialised).
    pub gpu_activity: Option<Result<String, String>>,
    /// What librtrace.so said of capture control (what gated recording, what it left out),
    /// each notice without its `capture: ` prefix.
    pub capture: Vec<String>,
    /// GPU work launched that CUPTI had not timed when the process ended ([`Trace::untimed`]).
    pub untimed: u64,
    /// What librtrace.so said of PC sampling that was not "on": stall reasons it does not
    /// know, why it is off.
    pub pc_sampling: Vec<String>,
    /// Damage that ended the read ([`Trace::damage`]).
    pub damage: Option<String>,
    /// How tracing ended where writing the trace failed ([`Trace::write_failure`]).
    pub write_failure: Option<String>,
    /// GPU metrics: the devices sampled and the samples, and the sampler's notices on them
    /// (why a device was not sampled).
    pub gpu_metrics: (u64, u64, Vec<String>),
    /// The trace is the GPU metrics sampler's, not a traced process's.
    pub sampler: bool,
}

impl Contents {
    /// GPU activity records of every kind.
    pub fn gpu(&self) -> u64 {
        self.kernels + self.copies + self.memsets + self.memory + self.syncs
    }
}

/// Counts the records of a trace as they are read.
struct Count(Contents);

impl RecordSink for Count {
    fn records(&mut self, _trace: &mut Trace, _chunk: &Chunk, records: Records) {
        let c = &mut self.0;
        match records {
            Records::Api(v) => c.api += v.len() as u64,
            Records::Nvtx(v) => {
                for e in v.iter() {
                    match e.kind {
                        NvtxKind::Push | NvtxKind::Start => c.nvtx_ranges += 1,
                        NvtxKind::Mark => c.nvtx_marks += 1,
                        _ => {}
                    }
                }
            }
            Records::Kernels(v) => c.kernels += v.len() as u64,
            Records::Memcpys(v) => c.copies += v.len() as u64,
            Records::PeerCopies(v) => c.copies += v.len() as u64,
            Records::Memsets(v) => c.memsets += v.len() as u64,
            Records::Memory(v) => c.memory += v.len() as u64,
            Records::Syncs(v) => c.syncs += v.len() as u64,
        }
    }
}

/// Reads the trace at `path` through the reading layer and counts what it holds.
pub fn contents(path: &Path) -> Result<Contents, LoadError> {
    let mut count = Count(Contents::default());
    let trace = crate::read::trace::read_light(path, &mut count)?;
    let mut c = count.0;
    c.gpu_activity = trace.gpu_activity();
    c.sampler = trace.header.is_gpu_sampler();
    c.write_failure = trace.write_failure().map(|w| w.into_owned());
    c.damage = trace.damage.clone();
    c.dropped = trace.dropped;
    c.gpu_metrics = (
        trace.gpu_metric_setups.len() as u64,
        trace
            .gpu_metric_samples
            .iter()
            .map(|b| b.times.len() as u64)
            .sum(),
        trace
            .notices
            .iter()
            .filter(|n| n.message.starts_with(rtrace_format::GPU_METRICS_NOTICE))
            .filter(|n| n.message.contains(" off"))
            .map(|n| n.message.clone())
            .collect(),
    );
    c.untimed = trace.untimed.len() as u64;
    c.pc_sampling = trace.pc_sampling_notes().map(String::from).collect();
    c.capture = trace
        .notices
        .iter()
        .filter_map(|n| n.message.strip_prefix(CAPTURE_NOTICE)?.strip_prefix(": "))
        .map(String::from)
        .collect();
    c.size = std::fs::metadata(path)
        .map(|m| crate::text::file_size(&m))
        .map_err(|error| LoadError::Io {
            path: path.to_path_buf(),
            error,
        })?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtrace_format::{encode_file_header, ClockAnchor};

    fn trace(path: &Path, pid: u32, session: &str, start: u64) {
        let h = ProcessHeader {
            pid,
            hostname: "h".into(),
            session: session.into(),
            start: ClockAnchor {
                monotonic_ns: start,
                realtime_ns: 0,
            },
            ..Default::default()
        };
        std::fs::write(path, encode_file_header(&h)).unwrap();
    }

    #[test]
    fn only_traces_with_the_token_are_the_runs() {
        let dir = std::env::temp_dir().join(format!("rtrace-session-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("7")).unwrap();
        let s = Session::new().unwrap();
        assert_eq!(s.token().len(), 32);
        let status = s.status_dir.clone().unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&status).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let env = s.env();
        assert_eq!(env[0], ("RTRACE_SESSION", s.token().into()));
        assert_eq!(env[1], ("RTRACE_STATUS_DIR", status.clone().into()));

        let tok = s.token().to_string();
        trace(&dir.join("t.bin"), 5, &tok, 30);
        trace(&dir.join("t.1.bin"), 6, &tok, 20);
        trace(&dir.join("t.2.bin"), 7, "another run", 10);
        std::fs::write(dir.join("t.3.bin"), b"not a trace").unwrap();
        std::os::unix::fs::symlink(dir.join("t.bin"), dir.join("t.4.bin")).unwrap();
        // A trace outside the pattern's directory, named in the status directory.
        trace(&dir.join("7/t.bin"), 8, &tok, 5);
        std::fs::write(
            status.join("trace-8"),
            format!("{}\n", dir.join("7/t.bin").display()),
        )
        .unwrap();
        std::fs::write(
            status.join("trace-9"),
            format!("{}\n", dir.join("t.4.bin").display()),
        )
        .unwrap();
        std::fs::write(
            status.join("off-9"),
            "cannot create /x: Permission denied\n",
        )
        .unwrap();
        std::fs::write(
            status.join("off-9.1"),
            "writing the trace failed: disk full\n",
        )
        .unwrap();
        std::fs::write(status.join("other"), "x").unwrap();
        // Another user's file with the token (it could be planted where others may write) is
        // not the run's. Only root can make one.
        if crate::sys::effective_uid() == 0 {
            trace(&dir.join("t.5.bin"), 10, &tok, 1);
            std::os::unix::fs::chown(dir.join("t.5.bin"), Some(65534), Some(65534)).unwrap();
        }

        let pattern = OutputPattern::new(Path::new("t.bin"), &dir);
        let found = s.found(&pattern, b"h", 6);
        let t = |name: &str, pid, beside: Option<&str>| TraceFile {
            path: dir.join(name),
            pid,
            beside: beside.map(|b| dir.join(b)),
        };
        assert_eq!(
            found.traces,
            vec![
                t("t.1.bin", 6, Some("t.bin")),
                t("7/t.bin", 8, None),
                t("t.bin", 5, None)
            ]
        );
        assert_eq!(found.unreadable.len(), 1);
        assert_eq!(found.unreadable[0].0, dir.join("t.4.bin"));
        assert_eq!(
            found.off,
            vec![
                (9, "cannot create /x: Permission denied".to_string()),
                (9, "writing the trace failed: disk full".to_string())
            ]
        );
        drop(s);
        assert!(!status.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
