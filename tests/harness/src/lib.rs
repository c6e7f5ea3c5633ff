//! Helpers for rtrace's integration tests: build the C programs of `tests/programs/` against
//! the real `cuda.h`, run them under `LD_PRELOAD=librtrace.so` against the simulated driver
//! (`tests/simcuda`), and read the traces they leave through the collector library.
//!
//! The tests need `cargo build` to have built `librtrace.so`, `libcuda.so` (the simulator) and
//! `rtrace` in the same profile first (`tools/test.sh` does), and the CUDA headers
//! (`$CUDA_INCLUDE` or `.venv`, installed by `tools/setup-cuda.sh`).

use rtrace_collector::{load_trace, Trace};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Where cargo put the libraries and binaries of this test run's profile.
pub fn target_dir() -> PathBuf {
    // The test executable lives in <target>/<profile>/deps/.
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

fn built(name: &str) -> PathBuf {
    let p = target_dir().join(name);
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --workspace` before the tests (tools/test.sh does)",
        p.display()
    );
    p
}

/// `librtrace.so` of this profile.
pub fn librtrace() -> PathBuf {
    built("librtrace.so")
}

/// The `rtrace` command of this profile.
pub fn rtrace_bin() -> PathBuf {
    built("rtrace")
}

/// The CUDA include directory.
pub fn cuda_include() -> PathBuf {
    if let Some(p) = std::env::var_os("CUDA_INCLUDE") {
        return PathBuf::from(p);
    }
    let venv = root().join(".venv/lib");
    if let Ok(entries) = std::fs::read_dir(&venv) {
        for e in entries.flatten() {
            let inc = e.path().join("site-packages/nvidia/cu13/include");
            if inc.join("cuda.h").exists() {
                return inc;
            }
        }
    }
    panic!("no cuda.h: set CUDA_INCLUDE or run tools/setup-cuda.sh");
}

/// A directory holding the simulator as `libcuda.so.1` (and `libcuda.so` for linking), and the
/// compiled test programs.
pub struct Build {
    pub lib: PathBuf,
    pub bin: PathBuf,
}

/// Builds (once per test process) every program of `tests/programs/` and the benchmark.
pub fn build() -> &'static Build {
    static BUILD: OnceLock<Build> = OnceLock::new();
    BUILD.get_or_init(|| {
        let dir = target_dir()
            .join("rtrace-tests")
            .join(std::process::id().to_string());
        let lib = dir.join("lib");
        let bin = dir.join("bin");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::create_dir_all(&bin).unwrap();
        for (built_name, names) in [
            ("libcuda.so", ["libcuda.so.1", "libcuda.so"]),
            ("libcupti.so", ["libcupti.so.13", "libcupti.so"]),
        ] {
            let sim = built(built_name);
            for name in names {
                let _ = std::fs::remove_file(lib.join(name));
                std::os::unix::fs::symlink(&sim, lib.join(name)).unwrap();
            }
        }
        let inc = cuda_include();
        let programs = root().join("tests/programs");
        let sources: &[(&str, &[&str])] = &[
            ("direct", &["-lcuda", "-pthread"]),
            ("threads", &["-lcuda", "-pthread"]),
            ("fork", &["-lcuda", "-pthread"]),
            ("reexec", &["-lcuda"]),
            ("exits", &["-lcuda", "-pthread"]),
            ("closefds", &["-lcuda"]),
            ("killme", &["-lcuda", "-pthread"]),
            ("errors", &["-lcuda", "-pthread"]),
            ("procaddr", &["-ldl"]),
            ("dlsym", &["-ldl"]),
            ("cupti_client", &["-lcupti", "-lcuda", "-pthread"]),
            ("capture", &["-lcuda", "-ldl"]),
            ("profile", &["-lcuda"]),
            ("profile_self", &["-lcupti", "-lcuda"]),
            ("ranges", &["-lcuda", "-ldl"]),
            ("crashes", &["-lcuda", "-pthread", "-lstdc++"]),
            ("deepbind", &["-ldl"]),
            ("dlsym_missing", &["-ldl"]),
            ("nvtx_threads", &["-lcuda", "-ldl", "-pthread"]),
        ];
        for (name, libs) in sources {
            let c = programs.join(format!("{name}.c"));
            let src = if c.exists() {
                c
            } else {
                programs.join(format!("{name}.cpp"))
            };
            compile(&src, &bin.join(name), &inc, &lib, libs);
        }
        // A plugin linked with the driver, for opening with RTLD_DEEPBIND: lazily bound calls
        // only; with a pointer slot too, every slot bound at load and read-only after; the same
        // with its read-only pages sealed (mseal), so that nothing can write them.
        for (name, flags) in [
            ("libdeepbind_lazy.so", &["-Wl,-z,lazy"][..]),
            (
                "libdeepbind_now.so",
                &["-DWITH_POINTER", "-Wl,-z,now", "-Wl,-z,relro"],
            ),
            (
                "libdeepbind_sealed.so",
                &[
                    "-DWITH_POINTER",
                    "-DSEAL_RELRO",
                    "-Wl,-z,now",
                    "-Wl,-z,relro",
                ],
            ),
        ] {
            let mut args = vec!["-shared", "-fPIC"];
            args.extend_from_slice(flags);
            args.extend_from_slice(&["-lcuda", "-ldl"]);
            compile(
                &programs.join("deepbind_plugin.c"),
                &bin.join(name),
                &inc,
                &lib,
                &args,
            );
        }
        // NVTX from two images: a shared library of its own, and the program.
        compile(
            &programs.join("nvtx_lib.c"),
            &bin.join("libnvtx_lib.so"),
            &inc,
            &lib,
            &["-shared", "-fPIC", "-ldl"],
        );
        // The simulated CUDA runtime, beside the simulated driver, its symbols versioned as the
        // real one's are (`cudaMalloc@@libcudart.so.13`); a second one, libcudart.so.12, in a
        // directory of its own, for a plugin linked to it (tests/programs/two_runtimes.c).
        let lib12 = dir.join("lib12");
        std::fs::create_dir_all(&lib12).unwrap();
        for (major, into) in [(13, &lib), (12, &lib12)] {
            let map = into.join(format!("libcudart.so.{major}.map"));
            std::fs::write(&map, format!("libcudart.so.{major} {{ global: *; }};\n")).unwrap();
            compile(
                &programs.join("simcudart.c"),
                &into.join(format!("libcudart.so.{major}")),
                &inc,
                &lib,
                &[
                    "-shared",
                    "-fPIC",
                    &format!("-Wl,-soname,libcudart.so.{major}"),
                    &format!("-Wl,--version-script,{}", map.display()),
                    &format!("-DSIMCUDART_VERSION={major}000"),
                    "-ldl",
                    "-pthread",
                ],
            );
        }
        compile(
            &programs.join("two_runtimes_plugin.c"),
            &bin.join("libtwo_runtimes_plugin.so"),
            &inc,
            &lib12,
            &[
                "-shared",
                "-fPIC",
                "-l:libcudart.so.12",
                &format!("-Wl,-rpath,{}", lib12.display()),
            ],
        );
        let _ = std::fs::remove_file(lib.join("libcudart.so"));
        std::os::unix::fs::symlink("libcudart.so.13", lib.join("libcudart.so")).unwrap();
        compile(
            &programs.join("runtime.c"),
            &bin.join("runtime"),
            &inc,
            &lib,
            &["-lcudart", "-lcuda"],
        );
        compile(
            &programs.join("two_runtimes.c"),
            &bin.join("two_runtimes"),
            &inc,
            &lib,
            &["-lcudart", "-ldl"],
        );
        let rpath = format!("-Wl,-rpath,{}", bin.display());
        let libdir = format!("-L{}", bin.display());
        compile(
            &programs.join("nvtx.c"),
            &bin.join("nvtx"),
            &inc,
            &lib,
            &[&libdir, "-lnvtx_lib", &rpath, "-ldl", "-pthread"],
        );
        compile(
            &root().join("samples/driver_api.c"),
            &bin.join("driver_api"),
            &inc,
            &lib,
            &["-lcuda"],
        );
        compile(
            &root().join("tools/bench/threads_rss.c"),
            &bin.join("threads_rss"),
            &inc,
            &lib,
            &["-lcuda", "-pthread"],
        );
        Build { lib, bin }
    })
}

fn compile(src: &Path, out: &Path, inc: &Path, lib: &Path, libs: &[&str]) {
    let status = Command::new("gcc")
        .args(["-O1", "-Wall", "-Werror"])
        .arg(format!("-I{}", inc.display()))
        .arg(src)
        .arg("-o")
        .arg(out)
        .arg(format!("-L{}", lib.display()))
        .args(libs)
        .status()
        .expect("gcc");
    assert!(status.success(), "gcc failed for {}", src.display());
}

/// One run of a program and the traces it left.
pub struct Run {
    pub output: Output,
    /// Directory the traces were written to.
    pub dir: PathBuf,
}

impl Run {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    pub fn code(&self) -> Option<i32> {
        self.output.status.code()
    }

    /// The signal that ended the program, if one did.
    pub fn signal(&self) -> Option<i32> {
        std::os::unix::process::ExitStatusExt::signal(&self.output.status)
    }

    /// Paths of the trace files, sorted.
    pub fn trace_files(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "bin"))
            .collect();
        v.sort();
        v
    }

    /// Every trace, loaded (panics on damage).
    pub fn traces(&self) -> Vec<Trace> {
        self.trace_files()
            .iter()
            .map(|p| {
                let t = load_trace(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                assert_eq!(t.damage, None, "{}", p.display());
                t
            })
            .collect()
    }

    /// The only trace; panics unless there is exactly one.
    pub fn trace(&self) -> Trace {
        let mut t = self.traces();
        assert_eq!(t.len(), 1, "trace files: {:?}", self.trace_files());
        t.remove(0)
    }

    /// The simulator's own per-function call counts (SIMCUDA_COUNT_OUTPUT), by pid.
    pub fn sim_counts(&self) -> BTreeMap<u32, BTreeMap<String, u64>> {
        let mut out = BTreeMap::new();
        for e in std::fs::read_dir(&self.dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_prefix("simcounts.") {
                let text = std::fs::read_to_string(e.path()).unwrap();
                let counts = text
                    .lines()
                    .map(|l| {
                        let (f, n) = l.split_once(' ').unwrap();
                        (f.to_string(), n.parse().unwrap())
                    })
                    .collect();
                out.insert(pid.parse().unwrap(), counts);
            }
        }
        out
    }
}

/// How to run a program.
pub struct Spec<'a> {
    pub program: &'a str,
    pub args: &'a [&'a str],
    pub env: &'a [(&'a str, &'a str)],
    pub traced: bool,
}

impl<'a> Spec<'a> {
    pub fn traced(program: &'a str) -> Self {
        Spec {
            program,
            args: &[],
            env: &[],
            traced: true,
        }
    }

    pub fn untraced(program: &'a str) -> Self {
        Spec {
            traced: false,
            ..Spec::traced(program)
        }
    }

    pub fn args(mut self, args: &'a [&'a str]) -> Self {
        self.args = args;
        self
    }

    pub fn env(mut self, env: &'a [(&'a str, &'a str)]) -> Self {
        self.env = env;
        self
    }
}

/// A fresh, empty directory for one run's files.
pub fn fresh_dir(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = target_dir()
        .join("rtrace-tests")
        .join(std::process::id().to_string())
        .join(format!("run-{n}-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The command for `spec`, with the simulator on the library path and, when traced,
/// librtrace.so preloaded writing into `dir`.
pub fn command(spec: &Spec, dir: &Path) -> Command {
    let b = build();
    let mut cmd = Command::new(b.bin.join(spec.program));
    cmd.args(spec.args)
        .env("LD_LIBRARY_PATH", &b.lib)
        .env("SIMCUDA_COUNT_OUTPUT", dir.join("simcounts"))
        .env("RTRACE_SIMULATED", "1")
        .env_remove("LD_PRELOAD")
        .env_remove("RTRACE_OUTPUT")
        .env_remove("RTRACE_DISABLE")
        .env_remove("RTRACE_DEBUG")
        .env_remove("RTRACE_NVTX")
        .env_remove("NVTX_INJECTION64_PATH")
        .stdin(Stdio::null());
    if spec.traced {
        cmd.env("LD_PRELOAD", librtrace())
            .env("RTRACE_OUTPUT", dir.join("trace-%p.bin"));
    }
    for (k, v) in spec.env {
        cmd.env(k, v);
    }
    // The programs start with SIGINT and SIGTERM at their defaults, however the tests were
    // started (a shell's background job inherits SIGINT ignored).
    // SAFETY: signal() only, in the child before exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            Ok(())
        });
    }
    cmd
}

/// Runs `spec` to completion.
pub fn run(spec: Spec) -> Run {
    let dir = fresh_dir(spec.program);
    let output = command(&spec, &dir).output().expect("spawn");
    Run { output, dir }
}

/// API record counts per function name over `traces`.
pub fn counts(traces: &[Trace]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for t in traces {
        for th in t.threads.values() {
            for r in &th.records {
                *m.entry(t.functions[&r.function].clone()).or_insert(0) += 1;
            }
        }
    }
    m
}

/// All API records of a trace, with their thread, in file order.
pub fn records(t: &Trace) -> Vec<(u64, rtrace_format::ApiRecord)> {
    t.threads
        .values()
        .flat_map(|th| th.records.iter().map(move |r| (th.tid, *r)))
        .collect()
}

/// Checks what every trace must satisfy: times ordered within a call and within a thread and
/// inside the process's clock anchors (start, and end when there is one and no record came
/// after it: records other threads made while the end was written are rebuilt from the rings),
/// correlation ids unique, function ids named.
pub fn check_invariants(t: &Trace) {
    let mut seen = std::collections::HashSet::new();
    // Timestamps are converted from the TSC by interpolation: allow a microsecond.
    let slack = 1_000;
    let first = t.header.start.monotonic_ns - slack;
    let last = t
        .end
        .as_ref()
        .filter(|_| t.salvaged == 0)
        .map_or(u64::MAX, |e| e.end.monotonic_ns + slack);
    for th in t.threads.values() {
        let mut last_start = 0;
        for r in &th.records {
            assert!(
                r.start_ns >= first && r.end_ns <= last,
                "{r:?} outside {first}..{last}"
            );
            assert!(r.start_ns <= r.end_ns, "{r:?}");
            assert!(
                r.start_ns >= last_start,
                "thread {} out of order: {r:?}",
                th.tid
            );
            last_start = r.start_ns;
            assert!(r.correlation > 0);
            assert!(seen.insert(r.correlation), "duplicate correlation {r:?}");
            assert!(t.functions.contains_key(&r.function), "{r:?}");
        }
    }
}

/// The calls of the trace at `path` as the GPU checks' own reader (`tests/gpu/tracefile.py`,
/// written from docs/format.md, not from the collector) reads them, against `t`'s (the
/// collector's reading of the same file): the same calls, times, threads and correlation ids.
pub fn gpu_checks_reader_agrees(path: &Path, t: &Trace) {
    let code = "import sys, tracefile\n\
                for r in tracefile.read(sys.argv[1], runtime=True): print(*r[1:])";
    let out = Command::new("python3")
        .args(["-c", code])
        .arg(path)
        .env("PYTHONPATH", root().join("tests/gpu"))
        .output()
        .expect("running python3");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tracefile.py on {path:?}: {err}");
    let mut got: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let mut want: Vec<String> = t
        .threads
        .values()
        .flat_map(|th| {
            th.records.iter().map(|r| {
                let (start, end) = (r.start_ns, r.end_ns);
                format!("{} {start} {end} {} {}", r.result, th.tid, r.correlation)
            })
        })
        .collect();
    got.sort();
    want.sort();
    assert_eq!(
        got.len(),
        want.len(),
        "calls read by tracefile.py and by rtrace"
    );
    assert!(got == want, "tracefile.py reads other calls than rtrace");
}
