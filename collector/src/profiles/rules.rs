//! Findings on a profiled kernel, with Nsight Compute's thresholds and formulas where it has
//! them (its rule files `SpeedOfLight_*`, `SharedMemoryConflicts`, `AchievedOccupancy`,
//! `CPIStall`), over the kernel's mean metric values. Each finding names the numbers behind
//! it and, where Nsight Compute gives one, an estimated local speedup (the share of the
//! kernel's time or work the issue costs). docs/cli.md, "Kernel profiles", lists every rule.

use crate::occupancy::{Limiter, Theoretical};
use std::collections::HashMap;

/// `max(compute, memory)` throughput at or above this (% of peak): the kernel drives that unit
/// hard (Nsight Compute's "high throughput").
pub const HIGH_THROUGHPUT_PCT: f64 = 80.0;
/// Compute and memory throughput both below this: a latency issue.
pub const LATENCY_BOUND_PCT: f64 = 60.0;
/// Bank conflicts at or above this share of shared-memory wavefronts.
pub const BANK_CONFLICT_SHARE: f64 = 0.10;
/// Theoretical minus achieved occupancy over this many points.
pub const OCCUPANCY_GAP_POINTS: f64 = 10.0;
/// A hit rate below this (%) when the kernel is memory-bound.
pub const LOW_HIT_RATE_PCT: f64 = 50.0;
/// The largest stall reason over this share of the cycles between issued instructions
/// (Nsight Compute's stall rules: over 30%)...
pub const DOMINANT_STALL_SHARE: f64 = 0.30;
/// ...and only while the schedulers issue in under this share of cycles (Nsight Compute's
/// stall rules: a kernel that issues nearly every cycle is not held back by stalls).
pub const STALL_ISSUE_BUSY_PCT: f64 = 80.0;
pub const ISSUE_BUSY: &str = "sm__inst_issued.avg.pct_of_peak_sustained_active";

pub const COMPUTE: &str = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
pub const MEMORY: &str = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed";
pub const ACHIEVED: &str = "sm__warps_active.avg.pct_of_peak_sustained_active";
pub const L1_HIT: &str = "l1tex__t_sector_hit_rate.pct";
pub const L2_HIT: &str = "lts__t_sector_hit_rate.pct";
pub const WARP_LATENCY: &str = "smsp__average_warp_latency_per_inst_issued.ratio";
const STALL_PREFIX: &str = "smsp__average_warps_issue_stalled_";
const STALL_SUFFIX: &str = "_per_issue_active.ratio";

/// One finding.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// The rule's name (`Bottleneck`, `SharedMemoryConflicts`, ...).
    pub rule: &'static str,
    /// What it found, for people.
    pub message: String,
    /// The numbers behind it, by name.
    pub numbers: Vec<(&'static str, f64)>,
    /// Estimated local speedup, %.
    pub speedup_pct: Option<f64>,
}

/// What the rules read: the kernel's mean value of each metric collected, and the
/// theoretical occupancy of its launch configuration where a device describes it.
pub struct Facts<'a> {
    pub means: &'a HashMap<String, f64>,
    pub theoretical: Option<&'a Theoretical>,
    pub block_size: u64,
    pub registers_per_thread: u32,
}

impl Facts<'_> {
    fn get(&self, name: &str) -> Option<f64> {
        self.means.get(name).copied().filter(|v| v.is_finite())
    }
}

/// Every rule's findings, in the order of the rules above.
pub fn findings(f: &Facts) -> Vec<Finding> {
    let mut out = Vec::new();
    out.extend(bottleneck(f));
    for (op, what) in [("ld", "loads"), ("st", "stores")] {
        out.extend(bank_conflicts(f, op, what));
    }
    out.extend(occupancy_gap(f));
    out.extend(hit_rates(f));
    out.extend(dominant_stall(f));
    out
}

/// (a) Which unit bounds the kernel, from the Speed Of Light throughputs.
fn bottleneck(f: &Facts) -> Option<Finding> {
    let (sm, mem) = (f.get(COMPUTE)?, f.get(MEMORY)?);
    let numbers = vec![("compute_pct", sm), ("memory_pct", mem)];
    let message = if sm.max(mem) >= HIGH_THROUGHPUT_PCT {
        let (unit, section) = if sm >= mem {
            ("compute", "Compute Workload Analysis")
        } else {
            ("memory", "Memory Workload Analysis")
        };
        format!(
            "{unit}-bound: compute throughput {sm:.2}%, memory {mem:.2}% of peak; \
             {HIGH_THROUGHPUT_PCT:.0}% or more is high throughput: see {section} for \
             the unit's busiest parts"
        )
    } else if sm < LATENCY_BOUND_PCT && mem < LATENCY_BOUND_PCT {
        format!(
            "latency-bound: compute throughput {sm:.2}% and memory {mem:.2}% of peak, both \
             under {LATENCY_BOUND_PCT:.0}%: warps wait more than they work; see Warp State \
             and Occupancy"
        )
    } else {
        return None;
    };
    Some(Finding {
        rule: "Bottleneck",
        message,
        numbers,
        speedup_pct: None,
    })
}

/// (b) Shared-memory bank conflicts of loads (`ld`) or stores (`st`).
fn bank_conflicts(f: &Facts, op: &str, what: &str) -> Option<Finding> {
    let wavefronts = f.get(&format!(
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum"
    ))?;
    let conflicts = f.get(&format!(
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}.sum"
    ))?;
    if wavefronts <= 0.0 || conflicts / wavefronts < BANK_CONFLICT_SHARE {
        return None;
    }
    let share = conflicts / wavefronts * 100.0;
    let ideal = wavefronts - conflicts;
    let n_way = if ideal > 0.0 {
        wavefronts / ideal
    } else {
        f64::INFINITY
    };
    Some(Finding {
        rule: "SharedMemoryConflicts",
        message: format!(
            "shared {what}: {conflicts:.0} bank conflicts in {wavefronts:.0} wavefronts, \
             {n_way:.2}-way on average; {share:.2}% of the wavefronts are spent on conflicts \
             (at least {:.0}% is a finding)",
            BANK_CONFLICT_SHARE * 100.0
        ),
        numbers: vec![
            ("wavefronts", wavefronts),
            ("conflicts", conflicts),
            ("n_way", n_way),
            ("wasted_pct", share),
        ],
        speedup_pct: Some(share),
    })
}

/// (c) Achieved occupancy more than [`OCCUPANCY_GAP_POINTS`] under the theoretical one.
fn occupancy_gap(f: &Facts) -> Option<Finding> {
    let achieved = f.get(ACHIEVED)?;
    let t = f.theoretical?;
    let theoretical = t.occupancy_percent.0 as f64 / 100.0;
    let gap = theoretical - achieved;
    if gap <= OCCUPANCY_GAP_POINTS || theoretical <= 0.0 {
        return None;
    }
    let limit = match t.limited_by() {
        None => "theoretical occupancy is 100%: the gap comes from imbalance between blocks or \
                 warps, or from too few blocks (a tail wave)"
            .to_string(),
        Some(by) => format!("theoretical occupancy is limited by {by}: {}", lift(f, t)),
    };
    Some(Finding {
        rule: "AchievedOccupancy",
        message: format!(
            "achieved occupancy {achieved:.2}% is {gap:.2} points under the theoretical \
             {theoretical:.2}% (over {OCCUPANCY_GAP_POINTS:.0} is a finding); {limit}"
        ),
        numbers: vec![
            ("theoretical_pct", theoretical),
            ("achieved_pct", achieved),
            ("gap_points", gap),
        ],
        speedup_pct: Some(gap / theoretical * 100.0),
    })
}

/// What lifts the theoretical occupancy, for its first limiter.
fn lift(f: &Facts, t: &Theoretical) -> String {
    match t.limiters.iter().find(|&&l| l != Limiter::Barriers) {
        Some(Limiter::Registers) => format!(
            "use fewer registers per thread (now {}; __launch_bounds__ or -maxrregcount)",
            f.registers_per_thread
        ),
        Some(Limiter::SharedMemory) => format!(
            "use less shared memory per block (now {} bytes allocated)",
            t.allocated_shared_memory_per_block
        ),
        Some(Limiter::Blocks) => format!(
            "use larger blocks (now {} threads; an SM holds at most {} blocks)",
            f.block_size, t.block_limit_sm
        ),
        Some(Limiter::Warps) | Some(Limiter::Barriers) | None => format!(
            "use a block size that divides the SM's {} warps (now {} threads)",
            t.max_warps_per_sm, f.block_size
        ),
    }
}

/// (d) Low L1/TEX or L2 hit rates when memory bounds the kernel.
fn hit_rates(f: &Facts) -> Vec<Finding> {
    let (Some(sm), Some(mem)) = (f.get(COMPUTE), f.get(MEMORY)) else {
        return Vec::new();
    };
    if mem < LATENCY_BOUND_PCT || mem < sm {
        return Vec::new();
    }
    [(L1_HIT, "L1/TEX"), (L2_HIT, "L2")]
        .into_iter()
        .filter_map(|(name, level)| {
            let hit = f.get(name)?;
            (hit < LOW_HIT_RATE_PCT).then(|| Finding {
                rule: "CacheHitRate",
                message: format!(
                    "{level} hit rate {hit:.2}% (under {LOW_HIT_RATE_PCT:.0}%) while memory \
                     bounds the kernel ({mem:.2}% of peak): most requests go to the next \
                     level; reuse data while it is cached or make accesses contiguous"
                ),
                numbers: vec![("hit_rate_pct", hit), ("memory_pct", mem)],
                speedup_pct: None,
            })
        })
        .collect()
}

/// (e) The stall reason that costs most of the cycles between issued instructions. Neither
/// `selected` nor `not_selected` counts: a warp in either was ready to issue (Nsight Compute's
/// stall rule leaves them out too; measured on the H100 against its output).
fn dominant_stall(f: &Facts) -> Option<Finding> {
    let latency = f.get(WARP_LATENCY).filter(|&v| v > 0.0)?;
    if f.get(ISSUE_BUSY)
        .is_some_and(|busy| busy >= STALL_ISSUE_BUSY_PCT)
    {
        return None;
    }
    let (reason, cycles) = f
        .means
        .iter()
        .filter_map(|(name, &v)| {
            let reason = name
                .strip_prefix(STALL_PREFIX)?
                .strip_suffix(STALL_SUFFIX)?;
            let stall = reason != "selected" && reason != "not_selected";
            (stall && v.is_finite()).then_some((reason, v))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.0.cmp(a.0)))?;
    let share = cycles / latency;
    if share <= DOMINANT_STALL_SHARE {
        return None;
    }
    Some(Finding {
        rule: "DominantStall",
        message: format!(
            "warps stall most on {reason}: {cycles:.2} of the {latency:.2} cycles between \
             issued instructions ({:.2}%; over {:.0}% is a finding)",
            share * 100.0,
            DOMINANT_STALL_SHARE * 100.0
        ),
        numbers: vec![
            ("stall_cycles", cycles),
            ("warp_cycles_per_issue", latency),
            ("share_pct", share * 100.0),
        ],
        speedup_pct: Some(share * 100.0),
    })
}
