//! The command line's inputs as trace files: a file is one trace, a directory stands for the
//! `*.bin` traces directly in it ([`expand_inputs`]); and why an input could not be read
//! ([`LoadError`]). Standard input and pipes are first copied to a file by [`crate::spool`].

use rtrace_format::{ProcessHeader, ReadError, TraceReader};
use std::collections::HashSet;
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};

/// Why a trace could not be loaded at all.
#[derive(Debug)]
pub enum LoadError {
    /// The path could not be opened or read (missing, unreadable, ...).
    Io { path: PathBuf, error: io::Error },
    /// The file is empty.
    Empty { path: PathBuf },
    /// The file header could not be read: not a trace, a newer format, or a
    /// damaged header.
    Header { path: PathBuf, error: ReadError },
    /// A directory given as input holds no `*.bin` traces.
    NoTraces { path: PathBuf },
}

impl LoadError {
    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            LoadError::Io { path, .. }
            | LoadError::Empty { path }
            | LoadError::Header { path, .. }
            | LoadError::NoTraces { path } => path,
        }
    }

    /// True when the file is simply not an rtrace trace (bad magic, or empty).
    pub fn is_not_a_trace(&self) -> bool {
        matches!(
            self,
            LoadError::Empty { .. }
                | LoadError::Header {
                    error: ReadError::NotATrace,
                    ..
                }
        )
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.path().display())?;
        match self {
            LoadError::Io { error, .. } => f.write_str(&io_message(error)),
            LoadError::Empty { .. } => f.write_str("empty file, not an rtrace trace"),
            LoadError::Header { error, .. } => write!(f, "{error}"),
            LoadError::NoTraces { .. } => f.write_str("no rtrace traces (*.bin) in this directory"),
        }
    }
}

impl std::error::Error for LoadError {}

pub(crate) use crate::text::io_message;

/// The trace files named by the command line.
#[derive(Debug, Default)]
pub struct Inputs {
    /// In input order (a directory's traces sorted by name), each once.
    pub files: Vec<PathBuf>,
    /// Files in directories skipped as not traces, one line each (`PATH: why; skipped`).
    pub skipped: Vec<String>,
}

/// The trace files among `paths`, as `rtrace report` takes them: a file is
/// one trace; a directory stands for every `*.bin` trace directly in it, in
/// name order, skipping files there that are not rtrace traces; a file named
/// twice is taken once. Each file's header is read to check that it is a
/// trace, so that an export fails before it writes anything.
pub fn expand_inputs(paths: &[PathBuf]) -> Result<Inputs, LoadError> {
    let mut inputs = Inputs::default();
    each_input(
        paths,
        probe,
        |file, ()| inputs.files.push(file),
        &mut inputs.skipped,
    )?;
    Ok(inputs)
}

/// Goes through `paths` as [`expand_inputs`] describes, giving each trace file and what
/// `open` made of it to `take`; files in directories that are not traces go to `skipped`.
pub(crate) fn each_input<T>(
    paths: &[PathBuf],
    mut open: impl FnMut(&Path) -> Result<T, LoadError>,
    mut take: impl FnMut(PathBuf, T),
    skipped: &mut Vec<String>,
) -> Result<(), LoadError> {
    let mut seen = HashSet::new();
    for path in paths {
        let meta = std::fs::metadata(path).map_err(|error| LoadError::Io {
            path: path.clone(),
            error,
        })?;
        if !meta.is_dir() {
            if seen.insert(identity(path)) {
                let t = open(path)?;
                take(path.clone(), t);
            }
            continue;
        }
        let mut found = false;
        for file in bin_files(path, skipped)? {
            if !seen.insert(identity(&file)) {
                found = true;
                continue;
            }
            match open(&file) {
                Ok(t) => {
                    found = true;
                    take(file, t);
                }
                Err(e) if e.is_not_a_trace() => skipped.push(format!("{e}; skipped")),
                Err(e) => return Err(e),
            }
        }
        if !found {
            return Err(LoadError::NoTraces { path: path.clone() });
        }
    }
    Ok(())
}

/// Opens `path` as a trace file: a regular, non-empty file (not yet read).
pub(crate) fn open_trace_file(path: &Path) -> Result<File, LoadError> {
    let io_err = |error| LoadError::Io {
        path: path.to_path_buf(),
        error,
    };
    let file = File::open(path).map_err(io_err)?;
    let meta = file.metadata().map_err(io_err)?;
    if meta.is_dir() {
        return Err(io_err(io::Error::from_raw_os_error(libc::EISDIR)));
    }
    if meta.len() == 0 {
        return Err(LoadError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(file)
}

/// Checks that `path` is a readable trace: a regular, non-empty file with a
/// valid header.
fn probe(path: &Path) -> Result<(), LoadError> {
    read_header(path, open_trace_file(path)?).map(drop)
}

/// The header of the trace file `file` (at `path`), read alone.
pub(crate) fn read_header(path: &Path, file: File) -> Result<ProcessHeader, LoadError> {
    let reader = TraceReader::new(BufReader::new(file)).map_err(|error| LoadError::Header {
        path: path.to_path_buf(),
        error,
    })?;
    Ok(reader.header().clone())
}

/// The `*.bin` regular files directly in `dir`, sorted; a `*.bin` that is not one (a
/// directory, a FIFO, a link to nothing) goes to `skipped`, said.
fn bin_files(dir: &Path, skipped: &mut Vec<String>) -> Result<Vec<PathBuf>, LoadError> {
    use std::os::unix::fs::FileTypeExt;
    let io_err = |error| LoadError::Io {
        path: dir.to_path_buf(),
        error,
    };
    let mut files = Vec::new();
    let mut others = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_err)? {
        let path = entry.map_err(io_err)?.path();
        if path.extension().is_none_or(|e| e != "bin") {
            continue;
        }
        let what = match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => {
                files.push(path);
                continue;
            }
            Ok(m) if m.is_dir() => "a directory".to_string(),
            Ok(m) if m.file_type().is_fifo() => "a FIFO".to_string(),
            Ok(m) if m.file_type().is_socket() => "a socket".to_string(),
            Ok(_) => "a device".to_string(),
            Err(e) => format!("a link that cannot be followed ({})", io_message(&e)),
        };
        others.push(format!(
            "{}: {what}, not a trace file; skipped",
            path.display()
        ));
    }
    files.sort();
    others.sort();
    skipped.extend(others);
    Ok(files)
}

/// A key that is the same for two spellings of one file.
fn identity(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Why a trace could not be read in bounded memory (for a report or an export).
#[derive(Debug)]
pub enum StreamError {
    Load(LoadError),
    /// The filter keeps nothing (no trace of the processes asked for).
    Filter(String),
    /// A file read a second time no longer holds what the first read found.
    Changed {
        path: PathBuf,
        why: String,
    },
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamError::Load(e) => write!(f, "{e}"),
            StreamError::Filter(e) => f.write_str(e),
            StreamError::Changed { path, why } => {
                write!(f, "{}: changed while it was read: {why}", path.display())
            }
        }
    }
}

impl From<LoadError> for StreamError {
    fn from(e: LoadError) -> Self {
        StreamError::Load(e)
    }
}
