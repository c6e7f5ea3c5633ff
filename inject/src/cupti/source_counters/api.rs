//! The SASS Metric API's entry points (`cupti_sass_metrics.h`), with the profiler's
//! initialization and chip name (`cupti_profiler_target.h`) they need, looked up in the CUPTI
//! library GPU activity loaded. Their parameter structures are `rtrace-cupti-abi`'s; the
//! driver's context synchronization, through its real entry point.

pub(super) use crate::cupti::entry::call;
use crate::cupti::entry::entry;
use rtrace_cupti_abi as abi;
use rtrace_cupti_abi::Call;
use std::ffi::{c_void, CStr};

/// The entry points source counters call.
pub(crate) struct SassApi {
    pub(super) initialize: Call<abi::ProfilerInitialize>,
    pub(super) chip_name: Call<abi::DeviceGetChipName>,
    pub(super) properties: Call<abi::SassMetricsGetProperties>,
    pub(super) set_config: Call<abi::SassMetricsSetConfig>,
    pub(super) enable: Call<abi::SassMetricsEnable>,
    pub(super) disable: Call<abi::SassMetricsDisable>,
    pub(super) data_properties: Call<abi::SassMetricsGetDataProperties>,
    pub(super) flush: Call<abi::SassMetricsFlushData>,
}

impl SassApi {
    /// Looks the entry points up with `sym`; `Err` names the first one missing.
    pub(crate) fn load(
        sym: impl Fn(&CStr) -> Result<*mut c_void, String>,
    ) -> Result<SassApi, String> {
        // SAFETY: each name is the CUPTI function whose parameter structure (in the headers
        // above) is the `rtrace-cupti-abi` type it is looked up as.
        unsafe {
            Ok(SassApi {
                initialize: entry(&sym, c"cuptiProfilerInitialize")?,
                chip_name: entry(&sym, c"cuptiDeviceGetChipName")?,
                properties: entry(&sym, c"cuptiSassMetricsGetProperties")?,
                set_config: entry(&sym, c"cuptiSassMetricsSetConfig")?,
                enable: entry(&sym, c"cuptiSassMetricsEnable")?,
                disable: entry(&sym, c"cuptiSassMetricsDisable")?,
                data_properties: entry(&sym, c"cuptiSassMetricsGetDataProperties")?,
                flush: entry(&sym, c"cuptiSassMetricsFlushData")?,
            })
        }
    }
}

type SyncFn = unsafe extern "C" fn() -> u32;

/// `cuCtxSynchronize` on the calling thread's context, through the real driver (rtrace's own
/// call: not recorded); the driver's result.
pub(super) fn synchronize() -> u32 {
    let real = crate::driver::real(crate::generated::id::cuCtxSynchronize);
    if real.is_null() {
        return 0;
    }
    // SAFETY: the driver's `CUresult cuCtxSynchronize(void)`.
    let sync = unsafe { std::mem::transmute::<*mut c_void, SyncFn>(real) };
    // SAFETY: a plain driver call.
    unsafe { sync() }
}
