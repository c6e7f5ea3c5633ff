//! Running a call that may crash the process in a forked child: CUPTI's host API reads a
//! counter data image without checking it, and dies of SIGSEGV on one that is not an image
//! (measured with CUPTI 13.0.85: 4 KiB of arbitrary bytes). A trace file can hold anything,
//! so a report must say "not counter data" instead of crashing.
#![allow(unsafe_code)]

use std::io::Read;
use std::os::fd::FromRawFd;

/// Runs `f` in a forked child and returns the bytes it produced, or why the child gave none
/// (the signal that killed it, its exit status, or the failed system call).
///
/// The child runs only `f` (with no core file size, so a crash leaves no core) and `_exit`s:
/// no destructors, no buffered output flushed twice.
/// The caller holds whatever locks `f` needs (the child has only the calling thread; a lock
/// another thread held at the fork stays held in the child).
pub fn in_child(f: impl FnOnce() -> Vec<u8>) -> Result<Vec<u8>, String> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    let (read_fd, write_fd) = (fds[0], fds[1]);
    // SAFETY: fork; the child below only runs `f`, writes and exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        let e = std::io::Error::last_os_error();
        // SAFETY: the pipe's two descriptors, ours, closed once.
        unsafe {
            libc::close(read_fd);
            libc::close(write_fd);
        }
        return Err(format!("fork: {e}"));
    }
    if pid == 0 {
        // No core file for a crash this module exists to contain.
        let none = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: setrlimit reads the struct it is given; only the child's limit changes.
        unsafe { libc::setrlimit(libc::RLIMIT_CORE, &none) };
        let out = f();
        let mut done = 0;
        while done < out.len() {
            // SAFETY: writing from a live buffer to our pipe's write end.
            let n = unsafe { libc::write(write_fd, out[done..].as_ptr().cast(), out.len() - done) };
            if n <= 0 {
                // SAFETY: ends the child at once, as after fork it must.
                unsafe { libc::_exit(2) };
            }
            done += n as usize;
        }
        // SAFETY: as above.
        unsafe { libc::_exit(0) };
    }
    // SAFETY: the write end is ours and closed once; the read end becomes the File's.
    unsafe { libc::close(write_fd) };
    // SAFETY: `read_fd` is an open descriptor owned by nothing else.
    let mut file = unsafe { std::fs::File::from_raw_fd(read_fd) };
    let mut out = Vec::new();
    let read = file.read_to_end(&mut out);
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("waitpid: {}", std::io::Error::last_os_error()));
        }
    }
    if libc::WIFSIGNALED(status) {
        return Err(format!("crashed (signal {})", libc::WTERMSIG(status)));
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(format!("failed (status {status})"));
    }
    read.map_err(|e| format!("reading its answer: {e}"))?;
    Ok(out)
}
