//! Waiting for the traced child while passing on the signals meant for it.
//!
//! `rtrace record` blocks the signals whose default action ends a process and that
//! another process may send it (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2,
//! SIGALRM, the real-time signals and the rest of [`forwarded`]), and SIGCHLD, before
//! it starts the child, and takes them with `sigtimedwait`. The child would
//! inherit the blocked mask (std's `Command` keeps it), so a `pre_exec` hook
//! puts the original mask back in the child before it runs the program. rtrace therefore never dies before the child, and:
//!
//! - a signal the terminal sends (Ctrl-C) reaches the whole foreground process
//!   group, the child included, so it is *not* sent again;
//! - a signal another process sends to rtrace itself (`kill`, `timeout`) is
//!   forwarded to the child.
//!
//! The signals stay blocked after the child ends: rtrace is about to exit and
//! must still report the trace.
#![allow(unsafe_code)]

use std::io;
use std::mem::MaybeUninit;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Signals passed on to the child when another process sends them to rtrace: every signal
/// that would end rtrace by default and that a process can catch and is sent by another one
/// (a batch system's warning before its time limit is SIGUSR1 or SIGTERM; `timeout -s`), and
/// SIGWINCH and SIGURG, which the program may wait for. Not the job-control signals (a stop
/// of rtrace is not one of the program), nor those the kernel sends for a fault of rtrace's own.
fn forwarded() -> impl Iterator<Item = libc::c_int> {
    const NAMED: [libc::c_int; 16] = [
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGTERM,
        libc::SIGSTKFLT,
        libc::SIGURG,
        libc::SIGXCPU,
        libc::SIGXFSZ,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGWINCH,
        libc::SIGIO,
        libc::SIGPWR,
    ];
    NAMED.into_iter().chain(libc::SIGRTMIN()..=libc::SIGRTMAX())
}

/// The blocked set, for [`Signals::wait`].
pub(crate) struct Signals {
    set: libc::sigset_t,
    /// The mask before [`Signals::block`], for the child.
    old: libc::sigset_t,
}

/// What [`Signals::wait`] saw.
pub(crate) enum Event {
    /// A child changed state (or nothing happened before the timeout): look at it.
    Child,
    /// A signal to pass on to the child.
    Forward(libc::c_int),
    /// A signal the child got too (from the terminal or the kernel).
    Shared(libc::c_int),
}

impl Signals {
    /// Blocks [`forwarded`] signals and SIGCHLD in the calling thread. Meant for the
    /// main thread of the single-threaded `rtrace` command.
    pub(crate) fn block() -> io::Result<Signals> {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        let mut old = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: sigemptyset initialises the set it is given; sigaddset and
        // pthread_sigmask read an initialised set; pthread_sigmask fills `old`
        // when it succeeds.
        unsafe {
            if libc::sigemptyset(set.as_mut_ptr()) != 0 {
                return Err(io::Error::last_os_error());
            }
            let mut set = set.assume_init();
            for sig in forwarded().chain([libc::SIGCHLD]) {
                libc::sigaddset(&mut set, sig);
            }
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, old.as_mut_ptr());
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            Ok(Signals {
                set,
                old: old.assume_init(),
            })
        }
    }

    /// Makes `cmd`'s child start with the signal mask rtrace had before
    /// [`Signals::block`].
    pub(crate) fn unblock_in_child(&self, cmd: &mut Command) {
        let old = self.old;
        // SAFETY: the hook runs in the forked child before exec and only calls
        // pthread_sigmask, which is async-signal-safe, on a set it owns.
        unsafe {
            cmd.pre_exec(move || {
                let rc = libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
                if rc != 0 {
                    return Err(io::Error::from_raw_os_error(rc));
                }
                Ok(())
            });
        }
    }

    /// Waits up to `timeout_ms` for one of the blocked signals. The timeout is
    /// a safety net: the caller polls the child after every return.
    pub(crate) fn wait(&self, timeout_ms: u64) -> io::Result<Event> {
        let timeout = libc::timespec {
            tv_sec: (timeout_ms / 1000) as libc::time_t,
            tv_nsec: ((timeout_ms % 1000) * 1_000_000) as libc::c_long,
        };
        let mut info = MaybeUninit::<libc::siginfo_t>::zeroed();
        // SAFETY: `self.set` is an initialised signal set; `info` and `timeout`
        // are valid for writing / reading for the duration of the call.
        let sig = unsafe { libc::sigtimedwait(&self.set, info.as_mut_ptr(), &timeout) };
        if sig < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(Event::Child),
                _ => Err(e),
            };
        }
        if sig == libc::SIGCHLD {
            return Ok(Event::Child);
        }
        // SAFETY: sigtimedwait returned a signal, so it filled `info`.
        let code = unsafe { info.assume_init() }.si_code;
        // si_code <= 0 (SI_USER, SI_QUEUE, SI_TKILL): sent by a process with
        // kill(2) and friends. Terminal signals come with SI_KERNEL.
        Ok(if code <= 0 {
            Event::Forward(sig)
        } else {
            Event::Shared(sig)
        })
    }
}

/// Sends `sig` to the process `pid` (the child, not yet reaped, so its pid
/// cannot have been reused). A failure (it just exited) is ignored.
pub(crate) fn forward(pid: u32, sig: libc::c_int) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    if pid > 0 {
        // SAFETY: kill has no memory-safety preconditions; pid > 0 names one process.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// Whether process `pid` is running (a zombie, ended but not yet reaped, is not) and started
/// by `monotonic_ns` (`CLOCK_MONOTONIC`) and a second: a process that took the pid after an
/// earlier one ended is not that one. (The kernel counts a start from boot, suspended time
/// included: after a suspend a process may look newer than it is, and is then not waited for.)
pub(crate) fn running_since(pid: u32, monotonic_ns: u64) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 sends nothing; it only checks that `p` names a process.
    let exists = p > 0
        && (unsafe { libc::kill(p, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM));
    if !exists {
        return false;
    }
    // After the command's closing parenthesis: the state first, the start (in clock ticks)
    // 20th. Unreadable: taken as running, as `kill` said.
    let Some(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok() else {
        return true;
    };
    let fields: Vec<&str> = stat
        .rsplit_once(") ")
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    if fields.first() == Some(&"Z") {
        return false;
    }
    // SAFETY: sysconf only reads a system constant.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    match (
        fields.get(19).and_then(|f| f.parse::<u64>().ok()),
        u64::try_from(tick),
    ) {
        (Some(t), Ok(hz)) if hz > 0 => {
            t.saturating_mul(1_000_000_000) / hz <= monotonic_ns.saturating_add(1_000_000_000)
        }
        _ => true,
    }
}

/// `SIGKILL`-style name of signal `sig`, or `"unknown signal"`.
pub fn signal_name(sig: i32) -> &'static str {
    const NAMES: [&str; 32] = [
        "",
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    match usize::try_from(sig) {
        Ok(i @ 1..=31) => NAMES[i],
        _ if (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&sig) => "a real-time signal",
        _ => "unknown signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn monotonic_ns() -> u64 {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes the timespec it is given.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    }

    #[test]
    fn a_process_is_running_since_its_start_not_before() {
        let me = std::process::id();
        assert!(running_since(me, monotonic_ns()));
        // This process started well after boot: not the holder of a trace begun then.
        assert!(!running_since(me, 0));
        // No such process.
        assert!(!running_since(u32::MAX, monotonic_ns()));
    }
}
