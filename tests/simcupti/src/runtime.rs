//! The runtime API domain of the callback API (`CUPTI_CB_DOMAIN_RUNTIME_API`), for a
//! simulated CUDA runtime (`tests/simcudart`): it reports each runtime call's entry and exit
//! through [`simcupti_runtime_enter`] and [`simcupti_runtime_exit`], as real CUPTI hooks the
//! real `libcudart`.
//!
//! While runtime callbacks are enabled (any runtime callback id on the subscriber) or
//! `CUPTI_ACTIVITY_KIND_RUNTIME` is, every runtime call gets a correlation id at entry, and the
//! subscriber's callback runs at entry and exit with `CUpti_CallbackData` as for a driver call
//! (`functionName` the runtime function's name, `functionReturnValue` pointing to the
//! `cudaError_t` at exit). The driver calls a runtime call makes keep their own correlation
//! ids in their callbacks and driver records, but the GPU work they queue carries the runtime
//! call's (README.md, "Runtime API").

use std::cell::RefCell;
use std::ffi::{c_void, CString};
use std::sync::OnceLock;

use crate::layout::*;
use crate::state::{self, CallbackData, CallbackFn};

/// A runtime call in progress: its callback id, correlation id (0: none) and
/// `correlationData` slot (boxed: the address the callback got stays put).
struct Call {
    cbid: u32,
    correlation: u32,
    slot: Box<u64>,
}

thread_local! {
    /// The runtime calls in progress on this thread, innermost last.
    static CALLS: RefCell<Vec<Call>> = const { RefCell::new(Vec::new()) };
    /// The own correlation ids of the driver calls in progress on this thread, innermost last.
    static DRIVER_IDS: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// Number of runtime callback ids (`CUPTI_RUNTIME_TRACE_CBID_SIZE`).
pub fn cbid_count() -> usize {
    rtrace_format::RUNTIME_API_CBID_NAMES.len()
}

/// The name `functionName` carries (the runtime function's, without CUPTI's ABI version).
fn name(cbid: u32) -> *const std::ffi::c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        (0..cbid_count() as u32)
            .map(|c| {
                CString::new(rtrace_format::runtime_api_name(c).unwrap_or("")).unwrap_or_default()
            })
            .collect()
    });
    names
        .get(cbid as usize)
        .map_or(std::ptr::null(), |n| n.as_ptr())
}

/// `SIMCUPTI_RUNTIME_WORK=driver` (read once): GPU work queued inside a runtime call carries the
/// driver call's correlation id, not the runtime call's (README.md, "Runtime API").
fn work_carries_driver_id() -> bool {
    static DRIVER: OnceLock<bool> = OnceLock::new();
    *DRIVER.get_or_init(|| std::env::var_os("SIMCUPTI_RUNTIME_WORK").is_some_and(|v| v == "driver"))
}

/// A driver call is entered with its own correlation id `own`: the id its GPU work carries
/// (the runtime call's in progress on this thread, if it has one, else `own`).
pub fn driver_enter(own: u32) -> u32 {
    let _ = DRIVER_IDS.try_with(|d| d.borrow_mut().push(own));
    if work_carries_driver_id() {
        return own;
    }
    let outer = CALLS
        .try_with(|c| c.borrow().last().map_or(0, |c| c.correlation))
        .unwrap_or(0);
    if outer != 0 && own != 0 {
        outer
    } else {
        own
    }
}

/// The driver call entered last on this thread returns: its own correlation id.
pub fn driver_exit(work: u32) -> u32 {
    DRIVER_IDS
        .try_with(|d| d.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or(work)
}

fn callback(cb: (CallbackFn, usize), site: u32, call: &Call, result: &u32) {
    use crate::layout::callback_data as d;
    let mut data = CallbackData::zeroed();
    data.put(d::CALLBACK_SITE, d::CALLBACK_SITE_LEN, u64::from(site));
    data.put(
        d::FUNCTION_NAME,
        d::FUNCTION_NAME_LEN,
        name(call.cbid) as u64,
    );
    let ret = result as *const u32 as u64;
    data.put(d::FUNCTION_RETURN_VALUE, d::FUNCTION_RETURN_VALUE_LEN, ret);
    let slot = &*call.slot as *const u64 as u64;
    data.put(d::CORRELATION_DATA, d::CORRELATION_DATA_LEN, slot);
    data.put(
        d::CORRELATION_ID,
        d::CORRELATION_ID_LEN,
        u64::from(call.correlation),
    );
    // SAFETY: the subscriber's callback with CUPTI's arguments; `data` outlives the call.
    state::in_client(|| unsafe {
        (cb.0)(
            cb.1 as *mut c_void,
            CUPTI_CB_DOMAIN_RUNTIME_API,
            call.cbid,
            data.as_ptr(),
        )
    });
}

/// The subscriber's callback for runtime id `cbid`, if enabled; and whether runtime calls get
/// correlation ids now.
fn lookup(cbid: u32) -> (Option<(CallbackFn, usize)>, bool) {
    state::with(|st| {
        let cb = st
            .subscriber
            .as_ref()
            .filter(|s| s.runtime.get(cbid as usize) == Some(&true))
            .map(|s| (s.callback, s.userdata));
        let traced = st
            .subscriber
            .as_ref()
            .is_some_and(|s| s.runtime.iter().any(|&on| on))
            || st.on(CUPTI_ACTIVITY_KIND_RUNTIME);
        (cb, traced && st.attached())
    })
}

/// The simulated runtime enters function `cbid` on this thread; returns its correlation id
/// (0: none). Every call must be paired with [`simcupti_runtime_exit`] on the same thread.
#[no_mangle]
pub extern "C" fn simcupti_runtime_enter(cbid: u32) -> u32 {
    let run = || {
        let (cb, traced) = if state::is_in_client() {
            (None, false)
        } else {
            lookup(cbid)
        };
        let correlation = if traced {
            state::with(|st| st.take_correlation())
        } else {
            0
        };
        let call = Call {
            cbid,
            correlation,
            slot: Box::new(0),
        };
        if let Some(cb) = cb {
            callback(cb, CUPTI_API_ENTER, &call, &0);
        }
        let _ = CALLS.try_with(|c| c.borrow_mut().push(call));
        correlation
    };
    std::panic::catch_unwind(run).unwrap_or(0)
}

/// The simulated runtime's function entered last on this thread returns `result`.
#[no_mangle]
pub extern "C" fn simcupti_runtime_exit(cbid: u32, result: u32) {
    let run = || {
        let Some(call) = CALLS.try_with(|c| c.borrow_mut().pop()).ok().flatten() else {
            return;
        };
        if call.correlation == 0 || state::is_in_client() {
            return;
        }
        if let (Some(cb), _) = lookup(cbid) {
            callback(cb, CUPTI_API_EXIT, &call, &result);
        }
    };
    let _ = std::panic::catch_unwind(run);
}
