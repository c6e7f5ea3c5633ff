//! Settings read once from `RTRACE_*` environment variables at start-up.

use std::ffi::OsString;

/// Everything the environment can set; see `docs/configuration.md`.
#[derive(Clone, Debug)]
pub struct Config {
    /// Output path pattern: `%p` → pid, `%h` → host name, `%%` → `%`.
    pub output: OsString,
    /// Ring capacity per thread, in records (a power of two).
    pub buffer_records: usize,
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
    /// The CUPTI library to load when the process has not loaded one.
    pub cupti_library: Option<OsString>,
    /// Receive NVTX calls (`RTRACE_NVTX`, on unless `0`).
    pub nvtx: bool,
}

/// The kinds of GPU activity to record.
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

impl GpuKinds {
    /// `RTRACE_GPU_ACTIVITY`: empty or `0` → none; `1` (`on`, `yes`, `true`, `default`) →
    /// kernels, copies, memsets and resources; `all` → also allocations and synchronizations;
    /// else a comma-separated list of `kernel`, `memcpy`, `memset`, `memory`, `sync`,
    /// `resources` (other words are ignored).
    pub fn parse(v: &str) -> GpuKinds {
        let default = GpuKinds {
            kernel: true,
            memcpy: true,
            memset: true,
            resources: true,
            ..Default::default()
        };
        match v.trim() {
            "" | "0" | "off" | "no" | "false" => GpuKinds::default(),
            "1" | "on" | "yes" | "true" | "default" => default,
            "all" => GpuKinds {
                memory: true,
                sync: true,
                ..default
            },
            list => {
                let mut k = GpuKinds::default();
                for w in list.split(',').map(str::trim) {
                    match w {
                        "kernel" | "kernels" => k.kernel = true,
                        "memcpy" => k.memcpy = true,
                        "memset" => k.memset = true,
                        "memory" => k.memory = true,
                        "sync" => k.sync = true,
                        "resources" => k.resources = true,
                        _ => {}
                    }
                }
                k
            }
        }
    }

    pub fn any(&self) -> bool {
        self.kernel || self.memcpy || self.memset || self.memory || self.sync || self.resources
    }
}

pub const DEFAULT_OUTPUT: &str = "rtrace-%p.bin";
pub const DEFAULT_BUFFER_RECORDS: usize = 1 << 16;
pub const DEFAULT_FLUSH_MS: u64 = 200;

impl Config {
    pub fn from_env() -> Config {
        Self::from_lookup(|k| std::env::var_os(k))
    }

    /// Builds a config from a variable lookup (tests pass their own).
    pub fn from_lookup(get: impl Fn(&str) -> Option<OsString>) -> Config {
        let num = |k: &str| -> Option<u64> { get(k)?.to_str()?.trim().parse().ok() };
        let flag = |k: &str| get(k).is_some_and(|v| !v.is_empty() && v != "0");
        let buffer_records = num("RTRACE_BUFFER_RECORDS")
            .map(|n| (n as usize).clamp(64, 1 << 24).next_power_of_two())
            .unwrap_or(DEFAULT_BUFFER_RECORDS);
        let flush_ms = num("RTRACE_FLUSH_MS")
            .unwrap_or(DEFAULT_FLUSH_MS)
            .clamp(1, 1000);
        Config {
            output: get("RTRACE_OUTPUT")
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| DEFAULT_OUTPUT.into()),
            buffer_records,
            flush_ms,
            poll_ms: flush_ms.min(5),
            disabled: flag("RTRACE_DISABLE"),
            debug: flag("RTRACE_DEBUG"),
            cuda_library: get("RTRACE_CUDA_LIBRARY")
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| "libcuda.so.1".into()),
            clock_monotonic: get("RTRACE_CLOCK").is_some_and(|v| v == "monotonic"),
            gpu_activity: get("RTRACE_GPU_ACTIVITY")
                .map(|v| GpuKinds::parse(&v.to_string_lossy()))
                .unwrap_or_default(),
            cupti_library: get("RTRACE_CUPTI_LIBRARY").filter(|v| !v.is_empty()),
            nvtx: get("RTRACE_NVTX").is_none_or(|v| v != "0"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(vars: &[(&str, &str)]) -> Config {
        let m: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.into()))
            .collect();
        Config::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults() {
        let c = cfg(&[]);
        assert_eq!(c.output, "rtrace-%p.bin");
        assert_eq!(c.buffer_records, 65536);
        assert_eq!(c.flush_ms, 200);
        assert_eq!(c.poll_ms, 5);
        assert!(!c.disabled && !c.debug);
        assert_eq!(c.cuda_library, "libcuda.so.1");
        assert!(!c.clock_monotonic);
        assert!(!c.gpu_activity.any());
        assert_eq!(c.cupti_library, None);
        assert!(cfg(&[("RTRACE_CLOCK", "monotonic")]).clock_monotonic);
    }

    #[test]
    fn gpu_kinds() {
        let k = |v: &str| {
            let g = GpuKinds::parse(v);
            [g.kernel, g.memcpy, g.memset, g.memory, g.sync, g.resources]
        };
        assert_eq!(k("0"), [false; 6]);
        assert_eq!(k(""), [false; 6]);
        assert_eq!(k("1"), [true, true, true, false, false, true]);
        assert_eq!(k("all"), [true; 6]);
        assert_eq!(
            k("kernel, sync,bogus"),
            [true, false, false, false, true, false]
        );
        assert_eq!(k("resources"), [false, false, false, false, false, true]);
        assert!(GpuKinds::parse("resources").any());
        assert!(
            cfg(&[("RTRACE_GPU_ACTIVITY", "memory")])
                .gpu_activity
                .memory
        );
    }

    #[test]
    fn values_are_clamped_and_rounded() {
        let c = cfg(&[
            ("RTRACE_BUFFER_RECORDS", "1000"),
            ("RTRACE_FLUSH_MS", "5000"),
            ("RTRACE_DISABLE", "1"),
            ("RTRACE_DEBUG", "0"),
        ]);
        assert_eq!(c.buffer_records, 1024);
        assert_eq!(c.flush_ms, 1000);
        assert!(c.disabled && !c.debug);
        assert_eq!(cfg(&[("RTRACE_BUFFER_RECORDS", "3")]).buffer_records, 64);
        assert_eq!(cfg(&[("RTRACE_FLUSH_MS", "junk")]).flush_ms, 200);
        assert_eq!(cfg(&[("RTRACE_FLUSH_MS", "2")]).poll_ms, 2);
    }
}
