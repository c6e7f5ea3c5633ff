//! The exported driver entry points, with the C ABI of `cuda.h` (CUDA 13.0).
//!
//! Every function is declared through [`api!`], which makes it `#[no_mangle] extern "C"` and runs
//! its body through `entry::call` (fault injection, panic catching, errno preservation). Bodies
//! return `Result<(), CUresult>`. Each function trusts its pointer arguments as the real driver
//! does: non-NULL pointers must be valid for the access the CUDA documentation describes.

#![allow(clippy::missing_safety_doc, non_snake_case)]

use std::os::raw::c_void;

use crate::errors::{CUresult, CUDA_ERROR_INVALID_VALUE};

/// Declares exported driver functions; see the module documentation.
macro_rules! api {
    ($(
        $(#[$meta:meta])*
        fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block
    )*) => {$(
        $(#[$meta])*
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $crate::errors::CUresult {
            static SITE: $crate::entry::Site = $crate::entry::Site::new(stringify!($name));
            $crate::entry::call(&SITE, move || -> Result<(), $crate::errors::CUresult> { $body })
        }
    )*};
}

pub mod context;
pub mod device;
pub mod memory;
pub mod misc;
pub mod module;
pub mod stream;

/// `CUDA_ERROR_INVALID_VALUE` for a NULL pointer argument.
fn need<T>(p: *const T) -> Result<(), CUresult> {
    if p.is_null() {
        Err(CUDA_ERROR_INVALID_VALUE)
    } else {
        Ok(())
    }
}

/// Stores `v` through the C out-parameter `p`, which the caller checked with [`need`].
///
/// # Safety
/// `p` must be non-NULL and valid for a write of `T`.
unsafe fn put<T>(p: *mut T, v: T) {
    // SAFETY: the caller's contract; C out-parameters may be unaligned for all we know.
    unsafe { p.write_unaligned(v) }
}

/// A C handle argument as a number.
fn h(p: *mut c_void) -> usize {
    p as usize
}

/// A handle number as a C handle.
fn ptr(h: usize) -> *mut c_void {
    h as *mut c_void
}
