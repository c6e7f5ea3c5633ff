//! Inputs that cannot be read twice: `-` (standard input), a pipe, a FIFO, a character device.
//! The report and the export read a trace file several times, seeking to the chunks each
//! pass needs, so such an input is first copied whole into a temporary file in `TMPDIR` (else
//! `/tmp`), which the passes then read like any trace, as `/proc/self/fd/N`. The copy never
//! has a name: it is made with `O_TMPFILE` (mode 0600), or, where the file system does not
//! support that, created exclusively with mode 0600 and unlinked at once, before anything is
//! copied; so nothing is left behind however rtrace ends. A copy is at most a limit
//! ([`rtrace_format::env::SPOOL_LIMIT`], 4 GiB by default): a larger input is an error that
//! names the limit and how to raise it. Where `/proc` is missing the copy keeps its name
//! (mode 0600) until rtrace is done with it.

use rtrace_format::env::{parse_size, DEFAULT_SPOOL_LIMIT, SPOOL_LIMIT};
use rtrace_format::MAGIC;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// The inputs as the readers take them: each one that cannot be read twice replaced by its
/// copy. The copies last as long as this value.
pub struct Spooled {
    paths: Vec<PathBuf>,
    /// The copies' open files (and, without `/proc`, their names, removed on drop).
    copies: Vec<(File, Option<PathBuf>)>,
    /// One line per copy, for standard error.
    pub notes: Vec<String>,
}

impl Spooled {
    /// The inputs, in the order given.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }
}

impl Drop for Spooled {
    fn drop(&mut self) {
        for (_, name) in &self.copies {
            if let Some(name) = name {
                let _ = std::fs::remove_file(name);
            }
        }
    }
}

/// Whether `path` is an input that cannot be read twice.
fn is_stream(path: &Path) -> bool {
    if path == Path::new("-") {
        return true;
    }
    std::fs::metadata(path).is_ok_and(|m| {
        let t = m.file_type();
        t.is_fifo() || t.is_char_device() || t.is_socket()
    })
}

/// The most bytes a copy may hold: [`SPOOL_LIMIT`] from `value` (the variable's value, if
/// set), else [`DEFAULT_SPOOL_LIMIT`].
pub fn limit_from(value: Option<&str>) -> Result<u64, String> {
    match value {
        None => Ok(DEFAULT_SPOOL_LIMIT),
        Some(v) => parse_size(v).map_err(|e| format!("{SPOOL_LIMIT}: {e}")),
    }
}

/// `n` bytes as [`SPOOL_LIMIT`] takes them: `4G`, `512M`, `1000`.
fn size_words(n: u64) -> String {
    for (shift, unit) in [(40, 'T'), (30, 'G'), (20, 'M'), (10, 'K')] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

/// Copies each input of `paths` that cannot be read twice into a temporary file in `dir`, at
/// most `limit` bytes each; the others are taken as they are. `-` named twice is one input.
pub fn inputs_in(paths: &[PathBuf], dir: &Path, limit: u64) -> Result<Spooled, String> {
    let mut out = Spooled {
        paths: Vec::with_capacity(paths.len()),
        copies: Vec::new(),
        notes: Vec::new(),
    };
    let mut stdin_copy: Option<PathBuf> = None;
    let proc = Path::new("/proc/self/fd").is_dir();
    for path in paths {
        if !is_stream(path) {
            out.paths.push(path.clone());
            continue;
        }
        let stdin = path == Path::new("-");
        if stdin {
            if let Some(copy) = &stdin_copy {
                out.paths.push(copy.clone());
                continue;
            }
        }
        let what = if stdin {
            "standard input".to_string()
        } else {
            path.display().to_string()
        };
        let name = (!proc).then(|| copy_name(dir, out.copies.len()));
        let (copy, bytes) = match copy_into(path, stdin, dir, name.as_deref(), limit) {
            Ok(Some(copied)) => copied,
            Ok(None) => {
                let twice = size_words(limit.saturating_mul(2));
                return Err(format!(
                    "{what}: larger than the limit of {} for a copied input; raise it with \
                     {SPOOL_LIMIT} (e.g. {SPOOL_LIMIT}={twice}) or give the trace as a file",
                    size_words(limit)
                ));
            }
            Err(e) => {
                return Err(format!(
                    "{what}: could not copy it into a temporary file in {} (it is read more \
                     than once; set TMPDIR to a directory with room): {}",
                    dir.display(),
                    crate::read::inputs::io_message(&e)
                ))
            }
        };
        let read_as = match &name {
            None => PathBuf::from(format!("/proc/self/fd/{}", copy.as_raw_fd())),
            Some(name) => name.clone(),
        };
        out.notes.push(format!(
            "{what}: copied into a temporary file in {} ({}), read as {}",
            dir.display(),
            crate::text::human_bytes(bytes),
            read_as.display()
        ));
        if stdin {
            stdin_copy = Some(read_as.clone());
        }
        out.paths.push(read_as);
        out.copies.push((copy, name));
    }
    Ok(out)
}

/// [`inputs_in`] the temporary directory (`TMPDIR`, else `/tmp`), at most `limit` bytes each
/// ([`limit_from`]).
pub fn inputs(paths: &[PathBuf], limit: u64) -> Result<Spooled, String> {
    inputs_in(paths, &std::env::temp_dir(), limit)
}

fn copy_name(dir: &Path, n: usize) -> PathBuf {
    dir.join(format!("rtrace-input-{}-{n}.bin", std::process::id()))
}

/// A new file in `dir` with no name: `O_TMPFILE`, else created exclusively and unlinked at
/// once; mode 0600 either way. (Also the report's launches: `report/launches.rs`.)
pub(crate) fn unnamed_file(dir: &Path) -> io::Result<File> {
    let tmpfile = OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE)
        .open(dir);
    match tmpfile {
        Ok(f) => return Ok(f),
        // The file system (or kernel) has no O_TMPFILE.
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
            ) => {}
        Err(e) => return Err(e),
    }
    unlinked_file(dir)
}

/// A new file in `dir`, created exclusively with mode 0600 and unlinked at once.
fn unlinked_file(dir: &Path) -> io::Result<File> {
    let mut attempt = 0u32;
    loop {
        let name = dir.join(format!("rtrace-input-{}-{attempt}.bin", std::process::id()));
        match named_file(&name) {
            Ok(f) => {
                std::fs::remove_file(&name)?;
                return Ok(f);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 1000 => attempt += 1,
            Err(e) => return Err(e),
        }
    }
}

/// A new file named `name`, created exclusively with mode 0600.
fn named_file(name: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(name)
}

/// The copy of input `path` (standard input if `stdin`) in `dir` (named `name`, where given),
/// and its size; `None` (and no copy) when it has more than `limit` bytes. An input that does
/// not begin with a trace's magic bytes is copied only as far as they go (the reader then says
/// what it is, as of a file), not up to the limit: `/dev/zero` or a stray binary is turned
/// away at once.
fn copy_into(
    path: &Path,
    stdin: bool,
    dir: &Path,
    name: Option<&Path>,
    limit: u64,
) -> io::Result<Option<(File, u64)>> {
    let mut copy = match name {
        None => unnamed_file(dir)?,
        Some(name) => named_file(name)?,
    };
    let copied = if stdin {
        copy_trace(&mut io::stdin().lock(), &mut copy, limit)
    } else {
        File::open(path).and_then(|mut f| copy_trace(&mut f, &mut copy, limit))
    };
    let fits = copied.as_ref().is_ok_and(|&bytes| bytes <= limit);
    if !fits {
        if let Some(name) = name {
            let _ = std::fs::remove_file(name);
        }
    }
    match copied {
        Ok(bytes) if bytes <= limit => Ok(Some((copy, bytes))),
        Ok(_) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Copies `from` into `to`, at most `limit` + 1 bytes (so that an input over the limit shows),
/// and only the first bytes when they are not [`MAGIC`]'s; returns the bytes copied.
fn copy_trace(from: &mut impl Read, to: &mut File, limit: u64) -> io::Result<u64> {
    let mut head = [0u8; MAGIC.len()];
    let mut got = 0;
    while got < head.len() {
        match from.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    to.write_all(&head[..got])?;
    if head[..got] != MAGIC[..got] || got < head.len() {
        return Ok(got as u64);
    }
    let rest = limit.saturating_add(1).saturating_sub(got as u64);
    Ok(got as u64 + io::copy(&mut from.take(rest), to)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` bytes that begin as a trace does ([`MAGIC`]), then `fill`.
    fn trace_like(n: usize, fill: u8) -> Vec<u8> {
        let mut v = vec![fill; n];
        v[..MAGIC.len()].copy_from_slice(&MAGIC);
        v
    }

    #[test]
    fn a_fifo_is_copied_and_files_are_not() {
        let dir = std::env::temp_dir().join(format!("rtrace-spool-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let plain = dir.join("plain.bin");
        std::fs::write(&plain, b"abc").unwrap();
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::write(fifo, trace_like(100_000, 7)).unwrap())
        };
        let s = inputs_in(&[plain.clone(), fifo.clone()], &dir, 1 << 20).unwrap();
        writer.join().unwrap();
        assert_eq!(s.paths()[0], plain);
        let copy = &s.paths()[1];
        assert!(copy.starts_with("/proc/self/fd/"), "{}", copy.display());
        // Read twice, as the report does.
        for _ in 0..2 {
            assert_eq!(std::fs::read(copy).unwrap(), trace_like(100_000, 7));
        }
        assert_eq!(s.notes.len(), 1);
        assert!(
            s.notes[0].starts_with(&format!(
                "{}: copied into a temporary file in ",
                fifo.display()
            )),
            "{}",
            s.notes[0]
        );
        // Nothing is left in the directory but the test's own files.
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["fifo", "plain.bin"]);
        drop(s);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_input_that_is_not_a_trace_is_copied_only_as_far_as_its_first_bytes() {
        let dir = std::env::temp_dir().join(format!("rtrace-spool-magic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (n, what) in [(100_000, "longer than the magic"), (5, "shorter")] {
            let fifo = dir.join("fifo");
            let _ = std::fs::remove_file(&fifo);
            let made = std::process::Command::new("mkfifo").arg(&fifo).status();
            assert!(made.unwrap().success());
            let writer = {
                let fifo = fifo.clone();
                // The reader stops after the first bytes: the rest may find no reader.
                std::thread::spawn(move || std::fs::write(fifo, vec![0u8; n]).is_ok())
            };
            let s = inputs_in(std::slice::from_ref(&fifo), &dir, 1 << 20).unwrap();
            writer.join().unwrap();
            let kept = std::fs::read(&s.paths()[0]).unwrap();
            assert_eq!(kept, vec![0u8; n.min(MAGIC.len())], "{what}");
            // The reader says what it is, as of a file.
            let err = crate::read::trace::load_trace(&s.paths()[0])
                .err()
                .map(|e| e.is_not_a_trace());
            assert_eq!(err, Some(true), "{what}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_copy_that_cannot_be_made_is_an_error_naming_the_input() {
        let dir = std::env::temp_dir().join(format!("rtrace-spool-missing-{}", std::process::id()));
        let err = match inputs_in(&[PathBuf::from("-")], &dir, 1 << 20) {
            Err(e) => e,
            Ok(_) => panic!("copied into a missing directory"),
        };
        assert!(
            err.starts_with(&format!(
                "standard input: could not copy it into a temporary file in {} (it is read more \
                 than once; set TMPDIR to a directory with room): ",
                dir.display()
            )),
            "{err}"
        );
    }

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_copy_has_no_name_even_while_copying_and_mode_0600() {
        use std::io::Write;
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = std::env::temp_dir().join(format!("rtrace-spool-mode-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
                f.write_all(&trace_like(4096, 1)).unwrap();
                // Half copied: wait while the directory is looked at.
                rx.recv().unwrap();
                f.write_all(&[2u8; 4096]).unwrap();
            })
        };
        let reader = {
            let (fifo, dir) = (fifo.clone(), dir.clone());
            std::thread::spawn(move || inputs_in(&[fifo], &dir, 1 << 20))
        };
        // The copy is being made (the writer's first half may not be read yet, but the copy
        // was made before the input was opened): the directory holds no other name.
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert_eq!(names(&dir), ["fifo"]);
        tx.send(()).unwrap();
        writer.join().unwrap();
        let s = reader.join().unwrap().unwrap();
        let copy = &s.paths()[0];
        let meta = std::fs::metadata(copy).unwrap();
        // No name anywhere: no link to it.
        assert_eq!(
            (meta.len(), meta.permissions().mode() & 0o777, meta.nlink()),
            (8192, 0o600, 0)
        );
        assert_eq!(names(&dir), ["fifo"]);
        drop(s);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_input_over_the_limit_is_an_error_naming_it() {
        let dir = std::env::temp_dir().join(format!("rtrace-spool-limit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let writer = {
            let fifo = fifo.clone();
            // The reader stops at the limit: the writer's last bytes may find no reader.
            std::thread::spawn(move || std::fs::write(fifo, trace_like(3000, 7)).is_ok())
        };
        let err = match inputs_in(std::slice::from_ref(&fifo), &dir, 2048) {
            Err(e) => e,
            Ok(_) => panic!("copied past the limit"),
        };
        writer.join().unwrap();
        assert_eq!(
            err,
            format!(
                "{}: larger than the limit of 2K for a copied input; raise it with \
                 RTRACE_SPOOL_LIMIT (e.g. RTRACE_SPOOL_LIMIT=4K) or give the trace as a file",
                fifo.display()
            )
        );
        // Exactly the limit fits.
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::write(fifo, trace_like(2048, 7)).unwrap())
        };
        let s = inputs_in(std::slice::from_ref(&fifo), &dir, 2048).unwrap();
        writer.join().unwrap();
        assert_eq!(std::fs::read(&s.paths()[0]).unwrap().len(), 2048);
        assert_eq!(names(&dir), ["fifo"]);
        drop(s);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn limits_parse_and_print_in_powers_of_1024() {
        assert_eq!(limit_from(None), Ok(4 << 30));
        assert_eq!(limit_from(Some("512M")), Ok(512 << 20));
        assert_eq!(limit_from(Some("1000")), Ok(1000));
        assert_eq!(
            limit_from(Some("lots")),
            Err(
                "RTRACE_SPOOL_LIMIT: \"lots\" is not a size (bytes, or a number with K, M, G or T)"
                    .into()
            )
        );
        assert_eq!(
            (
                size_words(4 << 30),
                size_words(1536 << 20),
                size_words(1000)
            ),
            ("4G".into(), "1536M".into(), "1000".into())
        );
    }

    #[test]
    fn without_o_tmpfile_the_copy_is_unlinked_at_once_with_mode_0600() {
        use std::io::{Seek, Write};
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = std::env::temp_dir().join(format!("rtrace-spool-excl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A name taken already: the next one is used.
        let taken = dir.join(format!("rtrace-input-{}-0.bin", std::process::id()));
        std::fs::write(&taken, b"not ours").unwrap();
        let mut f = unlinked_file(&dir).unwrap();
        f.write_all(b"trace").unwrap();
        f.rewind().unwrap();
        let mut back = String::new();
        f.read_to_string(&mut back).unwrap();
        let meta = f.metadata().unwrap();
        assert_eq!(
            (
                back.as_str(),
                meta.permissions().mode() & 0o777,
                meta.nlink()
            ),
            ("trace", 0o600, 0)
        );
        assert_eq!(std::fs::read(&taken).unwrap(), b"not ours");
        assert_eq!(names(&dir), [taken.file_name().unwrap().to_str().unwrap()]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
