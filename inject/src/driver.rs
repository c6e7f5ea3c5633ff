//! The real driver: its handle, its functions by id, and the reverse map from a
//! real function's address to the id of the wrapper that stands for it.

use crate::generated::id::{FUNCTION_COUNT, FUNCTION_NAMES};
use crate::state;
use crate::sys::Leaked;
use crate::thread::{internal, with_errno_saved};
use std::ffi::{c_char, c_void, CString};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// libc's `dlsym`, resolved on first use.
pub(crate) static REAL_DLSYM: AtomicUsize = AtomicUsize::new(0);

type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

extern "C" {
    fn dlvsym(handle: *mut c_void, symbol: *const c_char, version: *const c_char) -> *mut c_void;
}

unsafe extern "C" fn dlsym_unavailable(_: *mut c_void, _: *const c_char) -> *mut c_void {
    std::ptr::null_mut()
}

/// Finds libc's `dlsym` (the next definition after this library).
pub(crate) extern "C" fn rtrace_resolve_dlsym() -> usize {
    let cur = REAL_DLSYM.load(Ordering::Acquire);
    if cur != 0 {
        return cur;
    }
    let mut p = std::ptr::null_mut();
    for v in [c"GLIBC_2.34", c"GLIBC_2.2.5"] {
        // SAFETY: dlvsym with valid C strings.
        p = unsafe { dlvsym(libc::RTLD_NEXT, c"dlsym".as_ptr(), v.as_ptr()) };
        if !p.is_null() {
            break;
        }
    }
    let f = if p.is_null() {
        dlsym_unavailable as *const () as usize
    } else {
        p as usize
    };
    REAL_DLSYM.store(f, Ordering::Release);
    f
}

/// Calls libc's `dlsym` (the pointers are only passed on).
pub(crate) fn real_dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    let f = rtrace_resolve_dlsym();
    // SAFETY: `f` is libc's dlsym (or a stub returning null).
    unsafe { std::mem::transmute::<usize, DlsymFn>(f)(handle, symbol) }
}

static HANDLE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// The driver library's handle; with `load`, opens it if the process has not.
pub fn handle(load: bool) -> *mut c_void {
    let h = HANDLE.load(Ordering::Acquire);
    if !h.is_null() {
        return h;
    }
    let Ok(name) = CString::new(state::config().cuda_library.as_bytes()) else {
        return std::ptr::null_mut();
    };
    let mut flags = libc::RTLD_LAZY | libc::RTLD_LOCAL | libc::RTLD_NOLOAD;
    // SAFETY: dlopen with a valid C string.
    let mut h = internal(|| unsafe { libc::dlopen(name.as_ptr(), flags) });
    if h.is_null() && load {
        flags &= !libc::RTLD_NOLOAD;
        // SAFETY: as above.
        h = internal(|| unsafe { libc::dlopen(name.as_ptr(), flags) });
    }
    if !h.is_null() {
        HANDLE.store(h, Ordering::Release);
    }
    h
}

/// Real driver functions, by function id; null until resolved.
static REAL: [AtomicPtr<c_void>; FUNCTION_COUNT] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; FUNCTION_COUNT];

/// The real driver function `id`, resolved from the driver on first use;
/// null when the driver does not export it.
#[inline(always)]
pub fn real(id: u32) -> *mut c_void {
    let Some(slot) = REAL.get(id as usize) else {
        return std::ptr::null_mut();
    };
    let p = slot.load(Ordering::Acquire);
    if !p.is_null() {
        return p;
    }
    resolve_real(id)
}

/// The real driver function `id` if it was resolved already (null otherwise): one load.
#[inline(always)]
pub fn resolved(id: u32) -> *mut c_void {
    REAL.get(id as usize)
        .map_or(std::ptr::null_mut(), |slot| slot.load(Ordering::Acquire))
}

#[cold]
fn resolve_real(id: u32) -> *mut c_void {
    let p = with_errno_saved(|| lookup(id)).unwrap_or(std::ptr::null_mut());
    if !p.is_null() {
        REAL[id as usize].store(p, Ordering::Release);
    }
    p
}

/// The function a wrapper calls for `id`: the next definition of its name after
/// librtrace.so in the global scope (the driver, or another interposer preloaded after us,
/// so that stacked tools keep working), else the driver's own (a driver opened with
/// `RTLD_LOCAL` is not in the global scope). Null if neither has it.
pub fn lookup(id: u32) -> *mut c_void {
    let Some(name) = FUNCTION_NAMES.get(id as usize) else {
        return std::ptr::null_mut();
    };
    let Ok(c) = CString::new(*name) else {
        return std::ptr::null_mut();
    };
    let next = internal(|| real_dlsym(libc::RTLD_NEXT, c.as_ptr()));
    if !next.is_null() {
        return next;
    }
    lookup_name(name, true)
}

/// The driver library's own export `id` (null if absent or the driver is not loaded).
pub fn driver_export(id: u32) -> *mut c_void {
    match FUNCTION_NAMES.get(id as usize) {
        Some(name) => lookup_name(name, false),
        None => std::ptr::null_mut(),
    }
}

fn lookup_name(name: &str, load: bool) -> *mut c_void {
    let h = handle(load);
    if h.is_null() {
        return std::ptr::null_mut();
    }
    let Ok(c) = CString::new(name) else {
        return std::ptr::null_mut();
    };
    internal(|| real_dlsym(h, c.as_ptr()))
}

/// Driver export address → wrapper id, for every export the driver has; built
/// once, when first needed (the driver is loaded by then). Racing callers each build it and the
/// first publishes: none waits for another, which may be waiting for the loader's lock (a
/// library's constructor calling the driver while `dlopen` holds it).
fn address_map() -> &'static [(usize, u32)] {
    static MAP: Leaked<Box<[(usize, u32)]>> = Leaked::new();
    MAP.get_or_publish(|| {
        let mut v: Vec<(usize, u32)> = (0..FUNCTION_COUNT as u32)
            .filter_map(|id| {
                let p = driver_export(id);
                (!p.is_null()).then_some((p as usize, id))
            })
            .collect();
        v.sort_unstable();
        v.into_boxed_slice()
    })
}

/// The wrapper id standing for real driver function `p`, if it is one.
pub fn id_of_address(p: *mut c_void) -> Option<u32> {
    if handle(false).is_null() {
        return None;
    }
    let map = address_map();
    map.binary_search_by_key(&(p as usize), |&(a, _)| a)
        .ok()
        .map(|i| map[i].1)
}

/// The address of one of the driver's exports (any), once the driver is loaded: tells the
/// driver library apart from other loaded objects.
pub fn some_export() -> Option<usize> {
    if handle(false).is_null() {
        return None;
    }
    address_map().first().map(|&(a, _)| a)
}

/// True if `p` lies in librtrace.so itself (one of its wrappers).
pub fn is_own_address(p: *mut c_void) -> bool {
    // SAFETY: dladdr only reads loader data; `info` is a valid out-pointer.
    let base_of = |addr: *const c_void| unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(addr, &mut info) == 0 {
            std::ptr::null_mut()
        } else {
            info.dli_fbase
        }
    };
    let own = base_of(is_own_address as *const c_void);
    !own.is_null() && base_of(p) == own
}
