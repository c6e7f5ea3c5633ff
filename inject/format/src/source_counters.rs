//! Source counters (CUPTI's SASS Metric API, `cupti_sass_metrics.h`): for each kernel launch the
//! kernel controls chose, how often each SASS instruction ran and what it moved, as Nsight
//! Compute's Source page counts them. Both chunks are bincode values.
//!
//! An instruction is named as PC sampling names it: the CRC of its module image
//! (`cuptiGetCubinCrc`, the `crc` of a [`ModuleImage`](crate::ModuleImage) chunk), its function
//! and its offset from the function's start. Why source counters are off or partial is a
//! [`Notice`](crate::Notice) whose message starts with [`SOURCE_COUNTERS_NOTICE`].

use serde::{Deserialize, Serialize};

/// The start of every notice about source counters.
pub const SOURCE_COUNTERS_NOTICE: &str = "source counters";

/// Why source counters go with neither PC sampling nor kernel profiling.
pub const SOURCE_COUNTERS_EXCLUSIVE: &str =
    "CUPTI collects them by patching the kernels' code and counts nothing while PC sampling or the profiler holds the context";

/// Why GPU activity of `kinds` cannot run beside source counters (`None`: it can). Kernel
/// records cannot: once SASS metrics are enabled CUPTI refuses kernel activity
/// (`CUPTI_ERROR_NOT_COMPATIBLE`), and PyTorch crashed with both on (SIGSEGV;
/// tests/gpu/sassmetrics_probe.sh on an H100). Resources (modules and their images, which
/// source counters need) can.
pub fn source_counters_activity_conflict(kinds: &crate::env::GpuKinds) -> Option<&'static str> {
    kinds.kernel.then_some(
        "CUPTI refuses kernel activity records beside SASS metrics and PyTorch crashed with both (give -t cuda,resources,nvtx or leave -t out)",
    )
}

/// One counter: its short name (the JSON key and the CSV column), the CUPTI SASS metrics that
/// give it (the first the chip lists is collected; GH100 lists these, tests/gpu/
/// sassmetrics_probe.sh), and its name in Nsight Compute's Source page (the same values per
/// instruction, measured on an H100).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counter {
    pub key: &'static str,
    pub metrics: &'static [&'static str],
    pub ncu_column: &'static str,
}

/// Number of counters per instruction.
pub const COUNTER_COUNT: usize = 7;

/// The counters, in the order of [`InstructionCounters::values`].
pub const COUNTERS: [Counter; COUNTER_COUNT] = [
    Counter {
        key: "inst_executed",
        metrics: &["smsp__sass_inst_executed"],
        ncu_column: "Instructions Executed",
    },
    Counter {
        key: "thread_inst_executed",
        metrics: &["smsp__sass_thread_inst_executed_pred_on"],
        ncu_column: "Predicated-On Thread Instructions Executed",
    },
    Counter {
        key: "global_sectors",
        metrics: &["smsp__sass_sectors_mem_global"],
        ncu_column: "L2 Theoretical Sectors Global",
    },
    Counter {
        key: "global_sectors_ideal",
        metrics: &["smsp__sass_sectors_mem_global_ideal"],
        ncu_column: "L2 Theoretical Sectors Global Ideal",
    },
    Counter {
        key: "shared_wavefronts",
        metrics: &["smsp__sass_l1tex_pipe_lsu_wavefronts_mem_shared"],
        ncu_column: "L1 Wavefronts Shared",
    },
    Counter {
        key: "shared_wavefronts_ideal",
        metrics: &["smsp__sass_l1tex_pipe_lsu_wavefronts_mem_shared_ideal"],
        ncu_column: "L1 Wavefronts Shared Ideal",
    },
    Counter {
        key: "divergent_branch_targets",
        metrics: &["smsp__sass_branch_targets_threads_divergent"],
        ncu_column: "Divergent Branches",
    },
];

/// Indices into [`InstructionCounters::values`].
pub const INST_EXECUTED: usize = 0;
pub const THREAD_INST_EXECUTED: usize = 1;
pub const GLOBAL_SECTORS: usize = 2;
pub const GLOBAL_SECTORS_IDEAL: usize = 3;
pub const SHARED_WAVEFRONTS: usize = 4;
pub const SHARED_WAVEFRONTS_IDEAL: usize = 5;
pub const DIVERGENT_BRANCH_TARGETS: usize = 6;

/// Source counters set up on one context (chunk kind 40), written when its first chosen launch
/// is collected.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceCounterSetup {
    /// CUPTI's context id (as in GPU activity records).
    pub context: u32,
    /// Device ordinal of the context.
    pub device: u32,
    /// When it was set up (the trace's host clock, ns).
    pub time_ns: u64,
    /// The chip CUPTI names (`GH100`).
    pub chip: String,
    /// For each of [`COUNTERS`], the CUPTI metric collected (empty: the chip lists none of its
    /// metrics; its values are then 0).
    pub metrics: Vec<String>,
    /// CUPTI patched only the launched function (`enableLazyPatching`), not its whole module.
    pub lazy_patching: bool,
}

/// One chosen launch's counters (chunk kind 41).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceCounterLaunch {
    /// CUPTI's context id: the [`SourceCounterSetup`] it was collected under.
    pub context: u32,
    /// The correlation id of the launch, as [`crate::KernelProfile::correlation`]'s.
    pub correlation: u64,
    /// The launch's place among the launches the kernel controls chose, from 0.
    pub launch: u64,
    /// When collecting the launch started and ended (host clock, ns): patching, the launch,
    /// the synchronizations and the flush.
    pub start_ns: u64,
    pub end_ns: u64,
    /// The kernel's name as the driver gives it (mangled).
    pub name: String,
    /// CUPTI's records by function (the launched one; with patching of whole modules, others
    /// of its module with zero counts are left out).
    pub functions: Vec<SourceCounterFunction>,
    /// Records CUPTI dropped when collection was disabled (`numOfDroppedRecords`).
    pub dropped: u64,
}

/// One function's instructions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceCounterFunction {
    /// `cuptiGetCubinCrc` of the module image.
    pub cubin_crc: u64,
    /// CUPTI's index of the function in its module.
    pub function_index: u32,
    /// Its name (mangled), as CUPTI gives it.
    pub name: String,
    /// Its instructions, by offset.
    pub instructions: Vec<InstructionCounters>,
}

/// The counters of one instruction.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstructionCounters {
    /// Offset from the start of the function, bytes.
    pub pc_offset: u64,
    /// In the order of [`COUNTERS`], summed over CUPTI's instances (SMs).
    pub values: [u64; COUNTER_COUNT],
}
