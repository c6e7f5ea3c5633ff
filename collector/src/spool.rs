//! Inputs that cannot be read twice: `-` (standard input), a pipe, a FIFO, a character device.
//! The report and the export read a trace file several times, seeking to the chunks each
//! pass needs, so such an input is first copied whole into a temporary file (in `TMPDIR`,
//! else `/tmp`), which the passes then read like any trace. The copy is unlinked at once and
//! read through `/proc/self/fd/N`, so nothing is left behind however rtrace ends; where
//! `/proc` is missing it keeps its name until rtrace is done with it.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileTypeExt;
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

/// Copies each input of `paths` that cannot be read twice into a temporary file in `dir`;
/// the others are taken as they are. `-` named twice is one input.
pub fn inputs_in(paths: &[PathBuf], dir: &Path) -> Result<Spooled, String> {
    let mut out = Spooled {
        paths: Vec::with_capacity(paths.len()),
        copies: Vec::new(),
        notes: Vec::new(),
    };
    let mut stdin_copy: Option<PathBuf> = None;
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
        let (copy, bytes) = copy_into(path, stdin, dir, out.copies.len()).map_err(|e| {
            format!(
                "{what}: could not copy it into a temporary file in {} (it is read more than \
                 once; set TMPDIR to a directory with room): {}",
                dir.display(),
                crate::read::inputs::io_message(&e)
            )
        })?;
        let read_as = format!("/proc/self/fd/{}", copy.as_raw_fd());
        let (read_as, name) = match Path::new(&read_as).exists() {
            true => {
                let _ = std::fs::remove_file(copy_name(dir, out.copies.len()));
                (PathBuf::from(read_as), None)
            }
            false => {
                let name = copy_name(dir, out.copies.len());
                (name.clone(), Some(name))
            }
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

/// [`inputs_in`] the temporary directory (`TMPDIR`, else `/tmp`).
pub fn inputs(paths: &[PathBuf]) -> Result<Spooled, String> {
    inputs_in(paths, &std::env::temp_dir())
}

fn copy_name(dir: &Path, n: usize) -> PathBuf {
    dir.join(format!("rtrace-input-{}-{n}.bin", std::process::id()))
}

/// The copy of input `path` (standard input if `stdin`), and its size.
fn copy_into(path: &Path, stdin: bool, dir: &Path, n: usize) -> io::Result<(File, u64)> {
    let name = copy_name(dir, n);
    let mut copy = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&name)?;
    let copied = if stdin {
        io::copy(&mut io::stdin().lock(), &mut copy)
    } else {
        File::open(path).and_then(|mut f| io::copy(&mut f, &mut copy))
    };
    match copied {
        Ok(bytes) => Ok((copy, bytes)),
        Err(e) => {
            let _ = std::fs::remove_file(&name);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            std::thread::spawn(move || std::fs::write(fifo, vec![7u8; 100_000]).unwrap())
        };
        let s = inputs_in(&[plain.clone(), fifo.clone()], &dir).unwrap();
        writer.join().unwrap();
        assert_eq!(s.paths()[0], plain);
        let copy = &s.paths()[1];
        assert!(copy.starts_with("/proc/self/fd/"), "{}", copy.display());
        // Read twice, as the report does.
        for _ in 0..2 {
            assert_eq!(std::fs::read(copy).unwrap(), vec![7u8; 100_000]);
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
    fn a_copy_that_cannot_be_made_is_an_error_naming_the_input() {
        let dir = std::env::temp_dir().join(format!("rtrace-spool-missing-{}", std::process::id()));
        let err = match inputs_in(&[PathBuf::from("-")], &dir) {
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
}
