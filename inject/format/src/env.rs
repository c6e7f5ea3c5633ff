//! The environment variables librtrace.so reads (docs/configuration.md), by name: `rtrace
//! record` sets them for the program it runs, librtrace.so reads them once when it loads; and the
//! defaults and ranges of their values, which both sides take from here.

use std::ops::RangeInclusive;

/// Trace path pattern: `%p` → process id, `%h` → host name, `%q{VAR}` → the value of the
/// environment variable VAR (empty when unset), `%%` → `%` ([`crate::pattern_pieces`];
/// [`crate::DEFAULT_OUTPUT`] when unset or empty).
pub const OUTPUT: &str = "RTRACE_OUTPUT";
/// Capacity of each thread's buffer, in API records.
pub const BUFFER_RECORDS: &str = "RTRACE_BUFFER_RECORDS";
/// How long a thread whose buffer is full waits for the worker before it counts a record as
/// lost, in ms (0: it never waits).
pub const FULL_WAIT_MS: &str = "RTRACE_FULL_WAIT_MS";
/// `0`: CUPTI's activity buffers in heap memory instead of pages of the trace file (GPU work
/// CUPTI holds when the process dies is then lost; for measuring what the file costs).
pub const GPU_FILE_BUFFERS: &str = "RTRACE_GPU_FILE_BUFFERS";
/// Partly filled buffers are written at least this often, ms.
pub const FLUSH_MS: &str = "RTRACE_FLUSH_MS";
/// `monotonic`: read `CLOCK_MONOTONIC` on every call instead of the time-stamp counter.
pub const CLOCK: &str = "RTRACE_CLOCK";
/// `1`: record nothing; every call goes straight to the driver.
pub const DISABLE: &str = "RTRACE_DISABLE";
/// `1`: diagnostics on stderr.
pub const DEBUG: &str = "RTRACE_DEBUG";
/// The real driver to load when the program has not loaded it.
pub const CUDA_LIBRARY: &str = "RTRACE_CUDA_LIBRARY";
/// The CUPTI library to load when the program has not loaded one (and `rtrace metrics`'s).
pub const CUPTI_LIBRARY: &str = "RTRACE_CUPTI_LIBRARY";
/// Which GPU activity to record through CUPTI: `1`, `all`, or a list of kinds.
pub const GPU_ACTIVITY: &str = "RTRACE_GPU_ACTIVITY";
/// How runtime API calls (`cuda*`) are recorded: `cupti` (CUPTI's runtime callbacks, the
/// default with GPU activity on), `interpose` (rtrace's exports of libcudart's functions, the
/// default without), `0` (not at all).
pub const RUNTIME_API: &str = "RTRACE_RUNTIME_API";
/// `cudaProfilerApi`: record only between `cuProfilerStart` and `cuProfilerStop`.
pub const CAPTURE_RANGE: &str = "RTRACE_CAPTURE_RANGE";
/// `NAME[@DOMAIN][,...]`: record only inside NVTX ranges of these names.
pub const NVTX_CAPTURE: &str = "RTRACE_NVTX_CAPTURE";
/// `NAME[@DOMAIN][,...]`: record nothing inside NVTX ranges of these names.
pub const NVTX_EXCLUDE: &str = "RTRACE_NVTX_EXCLUDE";
/// A time (`2`, `1.5s`, `250ms`, ...): record nothing until this long after loading.
pub const DELAY: &str = "RTRACE_DELAY";
/// A time: record for this long at most (after the delay).
pub const DURATION: &str = "RTRACE_DURATION";
/// Keep only the kernel records of kernels whose name matches this regular expression.
pub const KERNEL_REGEX: &str = "RTRACE_KERNEL_REGEX";
/// Of the kernels kept, leave out the first N.
pub const KERNEL_SKIP: &str = "RTRACE_KERNEL_SKIP";
/// Of the kernels kept, keep N (after those skipped).
pub const KERNEL_COUNT: &str = "RTRACE_KERNEL_COUNT";
/// Kernel profiling: comma-separated set names (`SpeedOfLight`, ...) and raw metric names;
/// the kernels chosen by the kernel controls above are replayed and their metrics recorded.
pub const METRICS: &str = "RTRACE_METRICS";
/// Kernel profiling's replay: `kernel` (the default: each chosen launch replayed by CUPTI) or
/// `application`: each capture range (`RTRACE_CAPTURE_RANGE` or `RTRACE_NVTX_CAPTURE`) is
/// profiled as one unit, the whole program being run once per pass (`rtrace record --replay
/// application` runs it; docs/configuration.md, "Kernel profiling").
pub const METRICS_REPLAY: &str = "RTRACE_METRICS_REPLAY";
/// Application replay: this run's pass, from 0.
pub const REPLAY_PASS: &str = "RTRACE_REPLAY_PASS";
/// Application replay: the directory the passes share (the pass count and chip, each
/// context's counter data image, each pass's list of ranges), kept by `rtrace record`.
pub const REPLAY_DIR: &str = "RTRACE_REPLAY_DIR";
/// Loaded modules' code images: `1` stores each content once (compressed; under `rtrace record`
/// once per run), `0` never; unset or empty: stored when something needs them (PC sampling,
/// kernel profiling). Each module's image hash and CUPTI CRC are recorded either way.
pub const MODULE_IMAGES: &str = "RTRACE_MODULE_IMAGES";
/// PC sampling: `1` at CUPTI's default period, `N` in 5..31 for one sample every 2^N cycles.
pub const PC_SAMPLING: &str = "RTRACE_PC_SAMPLING";
/// Comma-separated stall reasons PC sampling collects (all when unset).
pub const PC_SAMPLING_STALLS: &str = "RTRACE_PC_SAMPLING_STALLS";
/// Source counters (CUPTI's SASS Metric API): `1` collects, for each kernel launch the kernel
/// controls above choose, per SASS instruction: instructions executed, thread instructions
/// executed (predicated on), global sectors and ideal sectors, shared wavefronts and ideal
/// wavefronts, divergent branch targets. A mode of its own: not with PC sampling, kernel
/// profiling or kernel activity (docs/source-counters.md).
pub const SOURCE_COUNTERS: &str = "RTRACE_SOURCE_COUNTERS";
/// `0`: leave NVTX alone.
pub const NVTX: &str = "RTRACE_NVTX";
/// The token of one `rtrace record` run: librtrace.so writes it into each trace's header
/// (`ProcessHeader::session`), and `rtrace record` lists the traces that carry it.
pub const SESSION: &str = "RTRACE_SESSION";
/// The launchers' variables that name a process's rank, in the order the report prefers them
/// (torchrun and most launchers, Open MPI, Slurm, then the rank on its node): librtrace.so
/// writes those set at start-up into the trace header (`ProcessHeader::rank_env`), and
/// `rtrace report` names each process by the first of them it finds.
pub const RANK_VARS: [&str; 4] = ["RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "LOCAL_RANK"];
/// A directory `rtrace record` made for the run (mode 0700): librtrace.so leaves there, in
/// files it creates exclusively, the path of each trace it creates ([`crate::STATUS_TRACE`]`<pid>`) and
/// why tracing turned itself off ([`crate::STATUS_OFF`]`<pid>`), [`crate::collision_path`] naming a second one of
/// a pid (after `exec`). Never the program's stdout or stderr.
pub const STATUS_DIR: &str = "RTRACE_STATUS_DIR";
/// The librtrace.so `rtrace record` preloads when `--lib` does not name one (docs/cli.md).
pub const LIB: &str = "RTRACE_LIB";
/// NVTX's own variable: the tool library NVTX v3 loads (librtrace.so points it at itself).
pub const NVTX_INJECTION64_PATH: &str = "NVTX_INJECTION64_PATH";

/// Read by the collector, not by librtrace.so: the most bytes `rtrace report`, `export` and
/// `sass` copy from an input that cannot be read twice (standard input, a pipe) into their
/// temporary file; a number of bytes with an optional `K`, `M`, `G` or `T` (powers of 1024).
pub const SPOOL_LIMIT: &str = "RTRACE_SPOOL_LIMIT";
/// [`SPOOL_LIMIT`] when unset: 4 GiB.
pub const DEFAULT_SPOOL_LIMIT: u64 = 4 << 30;

/// A size as [`SPOOL_LIMIT`] takes it: `4096`, `512K`, `64M`, `4G`, `1T` (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 10),
        Some((i, 'M' | 'm')) => (&t[..i], 20),
        Some((i, 'G' | 'g')) => (&t[..i], 30),
        Some((i, 'T' | 't')) => (&t[..i], 40),
        _ => (t, 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size (bytes, or a number with K, M, G or T)"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{s:?} is too large a size"))
}

/// [`BUFFER_RECORDS`] when unset.
pub const DEFAULT_BUFFER_RECORDS: u64 = 1 << 16;
/// The capacities [`BUFFER_RECORDS`] may give (a power of two in this range; librtrace.so
/// brings a value outside it to its nearest end, `rtrace record` refuses it).
pub const BUFFER_RECORDS_RANGE: RangeInclusive<u64> = 64..=1 << 24;
/// [`FLUSH_MS`] when unset.
pub const DEFAULT_FLUSH_MS: u64 = 200;
/// The periods [`FLUSH_MS`] may give, ms (librtrace.so brings a value outside the range to its
/// nearest end, `rtrace record` refuses it).
pub const FLUSH_MS_RANGE: RangeInclusive<u64> = 1..=1000;
/// [`FULL_WAIT_MS`] when unset.
pub const DEFAULT_FULL_WAIT_MS: u64 = 100;
/// The waits [`FULL_WAIT_MS`] may give, ms (librtrace.so takes the upper end for more).
pub const FULL_WAIT_MS_RANGE: RangeInclusive<u64> = 0..=1000;

/// `1`: where the trace's name is taken by a regular file of this user that is not a trace of
/// this `rtrace record` run ([`SESSION`]), replace it instead of writing beside it. Only with
/// a session token (without one, the processes of a run could not be told from an earlier
/// run's); never a link, a FIFO, a device, a directory or another user's file.
pub const FORCE_OVERWRITE: &str = "RTRACE_FORCE_OVERWRITE";

/// `value` read as a number in `range`, or why not (`what`: the option or variable it came
/// from, for the message).
pub fn parse_in_range(what: &str, value: &str, range: &RangeInclusive<u64>) -> Result<u64, String> {
    let n: u64 = value.trim().parse().map_err(|_| {
        format!(
            "{what}: {value:?} is not a number (give {}..={})",
            range.start(),
            range.end()
        )
    })?;
    if range.contains(&n) {
        Ok(n)
    } else {
        Err(format!(
            "{what}: {n} is out of range (give {}..={})",
            range.start(),
            range.end()
        ))
    }
}

/// The kinds of GPU activity librtrace.so can record through CUPTI ([`GPU_ACTIVITY`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuKinds {
    pub kernel: bool,
    /// Memory copies, peer-to-peer ones included.
    pub memcpy: bool,
    pub memset: bool,
    /// Allocations and frees.
    pub memory: bool,
    /// Host synchronizations.
    pub sync: bool,
    /// Contexts, streams, modules and functions as they are created or loaded.
    pub resources: bool,
}

/// The names of the kinds in a [`GPU_ACTIVITY`] list, in [`GpuKinds`]' order.
pub const GPU_KIND_NAMES: [&str; 6] = ["kernel", "memcpy", "memset", "memory", "sync", "resources"];

impl GpuKinds {
    /// What `1` (and `on`, `yes`, `true`, `default`) records: kernels (graphs' included),
    /// copies, memsets and resources.
    pub const DEFAULT: GpuKinds = GpuKinds {
        kernel: true,
        memcpy: true,
        memset: true,
        memory: false,
        sync: false,
        resources: true,
    };
    /// What `all` records.
    pub const ALL: GpuKinds = GpuKinds {
        kernel: true,
        memcpy: true,
        memset: true,
        memory: true,
        sync: true,
        resources: true,
    };

    fn flags(&mut self) -> [&mut bool; 6] {
        [
            &mut self.kernel,
            &mut self.memcpy,
            &mut self.memset,
            &mut self.memory,
            &mut self.sync,
            &mut self.resources,
        ]
    }

    /// Turns on the kind named `word` ([`GPU_KIND_NAMES`], or `kernels`); false for any other
    /// word.
    pub fn add(&mut self, word: &str) -> bool {
        let word = if word == "kernels" { "kernel" } else { word };
        match GPU_KIND_NAMES.iter().position(|&n| n == word) {
            Some(i) => {
                *self.flags()[i] = true;
                true
            }
            None => false,
        }
    }

    /// A [`GPU_ACTIVITY`] value: empty or `0` (`off`, `no`, `false`) → none; `1` (`on`, `yes`,
    /// `true`, `default`) → [`GpuKinds::DEFAULT`]; `all` → [`GpuKinds::ALL`]; else a
    /// comma-separated list of [`GPU_KIND_NAMES`]. The kinds, and the words of the list that
    /// name none (librtrace.so ignores them, `rtrace record` refuses them).
    pub fn parse(v: &str) -> (GpuKinds, Vec<String>) {
        match v.trim() {
            "" | "0" | "off" | "no" | "false" => (GpuKinds::default(), Vec::new()),
            "1" | "on" | "yes" | "true" | "default" => (GpuKinds::DEFAULT, Vec::new()),
            "all" => (GpuKinds::ALL, Vec::new()),
            list => {
                let mut k = GpuKinds::default();
                let unknown = list
                    .split(',')
                    .map(str::trim)
                    .filter(|w| !w.is_empty() && !k.add(w))
                    .map(String::from)
                    .collect();
                (k, unknown)
            }
        }
    }

    /// [`GpuKinds::parse`] that refuses a word naming no kind.
    pub fn parse_strict(v: &str) -> Result<GpuKinds, String> {
        match GpuKinds::parse(v) {
            (k, unknown) if unknown.is_empty() => Ok(k),
            (_, unknown) => Err(format!(
                "unknown GPU activity kind{} {}: give 1, all, 0 or a comma-separated list of {}",
                if unknown.len() == 1 { "" } else { "s" },
                unknown.join(", "),
                GPU_KIND_NAMES.join(", ")
            )),
        }
    }

    /// Which kinds are on, in [`GPU_KIND_NAMES`]' order.
    pub fn values(&self) -> [bool; 6] {
        [
            self.kernel,
            self.memcpy,
            self.memset,
            self.memory,
            self.sync,
            self.resources,
        ]
    }

    /// Whether any kind is on.
    pub fn any(&self) -> bool {
        self.values().into_iter().any(|f| f)
    }

    /// The kinds as a [`GPU_ACTIVITY`] list (`kernel,memcpy`; `0` for none).
    pub fn to_value(&self) -> String {
        let on: Vec<&str> = self
            .values()
            .into_iter()
            .zip(GPU_KIND_NAMES)
            .filter(|(f, _)| *f)
            .map(|(_, n)| n)
            .collect();
        if on.is_empty() {
            "0".into()
        } else {
            on.join(",")
        }
    }
}

/// How runtime API calls (`cuda*`) are recorded (docs/runtime-api.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuntimeRoute {
    /// Not at all (`0`).
    Off,
    /// CUPTI's runtime callbacks (`cupti`; the default with GPU activity on).
    Cupti,
    /// rtrace's own exports of libcudart's functions (`interpose`; the default without GPU
    /// activity, which loads no CUPTI).
    Interpose,
}

impl RuntimeRoute {
    /// The route `RTRACE_RUNTIME_API=value` names (unset: `None`) given whether GPU activity
    /// is on, and the error for a value that names none (the default is taken then).
    pub fn parse(value: Option<&str>, gpu_activity: bool) -> (RuntimeRoute, Option<String>) {
        let default = if gpu_activity {
            RuntimeRoute::Cupti
        } else {
            RuntimeRoute::Interpose
        };
        match value.map(str::trim) {
            None | Some("" | "1") => (default, None),
            Some("0") => (RuntimeRoute::Off, None),
            Some("cupti") => (RuntimeRoute::Cupti, None),
            Some("interpose") => (RuntimeRoute::Interpose, None),
            Some(v) => (
                default,
                Some(format!(
                    "{}={v}: give 0, 1, cupti or interpose; the default ({}) used",
                    RUNTIME_API,
                    default.name()
                )),
            ),
        }
    }

    /// The route `rtrace record --runtime-api` names: `cupti`, `interpose` or `none`.
    pub fn from_option(v: &str) -> Option<RuntimeRoute> {
        match v {
            "cupti" => Some(RuntimeRoute::Cupti),
            "interpose" => Some(RuntimeRoute::Interpose),
            "none" => Some(RuntimeRoute::Off),
            _ => None,
        }
    }

    /// The route's value of `RTRACE_RUNTIME_API`.
    pub fn name(self) -> &'static str {
        match self {
            RuntimeRoute::Off => "0",
            RuntimeRoute::Cupti => "cupti",
            RuntimeRoute::Interpose => "interpose",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_routes_by_value_and_default() {
        use super::RuntimeRoute as R;
        assert_eq!(R::parse(None, true), (R::Cupti, None));
        assert_eq!(R::parse(None, false), (R::Interpose, None));
        assert_eq!(R::parse(Some(" 1 "), false), (R::Interpose, None));
        assert_eq!(R::parse(Some("0"), true), (R::Off, None));
        assert_eq!(R::parse(Some("cupti"), false), (R::Cupti, None));
        assert_eq!(R::parse(Some("interpose"), true), (R::Interpose, None));
        assert_eq!(
            R::parse(Some("both"), false),
            (
                R::Interpose,
                Some(
                    "RTRACE_RUNTIME_API=both: give 0, 1, cupti or interpose; the default \
                     (interpose) used"
                        .to_string()
                )
            )
        );
    }

    #[test]
    fn gpu_kinds() {
        let k = |v: &str| GpuKinds::parse(v).0.values();
        assert_eq!(k("0"), [false; 6]);
        assert_eq!(k(""), [false; 6]);
        assert_eq!(k("1"), [true, true, true, false, false, true]);
        assert_eq!(k("all"), [true; 6]);
        assert_eq!(
            GpuKinds::parse("kernels, sync,bogus,,x"),
            (
                GpuKinds {
                    kernel: true,
                    sync: true,
                    ..Default::default()
                },
                vec!["bogus".to_string(), "x".to_string()]
            )
        );
        assert_eq!(k("resources"), [false, false, false, false, false, true]);
        assert!(GpuKinds::parse("resources").0.any());
        assert!(!GpuKinds::default().any());
        assert_eq!(
            GpuKinds::parse_strict("memcpy,kernel").unwrap().to_value(),
            "kernel,memcpy"
        );
        assert_eq!(
            GpuKinds::DEFAULT.to_value(),
            "kernel,memcpy,memset,resources"
        );
        assert_eq!(GpuKinds::default().to_value(), "0");
        assert_eq!(
            GpuKinds::parse_strict("bogus").unwrap_err(),
            "unknown GPU activity kind bogus: give 1, all, 0 or a comma-separated list of \
             kernel, memcpy, memset, memory, sync, resources"
        );
        assert_eq!(
            GpuKinds::parse_strict("a,kernel,b").unwrap_err(),
            "unknown GPU activity kinds a, b: give 1, all, 0 or a comma-separated list of \
             kernel, memcpy, memset, memory, sync, resources"
        );
    }

    #[test]
    fn ranges() {
        assert_eq!(
            parse_in_range("--flush-ms", "1000", &FLUSH_MS_RANGE),
            Ok(1000)
        );
        assert_eq!(
            parse_in_range("--flush-ms", "5000", &FLUSH_MS_RANGE),
            Err("--flush-ms: 5000 is out of range (give 1..=1000)".into())
        );
        assert_eq!(
            parse_in_range("--flush-ms", "0", &FLUSH_MS_RANGE),
            Err("--flush-ms: 0 is out of range (give 1..=1000)".into())
        );
        assert_eq!(
            parse_in_range("--flush-ms", "soon", &FLUSH_MS_RANGE),
            Err("--flush-ms: \"soon\" is not a number (give 1..=1000)".into())
        );
        assert!(BUFFER_RECORDS_RANGE.contains(&DEFAULT_BUFFER_RECORDS));
        assert!(FLUSH_MS_RANGE.contains(&DEFAULT_FLUSH_MS));
        assert!(FULL_WAIT_MS_RANGE.contains(&DEFAULT_FULL_WAIT_MS));
    }
}
