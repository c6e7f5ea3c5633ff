//! The `rtrace` command line: clap definitions and the code that runs each
//! subcommand and turns its outcome into messages and an exit code.
//!
//! This file holds the command and `rtrace record`; `report.rs`, `export.rs`, `sass.rs` and
//! `metrics.rs` the other subcommands, over `inputs.rs` (the inputs they read and the filters they take).

use crate::record::{self, RecordOptions};
use clap::{Args, Parser, Subcommand};
use rtrace_format::{env, DEFAULT_OUTPUT};
use std::ffi::OsString;
use std::path::PathBuf;

mod export;
mod inputs;
mod metrics;
mod report;
mod sass;

pub use export::ExportArgs;
pub use inputs::FilterArgs;
pub use metrics::MetricsArgs;
pub use report::ReportArgs;
pub use sass::SassArgs;

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
    Record(Box<RecordArgs>),
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
    /// List Nsight Compute-like metric sets (SpeedOfLight, MemoryWorkloadAnalysis, ...) and
    /// their metrics for a chip, and how many replay passes a choice of sets and metrics costs.
    /// Needs no GPU: CUPTI's Profiler Host API answers from the chip's name.
    ///
    /// Exits 0, 2 when CUPTI cannot be loaded or the chip, a set or a metric is unknown.
    #[command(override_usage = "rtrace metrics --chip <CHIP> [--all] [--format <FORMAT>] [LIST]")]
    Metrics(MetricsArgs),
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
    /// Profile the kernels kept (by --kernel-regex, --kernel-skip and --kernel-count) with
    /// CUPTI's range profiler, replaying each to collect LIST: set names (SpeedOfLight,
    /// MemoryWorkloadAnalysis, ComputeWorkloadAnalysis, Occupancy, WarpStateStats,
    /// InstructionStats) and raw metric names, comma-separated, as `rtrace metrics` lists
    /// them (sets RTRACE_METRICS). Checked before the program starts.
    #[arg(long, value_name = "LIST", value_parser = check_metrics)]
    pub metrics: Option<String>,
    /// How kernel profiling replays: `kernel` (each chosen launch, by CUPTI) or
    /// `application`: each capture range (--capture-range or --nvtx-capture) is profiled
    /// as one unit by running the whole program once per replay pass; the last pass's
    /// trace is kept, and the runs must make the same ranges.
    #[arg(long, value_name = "MODE", value_parser = ["kernel", "application"], default_value = "kernel", requires = "metrics")]
    pub replay: String,
    /// With --replay application: let the program's stdout and stderr through in every
    /// pass (by default only the first pass's; later ones go to /dev/null).
    #[arg(long, requires = "metrics")]
    pub replay_output: bool,
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

fn check_time(s: &str) -> Result<String, String> {
    rtrace_format::parse_time(s).map(|_| s.to_string())
}

fn check_metrics(s: &str) -> Result<String, String> {
    rtrace_format::metric_sets::resolve(s).map(|_| s.trim().to_string())
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
    crate::sys::keep_freed_memory();
    std::process::ExitCode::from(run(Cli::parse()))
}

/// Runs a parsed command line; returns the exit code.
pub fn run(cli: Cli) -> u8 {
    match cli.command {
        Command::Record(args) => run_record(*args),
        Command::Report(args) => report::run(&args),
        Command::Export(args) => export::run(&args),
        Command::Sass(args) => sass::run(&args),
        Command::Metrics(args) => metrics::run(&args),
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
    let application = args.replay == "application";
    if application
        && args.capture_range.as_deref().is_none_or(|r| r == "none")
        && args.nvtx_capture.is_none()
    {
        eprintln!(
            "rtrace: --replay application profiles capture ranges: give --capture-range cudaProfilerApi or --nvtx-capture NAME"
        );
        return 2;
    }
    let mut env: Vec<(String, String)> = Vec::new();
    let mut set = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            env.push((k.to_string(), v));
        }
    };
    set(env::CAPTURE_RANGE, args.capture_range);
    set(env::NVTX_CAPTURE, args.nvtx_capture);
    set(env::NVTX_EXCLUDE, args.nvtx_exclude);
    set(env::DELAY, args.delay);
    set(env::DURATION, args.duration);
    set(env::KERNEL_REGEX, args.kernel_regex);
    set(env::KERNEL_SKIP, args.kernel_skip.map(|n| n.to_string()));
    set(env::KERNEL_COUNT, args.kernel_count.map(|n| n.to_string()));
    set(env::PC_SAMPLING, args.pc_sampling);
    set(env::PC_SAMPLING_STALLS, args.pc_stalls);
    set(env::METRICS, args.metrics);
    let opts = RecordOptions {
        output: Some(args.output),
        lib: args.lib,
        buffer_records: args.buffer_records,
        flush_ms: args.flush_ms,
        gpu_activity: args.gpu_activity,
        env,
        command: args.command,
        quiet: false,
    };
    let recorded = if application {
        crate::record_replay::record_replayed(&opts, args.replay_output).map(|r| {
            eprintln!(
                "rtrace: application replay: the program ran {} time{} (one per replay pass)",
                r.runs,
                if r.runs == 1 { "" } else { "s" }
            );
            r.last
        })
    } else {
        record::record(&opts)
    };
    let rec = match recorded {
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
    for line in record::summary_lines(&rec) {
        eprintln!("rtrace: {line}");
    }
    code
}
