//! The rules at their thresholds: each fires just past its threshold and not just before.

use super::rules::*;
use crate::gpu_summary::Hundredths;
use crate::occupancy::{Limiter, Theoretical};
use std::collections::HashMap;

fn means(pairs: &[(&str, f64)]) -> HashMap<String, f64> {
    pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect()
}

fn run(pairs: &[(&str, f64)], theoretical: Option<&Theoretical>) -> Vec<Finding> {
    findings(&Facts {
        means: &means(pairs),
        theoretical,
        block_size: 96,
        registers_per_thread: 128,
    })
}

fn rules(f: &[Finding]) -> Vec<&str> {
    f.iter().map(|f| f.rule).collect()
}

#[test]
fn bottleneck_at_80_and_60() {
    let f = run(&[(COMPUTE, 80.0), (MEMORY, 10.0)], None);
    assert_eq!(rules(&f), ["Bottleneck"]);
    assert!(f[0]
        .message
        .starts_with("compute-bound: compute throughput 80.00%, memory 10.00%"));
    assert_eq!(f[0].numbers, [("compute_pct", 80.0), ("memory_pct", 10.0)]);
    let f = run(&[(COMPUTE, 10.0), (MEMORY, 95.0)], None);
    assert!(
        f[0].message.starts_with("memory-bound:"),
        "{}",
        f[0].message
    );
    // Between 60 and 80: nothing.
    assert!(run(&[(COMPUTE, 79.99), (MEMORY, 60.0)], None).is_empty());
    // Both under 60: latency.
    let f = run(&[(COMPUTE, 59.99), (MEMORY, 59.99)], None);
    assert!(
        f[0].message.starts_with("latency-bound:"),
        "{}",
        f[0].message
    );
    assert_eq!(f[0].speedup_pct, None);
    // Without both throughputs, no verdict.
    assert!(run(&[(COMPUTE, 10.0)], None).is_empty());
}

#[test]
fn bank_conflicts_at_ten_percent() {
    let ld = |w: f64, c: f64| {
        run(
            &[
                ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", w),
                (
                    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                    c,
                ),
            ],
            None,
        )
    };
    assert!(ld(1000.0, 99.0).is_empty());
    assert!(ld(0.0, 0.0).is_empty());
    let f = ld(1000.0, 100.0);
    assert_eq!(rules(&f), ["SharedMemoryConflicts"]);
    assert_eq!(
        f[0].message,
        "shared loads: 100 bank conflicts in 1000 wavefronts, 1.11-way on average; 10.00% of \
         the wavefronts are spent on conflicts (at least 10% is a finding)"
    );
    assert_eq!(f[0].speedup_pct, Some(10.0));
    // 4-way: 3 of every 4 wavefronts are conflicts.
    let f = ld(4000.0, 3000.0);
    assert_eq!(f[0].numbers[2], ("n_way", 4.0));
    assert_eq!(f[0].numbers[3], ("wasted_pct", 75.0));
    let st = run(
        &[
            ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", 10.0),
            (
                "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
                5.0,
            ),
        ],
        None,
    );
    assert!(st[0]
        .message
        .starts_with("shared stores: 5 bank conflicts in 10 wavefronts, 2.00-way"));
}

fn theoretical(percent: u64, limiters: Vec<Limiter>) -> Theoretical {
    Theoretical {
        shared_memory_configuration: 0,
        allocated_registers_per_block: 0,
        allocated_shared_memory_per_block: 0,
        block_limit_registers: None,
        block_limit_shared_memory: None,
        block_limit_warps: 21,
        block_limit_sm: 32,
        block_limit_barriers: None,
        active_blocks_per_sm: 5,
        warps_per_block: 3,
        active_warps_per_sm: (percent * 64 / 100) as u32,
        max_warps_per_sm: 64,
        occupancy_percent: Hundredths(percent * 100),
        waves_per_sm: None,
        limiters,
    }
}

#[test]
fn occupancy_gap_over_ten_points() {
    let t = theoretical(50, vec![Limiter::Registers]);
    assert!(run(&[(ACHIEVED, 40.0)], Some(&t)).is_empty());
    assert!(run(&[(ACHIEVED, 40.0)], None).is_empty());
    let f = run(&[(ACHIEVED, 39.0)], Some(&t));
    assert_eq!(rules(&f), ["AchievedOccupancy"]);
    assert_eq!(
        f[0].message,
        "achieved occupancy 39.00% is 11.00 points under the theoretical 50.00% (over 10 is a \
         finding); theoretical occupancy is limited by registers: use fewer registers per \
         thread (now 128; __launch_bounds__ or -maxrregcount)"
    );
    assert_eq!(f[0].speedup_pct, Some(22.0));
    let t = theoretical(50, vec![Limiter::Blocks]);
    let f = run(&[(ACHIEVED, 20.0)], Some(&t));
    assert!(
        f[0].message
            .ends_with("use larger blocks (now 96 threads; an SM holds at most 32 blocks)"),
        "{}",
        f[0].message
    );
    let t = theoretical(100, vec![Limiter::Warps]);
    let f = run(&[(ACHIEVED, 50.0)], Some(&t));
    assert!(
        f[0].message.contains("theoretical occupancy is 100%"),
        "{}",
        f[0].message
    );
}

#[test]
fn hit_rates_only_when_memory_bound() {
    let base = [
        (COMPUTE, 20.0),
        (MEMORY, 60.0),
        (L1_HIT, 49.99),
        (L2_HIT, 50.0),
    ];
    let f = run(&base, None);
    assert_eq!(rules(&f), ["CacheHitRate"]);
    assert!(f[0]
        .message
        .starts_with("L1/TEX hit rate 49.99% (under 50%)"));
    // Memory under 60%, or under compute: not memory-bound.
    let f = run(&[(COMPUTE, 20.0), (MEMORY, 59.0), (L1_HIT, 1.0)], None);
    assert_eq!(rules(&f), ["Bottleneck"]);
    let f = run(&[(COMPUTE, 70.0), (MEMORY, 65.0), (L1_HIT, 1.0)], None);
    assert!(f.is_empty());
}

#[test]
fn dominant_stall_over_thirty_percent_while_issue_is_not_busy() {
    let stall =
        |reason: &str| format!("smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio");
    let (long, mio, selected, not_selected) = (
        stall("long_scoreboard"),
        stall("mio_throttle"),
        stall("selected"),
        stall("not_selected"),
    );
    // Neither `selected` nor `not_selected` is a stall.
    let f = run(
        &[
            (WARP_LATENCY, 10.0),
            (&long, 3.0),
            (&mio, 1.0),
            (&selected, 5.0),
            (&not_selected, 6.0),
        ],
        None,
    );
    assert!(f.is_empty(), "{f:?}");
    let f = run(&[(WARP_LATENCY, 10.0), (&long, 3.01), (&mio, 1.0)], None);
    assert_eq!(rules(&f), ["DominantStall"]);
    assert_eq!(
        f[0].message,
        "warps stall most on long_scoreboard: 3.01 of the 10.00 cycles between issued \
         instructions (30.10%; over 30% is a finding)"
    );
    assert_eq!(f[0].speedup_pct, Some(30.099999999999998));
    assert!(run(&[(WARP_LATENCY, 0.0), (&long, 3.01)], None).is_empty());
    // A kernel whose schedulers issue in 80% of cycles or more is not held back by stalls.
    let busy = "sm__inst_issued.avg.pct_of_peak_sustained_active";
    assert!(run(&[(WARP_LATENCY, 10.0), (&long, 5.0), (busy, 80.0)], None).is_empty());
    let f = run(&[(WARP_LATENCY, 10.0), (&long, 5.0), (busy, 79.9)], None);
    assert_eq!(rules(&f), ["DominantStall"]);
}

/// A trace without profiles, set-ups or profiling notices has no part, and the rest of its
/// report is byte for byte the report of the same trace with them.
#[test]
fn the_part_is_absent_without_profiles_and_changes_nothing_else() {
    use crate::output::{render, Format, RenderOptions, Section};
    use crate::report::Sections;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/profiles.bin");
    let with = crate::load_trace(&path).unwrap();
    let mut without = with.clone();
    without.kernel_profiles.clear();
    without.profiler_setups.clear();
    without
        .notices
        .retain(|n| !n.message.starts_with(rtrace_format::PROFILING_NOTICE));
    let (with, without) = ([with], [without]);
    let (s_with, s_without) = (Sections::of(&with), Sections::of(&without));
    assert!(
        render(&with, &s_with, &RenderOptions::default()).contains("\nKernel profiles: 3 launches")
    );
    assert_eq!(s_with.profiles.kernels.len(), 2);
    assert!(s_without.profiles.is_empty());
    for (format, section) in [
        (Format::Table, Section::Api),
        (Format::Json, Section::Api),
        (Format::Csv, Section::Kernels),
        (Format::Csv, Section::Profiles),
    ] {
        let options = RenderOptions {
            format,
            // Table and JSON: every section.
            sections: if format == Format::Csv {
                vec![section]
            } else {
                Vec::new()
            },
            ..RenderOptions::default()
        };
        let plain = render(&without, &s_without, &options);
        assert!(!plain.contains("Kernel profiles") && !plain.contains("kernel_profiles"));
        // Every other section is what it is without the profiles and set-ups (the notice
        // kept: the process section lists every notice).
        let masked = |t: &[crate::Trace]| Sections {
            profiles: Default::default(),
            ..Sections::of(t)
        };
        let mut notices_kept = without.clone();
        notices_kept[0].notices = with[0].notices.clone();
        assert_eq!(
            render(&with, &masked(&with), &options),
            render(&notices_kept, &masked(&notices_kept), &options),
            "{format:?} {section:?}"
        );
    }
    let csv = render(
        &without,
        &s_without,
        &RenderOptions {
            format: Format::Csv,
            sections: vec![Section::Profiles],
            ..RenderOptions::default()
        },
    );
    assert_eq!(
        csv,
        "kernel,section,metric,label,unit,launches,mean,min,max\n"
    );
}
