//! `rtrace export`: the traces as a timeline ([`crate::export`]).

use super::inputs::{spool, start_progress, FilterArgs};
use clap::Args;
use std::io;
use std::path::PathBuf;

/// Options of `rtrace export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// `perfetto`: Perfetto's protobuf trace (ui.perfetto.dev, any size);
    /// `chrome`: Chrome's JSON trace events (viewers fail past about 256 MB);
    /// `parquet`: a Parquet dataset, a table per kind of record (docs/parquet.md).
    #[arg(long, value_enum)]
    pub format: Format,
    /// Write to FILE (written in full, then renamed into place) instead of
    /// standard output; `-` is standard output. An existing file is not replaced
    /// without --force-overwrite. With `--format parquet`: the dataset's directory
    /// (required; it must not exist or be empty).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace an earlier file at FILE once the new one is complete (never one of
    /// the traces exported); with `--format parquet`, an earlier dataset at the
    /// output directory (one holding `_schema.json`).
    #[arg(long)]
    pub force_overwrite: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Trace files, or directories: every *.bin trace directly in one is read,
    /// in name order. One process each in the output.
    #[arg(value_name = "TRACE", required = true)]
    pub files: Vec<PathBuf>,
}

/// What `rtrace export --format` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Perfetto's protobuf trace format, for ui.perfetto.dev (any size).
    Perfetto,
    /// Chrome's JSON trace event format, for chrome://tracing and other
    /// viewers (which fail on files past about 256 MB).
    Chrome,
    /// A Parquet dataset: a table per kind of record, partitioned by host and
    /// process (docs/parquet.md).
    Parquet,
}

/// Runs `rtrace export`; returns the exit code.
pub(super) fn run(args: &ExportArgs) -> u8 {
    use crate::export::{expand_inputs, export_filtered, ExportFormat};
    use std::io::IsTerminal;
    let output = args
        .output
        .as_deref()
        .filter(|p| *p != std::path::Path::new("-"));
    let format = match args.format {
        Format::Perfetto => ExportFormat::Perfetto,
        Format::Chrome => ExportFormat::Chrome,
        Format::Parquet => {
            let Some(dir) = output else {
                eprintln!("rtrace: --format parquet writes a directory: name it with --output DIR");
                return 2;
            };
            if let Err(e) = crate::export::parquet::check_output(dir, args.force_overwrite) {
                eprintln!("rtrace: {e}");
                return 2;
            }
            ExportFormat::Perfetto
        }
    };
    let filter = match args.filter.filter() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("rtrace: {e}");
            return 2;
        }
    };
    let Some(spooled) = spool(&args.files) else {
        return 2;
    };
    let inputs = match expand_inputs(spooled.paths()) {
        Ok(inputs) => inputs,
        Err(e) => {
            eprintln!("rtrace: {e}");
            return 2;
        }
    };
    if output.is_none() && format == ExportFormat::Perfetto && io::stdout().is_terminal() {
        eprintln!(
            "rtrace: a Perfetto trace is binary: name a file with --output FILE, or redirect \
             standard output"
        );
        return 2;
    }
    if let Some(path) = output.filter(|_| args.format != Format::Parquet) {
        if let Err(e) = check_output_file(path, args.force_overwrite, &inputs.files) {
            eprintln!("rtrace: --output {}: {e}", path.display());
            return 2;
        }
    }
    for line in &inputs.skipped {
        eprintln!("warning: {line}");
    }
    if !filter.is_empty() {
        if !filter.pids.is_empty() {
            match crate::filter::process_starts(&inputs.files) {
                Ok(starts) if !starts.iter().any(|&(pid, _)| filter.keeps_process(pid)) => {
                    let all: Vec<String> = starts.iter().map(|(p, _)| p.to_string()).collect();
                    let asked: Vec<String> = filter.pids.iter().map(u32::to_string).collect();
                    eprintln!(
                        "rtrace: no trace of process {} among the inputs (their processes: {})",
                        asked.join(", "),
                        all.join(", ")
                    );
                    return 2;
                }
                Ok(_) => {}
                Err(e) => {
                    eprintln!("rtrace: {e}");
                    return 2;
                }
            }
        }
        eprintln!("rtrace: filter: {filter}");
    }
    start_progress(&inputs.files, 2);
    if args.format == Format::Parquet {
        return parquet(
            &inputs.files,
            output.unwrap_or(std::path::Path::new("-")),
            args,
            &filter,
        );
    }
    let exported = export_filtered(&inputs.files, format, output, &filter);
    crate::progress::finish();
    match exported {
        Ok(outcome) => {
            for line in &outcome.clock_notes {
                eprintln!("rtrace: {line}");
            }
            for line in &outcome.warnings {
                eprintln!("warning: {line}");
            }
            if let Some(path) = output {
                let s = &outcome.stats;
                eprintln!(
                    "rtrace: wrote {} ({}): {} {}, {} slices, {} flows, {} counter values",
                    path.display(),
                    crate::text::human_bytes(s.bytes),
                    s.traces,
                    if s.traces == 1 {
                        "process"
                    } else {
                        "processes"
                    },
                    s.slices,
                    s.flows,
                    s.counter_values
                );
            }
            0
        }
        Err(e) if e.is_broken_pipe() => 0,
        Err(e) => {
            eprintln!("rtrace: {e}");
            e.exit_code()
        }
    }
}

/// Whether the timeline may be written at `path`: not a directory, in a directory that
/// exists, and not a file already there (unless `force`), never one of the `inputs`. A FIFO or
/// a device (`/dev/null`) is written to as it is.
fn check_output_file(
    path: &std::path::Path,
    force: bool,
    inputs: &[PathBuf],
) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    if path.as_os_str().as_encoded_bytes().ends_with(b"/") || path.is_dir() {
        return Err("is a directory; name a file, e.g. trace.pftrace".into());
    }
    let Ok(meta) = std::fs::metadata(path) else {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => std::path::Path::new("."),
        };
        return match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => Ok(()),
            Ok(_) => Err(format!("{} is not a directory", dir.display())),
            Err(_) => Err(format!("the directory {} does not exist", dir.display())),
        };
    };
    if !meta.is_file() {
        return Ok(());
    }
    let same = |p: &PathBuf| {
        std::fs::metadata(p).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
    };
    if inputs.iter().any(same) {
        return Err("is one of the traces being exported".into());
    }
    if !force {
        return Err("exists; give another name, or --force-overwrite to replace it".into());
    }
    Ok(())
}

/// `rtrace export --format parquet -o DIR`.
fn parquet(
    files: &[PathBuf],
    dir: &std::path::Path,
    args: &ExportArgs,
    filter: &crate::filter::Filter,
) -> u8 {
    let exported = crate::export::parquet::export_dataset(files, dir, args.force_overwrite, filter);
    crate::progress::finish();
    match exported {
        Ok(w) => {
            for line in &w.clock_notes {
                eprintln!("rtrace: {line}");
            }
            for line in &w.warnings {
                eprintln!("warning: {line}");
            }
            eprintln!(
                "rtrace: wrote {} ({}): {} {}, {} rows in {} files",
                dir.display(),
                crate::text::human_bytes(w.bytes),
                w.traces,
                if w.traces == 1 {
                    "process"
                } else {
                    "processes"
                },
                w.rows,
                w.files
            );
            0
        }
        Err(e) => {
            eprintln!("rtrace: {e}");
            e.exit_code()
        }
    }
}
