//! The `rtrace` command line: clap definitions and the code that runs each
//! subcommand and turns its outcome into messages and an exit code.

use crate::output::{render_sections, Format, Section};
use crate::read::load_inputs;
use crate::record::{self, RecordOptions, DEFAULT_OUTPUT};
use clap::{Args, Parser, Subcommand};
use std::ffi::OsString;
use std::io::{self, Write};
use std::path::PathBuf;

/// Trace the CUDA driver API calls of a program and report on them.
#[derive(Debug, Parser)]
#[command(name = "rtrace", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// rtrace's subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a program with librtrace.so preloaded, recording its CUDA driver calls.
    ///
    /// Exits with the program's exit status (128+S if signal S killed it), 127
    /// if it could not be started, 2 if rtrace could not set up the run.
    #[command(override_usage = "rtrace record [OPTIONS] [--] <PROGRAM> [ARGS]...")]
    Record(RecordArgs),
    /// Summarise traces: each process, one row per driver function, then GPU
    /// kernels, copies, memsets, utilisation and launch latency when recorded.
    ///
    /// Exits 0 (also when a damaged file was reported up to the damage), 2 when
    /// an input cannot be read as a trace.
    Report(ReportArgs),
    /// Convert traces into a timeline for a trace viewer: Perfetto's format
    /// (open it in ui.perfetto.dev) or Chrome's JSON trace format.
    ///
    /// Threads show a slice per API call; each GPU device a track per stream
    /// with its kernels, copies and memsets; flows link calls to the GPU work
    /// they launched; counters show memory in use per device. Exits 0, 2 when
    /// an input cannot be read as a trace, 1 when the output cannot be written.
    #[command(override_usage = "rtrace export --format <FORMAT> [--output <FILE>] <TRACE>...")]
    Export(ExportArgs),
    /// Print the SASS of the kernels in the traces' stored module images (cubins), each
    /// instruction under its source line (code built with -lineinfo) and that line's text when
    /// the source file is found. Needs nvdisasm.
    ///
    /// Exits 0, 2 when an input cannot be read, holds no module image, or nvdisasm is missing
    /// or fails.
    Sass(SassArgs),
}

/// Options of `rtrace sass`.
#[derive(Debug, Args)]
pub struct SassArgs {
    /// Only kernels whose demangled or mangled name matches REGEX.
    #[arg(long, value_name = "REGEX", value_parser = crate::filter::parse_regex)]
    pub kernel: Option<regex::Regex>,
    /// The nvdisasm to run [default: nvdisasm on PATH].
    #[arg(long, value_name = "PATH")]
    pub nvdisasm: Option<PathBuf>,
    /// Where to look for a source file that is not at the path its line info names (by its
    /// file name).
    #[arg(long, value_name = "DIR")]
    pub source_dir: Option<PathBuf>,
    /// Trace files, or directories of them.
    #[arg(value_name = "TRACE", required = true)]
    pub files: Vec<PathBuf>,
}

/// Options of `rtrace record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Trace path pattern: %p is replaced by the process id, %h by the host
    /// name; a relative pattern is taken from the current directory.
    #[arg(short, long, value_name = "PATTERN", default_value = DEFAULT_OUTPUT)]
    pub output: PathBuf,
    /// The librtrace.so to preload [default: $RTRACE_LIB, else librtrace.so
    /// next to the rtrace executable].
    #[arg(long, value_name = "PATH")]
    pub lib: Option<PathBuf>,
    /// Per-thread buffer capacity in API records, a power of two (sets
    /// RTRACE_BUFFER_RECORDS; the library's default is 65536).
    #[arg(long, value_name = "N", value_parser = parse_power_of_two)]
    pub buffer_records: Option<u64>,
    /// Write out partly filled buffers at least every N ms (sets
    /// RTRACE_FLUSH_MS; the library's default is 200).
    #[arg(long, value_name = "N")]
    pub flush_ms: Option<u64>,
    /// Also record GPU activity through CUPTI (sets RTRACE_GPU_ACTIVITY): kernels, memory
    /// copies and memsets; `=all` adds allocations and synchronizations; or a list of
    /// kernel,memcpy,memset,memory,sync.
    #[arg(long, value_name = "KINDS", num_args = 0..=1, require_equals = true, default_missing_value = "1")]
    pub gpu_activity: Option<String>,
    /// Record only between the program's cuProfilerStart and cuProfilerStop
    /// (`cudaProfilerApi`; sets RTRACE_CAPTURE_RANGE).
    #[arg(long, value_name = "RANGE", value_parser = ["cudaProfilerApi", "none"])]
    pub capture_range: Option<String>,
    /// Record only inside NVTX ranges NAME[@DOMAIN][,...] (sets RTRACE_NVTX_CAPTURE).
    #[arg(long, value_name = "RANGES")]
    pub nvtx_capture: Option<String>,
    /// Record nothing inside NVTX ranges NAME[@DOMAIN][,...] (sets RTRACE_NVTX_EXCLUDE).
    #[arg(long, value_name = "RANGES")]
    pub nvtx_exclude: Option<String>,
    /// Record nothing until TIME after the program starts (sets RTRACE_DELAY).
    #[arg(long, value_name = "TIME", value_parser = check_time)]
    pub delay: Option<String>,
    /// Stop recording TIME after it began (sets RTRACE_DURATION).
    #[arg(long, value_name = "TIME", value_parser = check_time)]
    pub duration: Option<String>,
    /// Keep only kernels whose demangled or mangled name matches REGEX (sets
    /// RTRACE_KERNEL_REGEX).
    #[arg(long, value_name = "REGEX", value_parser = check_regex)]
    pub kernel_regex: Option<String>,
    /// Of the kernels kept, leave out the first N (sets RTRACE_KERNEL_SKIP).
    #[arg(long, value_name = "N")]
    pub kernel_skip: Option<u64>,
    /// Of the kernels kept, after the skipped ones, keep N (sets RTRACE_KERNEL_COUNT).
    #[arg(long, value_name = "N")]
    pub kernel_count: Option<u64>,
    /// Sample the PCs of running kernels with their warps' stall reasons, through CUPTI's PC
    /// Sampling API (sets RTRACE_PC_SAMPLING): one sample every 2^PERIOD cycles per SM
    /// (5..31; without a value, CUPTI's default). Turns on module records and images.
    #[arg(long, value_name = "PERIOD", num_args = 0..=1, require_equals = true, default_missing_value = "1", value_parser = check_period)]
    pub pc_sampling: Option<String>,
    /// Stall reasons to sample, comma-separated (`long_scoreboard,mio_throttle`; CUPTI's
    /// names without `smsp__pcsamp_warps_issue_stalled_`); all by default (sets
    /// RTRACE_PC_SAMPLING_STALLS).
    #[arg(long, value_name = "REASONS", requires = "pc_sampling")]
    pub pc_stalls: Option<String>,
    /// The program to run, and its arguments (put them after `--`).
    #[arg(
        value_name = "PROGRAM",
        required = true,
        num_args = 1..,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<OsString>,
}

/// What `rtrace report` and `rtrace export` keep of the traces (docs/cli.md, "Filters").
#[derive(Debug, Default, Args)]
pub struct FilterArgs {
    /// Keep records that start at or after TIME, counted from the earliest process start
    /// among the inputs (2, 1.5s, 250ms, 30us, 1500ns; a bare number is seconds).
    #[arg(long, value_name = "TIME", value_parser = crate::filter::parse_time)]
    pub from: Option<u64>,
    /// Keep records that start before TIME (as --from).
    #[arg(long, value_name = "TIME", value_parser = crate::filter::parse_time)]
    pub to: Option<u64>,
    /// Keep only the traces of process PID (repeat or list: --pid 1,2).
    #[arg(long, value_name = "PID", value_delimiter = ',')]
    pub pid: Vec<u32>,
    /// Keep only GPU records on device N (repeat or list); API records stay.
    #[arg(long, value_name = "N", value_delimiter = ',')]
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
    pub fn filter(&self) -> crate::filter::Filter {
        crate::filter::Filter {
            from_ns: self.from,
            to_ns: self.to,
            pids: self.pid.clone(),
            devices: self.device.clone(),
            streams: self.stream.clone(),
            kernel: self.kernel.clone(),
        }
    }
}

/// Options of `rtrace report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Output format: `table` for people; `csv` (one table, see --section)
    /// and `json` give durations as integer nanoseconds.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// The table `--format csv` prints [default: api]; only with `--format csv`.
    #[arg(long, value_enum, value_name = "SECTION")]
    pub section: Option<Section>,
    /// Lay tables out for lines of at most N characters (names in the first column are cut
    /// to fit) [default: the terminal's width when standard output is one, else 120].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(40..))]
    pub width: Option<u16>,
    /// The nvdisasm that names PC samples' instructions and source lines [default: nvdisasm
    /// on PATH; without one, the PC sampling section gives offsets only and says why].
    #[arg(long, value_name = "PATH")]
    pub nvdisasm: Option<PathBuf>,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Trace files, or directories: every *.bin trace directly in one is read,
    /// in name order.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
}

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

fn check_time(s: &str) -> Result<String, String> {
    rtrace_format::parse_time(s).map(|_| s.to_string())
}

fn check_regex(s: &str) -> Result<String, String> {
    crate::filter::parse_regex(s).map(|_| s.to_string())
}

fn parse_power_of_two(s: &str) -> Result<u64, String> {
    let n: u64 = s.parse().map_err(|e| format!("{e}"))?;
    if n.is_power_of_two() {
        Ok(n)
    } else {
        Err(format!("{n} is not a power of two (e.g. 65536)"))
    }
}

/// Parses the process's arguments, runs the subcommand, and returns the exit
/// code. Usage errors exit through clap (code 2).
pub fn main() -> std::process::ExitCode {
    keep_freed_memory();
    std::process::ExitCode::from(run(Cli::parse()))
}

/// The readers take a trace a chunk at a time: each chunk's payload and its decoded records
/// are a few megabytes, allocated and freed again at once. glibc maps blocks that large with
/// their own `mmap` and gives them back with `munmap` (and trims the heap's free top), so every
/// chunk faulted in and zeroed fresh pages: a third of `rtrace report`'s time on a 10M-record
/// trace went to the kernel. Such blocks are kept in the heap instead, to be used again: that
/// report took 1.34-1.42 s instead of 1.80-2.01 s (system time 0.11-0.14 s instead of
/// 0.53-0.73 s), its peak memory about the same, as what is kept is what was in use anyway
/// (docs/benchmarks.md). Called first, while the process has one thread.
#[allow(unsafe_code)]
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets two of glibc's malloc parameters, before any other thread
    // exists; a value it refuses leaves the default.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

/// Runs a parsed command line; returns the exit code.
pub fn run(cli: Cli) -> u8 {
    match cli.command {
        Command::Record(args) => run_record(args),
        Command::Report(args) => run_report(&args),
        Command::Export(args) => run_export(&args),
        Command::Sass(args) => run_sass(&args),
    }
}

fn run_sass(args: &SassArgs) -> u8 {
    let nvdisasm = match crate::sass::find_nvdisasm(args.nvdisasm.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rtrace: {e}");
            return 2;
        }
    };
    let Some(spooled) = spool(&args.files) else {
        return 2;
    };
    let loaded = match load_inputs(spooled.paths()) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("rtrace: {e}");
            return 2;
        }
    };
    let mut sources = crate::sass::Sources::new(args.source_dir.clone());
    match crate::sass::render(
        &loaded.traces,
        &nvdisasm,
        args.kernel.as_ref(),
        &mut sources,
    ) {
        Ok(text) => {
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
        Err(e) => {
            eprintln!("rtrace: {e}");
            2
        }
    }
}

/// The width of the terminal standard output is, if it is one (at least 40).
#[allow(unsafe_code)]
fn terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !io::stdout().is_terminal() {
        return None;
    }
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ fills a winsize through a valid pointer; the descriptor is stdout's.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    (rc == 0 && size.ws_col > 0).then(|| usize::from(size.ws_col).max(40))
}

/// Starts the progress line for reading `inputs` (files, or directories of them).
/// Starts the progress line for reading `inputs` `reads` times over (the export reads each
/// file twice; the report once, then only the chunks it needs again).
fn start_progress(inputs: &[PathBuf], reads: u64) {
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
fn spool(files: &[PathBuf]) -> Option<crate::spool::Spooled> {
    match crate::spool::inputs(files) {
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

fn run_report(args: &ReportArgs) -> u8 {
    if args.section.is_some() && args.format != Format::Csv {
        eprintln!(
            "rtrace: --section chooses the table of --format csv; the table and JSON \
             formats hold every section"
        );
        return 2;
    }
    let Some(spooled) = spool(&args.files) else {
        return 2;
    };
    start_progress(spooled.paths(), 1);
    let filter = args.filter.filter();
    // Read as streams: memory bounded by the distinct keys, not the records (crate::report).
    let read = crate::report::report_inputs(spooled.paths(), &filter);
    crate::progress::finish();
    let (loaded, sections) = match read {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rtrace: {e}");
            return 2;
        }
    };
    if !filter.is_empty() {
        eprintln!("rtrace: filter: {filter}");
    }
    crate::output::set_table_width(
        args.width
            .map(usize::from)
            .or_else(terminal_width)
            .unwrap_or(crate::output::TABLE_WIDTH),
    );
    crate::pcsamp::set_nvdisasm(args.nvdisasm.clone());
    let report = render_sections(
        &loaded.traces,
        &sections,
        args.format,
        args.section.unwrap_or_default(),
    );
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
        // The table has this warning in the process section already.
        if t.dropped > 0 && args.format != Format::Table {
            eprintln!(
                "warning: {}: {} API records were lost (a thread's buffer was full); \
                 try a larger --buffer-records",
                t.path.display(),
                t.dropped
            );
        }
    }
    0
}

fn run_export(args: &ExportArgs) -> u8 {
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
                    crate::output::human_bytes(s.bytes),
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

/// `--pc-sampling`'s value: `1` (CUPTI's period) or a period 5..=31.
fn check_period(v: &str) -> Result<String, String> {
    match v.parse::<u32>() {
        Ok(1) | Ok(5..=31) => Ok(v.to_string()),
        _ => Err(format!(
            "'{v}' is not a sampling period: give N in 5..31 (one sample every 2^N cycles)"
        )),
    }
}

fn run_record(args: RecordArgs) -> u8 {
    let mut env: Vec<(String, String)> = Vec::new();
    let mut set = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            env.push((k.to_string(), v));
        }
    };
    set("RTRACE_CAPTURE_RANGE", args.capture_range);
    set("RTRACE_NVTX_CAPTURE", args.nvtx_capture);
    set("RTRACE_NVTX_EXCLUDE", args.nvtx_exclude);
    set("RTRACE_DELAY", args.delay);
    set("RTRACE_DURATION", args.duration);
    set("RTRACE_KERNEL_REGEX", args.kernel_regex);
    set(
        "RTRACE_KERNEL_SKIP",
        args.kernel_skip.map(|n| n.to_string()),
    );
    set(
        "RTRACE_KERNEL_COUNT",
        args.kernel_count.map(|n| n.to_string()),
    );
    set("RTRACE_PC_SAMPLING", args.pc_sampling);
    set("RTRACE_PC_SAMPLING_STALLS", args.pc_stalls);
    let opts = RecordOptions {
        output: Some(args.output),
        lib: args.lib,
        buffer_records: args.buffer_records,
        flush_ms: args.flush_ms,
        gpu_activity: args.gpu_activity,
        env,
        command: args.command,
    };
    let rec = match record::record(&opts) {
        Ok(rec) => rec,
        Err(e) => {
            eprintln!("rtrace: {e}");
            return e.exit_code();
        }
    };
    let (code, killed) = record::exit_code(&opts.command[0], rec.status);
    if let Some(line) = killed {
        eprintln!("rtrace: {line}");
    }
    if rec.traces.is_empty() {
        eprintln!("rtrace: no trace was written (the program made no CUDA driver calls)");
    } else {
        let paths: Vec<String> = rec.traces.iter().map(|p| p.display().to_string()).collect();
        eprintln!("rtrace: trace written to {}", paths.join(", "));
    }
    code
}
