//! `cuGetProcAddress` and `cuGetProcAddress_v2`: the route by which libcudart
//! (shared or static) reaches every driver function. The real driver picks the
//! function for the requested name, `cudaVersion` and flags; rtrace hands back
//! the wrapper of exactly the export it picked (matched by address), so the
//! caller gets the ABI it asked for.

use crate::state::{self, State, UNWRAPPED_LOOKUPS};
use crate::{diag, driver, generated, got, hook, thread};
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::Ordering;

/// The address of the exported wrapper for function `id` (what cuGetProcAddress and dlsym hand
/// out): the generated table's, or this file's for the two functions written here; null for an
/// id out of range.
pub fn wrapper_address(id: usize) -> *mut c_void {
    if id == generated::id::cuGetProcAddress as usize {
        cuGetProcAddress as *mut c_void
    } else if id == generated::id::cuGetProcAddress_v2 as usize {
        cuGetProcAddress_v2 as *mut c_void
    } else {
        generated::wrapper_address(id)
    }
}

/// Replaces the driver function in `*pfn` by its wrapper.
///
/// # Safety
/// `pfn` must be the pointer the caller passed to cuGetProcAddress and `symbol` its name.
unsafe fn substitute(symbol: *const c_char, pfn: *mut *mut c_void) {
    if pfn.is_null() || state::state() == State::Disabled {
        return;
    }
    // SAFETY: the driver just wrote a function pointer here.
    let p = unsafe { *pfn };
    // A driver whose own references bind to our exports (no -Bsymbolic) returns our wrapper.
    if p.is_null() || driver::is_own_address(p) {
        return;
    }
    let found =
        thread::with_errno_saved(|| thread::internal(|| driver::id_of_address(p))).flatten();
    match found {
        Some(id) => {
            // SAFETY: as above; a wrapper has the same ABI as the function it wraps.
            unsafe { *pfn = wrapper_address(id as usize) };
        }
        None => {
            UNWRAPPED_LOOKUPS.fetch_add(1, Ordering::Relaxed);
            if diag::enabled() && !symbol.is_null() {
                // SAFETY: the caller's NUL-terminated symbol name.
                let name = unsafe { CStr::from_ptr(symbol) }.to_string_lossy();
                diag::log(&[
                    "cuGetProcAddress: no wrapper for the function returned for ",
                    &name,
                ]);
            }
        }
    }
}

/// `CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)`
///
/// # Safety
/// Called by C code with the driver's contract.
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: i32,
    flags: u64,
) -> u32 {
    let id = generated::id::cuGetProcAddress;
    let p = hook::real(id);
    if p.is_null() {
        return hook::MISSING_RESULT;
    }
    // SAFETY: `p` is the driver's cuGetProcAddress, whose ABI this is.
    let f: unsafe extern "C" fn(*const c_char, *mut *mut c_void, i32, u64) -> u32 =
        unsafe { std::mem::transmute(p) };
    got::rescan();
    let token = hook::begin(id);
    // SAFETY: arguments passed through unchanged.
    let r = unsafe { f(symbol, pfn, cuda_version, flags) };
    hook::end(token, r);
    if r == 0 {
        // SAFETY: the caller's arguments.
        unsafe { substitute(symbol, pfn) };
    }
    r
}

/// `CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
/// cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)`
///
/// # Safety
/// Called by C code with the driver's contract.
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: i32,
    flags: u64,
    symbol_status: *mut i32,
) -> u32 {
    let id = generated::id::cuGetProcAddress_v2;
    let p = hook::real(id);
    if p.is_null() {
        return hook::MISSING_RESULT;
    }
    // SAFETY: `p` is the driver's cuGetProcAddress_v2, whose ABI this is.
    let f: unsafe extern "C" fn(*const c_char, *mut *mut c_void, i32, u64, *mut i32) -> u32 =
        unsafe { std::mem::transmute(p) };
    got::rescan();
    let token = hook::begin(id);
    // SAFETY: arguments passed through unchanged.
    let r = unsafe { f(symbol, pfn, cuda_version, flags, symbol_status) };
    hook::end(token, r);
    if r == 0 {
        // SAFETY: the caller's arguments.
        unsafe { substitute(symbol, pfn) };
    }
    r
}
