//! Kernel profiling on the collector's side, end to end through the `rtrace` binary:
//! `rtrace record --metrics LIST` (checked before the program starts, then handed to it as
//! `RTRACE_METRICS`). The report's part is checked by the goldens (`profiles.*` in
//! tests/fixtures), the rules at their thresholds by the unit tests of `profiles`.

use std::path::PathBuf;
use std::process::Command;

fn rtrace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rtrace"))
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rtrace-profiles-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A shared library that preloads without a word and that `rtrace record --lib` takes for
/// librtrace.so: this process's libc with the name of librtrace.so's exported
/// `rtrace_push_external_correlation` after its end (ld.so reads only what its headers name).
fn some_shared_lib() -> PathBuf {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let line = maps
        .lines()
        .find(|l| l.contains("/libc.so") || l.contains("/libc-"))
        .expect("libc in /proc/self/maps");
    let mut bytes = std::fs::read(line.split_whitespace().last().unwrap()).unwrap();
    bytes.extend_from_slice(b"rtrace_push_external_correlation\0");
    let lib = std::env::temp_dir().join(format!("rtrace-profiles-lib-{}.so", std::process::id()));
    // Written whole, then renamed into place: tests running at once each see a whole file.
    let tmp = lib.with_extension(format!("{:?}.tmp", std::thread::current().id()));
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, &lib).unwrap();
    lib
}

#[test]
fn record_metrics_bad_list_is_a_usage_error_before_the_program_runs() {
    let dir = temp_dir("bad");
    let ran = dir.join("ran");
    for (list, why) in [
        (
            "SpeedOfLight,Bogus",
            "unknown set or metric 'Bogus'; sets: SpeedOfLight, MemoryWorkloadAnalysis, \
             ComputeWorkloadAnalysis, Occupancy, WarpStateStats, InstructionStats; a metric is \
             named like sm__throughput.avg.pct_of_peak_sustained_elapsed",
        ),
        (",", "no set or metric named"),
    ] {
        let out = rtrace()
            .args(["record", "--metrics", list, "--lib"])
            .arg(some_shared_lib())
            .args(["--", "touch"])
            .arg(&ran)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{list}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with(&format!(
                "error: invalid value '{list}' for '--metrics <LIST>': {why}\n"
            )),
            "{stderr}"
        );
        assert!(!ran.exists(), "the program ran despite a bad --metrics");
    }
}

#[test]
fn record_metrics_sets_rtrace_metrics_with_the_kernel_controls() {
    let dir = temp_dir("good");
    let seen = dir.join("env");
    let out = rtrace()
        .args([
            "record",
            "--metrics",
            " SpeedOfLight,l1tex__t_bytes.sum ",
            "--kernel-regex",
            "gemm",
            "--kernel-skip",
            "2",
            "--kernel-count",
            "3",
            "--output",
        ])
        .arg(dir.join("t.bin"))
        .arg("--lib")
        .arg(some_shared_lib())
        .args([
            "--",
            "sh",
            "-c",
            "printf '%s|%s|%s|%s' \"$RTRACE_METRICS\" \"$RTRACE_KERNEL_REGEX\" \
             \"$RTRACE_KERNEL_SKIP\" \"$RTRACE_KERNEL_COUNT\" > \"$0\"",
        ])
        .arg(&seen)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap(),
        "SpeedOfLight,l1tex__t_bytes.sum|gemm|2|3"
    );
}
