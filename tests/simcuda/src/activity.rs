//! Activity reporting to a simulated CUPTI (`tests/simcupti`): the private exports declared in
//! `activity_abi.rs`, and the state of the call in progress that the entry points fill in (its
//! clock readings and the GPU operation it queued). The subscriber gives each call its
//! correlation id (CUPTI's rules live there).
//!
//! Nothing here costs anything until a subscriber exists: `begin` then reads one atomic.

use std::cell::RefCell;
use std::ffi::{CStr, CString};
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

pub use crate::activity_abi::*;
use crate::entry;
use crate::state::{handle, Kind};

/// The subscriber's callback (a `SimCallback`), 0 when none.
static CALLBACK: AtomicUsize = AtomicUsize::new(0);
/// The virtual host clock after the last call that took the state lock (a lock-free mirror).
pub static HOST_NOW: AtomicU64 = AtomicU64::new(0);

/// The call in progress on this thread, while a subscriber exists.
struct Pending {
    /// The exported function's name (a `Site`'s, static).
    function: &'static CStr,
    correlation_id: u32,
    context_id: u32,
    /// The host clock when the call started, read lock-free.
    start: u64,
    /// `(before its clock step, after the call)`, when the call took the state lock.
    clock: Option<(u64, u64)>,
    op: Option<SimOp>,
    /// Owns the kernel name `op.name` points to.
    name: Option<CString>,
    /// Own what a module op's `functions` points to.
    functions: Vec<SimFunction>,
    function_names: Vec<CString>,
}

thread_local! {
    static PENDING: RefCell<Option<Pending>> = const { RefCell::new(None) };
}

fn callback() -> Option<SimCallback> {
    match CALLBACK.load(Ordering::Acquire) {
        0 => None,
        // SAFETY: only `simcuda_activity_subscribe` stores non-zero values, and they came from
        // a `SimCallback`.
        f => Some(unsafe { std::mem::transmute::<usize, SimCallback>(f) }),
    }
}

fn context_handle(id: u32) -> *mut c_void {
    if id == 0 {
        std::ptr::null_mut()
    } else {
        handle(Kind::Context, u64::from(id)) as *mut c_void
    }
}

/// At the start of an exported call: tells the subscriber, if there is one, and returns whether
/// to report the call's end.
pub fn begin(name: impl FnOnce() -> &'static CStr) -> bool {
    let Some(cb) = callback() else {
        return false;
    };
    let name = name();
    let start = HOST_NOW.load(Ordering::Acquire);
    let context_id = entry::current().map_or(0, |c| c as u32);
    let call = SimCall {
        site: SIMCALL_ENTER,
        correlation_id: 0,
        name: name.as_ptr(),
        result: 0,
        context_id,
        context: context_handle(context_id),
        start_ns: start,
        end_ns: start,
        op: std::ptr::null(),
    };
    // SAFETY: the subscriber's callback takes a pointer to a SimCall valid during the call.
    let correlation_id = unsafe { cb(&call) };
    let pending = Pending {
        function: name,
        correlation_id,
        context_id,
        start,
        clock: None,
        op: None,
        name: None,
        functions: Vec::new(),
        function_names: Vec::new(),
    };
    PENDING
        .try_with(|p| *p.borrow_mut() = Some(pending))
        .is_ok()
}

/// Called by `entry::locked`: the host clock before this call's step and after the call.
pub fn clock(before: u64, after: u64) {
    HOST_NOW.store(after, Ordering::Release);
    let _ = PENDING.try_with(|p| {
        if let Some(p) = p.borrow_mut().as_mut() {
            p.clock = Some((before, after));
        }
    });
}

/// Whether the call in progress is reported (so its operation should be described).
pub fn wants_op() -> bool {
    PENDING.try_with(|p| p.borrow().is_some()).unwrap_or(false)
}

/// Records the GPU operation the call in progress queued (`name`: a kernel's name).
pub fn set_op(mut op: SimOp, name: Option<CString>) {
    let _ = PENDING.try_with(|p| {
        if let Some(p) = p.borrow_mut().as_mut() {
            op.name = name.as_ref().map_or(std::ptr::null(), |n| n.as_ptr());
            p.op = Some(op);
            p.name = name;
        }
    });
}

/// Reports an allocation (`SIMOP_ALLOC`) or release (`SIMOP_FREE`) by the call in progress:
/// `(device, context id)` of the allocation, its base address, size and CUPTI memory kind, at
/// virtual host time `at`.
pub fn report_memory(
    kind: u32,
    place: (u32, u32),
    address: u64,
    bytes: u64,
    memory_kind: u32,
    at: u64,
) {
    if !wants_op() {
        return;
    }
    let mut op = SimOp::zeroed(kind);
    (op.device, op.context_id) = place;
    op.stream_id = SIM_ID_NONE;
    op.start_ns = at;
    op.end_ns = at;
    op.address = address;
    op.bytes = bytes;
    op.dst_kind = memory_kind;
    op.event_id = SIM_ID_NONE;
    set_op(op, None);
}

/// Reports a host synchronization of `sync_type` (CUPTI's) by the call in progress:
/// `(device, context id, stream id)` (stream `SIM_ID_NONE` if none), the event's id
/// (`SIM_ID_NONE` if none), and the host clock before and after the wait.
pub fn report_sync(sync_type: u32, place: (u32, u32, u32), event_id: u32, wait: (u64, u64)) {
    if !wants_op() {
        return;
    }
    let mut op = SimOp::zeroed(SIMOP_SYNC);
    (op.device, op.context_id, op.stream_id) = place;
    (op.start_ns, op.end_ns) = wait;
    op.sync_type = sync_type;
    op.event_id = event_id;
    set_op(op, None);
}

/// Reports a context created by the call in progress: `(device, context id)` and its legacy
/// stream's id.
pub fn report_context(place: (u32, u32), legacy_stream: u32) {
    if !wants_op() {
        return;
    }
    let mut op = SimOp::zeroed(SIMOP_CONTEXT);
    (op.device, op.context_id) = place;
    op.stream_id = legacy_stream;
    op.event_id = SIM_ID_NONE;
    op.context = context_handle(place.1);
    set_op(op, None);
}

/// Reports a stream created by the call in progress: `(device, context id, stream id)`, its
/// `CUstream` flags and its (clamped) priority.
pub fn report_stream(place: (u32, u32, u32), flags: u32, priority: i32) {
    if !wants_op() {
        return;
    }
    let mut op = SimOp::zeroed(SIMOP_STREAM);
    (op.device, op.context_id, op.stream_id) = place;
    op.event_id = SIM_ID_NONE;
    op.context = context_handle(place.1);
    op.stream_flags = flags;
    op.priority = priority;
    set_op(op, None);
}

/// Reports a module loaded by the call in progress: `(device, context id)`, its id, its image
/// (pointer and length) and its functions `(object id, name)` in image order.
pub fn report_module(
    place: (u32, u32),
    module_id: u32,
    image: (*const c_void, u64),
    functions: Vec<(u32, CString)>,
) {
    if !wants_op() {
        return;
    }
    let mut op = SimOp::zeroed(SIMOP_MODULE);
    (op.device, op.context_id) = place;
    op.stream_id = SIM_ID_NONE;
    op.event_id = SIM_ID_NONE;
    op.context = context_handle(place.1);
    op.module_id = module_id;
    (op.image, op.image_size) = image;
    let _ = PENDING.try_with(|p| {
        if let Some(p) = p.borrow_mut().as_mut() {
            let (ids, names): (Vec<u32>, Vec<CString>) = functions.into_iter().unzip();
            p.functions = ids
                .iter()
                .zip(&names)
                .enumerate()
                .map(|(i, (&id, name))| SimFunction {
                    id,
                    index: i as u32,
                    name: name.as_ptr(),
                })
                .collect();
            p.function_names = names;
            op.functions = p.functions.as_ptr();
            op.function_count = p.functions.len() as u32;
            op.name = std::ptr::null();
            p.op = Some(op);
            p.name = None;
        }
    });
}

/// Reports a module about to be unloaded from the context at `place` (device, context id).
pub fn report_module_unload(place: (u32, u32), module_id: u32) {
    if !wants_op() {
        return;
    }
    let mut op = SimOp::zeroed(SIMOP_MODULE_UNLOAD);
    (op.device, op.context_id) = place;
    op.stream_id = SIM_ID_NONE;
    op.event_id = SIM_ID_NONE;
    op.context = context_handle(place.1);
    op.module_id = module_id;
    set_op(op, None);
}

/// Tells the subscriber, during the call in progress, that it is about to destroy the context
/// at `place` (device, context id), still alive (`SIMCALL_NOTICE`, `SIMOP_CONTEXT_DESTROY`).
/// Must be called outside simcuda's lock.
pub fn report_context_destroy(place: (u32, u32)) {
    let Some(cb) = callback() else {
        return;
    };
    let Some((name, correlation_id, context_id, start)) = PENDING
        .try_with(|p| {
            p.borrow()
                .as_ref()
                .map(|p| (p.function, p.correlation_id, p.context_id, p.start))
        })
        .ok()
        .flatten()
    else {
        return;
    };
    let mut op = SimOp::zeroed(SIMOP_CONTEXT_DESTROY);
    (op.device, op.context_id) = place;
    op.stream_id = SIM_ID_NONE;
    op.event_id = SIM_ID_NONE;
    op.context = context_handle(place.1);
    let call = SimCall {
        site: SIMCALL_NOTICE,
        correlation_id,
        name: name.as_ptr(),
        result: 0,
        context_id,
        context: context_handle(context_id),
        start_ns: start,
        end_ns: start,
        op: &op,
    };
    // SAFETY: as in `begin`; `call` and `op` outlive the callback.
    unsafe { cb(&call) };
}

/// At the end of a call that `begin` said to report: tells the subscriber.
pub fn end(name: &CStr, result: u32) {
    let Some(pending) = PENDING.try_with(|p| p.borrow_mut().take()).ok().flatten() else {
        return;
    };
    let Some(cb) = callback() else {
        return;
    };
    let (start_ns, end_ns) = pending.clock.unwrap_or((pending.start, pending.start));
    let call = SimCall {
        site: SIMCALL_EXIT,
        correlation_id: pending.correlation_id,
        name: name.as_ptr(),
        result,
        context_id: pending.context_id,
        context: context_handle(pending.context_id),
        start_ns,
        end_ns,
        op: pending
            .op
            .as_ref()
            .map_or(std::ptr::null(), |op| op as *const SimOp),
    };
    // SAFETY: as in `begin`; `call`, the op and the names it points to outlive the callback.
    unsafe { cb(&call) };
    drop(pending);
}

/// Subscribes `cb` (NULL unsubscribes). Returns 0, or -1 if `version` is not
/// `SIMCUDA_ACTIVITY_VERSION`.
///
/// # Safety
/// `cb` must be NULL or a function with the `SimCallback` signature that stays valid while
/// subscribed.
#[no_mangle]
pub unsafe extern "C" fn simcuda_activity_subscribe(
    version: u32,
    cb: Option<SimCallback>,
) -> c_int {
    if version != SIMCUDA_ACTIVITY_VERSION {
        return -1;
    }
    CALLBACK.store(cb.map_or(0, |f| f as usize), Ordering::Release);
    0
}

/// The virtual host clock now, ns.
#[no_mangle]
pub extern "C" fn simcuda_host_now() -> u64 {
    HOST_NOW.load(Ordering::Acquire)
}

/// How many devices the virtual GPU has (`SIMCUDA_DEVICES`), whether or not `cuInit` was
/// called: what `cuptiDeviceGetChipName` checks a device index against.
#[no_mangle]
pub extern "C" fn simcuda_device_count() -> c_int {
    crate::config::get().devices
}

/// `cuptiGetContextId`: the id of `ctx` (simcuda's object id, as in its handle), as a CUPTI
/// result code: `CUPTI_ERROR_INVALID_PARAMETER` for a NULL `id`, `CUPTI_ERROR_INVALID_CONTEXT`
/// for a NULL, unknown or destroyed context.
///
/// # Safety
/// `id` must be NULL or valid for a write of a `u32`.
#[no_mangle]
pub unsafe extern "C" fn simcuda_context_id(ctx: *mut c_void, id: *mut u32) -> u32 {
    const CUPTI_SUCCESS: u32 = 0;
    const CUPTI_ERROR_INVALID_PARAMETER: u32 = 1;
    const CUPTI_ERROR_INVALID_CONTEXT: u32 = 3;
    if id.is_null() {
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    match entry::with_state(|st, _| st.context_of(ctx as usize)) {
        Ok(v) => {
            // SAFETY: checked non-NULL; the caller's contract.
            unsafe { id.write_unaligned(v as u32) };
            CUPTI_SUCCESS
        }
        Err(_) => CUPTI_ERROR_INVALID_CONTEXT,
    }
}

/// `cuptiGetStreamIdEx`: the id of `stream` (see README.md, "Activity reporting"), as a CUPTI
/// result code.
///
/// # Safety
/// `id` must be NULL or valid for a write of a `u32`.
#[no_mangle]
pub unsafe extern "C" fn simcuda_stream_id(
    ctx: *mut c_void,
    stream: *mut c_void,
    per_thread: u8,
    id: *mut u32,
) -> u32 {
    const CUPTI_SUCCESS: u32 = 0;
    const CUPTI_ERROR_INVALID_PARAMETER: u32 = 1;
    if id.is_null() {
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    let r = entry::with_state(|st, caller| {
        st.cupti_stream_id(ctx as usize, stream as usize, per_thread != 0, caller)
    });
    match r {
        Ok(v) => {
            // SAFETY: checked non-NULL; the caller's contract.
            unsafe { id.write_unaligned(v) };
            CUPTI_SUCCESS
        }
        Err(code) => code,
    }
}

#[cfg(test)]
mod tests;
