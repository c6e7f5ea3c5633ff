//! `rtrace record` and `rtrace report` on real traces.

use rtrace_tests::*;
use std::process::Command;

fn record(dir: &std::path::Path, program: &str, args: &[&str]) -> std::process::Output {
    let b = build();
    Command::new(rtrace_bin())
        .arg("record")
        .arg("--output")
        .arg(dir.join("rec-%p.bin"))
        .arg("--")
        .arg(b.bin.join(program))
        .args(args)
        .env("LD_LIBRARY_PATH", &b.lib)
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap()
}

#[test]
fn record_runs_the_program_and_returns_its_status() {
    let dir = fresh_dir("record");
    let out = record(&dir, "direct", &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("direct ok"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rtrace: trace written to"), "{err}");
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(files.len(), 1);

    let out = record(&dir, "exits", &["_exit"]);
    assert_eq!(out.status.code(), Some(4));
    let out = record(&dir, "exits", &["sigterm"]);
    assert_eq!(out.status.code(), Some(128 + 15));
    let out = record(&dir, "no-such-program", &[]);
    assert_eq!(out.status.code(), Some(127));
}

#[test]
fn report_of_a_truncated_trace_keeps_what_was_read() {
    let r = run(Spec::traced("threads"));
    let path = &r.trace_files()[0];
    let bytes = std::fs::read(path).unwrap();
    let cut = r.dir.join("cut.bin");
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    let out = Command::new(rtrace_bin())
        .arg("report")
        .arg(&cut)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("truncated"), "{err}");
    let t = rtrace_collector::load_trace(&cut).unwrap();
    assert!(t.damage.is_some());
    assert!(t.end.is_none());

    let junk = r.dir.join("junk.bin");
    std::fs::write(&junk, b"not a trace at all").unwrap();
    let out = Command::new(rtrace_bin())
        .arg("report")
        .arg(&junk)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an rtrace trace"));
}

/// `rtrace record`'s capture options reach the program's librtrace.so, and it records NVTX
/// (NVTX_INJECTION64_PATH points at librtrace.so).
#[test]
fn record_passes_capture_control_and_nvtx_on() {
    let b = build();
    let dir = fresh_dir("record-capture");
    let out = Command::new(rtrace_bin())
        .arg("record")
        .arg("--output")
        .arg(dir.join("rec-%p.bin"))
        .args([
            "--capture-range",
            "cudaProfilerApi",
            "--gpu-activity=kernel",
        ])
        .args(["--kernel-regex", "fill", "--kernel-count", "5"])
        .arg("--")
        .arg(b.bin.join("capture"))
        .env("LD_LIBRARY_PATH", &b.lib)
        .env_remove("LD_PRELOAD")
        .env_remove("NVTX_INJECTION64_PATH")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let loaded = rtrace_collector::load_inputs(std::slice::from_ref(&dir)).unwrap();
    let t = &loaded.traces[0];
    let calls: Vec<&str> = records(t)
        .iter()
        .map(|(_, a)| t.functions[&a.function].as_str())
        .collect();
    assert_eq!(
        calls,
        vec![
            "cuInit",
            "cuProfilerStart",
            "cuMemsetD32_v2",
            "cuLaunchKernel",
            "cuCtxSynchronize",
            "cuProfilerStop"
        ]
    );
    assert_eq!(t.kernels.len(), 1);
    let pushes = t
        .threads
        .values()
        .flat_map(|th| &th.nvtx)
        .filter(|e| e.kind == rtrace_format::NvtxKind::Push)
        .count();
    assert_eq!(pushes, 1);
    let notices: Vec<&str> = t.notices.iter().map(|n| n.message.as_str()).collect();
    assert!(
        notices.contains(
            &"capture: recording only between cuProfilerStart and cuProfilerStop; kernels \
              matching /fill/, 5 of them"
        ),
        "{notices:?}"
    );
    // A bad option value is a usage error.
    let out = Command::new(rtrace_bin())
        .args(["record", "--delay", "soon", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
