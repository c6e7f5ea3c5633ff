//! Capture control on the simulated driver: `tests/programs/capture.c` makes four NVTX-ranged
//! steps (a memset, a kernel, a synchronize), with cuProfilerStart/Stop around step 1 and an
//! optional pause before step 3; each setting must record exactly the calls, GPU records and
//! NVTX events of the part it selects.

use rtrace_format::NvtxKind;
use rtrace_tests::*;

/// (API functions in order, kernel launches' start order among launches (by the step that
/// launched them), NVTX ranges pushed, notices).
struct Got {
    calls: Vec<String>,
    kernels: Vec<usize>,
    ranges: Vec<String>,
    notices: Vec<String>,
}

fn capture(env: &[(&str, &str)], args: &[&str]) -> Got {
    let mut all = vec![("RTRACE_GPU_ACTIVITY", "kernel,memcpy,memset")];
    all.extend_from_slice(env);
    let all: &'static [(&'static str, &'static str)] = Box::leak(
        all.into_iter()
            .map(|(k, v)| -> (&'static str, &'static str) {
                (
                    Box::leak(k.to_string().into_boxed_str()),
                    Box::leak(v.to_string().into_boxed_str()),
                )
            })
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    let args: &'static [&'static str] = Box::leak(
        args.iter()
            .map(|a| -> &'static str { Box::leak(a.to_string().into_boxed_str()) })
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    let r = run(Spec::traced("capture").args(args).env(all));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert!(r.stdout().starts_with("capture ok"), "{}", r.stdout());
    let t = r.trace();
    check_invariants(&t);
    let recs = records(&t);
    let calls: Vec<String> = recs
        .iter()
        .map(|(_, a)| t.functions[&a.function].clone())
        .collect();
    // Which launch (0-based, in call order) each kernel came from.
    let launches: Vec<u64> = recs
        .iter()
        .filter(|(_, a)| t.functions[&a.function] == "cuLaunchKernel")
        .map(|(_, a)| a.correlation)
        .collect();
    let kernels = t
        .kernels
        .iter()
        .map(|k| {
            assert_ne!(k.flags & rtrace_format::FLAG_CORRELATED, 0, "{k:?}");
            launches
                .iter()
                .position(|&c| c == k.correlation)
                .expect("a kernel of a recorded launch")
        })
        .collect();
    let ranges = t
        .threads
        .values()
        .flat_map(|th| th.nvtx.iter())
        .filter(|e| e.kind == NvtxKind::Push)
        .map(|e| t.nvtx_strings[&e.message].clone())
        .collect();
    let notices = t
        .notices
        .iter()
        .map(|n| n.message.clone())
        .filter(|m| m.starts_with("capture"))
        .collect();
    Got {
        calls,
        kernels,
        ranges,
        notices,
    }
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

const SETUP: [&str; 7] = [
    "cuInit",
    "cuDeviceGet",
    "cuDevicePrimaryCtxRetain",
    "cuCtxSetCurrent",
    "cuModuleLoadData",
    "cuModuleGetFunction",
    "cuMemAlloc_v2",
];
const STEP: [&str; 3] = ["cuMemsetD32_v2", "cuLaunchKernel", "cuCtxSynchronize"];
const TEARDOWN: [&str; 3] = [
    "cuMemFree_v2",
    "cuModuleUnload",
    "cuDevicePrimaryCtxRelease_v2",
];

#[test]
fn without_capture_control_everything_is_recorded() {
    let g = capture(&[], &[]);
    let mut want = names(&SETUP);
    want.extend(names(&STEP));
    want.push("cuProfilerStart".into());
    want.extend(names(&STEP));
    want.push("cuProfilerStop".into());
    want.extend(names(&STEP));
    want.extend(names(&STEP));
    want.extend(names(&TEARDOWN));
    assert_eq!(g.calls, want);
    assert_eq!(g.kernels, vec![0, 1, 2, 3]);
    assert_eq!(g.ranges, names(&["step 0", "step 1", "step 2", "step 3"]));
    assert!(g.notices.is_empty(), "{:?}", g.notices);
}

#[test]
fn a_profiler_api_range_records_only_between_start_and_stop() {
    let g = capture(&[("RTRACE_CAPTURE_RANGE", "cudaProfilerApi")], &[]);
    let mut want = names(&["cuInit", "cuProfilerStart"]);
    want.extend(names(&STEP));
    want.push("cuProfilerStop".into());
    assert_eq!(g.calls, want);
    assert_eq!(g.kernels, vec![0]);
    assert_eq!(g.ranges, names(&["step 1"]));
    assert_eq!(
        g.notices,
        names(&[
            "capture: recording only between cuProfilerStart and cuProfilerStop",
            "capture: 6 GPU records left out (not launched by a recorded call)",
        ])
    );
}

#[test]
fn an_nvtx_capture_range_records_only_inside_it() {
    let g = capture(&[("RTRACE_NVTX_CAPTURE", "step 2")], &[]);
    let mut want = names(&["cuInit"]);
    want.extend(names(&STEP));
    assert_eq!(g.calls, want);
    assert_eq!(g.kernels, vec![0]);
    assert_eq!(g.ranges, names(&["step 2"]));
    assert_eq!(
        g.notices,
        names(&[
            "capture: recording only inside NVTX ranges step 2",
            "capture: 6 GPU records left out (not launched by a recorded call)",
        ])
    );
    // A range of another domain does not match.
    let g = capture(&[("RTRACE_NVTX_CAPTURE", "step 2@other")], &[]);
    assert_eq!(g.calls, names(&["cuInit"]));
    assert!(g.kernels.is_empty());
}

#[test]
fn an_nvtx_exclude_range_is_left_out() {
    let g = capture(&[("RTRACE_NVTX_EXCLUDE", "step 1")], &[]);
    let mut want = names(&SETUP);
    want.extend(names(&STEP));
    want.push("cuProfilerStart".into());
    want.push("cuProfilerStop".into());
    want.extend(names(&STEP));
    want.extend(names(&STEP));
    want.extend(names(&TEARDOWN));
    assert_eq!(g.calls, want);
    assert_eq!(g.kernels, vec![0, 1, 2]);
    assert_eq!(g.ranges, names(&["step 0", "step 2", "step 3"]));
    assert_eq!(
        g.notices,
        names(&[
            "capture: not inside NVTX ranges step 1",
            "capture: 2 GPU records left out (not launched by a recorded call)",
        ])
    );
}

#[test]
fn the_kernel_filter_skips_then_keeps_matching_kernels() {
    let g = capture(
        &[
            ("RTRACE_KERNEL_REGEX", "^fill"),
            ("RTRACE_KERNEL_SKIP", "1"),
            ("RTRACE_KERNEL_COUNT", "2"),
        ],
        &[],
    );
    assert_eq!(g.calls.len(), 7 + 4 * 3 + 2 + 3);
    assert_eq!(g.kernels, vec![1, 2]);
    assert_eq!(
        g.notices,
        names(&[
            "capture: kernels matching /^fill/, after the first 1, 2 of them",
            "capture: 2 kernel records left out by the kernel filter",
        ])
    );
    // A name that matches nothing leaves every kernel out.
    let g = capture(&[("RTRACE_KERNEL_REGEX", "gemm")], &[]);
    assert!(g.kernels.is_empty());
}

#[test]
fn a_delay_and_a_duration_bound_recording_in_time() {
    // Steps 0..2 run within milliseconds of the start, step 3 after a 900 ms pause.
    let g = capture(&[("RTRACE_DELAY", "300ms")], &["900"]);
    let mut want = names(&["cuInit"]);
    want.extend(names(&STEP));
    want.extend(names(&TEARDOWN));
    assert_eq!(g.calls, want);
    assert_eq!(g.kernels, vec![0]);
    assert_eq!(g.ranges, names(&["step 3"]));
    assert_eq!(
        g.notices,
        names(&[
            "capture: from 0.300000000 s after start",
            "capture: 6 GPU records left out (not launched by a recorded call)",
        ])
    );
    let g = capture(&[("RTRACE_DURATION", "300ms")], &["900"]);
    let mut want = names(&SETUP);
    want.extend(names(&STEP));
    want.push("cuProfilerStart".into());
    want.extend(names(&STEP));
    want.push("cuProfilerStop".into());
    want.extend(names(&STEP));
    assert_eq!(g.calls, want);
    assert_eq!(g.kernels, vec![0, 1, 2]);
    assert_eq!(g.ranges, names(&["step 0", "step 1", "step 2"]));
    assert_eq!(
        g.notices,
        names(&[
            "capture: for 0.300000000 s",
            "capture: 2 GPU records left out (not launched by a recorded call)",
        ])
    );
}

#[test]
fn bad_capture_settings_are_said_and_ignored() {
    let g = capture(
        &[
            ("RTRACE_CAPTURE_RANGE", "sometimes"),
            ("RTRACE_DELAY", "soon"),
            ("RTRACE_KERNEL_REGEX", "("),
        ],
        &[],
    );
    assert_eq!(g.kernels, vec![0, 1, 2, 3]);
    assert_eq!(g.notices.len(), 4, "{:?}", g.notices);
    assert_eq!(
        g.notices[..2],
        names(&[
            "capture: RTRACE_CAPTURE_RANGE=sometimes is not cudaProfilerApi or none: ignored",
            "capture: RTRACE_DELAY: 'soon' is not a time (e.g. 2, 1.5s, 250ms, 30us, 1500ns): ignored",
        ])
    );
    assert_eq!(g.notices[2], "capture: kernels matching /(/");
    assert!(
        g.notices[3].starts_with("capture: RTRACE_KERNEL_REGEX: not a regular expression: "),
        "{}",
        g.notices[3]
    );
    assert!(
        g.notices[3].ends_with("; every kernel kept"),
        "{}",
        g.notices[3]
    );
}

/// NVTX ranges that straddle a capture range's edges (`capture.c`'s `edges`): a range whose
/// push or start was recorded has its pop or end recorded too, even while paused; one begun
/// while paused has neither recorded, even when it ends while recording. So every pop in the
/// trace is its own push's, no range is left open, and the launch made in "outer" after
/// "hidden" was popped is credited to "outer".
#[test]
fn ranges_straddling_a_capture_range_keep_their_own_ends() {
    let r = run(Spec::traced("capture").args(&["0", "edges"]).env(&[
        ("RTRACE_CAPTURE_RANGE", "cudaProfilerApi"),
        ("RTRACE_GPU_ACTIVITY", "kernel"),
    ]));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let t = r.trace();
    check_invariants(&t);
    let name = |m: u32| t.nvtx_strings.get(&m).cloned().unwrap_or_default();
    let nvtx: Vec<&rtrace_format::NvtxEvent> =
        t.threads.values().flat_map(|th| th.nvtx.iter()).collect();
    let events: Vec<(NvtxKind, String, u64)> = nvtx
        .iter()
        .filter(|e| matches!(e.kind, NvtxKind::Push | NvtxKind::Pop))
        .map(|e| (e.kind, name(e.message), e.value))
        .collect();
    use NvtxKind::{End, Pop, Push, Start};
    let s = String::from;
    assert_eq!(
        events,
        vec![
            (Push, s("step 1"), 0),
            (Pop, s(""), 0),
            (Push, s("outer"), 0),
            (Push, s("inner"), 1),
            (Pop, s(""), 1),
            (Pop, s(""), 0),
        ]
    );
    // "async" ends, "hidden async" neither starts nor ends.
    let ranges: Vec<(NvtxKind, String, u64)> = nvtx
        .iter()
        .filter(|e| matches!(e.kind, NvtxKind::Start | NvtxKind::End))
        .map(|e| (e.kind, name(e.message), e.value))
        .collect();
    let id = ranges[0].2;
    assert_eq!(ranges, vec![(Start, s("async"), id), (End, s(""), id)]);
    // "inner"'s pop and "async"'s end are the ones made while paused: between the edges'
    // first cuProfilerStop and the cuProfilerStart after it.
    let starts = |f: &str| -> Vec<u64> {
        records(&t)
            .iter()
            .filter(|(_, a)| t.functions[&a.function] == f)
            .map(|(_, a)| a.start_ns)
            .collect()
    };
    let (stop, resume) = (starts("cuProfilerStop")[1], starts("cuProfilerStart")[2]);
    let paused: Vec<u64> = nvtx
        .iter()
        .filter(|e| (e.kind == Pop && e.value == 1) || e.kind == End)
        .map(|e| e.time_ns)
        .filter(|&time| stop < time && time < resume)
        .collect();
    assert_eq!(paused.len(), 2, "{stop}..{resume}: {nvtx:?}");
    assert_eq!(t.kernels.len(), 2);
    let json =
        rtrace_collector::render_report(std::slice::from_ref(&t), rtrace_collector::Format::Json);
    let gpu_records = |range: &str| -> &str {
        let key = format!("\"name\":\"{range}\",");
        let line = json
            .lines()
            .find(|l| l.contains(&key) && l.contains("\"gpu_records\""))
            .unwrap_or_else(|| panic!("no row {range} in {json}"));
        let at = line.find("\"gpu_records\":").unwrap() + "\"gpu_records\":".len();
        line[at..].split(',').next().unwrap()
    };
    let got: Vec<&str> = ["step 1", "outer", "inner", "async"]
        .iter()
        .map(|r| gpu_records(r))
        .collect();
    assert_eq!(got, ["1", "1", "0", "0"]);
    let table =
        rtrace_collector::render_report(std::slice::from_ref(&t), rtrace_collector::Format::Table);
    assert!(
        table.contains("NVTX ranges: 4 ranges, 4 names, 0 open, 0 marks\n"),
        "{table}"
    );
}
