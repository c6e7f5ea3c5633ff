//! Source counters (`RTRACE_SOURCE_COUNTERS`) on the simulated driver and the simulated CUPTI,
//! whose SASS Metric API is deterministic (tests/simcupti/README.md, "SASS metrics"): each
//! launch adds, at offsets 0, 16, 32, 48 (k = 0..3) of its function, with W its warps and T its
//! threads: instructions W·(k+1); thread instructions (predicated on) T·(k+1), less T/2 at
//! k = 3; at k = 1 global sectors 32·W (ideal 4·W); at k = 2 shared wavefronts 32·W (ideal W);
//! at k = 3 divergent branch targets W.
//!
//! tests/programs/profile.c launches, in order: fill add empty fill add empty fill add empty on
//! the primary context (fill and add: 4 blocks of 256 threads, 32 warps; empty: 1 block of
//! 32), then fill fill on a context of its own.

use rtrace_collector::model::Trace;
use rtrace_tests::*;

fn messages(t: &Trace) -> Vec<String> {
    t.notices.iter().map(|n| n.message.clone()).collect()
}

/// One launch's values at k = 0..3, for W warps and T threads.
fn launch_values(w: u64, t: u64) -> Vec<(u64, [u64; 7])> {
    vec![
        (0, [w, t, 0, 0, 0, 0, 0]),
        (16, [2 * w, 2 * t, 32 * w, 4 * w, 0, 0, 0]),
        (32, [3 * w, 3 * t, 0, 0, 32 * w, w, 0]),
        (48, [4 * w, 4 * t - t / 2, 0, 0, 0, 0, w]),
    ]
}

/// The correlations of the program's `cuLaunchKernel` calls, in order.
fn launch_correlations(t: &Trace) -> Vec<u64> {
    let mut calls: Vec<&rtrace_format::ApiRecord> = t
        .threads
        .values()
        .flat_map(|th| &th.records)
        .filter(|a| t.functions.get(&a.function).map(String::as_str) == Some("cuLaunchKernel"))
        .collect();
    calls.sort_by_key(|a| a.start_ns);
    calls.iter().map(|a| a.correlation).collect()
}

fn run_profile(env: &[(&str, &str)]) -> Trace {
    let r = run(Spec::traced("profile").env(env));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let untraced = run(Spec::untraced("profile"));
    // The program's output is the same (its call count aside: rtrace's own calls are not the
    // program's, and simcuda counts every call it sees).
    let line = |s: String| s.split(" calls=").next().unwrap_or("").to_string();
    assert_eq!(line(r.stdout()), line(untraced.stdout()));
    let t = r.trace();
    check_invariants(&t);
    t
}

#[test]
fn every_launch_is_counted_per_instruction_and_joined_to_its_image() {
    let t = run_profile(&[("RTRACE_SOURCE_COUNTERS", "1")]);
    let msgs = messages(&t);
    assert!(
        msgs.iter().any(|m| m == "source counters on: CUPTI's SASS metrics, for every kernel (each chosen launch serialized; kernels in CUDA graphs are not counted)"),
        "{msgs:?}"
    );
    // Two contexts set up, with the metric simcupti lists for each counter.
    assert_eq!(t.source_counter_setups.len(), 2, "{msgs:?}");
    let s = &t.source_counter_setups[0];
    assert_eq!(
        (s.device, s.chip.as_str(), s.lazy_patching),
        (0, "GH100", true)
    );
    assert_eq!(
        s.metrics,
        vec![
            "smsp__sass_inst_executed",
            "smsp__sass_thread_inst_executed_pred_on",
            "smsp__sass_sectors_mem_global",
            "smsp__sass_sectors_mem_global_ideal",
            "smsp__sass_l1tex_pipe_lsu_wavefronts_mem_shared",
            "smsp__sass_l1tex_pipe_lsu_wavefronts_mem_shared_ideal",
            "smsp__sass_branch_targets_threads_divergent",
        ]
    );
    assert!(msgs.contains(&format!(
        "source counters on for context {}: 7 of 7 counters on GH100",
        s.context
    )));
    // No activity kind beside source counters (CUPTI counted nothing with them on): the
    // modules and their images come through the resource callbacks.
    assert!(t.kernels.is_empty() && t.contexts.is_empty() && t.streams.is_empty());
    assert!(!t.module_images.is_empty() && !t.modules.is_empty());
    assert!(
        msgs.iter()
            .any(|m| m == "GPU activity on: modules through CUPTI"),
        "{msgs:?}"
    );
    // Eleven launches, in order, each its own function's four instructions.
    let names: Vec<&str> = t.source_counters.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "fill_u32", "add_u32", "empty", "fill_u32", "add_u32", "empty", "fill_u32", "add_u32",
            "empty", "fill_u32", "fill_u32"
        ]
    );
    let launches: Vec<u64> = t.source_counters.iter().map(|l| l.launch).collect();
    assert_eq!(launches, (0..11).collect::<Vec<u64>>());
    let launch_calls = launch_correlations(&t);
    let correlations: Vec<u64> = t.source_counters.iter().map(|l| l.correlation).collect();
    assert_eq!(correlations, launch_calls);
    for l in &t.source_counters {
        assert_eq!(l.functions.len(), 1);
        let f = &l.functions[0];
        assert_eq!(f.name, l.name);
        let (w, th) = if l.name == "empty" {
            (1, 32)
        } else {
            (32, 1024)
        };
        let got: Vec<(u64, [u64; 7])> = f
            .instructions
            .iter()
            .map(|i| (i.pc_offset, i.values))
            .collect();
        assert_eq!(got, launch_values(w, th), "{}", l.name);
        // The CRC names the module image the trace stores.
        assert!(t
            .module_images
            .iter()
            .any(|i| i.crc == f.cubin_crc && i.crc != 0));
        assert_eq!(l.dropped, 0);
    }
    // The collector sums each kernel over its launches (fill: three on the primary context,
    // two on the other, one image).
    let p = rtrace_collector::source_counters::profile(std::slice::from_ref(&t));
    assert_eq!((p.contexts, p.launches), (2, 11));
    let kernels: Vec<(&str, u64, u64)> = p
        .kernels
        .iter()
        .map(|k| (k.name.as_str(), k.launches, k.totals[0]))
        .collect();
    assert_eq!(
        kernels,
        vec![
            ("fill_u32", 5, 5 * 320),
            ("add_u32", 3, 3 * 320),
            ("empty", 3, 3 * 10)
        ]
    );
    let fill = &p.kernels[0];
    // Per launch: 10·W instructions, 9.5·T thread instructions, 32·W sectors (4·W ideal),
    // 32·W wavefronts (W ideal), W divergent targets; five launches.
    assert_eq!(fill.totals, [1600, 48640, 5120, 640, 5120, 160, 160]);
    let f = rtrace_collector::source_counters::findings(fill);
    assert_eq!(
        f.iter()
            .map(|f| (f.rule.key(), f.excessive, f.total))
            .collect::<Vec<_>>(),
        vec![
            ("uncoalesced_global", 4480, 5120),
            ("uncoalesced_shared", 4960, 5120)
        ]
    );
    assert_eq!(f[0].places[0].offset, Some(16));
    assert_eq!(f[1].places[0].offset, Some(32));
}

#[test]
fn the_kernel_controls_choose_the_counted_launches() {
    let t = run_profile(&[
        ("RTRACE_SOURCE_COUNTERS", "1"),
        ("RTRACE_KERNEL_REGEX", "^add"),
        ("RTRACE_KERNEL_SKIP", "1"),
        ("RTRACE_KERNEL_COUNT", "1"),
    ]);
    assert_eq!(t.source_counters.len(), 1, "{:?}", messages(&t));
    let l = &t.source_counters[0];
    assert_eq!((l.name.as_str(), l.launch), ("add_u32", 0));
    // The second add_u32 launch: the fifth cuLaunchKernel.
    let launch_calls = launch_correlations(&t);
    assert_eq!(l.correlation, launch_calls[4]);
    assert_eq!(t.source_counter_setups.len(), 1);
}

#[test]
fn refused_beside_kernel_activity_and_pc_sampling_and_when_cupti_refuses() {
    for (env, why) in [
        (
            &[("RTRACE_SOURCE_COUNTERS", "1"), ("RTRACE_GPU_ACTIVITY", "1")][..],
            "source counters off: CUPTI refuses kernel activity records beside SASS metrics and PyTorch crashed with both (give -t cuda,resources,nvtx or leave -t out)",
        ),
        (
            &[("RTRACE_SOURCE_COUNTERS", "1"), ("RTRACE_PC_SAMPLING", "1")],
            "source counters off: PC sampling is on: CUPTI collects them by patching the kernels' code and counts nothing while PC sampling or the profiler holds the context",
        ),
        (
            &[
                ("RTRACE_SOURCE_COUNTERS", "1"),
                ("SIMCUPTI_SASS_METRICS", "unsupported"),
            ],
            "source counters off for device 0: cuptiSassMetricsSetConfig: CUPTI_ERROR_NOT_SUPPORTED (27)",
        ),
    ] {
        let t = run_profile(env);
        assert!(messages(&t).iter().any(|m| m == why), "{:?}", messages(&t));
        assert!(t.source_counters.is_empty() && t.source_counter_setups.is_empty());
    }
}
