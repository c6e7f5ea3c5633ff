//! The CUPTI entry points rtrace interposes, so that a program that is a CUPTI client itself
//! (the PyTorch profiler, say) shares CUPTI with rtrace (see `share.rs`): while rtrace's GPU
//! activity is on, these serve the program as CUPTI's second client; otherwise they are
//! CUPTI's own functions.

#[cfg_attr(test, allow(unused_imports))]
use super::api::{
    Api, CallbackFn, CompleteFn, DroppedFn, EnableCallbackFn, EnableDomainFn, EnableFn, FlushFn,
    RegisterFn, RegisterTimestampFn, RequestFn, SubscribeFn, TimestampFn, UnsubscribeFn,
};
use super::layout;
use super::share;
use super::state::CUPTI;
use crate::driver;
use crate::thread::internal;
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

#[cfg_attr(test, allow(dead_code))]
type SubscribeV2Fn =
    unsafe extern "C" fn(*mut *mut c_void, CallbackFn, *mut c_void, *mut c_void) -> i32;
#[cfg_attr(test, allow(dead_code))]
type GetStateFn = unsafe extern "C" fn(*mut u32, *mut c_void, u32, u32) -> i32;
#[cfg_attr(test, allow(dead_code))]
type FinalizeFn = unsafe extern "C" fn() -> i32;
#[cfg_attr(test, allow(dead_code))]
type EnableAllFn = unsafe extern "C" fn(u32, *mut c_void) -> i32;

/// `CUPTI_ERROR_NOT_INITIALIZED`, as a missing CUPTI would give.
#[cfg_attr(test, allow(dead_code))]
const NOT_INITIALIZED: i32 = layout::CUPTI_ERROR_NOT_INITIALIZED as i32;

/// Runs `shared` when rtrace serves the program's CUPTI calls (taking CUPTI first if rtrace's
/// GPU activity is asked for and `take` says this call starts a collection: the program's
/// first CUPTI call may come before its first `cuInit`), else `real`, CUPTI's
/// own function `name` (resolved once into `slot`). errno is kept; a panic is CUPTI_ERROR_UNKNOWN.
#[cfg_attr(test, allow(dead_code))]
fn serve(
    slot: &AtomicUsize,
    name: &CStr,
    take: bool,
    shared: impl FnOnce(&Api) -> i32,
    real: impl FnOnce(usize) -> i32,
) -> i32 {
    // rtrace's own CUPTI calls never come here (they use CUPTI's functions directly), so every
    // caller is the program's code, also inside a driver call (a CUDA_INJECTION64_PATH client
    // starts inside cuInit) or a callback rtrace forwards.
    let served = crate::thread::with_errno_saved(|| {
        internal(|| {
            if take {
                super::take_early();
            }
            match (share::sharing(), CUPTI.api.get()) {
                (true, Some(api)) => Some(shared(api)),
                _ => None,
            }
        })
    });
    match served {
        Some(Some(rc)) => return rc,
        Some(None) => {}
        None => return layout::CUPTI_ERROR_UNKNOWN as i32,
    }
    let f = next_cupti(slot, name);
    if f == 0 {
        return NOT_INITIALIZED;
    }
    real(f)
}

/// The program registers its activity buffer callbacks.
///
/// # Safety
/// CUPTI's contract for `cuptiActivityRegisterCallbacks`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn cuptiActivityRegisterCallbacks(
    request: RequestFn,
    complete: CompleteFn,
) -> i32 {
    let own = &CUPTI.own.register_callbacks;
    serve(
        own,
        c"cuptiActivityRegisterCallbacks",
        true,
        |_| share::register_callbacks(request as usize, complete as usize),
        |f| {
            // SAFETY: `f` is CUPTI's own cuptiActivityRegisterCallbacks.
            unsafe { std::mem::transmute::<usize, RegisterFn>(f)(request, complete) }
        },
    )
}

/// The program gives CUPTI its clock.
///
/// # Safety
/// CUPTI's contract for `cuptiActivityRegisterTimestampCallback`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn cuptiActivityRegisterTimestampCallback(f: TimestampFn) -> i32 {
    let own = &CUPTI.own.register_timestamp;
    serve(
        own,
        c"cuptiActivityRegisterTimestampCallback",
        true,
        |api| share::register_timestamp(api, f),
        |real| {
            // SAFETY: `real` is CUPTI's own function.
            unsafe { std::mem::transmute::<usize, RegisterTimestampFn>(real)(f) }
        },
    )
}

/// # Safety
/// CUPTI's contract for `cuptiActivityEnable`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn cuptiActivityEnable(kind: i32) -> i32 {
    let own = &CUPTI.own.enable;
    serve(
        own,
        c"cuptiActivityEnable",
        true,
        |api| share::enable_kind(api, kind),
        // SAFETY: CUPTI's own function.
        |f| unsafe { std::mem::transmute::<usize, EnableFn>(f)(kind) },
    )
}

/// # Safety
/// CUPTI's contract for `cuptiActivityDisable`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn cuptiActivityDisable(kind: i32) -> i32 {
    let own = &CUPTI.own.disable;
    serve(
        own,
        c"cuptiActivityDisable",
        false,
        |api| share::disable_kind(api, kind),
        // SAFETY: CUPTI's own function.
        |f| unsafe { std::mem::transmute::<usize, EnableFn>(f)(kind) },
    )
}

/// # Safety
/// CUPTI's contract for `cuptiActivityFlushAll`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn cuptiActivityFlushAll(flag: u32) -> i32 {
    let own = &CUPTI.own.flush_all;
    serve(
        own,
        c"cuptiActivityFlushAll",
        false,
        |api| share::flush_all(api, flag),
        // SAFETY: CUPTI's own function.
        |f| unsafe { std::mem::transmute::<usize, FlushFn>(f)(flag) },
    )
}

/// # Safety
/// CUPTI's contract for `cuptiActivityGetNumDroppedRecords`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn cuptiActivityGetNumDroppedRecords(
    ctx: *mut c_void,
    stream: u32,
    dropped: *mut usize,
) -> i32 {
    let own = &CUPTI.own.dropped;
    serve(
        own,
        c"cuptiActivityGetNumDroppedRecords",
        false,
        |_| share::dropped(dropped),
        // SAFETY: CUPTI's own function.
        |f| unsafe { std::mem::transmute::<usize, DroppedFn>(f)(ctx, stream, dropped) },
    )
}

/// The program subscribes: it gets a handle of rtrace's while rtrace holds CUPTI.
///
/// # Safety
/// CUPTI's contract for `cuptiSubscribe`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn cuptiSubscribe(
    subscriber: *mut *mut c_void,
    callback: CallbackFn,
    userdata: *mut c_void,
) -> i32 {
    let own = &CUPTI.own.subscribe;
    serve(
        own,
        c"cuptiSubscribe",
        true,
        |_| share::subscribe(subscriber, callback as usize, userdata as usize),
        |f| {
            // SAFETY: CUPTI's own function.
            unsafe { std::mem::transmute::<usize, SubscribeFn>(f)(subscriber, callback, userdata) }
        },
    )
}

/// `cuptiSubscribe_v2`: as [`cuptiSubscribe`] (its parameters name the subscriber).
///
/// # Safety
/// CUPTI's contract for `cuptiSubscribe_v2`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn cuptiSubscribe_v2(
    subscriber: *mut *mut c_void,
    callback: CallbackFn,
    userdata: *mut c_void,
    params: *mut c_void,
) -> i32 {
    let own = &CUPTI.own.subscribe_v2;
    serve(
        own,
        c"cuptiSubscribe_v2",
        true,
        |_| share::subscribe(subscriber, callback as usize, userdata as usize),
        |f| {
            // SAFETY: CUPTI's own function.
            unsafe {
                std::mem::transmute::<usize, SubscribeV2Fn>(f)(
                    subscriber, callback, userdata, params,
                )
            }
        },
    )
}

/// Whether `sub` is the handle rtrace gave the program (and rtrace still serves it).
#[cfg_attr(test, allow(dead_code))]
fn programs(sub: *mut c_void) -> bool {
    sub == share::handle() && share::sharing()
}

/// # Safety
/// CUPTI's contract for `cuptiUnsubscribe`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn cuptiUnsubscribe(sub: *mut c_void) -> i32 {
    let own = &CUPTI.own.unsubscribe;
    if programs(sub) {
        return serve(own, c"cuptiUnsubscribe", false, share::unsubscribe, |_| 0);
    }
    let f = next_cupti(own, c"cuptiUnsubscribe");
    if f == 0 {
        return NOT_INITIALIZED;
    }
    // SAFETY: CUPTI's own function.
    unsafe { std::mem::transmute::<usize, UnsubscribeFn>(f)(sub) }
}

/// # Safety
/// CUPTI's contract for `cuptiEnableCallback`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn cuptiEnableCallback(
    on: u32,
    sub: *mut c_void,
    domain: u32,
    cbid: u32,
) -> i32 {
    let own = &CUPTI.own.enable_callback;
    if programs(sub) {
        return serve(
            own,
            c"cuptiEnableCallback",
            false,
            |api| share::enable_callback(api, on, domain, cbid),
            |_| layout::CUPTI_ERROR_INVALID_PARAMETER as i32,
        );
    }
    let f = next_cupti(own, c"cuptiEnableCallback");
    if f == 0 {
        return NOT_INITIALIZED;
    }
    // SAFETY: CUPTI's own function.
    unsafe { std::mem::transmute::<usize, EnableCallbackFn>(f)(on, sub, domain, cbid) }
}

/// # Safety
/// CUPTI's contract for `cuptiEnableDomain`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn cuptiEnableDomain(on: u32, sub: *mut c_void, domain: u32) -> i32 {
    let own = &CUPTI.own.enable_domain;
    if programs(sub) {
        return serve(
            own,
            c"cuptiEnableDomain",
            false,
            |api| share::enable_domain(api, on, domain),
            |_| layout::CUPTI_ERROR_INVALID_PARAMETER as i32,
        );
    }
    let f = next_cupti(own, c"cuptiEnableDomain");
    if f == 0 {
        return NOT_INITIALIZED;
    }
    // SAFETY: CUPTI's own function.
    unsafe { std::mem::transmute::<usize, EnableDomainFn>(f)(on, sub, domain) }
}

/// # Safety
/// CUPTI's contract for `cuptiEnableAllDomains`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn cuptiEnableAllDomains(on: u32, sub: *mut c_void) -> i32 {
    let own = &CUPTI.own.enable_all_domains;
    if programs(sub) {
        return serve(
            own,
            c"cuptiEnableAllDomains",
            false,
            |api| {
                // Every domain CUPTI has (CUPTI_CB_DOMAIN_SIZE is 7).
                for domain in 1..layout::CUPTI_CB_DOMAIN_SIZE {
                    let rc = share::enable_domain(api, on, domain);
                    if rc != 0 {
                        return rc;
                    }
                }
                0
            },
            |_| layout::CUPTI_ERROR_INVALID_PARAMETER as i32,
        );
    }
    let f = next_cupti(own, c"cuptiEnableAllDomains");
    if f == 0 {
        return NOT_INITIALIZED;
    }
    // SAFETY: CUPTI's own function.
    unsafe { std::mem::transmute::<usize, EnableAllFn>(f)(on, sub) }
}

/// # Safety
/// CUPTI's contract for `cuptiGetCallbackState`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn cuptiGetCallbackState(
    enabled: *mut u32,
    sub: *mut c_void,
    domain: u32,
    cbid: u32,
) -> i32 {
    let own = &CUPTI.own.callback_state;
    if programs(sub) {
        return share::callback_state(enabled, domain, cbid);
    }
    let f = next_cupti(own, c"cuptiGetCallbackState");
    if f == 0 {
        return NOT_INITIALIZED;
    }
    // SAFETY: CUPTI's own function.
    unsafe { std::mem::transmute::<usize, GetStateFn>(f)(enabled, sub, domain, cbid) }
}

/// The program ends its CUPTI collection: while rtrace shares CUPTI, only the program's part
/// ends.
///
/// # Safety
/// CUPTI's contract for `cuptiFinalize`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn cuptiFinalize() -> i32 {
    let own = &CUPTI.own.finalize;
    serve(
        own,
        c"cuptiFinalize",
        false,
        share::finalize,
        // SAFETY: CUPTI's own function.
        |f| unsafe { std::mem::transmute::<usize, FinalizeFn>(f)() },
    )
}

/// Resolves CUPTI's own `name`, cached in `slot`: from the loaded libcupti.so.13 (a program
/// usually loads it as a dependency of its own, outside the global scope, so `RTLD_NEXT`
/// alone would miss it), else the next definition after librtrace.so.
#[cfg_attr(test, allow(dead_code))]
fn next_cupti(slot: &AtomicUsize, name: &CStr) -> usize {
    let cached = slot.load(Ordering::Acquire);
    if cached != 0 {
        return cached;
    }
    let found = internal(|| {
        // SAFETY: dlopen with a valid C string; RTLD_NOLOAD only finds a loaded library.
        let h = unsafe {
            libc::dlopen(
                c"libcupti.so.13".as_ptr(),
                libc::RTLD_NOW | libc::RTLD_NOLOAD,
            )
        };
        let mut p = if h.is_null() {
            std::ptr::null_mut()
        } else {
            driver::real_dlsym(h, name.as_ptr())
        };
        if p.is_null() {
            p = driver::real_dlsym(libc::RTLD_NEXT, name.as_ptr());
        }
        p as usize
    });
    slot.store(found, Ordering::Release);
    found
}

/// CUPTI's own `cuptiProfilerInitialize`, once resolved.
#[cfg_attr(test, allow(dead_code))]
static PROFILER_INITIALIZE: AtomicUsize = AtomicUsize::new(0);

/// The program starts CUPTI's profiler API itself (its own range profiler, PM sampling, ...):
/// rtrace's kernel profiling gives the counters up first (`profiler::yield_to_program`), so
/// that the program's profiling works as it would without rtrace. rtrace's own call goes to
/// CUPTI's function directly, never here.
///
/// # Safety
/// CUPTI's contract for `cuptiProfilerInitialize`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn cuptiProfilerInitialize(
    p: *mut rtrace_cupti_abi::ProfilerInitialize,
) -> i32 {
    let _ = std::panic::catch_unwind(|| {
        crate::thread::with_errno_saved(|| internal(super::profiler::yield_to_program))
    });
    let f = next_cupti(&PROFILER_INITIALIZE, c"cuptiProfilerInitialize");
    if f == 0 {
        return NOT_INITIALIZED;
    }
    // SAFETY: `f` is CUPTI's own cuptiProfilerInitialize; the program's argument as given.
    unsafe { std::mem::transmute::<usize, rtrace_cupti_abi::Call<_>>(f)(p) as i32 }
}
