//! Libraries that bind the driver past rtrace: a library opened with `RTLD_DEEPBIND` (and
//! linked with `-lcuda`) looks its symbols up in its own dependencies first, so its references
//! to driver functions bind to the driver library's exports, not to rtrace's wrappers.
//!
//! [`rescan`] walks the loaded objects it has not seen yet (`dl_iterate_phdr`, then each
//! object's dynamic section: `DT_JMPREL`/`DT_PLTRELSZ`, `DT_RELA`/`DT_RELASZ`, `DT_SYMTAB`,
//! `DT_STRTAB`) and, for every `R_X86_64_JUMP_SLOT`, `R_X86_64_GLOB_DAT` or `R_X86_64_64` (no
//! addend) relocation of a driver function, reads the slot:
//! - the driver's own export: rewritten to the wrapper of that export. Calls made through it
//!   before are not in the trace, so a notice names the library;
//! - the object's own PLT (lazy binding, not called yet): rewritten to the wrapper of the name,
//!   when that wrapper is what the global scope resolves the name to (what a library that does
//!   not bind deep would get from the lazy resolver anyway);
//! - anything else (rtrace's wrapper, another definition): left alone.
//!
//! Slots in the `PT_GNU_RELRO` pages are made writable for the write and read-only again; a slot
//! that cannot be written leaves a notice naming the library. librtrace.so and the driver
//! library are never patched. The walk runs under the loader's lock (inside the
//! `dl_iterate_phdr` callback), so no object is unloaded while it is patched, and it makes no
//! `dl*` call there: what it needs from the loader is looked up before.
//!
//! A rescan costs one `dl_iterate_phdr` step (the loader's lock, one callback) when no object
//! was loaded or unloaded since the last (its `dlpi_adds`/`dlpi_subs` counters); it runs from
//! rtrace's `dlsym`, from `cuGetProcAddress*`, from the first call of each driver function and
//! at exit (the ELF destructor), never on the recorded path of a call.

use crate::generated::id::{function_id, FUNCTION_COUNT, FUNCTION_NAMES};
use crate::state::{self, State};
use crate::sys::Leaked;
use crate::{cupti, diag, driver, thread};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, TryLockError};

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_GNU_RELRO: u32 = 0x6474_e552;
const PF_W: u32 = 2;
const DT_NULL: i64 = 0;
const DT_PLTRELSZ: i64 = 2;
const DT_STRTAB: i64 = 5;
const DT_SYMTAB: i64 = 6;
const DT_RELA: i64 = 7;
const DT_RELASZ: i64 = 8;
const DT_STRSZ: i64 = 10;
const DT_PLTREL: i64 = 20;
const DT_JMPREL: i64 = 23;
const R_X86_64_64: u32 = 1;
const R_X86_64_GLOB_DAT: u32 = 6;
const R_X86_64_JUMP_SLOT: u32 = 7;

#[repr(C)]
struct Dyn {
    tag: i64,
    val: u64,
}

#[repr(C)]
struct Rela {
    offset: u64,
    info: u64,
    addend: i64,
}

#[repr(C)]
struct Sym {
    name: u32,
    info: u8,
    other: u8,
    shndx: u16,
    value: u64,
    size: u64,
}

/// The public head of the loader's `struct link_map` (`<link.h>`).
#[repr(C)]
struct LinkMap {
    addr: usize,
    name: *const c_char,
    ld: usize,
    next: *const LinkMap,
    prev: *const LinkMap,
}

/// The public head of the loader's `struct r_debug` (`<link.h>`): its list is the base
/// namespace's objects.
#[repr(C)]
struct RDebug {
    version: c_int,
    map: *const LinkMap,
}

extern "C" {
    static _r_debug: RDebug;
}

/// True if the object whose dynamic section is at `dynamic` is in the base namespace (where
/// rtrace is), not in one made by `dlmopen`. Called under the loader's lock, which keeps the
/// list still.
fn in_base_namespace(dynamic: usize) -> bool {
    // SAFETY: the loader's list head, read under its lock (see above).
    let mut m = unsafe { std::ptr::addr_of!(_r_debug.map).read_volatile() };
    while !m.is_null() {
        // SAFETY: a live entry of the loader's list.
        let e = unsafe { &*m };
        if e.ld == dynamic {
            return true;
        }
        m = e.next;
    }
    false
}

/// The loader's counters when the last rescan (or look) ran.
static LAST_ADDS: AtomicU64 = AtomicU64::new(u64::MAX);
static LAST_SUBS: AtomicU64 = AtomicU64::new(u64::MAX);

/// The objects already walked, by the address of their dynamic section; forgotten when an
/// object was unloaded (another may take its place).
static SEEN: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// Per function id: rtrace's exported wrapper when the global scope resolves the name to it
/// (else 0), and the wrapper of the export whichever way (0 if none). Built once, outside the
/// loader's lock.
struct Wrappers {
    first_in_scope: Box<[usize]>,
    any: Box<[usize]>,
}

fn wrappers() -> &'static Wrappers {
    static W: Leaked<Wrappers> = Leaked::new();
    W.get_or_publish(|| {
        let mut first = vec![0usize; FUNCTION_COUNT];
        let mut any = vec![0usize; FUNCTION_COUNT];
        let own = own_handle();
        for (id, name) in FUNCTION_NAMES.iter().enumerate() {
            let Ok(c) = CString::new(*name) else { continue };
            let w = if own.is_null() {
                std::ptr::null_mut()
            } else {
                driver::real_dlsym(own, c.as_ptr())
            };
            if w.is_null() || !driver::is_own_address(w) {
                continue;
            }
            any[id] = w as usize;
            if driver::real_dlsym(libc::RTLD_DEFAULT, c.as_ptr()) == w {
                first[id] = w as usize;
            }
        }
        Wrappers {
            first_in_scope: first.into_boxed_slice(),
            any: any.into_boxed_slice(),
        }
    })
}

/// A handle on librtrace.so itself, whose lookups find its own exports first (null if none).
fn own_handle() -> *mut c_void {
    // SAFETY: dladdr only reads loader data; `info` is a valid out-pointer; dlopen with the
    // loader's own NUL-terminated name of an object that is loaded (RTLD_NOLOAD).
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(own_handle as *const c_void, &mut info) == 0 || info.dli_fname.is_null() {
            return std::ptr::null_mut();
        }
        libc::dlopen(info.dli_fname, libc::RTLD_LAZY | libc::RTLD_NOLOAD)
    }
}

/// The loader's (adds, subs) counters: one step of `dl_iterate_phdr`.
fn loader_counters() -> (u64, u64) {
    unsafe extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        size: usize,
        data: *mut c_void,
    ) -> c_int {
        if size >= std::mem::size_of::<libc::dl_phdr_info>() {
            // SAFETY: the loader's record, as large as the libc crate's (it says so in `size`);
            // `data` is the caller's `(u64, u64)`.
            unsafe { *(data as *mut (u64, u64)) = ((*info).dlpi_adds, (*info).dlpi_subs) };
        }
        1
    }
    let mut counters = (0u64, 0u64);
    // SAFETY: the callback only reads the record and writes `counters`, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(first), &mut counters as *mut (u64, u64) as *mut c_void) };
    counters
}

/// Looks for loaded libraries whose driver slots bypass rtrace and redirects them (see the
/// module's documentation). Cheap when no object was loaded or unloaded since the last time.
pub fn rescan() {
    if state::state() != State::Running {
        return;
    }
    let (adds, subs) = loader_counters();
    if adds == LAST_ADDS.load(Ordering::Acquire) && subs == LAST_SUBS.load(Ordering::Acquire) {
        return;
    }
    // The thread's state is read only now: `dlsym` (which looks) is also called by Rust's
    // standard library, from rtrace's own code.
    if thread::in_rtrace() {
        return;
    }
    let _ = thread::with_errno_saved(|| thread::internal(scan));
}

/// What a walk found in one library.
struct Finding {
    name: String,
    /// Slots that held the driver's export (the library could call it before).
    bound: usize,
    /// Slots that held the library's own PLT entry (not called yet).
    lazy: usize,
    /// Slots that could not be written, with the first error.
    failed: usize,
    error: Option<std::io::Error>,
}

/// What the callback needs: rtrace's and the driver's addresses, the wrappers, and what it found.
struct Walk<'a> {
    own: usize,
    driver: usize,
    wrappers: &'a Wrappers,
    seen: &'a mut Vec<usize>,
    found: Vec<Finding>,
    counters: Option<(u64, u64)>,
    page: usize,
}

fn scan() {
    // Another thread is walking: it covers what was loaded before it began, and records the
    // counters it saw, so what came after is walked at the next look. Never wait here: the
    // caller may hold the loader's lock (a constructor running under `dlopen`), which the
    // walking thread may need.
    let mut seen = match SEEN.try_lock() {
        Ok(g) => g,
        Err(TryLockError::Poisoned(p)) => p.into_inner(),
        Err(TryLockError::WouldBlock) => return,
    };
    let (adds, subs) = loader_counters();
    if subs != LAST_SUBS.load(Ordering::Acquire) {
        seen.clear();
    }
    // The driver's exports: until the driver is loaded nothing can be bound to it.
    let Some(driver) = driver::some_export() else {
        LAST_ADDS.store(adds, Ordering::Release);
        LAST_SUBS.store(subs, Ordering::Release);
        return;
    };
    let mut walk = Walk {
        own: scan as *const () as usize,
        driver,
        wrappers: wrappers(),
        seen: &mut seen,
        found: Vec::new(),
        counters: None,
        page: page_size(),
    };
    // SAFETY: `walk_object` reads the loader's records and patches slots as documented above;
    // `walk` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(walk_object), &mut walk as *mut Walk as *mut c_void) };
    let (adds, subs) = walk.counters.unwrap_or((adds, subs));
    let found = walk.found;
    LAST_ADDS.store(adds, Ordering::Release);
    LAST_SUBS.store(subs, Ordering::Release);
    drop(seen);
    let said = found.iter().any(|f| f.bound + f.failed > 0);
    for f in found {
        report(f);
    }
    // A notice needs a trace to land in: the process may have made no traced call yet (or may
    // never make one: all its calls escaped).
    if said {
        let _ = thread::with(|t| t.ensure_ring());
    }
}

fn report(f: Finding) {
    let n = |k: usize| {
        if k == 1 {
            "1 slot".to_string()
        } else {
            format!("{k} slots")
        }
    };
    if f.failed > 0 {
        let why = f.error.map(|e| e.to_string()).unwrap_or_default();
        cupti::notice(format!(
            "library {} binds the driver directly (RTLD_DEEPBIND?): {} could not be redirected to rtrace ({why}); calls through them are not traced",
            f.name,
            n(f.failed)
        ));
    }
    if f.bound > 0 {
        cupti::notice(format!(
            "library {} was bound to the driver directly (RTLD_DEEPBIND?): {} redirected to rtrace; calls it made through them before are not in the trace",
            f.name,
            n(f.bound)
        ));
    } else if f.lazy > 0 && diag::enabled() {
        diag::log(&["redirected the unresolved driver slots of ", &f.name]);
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// The `dl_iterate_phdr` callback: walks one object (under the loader's lock).
unsafe extern "C" fn walk_object(
    info: *mut libc::dl_phdr_info,
    size: usize,
    data: *mut c_void,
) -> c_int {
    if size < std::mem::size_of::<libc::dl_phdr_info>() {
        return 1;
    }
    // SAFETY: `data` is `scan`'s `Walk`, alive and not otherwise borrowed during the call;
    // `info` is the loader's record for one loaded object.
    let (walk, info) = unsafe { (&mut *(data as *mut Walk), &*info) };
    walk.counters
        .get_or_insert((info.dlpi_adds, info.dlpi_subs));
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: as above; the object stays mapped while the loader's lock is held.
        unsafe { walk_one(walk, info) }
    }));
    0
}

/// An object's loaded segments, from its program headers.
struct Image {
    base: usize,
    loads: Vec<(usize, usize, bool)>,
    relro: Option<(usize, usize)>,
    dynamic: usize,
    /// In rtrace's namespace: only there is rtrace's wrapper what the global scope resolves to.
    base_namespace: bool,
}

impl Image {
    fn contains(&self, a: usize) -> bool {
        self.loads.iter().any(|&(lo, hi, _)| a >= lo && a < hi)
    }

    /// An address from the dynamic section: already relocated by the loader, or not (a
    /// read-only dynamic section).
    fn address(&self, v: u64) -> Option<usize> {
        let v = v as usize;
        if self.contains(v) {
            Some(v)
        } else {
            let r = self.base.wrapping_add(v);
            self.contains(r).then_some(r)
        }
    }
}

/// # Safety
/// `info` describes an object that stays mapped during the call.
unsafe fn walk_one(walk: &mut Walk, info: &libc::dl_phdr_info) {
    let base = info.dlpi_addr as usize;
    let mut image = Image {
        base,
        loads: Vec::new(),
        relro: None,
        dynamic: 0,
        base_namespace: false,
    };
    for i in 0..info.dlpi_phnum as usize {
        // SAFETY: the loader's program headers, `dlpi_phnum` of them.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        let lo = base.wrapping_add(ph.p_vaddr as usize);
        let hi = lo.wrapping_add(ph.p_memsz as usize);
        match ph.p_type {
            PT_LOAD => image.loads.push((lo, hi, ph.p_flags & PF_W != 0)),
            PT_DYNAMIC => image.dynamic = lo,
            // The loader protects whole pages: from the first, up to the last full one.
            PT_GNU_RELRO => image.relro = Some((lo & !(walk.page - 1), hi & !(walk.page - 1))),
            _ => {}
        }
    }
    if image.dynamic == 0
        || !image.contains(image.dynamic)
        || image.contains(walk.own)
        || image.contains(walk.driver)
        || walk.seen.contains(&image.dynamic)
    {
        return;
    }
    walk.seen.push(image.dynamic);
    image.base_namespace = in_base_namespace(image.dynamic);
    let name = if info.dlpi_name.is_null() {
        String::new()
    } else {
        // SAFETY: the loader's NUL-terminated name.
        unsafe { CStr::from_ptr(info.dlpi_name) }
            .to_string_lossy()
            .into_owned()
    };
    let mut finding = Finding {
        name: if name.is_empty() {
            "(the program)".to_string()
        } else {
            name
        },
        bound: 0,
        lazy: 0,
        failed: 0,
        error: None,
    };
    // SAFETY: as for this function.
    unsafe { patch_object(walk, &image, &mut finding) };
    if finding.bound + finding.lazy + finding.failed > 0 {
        walk.found.push(finding);
    }
}

/// The dynamic section's tables, and every driver slot's patch.
///
/// # Safety
/// `image` describes an object that stays mapped during the call.
unsafe fn patch_object(walk: &Walk, image: &Image, finding: &mut Finding) {
    let (mut symtab, mut strtab, mut strsz) = (None, None, 0usize);
    let (mut rela, mut relasz, mut jmprel, mut pltrelsz, mut pltrel) = (None, 0, None, 0, DT_RELA);
    let mut d = image.dynamic as *const Dyn;
    loop {
        if !image.contains(d as usize) {
            return;
        }
        // SAFETY: inside the object's mapped segments; the array ends with DT_NULL.
        let e = unsafe { &*d };
        match e.tag {
            DT_NULL => break,
            DT_SYMTAB => symtab = image.address(e.val),
            DT_STRTAB => strtab = image.address(e.val),
            DT_STRSZ => strsz = e.val as usize,
            DT_RELA => rela = image.address(e.val),
            DT_RELASZ => relasz = e.val as usize,
            DT_JMPREL => jmprel = image.address(e.val),
            DT_PLTRELSZ => pltrelsz = e.val as usize,
            DT_PLTREL => pltrel = e.val as i64,
            _ => {}
        }
        // SAFETY: the next entry (checked above on the next turn).
        d = unsafe { d.add(1) };
    }
    let (Some(symtab), Some(strtab)) = (symtab, strtab) else {
        return;
    };
    let mut tables = vec![(rela, relasz)];
    if pltrel == DT_RELA {
        tables.push((jmprel, pltrelsz));
    }
    for (table, bytes) in tables {
        let Some(table) = table else { continue };
        let count = bytes / std::mem::size_of::<Rela>();
        for i in 0..count {
            let r = (table + i * std::mem::size_of::<Rela>()) as *const Rela;
            if !image.contains(r as usize) {
                break;
            }
            // SAFETY: inside the object's mapped relocation table.
            let r = unsafe { &*r };
            let kind = r.info as u32;
            let sym = (r.info >> 32) as usize;
            let wanted = match kind {
                R_X86_64_JUMP_SLOT | R_X86_64_GLOB_DAT => true,
                R_X86_64_64 => r.addend == 0,
                _ => false,
            };
            if !wanted || sym == 0 {
                continue;
            }
            let s = (symtab + sym * std::mem::size_of::<Sym>()) as *const Sym;
            if !image.contains(s as usize) {
                continue;
            }
            // SAFETY: inside the object's symbol table.
            let name_at = unsafe { (*s).name } as usize;
            if strsz != 0 && name_at >= strsz {
                continue;
            }
            // SAFETY: a NUL-terminated name inside the object's string table.
            let name = unsafe { CStr::from_ptr((strtab + name_at) as *const c_char) }.to_bytes();
            if !name.starts_with(b"cu") {
                continue;
            }
            let Some(id) = function_id(name) else {
                continue;
            };
            let slot = image.base.wrapping_add(r.offset as usize);
            if !slot.is_multiple_of(8) || !image.contains(slot) {
                continue;
            }
            // SAFETY: an aligned slot inside the object's loaded segments.
            let value = unsafe { std::ptr::read_volatile(slot as *const usize) };
            // SAFETY: as for this function.
            unsafe { patch_slot(walk, image, finding, slot, value, id as usize, kind) };
        }
    }
}

/// Decides and writes one slot.
///
/// # Safety
/// `slot` is an aligned relocation slot of `image`, mapped during the call.
unsafe fn patch_slot(
    walk: &Walk,
    image: &Image,
    finding: &mut Finding,
    slot: usize,
    value: usize,
    id: usize,
    kind: u32,
) {
    let w = walk.wrappers;
    let (target, bound) = if let Some(export) = driver::id_of_address(value as *mut c_void) {
        (w.any[export as usize], true)
    } else if kind == R_X86_64_JUMP_SLOT && image.base_namespace && image.contains(value) {
        (w.first_in_scope[id], false)
    } else {
        return;
    };
    if target == 0 || target == value {
        return;
    }
    // SAFETY: as for this function.
    match unsafe { write_slot(image, slot, target, walk.page) } {
        Ok(()) if bound => finding.bound += 1,
        Ok(()) => finding.lazy += 1,
        Err(e) => {
            finding.failed += 1;
            finding.error.get_or_insert(e);
        }
    }
}

/// Writes `value` into `slot`, making a RELRO page writable for the write.
///
/// # Safety
/// `slot` is an aligned relocation slot of `image`, mapped during the call.
unsafe fn write_slot(image: &Image, slot: usize, value: usize, page: usize) -> std::io::Result<()> {
    let store = || {
        // SAFETY: an aligned, writable word; an atomic store, as other threads may call through it.
        unsafe { AtomicUsize::from_ptr(slot as *mut usize) }.store(value, Ordering::Release)
    };
    let in_relro = image.relro.is_some_and(|(lo, hi)| slot >= lo && slot < hi);
    if !in_relro {
        let writable = image
            .loads
            .iter()
            .any(|&(lo, hi, w)| w && slot >= lo && slot < hi);
        if !writable {
            return Err(std::io::Error::other("the slot is in a read-only segment"));
        }
        store();
        return Ok(());
    }
    let at = (slot & !(page - 1)) as *mut c_void;
    // SAFETY: a page of the object's RELRO segment, read-only since relocation: made
    // writable for one store and read-only again, as the loader left it.
    if unsafe { libc::mprotect(at, page, libc::PROT_READ | libc::PROT_WRITE) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    store();
    // SAFETY: as above.
    if unsafe { libc::mprotect(at, page, libc::PROT_READ) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
