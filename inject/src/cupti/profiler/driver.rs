//! The driver, through its real entry points: a function's name, the current context and its
//! device.

use std::ffi::{c_char, c_void, CStr};

type NameFn = unsafe extern "C" fn(*mut *const c_char, *mut c_void) -> u32;
type CtxFn = unsafe extern "C" fn(*mut *mut c_void) -> u32;
type DeviceFn = unsafe extern "C" fn(*mut i32) -> u32;

/// The driver's name of function (or library kernel) handle `f`: `cuFuncGetName`, else
/// `cuKernelGetName`.
pub(crate) fn function_name(f: *mut c_void) -> Option<String> {
    use crate::generated::id;
    for fid in [id::cuFuncGetName, id::cuKernelGetName] {
        let real = crate::driver::real(fid);
        if real.is_null() {
            continue;
        }
        // SAFETY: the driver's cuFuncGetName / cuKernelGetName, both
        // `CUresult (const char **name, handle)`.
        let get = unsafe { std::mem::transmute::<*mut c_void, NameFn>(real) };
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: the driver writes a pointer to a string it owns.
        if unsafe { get(&mut name, f) } == 0 && !name.is_null() {
            // SAFETY: a NUL-terminated string owned by the driver.
            return Some(
                unsafe { CStr::from_ptr(name) }
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
    None
}

/// The calling thread's current context (null: none).
pub(crate) fn current_context() -> *mut c_void {
    let real = crate::driver::real(crate::generated::id::cuCtxGetCurrent);
    if real.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: the driver's `CUresult cuCtxGetCurrent(CUcontext *)`.
    let get = unsafe { std::mem::transmute::<*mut c_void, CtxFn>(real) };
    let mut ctx = std::ptr::null_mut();
    // SAFETY: the driver writes the handle.
    if unsafe { get(&mut ctx) } != 0 {
        return std::ptr::null_mut();
    }
    ctx
}

/// The current context's device ordinal (0 if the driver cannot say).
pub(crate) fn current_device() -> i32 {
    let real = crate::driver::real(crate::generated::id::cuCtxGetDevice);
    if real.is_null() {
        return 0;
    }
    // SAFETY: the driver's `CUresult cuCtxGetDevice(CUdevice *)`.
    let get = unsafe { std::mem::transmute::<*mut c_void, DeviceFn>(real) };
    let mut dev = 0;
    // SAFETY: the driver writes the ordinal.
    if unsafe { get(&mut dev) } != 0 {
        return 0;
    }
    dev
}
