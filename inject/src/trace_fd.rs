//! The trace file's descriptor ([`TraceFd`]), guarded against the program: kept above the
//! descriptors programs use, and checked to name the trace file before every use. A program
//! may close descriptors it did not open (a daemon closing all but 0-2, `closefrom`,
//! `os.closerange`) and then open its own files, which the kernel numbers from the lowest
//! free descriptor: a write through the old number would land in the program's file. When the
//! number no longer names the trace file, the file is opened again by its path (and a notice
//! says so); where that cannot be, nothing is written and the trace ends as a failed write
//! does (`EBADF`), the program's files untouched.

use crate::sys;
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStringExt;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

/// The least descriptor number the trace file is moved to (or half the process's limit, where
/// that is lower).
const FLOOR: u64 = 512;

/// The least descriptor number for the trace file.
fn floor() -> i32 {
    FLOOR.min(sys::open_files_limit() / 2).max(3) as i32
}

/// The trace file's descriptor, its identity and its path.
pub struct TraceFd {
    fd: AtomicI32,
    /// Device and inode of the trace file.
    file: (u64, u64),
    /// Its absolute path, to open it again (made once: opening it again allocates nothing).
    path: CString,
    /// How many times the descriptor was found taken and the file opened again.
    reopened: AtomicU32,
}

impl TraceFd {
    /// Takes over `fd`, the trace file just created at `path` (a relative path is taken from
    /// the current directory now): moves it above the descriptors programs use. On error `fd`
    /// is closed.
    pub fn new(fd: i32, path: &[u8]) -> io::Result<TraceFd> {
        let mut abs = match (path.first(), std::env::current_dir()) {
            (Some(b'/'), _) | (_, Err(_)) => Vec::new(),
            (_, Ok(dir)) => {
                let mut dir = dir.into_os_string().into_vec();
                dir.push(b'/');
                dir
            }
        };
        abs.extend_from_slice(path);
        let fd = sys::move_up(fd, floor());
        let made = CString::new(abs)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
            .and_then(|path| Ok((path, sys::identity(fd)?)));
        match made {
            Ok((path, file)) => Ok(TraceFd {
                fd: AtomicI32::new(fd),
                file,
                path,
                reopened: AtomicU32::new(0),
            }),
            Err(e) => {
                sys::close(fd);
                Err(e)
            }
        }
    }

    /// The descriptor, once checked to name the trace file (one `fstat`): opened again by the
    /// file's path when the program closed or replaced it. `EBADF` when the path no longer
    /// leads to the trace file.
    pub fn get(&self) -> io::Result<i32> {
        let fd = self.fd.load(Ordering::Acquire);
        if sys::identity(fd).is_ok_and(|id| id == self.file) {
            return Ok(fd);
        }
        self.reopen(fd)
    }

    /// How many times the file was opened again.
    pub fn reopened(&self) -> u32 {
        self.reopened.load(Ordering::Relaxed)
    }

    /// The descriptor `seen` is not the trace file's any more (the program's now, or closed:
    /// never closed here). Cold path.
    #[cold]
    fn reopen(&self, seen: i32) -> io::Result<i32> {
        let lost = || io::Error::from_raw_os_error(libc::EBADF);
        let fd = sys::open_existing_rw(&self.path).map_err(|_| lost())?;
        if !sys::identity(fd).is_ok_and(|id| id == self.file) {
            sys::close(fd);
            return Err(lost());
        }
        let fd = sys::move_up(fd, floor());
        match self
            .fd
            .compare_exchange(seen, fd, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                self.reopened.fetch_add(1, Ordering::Relaxed);
                Ok(fd)
            }
            // Another thread opened it again first: its descriptor it is.
            Err(theirs) => {
                sys::close(fd);
                Ok(theirs)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::IntoRawFd;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("rtrace-tracefd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    fn created(path: &std::path::Path) -> TraceFd {
        let fd = sys::create_private(path.as_os_str()).unwrap();
        TraceFd::new(fd, path.as_os_str().as_bytes()).unwrap()
    }

    #[test]
    fn the_descriptor_is_moved_up_and_checked() {
        let path = scratch("moved.bin");
        let _ = std::fs::remove_file(&path);
        let t = created(&path);
        let fd = t.get().unwrap();
        assert!(
            fd >= 3 && (fd >= 512 || sys::open_files_limit() < 1024),
            "{fd}"
        );
        sys::pwrite_all(fd, b"trace", 0).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"trace");
        assert_eq!(t.reopened(), 0);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_descriptor_the_program_took_is_left_to_it() {
        let path = scratch("taken.bin");
        let theirs = scratch("theirs.txt");
        let _ = std::fs::remove_file(&path);
        std::fs::write(&theirs, b"hello\n").unwrap();
        let t = created(&path);
        let ours = t.get().unwrap();
        // The program closes the descriptor and opens its own file at its number (unless
        // another test's file took it first: either way it is not the trace's now).
        sys::close(ours);
        let other = std::fs::File::open(&theirs).unwrap().into_raw_fd();
        let other = sys::move_up(other, ours);
        let fd = t.get().unwrap();
        assert_ne!(fd, ours);
        sys::pwrite_all(fd, b"trace", 0).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"trace");
        assert_eq!(std::fs::read(&theirs).unwrap(), b"hello\n");
        assert_eq!(t.reopened(), 1);
        // The program's descriptor stays open, its own.
        assert!(sys::identity(other).is_ok());
        sys::close(other);
        // Closed, and the path gone: nothing to write to. (The file itself lives on, as the
        // rings' mappings keep it in a traced process: its inode is not reused.)
        let kept = std::fs::File::open(&path).unwrap();
        sys::close(fd);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(t.get().unwrap_err().raw_os_error(), Some(libc::EBADF));
        // Another file at the path is not the trace.
        std::fs::write(&path, b"other").unwrap();
        assert_eq!(t.get().unwrap_err().raw_os_error(), Some(libc::EBADF));
        assert_eq!(std::fs::read(&path).unwrap(), b"other");
        std::fs::remove_file(&path).unwrap();
        std::fs::remove_file(&theirs).unwrap();
        drop(kept);
    }
}
