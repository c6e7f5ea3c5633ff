//! NVTX's injection entry point: the callback tables of each image that asks filled with
//! rtrace's callbacks (`events.rs`), and `NVTX_INJECTION64_PATH` pointed at this library.

use super::events::*;
use super::text::WChar;
use rtrace_format::env;
use std::ffi::{c_char, c_void, CStr};

type Fn0 = unsafe extern "C" fn();
pub type GetExportTable = unsafe extern "C" fn(u32) -> *const c_void;
type GetModuleFunctionTable =
    unsafe extern "C" fn(u32, *mut *mut *mut Option<Fn0>, *mut u32) -> i32;

/// `NvtxExportTableCallbacks` (nvtxTypes.h).
#[repr(C)]
struct ExportTableCallbacks {
    struct_size: usize,
    get_module_function_table: Option<GetModuleFunctionTable>,
}

/// `NvtxExportTableVersionInfo` (nvtxTypes.h).
#[repr(C)]
struct ExportTableVersionInfo {
    struct_size: usize,
    version: u32,
    reserved0: u32,
    set_injection_nvtx_version: Option<unsafe extern "C" fn(u32)>,
}

const ETID_CALLBACKS: u32 = 1;
const ETID_VERSIONINFO: u32 = 3;
const MODULE_CORE: u32 = 1;
const MODULE_CORE2: u32 = 5;
const NVTX_VERSION: u32 = 3;

/// Behind NVTX's entry point for a tool (`InitializeInjectionNvtx2`, exported by
/// `crate::interpose` once tracing runs with NVTX on): fills the callback tables of the
/// calling image. Returns 1 (attached) or 0 (not: NVTX's tables are not as expected), in which
/// case NVTX turns that image's calls into no-ops.
///
/// # Safety
/// Called with NVTX's `getExportTable` function.
pub unsafe fn attach(get: Option<GetExportTable>) -> i32 {
    guard(0, || {
        let Some(get) = get else { return 0 };
        // SAFETY: NVTX's getExportTable returns its static tables or NULL.
        let callbacks = unsafe { get(ETID_CALLBACKS) } as *const ExportTableCallbacks;
        if callbacks.is_null() {
            return 0;
        }
        // SAFETY: a non-NULL table of this layout, whose first field says its size.
        let callbacks = unsafe { &*callbacks };
        if callbacks.struct_size < std::mem::size_of::<ExportTableCallbacks>() {
            return 0;
        }
        let Some(gmft) = callbacks.get_module_function_table else {
            return 0;
        };
        // SAFETY: fills NVTX's slots with functions of the slot's signature (nvtxTypes.h).
        let filled = unsafe {
            fill(gmft, MODULE_CORE, &core_slots()) + fill(gmft, MODULE_CORE2, &core2_slots())
        };
        if filled == 0 {
            return 0;
        }
        // SAFETY: as above; the version table is optional.
        let version = unsafe { get(ETID_VERSIONINFO) } as *const ExportTableVersionInfo;
        if !version.is_null() {
            // SAFETY: a non-NULL table of this layout.
            let v = unsafe { &*version };
            if v.struct_size >= std::mem::size_of::<ExportTableVersionInfo>() {
                if let Some(set) = v.set_injection_nvtx_version {
                    // SAFETY: NVTX's own function.
                    unsafe { set(NVTX_VERSION) };
                }
            }
        }
        1
    })
}

/// Writes `slots` (callback id, function) into NVTX's table for `module`; returns how many.
///
/// # Safety
/// `gmft` is NVTX's GetModuleFunctionTable; each function has its slot's signature.
unsafe fn fill(gmft: GetModuleFunctionTable, module: u32, slots: &[(usize, Fn0)]) -> usize {
    let mut table: *mut *mut Option<Fn0> = std::ptr::null_mut();
    let mut size = 0u32;
    // SAFETY: valid out-pointers.
    if unsafe { gmft(module, &mut table, &mut size) } == 0 || table.is_null() {
        return 0;
    }
    let mut n = 0;
    for &(id, f) in slots {
        if id >= size as usize {
            continue;
        }
        // SAFETY: `table` has `size` entries (plus a NULL one); each non-NULL entry points at
        // the image's function-pointer variable for that callback id.
        unsafe {
            let slot = *table.add(id);
            if !slot.is_null() {
                *slot = Some(f);
                n += 1;
            }
        }
    }
    n
}

macro_rules! slot {
    ($f:expr, $t:ty) => {
        // SAFETY: NVTX calls the slot with the signature `$t`, the function's own.
        unsafe { std::mem::transmute::<$t, Fn0>($f as $t) }
    };
}

fn core_slots() -> [(usize, Fn0); 15] {
    [
        (1, slot!(mark_ex, unsafe extern "C" fn(Attr))),
        (2, slot!(mark_a, unsafe extern "C" fn(*const c_char))),
        (3, slot!(mark_w, unsafe extern "C" fn(*const WChar))),
        (4, slot!(range_start_ex, unsafe extern "C" fn(Attr) -> u64)),
        (
            5,
            slot!(range_start_a, unsafe extern "C" fn(*const c_char) -> u64),
        ),
        (
            6,
            slot!(range_start_w, unsafe extern "C" fn(*const WChar) -> u64),
        ),
        (7, slot!(range_end, unsafe extern "C" fn(u64))),
        (8, slot!(range_push_ex, unsafe extern "C" fn(Attr) -> i32)),
        (
            9,
            slot!(range_push_a, unsafe extern "C" fn(*const c_char) -> i32),
        ),
        (
            10,
            slot!(range_push_w, unsafe extern "C" fn(*const WChar) -> i32),
        ),
        (11, slot!(range_pop, unsafe extern "C" fn() -> i32)),
        (
            12,
            slot!(name_category_a, unsafe extern "C" fn(u32, *const c_char)),
        ),
        (
            13,
            slot!(name_category_w, unsafe extern "C" fn(u32, *const WChar)),
        ),
        (
            14,
            slot!(name_os_thread_a, unsafe extern "C" fn(u32, *const c_char)),
        ),
        (
            15,
            slot!(name_os_thread_w, unsafe extern "C" fn(u32, *const WChar)),
        ),
    ]
}

fn core2_slots() -> [(usize, Fn0); 13] {
    [
        (1, slot!(domain_mark_ex, unsafe extern "C" fn(Domain, Attr))),
        (
            2,
            slot!(
                domain_range_start_ex,
                unsafe extern "C" fn(Domain, Attr) -> u64
            ),
        ),
        (
            3,
            slot!(domain_range_end, unsafe extern "C" fn(Domain, u64)),
        ),
        (
            4,
            slot!(
                domain_range_push_ex,
                unsafe extern "C" fn(Domain, Attr) -> i32
            ),
        ),
        (
            5,
            slot!(domain_range_pop, unsafe extern "C" fn(Domain) -> i32),
        ),
        (
            8,
            slot!(
                domain_name_category_a,
                unsafe extern "C" fn(Domain, u32, *const c_char)
            ),
        ),
        (
            9,
            slot!(
                domain_name_category_w,
                unsafe extern "C" fn(Domain, u32, *const WChar)
            ),
        ),
        (
            10,
            slot!(
                domain_register_string_a,
                unsafe extern "C" fn(Domain, *const c_char) -> *const c_void
            ),
        ),
        (
            11,
            slot!(
                domain_register_string_w,
                unsafe extern "C" fn(Domain, *const WChar) -> *const c_void
            ),
        ),
        (
            12,
            slot!(
                domain_create_a,
                unsafe extern "C" fn(*const c_char) -> *const c_void
            ),
        ),
        (
            13,
            slot!(
                domain_create_w,
                unsafe extern "C" fn(*const WChar) -> *const c_void
            ),
        ),
        (14, slot!(domain_destroy, unsafe extern "C" fn(Domain))),
        (15, slot!(initialize, unsafe extern "C" fn(*const c_void))),
    ]
}

/// Points `NVTX_INJECTION64_PATH` at this library, unless it is set or `RTRACE_NVTX=0`.
/// Called once, when the library loads (before the program's threads).
pub fn announce() {
    if !crate::state::config().nvtx || std::env::var_os(env::NVTX_INJECTION64_PATH).is_some() {
        return;
    }
    let mut info = libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    // SAFETY: dladdr with the address of one of this library's functions and a valid out-struct.
    let ok = unsafe { libc::dladdr(announce as *const c_void, &mut info) } != 0;
    if !ok || info.dli_fname.is_null() {
        return;
    }
    // SAFETY: dladdr gives the object's path, NUL-terminated, valid while it is loaded.
    let path = unsafe { CStr::from_ptr(info.dli_fname) };
    // LD_PRELOAD may name it relative to a directory the program leaves.
    let path = std::path::Path::new(
        <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(path.to_bytes()),
    );
    let Ok(full) = std::fs::canonicalize(path) else {
        return;
    };
    let Ok(full) = std::ffi::CString::new(full.into_os_string().into_encoded_bytes()) else {
        return;
    };
    let Ok(name) = std::ffi::CString::new(env::NVTX_INJECTION64_PATH) else {
        return;
    };
    // SAFETY: both NUL-terminated; setenv copies them.
    unsafe { libc::setenv(name.as_ptr(), full.as_ptr(), 0) };
}
