//! `rtrace record`'s options and messages (issue 20): usage errors for unknown options and
//! values, `-t` and the default (API calls, GPU activity and NVTX), the summary of each trace,
//! `--stats`, output patterns (`%%`, `%q{VAR}`) and `--force-overwrite`.

use rtrace_collector::text::file_size;
use rtrace_collector::{load_trace, Trace};
use rtrace_tests::*;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Command, Output};

/// `capture`'s driver calls, kernels, memsets and NVTX ranges (tests/programs/capture.c).
const CAPTURE: (u64, u64, u64, u64) = (24, 4, 4, 4);
/// `direct`'s driver calls (tests/programs/README.md).
const DIRECT_CALLS: u64 = 44;

/// `rtrace ARGS`, the simulated driver and CUPTI on the loader's path, with `env` added.
fn rtrace(args: &[&str], env: &[(&str, &str)]) -> Output {
    let b = build();
    Command::new(rtrace_bin())
        .args(args)
        .env("LD_LIBRARY_PATH", &b.lib)
        .env_remove("LD_PRELOAD")
        .env_remove("RTRACE_DEBUG")
        .env_remove("RTRACE_GPU_ACTIVITY")
        .env_remove("NVTX_INJECTION64_PATH")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn program(name: &str) -> String {
    build().bin.join(name).to_str().unwrap().to_string()
}

fn notices(t: &Trace) -> Vec<String> {
    t.notices.iter().map(|n| n.message.clone()).collect()
}

fn size(path: &Path) -> String {
    file_size(&std::fs::metadata(path).unwrap())
}

/// The one trace in `dir`.
fn only_trace(dir: &Path) -> std::path::PathBuf {
    let files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            !p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("simcounts.")
        })
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

#[test]
fn unknown_options_and_values_are_usage_errors_and_nothing_runs() {
    let dir = fresh_dir("options-usage");
    let ran = dir.join("ran");
    let ran = ran.to_str().unwrap();
    for (options, message) in [
        (
            &["--bogus"][..],
            "error: unexpected argument '--bogus' found",
        ),
        (
            &["--gpu-activity=bogus"],
            "error: invalid value 'bogus' for '--gpu-activity[=<KINDS>]': unknown GPU activity \
             kind bogus: give 1, all, 0 or a comma-separated list of kernel, memcpy, memset, \
             memory, sync, resources",
        ),
        (
            &["--flush-ms", "5000"],
            "error: invalid value '5000' for '--flush-ms <N>': 5000 is out of range (give 1 to \
             1000)",
        ),
        (
            &["--buffer-records", "33554432"],
            "error: invalid value '33554432' for '--buffer-records <N>': 33554432 is out of \
             range (give a power of two from 64 to 16777216)",
        ),
        (
            &["-t", "cuda,osrt"],
            "error: invalid value 'cuda,osrt' for '--trace <LIST>': unknown name \"osrt\": give \
             a comma-separated list of cuda, gpu, nvtx, kernel, memcpy, memset, memory, sync, \
             resources (or none)",
        ),
        (
            &["-t", "cuda", "--gpu-activity"],
            "error: the argument '--trace <LIST>' cannot be used with '--gpu-activity[=<KINDS>]'",
        ),
        (
            &["-t", "cuda", "--nvtx-capture", "step"],
            "rtrace: --nvtx-capture needs NVTX, which -t cuda leaves off: add nvtx to the list",
        ),
        (
            &["-t", "none", "--pc-sampling"],
            "rtrace: --pc-sampling needs tracing, and -t none records nothing",
        ),
    ] {
        let mut args = vec!["record"];
        args.extend_from_slice(options);
        args.extend_from_slice(&["--", "touch", ran]);
        let out = rtrace(&args, &[]);
        assert_eq!(out.status.code(), Some(2), "{options:?}");
        assert_eq!(
            text(&out.stderr).lines().next(),
            Some(message),
            "{options:?}"
        );
        assert!(!Path::new(ran).exists(), "{options:?} ran the program");
    }
    // Every subcommand.
    for args in [
        &["report", "--bogus", "x.bin"][..],
        &["report", "--format", "xml", "x.bin"],
        &["export", "--format", "perfetto", "--bogus", "x.bin"],
        &["export", "--format", "svg", "x.bin"],
        &["sass", "--bogus", "x.bin"],
        &["metrics", "--chip", "GH100", "--bogus"],
        &["metrics", "--chip", "GH100", "--format", "xml"],
        &["bogus"],
    ] {
        let out = rtrace(args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(text(&out.stderr).starts_with("error: "), "{args:?}");
    }
}

#[test]
fn the_default_records_gpu_activity_and_nvtx_and_says_what_each_trace_holds() {
    let (api, kernels, memsets, nvtx) = CAPTURE;
    let dir = fresh_dir("options-default");
    let pattern = dir.join("t-%p.bin");
    let out = rtrace(
        &[
            "record",
            "-o",
            pattern.to_str().unwrap(),
            "--",
            &program("capture"),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let path = only_trace(&dir);
    assert_eq!(
        text(&out.stderr),
        format!(
            "rtrace: trace written to {} ({})\n\
             rtrace:   {api} API calls, {kernels} kernels, 0 memory copies, {memsets} memsets, \
             {nvtx} NVTX ranges; none dropped\n",
            path.display(),
            size(&path)
        )
    );
    let t = load_trace(&path).unwrap();
    assert_eq!(t.kernels.len() as u64, kernels);
    assert_eq!(t.memsets.len() as u64, memsets);

    // API calls only, one option away.
    std::fs::remove_file(&path).unwrap();
    let out = rtrace(
        &[
            "record",
            "-t",
            "cuda",
            "-o",
            pattern.to_str().unwrap(),
            "--",
            &program("capture"),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let path = only_trace(&dir);
    assert_eq!(
        text(&out.stderr),
        format!(
            "rtrace: trace written to {} ({})\n\
             rtrace:   {api} API calls; none dropped\n\
             rtrace:   GPU activity: off (-t cuda)\n\
             rtrace:   NVTX: off (-t cuda)\n",
            path.display(),
            size(&path)
        )
    );
    let t = load_trace(&path).unwrap();
    assert_eq!((t.kernels.len(), t.memsets.len()), (0, 0));
    assert_eq!(t.threads.values().map(|th| th.nvtx.len()).sum::<usize>(), 0);

    // Kinds one by one; the older option says the same.
    std::fs::remove_file(&path).unwrap();
    for options in [&["-t", "kernel,nvtx"][..], &["--gpu-activity=kernel"]] {
        let mut args = vec!["record", "-o", pattern.to_str().unwrap()];
        args.extend_from_slice(options);
        let capture = program("capture");
        args.extend_from_slice(&["--", &capture]);
        let out = rtrace(&args, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let path = only_trace(&dir);
        assert_eq!(
            text(&out.stderr),
            format!(
                "rtrace: trace written to {} ({})\n\
                 rtrace:   {api} API calls, {kernels} kernels, {nvtx} NVTX ranges; none dropped\n",
                path.display(),
                size(&path)
            ),
            "{options:?}"
        );
        std::fs::remove_file(&path).unwrap();
    }

    // Capture control: what it gated and left out, from the trace's notices.
    let out = rtrace(
        &[
            "record",
            "--capture-range",
            "cudaProfilerApi",
            "-o",
            pattern.to_str().unwrap(),
            "--",
            &program("capture"),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let path = only_trace(&dir);
    assert_eq!(
        text(&out.stderr),
        format!(
            "rtrace: trace written to {} ({})\n\
             rtrace:   6 API calls, 1 kernel, 0 memory copies, 1 memset, 1 NVTX range; none \
             dropped\n\
             rtrace:   capture: recording only between cuProfilerStart and cuProfilerStop\n\
             rtrace:   capture: 6 GPU records left out (not launched by a recorded call)\n",
            path.display(),
            size(&path)
        )
    );
    std::fs::remove_file(&path).unwrap();

    // Nothing: the program runs untraced.
    let out = rtrace(
        &[
            "record",
            "-t",
            "none",
            "-o",
            pattern.to_str().unwrap(),
            "--",
            &program("capture"),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "capture ok calls=24\n");
    assert_eq!(
        text(&out.stderr),
        "rtrace: no trace was written: nothing was traced (-t none)\n"
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

#[test]
fn stats_prints_the_report_of_each_trace() {
    let dir = fresh_dir("options-stats");
    let pattern = dir.join("t-%p.bin");
    let out = rtrace(
        &[
            "record",
            "--stats",
            "-o",
            pattern.to_str().unwrap(),
            "--",
            &program("fork"),
            "10",
            "20",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut traces: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path().to_str().unwrap().to_string())
        .collect();
    assert_eq!(traces.len(), 2);
    // The parent's trace first, as the summary lists them.
    traces.sort_by_key(|p| {
        load_trace(Path::new(p))
            .unwrap()
            .header
            .forked_from
            .is_some()
    });
    let mut args = vec!["report"];
    args.extend(traces.iter().map(String::as_str));
    let report = rtrace(&args, &[]);
    assert_eq!(report.status.code(), Some(0));
    let stdout = text(&out.stdout);
    let report = text(&report.stdout);
    assert!(report.contains("API summary: "), "{report}");
    assert!(
        stdout.ends_with(&report),
        "--stats:\n{stdout}\nrtrace report:\n{report}"
    );
    assert_eq!(
        &stdout[..stdout.len() - report.len()],
        "fork child ok child_calls=31\nfork parent ok parent_calls=26 child_status=0\n"
    );
}

#[test]
fn patterns_expand_one_way_in_the_library_and_the_command() {
    let dir = fresh_dir("options-patterns");
    for (pattern, env, name) in [
        ("x%%-%p.bin", &[][..], "x%-PID.bin"),
        (
            "r%q{RTRACE_TEST_RANK}-%p.bin",
            &[("RTRACE_TEST_RANK", "3")],
            "r3-PID.bin",
        ),
        ("u%q{RTRACE_TEST_UNSET}-%p.bin", &[], "u-PID.bin"),
        (
            "%%q{RTRACE_TEST_RANK}-%p.bin",
            &[("RTRACE_TEST_RANK", "3")],
            "%q{RTRACE_TEST_RANK}-PID.bin",
        ),
    ] {
        let out = rtrace(
            &[
                "record",
                "-t",
                "cuda",
                "-o",
                dir.join(pattern).to_str().unwrap(),
                "--",
                &program("direct"),
            ],
            env,
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let path = only_trace(&dir);
        let t = load_trace(&path).unwrap();
        assert_eq!(
            path,
            dir.join(name.replace("PID", &t.header.pid.to_string())),
            "{pattern}"
        );
        // The command found the file the library wrote.
        assert!(
            text(&out.stderr).starts_with(&format!(
                "rtrace: trace written to {} ({})\nrtrace:   {DIRECT_CALLS} API calls; none dropped\n",
                path.display(),
                size(&path)
            )),
            "{pattern}: {}",
            text(&out.stderr)
        );
        std::fs::remove_file(&path).unwrap();
    }
}

/// The launcher's rank variables set at start-up go into the header, in `RANK_VARS`' order,
/// and name the ranks in the report.
#[test]
fn rank_variables_are_recorded_and_name_the_ranks() {
    let dir = fresh_dir("options-ranks");
    for rank in ["1", "0"] {
        let out = rtrace(
            &[
                "record",
                "-t",
                "cuda",
                "-o",
                dir.join("rank%q{RANK}.bin").to_str().unwrap(),
                "--",
                &program("direct"),
            ],
            &[
                ("LOCAL_RANK", rank),
                ("RANK", rank),
                ("OMPI_COMM_WORLD_RANK", "7"),
                ("SLURM_PROCID", ""),
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    let t = load_trace(&dir.join("rank1.bin")).unwrap();
    let env: Vec<(&str, &str)> = t
        .header
        .rank_env
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        env,
        [
            ("RANK", "1"),
            ("OMPI_COMM_WORLD_RANK", "7"),
            ("SLURM_PROCID", ""),
            ("LOCAL_RANK", "1")
        ]
    );
    let report = rtrace(
        &[
            "report",
            "--format",
            "csv",
            "--section",
            "ranks",
            dir.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(report.status.code(), Some(0), "{}", text(&report.stderr));
    // Rank, the variable that named it, and (no GPU activity) no GPU time.
    let rows: Vec<String> = text(&report.stdout)
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            format!("{} {} {} {}", f[0], f[1], f[4], f[5])
        })
        .collect();
    assert_eq!(rows, ["0 RANK 0 0", "1 RANK 0 0"]);
}

#[test]
fn force_overwrite_replaces_an_earlier_runs_files_and_nothing_else() {
    let dir = fresh_dir("options-force");
    let name = dir.join("trace.bin");
    let child = dir.join("trace.1.bin");
    let run = |options: &[&str]| {
        let mut args = vec!["record", "-t", "cuda", "-o", name.to_str().unwrap()];
        args.extend_from_slice(options);
        let fork = program("fork");
        args.extend_from_slice(&["--", &fork, "10", "20"]);
        let out = rtrace(&args, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        out
    };
    run(&[]);
    let first = load_trace(&name).unwrap().header.session;
    // A second run replaces both: the parent's name, then the child's beside it (the
    // parent's new trace is this run's, so the child goes beside it, over the earlier child).
    let out = run(&["--force-overwrite"]);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["trace.1.bin", "trace.bin"]);
    let (p, c) = (load_trace(&name).unwrap(), load_trace(&child).unwrap());
    assert_eq!(p.header.session, c.header.session);
    assert_ne!(p.header.session, first);
    let replaced = |path: &Path| {
        format!(
            "an earlier {} was replaced (RTRACE_FORCE_OVERWRITE=1)",
            path.display()
        )
    };
    assert_eq!(notices(&p), [replaced(&name)]);
    assert_eq!(
        notices(&c),
        [
            format!(
                "{} was taken: this trace is written beside it, as {}",
                name.display(),
                child.display()
            ),
            replaced(&child)
        ]
    );
    let err = text(&out.stderr);
    assert!(
        err.starts_with(&format!(
            "rtrace: trace written to {} ({})\n",
            name.display(),
            size(&name)
        )),
        "{err}"
    );

    // Never a link (nor what it points to), a FIFO, or another user's file.
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, b"precious\n").unwrap();
    let link = dir.join("link.bin");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let fifo = dir.join("fifo.bin");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let mut taken = vec![
        (link.clone(), dir.join("link.1.bin")),
        (fifo.clone(), dir.join("fifo.1.bin")),
    ];
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let theirs = dir.join("theirs.bin");
        std::fs::write(&theirs, b"theirs\n").unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        taken.push((theirs, dir.join("theirs.1.bin")));
    }
    for (at, beside) in &taken {
        let out = rtrace(
            &[
                "record",
                "-t",
                "cuda",
                "--force-overwrite",
                "-o",
                at.to_str().unwrap(),
                "--",
                &program("direct"),
            ],
            &[],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let t = load_trace(beside).unwrap();
        assert_eq!(
            notices(&t),
            [format!(
                "{} was taken: this trace is written beside it, as {}",
                at.display(),
                beside.display()
            )]
        );
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious\n");
    assert_eq!(std::fs::read_link(&link).unwrap(), victim);
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
}

/// Preloaded directly, the library is lenient where `rtrace record` is strict: words of
/// `RTRACE_GPU_ACTIVITY` that name no kind are ignored, and the trace says so.
#[test]
fn the_library_says_which_gpu_activity_words_it_ignored() {
    let r = run(Spec::traced("capture").env(&[("RTRACE_GPU_ACTIVITY", "kernel,bogus")]));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let t = r.trace();
    assert_eq!(t.kernels.len() as u64, CAPTURE.1);
    assert_eq!(t.memsets.len(), 0);
    let n = notices(&t);
    assert_eq!(
        n[0],
        "RTRACE_GPU_ACTIVITY: ignored bogus (the kinds are kernel, memcpy, memset, memory, \
         sync, resources)",
        "{n:?}"
    );
}

#[test]
fn runtime_api_picks_the_route_of_runtime_records() {
    // The runtime program on the simulated libcudart: 16 runtime calls, of which CUPTI's route
    // sees 15 (the first starts the driver, and CUPTI with it); interposition sees all 16.
    for (args, notice, calls) in [
        (
            &[][..],
            "runtime API calls recorded (CUPTI runtime callbacks)",
            15,
        ),
        (
            &["--runtime-api", "interpose"][..],
            "runtime API calls recorded (interposing libcudart)",
            16,
        ),
        (
            &["--runtime-api", "none"][..],
            "runtime API calls not recorded (RTRACE_RUNTIME_API=0)",
            0,
        ),
        (
            &["-t", "cuda"][..],
            "runtime API calls recorded (interposing libcudart)",
            16,
        ),
    ] {
        let dir = fresh_dir("options-runtime");
        let trace = dir.join("t.bin");
        let mut argv = vec!["record", "-o", trace.to_str().unwrap()];
        argv.extend_from_slice(args);
        let prog = program("runtime");
        argv.extend(["--", prog.as_str()]);
        let out = rtrace(&argv, &[]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        let t = load_trace(&trace).unwrap();
        assert!(
            notices(&t).iter().any(|n| n == notice),
            "{args:?}: {:?}",
            notices(&t)
        );
        let runtime = records(&t)
            .iter()
            .filter(|(_, r)| rtrace_format::runtime_cbid(r.function).is_some())
            .count();
        assert_eq!(runtime, calls, "{args:?}");
    }
}
