//! Kernel profiling (CUPTI's range profiler, `cupti_range_profiler.h`): how it was set up on
//! each context, and each profiled launch's metric values with the raw counter data they were
//! evaluated from (so that a later reader can evaluate more metrics from the same counters,
//! with CUPTI's host API and the setup's chip). Both are bincode values.
//!
//! Why profiling is off (no permission, counters held by another tool, an unsupported
//! device, a launch CUPTI refused) is a [`Notice`](crate::Notice) whose message starts with
//! [`PROFILING_NOTICE`].

use serde::{Deserialize, Serialize};

/// The start of every notice about kernel profiling.
pub const PROFILING_NOTICE: &str = "kernel profiling";

/// How a profiled unit was replayed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Replay {
    /// Each chosen kernel replayed by CUPTI, device memory saved and restored between passes
    /// (auto range: one range per launch).
    #[default]
    Kernel,
    /// A range replayed by running the whole program once per pass.
    Application,
}

/// Kernel profiling set up on one context (chunk kind 23), written when it is enabled there.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfilerSetup {
    /// CUPTI's context id (as in GPU activity records).
    pub context: u32,
    /// Device ordinal of the context.
    pub device: u32,
    /// When profiling was enabled (the trace's host clock, ns).
    pub time_ns: u64,
    /// The chip CUPTI names (`GH100`): what the counter data is evaluated for.
    pub chip: String,
    /// The metrics evaluated, in the order of [`KernelProfile::values`].
    pub metrics: Vec<String>,
    /// Replay passes one profiled unit costs.
    pub passes: u32,
    pub replay: Replay,
}

/// One profiled kernel launch (chunk kind 24), or one profiled range in application replay.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelProfile {
    /// CUPTI's context id: the [`ProfilerSetup`] it was collected under.
    pub context: u32,
    /// The correlation id of the launch: the recorded runtime call that made it (such as
    /// `cudaLaunchKernel`), else the driver launch call; its kernel record carries the same id
    /// (the kernel record that has it is this launch); 0 for a range.
    pub correlation: u64,
    /// The launch's place among the kernels profiling chose, from 0.
    pub launch: u64,
    /// When profiling the launch started and ended (host clock, ns): the replay's cost.
    pub start_ns: u64,
    pub end_ns: u64,
    /// The kernel's name as the driver gives it (mangled), or the range's name.
    pub name: String,
    /// CUPTI's name for the range in the counter data.
    pub range: String,
    /// The setup's metrics' values; NaN where CUPTI could not evaluate one.
    pub values: Vec<f64>,
    /// The counter data image the values were evaluated from, as CUPTI decoded it: in kernel
    /// replay, the launch's own (one range); in application replay, one image holds every range
    /// of a context's run (`launch` is the range's index in it), kept with the run's first range
    /// only (empty in the others).
    pub counter_data: Vec<u8>,
}
