//! libstdc++'s `abi::__cxa_demangle`: the demangler of the GNU toolchain (libiberty's
//! `cp-demangle.c`, which `c++filt` runs too), and the one the PyTorch profiler calls.
//!
//! Linked by its soname (`-l:libstdc++.so.6`), so building needs no C++ development files and
//! the command runs wherever a C++ program would.

use std::ffi::{c_char, c_int, c_void, CStr, CString};

#[link(name = "libstdc++.so.6", kind = "dylib", modifiers = "+verbatim")]
unsafe extern "C" {
    fn __cxa_demangle(
        mangled: *const c_char,
        buffer: *mut c_char,
        length: *mut usize,
        status: *mut c_int,
    ) -> *mut c_char;
}

/// `symbol` demangled by `__cxa_demangle`; `None` where it is not a valid mangled name (or
/// holds a NUL byte).
pub fn cxa_demangle(symbol: &str) -> Option<String> {
    let mangled = CString::new(symbol).ok()?;
    let mut status: c_int = -1;
    // SAFETY: `mangled` is a NUL-terminated string that outlives the call; a null buffer and
    // length ask the function to allocate the result with malloc; `status` is a valid
    // pointer. The function reports failure through `status` and a null result; it does not
    // throw (it bounds its own recursion and returns -2 for names it refuses).
    let out = unsafe {
        __cxa_demangle(
            mangled.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut status,
        )
    };
    if out.is_null() {
        return None;
    }
    // SAFETY: a non-null result is a NUL-terminated string allocated with malloc, ours to
    // read and then free (once, below).
    let text = unsafe { CStr::from_ptr(out) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: `out` came from malloc inside __cxa_demangle and is not used after this.
    unsafe { libc::free(out.cast::<c_void>()) };
    (status == 0).then_some(text)
}
