//! What `rtrace record` traces: `-t/--trace LIST` (in the spirit of `nsys profile -t`), or the
//! older `--gpu-activity[=KINDS]`, turned into the variables librtrace.so reads. `rtrace
//! record` always sets them, so the default is its own (API calls, GPU activity and NVTX), not
//! the library's (API calls and NVTX only, for a program that preloads it directly).

use rtrace_format::env::{self, GpuKinds, GPU_KIND_NAMES};

/// What a run records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Traced {
    /// `-t none`: nothing (librtrace.so is preloaded with `RTRACE_DISABLE=1`).
    pub nothing: bool,
    /// The GPU activity kinds recorded through CUPTI.
    pub gpu: GpuKinds,
    /// NVTX ranges and marks.
    pub nvtx: bool,
    /// The option that chose this, as messages name it (`-t cuda`, `--gpu-activity=kernel`,
    /// `the default`).
    pub chosen_by: String,
}

impl Default for Traced {
    /// `rtrace record`'s default, `-t cuda,gpu,nvtx`.
    fn default() -> Self {
        Traced {
            nothing: false,
            gpu: GpuKinds::DEFAULT,
            nvtx: true,
            chosen_by: "the default".into(),
        }
    }
}

/// The names `-t` takes besides the GPU activity kinds ([`GPU_KIND_NAMES`]).
pub const TRACE_NAMES: [&str; 4] = ["cuda", "gpu", "nvtx", "none"];

impl Traced {
    /// `-t LIST`: comma-separated names: `cuda` (CUDA driver API calls: always recorded when
    /// anything is, since GPU records and NVTX ranges are tied to them), `gpu` (kernels,
    /// graphs' kernels, copies, memsets, and the contexts, streams and modules they ran in),
    /// a GPU activity kind (`kernel`, `memcpy`, `memset`, `memory`, `sync`, `resources`),
    /// `nvtx`, or `none` alone (nothing: librtrace.so is loaded but records nothing).
    pub fn parse(list: &str) -> Result<Traced, String> {
        let mut t = Traced {
            nothing: false,
            gpu: GpuKinds::default(),
            nvtx: false,
            chosen_by: format!("-t {list}"),
        };
        let words: Vec<&str> = list.split(',').map(str::trim).collect();
        for w in &words {
            match *w {
                "cuda" => {}
                "gpu" => {
                    let d = GpuKinds::DEFAULT;
                    for (on, name) in d.values().into_iter().zip(GPU_KIND_NAMES) {
                        if on {
                            t.gpu.add(name);
                        }
                    }
                }
                "nvtx" => t.nvtx = true,
                "none" if words.len() == 1 => t.nothing = true,
                "none" => return Err("none cannot be combined with other names".into()),
                w if t.gpu.add(w) => {}
                w => {
                    return Err(format!(
                        "unknown name {w:?}: give a comma-separated list of {}, {} (or none)",
                        TRACE_NAMES[..3].join(", "),
                        GPU_KIND_NAMES.join(", ")
                    ))
                }
            }
        }
        Ok(t)
    }

    /// `--gpu-activity[=KINDS]`: the kinds as `RTRACE_GPU_ACTIVITY` takes them (`1`, `all`,
    /// `0`, a list), words that name no kind refused; API calls and NVTX as by default.
    pub fn from_gpu_activity(kinds: &str) -> Result<Traced, String> {
        Ok(Traced {
            gpu: GpuKinds::parse_strict(kinds)?,
            chosen_by: if kinds == "1" {
                "--gpu-activity".into()
            } else {
                format!("--gpu-activity={kinds}")
            },
            ..Traced::default()
        })
    }

    /// The variables that tell librtrace.so what to record (every one set, so that the
    /// caller's environment does not change what the options say).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        if self.nothing {
            return vec![(env::DISABLE, "1".into())];
        }
        vec![
            (env::DISABLE, "0".into()),
            (env::GPU_ACTIVITY, self.gpu.to_value()),
            (env::NVTX, if self.nvtx { "1" } else { "0" }.into()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(list: &str) -> GpuKinds {
        GpuKinds::parse_strict(list).unwrap()
    }

    #[test]
    fn lists() {
        let t = Traced::parse("cuda").unwrap();
        assert_eq!(
            (t.nothing, t.gpu, t.nvtx),
            (false, GpuKinds::default(), false)
        );
        assert_eq!(
            t.env(),
            [
                ("RTRACE_DISABLE", "0".into()),
                ("RTRACE_GPU_ACTIVITY", "0".into()),
                ("RTRACE_NVTX", "0".into())
            ]
        );
        assert_eq!(t.chosen_by, "-t cuda");
        let t = Traced::parse("cuda,gpu,nvtx").unwrap();
        assert_eq!(
            (t.gpu, t.nvtx),
            (Traced::default().gpu, Traced::default().nvtx)
        );
        assert_eq!(
            t.env(),
            [
                ("RTRACE_DISABLE", "0".into()),
                (
                    "RTRACE_GPU_ACTIVITY",
                    "kernel,memcpy,memset,resources".into()
                ),
                ("RTRACE_NVTX", "1".into())
            ]
        );
        let t = Traced::parse(" kernel, sync ,nvtx").unwrap();
        assert_eq!((t.gpu, t.nvtx), (gpu("kernel,sync"), true));
        let t = Traced::parse("gpu,memory").unwrap();
        assert_eq!(t.gpu, gpu("kernel,memcpy,memset,memory,resources"));
        let t = Traced::parse("none").unwrap();
        assert!(t.nothing);
        assert_eq!(t.env(), [("RTRACE_DISABLE", "1".into())]);
        assert_eq!(
            Traced::parse("cuda,none").unwrap_err(),
            "none cannot be combined with other names"
        );
        assert_eq!(
            Traced::parse("cuda,osrt").unwrap_err(),
            "unknown name \"osrt\": give a comma-separated list of cuda, gpu, nvtx, kernel, \
             memcpy, memset, memory, sync, resources (or none)"
        );
        assert!(Traced::parse("").is_err());
    }

    #[test]
    fn gpu_activity_option() {
        let t = Traced::from_gpu_activity("1").unwrap();
        assert_eq!((t.gpu, t.nvtx), (GpuKinds::DEFAULT, true));
        assert_eq!(t.chosen_by, "--gpu-activity");
        let t = Traced::from_gpu_activity("0").unwrap();
        assert_eq!(t.gpu, GpuKinds::default());
        assert_eq!(t.chosen_by, "--gpu-activity=0");
        assert_eq!(Traced::from_gpu_activity("all").unwrap().gpu, GpuKinds::ALL);
        assert_eq!(
            Traced::from_gpu_activity("bogus").unwrap_err(),
            "unknown GPU activity kind bogus: give 1, all, 0 or a comma-separated list of \
             kernel, memcpy, memset, memory, sync, resources"
        );
    }
}
