//! The environment variables librtrace.so reads (docs/configuration.md), by name: `rtrace
//! record` sets them for the program it runs, librtrace.so reads them once when it loads.

/// Trace path pattern: `%p` → process id, `%h` → host name, `%%` → `%`
/// ([`crate::DEFAULT_OUTPUT`] when unset or empty).
pub const OUTPUT: &str = "RTRACE_OUTPUT";
/// Capacity of each thread's buffer, in API records.
pub const BUFFER_RECORDS: &str = "RTRACE_BUFFER_RECORDS";
/// How long a thread whose buffer is full waits for the worker before it counts a record as
/// lost, in ms (0: it never waits).
pub const FULL_WAIT_MS: &str = "RTRACE_FULL_WAIT_MS";
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
/// `0`: no runtime API records (`cuda*` calls through CUPTI's runtime callbacks, recorded
/// whenever GPU activity is on).
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
/// `0`: do not store loaded modules' code images in the trace.
pub const MODULE_IMAGES: &str = "RTRACE_MODULE_IMAGES";
/// PC sampling: `1` at CUPTI's default period, `N` in 5..31 for one sample every 2^N cycles.
pub const PC_SAMPLING: &str = "RTRACE_PC_SAMPLING";
/// Comma-separated stall reasons PC sampling collects (all when unset).
pub const PC_SAMPLING_STALLS: &str = "RTRACE_PC_SAMPLING_STALLS";
/// `0`: leave NVTX alone.
pub const NVTX: &str = "RTRACE_NVTX";
/// The token of one `rtrace record` run: librtrace.so writes it into each trace's header
/// (`ProcessHeader::session`), and `rtrace record` lists the traces that carry it.
pub const SESSION: &str = "RTRACE_SESSION";
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
