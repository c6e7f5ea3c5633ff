//! The CUPTI entry points rtrace interposes, so that a program that is a CUPTI client itself
//! gets CUPTI whole (CUPTI 13.0 serves one client).

use super::*;

/// `cuptiActivityRegisterCallbacks` as the program sees it: rtrace steps aside, then CUPTI's
/// own function runs with the program's callbacks.
///
/// # Safety
/// CUPTI's contract for `cuptiActivityRegisterCallbacks`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn cuptiActivityRegisterCallbacks(
    request: RequestFn,
    complete: CompleteFn,
) -> i32 {
    static REAL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let real = next_cupti(&REAL, c"cuptiActivityRegisterCallbacks");
    if real == 0 {
        // No CUPTI behind us: CUPTI_ERROR_NOT_INITIALIZED, as a missing library would give.
        return 15;
    }
    if !crate::hook::in_rtrace() {
        let _ = crate::hook::with_errno_saved(|| internal(step_aside));
    }
    // SAFETY: `real` is CUPTI's own cuptiActivityRegisterCallbacks.
    unsafe { std::mem::transmute::<usize, RegisterFn>(real)(request, complete) }
}

#[cfg_attr(test, allow(dead_code))]
type SubscribeV2Fn =
    unsafe extern "C" fn(*mut *mut c_void, CallbackFn, *mut c_void, *mut c_void) -> i32;

/// Resolves CUPTI's own `name`, cached in `slot`: from the loaded libcupti.so.13 (a program
/// usually loads it as a dependency of its own, outside the global scope, so `RTLD_NEXT`
/// alone would miss it), else the next definition after librtrace.so.
#[cfg_attr(test, allow(dead_code))]
fn next_cupti(slot: &std::sync::atomic::AtomicUsize, name: &CStr) -> usize {
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
            interpose::real_dlsym(h, name.as_ptr())
        };
        if p.is_null() {
            p = interpose::real_dlsym(libc::RTLD_NEXT, name.as_ptr());
        }
        p as usize
    });
    slot.store(found, Ordering::Release);
    found
}

/// `cuptiSubscribe` as the program sees it: rtrace gives up its subscriber and its activity
/// buffers first (CUPTI 13.0 allows one subscriber), then CUPTI's own function runs.
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
    static REAL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let real = next_cupti(&REAL, c"cuptiSubscribe");
    if real == 0 {
        return 15;
    }
    if !crate::hook::in_rtrace() {
        let _ = crate::hook::with_errno_saved(|| internal(step_aside));
    }
    // SAFETY: `real` is CUPTI's own cuptiSubscribe.
    unsafe { std::mem::transmute::<usize, SubscribeFn>(real)(subscriber, callback, userdata) }
}

/// `cuptiSubscribe_v2`: as [`cuptiSubscribe`].
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
    static REAL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let real = next_cupti(&REAL, c"cuptiSubscribe_v2");
    if real == 0 {
        return 15;
    }
    if !crate::hook::in_rtrace() {
        let _ = crate::hook::with_errno_saved(|| internal(step_aside));
    }
    // SAFETY: `real` is CUPTI's own cuptiSubscribe_v2.
    unsafe {
        std::mem::transmute::<usize, SubscribeV2Fn>(real)(subscriber, callback, userdata, params)
    }
}
