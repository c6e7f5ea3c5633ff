//! `rtrace report`: the report over the traces ([`crate::output`]).

use super::inputs::{spool, start_progress, FilterArgs};
use crate::output::{render, Format, RenderOptions, Section};
use clap::Args;
use std::io::{self, Write};
use std::path::PathBuf;

/// Options of `rtrace report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Output format: `table` for people; `csv` (one table, see --section)
    /// and `json` give durations as integer nanoseconds, in columns and keys named `..._ns`.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// The sections to print, comma-separated or repeated, in every format [default: all of
    /// them for table and JSON; api for CSV, which prints one]. `nsys stats` report names
    /// are accepted for theirs (cuda_api_sum, cuda_gpu_kern_sum, cuda_gpu_mem_time_sum,
    /// nvtx_sum, ...).
    #[arg(long, value_enum, value_name = "SECTION", value_delimiter = ',')]
    pub section: Vec<Section>,
    /// Lay tables out for lines of at most N characters (names in the first column are cut
    /// to fit) [default: the terminal's width when standard output is one; else names are
    /// never cut].
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = clap::value_parser!(u16).range(40..))]
    pub width: Option<u16>,
    /// The nvdisasm that names PC samples' instructions and source lines [default: nvdisasm
    /// on PATH; without one, the PC sampling section gives offsets only and says why].
    #[arg(long, value_name = "PATH")]
    pub nvdisasm: Option<PathBuf>,
    /// Evaluate LIST (set names and raw metric names, comma-separated, as `rtrace metrics`
    /// takes them) from each profiled launch's counter data with CUPTI's host API, for its
    /// set-up's chip, and show them beside the recorded values (no GPU needed).
    #[arg(long, value_name = "LIST")]
    pub metrics: Option<String>,
    /// The libcupti.so.13 that evaluates --metrics [default: $RTRACE_CUPTI_LIBRARY, else
    /// libcupti.so.13 on the loader's path, else in the CUDA toolkit's folders].
    #[arg(long, value_name = "PATH", requires = "metrics")]
    pub cupti: Option<PathBuf>,
    /// Read N traces at once (each on its own thread) [default: 0, as many as the machine has
    /// cores, at most 8]. The report is the same whatever N; memory grows with N.
    #[arg(
        long,
        allow_negative_numbers = true,
        value_name = "N",
        default_value_t = 0
    )]
    pub jobs: usize,
    /// The NVTX ranges compared across ranks in the ranks section: those whose name matches
    /// REGEX [default: `(?i)step`, names holding "step" in any case].
    #[arg(long, value_name = "REGEX")]
    pub steps: Option<String>,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Trace files, or directories: every *.bin trace directly in one is read,
    /// in name order.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
}

/// Runs `rtrace report`; returns the exit code.
pub(super) fn run(args: &ReportArgs) -> u8 {
    if args.format == Format::Csv {
        // A table named twice, or by two of its names, is still one table.
        let first = args.section.first();
        if args.section.iter().any(|s| Some(s) != first) {
            eprintln!(
                "rtrace: --format csv prints one table: choose one --section (the table and \
                 JSON formats take several)"
            );
            return 2;
        }
        if let Some(s) = args.section.first().filter(|s| !s.has_csv()) {
            let name = clap::ValueEnum::to_possible_value(s)
                .map_or_else(String::new, |v| v.get_name().to_string());
            eprintln!(
                "rtrace: --section {name} has no CSV table; use --format table or json for it"
            );
            return 2;
        }
    }
    // The metrics and CUPTI are checked before any trace is read.
    let evaluate = match &args.metrics {
        None => None,
        Some(list) => {
            let chosen = match crate::metrics::resolve(list) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("rtrace: --metrics: {e}");
                    return 2;
                }
            };
            let path = crate::metrics::library_path(args.cupti.as_deref());
            match crate::metrics::Cupti::load(path.as_deref()) {
                Ok(cupti) => Some((cupti, chosen)),
                Err(e) => {
                    eprintln!("rtrace: {e}");
                    return 2;
                }
            }
        }
    };
    let steps = match &args.steps {
        None => crate::report::ranks::StepNames::default(),
        Some(p) => match regex::Regex::new(p) {
            Ok(re) => crate::report::ranks::StepNames(re),
            Err(e) => {
                eprintln!("rtrace: --steps: {e}");
                return 2;
            }
        },
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
    start_progress(spooled.paths(), 1);
    let options = RenderOptions {
        format: args.format,
        sections: args.section.clone(),
        // Piped or redirected: whole names, for tools that join on them.
        width: args
            .width
            .map(usize::from)
            .or_else(crate::sys::terminal_width)
            .unwrap_or(usize::MAX),
        nvdisasm: args.nvdisasm.clone(),
        filter: (!filter.is_empty()).then(|| filter.to_string()),
    };
    // Read as streams: memory bounded by the distinct keys, not the records (crate::report);
    // only what the sections asked for needs.
    let read = crate::report::report_inputs(
        spooled.paths(),
        &filter,
        crate::read::parallel::Jobs::new(args.jobs),
        &steps,
        options.needs(),
    );
    crate::progress::finish();
    let (loaded, mut sections) = match read {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rtrace: {e}");
            return 2;
        }
    };
    if !filter.is_empty() {
        eprintln!("rtrace: filter: {filter}");
    }
    if let Some((cupti, chosen)) = &evaluate {
        let names = chosen.iter().map(|c| c.name.clone()).collect();
        let evaluator = crate::metrics::Evaluator::new(cupti, names);
        crate::profiles::add_evaluated(
            &mut sections.profiles,
            &loaded.traces,
            &|setup, image, range| evaluator.evaluate(setup, image, range),
        );
    }
    let report = render(&loaded.traces, &sections, &options);
    let mut stdout = io::stdout().lock();
    if let Err(e) = stdout
        .write_all(report.as_bytes())
        .and_then(|_| stdout.flush())
    {
        if e.kind() == io::ErrorKind::BrokenPipe {
            return 0;
        }
        eprintln!(
            "rtrace: writing the report: {}",
            crate::read::inputs::io_message(&e)
        );
        return 1;
    }
    for line in &loaded.skipped {
        eprintln!("warning: {line}");
    }
    for t in &loaded.traces {
        if let Some(shift) = &t.clock_shift {
            eprintln!(
                "rtrace: {}: {}",
                t.path.display(),
                crate::clocks::describe(shift)
            );
        }
        if let Some(damage) = &t.damage {
            eprintln!("warning: {}: {damage}", t.path.display());
        }
        for bad in &t.bad_chunks {
            eprintln!("warning: {}: skipped the {bad}", t.path.display());
        }
        // The table has these in the process section already.
        if let (Some(damaged), false) = (t.damaged.describe(), args.format == Format::Table) {
            eprintln!("warning: {}: {damaged}", t.path.display());
        }
        // The table has this warning in the process section already.
        if let (Some(lost), false) = (t.lost_warning(false), args.format == Format::Table) {
            eprintln!("warning: {}: {lost}", t.path.display());
        }
    }
    0
}
