//! What `rtrace report` and `rtrace export` read and keep: the filter options, the inputs
//! spooled where they cannot be read twice, and the progress line over them.

use clap::Args;
use std::path::PathBuf;

/// What `rtrace report` and `rtrace export` keep of the traces (docs/cli.md, "Filters").
#[derive(Debug, Default, Args)]
pub struct FilterArgs {
    /// Keep records that start at or after TIME, counted from the earliest process start
    /// among the inputs (2, 1.5s, 250ms, 30us, 1500ns; a bare number is seconds).
    #[arg(long, allow_negative_numbers = true, value_name = "TIME", value_parser = crate::filter::parse_time)]
    pub from: Option<u64>,
    /// Keep records that start before TIME (as --from).
    #[arg(long, allow_negative_numbers = true, value_name = "TIME", value_parser = crate::filter::parse_time)]
    pub to: Option<u64>,
    /// Keep only the traces of process PID (repeat or list: --pid 1,2).
    #[arg(long, value_name = "PID", value_delimiter = ',')]
    pub pid: Vec<u32>,
    /// Keep only GPU records on device N (repeat or list); API records stay.
    #[arg(
        long,
        allow_negative_numbers = true,
        value_name = "N",
        value_delimiter = ','
    )]
    pub device: Vec<u32>,
    /// Keep only GPU records on stream ID (CUPTI's stream id, as the report shows it; repeat
    /// or list); API records stay.
    #[arg(long, value_name = "ID", value_delimiter = ',')]
    pub stream: Vec<u32>,
    /// Keep only kernels whose demangled or mangled name matches REGEX (unanchored; e.g.
    /// 'gemm|conv', '^void at::native'); copies and memsets stay.
    #[arg(long, value_name = "REGEX", value_parser = crate::filter::parse_regex)]
    pub kernel: Option<regex::Regex>,
}

impl FilterArgs {
    /// The filter; why not, where its window holds no time (`--from` at or after `--to`): a
    /// usage error, not an empty report.
    pub fn filter(&self) -> Result<crate::filter::Filter, String> {
        if let (Some(from), Some(to)) = (self.from, self.to) {
            if from >= to {
                let secs = crate::filter::format_seconds;
                return Err(format!(
                    "--from {} is not before --to {}: the window holds no time",
                    secs(from),
                    secs(to)
                ));
            }
        }
        Ok(crate::filter::Filter {
            from_ns: self.from,
            to_ns: self.to,
            pids: self.pid.clone(),
            devices: self.device.clone(),
            streams: self.stream.clone(),
            kernel: self.kernel.clone(),
        })
    }
}

/// Starts the progress line for reading `inputs` `reads` times over (the export reads each
/// file twice; the report once, then only the chunks it needs again).
pub(super) fn start_progress(inputs: &[PathBuf], reads: u64) {
    if let Ok(found) = crate::export::expand_inputs(inputs) {
        let total: u64 = found
            .files
            .iter()
            .filter_map(|f| std::fs::metadata(f).ok())
            .map(|m| m.len())
            .sum();
        crate::progress::start(total.saturating_mul(reads));
    }
}

/// The inputs, those that cannot be read twice (standard input, pipes) copied into temporary
/// files ([`crate::spool`]), saying so; `None` (said) when a copy could not be made.
pub(super) fn spool(files: &[PathBuf]) -> Option<crate::spool::Spooled> {
    let limit = std::env::var(rtrace_format::env::SPOOL_LIMIT).ok();
    let spooled = crate::spool::limit_from(limit.as_deref())
        .and_then(|limit| crate::spool::inputs(files, limit));
    match spooled {
        Ok(s) => {
            for note in &s.notes {
                eprintln!("rtrace: {note}");
            }
            Some(s)
        }
        Err(e) => {
            eprintln!("rtrace: {e}");
            None
        }
    }
}
