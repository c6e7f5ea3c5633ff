//! `rtrace metrics`: metric sets and their replay passes for a chip ([`crate::metrics`]).

use crate::metrics::{self, render, Cupti};
use clap::{Args, ValueEnum};
use std::io::{self, Write};
use std::path::PathBuf;

/// Output formats of `rtrace metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MetricsFormat {
    /// Columns for people.
    Table,
    /// One JSON object.
    Json,
}

/// Options of `rtrace metrics`.
#[derive(Debug, Args)]
pub struct MetricsArgs {
    /// The chip (GA100, GH100, ...), as CUPTI names it; required (no GPU is asked). An unknown
    /// chip is refused with the list of supported ones.
    #[arg(long, value_name = "CHIP")]
    pub chip: Option<String>,
    /// The libcupti.so.13 to load [default: $RTRACE_CUPTI_LIBRARY, else libcupti.so.13 on the
    /// loader's path]; the libnvperf_host.so beside it is loaded first.
    #[arg(long, value_name = "PATH")]
    pub cupti: Option<PathBuf>,
    /// List every base metric the chip has (counter, ratio, throughput) instead of sets.
    #[arg(long, conflicts_with = "list")]
    pub all: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: MetricsFormat,
    /// Set names and metric names, comma-separated (`SpeedOfLight,dram__bytes_read.sum`): lists
    /// their metrics and the passes they cost together. Without it: the sets and each one's cost.
    #[arg(value_name = "LIST")]
    pub list: Option<String>,
}

/// Runs `rtrace metrics`; returns the exit code.
pub(super) fn run(args: &MetricsArgs) -> u8 {
    let text = match listing(args) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("rtrace: {e}");
            return 2;
        }
    };
    let mut stdout = io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|_| stdout.flush())
    {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            eprintln!("rtrace: writing the listing: {e}");
            1
        }
        _ => 0,
    }
}

/// The listing `args` ask for.
pub fn listing(args: &MetricsArgs) -> Result<String, String> {
    // A LIST's names are checked before CUPTI is loaded or a chip asked for.
    if let Some(list) = &args.list {
        metrics::resolve(list)?;
    }
    let cupti = Cupti::load(metrics::library_path(args.cupti.as_deref()).as_deref())?;
    let chip = metrics::chip(&cupti, args.chip.as_deref())?;
    let json = args.format == MetricsFormat::Json;
    if args.all {
        let base = metrics::base_metrics(&cupti, &chip)?;
        return Ok(if json {
            render::base_json(&chip, &base)
        } else {
            render::base_table(&base)
        });
    }
    if let Some(list) = &args.list {
        let c = metrics::choose(&cupti, &chip, list)?;
        return Ok(if json {
            render::choice_json(&c)
        } else {
            render::choice_table(&c)
        });
    }
    let sets = metrics::set_costs(&cupti, &chip)?;
    let names: Vec<&str> = metrics::sets::SETS.iter().map(|s| s.name).collect();
    let all = metrics::choose(&cupti, &chip, &names.join(","))?;
    Ok(if json {
        render::sets_json(&chip, &sets, &all)
    } else {
        render::sets_table(&chip, &sets, &all)
    })
}
