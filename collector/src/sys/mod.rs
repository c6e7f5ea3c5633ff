//! The system calls the command line makes itself: glibc's malloc thresholds, the
//! terminal's width, and (`signals`) waiting for a traced program while passing on the signals
//! meant for it. The crate's unsafe code lives here and nowhere else.
#![allow(unsafe_code)]

pub mod demangle;
pub mod isolate;
pub mod signals;
pub mod stdio;

/// Whether this process may create files in the directory `dir` (write and search
/// permission, as `access` says for the real user; false for a path it cannot name).
pub fn writable_dir(dir: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated path that outlives the call; access only reads it.
    unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

/// Keeps large freed blocks in the heap, for the next chunk, instead of giving them back.
///
/// The readers take a trace a chunk at a time: each chunk's payload and its decoded records
/// are a few megabytes, allocated and freed again at once. glibc maps blocks that large with
/// their own `mmap` and gives them back with `munmap` (and trims the heap's free top), so every
/// chunk faulted in and zeroed fresh pages: a third of `rtrace report`'s time on a 10M-record
/// trace went to the kernel. Such blocks are kept in the heap instead, to be used again: that
/// report took 1.34-1.42 s instead of 1.80-2.01 s (system time 0.11-0.14 s instead of
/// 0.53-0.73 s), its peak memory about the same, as what is kept is what was in use anyway
/// (docs/benchmarks.md). Called first, while the process has one thread.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets two of glibc's malloc parameters, before any other thread
    // exists; a value it refuses leaves the default.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

/// The width of the terminal standard output is, if it is one (at least 40).
pub fn terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ fills a winsize through a valid pointer; the descriptor is stdout's.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    (rc == 0 && size.ws_col > 0).then(|| usize::from(size.ws_col).max(40))
}

/// The effective user id of this process.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// A clock's time (`CLOCK_MONOTONIC`, the traces' clock, or `CLOCK_REALTIME`), ns.
pub fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes through a valid pointer; an unknown clock leaves it zero.
    unsafe { libc::clock_gettime(id, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Waits up to `ms` for standard input to be readable or closed; whether it is (a read will
/// not block: at its end it returns nothing).
pub fn stdin_ready(ms: i32) -> bool {
    let mut fd = libc::pollfd {
        fd: libc::STDIN_FILENO,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll on one valid pollfd; an interrupted wait returns -1, read as not ready.
    unsafe { libc::poll(&mut fd, 1, ms) > 0 }
}

/// Ends the process at once with `code`: no exit handlers, no destructors (the sampler's way
/// out: CUPTI's own teardown of PM sampling can hang or crash in CUDA 13.0).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit has no preconditions and does not return.
    unsafe { libc::_exit(code) }
}
