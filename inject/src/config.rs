//! Settings read once from `RTRACE_*` environment variables at start-up.

use rtrace_format::{env, DEFAULT_OUTPUT};
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// Everything the environment can set; see `docs/configuration.md`.
#[derive(Clone, Debug)]
pub struct Config {
    /// Output path pattern: `%p` → pid, `%h` → host name, `%q{VAR}` → VAR's value, `%%` → `%`
    /// ([`rtrace_format::expand_output`]).
    pub output: OsString,
    /// The values of the variables the pattern's `%q{VAR}` name, as the process started (name,
    /// value; unset ones left out): read once here, so that naming a trace reads no
    /// environment (a forked child's included).
    pub output_vars: Vec<(Vec<u8>, Vec<u8>)>,
    /// Replace an earlier run's file at the trace's name (`RTRACE_FORCE_OVERWRITE`;
    /// [`rtrace_format::env::FORCE_OVERWRITE`] says which files).
    pub force_overwrite: bool,
    /// The `rtrace record` run's token for the trace header (`RTRACE_SESSION`); empty: none.
    pub session: String,
    /// The launcher's rank variables set at start-up ([`rtrace_format::env::RANK_VARS`], in
    /// that order), for the trace header.
    pub rank_env: Vec<(String, String)>,
    /// Where to leave status entries for `rtrace record` (`RTRACE_STATUS_DIR`).
    pub status_dir: Option<OsString>,
    /// Ring capacity per thread, in records (a power of two).
    pub buffer_records: usize,
    /// How long a call whose thread's buffer is full waits for the worker (0: never).
    pub full_wait_ms: u64,
    /// CUPTI's activity buffers are pages of the trace file (`RTRACE_GPU_FILE_BUFFERS`, on
    /// unless `0`).
    pub gpu_file_buffers: bool,
    /// Partly filled buffers are drained at least this often.
    pub flush_ms: u64,
    /// How often the worker looks at the buffers.
    pub poll_ms: u64,
    /// Record nothing.
    pub disabled: bool,
    /// Diagnostics on stderr.
    pub debug: bool,
    /// The real driver library.
    pub cuda_library: OsString,
    /// Read `CLOCK_MONOTONIC` on every call instead of the TSC (`RTRACE_CLOCK=monotonic`).
    pub clock_monotonic: bool,
    /// Which GPU activity to record through CUPTI (`RTRACE_GPU_ACTIVITY`).
    pub gpu_activity: GpuKinds,
    /// Words of `RTRACE_GPU_ACTIVITY` that name no kind, ignored (said in the trace).
    pub gpu_activity_error: Option<String>,
    /// Values of the numeric settings and `RTRACE_CLOCK` that could not be used as given, and
    /// what was used instead (said in the trace).
    pub settings_errors: Vec<String>,
    /// How runtime API calls are recorded (`RTRACE_RUNTIME_API`).
    pub runtime_api: RuntimeRoute,
    /// A value of `RTRACE_RUNTIME_API` that names no route, ignored (said in the trace).
    pub runtime_api_error: Option<String>,
    /// The CUPTI library to load when the process has not loaded one.
    pub cupti_library: Option<OsString>,
    /// Receive NVTX calls (`RTRACE_NVTX`, on unless `0`).
    pub nvtx: bool,
    /// Store loaded modules' code images in the trace (`RTRACE_MODULE_IMAGES`: `1` on, `0`
    /// off; unset or empty: on with PC sampling or kernel profiling, which need them).
    pub module_images: bool,
    /// What gates recording (`RTRACE_CAPTURE_RANGE`, `RTRACE_NVTX_CAPTURE`,
    /// `RTRACE_NVTX_EXCLUDE`, `RTRACE_DELAY`, `RTRACE_DURATION`), and which kernels are kept
    /// (`RTRACE_KERNEL_REGEX`, `RTRACE_KERNEL_SKIP`, `RTRACE_KERNEL_COUNT`).
    pub capture: Capture,
    /// PC sampling (`RTRACE_PC_SAMPLING`, `RTRACE_PC_SAMPLING_STALLS`).
    pub pc_sampling: PcSampling,
    /// Kernel profiling's LIST of sets and metrics (`RTRACE_METRICS`), resolved at start-up;
    /// `None`: off.
    pub metrics: Option<String>,
    /// Source counters (`RTRACE_SOURCE_COUNTERS=1`): CUPTI's SASS metrics on the launches the
    /// kernel controls choose.
    pub source_counters: bool,
    /// Application replay (`RTRACE_METRICS_REPLAY=application`): the pass and the shared
    /// directory (`RTRACE_REPLAY_PASS`, `RTRACE_REPLAY_DIR`); `None`: kernel replay.
    pub application_replay: Option<AppReplay>,
}

/// Application replay's settings: `Err` for a setting that cannot be read (said in a notice).
pub type AppReplay = Result<(u32, std::path::PathBuf), String>;

/// PC sampling settings; off by default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PcSampling {
    pub on: bool,
    /// One sample every 2^N cycles (5..=31); `None`: CUPTI's default.
    pub period_log2: Option<u32>,
    /// Stall reasons to collect, by short name (`long_scoreboard`); empty: all.
    pub stalls: Vec<String>,
    /// A setting that could not be read (said in the trace; sampling stays off).
    pub error: Option<String>,
}

impl PcSampling {
    /// `RTRACE_PC_SAMPLING`: empty or `0` (`off`, `no`, `false`) → off; `1` (`on`, `yes`,
    /// `true`) → on at CUPTI's default period; a number 5..=31 → on, one sample every 2^N
    /// cycles. `RTRACE_PC_SAMPLING_STALLS`: comma-separated stall reasons (CUPTI's names
    /// without `smsp__pcsamp_warps_issue_stalled_`), all when unset.
    pub fn parse(value: Option<&str>, stalls: Option<&str>) -> PcSampling {
        let stalls: Vec<String> = stalls
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let v = value.unwrap_or("").trim();
        match v {
            "" | "0" | "off" | "no" | "false" => PcSampling::default(),
            "1" | "on" | "yes" | "true" => PcSampling {
                on: true,
                stalls,
                ..Default::default()
            },
            _ => match v.parse::<u32>() {
                Ok(n) if (5..=31).contains(&n) => PcSampling {
                    on: true,
                    period_log2: Some(n),
                    stalls,
                    error: None,
                },
                _ => PcSampling {
                    error: Some(format!(
                        "RTRACE_PC_SAMPLING={v}: expected 0, 1 or a period 5..31 (2^N cycles); PC sampling off"
                    )),
                    ..Default::default()
                },
            },
        }
    }
}

/// Capture control; the default records everything.
#[derive(Clone, Debug, Default)]
pub struct Capture {
    /// Record only between `cuProfilerStart` and `cuProfilerStop`.
    pub profiler_api: bool,
    /// Record only inside NVTX ranges of these `(name, domain)` (domain `None`: the default).
    pub nvtx_include: Vec<(String, Option<String>)>,
    /// Do not record inside NVTX ranges of these.
    pub nvtx_exclude: Vec<(String, Option<String>)>,
    /// Record nothing until this long after the library loaded.
    pub delay_ns: u64,
    /// Then record for this long at most.
    pub duration_ns: Option<u64>,
    /// Keep only kernels whose demangled name matches.
    pub kernel_regex: Option<String>,
    /// Of those, leave out the first N ...
    pub kernel_skip: u64,
    /// ... and keep the next N (all when `None`).
    pub kernel_count: Option<u64>,
    /// Settings that could not be read, one line each (said in the trace).
    pub errors: Vec<String>,
}

impl Capture {
    /// Whether anything gates recording (so GPU records must be linked to a recorded call to
    /// be kept).
    pub fn gates(&self) -> bool {
        self.profiler_api
            || !self.nvtx_include.is_empty()
            || !self.nvtx_exclude.is_empty()
            || self.delay_ns > 0
            || self.duration_ns.is_some()
    }

    fn from_lookup(get: &impl Fn(&str) -> Option<OsString>) -> Capture {
        let mut c = Capture::default();
        let text = |k: &str| {
            get(k)
                .map(|v| v.to_string_lossy().trim().to_string())
                .filter(|v| !v.is_empty())
        };
        if let Some(mode) = text(env::CAPTURE_RANGE) {
            match mode.as_str() {
                "cudaProfilerApi" | "cuProfilerApi" | "profiler" => c.profiler_api = true,
                "none" => {}
                other => c.errors.push(format!(
                    "RTRACE_CAPTURE_RANGE={other} is not cudaProfilerApi or none: ignored"
                )),
            }
        }
        let ranges = |v: String| -> Vec<(String, Option<String>)> {
            v.split(',')
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .map(|r| match r.rsplit_once('@') {
                    Some((name, domain)) => (name.to_string(), Some(domain.to_string())),
                    None => (r.to_string(), None),
                })
                .collect()
        };
        c.nvtx_include = text(env::NVTX_CAPTURE).map(ranges).unwrap_or_default();
        c.nvtx_exclude = text(env::NVTX_EXCLUDE).map(ranges).unwrap_or_default();
        let mut time = |k: &str| -> Option<u64> {
            let v = text(k)?;
            match rtrace_format::parse_time(&v) {
                Ok(ns) => Some(ns),
                Err(e) => {
                    c.errors.push(format!("{k}: {e}: ignored"));
                    None
                }
            }
        };
        let delay = time(env::DELAY);
        let duration = time(env::DURATION);
        c.delay_ns = delay.unwrap_or(0);
        c.duration_ns = duration;
        c.kernel_regex = text(env::KERNEL_REGEX);
        let mut count = |k: &str| -> Option<u64> {
            let v = text(k)?;
            match v.parse() {
                Ok(n) => Some(n),
                Err(_) => {
                    c.errors.push(format!("{k}={v} is not a count: ignored"));
                    None
                }
            }
        };
        let skip = count(env::KERNEL_SKIP);
        let kept = count(env::KERNEL_COUNT);
        c.kernel_skip = skip.unwrap_or(0);
        c.kernel_count = kept;
        c
    }
}

/// How runtime API calls are recorded (`RTRACE_RUNTIME_API`, read as the format crate defines
/// it).
pub use rtrace_format::env::RuntimeRoute;

/// The kinds of GPU activity to record (`RTRACE_GPU_ACTIVITY`, read as the format crate
/// defines it: words that name no kind are ignored).
pub use rtrace_format::env::GpuKinds;

impl Config {
    pub fn from_env() -> Config {
        Self::from_lookup(|k| std::env::var_os(k))
    }

    /// Builds a config from a variable lookup (tests pass their own).
    pub fn from_lookup(get: impl Fn(&str) -> Option<OsString>) -> Config {
        let flag = |k: &str| get(k).is_some_and(|v| !v.is_empty() && v != "0");
        let mut settings_errors = Vec::new();
        // A number in its range as `rtrace record` checks it; else the nearest in the range,
        // or the default where it is no number, said in the trace. Empty: the default.
        let mut number = |k: &str, range: &std::ops::RangeInclusive<u64>, default: u64| {
            let v = get(k)?.to_string_lossy().into_owned();
            if v.trim().is_empty() {
                return None;
            }
            match env::parse_in_range(k, &v, range) {
                Ok(n) => Some(n),
                Err(e) => {
                    let used = v
                        .trim()
                        .parse::<u64>()
                        .map_or(default, |n| n.clamp(*range.start(), *range.end()));
                    settings_errors.push(format!("{e}: {used} is used"));
                    Some(used)
                }
            }
        };
        let default_records = env::DEFAULT_BUFFER_RECORDS;
        let asked_records = number(
            env::BUFFER_RECORDS,
            &env::BUFFER_RECORDS_RANGE,
            default_records,
        );
        let full_wait_ms = number(
            env::FULL_WAIT_MS,
            &env::FULL_WAIT_MS_RANGE,
            env::DEFAULT_FULL_WAIT_MS,
        )
        .unwrap_or(env::DEFAULT_FULL_WAIT_MS);
        let flush_ms = number(env::FLUSH_MS, &env::FLUSH_MS_RANGE, env::DEFAULT_FLUSH_MS)
            .unwrap_or(env::DEFAULT_FLUSH_MS);
        let buffer_records = match asked_records {
            Some(n) if !n.is_power_of_two() => {
                settings_errors.push(format!(
                    "{}: {n} is not a power of two: {} is used",
                    env::BUFFER_RECORDS,
                    n.next_power_of_two()
                ));
                n.next_power_of_two()
            }
            Some(n) => n,
            None => default_records,
        } as usize;
        let clock_monotonic = match get(env::CLOCK) {
            Some(v) if v == "monotonic" => true,
            Some(v) if !v.is_empty() => {
                settings_errors.push(format!(
                    "{}={} is not monotonic: ignored",
                    env::CLOCK,
                    v.to_string_lossy()
                ));
                false
            }
            _ => false,
        };
        let pc_sampling = PcSampling::parse(
            get(env::PC_SAMPLING).as_deref().and_then(|v| v.to_str()),
            get(env::PC_SAMPLING_STALLS)
                .as_deref()
                .and_then(|v| v.to_str()),
        );
        let (mut gpu_activity, unknown) = get(env::GPU_ACTIVITY)
            .map(|v| GpuKinds::parse(&v.to_string_lossy()))
            .unwrap_or_default();
        let gpu_activity_error = (!unknown.is_empty()).then(|| {
            format!(
                "{}: ignored {} (the kinds are {})",
                env::GPU_ACTIVITY,
                unknown.join(", "),
                env::GPU_KIND_NAMES.join(", ")
            )
        });
        // Samples name their code by module: PC sampling needs the modules and their images.
        if pc_sampling.on {
            gpu_activity.resources = true;
        }
        // Counters name their code by module: source counters need the modules and images.
        let source_counters = flag(env::SOURCE_COUNTERS);
        if source_counters {
            gpu_activity.resources = true;
        }
        let metrics = get(env::METRICS)
            .map(|v| v.to_string_lossy().trim().to_string())
            .filter(|v| !v.is_empty());
        // Profiles are linked to kernel records, and profiling uses GPU activity's CUPTI.
        if metrics.is_some() {
            gpu_activity.kernel = true;
        }
        // Images come with GPU activity's module records: asked for, they turn those on; needed
        // by PC sampling (which turns them on) or kernel profiling, they come with them.
        let module_images = match get(env::MODULE_IMAGES).filter(|v| !v.is_empty()) {
            Some(v) if v != "0" => {
                gpu_activity.resources = true;
                true
            }
            Some(_) => false,
            None => pc_sampling.on || metrics.is_some() || source_counters,
        };
        let (runtime_api, runtime_api_error) = RuntimeRoute::parse(
            get(env::RUNTIME_API).as_deref().and_then(|v| v.to_str()),
            gpu_activity.any(),
        );
        let output: OsString = get(env::OUTPUT)
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| DEFAULT_OUTPUT.into());
        let output_vars = rtrace_format::pattern_vars(output.as_bytes())
            .into_iter()
            .filter_map(|name| {
                let value = get(std::str::from_utf8(name).ok()?)?;
                Some((name.to_vec(), value.into_vec()))
            })
            .collect();
        Config {
            output,
            output_vars,
            force_overwrite: flag(env::FORCE_OVERWRITE),
            session: get(env::SESSION)
                .map(|v| v.to_string_lossy().into_owned())
                .unwrap_or_default(),
            rank_env: env::RANK_VARS
                .iter()
                .filter_map(|&name| Some((name.to_string(), get(name)?.into_string().ok()?)))
                .collect(),
            status_dir: get(env::STATUS_DIR).filter(|v| !v.is_empty()),
            buffer_records,
            full_wait_ms,
            gpu_file_buffers: get(env::GPU_FILE_BUFFERS).is_none_or(|v| v != "0"),
            flush_ms,
            poll_ms: flush_ms.min(5),
            disabled: flag(env::DISABLE),
            debug: flag(env::DEBUG),
            cuda_library: get(env::CUDA_LIBRARY)
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| "libcuda.so.1".into()),
            clock_monotonic,
            gpu_activity,
            gpu_activity_error,
            settings_errors,
            runtime_api,
            runtime_api_error,
            cupti_library: get(env::CUPTI_LIBRARY).filter(|v| !v.is_empty()),
            nvtx: get(env::NVTX).is_none_or(|v| v != "0"),
            module_images,
            capture: Capture::from_lookup(&get),
            pc_sampling,
            metrics,
            source_counters,
            application_replay: app_replay(&get),
        }
    }
}

/// `RTRACE_METRICS_REPLAY`, `RTRACE_REPLAY_PASS`, `RTRACE_REPLAY_DIR`.
fn app_replay(get: &dyn Fn(&str) -> Option<OsString>) -> Option<AppReplay> {
    match get(env::METRICS_REPLAY)?.to_str() {
        Some("application") => {}
        Some("" | "kernel") => return None,
        _ => {
            return Some(Err(format!(
                "{}: give kernel or application",
                env::METRICS_REPLAY
            )))
        }
    }
    let pass = match get(env::REPLAY_PASS) {
        None => 0,
        Some(v) => match v.to_str().and_then(|v| v.trim().parse().ok()) {
            Some(n) => n,
            None => return Some(Err(format!("{}: not a pass number", env::REPLAY_PASS))),
        },
    };
    match get(env::REPLAY_DIR).filter(|d| !d.is_empty()) {
        Some(d) => Some(Ok((pass, d.into()))),
        None => Some(Err(format!(
            "{} is not set (run the program with rtrace record --replay application)",
            env::REPLAY_DIR
        ))),
    }
}

#[cfg(test)]
mod tests;
