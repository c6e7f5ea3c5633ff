//! PC sampling (CUPTI's PC Sampling API, `cupti_pcsampling.h`): how it was set up on each
//! context, and the samples read from it. Both are bincode values (variable length: a PC has
//! as many stall reasons as were sampled at it).

use serde::{Deserialize, Serialize};

/// PC sampling set up on one context (chunk kind 21), written when it is enabled.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcSamplingConfig {
    /// CUPTI's context id (as in GPU activity records).
    pub context: u32,
    /// Device ordinal of the context.
    pub device: u32,
    /// When sampling was enabled (the trace's host clock, ns).
    pub time_ns: u64,
    /// The sampling period: one sample every 2^`period_log2` cycles per SM.
    pub period_log2: u32,
    /// CUPTI's software and hardware buffer sizes, bytes.
    pub scratch_bytes: u64,
    pub hardware_bytes: u64,
    /// The stall reasons collected: CUPTI's index and name
    /// (`smsp__pcsamp_warps_issue_stalled_long_scoreboard`, ...).
    pub stall_reasons: Vec<(u32, String)>,
}

/// One read of a context's PC samples (chunk kind 22): `cuptiPCSamplingGetData`, or what CUPTI
/// left in the configuration buffer when sampling was disabled.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcSampleBatch {
    /// CUPTI's context id.
    pub context: u32,
    /// When it was read (the trace's host clock, ns).
    pub time_ns: u64,
    /// Samples taken since the last read: of every kernel and every stall reason, dropped ones
    /// included (CUPTI's `totalSamples`).
    pub total_samples: u64,
    /// Samples the hardware dropped (buffer overflow).
    pub dropped_samples: u64,
    /// Samples in kernels CUPTI gives no PC records for (the driver's own).
    pub non_user_samples: u64,
    /// CUPTI said its hardware buffer was full: samples were lost.
    pub hardware_buffer_full: bool,
    /// Function names, indexed by [`PcSample::function`].
    pub functions: Vec<String>,
    pub pcs: Vec<PcSample>,
}

/// Samples at one instruction.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcSample {
    /// `cuptiGetCubinCrc` of the module image (the `crc` of a module-image chunk).
    pub cubin_crc: u64,
    /// The instruction's offset from the start of its function, bytes.
    pub pc_offset: u64,
    /// Index into [`PcSampleBatch::functions`].
    pub function: u32,
    /// CUPTI's index of the function in its module.
    pub function_index: u32,
    /// `(stall reason index, samples)` for each reason sampled here.
    pub stalls: Vec<(u32, u32)>,
}
