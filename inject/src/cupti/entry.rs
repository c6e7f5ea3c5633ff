//! CUPTI's profiling entry points looked up by name and called with their one parameter
//! structure (`rtrace-cupti-abi`'s), for the kernel profiler and source counters; below every
//! other room of `cupti/`.

use rtrace_cupti_abi::{Call, CuptiResult};
use std::ffi::{c_void, CStr};

/// Looks `name` up with `sym` as an entry point taking `P`.
///
/// # Safety
/// `name` must be a CUPTI function whose C signature is `CUptiResult (P *)`.
pub(super) unsafe fn entry<P>(
    sym: &impl Fn(&CStr) -> Result<*mut c_void, String>,
    name: &CStr,
) -> Result<Call<P>, String> {
    let p = sym(name)?;
    // SAFETY: the caller names a CUPTI function taking one `P *` and returning CUptiResult.
    Ok(unsafe { std::mem::transmute::<*mut c_void, Call<P>>(p) })
}

/// Calls a CUPTI entry point with its parameters; its result.
pub(super) fn call<P>(f: Call<P>, p: &mut P) -> CuptiResult {
    // SAFETY: `f` was looked up as the entry point taking `P`; `p` is a live, initialized
    // parameter structure (`P::new()`), whose pointers the caller set to live buffers.
    unsafe { f(p) }
}
