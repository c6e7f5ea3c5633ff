//! The real runtime function behind an interposed runtime stub (`generated/runtime_stubs.rs`,
//! docs/runtime-api.md): libcudart's definition that the caller would have bound without
//! rtrace.
//!
//! A process may hold more than one libcudart (a PyTorch built for CUDA 13 beside a plugin
//! linked to libcudart.so.12, each opened `RTLD_LOCAL`), and rtrace's one export of a name
//! stands for all of them, so the definition is found from the caller: the object holding the
//! call's return address, looked up in that object's own scope (itself and its dependencies,
//! which hold the libcudart it was linked with). For the main program, whose scope is the
//! global one (rtrace first in it), and for a caller whose scope has none (it found rtrace's
//! export through `dlsym`), the next definition after rtrace in the global scope; failing that,
//! a loaded libcudart's.
//!
//! Hot path: the callers seen so far are a table of address ranges, each with the runtime that
//! serves it, and each runtime has its functions by stub index: a scan of a few ranges and one
//! load, no lock and no allocation. While the stubs do not record (CUPTI's route), a stub
//! called from the caller it was last called from jumps to its function by itself: one range
//! check in the stub's assembly, no trampoline ([`LAST_CALLER`]). A new caller or function
//! takes the cold path once (the loader's lookups, under a lock that is only tried: a caller
//! that finds it held resolves without caching). After a `dlclose` that unloaded a runtime or
//! a caller, everything is forgotten ([`after_dlclose`]): an unloaded runtime's functions must
//! not be called again.
#![cfg_attr(test, allow(dead_code))] // unit tests run the trampoline against stand-ins

use crate::driver::{is_own_address, real_dlsym};
use crate::runtime_ids::{RUNTIME_STUB_COUNT, RUNTIME_STUB_NAMES};
use crate::thread::{internal, with_errno_saved};
use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Caller objects remembered, ever; past this, new callers resolve on the cold path every call.
const CALLERS: usize = 64;
/// Distinct libcudart objects (runtimes) remembered between two `dlclose`s.
pub(crate) const RUNTIMES: usize = 4;

/// One caller object: its mapped address range and the runtime that serves it. Written once,
/// before it is published, and never again: a stub may read it at any time.
#[repr(C)]
pub(crate) struct Caller {
    lo: AtomicUsize,
    hi: AtomicUsize,
    runtime: AtomicUsize,
}

/// The callers, `CALLER_COUNT` published; those below `RETIRED` predate the last `dlclose`.
pub(crate) static CALLER_TABLE: [Caller; CALLERS] = [const {
    Caller {
        lo: AtomicUsize::new(0),
        hi: AtomicUsize::new(0),
        runtime: AtomicUsize::new(0),
    }
}; CALLERS];
static CALLER_COUNT: AtomicUsize = AtomicUsize::new(0);
static RETIRED: AtomicUsize = AtomicUsize::new(0);
/// Each runtime's loader map, by runtime index, and the address of one of its functions (what
/// tells, after a `dlclose`, whether it is still loaded).
static RUNTIME_MAPS: [AtomicUsize; RUNTIMES] = [const { AtomicUsize::new(0) }; RUNTIMES];
static RUNTIME_PROBES: [AtomicUsize; RUNTIMES] = [const { AtomicUsize::new(0) }; RUNTIMES];
/// Each caller's loader map, by caller index (beside `CALLER_TABLE`, whose layout the stubs read).
static CALLER_MAPS: [AtomicUsize; CALLERS] = [const { AtomicUsize::new(0) }; CALLERS];
static RUNTIME_COUNT: AtomicUsize = AtomicUsize::new(0);
/// Each runtime's functions by stub index; 0 until resolved. `TARGETS[k][r]` lies at byte
/// `(k * RUNTIMES + r) * 8`, where the stubs read it.
pub(crate) static TARGETS: [[AtomicUsize; RUNTIMES]; RUNTIME_STUB_COUNT] =
    [const { [const { AtomicUsize::new(0) }; RUNTIMES] }; RUNTIME_STUB_COUNT];
/// For each stub, 1 + the index of the caller it was last called from (0: none): the stubs'
/// own fast path (`generated/runtime_stubs.rs`) checks the return address against that
/// caller's range and jumps to `TARGETS[k][its runtime]` without entering the trampoline, when
/// the stubs do not record.
pub(crate) static LAST_CALLER: [AtomicU32; RUNTIME_STUB_COUNT] =
    [const { AtomicU32::new(0) }; RUNTIME_STUB_COUNT];
/// Held while the tables grow; only ever tried.
static GROWING: Mutex<()> = Mutex::new(());

/// The layout the stubs' assembly reads.
const _: () = {
    assert!(std::mem::size_of::<Caller>() == 24);
    assert!(RUNTIMES == 4);
};

/// libcudart's function for stub `k` as seen from `return_address`; null if there is none.
#[inline]
pub fn real(k: usize, return_address: usize) -> *mut c_void {
    let n = CALLER_COUNT.load(Ordering::Acquire).min(CALLERS);
    let first = RETIRED.load(Ordering::Acquire).min(n);
    for (i, c) in CALLER_TABLE[..n].iter().enumerate().skip(first) {
        if (c.lo.load(Ordering::Relaxed)..c.hi.load(Ordering::Relaxed)).contains(&return_address) {
            let r = c.runtime.load(Ordering::Relaxed);
            let mut p = TARGETS[k][r].load(Ordering::Acquire) as *mut c_void;
            if p.is_null() {
                p = with_errno_saved(|| internal(|| in_runtime(k, r)))
                    .unwrap_or(std::ptr::null_mut());
            }
            if !p.is_null() {
                LAST_CALLER[k].store(i as u32 + 1, Ordering::Release);
            }
            return p;
        }
    }
    with_errno_saved(|| internal(|| new_caller(k, return_address))).unwrap_or(std::ptr::null_mut())
}

/// After a `dlclose`: forgets every caller and function if the loader unloaded a runtime or
/// a caller (their addresses may now hold other objects, and an unloaded runtime's functions
/// must not be called); keeps them otherwise, so that a program that opens and closes
/// libraries as it goes keeps the fast path.
pub fn after_dlclose() {
    let _g = GROWING.lock();
    let still = |address: usize, map: usize| address != 0 && object_map(address) == Some(map);
    let runtimes = RUNTIME_COUNT.load(Ordering::Acquire).min(RUNTIMES);
    let n = CALLER_COUNT.load(Ordering::Acquire).min(CALLERS);
    let first = RETIRED.load(Ordering::Acquire).min(n);
    let kept = (0..runtimes).all(|r| {
        still(
            RUNTIME_PROBES[r].load(Ordering::Acquire),
            RUNTIME_MAPS[r].load(Ordering::Acquire),
        )
    }) && (first..n).all(|i| {
        still(
            CALLER_TABLE[i].lo.load(Ordering::Acquire),
            CALLER_MAPS[i].load(Ordering::Acquire),
        )
    });
    if kept {
        return;
    }
    for last in &LAST_CALLER {
        last.store(0, Ordering::Release);
    }
    RETIRED.store(n, Ordering::Release);
    RUNTIME_COUNT.store(0, Ordering::Release);
    for t in &TARGETS {
        for slot in t {
            slot.store(0, Ordering::Release);
        }
    }
}

/// Makes the stubs' fast path send stub `k`, called from `lo..hi`, to `target` (unit tests of
/// the stubs' assembly, which no runtime is loaded for).
#[cfg(test)]
pub(crate) fn remember_for_test(k: usize, lo: usize, hi: usize, target: usize) {
    let _g = GROWING.lock();
    let (n, r) = (CALLER_COUNT.load(Ordering::Acquire), RUNTIMES - 1);
    let c = &CALLER_TABLE[n];
    c.lo.store(lo, Ordering::Relaxed);
    c.hi.store(hi, Ordering::Relaxed);
    c.runtime.store(r, Ordering::Relaxed);
    CALLER_COUNT.store(n + 1, Ordering::Release);
    TARGETS[k][r].store(target, Ordering::Release);
    LAST_CALLER[k].store(n as u32 + 1, Ordering::Release);
}

/// Stub `k`'s function in known runtime `r` (cold: first call of `k` served by `r`).
#[cold]
fn in_runtime(k: usize, r: usize) -> *mut c_void {
    let map = RUNTIME_MAPS[r].load(Ordering::Acquire) as *mut c_void;
    let p = lookup_in(map, RUNTIME_STUB_NAMES[k]);
    if !p.is_null() && !is_own_address(p) {
        TARGETS[k][r].store(p as usize, Ordering::Release);
        return p;
    }
    std::ptr::null_mut()
}

/// A call of stub `k` from an object not seen yet: finds its definition, and remembers the
/// caller and the runtime that defines it when the tables have room.
#[cold]
fn new_caller(k: usize, return_address: usize) -> *mut c_void {
    let name = RUNTIME_STUB_NAMES[k];
    let Some(caller) = object_of(return_address) else {
        return definition(name, None);
    };
    let p = definition(name, Some(&caller));
    if p.is_null() {
        return p;
    }
    let Some(runtime) = object_of(p as usize) else {
        return p;
    };
    let Ok(_g) = GROWING.try_lock() else {
        return p;
    };
    let r = match (0..RUNTIME_COUNT.load(Ordering::Acquire))
        .find(|&r| RUNTIME_MAPS[r].load(Ordering::Relaxed) == runtime.map as usize)
    {
        Some(r) => r,
        None => {
            let r = RUNTIME_COUNT.load(Ordering::Acquire);
            if r >= RUNTIMES {
                return p;
            }
            RUNTIME_MAPS[r].store(runtime.map as usize, Ordering::Release);
            RUNTIME_PROBES[r].store(p as usize, Ordering::Release);
            RUNTIME_COUNT.store(r + 1, Ordering::Release);
            r
        }
    };
    TARGETS[k][r].store(p as usize, Ordering::Release);
    let n = CALLER_COUNT.load(Ordering::Acquire);
    if n < CALLERS {
        let c = &CALLER_TABLE[n];
        c.lo.store(caller.lo, Ordering::Relaxed);
        c.hi.store(caller.hi, Ordering::Relaxed);
        c.runtime.store(r, Ordering::Relaxed);
        CALLER_MAPS[n].store(caller.map as usize, Ordering::Relaxed);
        CALLER_COUNT.store(n + 1, Ordering::Release);
        LAST_CALLER[k].store(n as u32 + 1, Ordering::Release);
    }
    p
}

/// The definition of `name` a caller in `caller` binds without rtrace (see the module's
/// documentation); null if there is none.
fn definition(name: &CStr, caller: Option<&Object>) -> *mut c_void {
    if let Some(c) = caller.filter(|c| !c.main) {
        let p = lookup_in(c.map, name);
        if !p.is_null() && !is_own_address(p) {
            return p;
        }
    }
    let p = real_dlsym(libc::RTLD_NEXT, name.as_ptr());
    if !p.is_null() {
        return p;
    }
    (0..RUNTIME_COUNT.load(Ordering::Acquire).min(RUNTIMES))
        .map(|r| lookup_in(RUNTIME_MAPS[r].load(Ordering::Acquire) as *mut c_void, name))
        .find(|p| !p.is_null() && !is_own_address(*p))
        .unwrap_or(std::ptr::null_mut())
}

/// `name` looked up in the scope of the object of loader map `map` (itself, then its
/// dependencies); null if none has it. A loader map is not a handle for a dependency (its scope
/// may not be set up): the object is opened by its loader name (`RTLD_NOLOAD`: nothing is
/// loaded) and closed again with libc's `dlclose` (not rtrace's, which would forget).
pub(crate) fn lookup_in(map: *mut c_void, name: &CStr) -> *mut c_void {
    if map.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: `map` is a loaded object's `struct link_map` (dladdr1's), whose second field is
    // its NUL-terminated loader name (<link.h>); dlopen of that name loads nothing.
    unsafe {
        let l_name = *(map as *const *const std::ffi::c_char).add(1);
        if l_name.is_null() {
            return std::ptr::null_mut();
        }
        let h = libc::dlopen(l_name, libc::RTLD_LAZY | libc::RTLD_NOLOAD);
        if h.is_null() {
            return std::ptr::null_mut();
        }
        let p = real_dlsym(h, name.as_ptr());
        real_dlclose(h);
        p
    }
}

/// A loaded object: its loader map, whether it is the main program, and the address range its
/// segments span.
struct Object {
    map: *mut c_void,
    main: bool,
    lo: usize,
    hi: usize,
}

extern "C" {
    fn dladdr1(
        addr: *const c_void,
        info: *mut libc::Dl_info,
        extra: *mut *mut c_void,
        flags: c_int,
    ) -> c_int;
}

/// The loader map of the object holding `addr`, if a loaded object holds it (dladdr1, which
/// does not touch dlerror).
pub(crate) fn object_map(addr: usize) -> Option<usize> {
    const RTLD_DL_LINKMAP: c_int = 2;
    let mut map: *mut c_void = std::ptr::null_mut();
    // SAFETY: dladdr1 only reads loader data into valid out-pointers.
    let found = unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        dladdr1(addr as *const c_void, &mut info, &mut map, RTLD_DL_LINKMAP)
    };
    (found != 0 && !map.is_null()).then_some(map as usize)
}

/// The object holding `addr`.
fn object_of(addr: usize) -> Option<Object> {
    let map = object_map(addr)? as *mut c_void;
    let (lo, hi) = segments(addr)?;
    // The main program's loader name is empty (dladdr gives its path in `dli_fname`); its map
    // is the first of the loader's list, which `dlopen(NULL)` returns.
    // SAFETY: dlopen(NULL) returns the main program's handle; closed at once.
    let main = unsafe {
        let h = libc::dlopen(std::ptr::null(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
        let main = h == map;
        if !h.is_null() {
            real_dlclose(h);
        }
        main
    };
    Some(Object { map, main, lo, hi })
}

/// The range the loadable segments of the object holding `addr` span.
fn segments(addr: usize) -> Option<(usize, usize)> {
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: the loader's record and program headers; `data` is the caller's tuple.
        unsafe {
            let w = &mut *(data as *mut (usize, usize, usize));
            let info = &*info;
            if info.dlpi_phdr.is_null() {
                return 0;
            }
            let phdrs = std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize);
            let (mut lo, mut hi) = (usize::MAX, 0usize);
            for ph in phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD) {
                let start = (info.dlpi_addr as usize).wrapping_add(ph.p_vaddr as usize);
                lo = lo.min(start);
                hi = hi.max(start.wrapping_add(ph.p_memsz as usize));
            }
            if (lo..hi).contains(&w.0) {
                (w.1, w.2) = (lo, hi);
                return 1;
            }
            0
        }
    }
    let mut w = (addr, 0usize, 0usize);
    // SAFETY: the callback only reads the loader's records and writes `w`.
    unsafe { libc::dl_iterate_phdr(Some(visit), &mut w as *mut _ as *mut c_void) };
    (w.2 > w.1).then_some((w.1, w.2))
}

type DlcloseFn = unsafe extern "C" fn(*mut c_void) -> c_int;

/// libc's `dlclose` (the next definition after rtrace's).
pub fn real_dlclose(handle: *mut c_void) -> c_int {
    static REAL: AtomicUsize = AtomicUsize::new(0);
    let mut f = REAL.load(Ordering::Acquire);
    if f == 0 {
        f = real_dlsym(libc::RTLD_NEXT, c"dlclose".as_ptr()) as usize;
        if f == 0 {
            return -1;
        }
        REAL.store(f, Ordering::Release);
    }
    // SAFETY: `f` is libc's dlclose.
    unsafe { std::mem::transmute::<usize, DlcloseFn>(f)(handle) }
}
