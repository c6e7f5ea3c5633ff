//! Inputs built to be hard for the collector (docs/benchmarks.md, "Collector scale", measures
//! them at full size): NVTX ranges pushed and never popped, or all popped at the end;
//! correlation ids 2^23 apart; records at extreme times, and records that end before they
//! start. Every record is accounted for: reported, or set aside as damaged with its offset.

mod common {
    pub mod fixtures;
}

use common::fixtures::*;
use rtrace_format::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("rtrace-adversarial-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn rtrace(args: &[&str], file: &Path) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_rtrace"))
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    out
}

/// `rtrace export --format chrome` of `file`, into a file beside it.
fn export(file: &Path) -> Output {
    let to = file.with_extension("json");
    rtrace(
        &["export", "--format", "chrome", "-o", to.to_str().unwrap()],
        file,
    )
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const TID: u64 = 77;

fn launch(start: u64, end: u64, correlation: u64) -> ApiRecord {
    ApiRecord {
        function: 1,
        result: 0,
        start_ns: start,
        end_ns: end,
        correlation,
    }
}

fn kernel(start: u64, end: u64, correlation: u64) -> KernelRecord {
    KernelRecord {
        correlation,
        start_ns: start,
        end_ns: end,
        name: 0,
        context: 1,
        stream: 13,
        grid: [1, 1, 1],
        block: [32, 1, 1],
        flags: FLAG_CORRELATED,
        ..Default::default()
    }
}

fn push(time_ns: u64) -> NvtxEvent {
    NvtxEvent {
        kind: NvtxKind::Push,
        message: 1,
        time_ns,
        ..Default::default()
    }
}

fn pop(time_ns: u64) -> NvtxEvent {
    NvtxEvent {
        kind: NvtxKind::Pop,
        time_ns,
        ..Default::default()
    }
}

fn base() -> Builder {
    Builder::new(&header(4600, 1, &["adversarial"], 0))
        .names(&[(1, "cuLaunchKernel")])
        .kernel_names(&[(0, "k")])
        .chunk(
            ChunkKind::NvtxStrings,
            0,
            0,
            &encode_function_names([(1u32, "r")]),
        )
}

fn nvtx(b: Builder, events: &[NvtxEvent]) -> Builder {
    let payload: Vec<u8> = events.iter().flat_map(|e| e.to_bytes()).collect();
    b.chunk(ChunkKind::NvtxEvents, TID, 0, &payload)
}

/// `n` pushes on one thread, each followed by a launch whose kernel runs at once; with
/// `popped`, every range is popped at the end, innermost first.
fn nested(n: u64, popped: bool) -> Vec<u8> {
    let mut events = Vec::new();
    let (mut calls, mut kernels) = (Vec::new(), Vec::new());
    for i in 0..n {
        let t = T0 + i * 1_000;
        events.push(push(t));
        calls.push(launch(t + 100, t + 500, i + 1));
        kernels.push(kernel(t + 600, t + 900, i + 1));
    }
    if popped {
        events.extend((0..n).map(|i| pop(T0 + n * 1_000 + i)));
    }
    let b = nvtx(base(), &events);
    b.records(TID, 0, &calls).kernels(&kernels).bytes
}

#[test]
fn ranges_never_popped_are_counted_open_and_their_calls_all_join() {
    let n = 3_000;
    let path = write("open.bin", &nested(n, false));
    let out = text(&rtrace(&["report"], &path).stdout);
    for line in [
        "  API records        3000",
        "  GPU records        3000 kernels, 0 copies, 0 memsets",
        "NVTX ranges: 0 ranges, 0 names, 3000 open, 0 marks",
        "Slowest launch-to-start: the 10 largest of 3000 GPU records matched with an API call",
    ] {
        assert!(out.lines().any(|l| l == line), "{line}\n{out}");
    }
    // Calls, kernels, the open ranges (drawn to the end) and the GPU span of each.
    let err = text(&export(&path).stderr);
    assert!(
        err.ends_with(": 1 process, 12000 slices, 3000 flows, 0 counter values\n"),
        "{err}"
    );
}

#[test]
fn deeply_nested_ranges_get_every_call_inside_them() {
    let n: u64 = 3_000;
    let path = write("nested.bin", &nested(n, true));
    let json = text(&rtrace(&["report", "--format", "json"], &path).stdout);
    // Range i (from the outermost, 0) holds the calls i..n: n - i kernels, 300 ns each;
    // only the innermost's own.
    let records = n * (n + 1) / 2;
    let want = "\"nvtx\":{\"ranges\":[\n  {\"domain\":\"(default)\",\"name\":\"r\",\"count\":3000,";
    assert!(json.contains(want), "{json}");
    for key in [
        format!("\"gpu_records\":{records},"),
        format!("\"gpu_ns\":{},", records * 300),
        "\"own_gpu_records\":3000,".to_string(),
        "\"open\":0,".to_string(),
    ] {
        assert!(json.contains(&key), "{key}\n{json}");
    }
}

#[test]
fn correlation_ids_far_apart_all_join() {
    let n = 3_000;
    let calls: Vec<ApiRecord> = (0..n)
        .map(|i| launch(T0 + i * 1_000, T0 + i * 1_000 + 400, 1 + (i << 23)))
        .collect();
    let kernels: Vec<KernelRecord> = (0..n)
        .map(|i| kernel(T0 + i * 1_000 + 500, T0 + i * 1_000 + 900, 1 + (i << 23)))
        .collect();
    let path = write(
        "sparse.bin",
        &base().records(TID, 0, &calls).kernels(&kernels).bytes,
    );
    let out = text(&rtrace(&["report"], &path).stdout);
    let line =
        "Slowest launch-to-start: the 10 largest of 3000 GPU records matched with an API call";
    assert!(out.lines().any(|l| l == line), "{out}");
    let err = text(&export(&path).stderr);
    assert!(
        err.ends_with(": 1 process, 6000 slices, 3000 flows, 0 counter values\n"),
        "{err}"
    );
}

#[test]
fn extreme_times_are_kept_and_impossible_ones_set_aside_with_their_offsets() {
    let odd = [(u64::MAX, u64::MAX), (u64::MAX - 10, u64::MAX - 5), (0, 5)];
    let mut calls: Vec<ApiRecord> = vec![launch(T0, T0 + 400, 1)];
    let mut kernels: Vec<KernelRecord> = vec![kernel(T0 + 500, T0 + 900, 1)];
    for (k, &(s, e)) in odd.iter().enumerate() {
        calls.push(launch(s, e, 2 + k as u64));
        kernels.push(kernel(s, e, 2 + k as u64));
    }
    // An end before its start: the third call and the second kernel.
    calls.insert(2, launch(T0 + 50, T0 + 10, 9));
    kernels.insert(1, kernel(T0 + 60, T0 + 20, 9));
    let b = base();
    let api_at = b.bytes.len() as u64 + CHUNK_HEADER_LEN as u64 + 2 * ApiRecord::SIZE as u64;
    let b = b.records(TID, 0, &calls);
    let kernel_at = b.bytes.len() as u64 + CHUNK_HEADER_LEN as u64 + KernelRecord::SIZE as u64;
    let path = write("extreme.bin", &b.kernels(&kernels).bytes);
    let out = rtrace(&["report", "--format", "json"], &path);
    let json = text(&out.stdout);
    let damaged = format!(
        "\"damaged_records\":{{\"count\":2,\"listed\":[\
         {{\"offset\":{api_at},\"kind\":\"API record\",\"start_ns\":{},\"end_ns\":{}}},\
         {{\"offset\":{kernel_at},\"kind\":\"kernel\",\"start_ns\":{},\"end_ns\":{}}}]}}",
        T0 + 50,
        T0 + 10,
        T0 + 60,
        T0 + 20
    );
    for key in [
        "\"api_records\":4,",
        "\"kernel_records\":4,",
        damaged.as_str(),
        // The call at u64::MAX is counted, with a duration of 0.
        "{\"function\":\"cuLaunchKernel\",\"calls\":4,\"errors\":0,\"total_ns\":410,",
    ] {
        assert!(json.contains(key), "{key}\n{json}");
    }
    let warning = format!(
        "warning: {}: 2 records end before they start, set aside as damaged: the API record \
         at byte {api_at} (start {} ns, end {} ns), the kernel at byte {kernel_at} (start {} \
         ns, end {} ns)\n",
        path.display(),
        T0 + 50,
        T0 + 10,
        T0 + 60,
        T0 + 20
    );
    assert_eq!(text(&out.stderr), warning);
    // The export draws the 4 calls and 4 kernels kept, linked, and warns the same.
    let out = export(&path);
    let err = text(&out.stderr);
    assert!(
        err.ends_with(": 1 process, 8 slices, 4 flows, 0 counter values\n"),
        "{err}"
    );
    assert!(err.contains(&warning), "{err}");
}

#[test]
fn ranges_that_end_out_of_nesting_order_get_exactly_their_calls() {
    // "a" (start/end) from 0 to 50; "b" pushed at 10 inside it, popped at 100. Calls at 20
    // and 60, each with a kernel; the first call's kernel comes last, after "a" ended.
    let start = |kind, message, t| NvtxEvent {
        kind,
        message,
        time_ns: T0 + t,
        value: 5,
        ..Default::default()
    };
    let events = [
        start(NvtxKind::Start, 2, 0),
        start(NvtxKind::Push, 3, 10),
        start(NvtxKind::End, 0, 50),
        start(NvtxKind::Pop, 0, 100),
    ];
    let b = Builder::new(&header(4601, 1, &["adversarial"], 0))
        .names(&[(1, "cuLaunchKernel")])
        .kernel_names(&[(0, "k")])
        .chunk(
            ChunkKind::NvtxStrings,
            0,
            0,
            &encode_function_names([(2u32, "a"), (3, "b")]),
        );
    let calls = [launch(T0 + 20, T0 + 25, 1), launch(T0 + 60, T0 + 65, 2)];
    let kernels = [kernel(T0 + 70, T0 + 80, 2), kernel(T0 + 200, T0 + 230, 1)];
    let bytes = nvtx(b, &events)
        .records(TID, 0, &calls)
        .kernels(&kernels)
        .bytes;
    let path = write("out-of-order.bin", &bytes);
    let json = text(&rtrace(&["report", "--format", "json"], &path).stdout);
    // "a" holds the first call only; "b" both, and is the innermost of both.
    for row in [
        "{\"domain\":\"(default)\",\"name\":\"a\",\"count\":1,\"total_ns\":50,\"mean_ns\":50,\
         \"median_ns\":50,\"min_ns\":50,\"max_ns\":50,\"stddev_ns\":0,\"share_percent\":35.71,\
         \"gpu_records\":1,\"gpu_ns\":30,\
         \"own_gpu_records\":0,\"own_gpu_ns\":0,\"process_gpu_records\":1,\"process_gpu_ns\":30,\
         \"process_own_gpu_records\":0,\"process_own_gpu_ns\":0}",
        "{\"domain\":\"(default)\",\"name\":\"b\",\"count\":1,\"total_ns\":90,\"mean_ns\":90,\
         \"median_ns\":90,\"min_ns\":90,\"max_ns\":90,\"stddev_ns\":0,\"share_percent\":64.29,\
         \"gpu_records\":2,\"gpu_ns\":40,\
         \"own_gpu_records\":2,\"own_gpu_ns\":40,\"process_gpu_records\":2,\"process_gpu_ns\":40,\
         \"process_own_gpu_records\":2,\"process_own_gpu_ns\":40}",
    ] {
        assert!(json.contains(row), "{row}\n{json}");
    }
}
