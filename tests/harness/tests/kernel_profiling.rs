//! Kernel profiling (`RTRACE_METRICS`) on the simulated driver and the simulated CUPTI, whose
//! range profiler is deterministic (tests/simcupti/README.md, "Kernel profiling"): simcuda's
//! device is a GH100; `gpu__time_duration.sum` is the kernel's simulated duration in ns and
//! `sm__cycles_active.avg` 0.875 of its cycles at 1.98 GHz; auto ranges are named by launch
//! order since the configuration was set ("0", "1", ...); `SIMCUPTI_PROFILER` makes profiling
//! fail as on a machine without permission, with counters held by another tool, an unsupported
//! device, or MPS.
//!
//! tests/programs/profile.c launches, in order: fill add empty fill add empty fill add empty on
//! the primary context, then fill fill on a context of its own.

use rtrace_collector::model::Trace;
use rtrace_tests::*;

const METRICS: &str = "gpu__time_duration.sum,sm__cycles_active.avg";
/// The kernels profile.c launches, in order, and the context (0: primary, 1: its own).
const LAUNCHES: [(&str, usize); 11] = [
    ("fill_u32", 0),
    ("add_u32", 0),
    ("empty", 0),
    ("fill_u32", 0),
    ("add_u32", 0),
    ("empty", 0),
    ("fill_u32", 0),
    ("add_u32", 0),
    ("empty", 0),
    ("fill_u32", 1),
    ("fill_u32", 1),
];
/// simcuda's module image: each kernel's duration in ns.
fn duration(name: &str) -> u64 {
    match name {
        "fill_u32" => 500,
        "add_u32" => 700,
        "empty" => 1000,
        other => panic!("{other}"),
    }
}
/// The counter data image of one range with METRICS (simcupti's layout: a 32-byte header,
/// the names, NUL-terminated and padded to 8 bytes: 45 → 48, one 512-byte range slot).
const COUNTER_DATA_BYTES: usize = 32 + 48 + 512;

fn messages(t: &Trace) -> Vec<String> {
    t.notices.iter().map(|n| n.message.clone()).collect()
}

/// The kernel names of the trace's kernel records, in order.
fn kernel_names(t: &Trace) -> Vec<String> {
    t.kernels
        .iter()
        .map(|k| t.kernel_names[&k.name].clone())
        .collect()
}

/// Runs profile.c traced with `env` (GPU activity comes with RTRACE_METRICS) and checks what
/// must hold whatever is profiled: the program's output and exit status are those of an
/// untraced run, every kernel is on the timeline, the trace is sound.
fn run_profile(env: &[(&str, &str)]) -> Trace {
    let r = run(Spec::traced("profile").env(env));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let untraced = run(Spec::untraced("profile"));
    assert_eq!(untraced.code(), Some(0));
    assert_eq!(r.stdout(), untraced.stdout());
    assert_eq!(r.stdout(), "profile ok first=21 second=7 calls=35\n");
    let t = r.trace();
    check_invariants(&t);
    assert_eq!(
        kernel_names(&t),
        LAUNCHES
            .iter()
            .map(|(n, _)| n.to_string())
            .collect::<Vec<_>>(),
        "{:?}",
        messages(&t)
    );
    // The two contexts, in launch order.
    assert_ne!(t.kernels[0].context, t.kernels[10].context);
    t
}

/// CUPTI's id of profile.c's context `which` (0: primary, 1: its own).
fn context(t: &Trace, which: usize) -> u32 {
    t.kernels[if which == 0 { 0 } else { 10 }].context
}

/// Checks that the trace's profiles are exactly the launches at `indices` (into LAUNCHES),
/// each linked to its launch's API record and kernel record, with the simulated values.
fn check_profiles(t: &Trace, indices: &[usize]) {
    let api = records(t);
    assert_eq!(t.kernel_profiles.len(), indices.len(), "{:?}", messages(t));
    let mut per_context = std::collections::HashMap::new();
    for (ordinal, (p, &i)) in t.kernel_profiles.iter().zip(indices).enumerate() {
        let k = &t.kernels[i];
        let (name, _) = LAUNCHES[i];
        assert_eq!(p.launch, ordinal as u64);
        assert_eq!(p.correlation, k.correlation);
        assert_eq!(p.context, k.context);
        assert_eq!(p.name, name);
        // The API record with this correlation is the launch call.
        let calls: Vec<_> = api
            .iter()
            .filter(|(_, r)| r.correlation == p.correlation)
            .map(|(_, r)| t.functions[&r.function].as_str())
            .collect();
        assert_eq!(calls, vec!["cuLaunchKernel"]);
        // CUPTI gives a replayed launch's record no times: the library places it where
        // profiling began, as long as the metric says it ran, and flags it.
        assert_eq!(
            k.flags & rtrace_format::FLAG_PROFILED,
            rtrace_format::FLAG_PROFILED
        );
        assert_eq!(k.start_ns, p.start_ns);
        assert_eq!(k.end_ns - k.start_ns, duration(name));
        let cycles = (duration(name) * 1_980_000 / 1_000_000) as f64;
        assert_eq!(
            p.values,
            vec![(k.end_ns - k.start_ns) as f64, cycles * 0.875]
        );
        // Ranges are counted per context from the configuration: one per profiled launch.
        let n = per_context.entry(p.context).or_insert(0u32);
        assert_eq!(p.range, n.to_string());
        *n += 1;
        assert_eq!(p.counter_data.len(), COUNTER_DATA_BYTES);
        assert!(p.start_ns <= p.end_ns);
    }
    // Launches not profiled keep CUPTI's times, unflagged.
    for (i, k) in t.kernels.iter().enumerate() {
        if !indices.contains(&i) {
            assert_eq!(k.flags & rtrace_format::FLAG_PROFILED, 0);
            assert_eq!(k.end_ns - k.start_ns, duration(LAUNCHES[i].0));
        }
    }
}

/// The setup expected on context `which`.
fn check_setup(t: &Trace, s: &rtrace_format::ProfilerSetup, which: usize) {
    assert_eq!(s.context, context(t, which));
    assert_eq!(
        (s.device, s.chip.as_str(), s.passes, s.replay),
        (0, "GH100", 1, rtrace_format::Replay::Kernel)
    );
    assert_eq!(s.metrics, METRICS.split(',').collect::<Vec<_>>());
    assert!(messages(t).contains(&format!(
        "kernel profiling on for context {} (device 0, GH100): 2 metrics, 1 replay pass",
        s.context
    )));
}

#[test]
fn every_launch_is_profiled_without_kernel_controls() {
    let t = run_profile(&[("RTRACE_METRICS", METRICS)]);
    assert!(messages(&t).contains(
        &"kernel profiling on: 2 metrics by kernel replay, for every kernel (kernels in CUDA graphs are not profiled)"
            .to_string()
    ));
    // One setup per context, before its first profile.
    assert_eq!(t.profiler_setups.len(), 2, "{:?}", messages(&t));
    check_setup(&t, &t.profiler_setups[0], 0);
    check_setup(&t, &t.profiler_setups[1], 1);
    check_profiles(&t, &(0..11).collect::<Vec<_>>());
}

#[test]
fn the_kernel_controls_choose_what_is_profiled_and_every_kernel_stays() {
    // fill_u32 is launched 5 times (launches 0, 3, 6, 9, 10): skip 1, profile 2.
    let t = run_profile(&[
        ("RTRACE_METRICS", METRICS),
        ("RTRACE_KERNEL_REGEX", "fill"),
        ("RTRACE_KERNEL_SKIP", "1"),
        ("RTRACE_KERNEL_COUNT", "2"),
    ]);
    assert!(messages(&t).contains(
        &"kernel profiling on: 2 metrics by kernel replay, for kernels matching /fill/, after the first 1, 2 of them (kernels in CUDA graphs are not profiled)"
            .to_string()
    ));
    // The kernel-record filter is not applied (run_profile checked all 11 kernels), and says
    // nothing about leaving kernels out.
    assert!(!messages(&t)
        .iter()
        .any(|m| m.contains("left out by the kernel filter")));
    assert_eq!(t.profiler_setups.len(), 1);
    check_setup(&t, &t.profiler_setups[0], 0);
    check_profiles(&t, &[3, 6]);

    // Only the second context's launches: it alone is set up.
    let t = run_profile(&[
        ("RTRACE_METRICS", METRICS),
        ("RTRACE_KERNEL_REGEX", "^fill_u32$"),
        ("RTRACE_KERNEL_SKIP", "3"),
    ]);
    assert_eq!(t.profiler_setups.len(), 1);
    check_setup(&t, &t.profiler_setups[0], 1);
    check_profiles(&t, &[9, 10]);

    // A count alone: the first four launches, whatever their kernel.
    let t = run_profile(&[("RTRACE_METRICS", METRICS), ("RTRACE_KERNEL_COUNT", "4")]);
    assert_eq!(t.profiler_setups.len(), 1);
    check_profiles(&t, &[0, 1, 2, 3]);
}

#[test]
fn a_metric_the_chip_lacks_is_left_out() {
    // `foo__bar.baz`: `baz` is no rollup, so simcupti's GH100 has no such metric.
    let t = run_profile(&[("RTRACE_METRICS", "foo__bar.baz,gpu__time_duration.sum")]);
    let c = context(&t, 0);
    assert!(messages(&t).contains(&format!(
        "kernel profiling on context {c}: chip GH100 lacks foo__bar.baz: left out"
    )));
    assert_eq!(t.profiler_setups[0].metrics, vec!["gpu__time_duration.sum"]);
    assert_eq!(t.kernel_profiles.len(), 11);
    for (p, k) in t.kernel_profiles.iter().zip(&t.kernels) {
        assert_eq!(p.values, vec![(k.end_ns - k.start_ns) as f64]);
    }
}

#[test]
fn counters_that_cannot_be_had_leave_tracing_on_and_say_why() {
    let cases = [
        (
            "privileges",
            "cuptiProfilerGetCounterAvailability: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (35): no permission to read GPU counters: run as root or set NVreg_RestrictProfilingToAdminUsers=0",
        ),
        (
            "busy",
            "cuptiProfilerGetCounterAvailability: CUPTI_ERROR_HARDWARE_BUSY (26): the GPU's counters are held by another tool (Nsight Compute, Nsight Systems' GPU metrics, DCGM profiling)",
        ),
        (
            "unsupported",
            "device 0 does not support profiling (unsupported: architecture (compute capability 7.0 or later needed))",
        ),
        (
            "mps",
            "cuptiRangeProfilerEnable: CUPTI_ERROR_NOT_SUPPORTED (27): this device or configuration does not support profiling (MPS, vGPU, MIG, SLI, WSL, confidential computing)",
        ),
    ];
    for (knob, why) in cases {
        let t = run_profile(&[("RTRACE_METRICS", METRICS), ("SIMCUPTI_PROFILER", knob)]);
        assert!(
            t.profiler_setups.is_empty() && t.kernel_profiles.is_empty(),
            "{knob}"
        );
        let said: Vec<String> = messages(&t)
            .into_iter()
            .filter(|m| m.starts_with("kernel profiling off for context"))
            .collect();
        assert_eq!(
            said,
            vec![
                format!("kernel profiling off for context {}: {why}", context(&t, 0)),
                format!("kernel profiling off for context {}: {why}", context(&t, 1)),
            ],
            "{knob}"
        );
    }
}

#[test]
fn a_bad_list_or_pc_sampling_leaves_profiling_off() {
    let t = run_profile(&[("RTRACE_METRICS", "SpeedOfLight,NoSuchSection")]);
    let why = rtrace_format::metric_sets::resolve("SpeedOfLight,NoSuchSection").unwrap_err();
    assert!(
        messages(&t).contains(&format!("kernel profiling off: RTRACE_METRICS: {why}")),
        "{:?}",
        messages(&t)
    );
    assert!(t.profiler_setups.is_empty() && t.kernel_profiles.is_empty());

    let t = run_profile(&[("RTRACE_METRICS", METRICS), ("RTRACE_PC_SAMPLING", "1")]);
    assert!(messages(&t).contains(
        &"kernel profiling off: PC sampling is on; CUPTI cannot do both on one context".to_string()
    ));
    assert!(t.profiler_setups.is_empty() && t.kernel_profiles.is_empty());
    assert_eq!(t.pc_configs.len(), 2);
}

/// A program that profiles with CUPTI's range profiler itself, after rtrace profiled one of its
/// launches: rtrace gives its counters up when the program calls `cuptiProfilerInitialize`, so
/// that the program's own `cuptiRangeProfilerEnable` works as it does untraced.
#[test]
fn a_program_that_profiles_itself_gets_the_counters() {
    let r = run(Spec::traced("profile_self").env(&[("RTRACE_METRICS", METRICS)]));
    let untraced = run(Spec::untraced("profile_self"));
    assert_eq!(untraced.stdout(), "profile_self ok enable=0\n");
    assert_eq!(
        (r.code(), r.stdout()),
        (Some(0), untraced.stdout()),
        "{}",
        r.stderr()
    );
    let t = r.trace();
    assert_eq!(kernel_names(&t), ["fill_u32", "fill_u32"]);
    assert_eq!(t.kernel_profiles.len(), 1);
    assert_eq!(t.kernel_profiles[0].correlation, t.kernels[0].correlation);
    assert!(
        messages(&t).contains(
            &"kernel profiling off: the program uses CUPTI's profiler itself \
              (cuptiProfilerInitialize): rtrace leaves the GPU's counters to it (1 context \
              released)"
                .to_string()
        ),
        "{:?}",
        messages(&t)
    );
}
