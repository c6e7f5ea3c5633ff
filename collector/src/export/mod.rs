//! `rtrace export`: traces as timelines for a trace viewer, in Perfetto's
//! protobuf format ([`PerfettoWriter`], for ui.perfetto.dev) or Chrome's
//! JSON trace event format ([`ChromeWriter`]).
//!
//! Both show the same things (docs/export.md): per traced process its
//! threads, each with a slice per API call; per GPU device a track per
//! stream with the kernels, copies and memsets that ran there; a flow from
//! each call to the GPU work it launched; and memory in use per device from
//! the allocation and free records. The writers stream: each trace is
//! written as it is given, and the output buffered a megabyte at a time.
//!
//! ```no_run
//! use rtrace_collector::export::{export_traces, ExportFormat};
//! let trace = rtrace_collector::load_trace("rtrace-1234.bin".as_ref()).unwrap();
//! let file = std::fs::File::create("rtrace-1234.perfetto-trace").unwrap();
//! let (_, stats) = export_traces(&[trace], ExportFormat::Perfetto, file).unwrap();
//! eprintln!("{} slices, {} flows", stats.slices, stats.flows);
//! ```

mod behind;
mod chrome;
mod emitter;
mod layout;
pub(crate) mod merge;
mod nvtx_tracks;
pub mod parquet;
mod perfetto;
mod proto;
mod relay;
#[cfg(test)]
mod tests;

pub use chrome::{ChromeWriter, SYNTHETIC_TID_BASE};
pub use emitter::Stats;
pub use layout::{binary_bytes, MAX_LANES};
pub use perfetto::PerfettoWriter;

pub use crate::read::inputs::{expand_inputs, Inputs};

use crate::filter::RecordFilter;
use crate::model::Trace;
use crate::read::first::{places_of, FirstRead, Places};
use crate::read::index::FileSource;
use crate::read::inputs::{io_message, LoadError, StreamError};
use crate::read::links::LinkTable;
use crate::read::merge::{Failure, Source};
use crate::read::records::{in_memory, Rec};
use crate::read::trace::{kernel_names_kept, read_light};
use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Output format of `rtrace export`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// Perfetto's protobuf trace format, for ui.perfetto.dev (any size).
    Perfetto,
    /// Chrome's JSON trace event format, for chrome://tracing and other
    /// viewers (which fail on files past about 256 MB).
    Chrome,
}

/// Chrome JSON output larger than this draws a warning: Chrome's trace
/// viewer fails on files around this size.
pub const CHROME_SIZE_WARNING: u64 = 256 << 20;

/// A writer of either format (one per export: the variants' sizes, a few hundred bytes
/// each, do not matter).
#[allow(clippy::large_enum_variant)]
pub enum Writer<W: Write> {
    Perfetto(PerfettoWriter<W>),
    Chrome(ChromeWriter<W>),
}

impl<W: Write> Writer<W> {
    pub fn new(format: ExportFormat, out: W) -> Self {
        match format {
            ExportFormat::Perfetto => Writer::Perfetto(PerfettoWriter::new(out)),
            ExportFormat::Chrome => Writer::Chrome(ChromeWriter::new(out)),
        }
    }

    /// Writes one trace (one process) held in memory.
    pub fn write_trace(&mut self, trace: &Trace) -> io::Result<()>
    where
        W: Send,
    {
        let nvtx = crate::nvtx::has_nvtx(trace).then(|| tracks_projector(trace, None));
        let places = places_of(trace);
        let mut links = LinkTable::of(trace, self.next_flow());
        let mut src = in_memory(trace);
        self.write_with(trace, &places, nvtx, &mut links, &mut src)
            .map_err(|e| match e {
                Failure::Write(e) => e,
                Failure::Read(e) => io::Error::other(e.to_string()),
            })
    }

    fn next_flow(&mut self) -> &mut u64 {
        match self {
            Writer::Perfetto(w) => w.next_flow(),
            Writer::Chrome(w) => w.next_flow(),
        }
    }

    /// Writes one trace whose API and GPU records come from `src` ([`merge::write`]), the
    /// writer told what to write on a thread of its own ([`relay::relayed`]).
    fn write_with(
        &mut self,
        trace: &Trace,
        places: &Places,
        nvtx: Option<Box<crate::nvtx::Projector>>,
        links: &mut LinkTable,
        src: &mut dyn Source<Rec>,
    ) -> Result<(), Failure>
    where
        W: Send,
    {
        let merge = |r: &mut relay::Relay| merge::write(r, trace, places, nvtx, links, src);
        let (merged, told) = match self {
            Writer::Perfetto(w) => relay::relayed(w, trace, merge),
            Writer::Chrome(w) => relay::relayed(w, trace, merge),
        };
        // A writer's error stopped the merge too: its own is the one to give.
        told.map_err(Failure::Write)?;
        merged
    }

    /// Ends the output; returns the writer given to [`Writer::new`] and what was written.
    pub fn finish(self) -> io::Result<(W, Stats)> {
        match self {
            Writer::Perfetto(w) => w.finish(),
            Writer::Chrome(w) => w.finish(),
        }
    }
}

/// Exports `traces` to `out` in `format`.
pub fn export_traces<W: Write + Send>(
    traces: &[Trace],
    format: ExportFormat,
    out: W,
) -> io::Result<(W, Stats)> {
    let mut w = Writer::new(format, out);
    for t in traces {
        w.write_trace(t)?;
    }
    w.finish()
}

/// Why an export failed.
#[derive(Debug)]
pub enum ExportError {
    /// A trace could not be read.
    Load(LoadError),
    /// A trace file read a second time no longer held what the first read found.
    Changed(StreamError),
    /// The output could not be written (`path` `None`: standard output).
    Write {
        path: Option<PathBuf>,
        error: io::Error,
    },
}

impl ExportError {
    /// `rtrace export`'s exit status for this error: 2 for an input that is
    /// not a trace, 1 for a failed write.
    pub fn exit_code(&self) -> u8 {
        match self {
            ExportError::Load(_) | ExportError::Changed(_) => 2,
            ExportError::Write { .. } => 1,
        }
    }

    /// True when the output was a pipe that its reader closed.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, ExportError::Write { error, .. } if error.kind() == io::ErrorKind::BrokenPipe)
    }
}

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExportError::Load(e) => write!(f, "{e}"),
            ExportError::Changed(e) => write!(f, "{e}"),
            ExportError::Write { path, error } => match path {
                Some(p) => write!(f, "writing {}: {}", p.display(), io_message(error)),
                None => write!(f, "writing the export: {}", io_message(error)),
            },
        }
    }
}

impl std::error::Error for ExportError {}

/// What [`export_files`] did.
#[derive(Debug, Default)]
pub struct Outcome {
    pub stats: Stats,
    /// Warnings about the inputs (damaged files, lost records) and the
    /// output (a Chrome trace too large for Chrome), one line each, without
    /// the `warning: ` prefix.
    pub warnings: Vec<String>,
    /// How traces from other hosts were put on one clock, one line each (`FILE: shifted ...`).
    pub clock_notes: Vec<String>,
}

/// Exports `files`, reading one at a time (only one trace is in memory at
/// once), to `output` (standard output when `None`). A file is written
/// under a temporary name in its directory, renamed when complete, and
/// removed on failure; an output that exists and is no regular file (`/dev/null`, a FIFO, a
/// terminal) is written as it is, and a symbolic link's target is the file replaced.
pub fn export_files(
    files: &[PathBuf],
    format: ExportFormat,
    output: Option<&Path>,
) -> Result<Outcome, ExportError> {
    export_filtered(files, format, output, &crate::filter::Filter::default())
}

/// [`export_files`], keeping what `filter` keeps (its window relative to the earliest
/// process start among `files`, read from their headers first).
pub fn export_filtered(
    files: &[PathBuf],
    format: ExportFormat,
    output: Option<&Path>,
    filter: &crate::filter::Filter,
) -> Result<Outcome, ExportError> {
    match output {
        None => {
            let stdout = io::stdout();
            let mut outcome = write_behind(files, format, stdout, None, filter)?;
            size_warning(format, None, &mut outcome);
            Ok(outcome)
        }
        Some(path) if std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) => {
            let werr = |error| ExportError::Write {
                path: Some(path.to_path_buf()),
                error,
            };
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(werr)?;
            write_behind(files, format, file, Some(path), filter)
        }
        Some(link) => {
            let resolved = std::fs::symlink_metadata(link)
                .is_ok_and(|m| m.file_type().is_symlink())
                .then(|| std::fs::canonicalize(link).ok())
                .flatten();
            let path = resolved.as_deref().unwrap_or(link);
            let tmp = temp_path(path);
            let werr = |error| ExportError::Write {
                path: Some(path.to_path_buf()),
                error,
            };
            let file = File::create(&tmp).map_err(werr)?;
            let result =
                write_behind(files, format, file, Some(path), filter).and_then(|outcome| {
                    std::fs::rename(&tmp, path).map_err(werr)?;
                    Ok(outcome)
                });
            match result {
                Ok(mut outcome) => {
                    size_warning(format, Some(path), &mut outcome);
                    Ok(outcome)
                }
                Err(e) => {
                    let _ = std::fs::remove_file(&tmp);
                    Err(e)
                }
            }
        }
    }
}

/// [`write_all`] with the output written on a thread of its own ([`behind::write_behind`]).
fn write_behind<W: Write + Send>(
    files: &[PathBuf],
    format: ExportFormat,
    out: W,
    path: Option<&Path>,
    filter: &crate::filter::Filter,
) -> Result<Outcome, ExportError> {
    let (outcome, written) =
        behind::write_behind(out, |out| write_all(files, format, out, path, filter));
    // A failed write stops the encoding too: its own error is the one to give.
    written.map_err(|error| ExportError::Write {
        path: path.map(Path::to_path_buf),
        error,
    })?;
    outcome
}

fn write_all<W: Write + Send>(
    files: &[PathBuf],
    format: ExportFormat,
    out: W,
    path: Option<&Path>,
    filter: &crate::filter::Filter,
) -> Result<Outcome, ExportError> {
    let werr = |error| ExportError::Write {
        path: path.map(Path::to_path_buf),
        error,
    };
    let mut outcome = Outcome::default();
    let mut w = Writer::new(format, out);
    // Traces from several hosts go on one clock (crate::clocks), decided from the headers
    // first, as only one trace is in memory at a time.
    let (shifts, base) = if files.len() > 1 || !filter.is_empty() {
        let headers = crate::filter::read_headers(files).map_err(ExportError::Load)?;
        let refs: Vec<&rtrace_format::ProcessHeader> = headers.iter().collect();
        let shifts = crate::clocks::shifts(&refs);
        let base = crate::filter::earliest_start(headers.iter().zip(&shifts).map(|(h, s)| {
            crate::clocks::shifted(h.start.monotonic_ns, s.as_ref().map_or(0, |s| s.ns))
        }));
        (shifts, base)
    } else {
        (vec![None], 0)
    };
    let from = filter.from_ns.map_or(0, |f| base.saturating_add(f));
    let to = filter.to_ns.map_or(u64::MAX, |v| base.saturating_add(v));
    let failed = |e: Failure| match e {
        Failure::Write(e) => werr(e),
        Failure::Read(StreamError::Load(e)) => ExportError::Load(e),
        Failure::Read(e) => ExportError::Changed(e),
    };
    for (file, shift) in files.iter().zip(shifts) {
        // A first read indexes the API and GPU chunks and notes their links, keeping the
        // rest; the chunks are then read again in time order ([`merge`]).
        let names = match &filter.kernel {
            Some(re) => Some(kernel_names_kept(file, re).map_err(ExportError::Load)?),
            None => None,
        };
        let keep = RecordFilter::new(shift.as_ref().map_or(0, |s| s.ns), from, to, filter, names);
        let mut first = FirstRead::new(&keep);
        let mut trace = read_light(file, &mut first).map_err(ExportError::Load)?;
        if !filter.keeps_process(trace.header.pid) {
            continue;
        }
        if let Some(s) = shift {
            trace.shift_times(s.ns);
            outcome.clock_notes.push(format!(
                "{}: {}",
                file.display(),
                crate::clocks::describe(&s)
            ));
            trace.clock_shift = Some(s);
        }
        filter.apply(&mut trace, base);
        // NVTX ranges are projected onto the GPU work of the calls inside them as the
        // records come.
        let nvtx = first
            .nvtx
            .then(|| tracks_projector(&trace, Some(keep.window_range())));
        first.links.number(w.next_flow());
        let mut src = FileSource::open(file, std::mem::take(&mut first.index), &keep)
            .map_err(|e| failed(Failure::Read(e)))?;
        // The chunks are read and decoded on a thread of their own, ahead of the merge, and
        // the writer encodes on another.
        let links = &mut first.links;
        crate::read::merge::ahead(&mut src, |src| {
            w.write_with(&trace, &first.places, nvtx, links, src)
        })
        .map_err(failed)?;
        outcome.warnings.extend(trace_warnings(&trace));
    }
    let (mut out, stats) = w.finish().map_err(werr)?;
    out.flush().map_err(werr)?;
    outcome.stats = stats;
    if stats.clipped > 0 {
        outcome.warnings.push(format!(
            "{} slices overlapped more than {MAX_LANES} others on their track; \
             their ends were clipped",
            stats.clipped
        ));
    }
    if stats.nvtx_unplaced > 0 {
        outcome.warnings.push(format!(
            "{} NVTX ranges or GPU spans overlapped more than {MAX_LANES} others on their \
             track; they are not drawn",
            stats.nvtx_unplaced
        ));
    }
    Ok(outcome)
}

/// The projector that builds `trace`'s NVTX ranges for its tracks, as its records are written.
fn tracks_projector(trace: &Trace, window: Option<(u64, u64)>) -> Box<crate::nvtx::Projector> {
    Box::new(crate::nvtx::Projector::new(
        trace,
        window,
        crate::nvtx::Mode::Tracks,
    ))
}

fn size_warning(format: ExportFormat, path: Option<&Path>, outcome: &mut Outcome) {
    if format == ExportFormat::Chrome && outcome.stats.bytes > CHROME_SIZE_WARNING {
        let what = match path {
            Some(p) => p.display().to_string(),
            None => "the output".to_string(),
        };
        outcome.warnings.push(format!(
            "{what} is {}: Chrome's trace viewer fails around 256 MB; use --format perfetto",
            crate::text::human_bytes(outcome.stats.bytes)
        ));
    }
}

/// `DIR/.NAME.rtrace-PID.tmp` for the output `DIR/NAME`.
fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "export".into());
    path.with_file_name(format!(".{name}.rtrace-{}.tmp", std::process::id()))
}

/// The warnings `rtrace report` gives about a trace: damage, skipped chunks,
/// lost records (without the `warning: ` prefix).
pub fn trace_warnings(t: &Trace) -> Vec<String> {
    let mut out = Vec::new();
    let path = t.path.display();
    if let Some(damage) = &t.damage {
        out.push(format!("{path}: {damage}"));
    }
    for bad in &t.bad_chunks {
        out.push(format!("{path}: skipped the {bad}"));
    }
    if let Some(damaged) = t.damaged.describe() {
        out.push(format!("{path}: {damaged}"));
    }
    if let Some(lost) = t.lost_warning(false) {
        out.push(format!("{path}: {lost}"));
    }
    out
}
