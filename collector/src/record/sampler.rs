//! `rtrace record --gpu-metrics`: the GPU metrics sampler (`rtrace gpu-sampler`,
//! [`crate::sampler`]) run beside the program. It is started first and waited for until it
//! says sampling runs (so the program's first kernels are sampled), in a process group of its
//! own (a Ctrl-C at the terminal goes to the program, which `rtrace record` waits for, not to
//! the sampler); when the program has ended, its standard input is closed, upon which it
//! decodes its last samples and ends its trace; it is waited for a bounded time.

use super::session::Session;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the sampler may take to start sampling (the driver and CUPTI initialized, every
/// device set up).
const START_WAIT: Duration = Duration::from_secs(60);
/// How long it may take to end once the program has ended (the last decode).
const END_WAIT: Duration = Duration::from_secs(30);

/// A running sampler.
pub struct Sampler {
    child: Child,
    stdin: Option<ChildStdin>,
}

/// Starts the sampler at `hz`, its trace named by `pattern` (the program's output pattern,
/// [`rtrace_format::gpu_sampler_pattern`] of it), in the run `session`. `Ok(Some)` once it samples; `Ok(None)` and why not when it could not sample
/// (the run goes on without GPU metrics); `Err` when it could not be started at all.
pub fn start(
    hz: u64,
    pattern: &OsStr,
    session: &Session,
    force_overwrite: bool,
) -> Result<(Option<Sampler>, Option<String>), String> {
    let exe = std::env::current_exe().map_err(|e| {
        format!("--gpu-metrics: cannot find the rtrace program to run its sampler ({e})")
    })?;
    let mut cmd = Command::new(exe);
    cmd.arg("gpu-sampler")
        .arg("--hz")
        .arg(hz.to_string())
        .arg("--output")
        .arg(OsStr::from_bytes(&rtrace_format::gpu_sampler_pattern(
            pattern.as_bytes(),
        )))
        .envs(session.env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .process_group(0);
    if force_overwrite {
        cmd.arg("--force-overwrite");
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("--gpu-metrics: cannot start the sampler: {e}"))?;
    let stdin = child.stdin.take();
    let said = first_line(&mut child, START_WAIT);
    match said.as_deref().map(str::trim_end) {
        Some("ready") => Ok((Some(Sampler { child, stdin }), None)),
        Some(line) => {
            let why = line.strip_prefix("off: ").unwrap_or(line).to_string();
            drop(stdin);
            let _ = child.wait();
            Ok((None, Some(why)))
        }
        None => {
            let _ = child.kill();
            let _ = child.wait();
            Ok((
                None,
                Some(format!(
                    "the sampler did not start sampling within {} s (stopped)",
                    START_WAIT.as_secs()
                )),
            ))
        }
    }
}

/// The first line the child writes on its standard output within `wait`, read on a thread of
/// its own (a sampler stuck in the driver must not hold `rtrace record` up); `None` when it
/// wrote none in time.
fn first_line(child: &mut Child, wait: Duration) -> Option<String> {
    let out = child.stdout.take()?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(out).read_line(&mut line);
        let _ = tx.send(line);
    });
    rx.recv_timeout(wait).ok().filter(|l| !l.is_empty())
}

impl Sampler {
    /// The program has ended: the sampler decodes its last samples and ends its trace. Why
    /// it did not end well, if it did not.
    pub fn stop(mut self) -> Option<String> {
        drop(self.stdin.take());
        let deadline = Instant::now() + END_WAIT;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) if status.success() => return None,
                Ok(Some(status)) => return Some(format!("the sampler ended with {status}")),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(None) | Err(_) => break,
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        Some(format!(
            "the sampler did not end within {} s of the program (stopped: its last samples are \
             lost)",
            END_WAIT.as_secs()
        ))
    }
}
