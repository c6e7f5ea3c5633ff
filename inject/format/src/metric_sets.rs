//! The named metric sets: Nsight Compute's sections by their identifiers, each with the
//! metrics its section file reads (Nsight Compute's formulas, docs/cli.md#rtrace-metrics), as
//! CUPTI's Perfworks names. Every metric here is accepted by CUPTI 13.0's host API for GH100
//! (collector/tests/metrics.rs checks it); a chip that lacks one (GA100 has no `gmma` stall) lists it as
//! not available there.
//!
//! Both sides read them: the library expands `RTRACE_METRICS` with them, the collector lists
//! them (`rtrace metrics`) and lays its report out by them.

/// One metric of a set: CUPTI's name, and the label Nsight Compute shows for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    pub name: &'static str,
    pub label: &'static str,
}

/// A named set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Set {
    /// Nsight Compute's section identifier (`--section NAME`).
    pub name: &'static str,
    /// What it tells.
    pub about: &'static str,
    pub metrics: &'static [Metric],
}

const fn m(name: &'static str, label: &'static str) -> Metric {
    Metric { name, label }
}

/// The sets, in Nsight Compute's order.
pub const SETS: &[Set] = &[
    Set {
        name: "SpeedOfLight",
        about: "GPU Speed Of Light Throughput: compute and memory use against the peak",
        metrics: &[
            m("sm__throughput.avg.pct_of_peak_sustained_elapsed", "Compute (SM) Throughput %"),
            m(
                "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                "Memory Throughput %",
            ),
            m("l1tex__throughput.avg.pct_of_peak_sustained_active", "L1/TEX Cache Throughput %"),
            m("lts__throughput.avg.pct_of_peak_sustained_elapsed", "L2 Cache Throughput %"),
            m("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "DRAM Throughput %"),
            m("gpu__time_duration.sum", "Duration"),
            m("gpc__cycles_elapsed.max", "Elapsed Cycles"),
            m("sm__cycles_active.avg", "SM Active Cycles"),
            m("gpc__cycles_elapsed.avg.per_second", "SM Frequency"),
            m("dram__cycles_elapsed.avg.per_second", "DRAM Frequency"),
        ],
    },
    Set {
        name: "MemoryWorkloadAnalysis",
        about: "Memory Workload Analysis: bytes and throughput per level, hit rates, shared-memory bank conflicts",
        metrics: &[
            m("dram__bytes.sum.per_second", "Memory Throughput"),
            m("l1tex__t_sector_hit_rate.pct", "L1/TEX Hit Rate %"),
            m("lts__t_sector_hit_rate.pct", "L2 Hit Rate %"),
            m(
                "gpu__compute_memory_request_throughput.avg.pct_of_peak_sustained_elapsed",
                "Mem Busy %",
            ),
            m(
                "gpu__compute_memory_access_throughput.avg.pct_of_peak_sustained_elapsed",
                "Max Bandwidth %",
            ),
            m("sm__memory_throughput.avg.pct_of_peak_sustained_active", "Mem Pipes Busy %"),
            m("l1tex__t_bytes.sum", "L1/TEX bytes"),
            m("lts__t_bytes.sum", "L2 bytes"),
            m("dram__bytes_read.sum", "DRAM bytes read"),
            m("dram__bytes_write.sum", "DRAM bytes written"),
            m(
                "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                "Shared load wavefronts",
            ),
            m(
                "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                "Shared load bank conflicts",
            ),
            m(
                "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
                "Shared store wavefronts",
            ),
            m(
                "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
                "Shared store bank conflicts",
            ),
        ],
    },
    Set {
        name: "ComputeWorkloadAnalysis",
        about: "Compute Workload Analysis: executed and issued IPC, SM busy, pipe utilization",
        metrics: &[
            m("sm__inst_executed.avg.per_cycle_elapsed", "Executed Ipc Elapsed"),
            m("sm__inst_executed.avg.per_cycle_active", "Executed Ipc Active"),
            m("sm__inst_issued.avg.per_cycle_active", "Issued Ipc Active"),
            m("sm__inst_issued.avg.pct_of_peak_sustained_active", "Issue Slots Busy %"),
            m("sm__instruction_throughput.avg.pct_of_peak_sustained_active", "SM Busy %"),
            m("sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active", "ALU pipe %"),
            m("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", "FMA pipe %"),
            m("sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active", "FP64 pipe %"),
            m("sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active", "Shared pipe %"),
            m("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "Tensor pipe %"),
            m("sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active", "LSU pipe %"),
            m("sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active", "XU pipe %"),
        ],
    },
    Set {
        name: "Occupancy",
        about: "Occupancy: achieved (the theoretical figures come from the launch, as in rtrace report)",
        metrics: &[
            m("sm__warps_active.avg.pct_of_peak_sustained_active", "Achieved Occupancy %"),
            m("sm__warps_active.avg.per_cycle_active", "Achieved Active Warps Per SM"),
        ],
    },
    Set {
        name: "WarpStateStats",
        about: "Warp State Statistics: cycles between issued instructions, by stall reason",
        metrics: &[
            m(
                "smsp__average_warp_latency_per_inst_issued.ratio",
                "Warp Cycles Per Issued Instruction",
            ),
            m("smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", "Stall Barrier"),
            m(
                "smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio",
                "Stall Branch Resolving",
            ),
            m(
                "smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio",
                "Stall Dispatch",
            ),
            m("smsp__average_warps_issue_stalled_drain_per_issue_active.ratio", "Stall Drain"),
            m("smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio", "Stall GMMA"),
            m(
                "smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio",
                "Stall IMC Miss",
            ),
            m(
                "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio",
                "Stall LG Throttle",
            ),
            m(
                "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
                "Stall Long Scoreboard",
            ),
            m(
                "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio",
                "Stall Math Pipe Throttle",
            ),
            m("smsp__average_warps_issue_stalled_membar_per_issue_active.ratio", "Stall Membar"),
            m(
                "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio",
                "Stall MIO Throttle",
            ),
            m("smsp__average_warps_issue_stalled_misc_per_issue_active.ratio", "Stall Misc"),
            m(
                "smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio",
                "Stall No Instruction",
            ),
            m(
                "smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio",
                "Stall Not Selected",
            ),
            m("smsp__average_warps_issue_stalled_selected_per_issue_active.ratio", "Selected"),
            m(
                "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio",
                "Stall Short Scoreboard",
            ),
            m(
                "smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio",
                "Stall Sleeping",
            ),
            m(
                "smsp__average_warps_issue_stalled_tex_throttle_per_issue_active.ratio",
                "Stall Tex Throttle",
            ),
            m("smsp__average_warps_issue_stalled_wait_per_issue_active.ratio", "Stall Wait"),
        ],
    },
    Set {
        name: "InstructionStats",
        about: "Instruction Statistics: instructions executed and issued, per warp and thread",
        metrics: &[
            m("smsp__inst_executed.sum", "Executed Instructions"),
            m("smsp__inst_issued.sum", "Issued Instructions"),
            m("smsp__inst_executed.avg.per_cycle_active", "Executed Ipc Active per SMSP"),
            m("smsp__thread_inst_executed.sum", "Thread Instructions Executed"),
            m(
                "smsp__thread_inst_executed_pred_on.sum",
                "Thread Instructions Executed (predicate on)",
            ),
            m(
                "smsp__thread_inst_executed_per_inst_executed.ratio",
                "Avg. Threads Executed per Instruction",
            ),
        ],
    },
];

/// The set of that name (exactly, or in any case).
pub fn find(name: &str) -> Option<&'static Set> {
    SETS.iter().find(|s| s.name.eq_ignore_ascii_case(name))
}

/// One metric of a choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    /// The set it came from; `None` for a metric named by itself.
    pub set: Option<&'static str>,
    /// CUPTI's name.
    pub name: String,
    /// Nsight Compute's label (empty for a metric named by itself).
    pub label: &'static str,
}

/// The metrics a LIST names, each once, before any chip is asked: set names expand to their
/// metrics; a name with `__` is a raw metric name; anything else is an error naming it.
pub fn resolve(list: &str) -> Result<Vec<Chosen>, String> {
    let mut out: Vec<Chosen> = Vec::new();
    let mut push = |c: Chosen| {
        if !out.iter().any(|o| o.name == c.name) {
            out.push(c);
        }
    };
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if let Some(set) = find(item) {
            for m in set.metrics {
                push(Chosen {
                    set: Some(set.name),
                    name: m.name.to_string(),
                    label: m.label,
                });
            }
        } else if item.contains("__") {
            push(Chosen {
                set: None,
                name: item.to_string(),
                label: "",
            });
        } else {
            let names: Vec<&str> = SETS.iter().map(|s| s.name).collect();
            return Err(format!(
                "unknown set or metric '{item}'; sets: {}; a metric is named like \
                 sm__throughput.avg.pct_of_peak_sustained_elapsed",
                names.join(", ")
            ));
        }
    }
    if out.is_empty() {
        return Err("no set or metric named".to_string());
    }
    Ok(out)
}
