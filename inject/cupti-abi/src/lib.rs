//! CUPTI 13.0's profiling ABI: the parameter structures of `cupti_profiler_host.h` (metrics
//! and configurations from a chip name, evaluation of counter data), `cupti_profiler_target.h`
//! and `cupti_target.h` (the device side: initialization, chip name, counter availability,
//! support), `cupti_range_profiler.h` (collection) and `cupti_pmsampling.h` (PM sampling:
//! `pm_sampling.rs`), laid out as the headers lay them out, with the result and enum values.
//!
//! Every structure is declared once here, through [`params!`], which also gives it `SIZE`
//! (`CUPTI_PROFILER_STRUCT_SIZE(type, last field)`: up to and including the last field,
//! without tail padding), `new()` (every field zero or null, `struct_size` set) and `FIELDS`
//! (each field's name, offset and size: `tests/headers.rs` compares every structure with its
//! header's, member by member, compiled with `g++` against `$CUDA_INCLUDE`). The
//! library, the collector and the simulated CUPTI all use these: none declares its own copy.
//! Nothing here calls anything, so there is no `unsafe` in this crate.
#![deny(unsafe_code)]

use std::ffi::{c_char, c_void};

/// `CUptiResult`.
pub type CuptiResult = u32;
/// `CUPTI_SUCCESS`.
pub const SUCCESS: CuptiResult = 0;
/// `CUPTI_ERROR_INVALID_PARAMETER`.
pub const ERROR_INVALID_PARAMETER: CuptiResult = 1;
/// `CUPTI_ERROR_INVALID_CONTEXT`.
pub const ERROR_INVALID_CONTEXT: CuptiResult = 3;
/// `CUPTI_ERROR_INVALID_OPERATION`.
pub const ERROR_INVALID_OPERATION: CuptiResult = 7;
/// `CUPTI_ERROR_NOT_INITIALIZED`.
pub const ERROR_NOT_INITIALIZED: CuptiResult = 15;
/// `CUPTI_ERROR_NOT_COMPATIBLE`.
pub const ERROR_NOT_COMPATIBLE: CuptiResult = 14;
/// `CUPTI_ERROR_INSUFFICIENT_PRIVILEGES`.
pub const ERROR_INSUFFICIENT_PRIVILEGES: CuptiResult = 35;
/// `CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED`.
pub const ERROR_OLD_PROFILER_API_INITIALIZED: CuptiResult = 36;
/// `CUPTI_ERROR_NOT_SUPPORTED`.
pub const ERROR_NOT_SUPPORTED: CuptiResult = 27;
/// `CUPTI_ERROR_UNKNOWN`.
pub const ERROR_UNKNOWN: CuptiResult = 999;

/// `CUpti_MetricType`.
pub const METRIC_TYPE_COUNTER: u32 = 0;
pub const METRIC_TYPE_RATIO: u32 = 1;
pub const METRIC_TYPE_THROUGHPUT: u32 = 2;
/// The metric types with their names, in CUPTI's order.
pub const METRIC_TYPES: [(u32, &str); 3] = [
    (METRIC_TYPE_COUNTER, "counter"),
    (METRIC_TYPE_RATIO, "ratio"),
    (METRIC_TYPE_THROUGHPUT, "throughput"),
];

/// `CUpti_ProfilerType`.
pub const PROFILER_TYPE_RANGE_PROFILER: u32 = 0;
pub const PROFILER_TYPE_PM_SAMPLING: u32 = 1;

/// `CUpti_ProfilerRange`.
pub const AUTO_RANGE: u32 = 1;
pub const USER_RANGE: u32 = 2;

/// `CUpti_ProfilerReplayMode`.
pub const APPLICATION_REPLAY: u32 = 1;
pub const KERNEL_REPLAY: u32 = 2;
pub const USER_REPLAY: u32 = 3;

/// `CUpti_Profiler_Support_Level`.
pub const SUPPORT_UNKNOWN: u32 = 0;
pub const SUPPORT_UNSUPPORTED: u32 = 1;
pub const SUPPORT_DISABLED: u32 = 2;
pub const SUPPORT_SUPPORTED: u32 = 3;

/// `CUpti_Profiler_API`: range profiling.
pub const PROFILER_API_RANGE_PROFILING: u32 = 0;

/// A CUPTI entry point taking one parameter structure.
pub type Call<P> = unsafe extern "C" fn(*mut P) -> CuptiResult;

/// The zero of a field type: what `new()` fills fields with.
pub trait Zero {
    fn zero() -> Self;
}

macro_rules! zero_is {
    ($z:expr; $($t:ty),*) => { $(impl<T> Zero for $t { fn zero() -> Self { $z } })* };
}
macro_rules! zero_is_default {
    ($($t:ty),*) => { $(impl Zero for $t { fn zero() -> Self { 0 } })* };
}
zero_is_default!(u8, u16, u32, u64, usize, i32);
zero_is!(std::ptr::null(); *const T);
zero_is!(std::ptr::null_mut(); *mut T);

/// The size of the field `_` reads (for [`params!`]).
const fn size_of_field<T, F>(_: fn(&T) -> &F) -> usize {
    std::mem::size_of::<F>()
}

/// Declares a parameter structure: `#[repr(C)]`, its first fields `struct_size` and `p_priv`
/// as every CUPTI profiling structure has them, then the listed ones; `SIZE` up to the last.
macro_rules! params {
    ($(#[$doc:meta])* $name:ident { $($field:ident: $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[repr(C)]
        #[derive(Debug)]
        pub struct $name {
            pub struct_size: usize,
            pub p_priv: *mut std::ffi::c_void,
            $(pub $field: $ty),*
        }

        impl $name {
            /// `CUPTI_PROFILER_STRUCT_SIZE` of the structure.
            pub const SIZE: usize = params!(@size $name; struct_size, p_priv $(, $field)*);

            /// Each field's name, offset and size, in declaration order (`tests/headers.rs`
            /// compares them with the header's).
            pub const FIELDS: &'static [(&'static str, usize, usize)] = &[
                (
                    "struct_size",
                    std::mem::offset_of!($name, struct_size),
                    $crate::size_of_field(|p: &$name| &p.struct_size),
                ),
                (
                    "p_priv",
                    std::mem::offset_of!($name, p_priv),
                    $crate::size_of_field(|p: &$name| &p.p_priv),
                ),
                $((
                    stringify!($field),
                    std::mem::offset_of!($name, $field),
                    $crate::size_of_field(|p: &$name| &p.$field),
                )),*
            ];

            /// Every field zero or null, `struct_size` set to [`Self::SIZE`].
            pub fn new() -> $name {
                $name {
                    struct_size: Self::SIZE,
                    p_priv: std::ptr::null_mut(),
                    $($field: $crate::Zero::zero()),*
                }
            }
        }

        impl Default for $name {
            fn default() -> $name {
                $name::new()
            }
        }
    };
    (@size $name:ident; $($field:ident),*) => {
        params!(@last $name; $($field),*)
    };
    (@last $name:ident; $last:ident) => {{
        std::mem::offset_of!($name, $last) + $crate::size_of_field(|p: &$name| &p.$last)
    }};
    (@last $name:ident; $first:ident, $($rest:ident),+) => {
        params!(@last $name; $($rest),+)
    };
}

// ---- cupti_profiler_host.h -------------------------------------------------------------

params!(
    /// `CUpti_Profiler_Host_Initialize_Params`.
    HostInitialize {
        profiler_type: u32,
        chip_name: *const c_char,
        counter_availability_image: *const u8,
        host_object: *mut c_void,
    }
);
params!(
    /// `CUpti_Profiler_Host_Deinitialize_Params`.
    HostDeinitialize { host_object: *mut c_void }
);
params!(
    /// `CUpti_Profiler_Host_GetSupportedChips_Params`.
    HostGetSupportedChips {
        num_chips: usize,
        chip_names: *const *const c_char,
    }
);
params!(
    /// `CUpti_Profiler_Host_GetBaseMetrics_Params`.
    HostGetBaseMetrics {
        host_object: *mut c_void,
        metric_type: u32,
        metric_names: *mut *const c_char,
        num_metrics: usize,
    }
);
params!(
    /// `CUpti_Profiler_Host_GetMetricProperties_Params`.
    HostGetMetricProperties {
        host_object: *mut c_void,
        metric_name: *const c_char,
        description: *const c_char,
        hw_unit: *const c_char,
        dim_unit: *const c_char,
        metric_type: u32,
    }
);
params!(
    /// `CUpti_Profiler_Host_GetRangeName_Params`.
    HostGetRangeName {
        counter_data_image: *const u8,
        counter_data_image_size: usize,
        range_index: usize,
        delimiter: *const c_char,
        range_name: *const c_char,
    }
);
params!(
    /// `CUpti_Profiler_Host_EvaluateToGpuValues_Params`.
    HostEvaluateToGpuValues {
        host_object: *mut c_void,
        counter_data_image: *const u8,
        counter_data_image_size: usize,
        range_index: usize,
        metric_names: *const *const c_char,
        num_metrics: usize,
        metric_values: *mut f64,
    }
);
params!(
    /// `CUpti_Profiler_Host_ConfigAddMetrics_Params`.
    HostConfigAddMetrics {
        host_object: *mut c_void,
        metric_names: *const *const c_char,
        num_metrics: usize,
    }
);
params!(
    /// `CUpti_Profiler_Host_GetConfigImageSize_Params`.
    HostGetConfigImageSize {
        host_object: *mut c_void,
        config_image_size: usize,
    }
);
params!(
    /// `CUpti_Profiler_Host_GetConfigImage_Params`.
    HostGetConfigImage {
        host_object: *mut c_void,
        config_image_size: usize,
        config_image: *mut u8,
    }
);
params!(
    /// `CUpti_Profiler_Host_GetNumOfPasses_Params`.
    HostGetNumOfPasses {
        config_image_size: usize,
        config_image: *mut u8,
        num_of_passes: usize,
    }
);

// ---- cupti_profiler_target.h, cupti_target.h ------------------------------------------

params!(
    /// `CUpti_Profiler_Initialize_Params`.
    ProfilerInitialize {}
);
params!(
    /// `CUpti_Profiler_DeInitialize_Params`.
    ProfilerDeInitialize {}
);
params!(
    /// `CUpti_Profiler_GetCounterAvailability_Params`.
    GetCounterAvailability {
        ctx: *mut c_void,
        counter_availability_image_size: usize,
        counter_availability_image: *mut u8,
    }
);
params!(
    /// `CUpti_Profiler_DeviceSupported_Params`.
    DeviceSupported {
        cu_device: i32,
        is_supported: u32,
        architecture: u32,
        sli: u32,
        v_gpu: u32,
        confidential_compute: u32,
        cmp: u32,
        wsl: u32,
        api: u32,
    }
);
params!(
    /// `CUpti_Device_GetChipName_Params`.
    DeviceGetChipName {
        device_index: usize,
        chip_name: *const c_char,
    }
);

// ---- cupti_range_profiler.h ------------------------------------------------------------

params!(
    /// `CUpti_RangeProfiler_Enable_Params`.
    RangeProfilerEnable {
        ctx: *mut c_void,
        range_profiler_object: *mut c_void,
    }
);
params!(
    /// `CUpti_RangeProfiler_Disable_Params`.
    RangeProfilerDisable { range_profiler_object: *mut c_void }
);
params!(
    /// `CUpti_RangeProfiler_SetConfig_Params`.
    RangeProfilerSetConfig {
        range_profiler_object: *mut c_void,
        config_size: usize,
        config: *const u8,
        counter_data_image_size: usize,
        counter_data_image: *mut u8,
        range: u32,
        replay_mode: u32,
        max_ranges_per_pass: usize,
        num_nesting_levels: u16,
        min_nesting_level: u16,
        pass_index: usize,
        target_nesting_level: u16,
    }
);
params!(
    /// `CUpti_RangeProfiler_Start_Params`.
    RangeProfilerStart { range_profiler_object: *mut c_void }
);
params!(
    /// `CUpti_RangeProfiler_Stop_Params`.
    RangeProfilerStop {
        range_profiler_object: *mut c_void,
        pass_index: usize,
        target_nesting_level: usize,
        is_all_pass_submitted: u8,
    }
);
params!(
    /// `CUpti_RangeProfiler_PushRange_Params`.
    RangeProfilerPushRange {
        range_profiler_object: *mut c_void,
        range_name: *const c_char,
    }
);
params!(
    /// `CUpti_RangeProfiler_PopRange_Params`.
    RangeProfilerPopRange { range_profiler_object: *mut c_void }
);
params!(
    /// `CUpti_RangeProfiler_DecodeData_Params`.
    RangeProfilerDecodeData {
        range_profiler_object: *mut c_void,
        num_of_range_dropped: usize,
    }
);
params!(
    /// `CUpti_RangeProfiler_GetCounterDataSize_Params`.
    RangeProfilerGetCounterDataSize {
        range_profiler_object: *mut c_void,
        metric_names: *const *const c_char,
        num_metrics: usize,
        max_num_of_ranges: usize,
        max_num_range_tree_nodes: u32,
        counter_data_size: usize,
    }
);
params!(
    /// `CUpti_RangeProfiler_CounterDataImage_Initialize_Params`.
    RangeProfilerCounterDataImageInitialize {
        range_profiler_object: *mut c_void,
        counter_data_size: usize,
        counter_data: *mut u8,
    }
);
params!(
    /// `CUpti_RangeProfiler_GetCounterDataInfo_Params`.
    RangeProfilerGetCounterDataInfo {
        counter_data_image: *const u8,
        counter_data_image_size: usize,
        num_total_ranges: usize,
    }
);
params!(
    /// `CUpti_RangeProfiler_CounterData_GetRangeInfo_Params`.
    RangeProfilerCounterDataGetRangeInfo {
        counter_data_image: *const u8,
        counter_data_image_size: usize,
        range_index: usize,
        range_delimiter: *const c_char,
        range_name: *const c_char,
    }
);

// ---- cupti_sass_metrics.h ---------------------------------------------------------------

/// `CUpti_SassMetrics_OutputGranularity`: values summed over the whole GPU (one instance).
pub const SASS_METRICS_OUTPUT_GRANULARITY_GPU: u8 = 0;

/// `CUpti_SassMetrics_MetricDetails`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SassMetricDetails {
    pub metric_id: u64,
    pub metric_name: *const c_char,
    pub metric_description: *const c_char,
}

impl Zero for SassMetricDetails {
    fn zero() -> Self {
        SassMetricDetails {
            metric_id: 0,
            metric_name: std::ptr::null(),
            metric_description: std::ptr::null(),
        }
    }
}

/// `CUpti_SassMetrics_Config`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SassMetricsConfig {
    pub metric_id: u64,
    pub output_granularity: u8,
}

/// `CUpti_SassMetrics_InstanceValue`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SassMetricsInstanceValue {
    pub metric_id: u64,
    pub value: u64,
}

params!(
    /// `CUpti_SassMetrics_GetNumOfMetrics_Params`.
    SassMetricsGetNumOfMetrics {
        chip_name: *const c_char,
        num_of_metrics: usize,
    }
);
params!(
    /// `CUpti_SassMetrics_GetMetrics_Params`.
    SassMetricsGetMetrics {
        chip_name: *const c_char,
        num_of_metrics: usize,
        metrics_list: *mut SassMetricDetails,
    }
);
params!(
    /// `CUpti_SassMetrics_GetProperties_Params`.
    SassMetricsGetProperties {
        chip_name: *const c_char,
        metric_name: *const c_char,
        metric: SassMetricDetails,
    }
);
params!(
    /// `CUpti_SassMetricsSetConfig_Params`.
    SassMetricsSetConfig {
        num_of_metric_config: usize,
        configs: *mut SassMetricsConfig,
        device_index: u32,
    }
);
params!(
    /// `CUpti_SassMetricsUnsetConfig_Params`.
    SassMetricsUnsetConfig { device_index: u32 }
);
params!(
    /// `CUpti_SassMetricsEnable_Params`.
    SassMetricsEnable {
        ctx: *mut c_void,
        enable_lazy_patching: u8,
    }
);
params!(
    /// `CUpti_SassMetricsDisable_Params`.
    SassMetricsDisable {
        ctx: *mut c_void,
        num_of_dropped_records: usize,
    }
);
params!(
    /// `CUpti_SassMetricsGetDataProperties_Params`.
    SassMetricsGetDataProperties {
        ctx: *mut c_void,
        num_of_patched_instruction_records: usize,
        num_of_instances: usize,
    }
);
params!(
    /// `CUpti_SassMetrics_Data`: one patched instruction's record.
    SassMetricsData {
        cubin_crc: u32,
        function_index: u32,
        function_name: *const c_char,
        pc_offset: u32,
        instance_values: *mut SassMetricsInstanceValue,
    }
);
params!(
    /// `CUpti_SassMetricsFlushData_Params`. The header's `STRUCT_SIZE` stops at
    /// `numOfInstances`, before `pMetricsData`: [`SassMetricsFlushData::HEADER_SIZE`].
    SassMetricsFlushData {
        ctx: *mut c_void,
        num_of_patched_instruction_records: usize,
        num_of_instances: usize,
        metrics_data: *mut SassMetricsData,
    }
);

impl SassMetricsFlushData {
    /// `CUpti_SassMetricsFlushData_Params_STRUCT_SIZE` as the header defines it (up to
    /// `numOfInstances`): what `struct_size` is set to.
    pub const HEADER_SIZE: usize =
        std::mem::offset_of!(SassMetricsFlushData, num_of_instances) + std::mem::size_of::<usize>();

    /// Every field zero or null, `struct_size` the header's.
    pub fn with_header_size() -> SassMetricsFlushData {
        let mut p = SassMetricsFlushData::new();
        p.struct_size = Self::HEADER_SIZE;
        p
    }
}

/// A structure's fields: name, offset and size of each, in declaration order.
pub type Fields = &'static [(&'static str, usize, usize)];

/// Every structure declared through [`params!`], by name, with its fields
/// ([`HostInitialize::FIELDS`] and the like), for `tests/headers.rs`, which checks that this
/// list names them all and that each lays out as its header says.
pub fn layouts() -> Vec<(&'static str, Fields)> {
    macro_rules! all {
        ($($t:ident),* $(,)?) => { vec![$((stringify!($t), $t::FIELDS)),*] };
    }
    all!(
        HostInitialize,
        HostDeinitialize,
        HostGetSupportedChips,
        HostGetBaseMetrics,
        HostGetMetricProperties,
        HostGetRangeName,
        HostEvaluateToGpuValues,
        HostConfigAddMetrics,
        HostGetConfigImageSize,
        HostGetConfigImage,
        HostGetNumOfPasses,
        ProfilerInitialize,
        ProfilerDeInitialize,
        GetCounterAvailability,
        DeviceSupported,
        DeviceGetChipName,
        RangeProfilerEnable,
        RangeProfilerDisable,
        RangeProfilerSetConfig,
        RangeProfilerStart,
        RangeProfilerStop,
        RangeProfilerPushRange,
        RangeProfilerPopRange,
        RangeProfilerDecodeData,
        RangeProfilerGetCounterDataSize,
        RangeProfilerCounterDataImageInitialize,
        RangeProfilerGetCounterDataInfo,
        RangeProfilerCounterDataGetRangeInfo,
        SassMetricsGetNumOfMetrics,
        SassMetricsGetMetrics,
        SassMetricsGetProperties,
        SassMetricsSetConfig,
        SassMetricsUnsetConfig,
        SassMetricsEnable,
        SassMetricsDisable,
        SassMetricsGetDataProperties,
        SassMetricsData,
        SassMetricsFlushData,
        PmSamplingSetConfig,
        PmSamplingEnable,
        PmSamplingDisable,
        PmSamplingStart,
        PmSamplingStop,
        PmSamplingDecodeData,
        PmSamplingGetCounterAvailability,
        PmSamplingGetCounterDataSize,
        PmSamplingCounterDataImageInitialize,
        PmSamplingGetCounterDataInfo,
        PmSamplingCounterDataGetSampleInfo,
    )
}

mod pm_sampling; // after `params!`, which it uses
pub use pm_sampling::*;

#[cfg(test)]
mod tests;
