//! PM sampling's entry points (`cupti_pmsampling.h`, with `cupti_profiler_host.h` and
//! `cupti_profiler_target.h` for configuration and evaluation), looked up in the CUPTI library
//! GPU activity loaded. Their parameter structures are `rtrace-cupti-abi`'s.

use rtrace_cupti_abi as abi;
use rtrace_cupti_abi::{Call, CuptiResult};
use std::ffi::{c_void, CStr};

/// `cuptiGetDeviceId`: a context's device.
pub(super) type DeviceIdFn = unsafe extern "C" fn(*mut c_void, *mut u32) -> CuptiResult;

/// The entry points GPU metrics sampling calls.
pub(crate) struct PmApi {
    pub(super) device_id: DeviceIdFn,
    pub(super) initialize: Call<abi::ProfilerInitialize>,
    pub(super) device_supported: Call<abi::DeviceSupported>,
    pub(super) chip_name: Call<abi::DeviceGetChipName>,
    pub(super) availability: Call<abi::PmSamplingGetCounterAvailability>,
    pub(super) host_initialize: Call<abi::HostInitialize>,
    pub(super) host_deinitialize: Call<abi::HostDeinitialize>,
    pub(super) add_metrics: Call<abi::HostConfigAddMetrics>,
    pub(super) config_image_size: Call<abi::HostGetConfigImageSize>,
    pub(super) config_image: Call<abi::HostGetConfigImage>,
    pub(super) num_passes: Call<abi::HostGetNumOfPasses>,
    pub(super) evaluate: Call<abi::HostEvaluateToGpuValues>,
    pub(super) enable: Call<abi::PmSamplingEnable>,
    pub(super) disable: Call<abi::PmSamplingDisable>,
    pub(super) set_config: Call<abi::PmSamplingSetConfig>,
    pub(super) start: Call<abi::PmSamplingStart>,
    pub(super) stop: Call<abi::PmSamplingStop>,
    pub(super) decode: Call<abi::PmSamplingDecodeData>,
    pub(super) counter_data_size: Call<abi::PmSamplingGetCounterDataSize>,
    pub(super) counter_data_initialize: Call<abi::PmSamplingCounterDataImageInitialize>,
    pub(super) counter_data_info: Call<abi::PmSamplingGetCounterDataInfo>,
    pub(super) sample_info: Call<abi::PmSamplingCounterDataGetSampleInfo>,
}

/// Looks `name` up with `sym` as an entry point taking `P`.
///
/// # Safety
/// `name` must be a CUPTI function whose C signature is `CUptiResult (P *)`.
unsafe fn entry<P>(
    sym: &impl Fn(&CStr) -> Result<*mut c_void, String>,
    name: &CStr,
) -> Result<Call<P>, String> {
    let p = sym(name)?;
    // SAFETY: the caller names a CUPTI function taking one `P *` and returning CUptiResult.
    Ok(unsafe { std::mem::transmute::<*mut c_void, Call<P>>(p) })
}

impl PmApi {
    /// Looks the entry points up with `sym`; `Err` names the first one missing.
    pub(crate) fn load(
        sym: impl Fn(&CStr) -> Result<*mut c_void, String>,
    ) -> Result<PmApi, String> {
        // SAFETY: each name is the CUPTI function whose parameter structure (in the headers
        // above) is the `rtrace-cupti-abi` type it is looked up as; `cuptiGetDeviceId` is
        // `CUptiResult (CUcontext, uint32_t *)`.
        unsafe {
            Ok(PmApi {
                device_id: std::mem::transmute::<*mut c_void, DeviceIdFn>(sym(
                    c"cuptiGetDeviceId",
                )?),
                initialize: entry(&sym, c"cuptiProfilerInitialize")?,
                device_supported: entry(&sym, c"cuptiProfilerDeviceSupported")?,
                chip_name: entry(&sym, c"cuptiDeviceGetChipName")?,
                availability: entry(&sym, c"cuptiPmSamplingGetCounterAvailability")?,
                host_initialize: entry(&sym, c"cuptiProfilerHostInitialize")?,
                host_deinitialize: entry(&sym, c"cuptiProfilerHostDeinitialize")?,
                add_metrics: entry(&sym, c"cuptiProfilerHostConfigAddMetrics")?,
                config_image_size: entry(&sym, c"cuptiProfilerHostGetConfigImageSize")?,
                config_image: entry(&sym, c"cuptiProfilerHostGetConfigImage")?,
                num_passes: entry(&sym, c"cuptiProfilerHostGetNumOfPasses")?,
                evaluate: entry(&sym, c"cuptiProfilerHostEvaluateToGpuValues")?,
                enable: entry(&sym, c"cuptiPmSamplingEnable")?,
                disable: entry(&sym, c"cuptiPmSamplingDisable")?,
                set_config: entry(&sym, c"cuptiPmSamplingSetConfig")?,
                start: entry(&sym, c"cuptiPmSamplingStart")?,
                stop: entry(&sym, c"cuptiPmSamplingStop")?,
                decode: entry(&sym, c"cuptiPmSamplingDecodeData")?,
                counter_data_size: entry(&sym, c"cuptiPmSamplingGetCounterDataSize")?,
                counter_data_initialize: entry(&sym, c"cuptiPmSamplingCounterDataImageInitialize")?,
                counter_data_info: entry(&sym, c"cuptiPmSamplingGetCounterDataInfo")?,
                sample_info: entry(&sym, c"cuptiPmSamplingCounterDataGetSampleInfo")?,
            })
        }
    }
}

/// Calls a CUPTI entry point with its parameters; its result.
pub(super) fn call<P>(f: Call<P>, p: &mut P) -> CuptiResult {
    // SAFETY: `f` was looked up as the entry point taking `P`; `p` is a live, initialized
    // parameter structure (`P::new()`), whose pointers the caller set to live buffers.
    unsafe { f(p) }
}

/// A context's device ordinal (CUPTI's), or CUPTI's result.
pub(super) fn device_of(pm: &PmApi, ctx: *mut c_void) -> Result<u32, CuptiResult> {
    let mut d = 0u32;
    // SAFETY: a context handle CUPTI's callback gave; CUPTI writes the id.
    match unsafe { (pm.device_id)(ctx, &mut d) } {
        abi::SUCCESS => Ok(d),
        rc => Err(rc),
    }
}
