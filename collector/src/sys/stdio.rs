//! The standard descriptors (0, 1, 2) that were closed when rtrace started, closed again in the
//! program it runs.
//!
//! Rust's runtime opens `/dev/null` on any of them that is closed before `main` runs. A program
//! that `rtrace record` started would then find it open, where without rtrace it starts with it
//! closed: its writes to a closed standard output would succeed instead of failing with
//! `EBADF`. A function in `.init_array`, which the loader runs before Rust's runtime, notes
//! which were closed; the child closes them again before it runs the program.

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicU8, Ordering};

/// Bit `fd` set: descriptor `fd` (0, 1 or 2) was closed when the process started.
static CLOSED_AT_START: AtomicU8 = AtomicU8::new(0);

extern "C" fn note_closed() {
    let mut bits = 0;
    for fd in 0..3 {
        // SAFETY: F_GETFD only reads the descriptor's flags; -1 (EBADF): it is not open.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
            bits |= 1 << fd;
        }
    }
    CLOSED_AT_START.store(bits, Ordering::Relaxed);
}

/// Run by the loader before `main` (and before Rust's runtime opens `/dev/null`).
#[used]
#[link_section = ".init_array"]
static NOTE_CLOSED: extern "C" fn() = note_closed;

/// Makes `cmd`'s child close the standard descriptors that were closed when rtrace started,
/// except those in `kept` (bit `fd`: a descriptor the command sets itself).
pub(crate) fn close_in_child(cmd: &mut Command, kept: u8) {
    let closed = CLOSED_AT_START.load(Ordering::Relaxed) & !kept;
    if closed == 0 {
        return;
    }
    // SAFETY: the hook runs in the forked child before exec and only calls close, which is
    // async-signal-safe, on descriptors 0 to 2.
    unsafe {
        cmd.pre_exec(move || {
            for fd in 0..3 {
                if closed & (1 << fd) != 0 {
                    libc::close(fd);
                }
            }
            Ok(())
        });
    }
}
