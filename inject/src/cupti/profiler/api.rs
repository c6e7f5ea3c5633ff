//! The range profiler's entry points (`cupti_profiler_target.h`, `cupti_target.h`,
//! `cupti_profiler_host.h`, `cupti_range_profiler.h`), looked up in the CUPTI library GPU
//! activity loaded. Their parameter structures are `rtrace-cupti-abi`'s.

pub(super) use crate::cupti::entry::call;
use crate::cupti::entry::entry;
use rtrace_cupti_abi as abi;
use rtrace_cupti_abi::{Call, CuptiResult};
use std::ffi::{c_void, CStr};

/// The entry points kernel profiling calls.
pub(crate) struct ProfApi {
    pub(super) initialize: Call<abi::ProfilerInitialize>,
    pub(super) device_supported: Call<abi::DeviceSupported>,
    pub(super) chip_name: Call<abi::DeviceGetChipName>,
    pub(super) counter_availability: Call<abi::GetCounterAvailability>,
    pub(super) host_initialize: Call<abi::HostInitialize>,
    pub(super) host_deinitialize: Call<abi::HostDeinitialize>,
    pub(super) add_metrics: Call<abi::HostConfigAddMetrics>,
    pub(super) config_image_size: Call<abi::HostGetConfigImageSize>,
    pub(super) config_image: Call<abi::HostGetConfigImage>,
    pub(super) num_passes: Call<abi::HostGetNumOfPasses>,
    pub(super) evaluate: Call<abi::HostEvaluateToGpuValues>,
    pub(super) enable: Call<abi::RangeProfilerEnable>,
    pub(super) disable: Call<abi::RangeProfilerDisable>,
    pub(super) counter_data_size: Call<abi::RangeProfilerGetCounterDataSize>,
    pub(super) counter_data_initialize: Call<abi::RangeProfilerCounterDataImageInitialize>,
    pub(super) set_config: Call<abi::RangeProfilerSetConfig>,
    pub(super) start: Call<abi::RangeProfilerStart>,
    pub(super) stop: Call<abi::RangeProfilerStop>,
    pub(super) push_range: Call<abi::RangeProfilerPushRange>,
    pub(super) pop_range: Call<abi::RangeProfilerPopRange>,
    pub(super) decode: Call<abi::RangeProfilerDecodeData>,
    pub(super) counter_data_info: Call<abi::RangeProfilerGetCounterDataInfo>,
    pub(super) range_info: Call<abi::RangeProfilerCounterDataGetRangeInfo>,
}

impl ProfApi {
    /// Looks the entry points up with `sym`; `Err` names the first one missing.
    pub(crate) fn load(
        sym: impl Fn(&CStr) -> Result<*mut c_void, String>,
    ) -> Result<ProfApi, String> {
        // SAFETY: each name is the CUPTI function whose parameter structure (in the headers
        // above) is the `rtrace-cupti-abi` type it is looked up as.
        unsafe {
            Ok(ProfApi {
                initialize: entry(&sym, c"cuptiProfilerInitialize")?,
                device_supported: entry(&sym, c"cuptiProfilerDeviceSupported")?,
                chip_name: entry(&sym, c"cuptiDeviceGetChipName")?,
                counter_availability: entry(&sym, c"cuptiProfilerGetCounterAvailability")?,
                host_initialize: entry(&sym, c"cuptiProfilerHostInitialize")?,
                host_deinitialize: entry(&sym, c"cuptiProfilerHostDeinitialize")?,
                add_metrics: entry(&sym, c"cuptiProfilerHostConfigAddMetrics")?,
                config_image_size: entry(&sym, c"cuptiProfilerHostGetConfigImageSize")?,
                config_image: entry(&sym, c"cuptiProfilerHostGetConfigImage")?,
                num_passes: entry(&sym, c"cuptiProfilerHostGetNumOfPasses")?,
                evaluate: entry(&sym, c"cuptiProfilerHostEvaluateToGpuValues")?,
                enable: entry(&sym, c"cuptiRangeProfilerEnable")?,
                disable: entry(&sym, c"cuptiRangeProfilerDisable")?,
                counter_data_size: entry(&sym, c"cuptiRangeProfilerGetCounterDataSize")?,
                counter_data_initialize: entry(
                    &sym,
                    c"cuptiRangeProfilerCounterDataImageInitialize",
                )?,
                set_config: entry(&sym, c"cuptiRangeProfilerSetConfig")?,
                start: entry(&sym, c"cuptiRangeProfilerStart")?,
                stop: entry(&sym, c"cuptiRangeProfilerStop")?,
                push_range: entry(&sym, c"cuptiRangeProfilerPushRange")?,
                pop_range: entry(&sym, c"cuptiRangeProfilerPopRange")?,
                decode: entry(&sym, c"cuptiRangeProfilerDecodeData")?,
                counter_data_info: entry(&sym, c"cuptiRangeProfilerGetCounterDataInfo")?,
                range_info: entry(&sym, c"cuptiRangeProfilerCounterDataGetRangeInfo")?,
            })
        }
    }
}

// `CUptiResult`s (cupti_result.h) that `rtrace-cupti-abi` does not name.
const ERROR_INVALID_DEVICE: CuptiResult = 2;
const ERROR_HARDWARE_BUSY: CuptiResult = 26;
const ERROR_UM_PROFILING_NOT_SUPPORTED_WITH_MPS: CuptiResult = 31;
const ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED: CuptiResult = 33;
const ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: CuptiResult = 39;
const ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES: CuptiResult = 40;
/// `CONFIDENTIAL_COMPUTING_NOT_SUPPORTED` (41) to `INVALID_CHIP_NAME` (46): CMP, MIG, SLI, WSL.
const ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED: CuptiResult = 41;
const ERROR_INVALID_CHIP_NAME: CuptiResult = 46;

/// What a failed call means for the user.
pub(super) fn meaning(rc: CuptiResult) -> &'static str {
    match rc {
        abi::ERROR_INSUFFICIENT_PRIVILEGES | ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES => {
            "no permission to read GPU counters: run as root or set NVreg_RestrictProfilingToAdminUsers=0"
        }
        ERROR_HARDWARE_BUSY
        | abi::ERROR_OLD_PROFILER_API_INITIALIZED
        | ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED => {
            "the GPU's counters are held by another tool (Nsight Compute, Nsight Systems' GPU metrics, DCGM profiling)"
        }
        ERROR_UM_PROFILING_NOT_SUPPORTED_WITH_MPS => "profiling is not supported under MPS",
        abi::ERROR_NOT_SUPPORTED
        | ERROR_INVALID_DEVICE
        | ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED
        | ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED..=ERROR_INVALID_CHIP_NAME => {
            "this device or configuration does not support profiling (MPS, vGPU, MIG, SLI, WSL, confidential computing)"
        }
        abi::ERROR_NOT_INITIALIZED => {
            "CUPTI's profiler host library (libnvperf_host.so) was not found"
        }
        _ => "CUPTI refused",
    }
}
