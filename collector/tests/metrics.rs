//! `rtrace metrics` against the real CUPTI 13.0 host library of the nvidia-cuda-cupti 13.0.85
//! wheel (tools/setup-cuda.sh): `$CUDA_INCLUDE/../lib/libcupti.so.13`, else the workspace's
//! .venv. No GPU is needed: the host API answers from a chip's name. The pass counts are the
//! library's own figures for that wheel; a newer CUPTI may schedule counters differently.

use rtrace_collector::metrics::{self, sets::SETS, Cupti};
use std::path::Path;
use std::process::Command;

#[path = "common/wheel_cupti.rs"]
mod wheel_cupti;
use wheel_cupti::cupti_path;

fn cupti() -> Cupti {
    Cupti::load(Some(&cupti_path())).expect("CUPTI loads")
}

/// The chips of the 13.0.85 wheel, in its order.
const CHIPS: &str = "GV100, GV11B, TU102, TU104, TU106, TU116, TU117, GA100, GA102, GA103, \
                     GA104, GA106, GA107, GA10B, GH100, AD102, AD103, AD104, AD106, AD107, GB100, \
                     GB102, GB110, GB10B, GB202, GB203, GB205, GB206, GB207, GB20B";

#[test]
fn supported_chips_are_the_wheels() {
    let chips = cupti().supported_chips().unwrap();
    assert_eq!(chips.join(", "), CHIPS);
    assert!(chips.iter().any(|c| c == "GA100") && chips.iter().any(|c| c == "GH100"));
}

#[test]
fn chip_names_match_in_any_case_and_unknown_ones_are_refused() {
    let c = cupti();
    assert_eq!(metrics::chip(&c, Some("gh100")).unwrap(), "GH100");
    assert_eq!(
        metrics::chip(&c, Some("XX100")).unwrap_err(),
        format!("unknown chip 'XX100'; supported chips: {CHIPS}")
    );
    // No GPU here (no driver): the chip must be given, and the error says why.
    let e = metrics::chip(&c, None).unwrap_err();
    assert!(
        e.starts_with("give the chip with --chip (no CUDA driver here (libcuda.so.1: ")
            && e.ends_with(&format!("); supported chips: {CHIPS}")),
        "{e}"
    );
}

#[test]
fn every_set_metric_is_accepted_for_gh100() {
    let c = cupti();
    let names: Vec<&str> = SETS.iter().map(|s| s.name).collect();
    let all = metrics::choose(&c, "GH100", &names.join(",")).unwrap();
    assert_eq!(all.unavailable, vec![]);
    let total: usize = SETS.iter().map(|s| s.metrics.len()).sum();
    assert_eq!(total, 64);
    assert_eq!(all.metrics.len(), total, "no metric is in two sets");
    assert_eq!(all.passes, 16);
}

#[test]
fn speed_of_light_on_gh100() {
    let choice = metrics::choose(&cupti(), "GH100", "SpeedOfLight").unwrap();
    assert_eq!(choice.metrics.len(), 10);
    assert_eq!(
        choice.metrics[0].name,
        "sm__throughput.avg.pct_of_peak_sustained_elapsed"
    );
    assert_eq!(choice.metrics[0].set, Some("SpeedOfLight"));
    assert_eq!(choice.passes, 9);
}

#[test]
fn set_costs_on_gh100_and_ga100() {
    let c = cupti();
    let costs = |chip| -> Vec<(&str, usize, usize, usize)> {
        metrics::set_costs(&c, chip)
            .unwrap()
            .iter()
            .map(|s| (s.name, s.available, s.total, s.passes))
            .collect()
    };
    assert_eq!(
        costs("GH100"),
        vec![
            ("SpeedOfLight", 10, 10, 9),
            ("MemoryWorkloadAnalysis", 14, 14, 8),
            ("ComputeWorkloadAnalysis", 12, 12, 8),
            ("Occupancy", 2, 2, 1),
            ("WarpStateStats", 20, 20, 7),
            ("InstructionStats", 6, 6, 2),
        ]
    );
    assert_eq!(
        costs("GA100"),
        vec![
            ("SpeedOfLight", 10, 10, 9),
            ("MemoryWorkloadAnalysis", 14, 14, 8),
            ("ComputeWorkloadAnalysis", 12, 12, 5),
            ("Occupancy", 2, 2, 1),
            ("WarpStateStats", 19, 20, 6),
            ("InstructionStats", 6, 6, 2),
        ]
    );
    let names: Vec<&str> = SETS.iter().map(|s| s.name).collect();
    let all = metrics::choose(&c, "GA100", &names.join(",")).unwrap();
    assert_eq!(all.passes, 11);
    assert_eq!(all.metrics.len(), 63);
    let missing: Vec<&str> = all.unavailable.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        missing,
        ["smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio"]
    );
}

#[test]
fn raw_metrics_sets_and_repeats_in_one_list() {
    let c = metrics::choose(
        &cupti(),
        "GH100",
        "Occupancy, dram__bytes_read.sum,occupancy,sm__warps_active.avg.per_cycle_active",
    )
    .unwrap();
    let got: Vec<(Option<&str>, &str)> =
        c.metrics.iter().map(|m| (m.set, m.name.as_str())).collect();
    assert_eq!(
        got,
        [
            (
                Some("Occupancy"),
                "sm__warps_active.avg.pct_of_peak_sustained_active"
            ),
            (Some("Occupancy"), "sm__warps_active.avg.per_cycle_active"),
            (None, "dram__bytes_read.sum"),
        ]
    );
    assert_eq!(c.passes, 1);
}

#[test]
fn unknown_names_are_refused_naming_them() {
    assert_eq!(
        metrics::choose(&cupti(), "GH100", "SpeedOfLight,foo__bar.sum").unwrap_err(),
        "unknown metric 'foo__bar.sum' for GH100 (cuptiProfilerHostConfigAddMetrics failed: \
         CUPTI_ERROR_INVALID_PARAMETER)"
    );
    assert_eq!(
        metrics::resolve("SpeedOfLight,Roofline").unwrap_err(),
        "unknown set or metric 'Roofline'; sets: SpeedOfLight, MemoryWorkloadAnalysis, \
         ComputeWorkloadAnalysis, Occupancy, WarpStateStats, InstructionStats; a metric is named \
         like sm__throughput.avg.pct_of_peak_sustained_elapsed"
    );
}

#[test]
fn base_metrics_of_gh100() {
    let base = metrics::base_metrics(&cupti(), "GH100").unwrap();
    let count = |t: &str| base.iter().filter(|(k, _)| *k == t).count();
    assert_eq!(
        (count("counter"), count("ratio"), count("throughput")),
        (3389, 205, 56)
    );
    assert!(base.contains(&("throughput", "sm__throughput".to_string())));
}

fn rtrace(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rtrace"))
        .arg("metrics")
        .arg("--cupti")
        .arg(cupti_path())
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn cli_lists_speed_of_light_for_gh100() {
    let out = rtrace(&["--chip", "GH100", "SpeedOfLight"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "\
set           metric                                                            shown as
SpeedOfLight  sm__throughput.avg.pct_of_peak_sustained_elapsed                  Compute (SM) Throughput %
SpeedOfLight  gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed  Memory Throughput %
SpeedOfLight  l1tex__throughput.avg.pct_of_peak_sustained_active                L1/TEX Cache Throughput %
SpeedOfLight  lts__throughput.avg.pct_of_peak_sustained_elapsed                 L2 Cache Throughput %
SpeedOfLight  gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed            DRAM Throughput %
SpeedOfLight  gpu__time_duration.sum                                            Duration
SpeedOfLight  gpc__cycles_elapsed.max                                           Elapsed Cycles
SpeedOfLight  sm__cycles_active.avg                                             SM Active Cycles
SpeedOfLight  gpc__cycles_elapsed.avg.per_second                                SM Frequency
SpeedOfLight  dram__cycles_elapsed.avg.per_second                               DRAM Frequency
10 metrics on GH100: 9 replay passes
"
    );
}

#[test]
fn cli_json_and_set_listing() {
    let out = rtrace(&["--chip", "GA100", "--format", "json", "Occupancy"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "{\"chip\":\"GA100\",\"passes\":1,\"metrics\":[\
         {\"set\":\"Occupancy\",\"name\":\"sm__warps_active.avg.pct_of_peak_sustained_active\",\
         \"label\":\"Achieved Occupancy %\"},\
         {\"set\":\"Occupancy\",\"name\":\"sm__warps_active.avg.per_cycle_active\",\
         \"label\":\"Achieved Active Warps Per SM\"}],\"unavailable\":[]}\n"
    );
    let out = rtrace(&["--chip", "GA100"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("\nWarpStateStats           19/20    6       Warp State"),
        "{text}"
    );
    assert!(
        text.ends_with("all sets on GA100: 63 metrics, 11 replay passes\n"),
        "{text}"
    );
}

#[test]
fn cli_errors_exit_2_with_one_line() {
    for (args, line) in [
        (
            &["--chip", "XX100", "SpeedOfLight"][..],
            format!("rtrace: unknown chip 'XX100'; supported chips: {CHIPS}\n"),
        ),
        (
            &["--chip", "GH100", "SpeedOfLight,foo__bar.sum"][..],
            "rtrace: unknown metric 'foo__bar.sum' for GH100 (cuptiProfilerHostConfigAddMetrics \
             failed: CUPTI_ERROR_INVALID_PARAMETER)\n"
                .to_string(),
        ),
    ] {
        let out = rtrace(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(String::from_utf8(out.stderr).unwrap(), line, "{args:?}");
        assert!(out.stdout.is_empty());
    }
    // No --chip, and no GPU here: one line that says why.
    let out = rtrace(&["SpeedOfLight"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("rtrace: give the chip with --chip (no CUDA driver here (")
            && err.ends_with(&format!("); supported chips: {CHIPS}\n"))
            && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn cli_without_cupti_says_how_to_name_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_rtrace"))
        .args([
            "metrics",
            "--cupti",
            "/nonexistent/libcupti.so.13",
            "--chip",
            "GH100",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "rtrace: cannot load CUPTI (/nonexistent/libcupti.so.13: cannot open shared object \
         file: No such file or directory); give --cupti PATH or set RTRACE_CUPTI_LIBRARY\n"
    );
}

#[test]
fn cli_finds_cupti_through_the_environment_and_says_when_nvperf_is_missing() {
    let out = Command::new(env!("CARGO_BIN_EXE_rtrace"))
        .args(["metrics", "--chip", "GH100", "Occupancy"])
        .env("RTRACE_CUPTI_LIBRARY", cupti_path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .ends_with("2 metrics on GH100: 1 replay pass\n"));

    // libcupti.so.13 alone in a folder: its host calls find no libnvperf_host.so (unless the
    // system's loader cache has one: a CUDA toolkit installed there).
    let cache = Command::new("ldconfig").arg("-p").output();
    if cache.is_ok_and(|c| String::from_utf8_lossy(&c.stdout).contains("libnvperf_host.so")) {
        eprintln!("libnvperf_host.so is in the loader's cache: the missing case is not tried");
        return;
    }
    let dir = std::env::temp_dir().join(format!("rtrace-metrics-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let alone = dir.join("libcupti.so.13");
    std::fs::copy(cupti_path(), &alone).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rtrace"))
        .args(["metrics", "--chip", "GH100"])
        .arg("--cupti")
        .arg(&alone)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "rtrace: cuptiProfilerHostGetSupportedChips failed: CUPTI_ERROR_NOT_INITIALIZED \
             (libcupti loads libnvperf_host.so by name: put it beside {} or on LD_LIBRARY_PATH)\n",
            alone.display()
        )
    );
}

/// Counter data that is not an image: CUPTI crashes reading it, in the child the call runs
/// in, and the evaluation and the range name fail with a clear error; an empty image is
/// refused by CUPTI itself.
#[test]
fn garbage_counter_data_is_a_clear_error() {
    let cupti = cupti();
    let host = cupti.host("GH100").unwrap();
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
    assert_eq!(
        host.evaluate(&garbage, 0, &["gpu__time_duration.sum"]),
        Err(
            "cuptiProfilerHostEvaluateToGpuValues crashed (signal 11): the counter data is \
             not an image CUPTI can read"
                .to_string()
        )
    );
    assert_eq!(
        cupti.range_name(&garbage, 0),
        Err(
            "cuptiProfilerHostGetRangeName crashed (signal 11): the counter data is not an \
             image CUPTI can read"
                .to_string()
        )
    );
    assert_eq!(
        host.evaluate_each(&[], 0, &["gpu__time_duration.sum", "sm__cycles_active.avg"]),
        [
            Err(
                "gpu__time_duration.sum: cuptiProfilerHostEvaluateToGpuValues failed: \
                 CUPTI_ERROR_INVALID_PARAMETER"
                    .to_string()
            ),
            Err(
                "sm__cycles_active.avg: cuptiProfilerHostEvaluateToGpuValues failed: \
                 CUPTI_ERROR_INVALID_PARAMETER"
                    .to_string()
            ),
        ]
    );
    assert_eq!(
        cupti.range_name(&[], 0),
        Err("cuptiProfilerHostGetRangeName failed: CUPTI_ERROR_INVALID_PARAMETER".to_string())
    );
    // The host object still works after its child crashed.
    assert!(host.base_metrics(0).unwrap().len() > 100);
}

/// `rtrace report --metrics`: the fixture keeps no counter data image (real ones come from
/// the GPU machine), so CUPTI refuses every metric of every launch, each reason said once per
/// kernel, and the report goes on; a bad LIST and a CUPTI that is not there are one-line
/// errors.
#[test]
fn report_metrics_evaluates_counter_data_or_says_why_not() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/profiles.bin");
    let rtrace = env!("CARGO_BIN_EXE_rtrace");
    let out = Command::new(rtrace)
        .args([
            "report",
            "--metrics",
            "gpu__time_duration.sum,sm__cycles_active.avg",
            "--cupti",
        ])
        .arg(cupti_path())
        .arg(&fixture)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let table = String::from_utf8(out.stdout).unwrap();
    let reasons: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("  not evaluated: "))
        .collect();
    let refused = |m: &str| {
        format!(
            "  not evaluated: {m}: cuptiProfilerHostEvaluateToGpuValues failed: \
             CUPTI_ERROR_INVALID_PARAMETER"
        )
    };
    let (a, b) = (
        refused("gpu__time_duration.sum"),
        refused("sm__cycles_active.avg"),
    );
    assert_eq!(reasons, [&a, &b, &a, &b], "{table}");
    assert!(!table.contains("Evaluated from counter data"));
    let out = Command::new(rtrace)
        .args([
            "report",
            "--format",
            "json",
            "--metrics",
            "sm__cycles_active.avg",
            "--cupti",
        ])
        .arg(cupti_path())
        .arg(&fixture)
        .output()
        .unwrap();
    let json = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        json.matches(
            "\"evaluated\":{\"sm__cycles_active.avg\":{\"error\":\"sm__cycles_active.avg: \
             cuptiProfilerHostEvaluateToGpuValues failed: CUPTI_ERROR_INVALID_PARAMETER\"}}"
        )
        .count(),
        3,
        "{json}"
    );
    let out = Command::new(rtrace)
        .args(["report", "--metrics", "NoSuchSet"])
        .arg(&fixture)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .starts_with("rtrace: --metrics: unknown set or metric 'NoSuchSet'; sets: SpeedOfLight,"));
    let out = Command::new(rtrace)
        .args([
            "report",
            "--metrics",
            "SpeedOfLight",
            "--cupti",
            "/nonexistent/libcupti.so.13",
        ])
        .arg(&fixture)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "rtrace: cannot load CUPTI (/nonexistent/libcupti.so.13: cannot open shared object \
         file: No such file or directory); give --cupti PATH or set RTRACE_CUPTI_LIBRARY\n"
    );
    assert!(out.stdout.is_empty());
}

/// Without --cupti, $RTRACE_CUPTI_LIBRARY or a CUPTI on the loader's path or in the toolkit's
/// folders, `rtrace report --metrics` says where it looked, in one line (skipped where a
/// toolkit is installed).
#[test]
fn report_metrics_without_cupti_names_where_it_looked() {
    if rtrace_format::CUPTI_DIRS
        .iter()
        .any(|d| Path::new(d).join(rtrace_format::CUPTI_SONAME).is_file())
    {
        eprintln!("skipped: a CUDA toolkit's CUPTI is installed");
        return;
    }
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/profiles.bin");
    let out = Command::new(env!("CARGO_BIN_EXE_rtrace"))
        .args(["report", "--metrics", "SpeedOfLight"])
        .arg(&fixture)
        .env_remove("RTRACE_CUPTI_LIBRARY")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "rtrace: cannot load CUPTI (libcupti.so.13: cannot open shared object file: No such \
             file or directory; not in {} either); give --cupti PATH or set \
             RTRACE_CUPTI_LIBRARY\n",
            rtrace_format::CUPTI_DIRS.join(", ")
        )
    );
}

/// Counter data recorded on an H100 (tests/gpu/profile_check.sh, `profile.fixture`: the Speed
/// Of Light set on `bank_conflicts` and `increment` of tests/gpu/profile_kernels.cu, by
/// librtrace.so with the toolkit's CUPTI 13.0), evaluated here, with no GPU, by the wheel's host
/// library: every value the library evaluated on the GPU comes out again, bit for bit, and a
/// metric the trace did not ask for comes from the same counters.
#[test]
fn counter_data_recorded_on_an_h100_evaluates_to_the_recorded_values() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/profiles/h100_speedoflight.bin");
    let trace = rtrace_collector::read::load_trace(&path).expect("the fixture reads");
    let setup = &trace.profiler_setups[0];
    assert_eq!(
        (setup.chip.as_str(), setup.passes, setup.metrics.len()),
        ("GH100", 9, 10)
    );
    let names: Vec<&str> = setup.metrics.iter().map(String::as_str).collect();
    let cupti = cupti();
    let host = cupti.host(&setup.chip).unwrap();
    let kernels: Vec<&str> = trace
        .kernel_profiles
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(kernels, ["_Z14bank_conflictsPfi", "_Z9incrementPii"]);
    for p in &trace.kernel_profiles {
        assert_eq!(p.counter_data.len(), 824_160);
        assert_eq!(cupti.range_name(&p.counter_data, 0).unwrap(), p.range);
        let values = host.evaluate(&p.counter_data, 0, &names).unwrap();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&values), bits(&p.values), "{}", p.name);
    }
    // What the kernels did, as the GPU counted it: shared-memory bound, and memory-latency bound.
    let v = |i: usize, m: &str| {
        let p = &trace.kernel_profiles[i];
        p.values[names.iter().position(|n| *n == m).unwrap()]
    };
    assert_eq!(v(0, "gpu__time_duration.sum"), 1_064_256.0);
    assert_eq!(
        v(0, "l1tex__throughput.avg.pct_of_peak_sustained_active"),
        99.98301868002513
    );
    assert_eq!(v(1, "gpu__time_duration.sum"), 16_256.0);
    assert_eq!(v(1, "gpc__cycles_elapsed.max"), 32_172.0);
    // More from the same counters: the elapsed cycles' other roll-ups.
    let more = host
        .evaluate(
            &trace.kernel_profiles[1].counter_data,
            0,
            &["gpc__cycles_elapsed.avg"],
        )
        .unwrap();
    assert_eq!(more.len(), 1);
    assert_eq!(more, [32_080.5]);
}
