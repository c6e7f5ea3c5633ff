//! The PC Sampling API's entry points and the structures they take, mirroring
//! `cupti_pcsampling.h` (cudarc binds none of it).

use std::ffi::{c_char, c_void, CStr};

/// `CUpti_PCSamplingStallReason`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct StallReason {
    pub(super) index: u32,
    pub(super) samples: u32,
}

/// `CUpti_PCSamplingPCData` (packed, 8-aligned: 64 bytes).
#[repr(C)]
pub(super) struct PcData {
    pub(super) size: usize,
    pub(super) cubin_crc: u64,
    pub(super) pc_offset: u64,
    pub(super) function_index: u32,
    pub(super) pad: u32,
    pub(super) function_name: *const c_char,
    pub(super) stall_reason_count: usize,
    pub(super) stall_reason: *mut StallReason,
    pub(super) correlation_id: u32,
}

/// `CUpti_PCSamplingData` (packed, 8-aligned: 80 bytes).
#[repr(C)]
pub(super) struct SamplingData {
    pub(super) size: usize,
    pub(super) collect_num_pcs: usize,
    pub(super) total_samples: u64,
    pub(super) dropped_samples: u64,
    pub(super) total_num_pcs: usize,
    pub(super) remaining_num_pcs: usize,
    pub(super) range_id: u64,
    pub(super) pc_data: *mut PcData,
    pub(super) non_user_samples: u64,
    pub(super) hardware_buffer_full: u8,
}

const _: () = assert!(std::mem::size_of::<PcData>() == 64);
const _: () = assert!(std::mem::size_of::<SamplingData>() == 80);

/// `CUpti_PCSamplingConfigurationInfo`: type, status, then a 24-byte union.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct ConfigInfo {
    pub(super) kind: u32,
    pub(super) status: u32,
    pub(super) data: [u64; 3],
}

const _: () = assert!(std::mem::size_of::<ConfigInfo>() == 32);

// CUpti_PCSamplingConfigurationAttributeType.
pub(super) const ATTR_SAMPLING_PERIOD: u32 = 1;
pub(super) const ATTR_STALL_REASON: u32 = 2;
pub(super) const ATTR_SCRATCH_BUFFER_SIZE: u32 = 3;
pub(super) const ATTR_HARDWARE_BUFFER_SIZE: u32 = 4;
pub(super) const ATTR_COLLECTION_MODE: u32 = 5;
pub(super) const ATTR_SAMPLING_DATA_BUFFER: u32 = 8;
pub(super) const COLLECTION_MODE_CONTINUOUS: u64 = 1;

/// `CUpti_PCSamplingConfigurationInfoParams`.
#[repr(C)]
pub(super) struct ConfigParams {
    pub(super) size: usize,
    pub(super) priv_: *mut c_void,
    pub(super) ctx: *mut c_void,
    pub(super) num_attributes: usize,
    pub(super) info: *mut ConfigInfo,
}

/// `CUpti_PCSamplingGetDataParams`.
#[repr(C)]
pub(super) struct GetDataParams {
    pub(super) size: usize,
    pub(super) priv_: *mut c_void,
    pub(super) ctx: *mut c_void,
    pub(super) data: *mut SamplingData,
}

/// `CUpti_PCSamplingEnableParams`, `..DisableParams` (same layout).
#[repr(C)]
pub(super) struct CtxParams {
    pub(super) size: usize,
    pub(super) priv_: *mut c_void,
    pub(super) ctx: *mut c_void,
}

/// `CUpti_PCSamplingGetNumStallReasonsParams`.
#[repr(C)]
pub(super) struct NumStallParams {
    pub(super) size: usize,
    pub(super) priv_: *mut c_void,
    pub(super) ctx: *mut c_void,
    pub(super) num: *mut usize,
}

/// `CUpti_PCSamplingGetStallReasonsParams`.
#[repr(C)]
pub(super) struct StallParams {
    pub(super) size: usize,
    pub(super) priv_: *mut c_void,
    pub(super) ctx: *mut c_void,
    pub(super) num: usize,
    pub(super) index: *mut u32,
    pub(super) names: *mut *mut c_char,
}

/// `CUPTI_STALL_REASON_STRING_SIZE`.
pub(super) const STALL_NAME_BYTES: usize = 128;
/// `CUPTI_ERROR_OUT_OF_MEMORY`: the hardware buffer is full.
pub(super) const ERROR_OUT_OF_MEMORY: i32 = 8;

type ParamsFn<P> = unsafe extern "C" fn(*mut P) -> i32;
type DeviceIdFn = unsafe extern "C" fn(*mut c_void, *mut u32) -> i32;

/// The PC Sampling entry points.
pub(crate) struct PcApi {
    pub(super) enable: ParamsFn<CtxParams>,
    pub(super) disable: ParamsFn<CtxParams>,
    pub(super) num_stall_reasons: ParamsFn<NumStallParams>,
    pub(super) stall_reasons: ParamsFn<StallParams>,
    pub(super) set_config: ParamsFn<ConfigParams>,
    pub(super) get_config: ParamsFn<ConfigParams>,
    pub(super) get_data: ParamsFn<GetDataParams>,
    pub(super) device_id: Option<DeviceIdFn>,
}

impl PcApi {
    /// Looks the entry points up with `sym`; `Err` names the first one missing.
    pub(crate) fn load(
        sym: impl Fn(&CStr) -> Result<*mut c_void, String>,
    ) -> Result<PcApi, String> {
        // SAFETY: each symbol is the CUPTI function of that name, whose C signature
        // (cupti_pcsampling.h, cupti.h) is the type it is transmuted to.
        unsafe {
            Ok(PcApi {
                enable: std::mem::transmute::<*mut c_void, ParamsFn<CtxParams>>(sym(
                    c"cuptiPCSamplingEnable",
                )?),
                disable: std::mem::transmute::<*mut c_void, ParamsFn<CtxParams>>(sym(
                    c"cuptiPCSamplingDisable",
                )?),
                num_stall_reasons: std::mem::transmute::<*mut c_void, ParamsFn<NumStallParams>>(
                    sym(c"cuptiPCSamplingGetNumStallReasons")?,
                ),
                stall_reasons: std::mem::transmute::<*mut c_void, ParamsFn<StallParams>>(sym(
                    c"cuptiPCSamplingGetStallReasons",
                )?),
                set_config: std::mem::transmute::<*mut c_void, ParamsFn<ConfigParams>>(sym(
                    c"cuptiPCSamplingSetConfigurationAttribute",
                )?),
                get_config: std::mem::transmute::<*mut c_void, ParamsFn<ConfigParams>>(sym(
                    c"cuptiPCSamplingGetConfigurationAttribute",
                )?),
                get_data: std::mem::transmute::<*mut c_void, ParamsFn<GetDataParams>>(sym(
                    c"cuptiPCSamplingGetData",
                )?),
                device_id: sym(c"cuptiGetDeviceId")
                    .ok()
                    .map(|p| std::mem::transmute::<*mut c_void, DeviceIdFn>(p)),
            })
        }
    }
}

/// Disables sampling on `ctx`; CUPTI's result.
pub(super) fn disable(pc: &PcApi, ctx: *mut c_void) -> i32 {
    let mut p = CtxParams {
        size: std::mem::size_of::<CtxParams>(),
        priv_: std::ptr::null_mut(),
        ctx,
    };
    // SAFETY: CUPTI reads the parameters.
    unsafe { (pc.disable)(&mut p) }
}
