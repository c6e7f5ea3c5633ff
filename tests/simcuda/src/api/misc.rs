//! Error strings, export tables and `cuGetProcAddress`. None of these take the state lock or
//! advance the virtual clock.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};

use super::{need, put};
use crate::errors::*;
use crate::procaddr::{self, Lookup};
use crate::types::*;

/// `CUdriverProcAddressQueryResult`
const SYMBOL_SUCCESS: CUenum = 0;
const SYMBOL_NOT_FOUND: CUenum = 1;
const VERSION_NOT_SUFFICIENT: CUenum = 2;

fn error_text(error: CUresult, pStr: *mut *const c_char, name: bool) -> Result<(), CUresult> {
    need(pStr)?;
    let found = lookup(error).map(|(n, s)| if name { n } else { s });
    // SAFETY: checked non-NULL; the strings are 'static.
    unsafe { put(pStr, found.map_or(std::ptr::null(), CStr::as_ptr)) };
    found.map(|_| ()).ok_or(CUDA_ERROR_INVALID_VALUE)
}

fn get_proc_address(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cudaVersion: c_int,
    flags: cuuint64_t,
    symbolStatus: *mut CUenum,
) -> Result<(), CUresult> {
    need(symbol)?;
    need(pfn)?;
    if flags > 2 {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: a non-NULL symbol is a NUL-terminated string.
    let name = unsafe { CStr::from_ptr(symbol) };
    let (f, status) = match procaddr::resolve(name.to_bytes(), cudaVersion, flags) {
        Lookup::Found(f) => (f as *mut c_void, SYMBOL_SUCCESS),
        Lookup::NotFound => (std::ptr::null_mut(), SYMBOL_NOT_FOUND),
        Lookup::VersionTooLow => (std::ptr::null_mut(), VERSION_NOT_SUFFICIENT),
    };
    // SAFETY: checked non-NULL.
    unsafe { put(pfn, f) };
    if !symbolStatus.is_null() {
        // SAFETY: non-NULL optional out-parameter.
        unsafe { put(symbolStatus, status) };
    }
    if status == SYMBOL_SUCCESS {
        Ok(())
    } else {
        Err(CUDA_ERROR_NOT_FOUND)
    }
}

api! {
    /// Lock-free. Unknown codes: `*pStr = NULL`, `CUDA_ERROR_INVALID_VALUE`.
    fn cuGetErrorString(error: CUresult, pStr: *mut *const c_char) {
        error_text(error, pStr, false)
    }

    /// Lock-free. Unknown codes: `*pStr = NULL`, `CUDA_ERROR_INVALID_VALUE`.
    fn cuGetErrorName(error: CUresult, pStr: *mut *const c_char) {
        error_text(error, pStr, true)
    }

    /// No private export tables: always `CUDA_ERROR_NOT_SUPPORTED` with `*ppExportTable = NULL`.
    fn cuGetExportTable(ppExportTable: *mut *const c_void, pExportTableId: *const c_void) {
        let _ = pExportTableId;
        if !ppExportTable.is_null() {
            // SAFETY: non-NULL out-parameter.
            unsafe { put(ppExportTable, std::ptr::null()) };
        }
        Err(CUDA_ERROR_NOT_SUPPORTED)
    }

    fn cuGetProcAddress(
        symbol: *const c_char,
        pfn: *mut *mut c_void,
        cudaVersion: c_int,
        flags: cuuint64_t,
    ) {
        get_proc_address(symbol, pfn, cudaVersion, flags, std::ptr::null_mut())
    }

    fn cuGetProcAddress_v2(
        symbol: *const c_char,
        pfn: *mut *mut c_void,
        cudaVersion: c_int,
        flags: cuuint64_t,
        symbolStatus: *mut CUenum,
    ) {
        get_proc_address(symbol, pfn, cudaVersion, flags, symbolStatus)
    }
}
