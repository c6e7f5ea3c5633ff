//! `rtrace export`: the traces as a timeline ([`crate::export`]).

use super::inputs::{spool, start_progress, FilterArgs};
use clap::Args;
use std::io;
use std::path::PathBuf;

/// Options of `rtrace export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// `perfetto`: Perfetto's protobuf trace (ui.perfetto.dev, any size);
    /// `chrome`: Chrome's JSON trace events (viewers fail past about 256 MB).
    #[arg(long, value_enum)]
    pub format: crate::export::ExportFormat,
    /// Write to FILE (written in full, then renamed into place) instead of
    /// standard output; `-` is standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Trace files, or directories: every *.bin trace directly in one is read,
    /// in name order. One process each in the output.
    #[arg(value_name = "TRACE", required = true)]
    pub files: Vec<PathBuf>,
}

/// Runs `rtrace export`; returns the exit code.
pub(super) fn run(args: &ExportArgs) -> u8 {
    use crate::export::{expand_inputs, export_filtered, ExportFormat};
    use std::io::IsTerminal;
    let output = args
        .output
        .as_deref()
        .filter(|p| *p != std::path::Path::new("-"));
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
    if output.is_none() && args.format == ExportFormat::Perfetto && io::stdout().is_terminal() {
        eprintln!(
            "rtrace: a Perfetto trace is binary: name a file with --output FILE, or redirect \
             standard output"
        );
        return 2;
    }
    for line in &inputs.skipped {
        eprintln!("warning: {line}");
    }
    let filter = args.filter.filter();
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
    let exported = export_filtered(&inputs.files, args.format, output, &filter);
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
