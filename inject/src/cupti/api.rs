//! The CUPTI library and the entry points rtrace calls in it (Activity API, Callback API, and
//! the PC Sampling API and the range profiler when asked for), looked up at run time.

use super::pcsampling::api::PcApi;
use super::profiler::api::ProfApi;
use super::source_counters::api::SassApi;
use crate::driver;
use rtrace_format::{CUPTI_DIRS, CUPTI_SONAME};
use std::ffi::{c_char, c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;

pub(super) type RequestFn = extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
pub(super) type CompleteFn = extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
pub(super) type TimestampFn = extern "C" fn() -> u64;

pub(super) type RegisterFn = unsafe extern "C" fn(RequestFn, CompleteFn) -> i32;
pub(super) type RegisterTimestampFn = unsafe extern "C" fn(TimestampFn) -> i32;
pub(super) type EnableFn = unsafe extern "C" fn(i32) -> i32;
pub(super) type EnableDomainFn = unsafe extern "C" fn(u32, *mut c_void, u32) -> i32;
pub(super) type FlushFn = unsafe extern "C" fn(u32) -> i32;
pub(super) type NextRecordFn = unsafe extern "C" fn(*mut u8, usize, *mut *mut u8) -> i32;
pub(super) type DroppedFn = unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> i32;
pub(super) type ResultStringFn = unsafe extern "C" fn(i32, *mut *const c_char) -> i32;
pub(super) type CallbackFn = extern "C" fn(*mut c_void, u32, u32, *const u8);
pub(super) type SubscribeFn =
    unsafe extern "C" fn(*mut *mut c_void, CallbackFn, *mut c_void) -> i32;
#[cfg_attr(test, allow(dead_code))]
pub(super) type UnsubscribeFn = unsafe extern "C" fn(*mut c_void) -> i32;
pub(super) type EnableCallbackFn = unsafe extern "C" fn(u32, *mut c_void, u32, u32) -> i32;
pub(super) type CallbackNameFn = unsafe extern "C" fn(u32, u32, *mut *const c_char) -> i32;
pub(super) type ContextIdFn = unsafe extern "C" fn(*mut c_void, *mut u32) -> i32;
pub(super) type SetAttributeFn = unsafe extern "C" fn(u32, *mut usize, *mut c_void) -> i32;
pub(super) type GetCubinCrcFn = unsafe extern "C" fn(*mut CubinCrcParams) -> i32;

/// `CUpti_GetCubinCrcParams` (cupti_pcsampling.h).
#[repr(C)]
pub(super) struct CubinCrcParams {
    pub size: usize,
    pub cubin_size: usize,
    pub cubin: *const c_void,
    pub cubin_crc: u64,
}

/// `CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER` (cupti_activity.h, a `uint8_t`): the client
/// hands CUPTI zeroed buffers, so CUPTI does not zero each new one on the program's thread.
pub(super) const ATTR_ZEROED_OUT_ACTIVITY_BUFFER: u32 = 5;

/// The CUPTI entry points rtrace uses.
#[cfg_attr(test, allow(dead_code))]
pub(super) struct Api {
    pub register_callbacks: RegisterFn,
    pub register_timestamp: RegisterTimestampFn,
    pub enable: EnableFn,
    pub disable: EnableFn,
    pub flush_all: FlushFn,
    pub next_record: NextRecordFn,
    pub dropped: DroppedFn,
    pub result_string: ResultStringFn,
    pub subscribe: SubscribeFn,
    pub enable_callback: EnableCallbackFn,
    pub enable_domain: EnableDomainFn,
    pub callback_name: CallbackNameFn,
    /// `cuptiGetContextId`, for the context of a loaded module.
    pub context_id: ContextIdFn,
    /// `cuptiActivitySetAttribute`, if this CUPTI has it.
    pub set_attribute: Option<SetAttributeFn>,
    /// `cuptiGetCubinCrc`, if this CUPTI has it.
    pub cubin_crc: Option<GetCubinCrcFn>,
    /// The PC Sampling API when PC sampling is asked for (`Err`: why it cannot be had).
    pub pc_sampling: Option<Result<PcApi, String>>,
    /// The range profiler's entry points when kernel profiling is asked for.
    pub profiler: Option<Result<ProfApi, String>>,
    /// The SASS Metric API when source counters are asked for.
    pub sass: Option<Result<SassApi, String>>,
}

// SAFETY: plain function pointers into libcupti, callable from any thread.
unsafe impl Send for Api {}
// SAFETY: as above.
unsafe impl Sync for Api {}
/// The process's own libcupti if it has loaded one (PyTorch does), else `RTRACE_CUPTI_LIBRARY`,
/// else `libcupti.so.13` from the library path or the CUDA toolkit.
fn open_library() -> Result<*mut c_void, String> {
    let open = |name: &[u8], flags: i32| -> *mut c_void {
        let Ok(c) = CString::new(name) else {
            return std::ptr::null_mut();
        };
        // SAFETY: dlopen with a valid C string.
        unsafe { libc::dlopen(c.as_ptr(), flags) }
    };
    let loaded = open(CUPTI_SONAME.as_bytes(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
    if !loaded.is_null() {
        return Ok(loaded);
    }
    let mut tried = Vec::new();
    let mut candidates: Vec<Vec<u8>> = Vec::new();
    if let Some(p) = &crate::state::config().cupti_library {
        candidates.push(p.as_bytes().to_vec());
    } else {
        candidates.push(CUPTI_SONAME.as_bytes().to_vec());
        for dir in CUPTI_DIRS {
            candidates.push(format!("{dir}/{CUPTI_SONAME}").into_bytes());
        }
    }
    for c in candidates {
        let h = open(&c, libc::RTLD_NOW | libc::RTLD_LOCAL);
        if !h.is_null() {
            return Ok(h);
        }
        tried.push(String::from_utf8_lossy(&c).into_owned());
    }
    Err(format!(
        "no CUPTI library found (tried {})",
        tried.join(", ")
    ))
}

pub(super) fn load() -> Result<Api, String> {
    let h = open_library()?;
    let sym = |name: &CStr| -> Result<*mut c_void, String> {
        let p = driver::real_dlsym(h, name.as_ptr());
        if p.is_null() {
            Err(format!("CUPTI lacks {}", name.to_string_lossy()))
        } else {
            Ok(p)
        }
    };
    // SAFETY: each symbol is the CUPTI function of that name, whose C signature (from
    // cupti_activity.h / cupti_result.h) is the function type it is transmuted to.
    unsafe {
        Ok(Api {
            register_callbacks: std::mem::transmute::<*mut c_void, RegisterFn>(sym(
                c"cuptiActivityRegisterCallbacks",
            )?),
            register_timestamp: std::mem::transmute::<*mut c_void, RegisterTimestampFn>(sym(
                c"cuptiActivityRegisterTimestampCallback",
            )?),
            enable: std::mem::transmute::<*mut c_void, EnableFn>(sym(c"cuptiActivityEnable")?),
            disable: std::mem::transmute::<*mut c_void, EnableFn>(sym(c"cuptiActivityDisable")?),
            flush_all: std::mem::transmute::<*mut c_void, FlushFn>(sym(c"cuptiActivityFlushAll")?),
            next_record: std::mem::transmute::<*mut c_void, NextRecordFn>(sym(
                c"cuptiActivityGetNextRecord",
            )?),
            dropped: std::mem::transmute::<*mut c_void, DroppedFn>(sym(
                c"cuptiActivityGetNumDroppedRecords",
            )?),
            result_string: std::mem::transmute::<*mut c_void, ResultStringFn>(sym(
                c"cuptiGetResultString",
            )?),
            subscribe: std::mem::transmute::<*mut c_void, SubscribeFn>(sym(c"cuptiSubscribe")?),
            enable_callback: std::mem::transmute::<*mut c_void, EnableCallbackFn>(sym(
                c"cuptiEnableCallback",
            )?),
            enable_domain: std::mem::transmute::<*mut c_void, EnableDomainFn>(sym(
                c"cuptiEnableDomain",
            )?),
            callback_name: std::mem::transmute::<*mut c_void, CallbackNameFn>(sym(
                c"cuptiGetCallbackName",
            )?),
            context_id: std::mem::transmute::<*mut c_void, ContextIdFn>(sym(c"cuptiGetContextId")?),
            set_attribute: sym(c"cuptiActivitySetAttribute")
                .ok()
                .map(|p| std::mem::transmute::<*mut c_void, SetAttributeFn>(p)),
            cubin_crc: sym(c"cuptiGetCubinCrc")
                .ok()
                .map(|p| std::mem::transmute::<*mut c_void, GetCubinCrcFn>(p)),
            pc_sampling: crate::state::config()
                .pc_sampling
                .on
                .then(|| PcApi::load(sym)),
            profiler: crate::state::config()
                .metrics
                .is_some()
                .then(|| ProfApi::load(sym)),
            sass: crate::state::config()
                .source_counters
                .then(|| SassApi::load(sym)),
        })
    }
}

pub(super) fn describe(api: &Api, rc: i32) -> String {
    let mut s: *const c_char = std::ptr::null();
    // SAFETY: CUPTI writes a pointer to a static string.
    if unsafe { (api.result_string)(rc, &mut s) } == 0 && !s.is_null() {
        // SAFETY: a NUL-terminated static string.
        return format!("{} ({rc})", unsafe { CStr::from_ptr(s) }.to_string_lossy());
    }
    format!("CUPTI error {rc}")
}
