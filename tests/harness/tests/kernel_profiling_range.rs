//! Kernel profiling's application replay: `rtrace record --metrics LIST --replay application`
//! runs the program once per replay pass and profiles each capture range as one CUPTI user
//! range, on the simulated driver and CUPTI (tests/simcupti/README.md, "Kernel profiling":
//! 9 metrics cost 3 passes; a user range's subject is its name, its duration the sum of its
//! kernels' (fill_u32 500 ns, add_u32 700 ns, empty 1000 ns); application replay adds each
//! later pass to the image's ranges).
//!
//! tests/programs/ranges.c makes three ranges: "load" (fill, add), "step" (fill x3), "step"
//! (empty), each an NVTX range around cuProfilerStart..cuProfilerStop, with an `empty` launch
//! between the first two outside any range. It counts its runs in a file and exits 10 + run.

use rtrace_collector::model::Trace;
use rtrace_tests::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// 9 metrics: 3 passes in simcupti (`1 + (9 − 1) / 4`).
const METRICS: [&str; 9] = [
    "gpu__time_duration.sum",
    "gpc__cycles_elapsed.max",
    "sm__cycles_active.avg",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "smsp__inst_executed.sum",
    "dram__bytes.sum",
    "lts__t_sector_hit_rate.pct",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
];
const PASSES: u32 = 3;
/// ranges.c's ranges: simulated GPU time (ns) and kernel launches.
const RANGES: [(u64, u32); 3] = [(1200, 2), (1500, 3), (1000, 1)];

/// simcupti's value of `metric` for a range of subject `subject` lasting `d` ns.
fn sim_value(metric: &str, subject: &str, d: u64) -> f64 {
    let cycles = d * 1_980_000 / 1_000_000;
    let mut h: u64 = 0xcbf29ce484222325;
    for b in metric.bytes().chain([0]).chain(subject.bytes()) {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    match metric {
        "gpu__time_duration.sum" => d as f64,
        "gpc__cycles_elapsed.max" => cycles as f64,
        "sm__cycles_active.avg" => cycles as f64 * 0.875,
        m if m.contains("pct") => (h % 10000) as f64 / 100.0,
        _ => ((h >> 16) % 1_000_000) as f64,
    }
}

/// Runs `rtrace record` with `options` on ranges.c (`mode`, counting runs in `dir/runs`),
/// traces in `dir/out`, the state directory under `dir/tmp` (TMPDIR).
fn record(dir: &Path, options: &[&str], mode: &str) -> Output {
    record_with(dir, options, mode, &[])
}

/// [`record`] with more environment for the program.
fn record_with(dir: &Path, options: &[&str], mode: &str, env: &[(&str, &str)]) -> Output {
    let b = build();
    for d in ["out", "tmp"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    Command::new(rtrace_bin())
        .arg("record")
        .arg("--output")
        .arg(dir.join("out/trace-%p.bin"))
        .args(["--metrics", &METRICS.join(",")])
        .args(["--replay", "application"])
        .args(options)
        .arg("--")
        .arg(b.bin.join("ranges"))
        .arg(mode)
        .arg(dir.join("runs"))
        .env("LD_LIBRARY_PATH", &b.lib)
        .env("TMPDIR", dir.join("tmp"))
        .env_remove("LD_PRELOAD")
        .env_remove("NVTX_INJECTION64_PATH")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The program's runs, from its counter file.
fn runs(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("runs")).unwrap()
}

/// The files in `dir`, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

fn messages(t: &Trace) -> Vec<String> {
    t.notices.iter().map(|n| n.message.clone()).collect()
}

/// Range `index` of a simcupti counter data image: (duration, passes, launches).
fn slot(image: &[u8], index: usize) -> (u64, u32, u32) {
    let u32_at = |at: usize| u32::from_ne_bytes(image[at..at + 4].try_into().unwrap());
    assert_eq!(&image[..8], b"SIMCDAT\0");
    let at = 32 + u32_at(20) as usize + 512 * index;
    (
        u64::from_ne_bytes(image[at..at + 8].try_into().unwrap()),
        u32_at(at + 8),
        u32_at(at + 12),
    )
}

/// The one trace of a successful replay, after checking what every successful replay shows:
/// three runs, the last one's exit status, the first one's output only (unless
/// `--replay-output`), no temporary file left, and one setup for application replay.
fn replayed(dir: &Path, out: &Output, stdout: &str) -> Trace {
    assert_eq!(out.status.code(), Some(12), "{}", stderr(out));
    assert_eq!(runs(dir), "3\n");
    assert_eq!(String::from_utf8_lossy(&out.stdout), stdout);
    assert!(
        stderr(out).contains(
            "rtrace: application replay: the program ran 3 times (one per replay pass)\n"
        ),
        "{}",
        stderr(out)
    );
    assert_eq!(files(&dir.join("tmp")), Vec::<PathBuf>::new());
    let traces = files(&dir.join("out"));
    assert_eq!(traces.len(), 1, "{traces:?}");
    let t = rtrace_collector::load_trace(&traces[0]).unwrap();
    check_invariants(&t);
    assert_eq!(t.profiler_setups.len(), 1, "{:?}", messages(&t));
    let s = &t.profiler_setups[0];
    assert_eq!(
        (s.device, s.chip.as_str(), s.passes, s.replay),
        (0, "GH100", PASSES, rtrace_format::Replay::Application)
    );
    assert_eq!(s.metrics, METRICS);
    let m = messages(&t);
    assert!(m.contains(&format!(
        "kernel profiling on for context {} (device 0, GH100): 9 metrics, 3 replay passes (application replay, pass 2)",
        s.context
    )), "{m:?}");
    assert!(m.contains(
        &"kernel profiling: ranges profiled by CUPTI's application replay (pass 2)".to_string()
    ));
    t
}

/// One profile per range, named `names`, with simcupti's values for a user range of that
/// name, its counter data holding the three ranges.
fn check_profiles(t: &Trace, names: &[&str]) {
    let context = t.profiler_setups[0].context;
    assert_eq!(t.kernel_profiles.len(), 3, "{:?}", messages(t));
    for (i, (p, &(d, _))) in t.kernel_profiles.iter().zip(&RANGES).enumerate() {
        assert_eq!((p.context, p.correlation, p.launch), (context, 0, i as u64));
        // CUPTI's name (simcupti's subject): the name and the range's index.
        let pushed = format!("{} [{i}]", names[i]);
        assert_eq!(
            (p.name.as_str(), p.range.as_str()),
            (names[i], pushed.as_str())
        );
        let want: Vec<f64> = METRICS.iter().map(|m| sim_value(m, &pushed, d)).collect();
        assert_eq!(p.values, want, "range {i}");
        assert!(p.start_ns <= p.end_ns);
        // The image as the end of the last run left it (every range has every pass), kept
        // once, with the first range.
        if i > 0 {
            assert!(p.counter_data.is_empty(), "range {i}");
            continue;
        }
        for (r, &(d, launches)) in RANGES.iter().enumerate() {
            assert_eq!(slot(&p.counter_data, r), (d, PASSES, launches), "range {r}");
        }
    }
}

#[test]
fn each_cuprofilerstart_range_is_profiled_over_one_run_per_pass() {
    let dir = fresh_dir("range-profiler-api");
    let out = record(&dir, &["--capture-range", "cudaProfilerApi"], "same");
    let t = replayed(&dir, &out, "ranges ok run=0 calls=28\n");
    assert!(messages(&t).contains(
        &"kernel profiling on: 9 metrics by application replay (pass 2), for each cuProfilerStart..cuProfilerStop range; kernels run unprofiled"
            .to_string()
    ));
    check_profiles(
        &t,
        &[
            "cuProfilerStart 1",
            "cuProfilerStart 2",
            "cuProfilerStart 3",
        ],
    );
    // Only the ranges are recorded: their six kernels, unprofiled.
    assert_eq!(t.kernels.len(), 6);

    // `rtrace report --metrics` evaluates each range again at its index in the one image the
    // run kept (simcupti's host API reads its own images): the recorded values come back.
    let traces = files(&dir.join("out"));
    let cupti = build().lib.join("libcupti.so.13");
    let report = std::process::Command::new(rtrace_bin())
        .args([
            "report",
            "--format",
            "json",
            "--metrics",
            "gpu__time_duration.sum",
            "--cupti",
        ])
        .arg(&cupti)
        .arg(&traces[0])
        .output()
        .unwrap();
    assert_eq!(report.status.code(), Some(0), "{}", stderr(&report));
    let json = String::from_utf8(report.stdout).unwrap();
    let duration = METRICS
        .iter()
        .position(|m| *m == "gpu__time_duration.sum")
        .unwrap();
    for p in &t.kernel_profiles {
        let want = format!(
            "\"evaluated\":{{\"gpu__time_duration.sum\":{}}}",
            p.values[duration]
        );
        assert!(json.contains(&want), "{want} not in {json}");
    }
}

#[test]
fn each_nvtx_capture_range_is_profiled_and_replay_output_shows_every_run() {
    let dir = fresh_dir("range-nvtx");
    let out = record(
        &dir,
        &["--nvtx-capture", "load,step", "--replay-output"],
        "same",
    );
    let t = replayed(
        &dir,
        &out,
        "ranges ok run=0 calls=28\nranges ok run=1 calls=28\nranges ok run=2 calls=28\n",
    );
    assert!(messages(&t).contains(
        &"kernel profiling on: 9 metrics by application replay (pass 2), for each NVTX range load, step; kernels run unprofiled"
            .to_string()
    ));
    check_profiles(&t, &["load", "step", "step"]);
}

/// A run whose ranges differ from the first run's stops the replay: exit 2, a message naming
/// the pass and the range, and the first pass's trace kept.
fn diverges(mode: &str, why: &str) {
    let dir = fresh_dir(mode);
    let out = record(&dir, &["--capture-range", "cudaProfilerApi"], mode);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // Passes 0 and 1 ran; only the first one's output is shown.
    assert_eq!(runs(&dir), "2\n");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ranges ok run=0 calls=28\n"
    );
    let traces = files(&dir.join("out"));
    assert_eq!(traces.len(), 1, "{traces:?}");
    assert_eq!(
        stderr(&out),
        format!(
            "rtrace: application replay: the runs diverged: {why}; the first pass's trace is kept: {}\n",
            traces[0].display()
        )
    );
    assert_eq!(files(&dir.join("tmp")), Vec::<PathBuf>::new());
    // The first pass's trace: set up, nothing evaluated yet.
    let t = rtrace_collector::load_trace(&traces[0]).unwrap();
    assert_eq!(t.profiler_setups.len(), 1);
    assert_eq!(t.kernel_profiles.len(), 0);
    assert!(messages(&t).contains(
        &"kernel profiling: ranges profiled by CUPTI's application replay (pass 0)".to_string()
    ));
}

#[test]
fn a_run_with_a_range_more_diverges() {
    diverges(
        "extra-range",
        "pass 1 ran range 4 (\"cuProfilerStart 4\"), which pass 0 did not (3 ranges)",
    );
}

#[test]
fn a_run_with_a_kernel_launch_more_in_a_range_diverges() {
    diverges(
        "extra-launch",
        "range 2 (\"cuProfilerStart 2\") made 4 kernel launches in pass 1 but 3 kernel launches in pass 0",
    );
}

#[test]
fn application_replay_needs_a_capture_range() {
    let dir = fresh_dir("range-none");
    let out = record(&dir, &[], "same");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "rtrace: --replay application profiles capture ranges: give --capture-range cudaProfilerApi or --nvtx-capture NAME\n"
    );
    assert!(!dir.join("runs").exists());
}

/// Counters that cannot be read: the first run profiles nothing, so it is the only one; its
/// trace says why, and the program ran and exited as it does.
#[test]
fn without_counters_the_program_runs_once_and_the_trace_says_why() {
    let dir = fresh_dir("range-privileges");
    let out = record_with(
        &dir,
        &["--capture-range", "cudaProfilerApi"],
        "same",
        &[("SIMCUPTI_PROFILER", "privileges")],
    );
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    assert_eq!(runs(&dir), "1\n");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ranges ok run=0 calls=28\n"
    );
    assert!(stderr(&out)
        .contains("rtrace: application replay: the program ran 1 time (one per replay pass)\n"));
    let traces = files(&dir.join("out"));
    assert_eq!(traces.len(), 1);
    let t = rtrace_collector::load_trace(&traces[0]).unwrap();
    check_invariants(&t);
    assert_eq!(t.profiler_setups.len(), 0);
    assert_eq!(t.kernel_profiles.len(), 0);
    assert_eq!(t.kernels.len(), 6);
    let c = t.kernels[0].context;
    assert!(messages(&t).contains(&format!(
        "kernel profiling off for context {c}: cuptiProfilerGetCounterAvailability: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (35): no permission to read GPU counters: run as root or set NVreg_RestrictProfilingToAdminUsers=0"
    )), "{:?}", messages(&t));
}

/// One `SetConfig` per run, as CUPTI's application replay wants one `Start`..`Stop` per run: a
/// CUPTI that refuses a second configuration of one range profiler (simcupti's `once`) profiles
/// every range, and nothing is said of it.
#[test]
fn one_configuration_per_run_is_all_cupti_is_asked_for() {
    let dir = fresh_dir("range-once");
    let out = record_with(
        &dir,
        &["--capture-range", "cudaProfilerApi"],
        "same",
        &[("SIMCUPTI_PROFILER", "once")],
    );
    let t = replayed(&dir, &out, "ranges ok run=0 calls=28\n");
    check_profiles(
        &t,
        &[
            "cuProfilerStart 1",
            "cuProfilerStart 2",
            "cuProfilerStart 3",
        ],
    );
    assert!(
        !messages(&t).iter().any(|m| m.contains("refused")),
        "{:?}",
        messages(&t)
    );
}
