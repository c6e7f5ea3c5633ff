//! The `rtrace` command line: clap definitions and the code that runs each
//! subcommand and turns its outcome into messages and an exit code.
//!
//! This file holds the command and `rtrace record`; `report.rs`, `export.rs`, `sass.rs` and
//! `metrics.rs` the other subcommands, over `inputs.rs` (the inputs they read and the filters they take).

use crate::record::{self, RecordOptions, Traced};
use clap::{Args, Parser, Subcommand};
use rtrace_format::{env, DEFAULT_OUTPUT};
use std::ffi::OsString;
use std::path::PathBuf;

mod export;
mod inputs;
mod metrics;
mod report;
mod sampler;
mod sass;
mod values;
use values::{
    check_metrics, check_period, check_regex, check_runtime_route, check_stalls, check_time,
    parse_buffer_records, parse_flush_ms,
};

pub use export::{ExportArgs, Format as ExportOutputFormat};
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
    /// Run a program with librtrace.so preloaded, recording its CUDA driver calls, its GPU
    /// activity (kernels, copies, memsets) and NVTX ranges (see -t).
    ///
    /// Exits with the program's exit status (128+S if signal S killed it), 127
    /// if it could not be started, 2 for a usage error or if rtrace could not set up the run.
    #[command(override_usage = "rtrace record [OPTIONS] [--] <PROGRAM> [ARGS]...")]
    Record(Box<RecordArgs>),
    /// Summarise traces: each process, one row per driver function, then GPU
    /// kernels, copies, memsets, utilisation and launch latency when recorded.
    ///
    /// Exits 0 (also when a damaged file was reported up to the damage), 2 when
    /// an input cannot be read as a trace.
    Report(ReportArgs),
    /// Convert traces into a timeline for a trace viewer (Perfetto's format, for
    /// ui.perfetto.dev, or Chrome's JSON trace format) or into a Parquet dataset.
    ///
    /// Threads show a slice per API call; each GPU device a track per stream
    /// with its kernels, copies and memsets; flows link calls to the GPU work
    /// they launched; counters show memory in use per device. The Parquet dataset
    /// holds a table per kind of record (docs/parquet.md). Exits 0, 2 when
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
    /// The GPU metrics sampler `rtrace record --gpu-metrics` runs beside the program (not
    /// meant to be run by hand): samples every GPU through CUPTI's PM Sampling API into a trace
    /// of its own until its standard input ends.
    #[command(hide = true)]
    GpuSampler(sampler::GpuSamplerArgs),
}

/// Options of `rtrace record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// What to trace, comma-separated: cuda (CUDA driver API calls, always recorded with
    /// anything else), gpu (kernels, graphs' kernels, memory copies, memsets and the
    /// contexts, streams and modules they ran in), or GPU activity kinds one by one (kernel,
    /// memcpy, memset, memory, sync, resources), nvtx; or none (nothing: an untraced run)
    /// [default: cuda,gpu,nvtx]. -t cuda records API calls only.
    #[arg(short = 't', long = "trace", value_name = "LIST", value_parser = Traced::parse)]
    pub trace: Option<Traced>,
    /// Trace path pattern: %p is replaced by the process id, %h by the host name, %q{VAR} by
    /// the value of the environment variable VAR in the traced process (empty when unset;
    /// e.g. %q{RANK} under torchrun), %% by %; a relative pattern is taken from the current
    /// directory. A name that is taken gets NAME.1.bin beside it (see --force-overwrite).
    #[arg(short, long, value_name = "PATTERN", default_value = DEFAULT_OUTPUT)]
    pub output: PathBuf,
    /// Replace an earlier file at a trace's name (a regular file of yours that is not a trace
    /// of this run) instead of writing beside it; never a link, FIFO, device or another
    /// user's file (sets RTRACE_FORCE_OVERWRITE).
    #[arg(long)]
    pub force_overwrite: bool,
    /// After the run, print the report of the run's traces (`rtrace report TRACE...`);
    /// `--stats=true`/`=false` as nsys takes it.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = clap::builder::BoolishValueParser::new())]
    pub stats: bool,
    /// The librtrace.so to preload [default: $RTRACE_LIB, else librtrace.so
    /// next to the rtrace executable].
    #[arg(long, value_name = "PATH")]
    pub lib: Option<PathBuf>,
    /// Per-thread buffer capacity in API records, a power of two from 64 to 16777216 (sets
    /// RTRACE_BUFFER_RECORDS; the library's default is 65536).
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = parse_buffer_records)]
    pub buffer_records: Option<u64>,
    /// Write out partly filled buffers at least every N ms, 1 to 1000 (sets
    /// RTRACE_FLUSH_MS; the library's default is 200).
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = parse_flush_ms)]
    pub flush_ms: Option<u64>,
    /// The GPU activity kinds to record, as RTRACE_GPU_ACTIVITY takes them: without a value
    /// (or =1) kernels, copies, memsets and resources, as by default; =all adds
    /// allocations and synchronizations; =0 none; or a list of kernel, memcpy, memset,
    /// memory, sync, resources. API calls and NVTX are recorded as by default. The older
    /// form of -t, which it cannot be combined with.
    #[arg(long, value_name = "KINDS", num_args = 0..=1, require_equals = true, default_missing_value = "1", value_parser = Traced::from_gpu_activity, conflicts_with = "trace")]
    pub gpu_activity: Option<Traced>,
    /// Record only between the program's cuProfilerStart and cuProfilerStop
    /// (`cudaProfilerApi`; sets RTRACE_CAPTURE_RANGE); `none`: the whole run, as without it.
    #[arg(long, value_name = "RANGE", value_parser = ["cudaProfilerApi", "none"])]
    pub capture_range: Option<String>,
    /// Record only inside NVTX ranges NAME[@DOMAIN][,...] (sets RTRACE_NVTX_CAPTURE).
    #[arg(long, value_name = "RANGES")]
    pub nvtx_capture: Option<String>,
    /// Record nothing inside NVTX ranges NAME[@DOMAIN][,...] (sets RTRACE_NVTX_EXCLUDE).
    #[arg(long, value_name = "RANGES")]
    pub nvtx_exclude: Option<String>,
    /// Record nothing until TIME after the program starts (sets RTRACE_DELAY).
    #[arg(long, allow_negative_numbers = true, value_name = "TIME", value_parser = check_time)]
    pub delay: Option<String>,
    /// Stop recording TIME after it began (sets RTRACE_DURATION).
    #[arg(long, allow_negative_numbers = true, value_name = "TIME", value_parser = check_time)]
    pub duration: Option<String>,
    /// Keep only kernels whose demangled or mangled name matches REGEX (sets
    /// RTRACE_KERNEL_REGEX).
    #[arg(long, value_name = "REGEX", value_parser = check_regex)]
    pub kernel_regex: Option<String>,
    /// Of the kernels kept, leave out the first N (sets RTRACE_KERNEL_SKIP).
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub kernel_skip: Option<u64>,
    /// Of the kernels kept, after the skipped ones, keep N (sets RTRACE_KERNEL_COUNT).
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub kernel_count: Option<u64>,
    /// Sample the PCs of running kernels with their warps' stall reasons, through CUPTI's PC
    /// Sampling API (sets RTRACE_PC_SAMPLING): one sample every 2^PERIOD cycles per SM
    /// (5..31; without a value, CUPTI's default). Turns on module records and images.
    #[arg(long, value_name = "PERIOD", num_args = 0..=1, require_equals = true, default_missing_value = "1", value_parser = check_period)]
    pub pc_sampling: Option<String>,
    /// Stall reasons to sample, comma-separated (`long_scoreboard,mio_throttle`; CUPTI's
    /// names without `smsp__pcsamp_warps_issue_stalled_`); all by default (sets
    /// RTRACE_PC_SAMPLING_STALLS).
    #[arg(long, value_name = "REASONS", requires = "pc_sampling", value_parser = check_stalls)]
    pub pc_stalls: Option<String>,
    /// Sample GPU hardware metrics over time on each device (SM active, issue active, tensor
    /// pipe, warps, DRAM, PCIe and NVLink throughput: what fits one pass on the chip) through
    /// CUPTI's PM Sampling API, HZ samples a second (default 10000, 1..=100000), by a process
    /// of rtrace's own beside the program, into a trace of its own (the program never loads
    /// PM sampling). Turns on kernel records.
    #[arg(long, value_name = "HZ", num_args = 0..=1, require_equals = true, default_missing_value = "10000", value_parser = sampler::check_gpu_metrics)]
    pub gpu_metrics: Option<String>,
    /// Store the code images (cubins) of the modules the program loads, compressed, each
    /// content once per run, for `rtrace sass` (sets RTRACE_MODULE_IMAGES=1; turns on module
    /// records). Without it, images are stored only with --pc-sampling or --metrics, which
    /// need them; each module's image hash and CRC are recorded either way.
    #[arg(long)]
    pub module_images: bool,
    /// How runtime API calls (`cuda*`) are recorded (sets RTRACE_RUNTIME_API;
    /// docs/runtime-api.md): `cupti`, CUPTI's runtime callbacks, every call (static runtimes
    /// included), the default with GPU activity; `interpose`, rtrace's exports of a shared
    /// libcudart's functions, cheaper, blind to static runtimes (cuBLAS's, CuPy's, nvcc's
    /// default), the default without GPU activity; `none` (RTRACE_RUNTIME_API=0): no runtime
    /// records.
    #[arg(long, value_name = "ROUTE", value_parser = check_runtime_route)]
    pub runtime_api: Option<String>,
    /// Profile the kernels kept (by --kernel-regex, --kernel-skip and --kernel-count) with
    /// CUPTI's range profiler, replaying each to collect LIST: set names (SpeedOfLight,
    /// MemoryWorkloadAnalysis, ComputeWorkloadAnalysis, Occupancy, WarpStateStats,
    /// InstructionStats) and raw metric names, comma-separated, as `rtrace metrics` lists
    /// them (sets RTRACE_METRICS). Checked before the program starts.
    #[arg(long, value_name = "LIST", value_parser = check_metrics)]
    pub metrics: Option<String>,
    /// Source counters: for each kernel launch kept by --kernel-regex, --kernel-skip and
    /// --kernel-count, count per SASS instruction the instructions and thread instructions
    /// executed, global sectors against the ideal, shared wavefronts against the ideal and
    /// divergent branch targets, through CUPTI's SASS Metric API (sets
    /// RTRACE_SOURCE_COUNTERS=1). CUPTI patches the code and each chosen launch is
    /// serialized, so it is a mode of its own: GPU activity is limited to resources (modules
    /// and their images, which it turns on), and it refuses --pc-sampling, --metrics and GPU
    /// activity kinds that cannot run beside it. `rtrace sass` and `rtrace report` show them.
    #[arg(long)]
    pub source_counters: bool,
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
        trailing_var_arg = true
    )]
    pub command: Vec<OsString>,
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
        Command::GpuSampler(args) => sampler::run(&args),
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
    let traced = traced_of(&args);
    if let Some(why) = conflict(&args, &traced) {
        eprintln!("rtrace: {why}");
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
    set(
        env::SOURCE_COUNTERS,
        args.source_counters.then(|| "1".into()),
    );
    set(env::MODULE_IMAGES, args.module_images.then(|| "1".into()));
    set(env::RUNTIME_API, args.runtime_api);
    let opts = RecordOptions {
        output: Some(args.output),
        lib: args.lib,
        buffer_records: args.buffer_records,
        flush_ms: args.flush_ms,
        traced,
        force_overwrite: args.force_overwrite,
        env,
        command: args.command,
        quiet: false,
        gpu_metrics: args.gpu_metrics.as_deref().and_then(|hz| hz.parse().ok()),
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
    if let Some(why) = &rec.sampler_error {
        eprintln!("rtrace: GPU metrics: {why}");
    }
    for line in record::summary_lines(&rec.found, rec.status_error.as_deref(), &opts.traced) {
        eprintln!("rtrace: {line}");
    }
    if args.stats && !rec.found.traces.is_empty() {
        let mut argv: Vec<OsString> = vec!["rtrace".into(), "report".into()];
        argv.extend(
            rec.found
                .traces
                .iter()
                .map(|t| t.path.clone().into_os_string()),
        );
        // The report as `rtrace report` makes it, from the same code.
        match Cli::try_parse_from(argv) {
            Ok(Cli {
                command: Command::Report(report),
            }) => {
                report::run(&report);
            }
            Ok(_) => {}
            Err(e) => eprintln!("rtrace: --stats: {e}"),
        }
    }
    code
}

/// What to trace: `-t` or `--gpu-activity`, else the default; with `--source-counters` and
/// neither, of GPU activity only what can run beside them: the resources (modules and their
/// images, which they need).
fn traced_of(args: &RecordArgs) -> Traced {
    let mut traced = args
        .trace
        .clone()
        .or(args.gpu_activity.clone())
        .unwrap_or_default();
    if args.source_counters && args.trace.is_none() && args.gpu_activity.is_none() {
        traced.gpu = rtrace_format::env::GpuKinds {
            resources: true,
            ..Default::default()
        };
        traced.chosen_by = "--source-counters".into();
    }
    traced
}

/// Options that cannot go together with what is traced; the message.
fn conflict(args: &RecordArgs, traced: &Traced) -> Option<String> {
    let by = &traced.chosen_by;
    if traced.nothing {
        let needs = [
            (args.pc_sampling.is_some(), "--pc-sampling"),
            (args.metrics.is_some(), "--metrics"),
            (args.gpu_metrics.is_some(), "--gpu-metrics"),
            (args.module_images, "--module-images"),
            (args.source_counters, "--source-counters"),
        ];
        if let Some((_, opt)) = needs.iter().find(|(given, _)| *given) {
            return Some(format!("{opt} needs tracing, and {by} records nothing"));
        }
    }
    if args.source_counters {
        let with = [
            (args.pc_sampling.is_some(), "--pc-sampling"),
            (args.metrics.is_some(), "--metrics"),
        ];
        if let Some((_, opt)) = with.iter().find(|(given, _)| *given) {
            return Some(format!(
                "--source-counters cannot be combined with {opt}: {}",
                rtrace_format::SOURCE_COUNTERS_EXCLUSIVE
            ));
        }
        if let Some(why) = rtrace_format::source_counters_activity_conflict(&traced.gpu) {
            return Some(format!(
                "--source-counters cannot be combined with kernel records, which {by} asks for: {why}"
            ));
        }
    }
    // Both read the GPU's performance counters, which one user holds at a time.
    if args.gpu_metrics.is_some() && args.metrics.is_some() {
        return Some(
            "--gpu-metrics and --metrics both need the GPU's performance counters, which CUPTI \
             gives one user at a time: choose one"
                .into(),
        );
    }
    if !traced.nvtx || traced.nothing {
        let needs = [
            (args.nvtx_capture.is_some(), "--nvtx-capture"),
            (args.nvtx_exclude.is_some(), "--nvtx-exclude"),
        ];
        if let Some((_, opt)) = needs.iter().find(|(given, _)| *given) {
            return Some(format!(
                "{opt} needs NVTX, which {by} leaves off: add nvtx to the list"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record_args(argv: &[&str]) -> Result<RecordArgs, clap::Error> {
        let mut full = vec!["rtrace", "record"];
        full.extend_from_slice(argv);
        match Cli::try_parse_from(full)?.command {
            Command::Record(args) => Ok(*args),
            _ => unreachable!(),
        }
    }

    #[test]
    fn source_counters_keep_resources_and_refuse_what_cannot_run_beside_them() {
        let check = |argv: &[&str]| {
            let a = record_args(argv).unwrap();
            let t = traced_of(&a);
            (t.gpu, conflict(&a, &t))
        };
        let (gpu, why) = check(&["--source-counters", "./app"]);
        assert_eq!(
            gpu,
            rtrace_format::env::GpuKinds {
                resources: true,
                ..Default::default()
            }
        );
        assert_eq!(why, None);
        assert_eq!(
            check(&["--source-counters", "-t", "cuda,resources", "./app"]).1,
            None
        );
        let exclusive = rtrace_format::SOURCE_COUNTERS_EXCLUSIVE;
        assert_eq!(
            check(&["--source-counters", "--pc-sampling", "./app"]).1,
            Some(format!(
                "--source-counters cannot be combined with --pc-sampling: {exclusive}"
            ))
        );
        assert_eq!(
            check(&["--source-counters", "--metrics", "SpeedOfLight", "./app"]).1,
            Some(format!(
                "--source-counters cannot be combined with --metrics: {exclusive}"
            ))
        );
        assert_eq!(
            check(&["--source-counters", "-t", "cuda,gpu", "./app"]).1,
            Some("--source-counters cannot be combined with kernel records, which -t cuda,gpu asks for: CUPTI refuses kernel activity records beside SASS metrics and PyTorch crashed with both (give -t cuda,resources,nvtx or leave -t out)".into())
        );
        assert_eq!(
            check(&["--source-counters", "-t", "none", "./app"]).1,
            Some("--source-counters needs tracing, and -t none records nothing".into())
        );
    }

    #[test]
    fn gpu_metrics_takes_a_rate() {
        assert_eq!(record_args(&["./app"]).unwrap().gpu_metrics, None);
        let a = record_args(&["--gpu-metrics", "./app"]).unwrap();
        assert_eq!(a.gpu_metrics.as_deref(), Some("10000"));
        let a = record_args(&["--gpu-metrics=2kHz", "./app"]).unwrap();
        assert_eq!(a.gpu_metrics.as_deref(), Some("2000"));
        let e = record_args(&["--gpu-metrics=500k", "./app"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("500000 Hz is out of range"), "{e}");
        let e = record_args(&["--gpu-metrics=0", "./app"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("'0' is not a sampling rate"), "{e}");
    }

    #[test]
    fn options_before_the_program_are_rtraces_and_after_it_the_programs() {
        let a = record_args(&["./app", "--flag", "-t", "x"]).unwrap();
        assert_eq!(a.command, ["./app", "--flag", "-t", "x"]);
        assert_eq!(a.trace, None);
        let a = record_args(&["-t", "cuda", "--", "./app", "--bogus"]).unwrap();
        assert_eq!(a.command, ["./app", "--bogus"]);
        assert_eq!(a.trace, Some(Traced::parse("cuda").unwrap()));
        for bad in [
            &["--bogus", "--", "./app"][..],
            &["--bogus", "./app"],
            &["--flush-ms", "0", "./app"],
            &["--flush-ms", "1001", "./app"],
            &["--buffer-records", "48", "./app"],
            &["--gpu-activity=kernel,bogus", "./app"],
            &["-t", "", "./app"],
            &["--module-images=1", "./app"],
            &["--runtime-api", "both", "./app"],
            &["--runtime-api", "0", "./app"],
        ] {
            let e = record_args(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
        assert!(
            record_args(&["--module-images", "x"])
                .unwrap()
                .module_images
        );
        assert!(!record_args(&["x"]).unwrap().module_images);
        for (v, env) in [
            ("cupti", "cupti"),
            ("interpose", "interpose"),
            ("none", "0"),
        ] {
            let a = record_args(&["--runtime-api", v, "x"]).unwrap();
            assert_eq!(a.runtime_api.as_deref(), Some(env));
        }
        assert_eq!(record_args(&["x"]).unwrap().runtime_api, None);
        assert_eq!(
            record_args(&["--flush-ms", "1000", "x"]).unwrap().flush_ms,
            Some(1000)
        );
        assert_eq!(
            record_args(&["--buffer-records", "16777216", "x"])
                .unwrap()
                .buffer_records,
            Some(1 << 24)
        );
    }
}
