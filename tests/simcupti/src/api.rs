//! The exported CUPTI functions, with the C ABI of CUPTI 13.0's headers (`CUptiResult` is a C
//! enum: `u32`). Each catches panics (`CUPTI_ERROR_UNKNOWN`) and preserves `errno`.

#![allow(clippy::missing_safety_doc, non_snake_case)]

use std::os::raw::{c_char, c_void};
use std::sync::atomic::Ordering;

use crate::buffer;
use crate::layout::*;
use crate::state::{self, CallbackFn, CompleteFn, RequestFn, Subscriber, TimestampFn, CBID_SIZE};

/// Runs an exported function's body: panics become `CUPTI_ERROR_UNKNOWN`; `errno` is kept.
pub(crate) fn call(body: impl FnOnce() -> u32) -> u32 {
    // SAFETY: __errno_location returns this thread's errno slot.
    let saved = unsafe { *libc::__errno_location() };
    let rc =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(CUPTI_ERROR_UNKNOWN);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
    rc
}

/// The subscriber handle simcupti hands out (an address, never dereferenced by clients).
fn subscriber_handle() -> *mut c_void {
    static TOKEN: u8 = 0;
    &TOKEN as *const u8 as *mut c_void
}

fn result_name(result: u32) -> Option<&'static str> {
    CUPTI_RESULT_NAMES
        .iter()
        .find(|(v, _)| *v == result)
        .map(|(_, n)| *n)
}

/// NUL-terminated copies of the result names, for `cuptiGetResultString`.
fn result_cstr(result: u32) -> Option<&'static std::ffi::CStr> {
    use std::collections::BTreeMap;
    use std::ffi::CString;
    static NAMES: std::sync::OnceLock<BTreeMap<u32, CString>> = std::sync::OnceLock::new();
    NAMES
        .get_or_init(|| {
            CUPTI_RESULT_NAMES
                .iter()
                .filter_map(|&(v, n)| Some((v, CString::new(n).ok()?)))
                .collect()
        })
        .get(&result)
        .map(CString::as_c_str)
}

#[no_mangle]
pub unsafe extern "C" fn cuptiActivityRegisterCallbacks(
    funcBufferRequested: Option<RequestFn>,
    funcBufferCompleted: Option<CompleteFn>,
) -> u32 {
    call(|| match (funcBufferRequested, funcBufferCompleted) {
        (Some(r), Some(c)) => state::with(|st| {
            st.request = Some(r);
            st.complete = Some(c);
            CUPTI_SUCCESS
        }),
        _ => CUPTI_ERROR_INVALID_PARAMETER,
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiActivityRegisterTimestampCallback(
    funcTimestamp: Option<TimestampFn>,
) -> u32 {
    call(|| match funcTimestamp {
        Some(f) => state::with(|st| {
            st.timestamp = Some(f);
            // Registered after T0 was read: later records are on the new clock, continuing
            // from the host's virtual time now (as CUPTI 13.0 put records made after a late
            // registration on the new clock).
            if let (Some(_), Some(sim)) = (st.t0, state::sim()) {
                let monotonic_now = crate::sim::monotonic_ns();
                // SAFETY: the client's timestamp callback.
                let now = state::in_client(|| unsafe { f() });
                let host_now = if state::real_clock() {
                    monotonic_now
                } else {
                    sim.host_now()
                };
                st.t0 = Some(now.wrapping_sub(host_now));
            }
            CUPTI_SUCCESS
        }),
        None => CUPTI_ERROR_INVALID_PARAMETER,
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiActivityEnable(kind: u32) -> u32 {
    call(|| state::with(|st| st.enable(kind)))
}

#[no_mangle]
pub unsafe extern "C" fn cuptiActivityDisable(kind: u32) -> u32 {
    call(|| {
        state::with(|st| st.disable(kind));
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiActivityFlushAll(flag: u32) -> u32 {
    call(|| {
        state::flush_all(flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED != 0);
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiActivityGetNextRecord(
    buffer: *mut u8,
    validBufferSizeBytes: usize,
    record: *mut *mut c_void,
) -> u32 {
    call(|| {
        if buffer.is_null() || record.is_null() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: the caller's record cursor.
        let cur = unsafe { *record } as *mut u8;
        let base = buffer as usize;
        let current = if cur.is_null() {
            None
        } else {
            match (cur as usize).checked_sub(base) {
                Some(off) => Some(off),
                None => return CUPTI_ERROR_INVALID_PARAMETER,
            }
        };
        // SAFETY: `next_record` only reads kinds at offsets with 4 bytes inside `valid`, which
        // the caller says lie in its buffer.
        let read_kind = |at: usize| unsafe { (buffer.add(at) as *const u32).read_unaligned() };
        match buffer::next_record(base, validBufferSizeBytes, current, read_kind) {
            Ok(at) => {
                // SAFETY: the caller's out-parameter; `at` lies inside the buffer.
                unsafe { *record = buffer.add(at).cast() };
                CUPTI_SUCCESS
            }
            Err(code) => code,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiActivityGetNumDroppedRecords(
    context: *mut c_void,
    streamId: u32,
    dropped: *mut usize,
) -> u32 {
    let _ = (context, streamId);
    call(|| {
        if dropped.is_null() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        let n = state::DROPPED.swap(0, Ordering::Relaxed);
        // SAFETY: checked non-NULL.
        unsafe { dropped.write_unaligned(n as usize) };
        CUPTI_SUCCESS
    })
}

/// `CUpti_ActivityAttribute` values whose value is a `size_t`, and those whose value is a
/// `uint8_t` (cupti_activity.h, CUPTI 13.0); 3, 4 and 7 are "not supported starting with CUDA
/// 12.3".
const SIZE_T_ATTRIBUTES: [u32; 5] = [0, 1, 2, 6, 10];
const U8_ATTRIBUTES: [u32; 3] = [5, 8, 9];
/// `CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER`.
const ZEROED_OUT_ACTIVITY_BUFFER: u32 = 5;

#[no_mangle]
pub unsafe extern "C" fn cuptiActivitySetAttribute(
    attribute: u32,
    valueSize: *mut usize,
    value: *mut c_void,
) -> u32 {
    call(|| {
        if valueSize.is_null() || value.is_null() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: checked non-NULL.
        let size = unsafe { valueSize.read_unaligned() };
        let want = if SIZE_T_ATTRIBUTES.contains(&attribute) {
            std::mem::size_of::<usize>()
        } else if U8_ATTRIBUTES.contains(&attribute) {
            1
        } else if [3, 4, 7].contains(&attribute) {
            return CUPTI_ERROR_NOT_SUPPORTED;
        } else {
            return CUPTI_ERROR_INVALID_PARAMETER;
        };
        if size != want {
            return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
        }
        if attribute == ZEROED_OUT_ACTIVITY_BUFFER {
            // SAFETY: a uint8_t, checked non-NULL.
            let on = unsafe { (value as *const u8).read() } != 0;
            state::CLIENT_ZEROES.store(on, Ordering::Relaxed);
        }
        CUPTI_SUCCESS
    })
}

/// `cuptiGetCubinCrc`: the CRC-32 (IEEE) of the image, as the simulated CUPTI's key.
#[no_mangle]
pub unsafe extern "C" fn cuptiGetCubinCrc(params: *mut c_void) -> u32 {
    call(|| {
        if params.is_null() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: a CUpti_GetCubinCrcParams: size, cubinSize, cubin, cubinCrc (8 bytes each).
        let (size, len, cubin) = unsafe {
            let p = params as *const usize;
            (p.read(), p.add(1).read(), p.add(2).read() as *const u8)
        };
        if size < 32 || len == 0 || cubin.is_null() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: the caller's image of `len` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(cubin, len) };
        let crc = crate::pcsampling::crc32(bytes);
        // SAFETY: as above; cubinCrc is the fourth field.
        unsafe { (params as *mut u64).add(3).write(crc) };
        CUPTI_SUCCESS
    })
}

fn external_kind_ok(kind: u32) -> bool {
    kind > CUPTI_EXTERNAL_CORRELATION_KIND_INVALID && kind < CUPTI_EXTERNAL_CORRELATION_KIND_SIZE
}

#[no_mangle]
pub unsafe extern "C" fn cuptiActivityPushExternalCorrelationId(kind: u32, id: u64) -> u32 {
    call(|| {
        if !external_kind_ok(kind) {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        state::with_external(|e| e[kind as usize].push(id));
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiActivityPopExternalCorrelationId(kind: u32, lastId: *mut u64) -> u32 {
    call(|| {
        if !external_kind_ok(kind) {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        match state::with_external(|e| e[kind as usize].pop()).flatten() {
            Some(id) => {
                if !lastId.is_null() {
                    // SAFETY: a non-NULL out-parameter.
                    unsafe { lastId.write_unaligned(id) };
                }
                CUPTI_SUCCESS
            }
            None => CUPTI_ERROR_QUEUE_EMPTY,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiGetTimestamp(timestamp: *mut u64) -> u32 {
    call(|| {
        if timestamp.is_null() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        let f = state::with(|st| st.timestamp);
        let t = match f {
            // SAFETY: the client's timestamp callback.
            Some(f) => state::in_client(|| unsafe { f() }),
            None => state::realtime_ns(),
        };
        // SAFETY: checked non-NULL.
        unsafe { timestamp.write_unaligned(t) };
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiGetResultString(result: u32, str_: *mut *const c_char) -> u32 {
    call(|| {
        if str_.is_null() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        let (s, rc) = match result_cstr(result) {
            Some(c) => (c.as_ptr(), CUPTI_SUCCESS),
            None => (c"<unknown>".as_ptr(), CUPTI_ERROR_INVALID_PARAMETER),
        };
        debug_assert!(result_name(result).is_some() == (rc == CUPTI_SUCCESS));
        // SAFETY: checked non-NULL; the strings are static.
        unsafe { str_.write_unaligned(s) };
        rc
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiGetVersion(version: *mut u32) -> u32 {
    call(|| {
        if version.is_null() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: checked non-NULL.
        unsafe { version.write_unaligned(CUPTI_API_VERSION) };
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiGetStreamIdEx(
    context: *mut c_void,
    stream: *mut c_void,
    perThreadStream: u8,
    streamId: *mut u32,
) -> u32 {
    call(|| {
        if streamId.is_null() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        match state::sim() {
            // SAFETY: checked non-NULL; simcuda writes the id.
            Some(sim) => unsafe { sim.stream_id(context, stream, perThreadStream, streamId) },
            None => CUPTI_ERROR_NOT_INITIALIZED,
        }
    })
}

/// The id simcuda gave the context (`INVALID_CONTEXT` for a NULL, unknown or destroyed one).
#[no_mangle]
pub unsafe extern "C" fn cuptiGetContextId(context: *mut c_void, contextId: *mut u32) -> u32 {
    call(|| {
        if contextId.is_null() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        match state::sim() {
            // SAFETY: checked non-NULL; simcuda writes the id.
            Some(sim) => unsafe { sim.context_id(context, contextId) },
            None => CUPTI_ERROR_NOT_INITIALIZED,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiFinalize() -> u32 {
    call(|| {
        state::flush_all(true);
        state::with(|st| st.finalize());
        CUPTI_SUCCESS
    })
}

/// CUPTI 13.0 returned `CUPTI_SUCCESS` here after failing calls of the activity API, too.
#[no_mangle]
pub unsafe extern "C" fn cuptiGetLastError() -> u32 {
    CUPTI_SUCCESS
}

// ---- the callback API (driver and resource domains)

/// Driver callback ids CUPTI accepts: 0 (`CUPTI_DRIVER_TRACE_CBID_INVALID`, named `INVALID`)
/// up to `CUPTI_DRIVER_TRACE_CBID_SIZE` (excluded).
fn cbid_ok(cbid: u32) -> bool {
    cbid < CBID_SIZE
}

/// Runtime callback ids accepted: 0 up to `CUPTI_RUNTIME_TRACE_CBID_SIZE` (excluded).
fn runtime_cbid_ok(cbid: u32) -> bool {
    (cbid as usize) < crate::runtime::cbid_count()
}

/// Resource callback ids accepted: 0 up to `CUPTI_CBID_RESOURCE_SIZE` (excluded).
fn resource_cbid_ok(cbid: u32) -> bool {
    cbid < CUPTI_CBID_RESOURCE_SIZE
}

fn subscribe(
    subscriber: *mut *mut c_void,
    callback: Option<CallbackFn>,
    userdata: *mut c_void,
) -> u32 {
    let Some(callback) = callback else {
        return CUPTI_ERROR_INVALID_PARAMETER;
    };
    if subscriber.is_null() {
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    state::with(|st| {
        if st.subscriber.is_some() {
            return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
        }
        if let Err(e) = st.attach() {
            return e;
        }
        st.subscriber = Some(Subscriber {
            callback,
            userdata: userdata as usize,
            driver: vec![false; CBID_SIZE as usize],
            resource: vec![false; CUPTI_CBID_RESOURCE_SIZE as usize],
            runtime: vec![false; crate::runtime::cbid_count()],
        });
        // SAFETY: checked non-NULL.
        unsafe { subscriber.write_unaligned(subscriber_handle()) };
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiSubscribe(
    subscriber: *mut *mut c_void,
    callback: Option<CallbackFn>,
    userdata: *mut c_void,
) -> u32 {
    call(|| subscribe(subscriber, callback, userdata))
}

/// As `cuptiSubscribe`; `pParams` (the subscriber's name) is ignored.
#[no_mangle]
pub unsafe extern "C" fn cuptiSubscribe_v2(
    subscriber: *mut *mut c_void,
    callback: Option<CallbackFn>,
    userdata: *mut c_void,
    pParams: *mut c_void,
) -> u32 {
    let _ = pParams;
    call(|| subscribe(subscriber, callback, userdata))
}

/// Runs `f` on the subscriber `handle` names.
fn with_subscriber(handle: *mut c_void, f: impl FnOnce(&mut Subscriber) -> u32) -> u32 {
    if handle != subscriber_handle() {
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    state::with(|st| match st.subscriber.as_mut() {
        Some(s) => f(s),
        None => CUPTI_ERROR_INVALID_PARAMETER,
    })
}

/// Unsubscribing the handle again succeeds, as with CUPTI 13.0.
#[no_mangle]
pub unsafe extern "C" fn cuptiUnsubscribe(subscriber: *mut c_void) -> u32 {
    call(|| {
        if subscriber != subscriber_handle() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        state::with(|st| st.subscriber = None);
        CUPTI_SUCCESS
    })
}

/// Only the driver API, runtime API and resource domains have callbacks here (of the resource
/// domain, only `CONTEXT_CREATED`, `CONTEXT_DESTROY_STARTING`, `MODULE_LOADED` and
/// `MODULE_UNLOAD_STARTING` are ever called; runtime callbacks come from a simulated runtime,
/// `runtime.rs`); enabling another valid domain's callbacks succeeds and does nothing.
#[no_mangle]
pub unsafe extern "C" fn cuptiEnableCallback(
    enable: u32,
    subscriber: *mut c_void,
    domain: u32,
    cbid: u32,
) -> u32 {
    call(|| {
        with_subscriber(subscriber, |s| match domain {
            CUPTI_CB_DOMAIN_DRIVER_API if cbid_ok(cbid) => {
                s.driver[cbid as usize] = enable != 0;
                CUPTI_SUCCESS
            }
            CUPTI_CB_DOMAIN_RESOURCE if resource_cbid_ok(cbid) => {
                s.resource[cbid as usize] = enable != 0;
                CUPTI_SUCCESS
            }
            CUPTI_CB_DOMAIN_RUNTIME_API if runtime_cbid_ok(cbid) => {
                s.runtime[cbid as usize] = enable != 0;
                CUPTI_SUCCESS
            }
            CUPTI_CB_DOMAIN_DRIVER_API | CUPTI_CB_DOMAIN_RESOURCE | CUPTI_CB_DOMAIN_RUNTIME_API => {
                CUPTI_ERROR_INVALID_PARAMETER
            }
            d if d > CUPTI_CB_DOMAIN_INVALID && d < CUPTI_CB_DOMAIN_SIZE => CUPTI_SUCCESS,
            _ => CUPTI_ERROR_INVALID_PARAMETER,
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiEnableDomain(
    enable: u32,
    subscriber: *mut c_void,
    domain: u32,
) -> u32 {
    call(|| {
        with_subscriber(subscriber, |s| match domain {
            CUPTI_CB_DOMAIN_DRIVER_API => {
                for (cbid, on) in s.driver.iter_mut().enumerate() {
                    *on = enable != 0 && cbid_ok(cbid as u32);
                }
                CUPTI_SUCCESS
            }
            CUPTI_CB_DOMAIN_RESOURCE => {
                s.resource.fill(enable != 0);
                CUPTI_SUCCESS
            }
            CUPTI_CB_DOMAIN_RUNTIME_API => {
                for (cbid, on) in s.runtime.iter_mut().enumerate() {
                    *on = enable != 0 && cbid != 0;
                }
                CUPTI_SUCCESS
            }
            d if d > CUPTI_CB_DOMAIN_INVALID && d < CUPTI_CB_DOMAIN_SIZE => CUPTI_SUCCESS,
            _ => CUPTI_ERROR_INVALID_PARAMETER,
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiEnableAllDomains(enable: u32, subscriber: *mut c_void) -> u32 {
    // SAFETY: forwards its own arguments.
    match unsafe { cuptiEnableDomain(enable, subscriber, CUPTI_CB_DOMAIN_DRIVER_API) } {
        // SAFETY: as above.
        CUPTI_SUCCESS => {
            match unsafe { cuptiEnableDomain(enable, subscriber, CUPTI_CB_DOMAIN_RESOURCE) } {
                // SAFETY: as above.
                CUPTI_SUCCESS => unsafe {
                    cuptiEnableDomain(enable, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API)
                },
                e => e,
            }
        }
        e => e,
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuptiGetCallbackState(
    enable: *mut u32,
    subscriber: *mut c_void,
    domain: u32,
    cbid: u32,
) -> u32 {
    call(|| {
        if enable.is_null() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        with_subscriber(subscriber, |s| {
            let on = match domain {
                CUPTI_CB_DOMAIN_DRIVER_API if cbid_ok(cbid) => s.driver[cbid as usize],
                CUPTI_CB_DOMAIN_RESOURCE if resource_cbid_ok(cbid) => s.resource[cbid as usize],
                CUPTI_CB_DOMAIN_RUNTIME_API if runtime_cbid_ok(cbid) => s.runtime[cbid as usize],
                d if d > CUPTI_CB_DOMAIN_INVALID && d < CUPTI_CB_DOMAIN_SIZE => false,
                _ => return CUPTI_ERROR_INVALID_PARAMETER,
            };
            // SAFETY: checked non-NULL.
            unsafe { enable.write_unaligned(u32::from(on)) };
            CUPTI_SUCCESS
        })
    })
}

/// Names of the driver domain's callback ids (cupti_driver_cbid.h; id 0 is `INVALID`). For
/// another valid domain it succeeds without writing `*name`, as CUPTI 13.0 did for the runtime
/// domain.
#[no_mangle]
pub unsafe extern "C" fn cuptiGetCallbackName(
    domain: u32,
    cbid: u32,
    name: *mut *const c_char,
) -> u32 {
    call(|| {
        if name.is_null() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        let found = match domain {
            CUPTI_CB_DOMAIN_DRIVER_API if cbid == 0 => c"INVALID",
            CUPTI_CB_DOMAIN_DRIVER_API => match state::cbid_name(cbid) {
                Some(n) => n,
                None => return CUPTI_ERROR_INVALID_PARAMETER,
            },
            d if d > CUPTI_CB_DOMAIN_INVALID && d < CUPTI_CB_DOMAIN_SIZE => return CUPTI_SUCCESS,
            _ => return CUPTI_ERROR_INVALID_PARAMETER,
        };
        // SAFETY: checked non-NULL; the names are static.
        unsafe { name.write_unaligned(found.as_ptr()) };
        CUPTI_SUCCESS
    })
}
