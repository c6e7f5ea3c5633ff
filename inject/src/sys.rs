//! The system calls rtrace's core makes, and the one memory primitive its async-signal-safe
//! paths need ([`Leaked`]): the only `unsafe` outside the FFI modules (`generated/`,
//! `interpose`, `procaddr`, `generic`, `got`, `driver`, `devices`, `cupti/`, `nvtx`) and the ring.
//!
//! Every function here is safe to call; each `unsafe` block says why it holds. Apart from
//! [`thread_name`] and [`create_private`] (slow paths: a thread's first record, the trace's
//! creation), none allocates, so the others may run in a forked child or a signal handler.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicPtr, Ordering};

/// The calling thread's kernel id.
pub fn gettid() -> u64 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u64 }
}

/// The calling process's id (read from the kernel, not cached: right in a forked child).
pub fn getpid() -> u32 {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() as u32 }
}

/// The parent process's id.
pub fn getppid() -> u32 {
    // SAFETY: getppid has no preconditions.
    unsafe { libc::getppid() as u32 }
}

/// The calling thread's name (its `comm`); empty if it cannot be read.
pub fn thread_name() -> String {
    let mut buf = [0u8; 32];
    // SAFETY: PR_GET_NAME writes at most 16 bytes into `buf`.
    let rc = unsafe { libc::prctl(libc::PR_GET_NAME, buf.as_mut_ptr()) };
    if rc != 0 {
        return String::new();
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// The calling thread's `errno`.
#[inline]
pub fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() }
}

/// Sets the calling thread's `errno`.
#[inline]
pub fn set_errno(value: i32) {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = value };
}

/// The calling thread's signal mask before [`block_all_signals`] changed it.
pub struct SignalMask(libc::sigset_t);

/// Blocks every signal on the calling thread; returns the mask to [`restore_signals`].
pub fn block_all_signals() -> SignalMask {
    // SAFETY: zeroed sigsets are valid out-buffers; sigfillset fills `all`, and
    // pthread_sigmask only changes the calling thread's mask.
    unsafe {
        let mut old: libc::sigset_t = std::mem::zeroed();
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        SignalMask(old)
    }
}

/// Restores a mask saved by [`block_all_signals`].
pub fn restore_signals(mask: SignalMask) {
    // SAFETY: `mask` holds a mask pthread_sigmask returned.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &mask.0, std::ptr::null_mut());
    }
}

/// Ends the process now with `status` (`exit_group`, as `_exit` does): no atexit handlers,
/// no destructors.
pub fn exit_group(status: i32) -> ! {
    // SAFETY: exit_group ends the process; it does not return.
    unsafe {
        libc::syscall(libc::SYS_exit_group, status);
    }
    #[allow(clippy::empty_loop)]
    loop {}
}

/// Unblocks `sig` on the calling thread and raises it (after its disposition was set).
pub fn unblock_and_raise(sig: i32) {
    // SAFETY: a zeroed sigset is valid; these calls only touch the calling thread's mask and
    // send it `sig`.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
}

/// Writes `message` to stderr and aborts the process. No allocation.
pub fn die(message: &[u8]) -> ! {
    write_stderr(message);
    // SAFETY: abort has no preconditions; it does not return.
    unsafe { libc::abort() }
}

/// Writes `buf` to stderr with one raw `write(2)`, ignoring failures (diagnostics).
pub fn write_stderr(buf: &[u8]) {
    // SAFETY: writing an initialised buffer to fd 2; failures are ignored on purpose.
    unsafe {
        libc::write(2, buf.as_ptr().cast(), buf.len());
    }
}

/// Creates the file `path`, which must not exist, for reading and writing (the rings map it),
/// with mode 0600 (less the umask), closed on `exec`: `O_CREAT|O_EXCL|O_NOFOLLOW`, so that
/// nothing already at `path` (a file, a link, a FIFO, a device, a directory) is opened,
/// followed or changed: that is `EEXIST`.
pub fn create_private(path: &OsStr) -> io::Result<i32> {
    let c =
        CString::new(path.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated path.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600 as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Opens the existing file `path` for reading and writing, never through a link, closed on
/// `exec` (the trace file again, after the program closed its descriptor). No allocation;
/// `errno` is left as it was.
pub fn open_existing_rw(path: &std::ffi::CStr) -> io::Result<i32> {
    let saved = errno();
    // SAFETY: `path` is a valid NUL-terminated path; no file is created.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    let r = if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(fd)
    };
    set_errno(saved);
    r
}

/// The device and inode of the file open at `fd` (`EBADF`: nothing is open there). `errno` is
/// left as it was.
pub fn identity(fd: i32) -> io::Result<(u64, u64)> {
    let saved = errno();
    // SAFETY: fstat fills a zeroed stat for any descriptor number; a closed one is EBADF.
    let r = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) == 0 {
            Ok((st.st_dev, st.st_ino))
        } else {
            Err(io::Error::last_os_error())
        }
    };
    set_errno(saved);
    r
}

/// Moves `fd` to the lowest free descriptor at or above `floor` (kept closed on `exec`) and
/// closes `fd`; where that cannot be (no free descriptor there, a limit below `floor`), `fd`
/// stays as it is. Returns the descriptor to use. `errno` is left as it was.
pub fn move_up(fd: i32, floor: i32) -> i32 {
    if fd >= floor {
        return fd;
    }
    let saved = errno();
    // SAFETY: F_DUPFD_CLOEXEC duplicates a descriptor this module's caller owns; the old one
    // is closed only once the copy exists.
    let moved = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, floor) };
    let r = if moved >= 0 {
        // SAFETY: closing the caller's own descriptor, now duplicated.
        unsafe { libc::close(fd) };
        moved
    } else {
        fd
    };
    set_errno(saved);
    r
}

/// The process's soft limit on `resource` (`RLIM_INFINITY`: none); None where it cannot be
/// read. `errno` is left as it was.
fn soft_limit(resource: libc::__rlimit_resource_t) -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let saved = errno();
    // SAFETY: getrlimit fills the struct it is given.
    let rc = unsafe { libc::getrlimit(resource, &mut lim) };
    set_errno(saved);
    (rc == 0).then_some(lim.rlim_cur)
}

/// The soft limit on open descriptors (`RLIMIT_NOFILE`; 1024 where it cannot be read).
pub fn open_files_limit() -> u64 {
    soft_limit(libc::RLIMIT_NOFILE).unwrap_or(1024)
}

/// This process's effective user id.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Opens `path` for reading if it is a regular file of this process's user: never through a
/// link (`O_NOFOLLOW`), never waiting on a FIFO (`O_NONBLOCK`), closed on `exec`.
pub fn open_own_regular(path: &OsStr) -> io::Result<std::fs::File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() || meta.uid() != effective_uid() {
        return Err(io::Error::from(io::ErrorKind::PermissionDenied));
    }
    Ok(file)
}

/// Closes `fd`, ignoring failures.
pub fn close(fd: i32) {
    // SAFETY: closing a descriptor this module opened and its owner gives up.
    unsafe { libc::close(fd) };
}

/// `EFBIG` where a file reaching `end` bytes would pass the process's file size limit
/// (`RLIMIT_FSIZE`, as `ulimit -f` sets it): the kernel would refuse the write and send the
/// writing thread `SIGXFSZ`, whose default action ends the process. rtrace's files stop
/// growing there instead, as they would with `SIGXFSZ` ignored. `errno` is left as it was.
pub fn within_size_limit(end: u64) -> io::Result<()> {
    match file_size_limit() {
        Some(most) if end > most => Err(io::Error::from_raw_os_error(libc::EFBIG)),
        _ => Ok(()),
    }
}

/// The process's file size limit in bytes (`RLIMIT_FSIZE`); None: no limit.
pub fn file_size_limit() -> Option<u64> {
    soft_limit(libc::RLIMIT_FSIZE).filter(|&most| most != libc::RLIM_INFINITY)
}

/// Writes all of `buf` to `fd` at file offset `at`, retrying on EINTR and short writes; never
/// past the file size limit ([`within_size_limit`]).
pub fn pwrite_all(fd: i32, mut buf: &[u8], mut at: u64) -> io::Result<()> {
    within_size_limit(at + buf.len() as u64)?;
    while !buf.is_empty() {
        // SAFETY: writing from a valid slice.
        let n = unsafe { libc::pwrite(fd, buf.as_ptr().cast(), buf.len(), at as libc::off_t) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::WriteZero));
        }
        buf = &buf[n as usize..];
        at += n as u64;
    }
    Ok(())
}

/// Copies the NUL-terminated string at `addr` in this process's memory into `out` (without
/// its NUL), reading through the kernel so that an address that is not mapped fails instead
/// of faulting. False when it cannot be read or has no NUL within `out`'s capacity.
pub fn read_own_string(addr: u64, out: &mut Vec<u8>) -> bool {
    out.clear();
    let saved = errno();
    let page = page_size() as u64;
    let mut at = addr;
    let mut chunk = [0u8; 4096];
    let found = loop {
        if out.len() >= out.capacity() {
            break false;
        }
        let n = ((page - at % page) as usize).min(chunk.len());
        let local = libc::iovec {
            iov_base: chunk.as_mut_ptr() as *mut libc::c_void,
            iov_len: n,
        };
        let remote = libc::iovec {
            iov_base: at as *mut libc::c_void,
            iov_len: n,
        };
        // SAFETY: reads this process's memory through the kernel into `chunk` (n bytes); an
        // unmapped address gives an error, not a fault.
        let got = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
        if got != n as isize {
            break false;
        }
        match chunk[..n].iter().position(|&b| b == 0) {
            Some(end) => {
                out.extend_from_slice(&chunk[..end]);
                break true;
            }
            None => out.extend_from_slice(&chunk[..n]),
        }
        at += n as u64;
    };
    set_errno(saved);
    found
}

/// Gives back the file's blocks for `len` bytes at `at` (they read as zeros), keeping its size.
pub fn punch_hole(fd: i32, at: u64, len: u64) -> io::Result<()> {
    let saved = errno();
    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    // SAFETY: fallocate on an open descriptor; no memory is passed.
    let rc = unsafe { libc::fallocate(fd, mode, at as libc::off_t, len as libc::off_t) };
    let r = if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    };
    set_errno(saved);
    r
}

/// Gives `fd` disk blocks for `len` bytes at `at` (extending the file), so that pages of a
/// shared mapping there can be written without the kernel running out of space (which would
/// kill the writer with SIGBUS). Filesystems without `fallocate` get zeros written instead.
/// Never past the file size limit ([`within_size_limit`]). `errno` is left as it was.
pub fn allocate(fd: i32, at: u64, len: u64) -> io::Result<()> {
    within_size_limit(at + len)?;
    let saved = errno();
    // SAFETY: fallocate on an open descriptor with a plain mode; no memory is passed.
    let rc = unsafe { libc::fallocate(fd, 0, at as libc::off_t, len as libc::off_t) };
    let r = if rc == 0 {
        Ok(())
    } else {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
            let zeros = [0u8; 4096];
            let mut done = 0;
            let mut r = Ok(());
            while done < len && r.is_ok() {
                let n = (len - done).min(zeros.len() as u64) as usize;
                r = pwrite_all(fd, &zeros[..n], at + done);
                done += n as u64;
            }
            r
        } else {
            Err(e)
        }
    };
    set_errno(saved);
    r
}

/// Maps `len` bytes of `fd` at `at` (a multiple of the page size) shared, read-write: stores
/// land in the file. Never unmapped.
pub fn map_file(fd: i32, at: u64, len: usize) -> io::Result<*mut u8> {
    // SAFETY: a fresh mapping at an address the kernel picks; nothing else is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            at as libc::off_t,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}

/// Faults in, writable, the `len` bytes at `at` of a shared mapping (one system call for many
/// pages, instead of a fault on the first store to each); failures are ignored (kernels before
/// 5.14 lack it: the pages then fault in as they are used). `errno` is left as it was.
pub fn populate(at: *mut u8, len: usize) {
    let saved = errno();
    // SAFETY: `at..at + len` lies in a mapping of ours; MADV_POPULATE_WRITE only faults its
    // pages in, changing no content.
    unsafe { libc::madvise(at.cast(), len, libc::MADV_POPULATE_WRITE) };
    set_errno(saved);
}

/// Maps `len` bytes of zeroed private memory (pages appear as they are touched). Never
/// unmapped.
pub fn map_anonymous(len: usize) -> io::Result<*mut u8> {
    // SAFETY: a fresh anonymous mapping; nothing else is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}

/// Makes `fd`'s file at least `len` bytes long (the bytes added read as zeros and take no
/// disk blocks); never past the file size limit ([`within_size_limit`]).
pub fn extend_to(fd: i32, len: u64) -> io::Result<()> {
    within_size_limit(len)?;
    // SAFETY: fstat fills a zeroed stat; ftruncate only grows the file here.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return Err(io::Error::last_os_error());
        }
        if (st.st_size as u64) < len && libc::ftruncate(fd, len as libc::off_t) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Cuts `fd`'s file to `len` bytes (what a failed reservation had added past it). `errno` is
/// left as it was.
pub fn truncate_to(fd: i32, len: u64) -> io::Result<()> {
    let saved = errno();
    // SAFETY: ftruncate on a descriptor of ours; no memory is passed.
    let rc = unsafe { libc::ftruncate(fd, len as libc::off_t) };
    let r = if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    };
    set_errno(saved);
    r
}

/// The system's page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// `clock`'s time in ns (`clock_gettime`, served by the vDSO: no system call in practice).
#[inline(always)]
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; clock_gettime cannot fail for the clocks rtrace reads.
    unsafe {
        libc::clock_gettime(clock, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's user and system CPU time so far, in µs (`getrusage(RUSAGE_THREAD)`).
pub fn thread_times_us() -> (u64, u64) {
    // SAFETY: all-zero is a valid `rusage`.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid out-pointer; on failure it stays zero.
    unsafe {
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
    }
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (us(ru.ru_utime), us(ru.ru_stime))
}

/// The CPU's time-stamp counter.
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86-64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// A value leaked for the rest of the process, published through an atomic pointer, so that
/// a signal handler or a forked child can read or drop the reference without a lock or an
/// allocation. Values are never freed: a reference stays valid after [`Leaked::forget`].
pub struct Leaked<T>(AtomicPtr<T>);

impl<T> Leaked<T> {
    pub const fn new() -> Leaked<T> {
        Leaked(AtomicPtr::new(std::ptr::null_mut()))
    }

    /// The published value, if any.
    pub fn get(&self) -> Option<&'static T> {
        let p = self.0.load(Ordering::Acquire);
        // SAFETY: published values are leaked boxes, never freed.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// The published value, or `make()` leaked and published (the first of racing callers wins).
    pub fn get_or_publish(&self, make: impl FnOnce() -> T) -> &'static T {
        if let Some(v) = self.get() {
            return v;
        }
        let fresh = Box::into_raw(Box::new(make()));
        match self.0.compare_exchange(
            std::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: just leaked, never freed.
            Ok(_) => unsafe { &*fresh },
            Err(existing) => {
                // SAFETY: `fresh` was never shared.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: published values are leaked boxes, never freed.
                unsafe { &*existing }
            }
        }
    }

    /// Unpublishes the value (without freeing it); the next [`Leaked::get_or_publish`] makes
    /// a new one. No allocation.
    pub fn forget(&self) {
        self.0.store(std::ptr::null_mut(), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaked_publishes_once_and_forgets() {
        static L: Leaked<u32> = Leaked::new();
        assert!(L.get().is_none());
        let a = L.get_or_publish(|| 1);
        assert_eq!(*L.get_or_publish(|| 2), 1);
        L.forget();
        assert!(L.get().is_none());
        assert_eq!(*L.get_or_publish(|| 3), 3);
        assert_eq!(*a, 1);
    }

    #[test]
    fn errno_round_trips() {
        set_errno(42);
        assert_eq!(errno(), 42);
    }
}
