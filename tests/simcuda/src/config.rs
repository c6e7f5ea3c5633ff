//! The `SIMCUDA_*` environment variables, read once on the first driver call.
//!
//! A malformed value is not fatal: the variable keeps its default, the first problem is kept in
//! [`Config::error`], and `cuInit` then fails with `CUDA_ERROR_INVALID_VALUE` so that a test
//! with a typo cannot pass by accident.

use std::sync::OnceLock;

use crate::errors::CUresult;

pub const DEFAULT_DEVICES: i32 = 1;
pub const MAX_DEVICES: i32 = 64;
pub const DEFAULT_COPY_BYTES_PER_US: u64 = 10_000;
pub const DEFAULT_HOST_NS_PER_CALL: u64 = 1_000;

/// When an injected failure fires, counting calls of one exported function from 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// `@N`: the Nth call only.
    Nth(u64),
    /// `@N+`: the Nth call and every later one.
    From(u64),
    /// `@*`: every call.
    Every,
}

impl When {
    pub fn matches(self, call: u64) -> bool {
        match self {
            When::Nth(n) => call == n,
            When::From(n) => call >= n,
            When::Every => true,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailRule {
    pub function: String,
    pub code: CUresult,
    pub when: When,
}

#[derive(Debug)]
pub struct Config {
    /// `SIMCUDA_DEVICES`
    pub devices: i32,
    /// `SIMCUDA_COPY_BYTES_PER_US`
    pub copy_bytes_per_us: u64,
    /// `SIMCUDA_HOST_NS_PER_CALL`
    pub host_ns_per_call: u64,
    /// `SIMCUDA_KERNEL_NS`, in the order given (the first entry for a name wins).
    pub kernel_ns: Vec<(String, u64)>,
    /// `SIMCUDA_FAIL`
    pub fail: Vec<FailRule>,
    /// `SIMCUDA_DEBUG=1`
    pub debug: bool,
    /// `SIMCUDA_CLOCK=real`: the host clock never falls behind `CLOCK_MONOTONIC`.
    pub real_clock: bool,
    /// The first malformed variable, if any.
    pub error: Option<String>,
}

impl Config {
    /// Builds the configuration from a variable lookup; `is_export` says whether a function name
    /// in `SIMCUDA_FAIL` is one the library exports.
    pub fn parse(var: impl Fn(&str) -> Option<String>, is_export: impl Fn(&str) -> bool) -> Config {
        let mut cfg = Config {
            devices: DEFAULT_DEVICES,
            copy_bytes_per_us: DEFAULT_COPY_BYTES_PER_US,
            host_ns_per_call: DEFAULT_HOST_NS_PER_CALL,
            kernel_ns: Vec::new(),
            fail: Vec::new(),
            debug: false,
            real_clock: false,
            error: None,
        };
        let mut problems = Vec::new();
        if let Some(v) = var(crate::activity_abi::SIMCUDA_CLOCK) {
            match crate::activity_abi::real_clock(&v) {
                Some(real) => cfg.real_clock = real,
                None => problems.push(format!("SIMCUDA_CLOCK={v:?}: expected virtual or real")),
            }
        }
        if let Some(v) = var("SIMCUDA_DEBUG") {
            cfg.debug = v.trim() == "1";
        }
        if let Some(v) = var("SIMCUDA_DEVICES") {
            match v.trim().parse::<i32>() {
                Ok(n) if (0..=MAX_DEVICES).contains(&n) => cfg.devices = n,
                _ => problems.push(format!("SIMCUDA_DEVICES={v:?}: expected 0..={MAX_DEVICES}")),
            }
        }
        if let Some(v) = var("SIMCUDA_COPY_BYTES_PER_US") {
            match v.trim().parse::<u64>() {
                Ok(n) if n > 0 => cfg.copy_bytes_per_us = n,
                _ => problems.push(format!(
                    "SIMCUDA_COPY_BYTES_PER_US={v:?}: expected an integer > 0"
                )),
            }
        }
        if let Some(v) = var("SIMCUDA_HOST_NS_PER_CALL") {
            match v.trim().parse::<u64>() {
                Ok(n) => cfg.host_ns_per_call = n,
                _ => problems.push(format!(
                    "SIMCUDA_HOST_NS_PER_CALL={v:?}: expected an integer >= 0"
                )),
            }
        }
        if let Some(v) = var("SIMCUDA_KERNEL_NS") {
            match parse_kernel_ns(&v) {
                Ok(list) => cfg.kernel_ns = list,
                Err(e) => problems.push(format!("SIMCUDA_KERNEL_NS={v:?}: {e}")),
            }
        }
        if let Some(v) = var("SIMCUDA_FAIL") {
            match parse_fail(&v, &is_export) {
                Ok(list) => cfg.fail = list,
                Err(e) => problems.push(format!("SIMCUDA_FAIL={v:?}: {e}")),
            }
        }
        cfg.error = problems.into_iter().next();
        cfg
    }

    /// The duration override for kernel `name`, if `SIMCUDA_KERNEL_NS` names it.
    pub fn kernel_override(&self, name: &str) -> Option<u64> {
        self.kernel_ns
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, ns)| ns)
    }
}

fn entries(v: &str) -> impl Iterator<Item = &str> {
    v.split(',').map(str::trim).filter(|e| !e.is_empty())
}

/// `name=ns[,name=ns...]`
pub fn parse_kernel_ns(v: &str) -> Result<Vec<(String, u64)>, String> {
    entries(v)
        .map(|e| {
            let (name, ns) = e
                .split_once('=')
                .ok_or(format!("{e:?}: expected name=ns"))?;
            let ns = ns
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("{e:?}: bad duration"))?;
            Ok((name.trim().to_string(), ns))
        })
        .collect()
}

/// `function=code@N|@N+|@*[,...]`
pub fn parse_fail(v: &str, is_export: &dyn Fn(&str) -> bool) -> Result<Vec<FailRule>, String> {
    entries(v)
        .map(|e| {
            let (function, rest) = e
                .split_once('=')
                .ok_or(format!("{e:?}: expected fn=code@when"))?;
            let function = function.trim();
            if !is_export(function) {
                return Err(format!("{function:?} is not a function simcuda exports"));
            }
            let (code, when) = rest
                .split_once('@')
                .ok_or(format!("{e:?}: expected code@when"))?;
            let code = code
                .trim()
                .parse::<CUresult>()
                .map_err(|_| format!("{e:?}: bad code"))?;
            let when = when.trim();
            let nth = |s: &str| match s.parse::<u64>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(format!("{e:?}: expected @N (N >= 1), @N+ or @*")),
            };
            let when = if when == "*" {
                When::Every
            } else if let Some(n) = when.strip_suffix('+') {
                When::From(nth(n)?)
            } else {
                When::Nth(nth(when)?)
            };
            Ok(FailRule {
                function: function.to_string(),
                code,
                when,
            })
        })
        .collect()
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// The process's configuration, read from the environment on first use.
pub fn get() -> &'static Config {
    CONFIG.get_or_init(|| {
        let cfg = Config::parse(
            |name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()),
            crate::procaddr::is_export,
        );
        if !cfg.debug {
            // Our copy of std is private to this library, so this hook only silences panics
            // raised inside simcuda (each one is caught at the export and returned as an error).
            std::panic::set_hook(Box::new(|_| {}));
        } else if let Some(e) = &cfg.error {
            crate::entry::debug(&format!("bad configuration: {e}"));
        }
        cfg
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(vars: &[(&str, &str)]) -> Config {
        Config::parse(
            |n| {
                vars.iter()
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| v.to_string())
            },
            |f| f.starts_with("cu"),
        )
    }

    #[test]
    fn defaults() {
        let c = cfg(&[]);
        assert_eq!(
            (c.devices, c.copy_bytes_per_us, c.host_ns_per_call),
            (1, 10_000, 1_000)
        );
        assert!(c.error.is_none() && c.fail.is_empty() && !c.debug);
    }

    #[test]
    fn fail_rules() {
        let c = cfg(&[(
            "SIMCUDA_FAIL",
            "cuMemAlloc_v2=2@3, cuLaunchKernel=400@*,cuInit=999@2+",
        )]);
        assert_eq!(c.error, None);
        assert_eq!(
            c.fail[0],
            FailRule {
                function: "cuMemAlloc_v2".into(),
                code: 2,
                when: When::Nth(3)
            }
        );
        assert_eq!(c.fail[1].when, When::Every);
        assert_eq!(c.fail[2].when, When::From(2));
        assert!(cfg(&[("SIMCUDA_FAIL", "bogus=2@1")]).error.is_some());
        assert!(cfg(&[("SIMCUDA_FAIL", "cuInit=2@0")]).error.is_some());
        assert!(cfg(&[("SIMCUDA_FAIL", "cuInit=2")]).error.is_some());
    }

    #[test]
    fn kernels_and_numbers() {
        let c = cfg(&[("SIMCUDA_KERNEL_NS", "a=5,b=7"), ("SIMCUDA_DEVICES", "3")]);
        assert_eq!(c.kernel_override("b"), Some(7));
        assert_eq!(c.kernel_override("c"), None);
        assert_eq!(c.devices, 3);
        let bad = cfg(&[("SIMCUDA_DEVICES", "x"), ("SIMCUDA_COPY_BYTES_PER_US", "0")]);
        assert_eq!(bad.devices, 1);
        assert!(bad.error.unwrap().starts_with("SIMCUDA_DEVICES"));
    }
}
