//! `rtrace export --format parquet -o DIR`: traces as one Parquet dataset, a table per kind of
//! record, partitioned by host and process (`TABLE/host=H/pid=P/part-N.parquet`, hive style),
//! for DuckDB, Spark, Dask, Polars and anything else that reads Parquet (docs/parquet.md).
//!
//! Each trace is read through the reading layer ([`crate::read`]) as the Perfetto export reads
//! it: its headers first (the traces of several hosts are put on one clock,
//! [`crate::clocks`]), then a first read that keeps its names and resources and indexes its
//! chunks of records ([`Indexer`]), then those chunks again in file order, each record one row
//! ([`rows`]), written a batch at a time ([`columns`]); a trace with NVTX ranges is projected
//! as the report projects it for its `nvtx_ranges` and `external_ids` ([`ranges`]). Memory
//! holds a few batches per table and the row group being encoded, and for a trace with NVTX the
//! ranges open or waiting for their GPU work. The dataset is written under a temporary name
//! beside `DIR` and renamed into place when complete.

mod chunk;
mod columns;
mod file;
mod hybrid;
mod meta;
mod ranges;
mod rows;
pub mod schema;
mod stats;
pub mod tables;
#[cfg(test)]
mod tests;
mod values;

use super::{trace_warnings, ExportError};
use crate::filter::{Filter, RecordFilter};
use crate::model::Trace;
use crate::read::first::hold_names;
use crate::read::index::{decode, ChunkRef, Rereader};
use crate::read::inputs::StreamError;
use crate::read::merge::Failure;
use crate::read::records::{Kind, Records};
use crate::read::trace::{kernel_names_kept, read_light, RecordSink};
use columns::TableFile;
use rtrace_format::Chunk;
use schema::Table;
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

pub use columns::{BATCH_ROWS, ROW_GROUP_ROWS};

/// What [`export_dataset`] wrote.
#[derive(Debug, Default)]
pub struct Written {
    /// Traces (processes) exported.
    pub traces: usize,
    /// Rows over all tables, and the Parquet files.
    pub rows: u64,
    pub files: usize,
    /// The dataset's size.
    pub bytes: u64,
    /// Warnings about the inputs (damaged files, lost records), one line each, without the
    /// `warning: ` prefix.
    pub warnings: Vec<String>,
    /// How traces from other hosts were put on one clock, one line each.
    pub clock_notes: Vec<String>,
}

/// The file that marks a directory as an rtrace Parquet dataset.
pub const SCHEMA_FILE: &str = "_schema.json";

/// Whether `dir` may be written: it does not exist or is empty; with `force`, it may also be
/// an earlier dataset (it holds [`SCHEMA_FILE`]), which is replaced. Why not, in one line.
pub fn check_output(dir: &Path, force: bool) -> Result<(), String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotADirectory => {
            return Err(format!("{}: exists and is not a directory", dir.display()))
        }
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    if entries.count() == 0 {
        return Ok(());
    }
    if !force {
        return Err(format!(
            "{}: exists and is not empty; give --force-overwrite to replace an earlier dataset",
            dir.display()
        ));
    }
    if !dir.join(SCHEMA_FILE).is_file() {
        return Err(format!(
            "{}: is not an rtrace Parquet dataset (no {SCHEMA_FILE}); not replacing it",
            dir.display()
        ));
    }
    Ok(())
}

/// The first read's sink: indexes every chunk of records (kind, offset) and keeps NVTX domain
/// and thread names; notes whether there are NVTX ranges to project.
#[derive(Default)]
struct Indexer {
    chunks: Vec<ChunkRef>,
    nvtx: bool,
}

impl RecordSink for Indexer {
    fn records(&mut self, trace: &mut Trace, chunk: &Chunk, records: Records) {
        let kind = match records {
            Records::Nvtx(v) => {
                self.nvtx |= hold_names(trace.thread_mut(chunk.header.thread), v);
                return;
            }
            Records::Api(_) => Kind::Api,
            Records::Kernels(_) => Kind::Kernels,
            Records::Memcpys(_) => Kind::Memcpys,
            Records::PeerCopies(_) => Kind::PeerCopies,
            Records::Memsets(_) => Kind::Memsets,
            Records::Memory(_) => Kind::Memory,
            Records::Syncs(_) => Kind::Syncs,
        };
        if records.count() > 0 {
            self.chunks.push(ChunkRef::new(chunk, kind, 0));
        }
    }
}

/// `host` as a partition folder's value: characters other than letters, digits, `.`, `_`
/// and `-` percent-encoded (as hive style escapes them); `unknown` when empty.
pub fn partition_value(host: &str) -> String {
    if host.is_empty() {
        return "unknown".into();
    }
    let mut out = String::with_capacity(host.len());
    for b in host.bytes() {
        if b.is_ascii_alphanumeric() || b"._-".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `DIR/../.NAME.rtrace-PID.tmp` for the dataset `DIR`.
fn temp_dir(dir: &Path) -> PathBuf {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "dataset".into());
    dir.with_file_name(format!(".{name}.rtrace-{}.tmp", std::process::id()))
}

/// Exports `files` (traces, read one at a time) to the dataset `dir`, keeping what `filter`
/// keeps. `dir` must pass [`check_output`] (with `force`); it is written under a temporary
/// name beside it and renamed into place when complete (an earlier dataset there replaced).
pub fn export_dataset(
    files: &[PathBuf],
    dir: &Path,
    force: bool,
    filter: &Filter,
) -> Result<Written, ExportError> {
    check_output(dir, force).map_err(|e| ExportError::Write {
        path: Some(dir.to_path_buf()),
        error: io::Error::new(io::ErrorKind::AlreadyExists, e),
    })?;
    let tmp = temp_dir(dir);
    let werr = |error| ExportError::Write {
        path: Some(dir.to_path_buf()),
        error,
    };
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(werr)?;
    let result = write_dataset(files, &tmp, filter).and_then(|mut written| {
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(werr)?;
        }
        std::fs::rename(&tmp, dir).map_err(werr)?;
        written.bytes = dir_size(dir);
        Ok(written)
    });
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

const README: &str =
    "This directory is an rtrace Parquet dataset (`rtrace export --format parquet`).\n\n\
Layout: TABLE/host=HOST/pid=PID/part-N.parquet, one folder per table (api_calls, kernels,\n\
copies, memsets, memory, syncs, nvtx_ranges, external_ids, processes, threads, devices,\n\
contexts, streams, modules, pc_samples, kernel_metrics), partitioned hive style by host and\n\
process: read a table with its partitions as columns, e.g. in DuckDB\n\n\
    SELECT * FROM read_parquet('kernels/*/*/*.parquet', hive_partitioning = true,\n\
                               hive_types = {'host': VARCHAR, 'pid': BIGINT});\n\n\
Times are nanoseconds on one clock for every process (CLOCK_MONOTONIC of the host of the\n\
first-started process; other hosts' traces shifted onto it, see processes.clock_shift_ns).\n\
Every table's columns, types and units are in _schema.json and in rtrace's docs/parquet.md,\n\
with the schema version (also in each file's key-value metadata, rtrace.schema_version).\n";

fn write_dataset(files: &[PathBuf], tmp: &Path, filter: &Filter) -> Result<Written, ExportError> {
    let werr = |error| ExportError::Write {
        path: Some(tmp.to_path_buf()),
        error,
    };
    std::fs::write(tmp.join("README.md"), README).map_err(werr)?;
    std::fs::write(
        tmp.join(SCHEMA_FILE),
        schema::schema_json(tables::TABLES, tables::PARTITIONS),
    )
    .map_err(werr)?;
    let headers = crate::filter::read_headers(files).map_err(ExportError::Load)?;
    let refs: Vec<&rtrace_format::ProcessHeader> = headers.iter().collect();
    let shifts = crate::clocks::shifts(&refs);
    let base = crate::filter::earliest_start(headers.iter().zip(&shifts).map(|(h, s)| {
        crate::clocks::shifted(h.start.monotonic_ns, s.as_ref().map_or(0, |s| s.ns))
    }));
    let from = filter.from_ns.map_or(0, |f| base.saturating_add(f));
    let to = filter.to_ns.map_or(u64::MAX, |v| base.saturating_add(v));
    let mut written = Written::default();
    let mut parts: HashMap<(String, u32), usize> = HashMap::new();
    for ((file, shift), header) in files.iter().zip(shifts).zip(&headers) {
        if !filter.keeps_process(header.pid) {
            continue;
        }
        let names = match &filter.kernel {
            Some(re) => Some(kernel_names_kept(file, re).map_err(ExportError::Load)?),
            None => None,
        };
        let keep = RecordFilter::new(shift.as_ref().map_or(0, |s| s.ns), from, to, filter, names);
        let mut index = Indexer::default();
        let mut trace = read_light(file, &mut index).map_err(ExportError::Load)?;
        if let Some(s) = shift {
            trace.shift_times(s.ns);
            written.clock_notes.push(format!(
                "{}: {}",
                file.display(),
                crate::clocks::describe(&s)
            ));
            trace.clock_shift = Some(s);
        }
        filter.apply(&mut trace, base);
        let host = partition_value(&trace.header.hostname);
        let n = parts.entry((host.clone(), trace.header.pid)).or_insert(0);
        let folder = format!("host={host}/pid={}/part-{n}.parquet", trace.header.pid);
        *n += 1;
        let out = Partition {
            root: tmp,
            folder: &folder,
            meta: vec![
                ("rtrace.trace_file", file.display().to_string()),
                ("rtrace.host", trace.header.hostname.clone()),
                ("rtrace.pid", trace.header.pid.to_string()),
            ],
        };
        written.rows += write_trace(file, &trace, index, &keep, &out)?;
        written.files += tables::TABLES.len();
        written.traces += 1;
        written.warnings.extend(trace_warnings(&trace));
    }
    Ok(written)
}

/// Where one trace's files go: `ROOT/TABLE/FOLDER`.
struct Partition<'a> {
    root: &'a Path,
    folder: &'a str,
    meta: Vec<(&'static str, String)>,
}

impl Partition<'_> {
    fn open(&self, table: &'static Table) -> Result<TableFile, ExportError> {
        let path = self.root.join(table.name).join(self.folder);
        let werr = |error| ExportError::Write {
            path: Some(path.clone()),
            error,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(werr)?;
        }
        TableFile::create(table, &path, &self.meta).map_err(werr)
    }

    fn werr(&self) -> impl Fn(io::Error) -> ExportError + '_ {
        move |error| ExportError::Write {
            path: Some(self.root.to_path_buf()),
            error,
        }
    }
}

/// The records of indexed chunk `c` read again, as [`decode`] gives them but peer-to-peer
/// copies kept as such (their source and destination devices are columns of `copies`).
fn decode_records(c: &ChunkRef, chunk: &Chunk, file: &Path) -> Result<Records, StreamError> {
    if c.kind != Kind::PeerCopies {
        return decode(c, chunk, file);
    }
    let mut records = Records::decode(c.kind, chunk).map_err(|why| StreamError::Changed {
        path: file.to_path_buf(),
        why,
    })?;
    // Counted on the first read.
    records.set_aside_damaged(|_, _, _, _| {});
    Ok(records)
}

/// Writes one trace's tables; returns the rows written.
fn write_trace(
    file: &Path,
    trace: &Trace,
    mut index: Indexer,
    keep: &RecordFilter,
    out: &Partition,
) -> Result<u64, ExportError> {
    use tables::*;
    let werr = out.werr();
    let changed = |e: StreamError| match e {
        StreamError::Load(e) => ExportError::Load(e),
        e => ExportError::Changed(e),
    };
    let mut records = rows::RecordTables {
        api: out.open(&API_CALLS)?,
        kernels: out.open(&KERNELS)?,
        copies: out.open(&COPIES)?,
        memsets: out.open(&MEMSETS)?,
        memory: out.open(&MEMORY)?,
        syncs: out.open(&SYNCS)?,
    };
    let mut names = rows::Names::of(trace);
    index.chunks.sort_by_key(|c| c.offset);
    let mut reread = Rereader::open(file).map_err(changed)?;
    for c in &index.chunks {
        let chunk = reread.chunk_of(c).map_err(changed)?;
        let recs = decode_records(c, &chunk, file).map_err(changed)?;
        records
            .write(&mut names, keep, c.thread, recs)
            .map_err(&werr)?;
    }
    let mut rows = records.close().map_err(&werr)?;
    let mut small = |table: &'static Table,
                     f: &dyn Fn(&mut TableFile) -> io::Result<()>|
     -> Result<(), ExportError> {
        let mut t = out.open(table)?;
        f(&mut t).map_err(&werr)?;
        rows += t.close().map_err(&werr)?;
        Ok(())
    };
    small(&PROCESSES, &|t| meta::process(t, trace))?;
    small(&PC_SAMPLES, &|t| meta::pc_samples(t, trace))?;
    small(&KERNEL_METRICS, &|t| meta::kernel_metrics(t, trace))?;
    let mut res = [
        out.open(&THREADS)?,
        out.open(&DEVICES)?,
        out.open(&CONTEXTS)?,
        out.open(&STREAMS)?,
        out.open(&MODULES)?,
    ];
    {
        let [threads, devices, contexts, streams, modules] = &mut res;
        meta::Resources {
            threads,
            devices,
            contexts,
            streams,
            modules,
        }
        .write(trace)
        .map_err(&werr)?;
    }
    for t in res {
        rows += t.close().map_err(&werr)?;
    }
    let mut ranges = out.open(&NVTX_RANGES)?;
    let mut external = out.open(&EXTERNAL_IDS)?;
    if index.nvtx {
        ranges::write(file, trace, keep, &mut ranges, &mut external).map_err(|e| match e {
            Failure::Read(e) => changed(e),
            Failure::Write(e) => werr(e),
        })?;
    }
    rows += ranges.close().map_err(&werr)?;
    rows += external.close().map_err(&werr)?;
    Ok(rows)
}
