//! The files librtrace.so creates: exclusively ([`sys::create_private`]: never through a link,
//! never over anything already there), beside a name that is taken
//! ([`rtrace_format::collision_path`]) unless told to replace an earlier run's file
//! ([`rtrace_format::env::FORCE_OVERWRITE`]); and the status entries it leaves for `rtrace
//! record` in `RTRACE_STATUS_DIR` (the traces it created, why tracing turned itself off, the
//! module images it stores for the run).

use crate::sys;
use rtrace_format::{collision_path, MAX_COLLISION_SUFFIX};
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;

/// A file [`create_beside`] created.
pub struct Created {
    /// Open for reading and writing.
    pub fd: i32,
    pub path: Vec<u8>,
    /// The name asked for was taken: the file is beside it.
    pub beside: bool,
    /// An earlier run's file at the name was removed first ([`create_beside`]'s `replace`).
    pub replaced: bool,
}

fn shown(path: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(path)
}

/// `e` as a person reads it: `Permission denied`, without ` (os error 13)`.
pub fn plain(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// With `replace` (this run's session token, not empty): removes the file at `name` when it is
/// a regular file of this user (never a link, a FIFO, a device, a directory or another user's
/// file) and not a trace of this run (whose header carries the token: a parent's trace, or an
/// earlier image's after `exec`). Whether it removed one.
fn remove_earlier(name: &[u8], replace: Option<&str>) -> bool {
    let Some(session) = replace.filter(|s| !s.is_empty()) else {
        return false;
    };
    let path = OsStr::from_bytes(name);
    let Ok(file) = sys::open_own_regular(path) else {
        return false;
    };
    let Ok(meta) = file.metadata() else {
        return false;
    };
    let ours = rtrace_format::TraceReader::new(io::BufReader::new(&file))
        .is_ok_and(|r| r.header().session == session);
    // The name must still be the file looked at.
    let same = std::fs::symlink_metadata(path)
        .is_ok_and(|now| (now.dev(), now.ino()) == (meta.dev(), meta.ino()));
    !ours && same && std::fs::remove_file(path).is_ok()
}

/// Creates `name` or, where something is there already, the first of its collision names
/// (`.1` to `.`[`MAX_COLLISION_SUFFIX`]) where nothing is. Nothing found at a name is opened or
/// changed, except that with `replace` (the run's session token) an earlier run's regular file
/// at a name is removed and the name taken ([`remove_earlier`]): a second run with the same
/// names replaces the first run's files one by one. A directory at `name` is an error (the
/// pattern names a directory, not a file), as is any failure other than a name being taken;
/// the error says which path and why.
pub fn create_beside(name: &[u8], replace: Option<&str>) -> Result<Created, String> {
    for n in 0..=MAX_COLLISION_SUFFIX {
        let path = if n == 0 {
            name.to_vec()
        } else {
            collision_path(name, n)
        };
        let mut replaced = false;
        loop {
            match sys::create_private(OsStr::from_bytes(&path)) {
                Ok(fd) => {
                    return Ok(Created {
                        fd,
                        path,
                        beside: n > 0,
                        replaced,
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let is_dir = || {
                        std::fs::symlink_metadata(OsStr::from_bytes(name)).is_ok_and(|m| m.is_dir())
                    };
                    if n == 0 && is_dir() {
                        return Err(format!(
                            "cannot create {}: it is a directory (the output names a file)",
                            shown(name)
                        ));
                    }
                    // Once per name: what is there after a removal stays.
                    if replaced || !remove_earlier(&path, replace) {
                        break;
                    }
                    replaced = true;
                }
                Err(e) => return Err(format!("cannot create {}: {}", shown(&path), plain(&e))),
            }
        }
    }
    Err(format!(
        "cannot create {}: it and the {MAX_COLLISION_SUFFIX} names beside it are taken",
        shown(name)
    ))
}

/// Leaves `text` in the status directory `dir`, in a new file `<prefix><pid>` (beside it when
/// an earlier image of this process left one). Failures are ignored: the status is a courtesy
/// to `rtrace record`, never a reason to disturb the program.
pub fn leave_status(dir: &OsStr, prefix: &str, pid: u32, text: &[u8]) {
    let mut name = dir.as_bytes().to_vec();
    name.extend_from_slice(format!("/{prefix}{pid}").as_bytes());
    if let Ok(created) = create_beside(&name, None) {
        let _ = sys::pwrite_all(created.fd, text, 0);
        sys::close(created.fd);
    }
}

/// Claims `<prefix><key in 16 hex digits>` in the status directory `dir` for this process, by
/// creating it exclusively (empty). Whether this process is the first to claim it; when the
/// entry cannot be created for another reason than being there, the claim is taken (the caller
/// then keeps for itself what it would have left to another process).
pub fn claim_in_status(dir: &OsStr, prefix: &str, key: u64) -> bool {
    let mut name = dir.as_bytes().to_vec();
    name.extend_from_slice(format!("/{prefix}{key:016x}").as_bytes());
    match sys::create_private(OsStr::from_bytes(&name)) {
        Ok(fd) => {
            sys::close(fd);
            true
        }
        Err(e) => e.kind() != io::ErrorKind::AlreadyExists,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_claim_of_a_key_wins() {
        let dir = std::env::temp_dir().join(format!("rtrace-claim-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let d = dir.as_os_str();
        assert!(claim_in_status(d, "image-", 0xab));
        assert!(!claim_in_status(d, "image-", 0xab));
        assert!(claim_in_status(d, "image-", 0xac));
        assert!(dir.join("image-00000000000000ab").is_file());
        // A directory that is gone: the claim is taken (the caller keeps the image).
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(claim_in_status(d, "image-", 0xab));
    }
}
