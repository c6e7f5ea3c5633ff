//! NVTX v3 injection: the program's NVTX ranges, marks and names, recorded on their threads.
//!
//! Every image that embeds NVTX v3 (the program, libtorch, NCCL, ...) loads the library named
//! by `NVTX_INJECTION64_PATH` on its first NVTX call and calls its `InitializeInjectionNvtx2`
//! once, for itself. librtrace.so sets that variable to its own path when it loads (unless it
//! is set already, or `RTRACE_NVTX=0`), so `dlopen` hands NVTX the copy already loaded, and
//! fills the CORE and CORE2 callback tables of each image that asks.
//!
//! - Events go into the calling thread's ring as [`crate::ring::Entry::Nvtx`] entries: no
//!   lock, no allocation once the thread has a ring and the message's text has an id.
//! - Texts get ids from a table of the process ([`intern`]); each thread keeps the ids it has
//!   used, so a text seen before costs one hash lookup; a new text takes a lock, once.
//! - Domain handles, registered-string handles and range ids are rtrace's own numbers (never
//!   0: NULL is the default domain, 0 what NVTX returns without a tool).
//! - Push and pop return the nesting level per thread and domain, from 0, as NVTX says.

use crate::ring::{Entry, NvtxEntry};
use crate::state;
use crate::thread;
use rtrace_format::NvtxKind;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

/// Messages longer than this many bytes are cut (on a character boundary).
const MAX_TEXT: usize = 4096;

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

type Attr = *const u8;
type Domain = *const c_void;
type WChar = u32;

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

// ---- texts --------------------------------------------------------------------------------

/// Text → id, for the process; ids from 1.
static STRINGS: Mutex<Option<HashMap<Box<str>, u32>>> = Mutex::new(None);
/// Texts given ids since the worker last took them.
static NEW_STRINGS: Mutex<Vec<(u32, Box<str>)>> = Mutex::new(Vec::new());
static NEXT_STRING: AtomicU32 = AtomicU32::new(1);

thread_local! {
    /// The ids this thread has used.
    static SEEN: RefCell<HashMap<Box<str>, u32>> = RefCell::new(HashMap::new());
    /// Push nesting per domain on this thread.
    static DEPTH: RefCell<Vec<(u32, i32)>> = const { RefCell::new(Vec::new()) };
}

/// The id of `text` (cut to [`MAX_TEXT`] bytes).
fn intern(text: &str) -> u32 {
    let text = cut(text);
    let cached = SEEN
        .try_with(|s| s.try_borrow().ok().and_then(|m| m.get(text).copied()))
        .ok()
        .flatten();
    if let Some(id) = cached {
        return id;
    }
    let id = intern_slow(text);
    let _ = SEEN.try_with(|s| {
        if let Ok(mut m) = s.try_borrow_mut() {
            m.insert(text.into(), id);
        }
    });
    id
}

#[cold]
fn intern_slow(text: &str) -> u32 {
    let Ok(mut table) = STRINGS.lock() else {
        return 0;
    };
    let table = table.get_or_insert_with(HashMap::new);
    if let Some(&id) = table.get(text) {
        return id;
    }
    let id = NEXT_STRING.fetch_add(1, Ordering::Relaxed);
    table.insert(text.into(), id);
    crate::capture::text_interned(id, text);
    if let Ok(mut new) = NEW_STRINGS.lock() {
        new.push((id, text.into()));
    }
    id
}

fn cut(text: &str) -> &str {
    if text.len() <= MAX_TEXT {
        return text;
    }
    let mut end = MAX_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Texts given ids since the last call, for the worker (ids ascending).
pub fn take_new_strings() -> Vec<(u32, Box<str>)> {
    NEW_STRINGS
        .lock()
        .map(|mut n| std::mem::take(&mut *n))
        .unwrap_or_default()
}

/// The id of a NUL-terminated C string (0 for NULL).
///
/// # Safety
/// `s` is NULL or a NUL-terminated string.
unsafe fn c_text(s: *const c_char) -> u32 {
    if s.is_null() {
        return 0;
    }
    // SAFETY: the caller's contract.
    let bytes = unsafe { CStr::from_ptr(s) }.to_bytes();
    intern(&String::from_utf8_lossy(
        &bytes[..bytes.len().min(MAX_TEXT)],
    ))
}

/// The id of a NUL-terminated wide (UTF-32) string (0 for NULL).
///
/// # Safety
/// `s` is NULL or a NUL-terminated `wchar_t` string.
unsafe fn w_text(s: *const WChar) -> u32 {
    if s.is_null() {
        return 0;
    }
    let mut text = String::new();
    for i in 0..MAX_TEXT {
        // SAFETY: reads up to the terminating NUL, which the caller guarantees.
        let c = unsafe { *s.add(i) };
        if c == 0 {
            break;
        }
        text.push(char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER));
    }
    intern(&text)
}

// ---- events -------------------------------------------------------------------------------

/// What an `nvtxEventAttributes_t` says.
#[derive(Default)]
struct Attributes {
    message: u32,
    category: u32,
    color_type: u8,
    color: u32,
    payload_type: u8,
    payload: u64,
}

/// Reads an `nvtxEventAttributes_t` (version 2 layout, 48 bytes; fields past its `size` are
/// left out).
///
/// # Safety
/// `a` is NULL or points at `size` readable bytes whose first 4 are version and size.
unsafe fn attributes(a: Attr) -> Attributes {
    let mut out = Attributes::default();
    if a.is_null() {
        return out;
    }
    // SAFETY: the caller's contract; every read is within `size`.
    unsafe {
        let size = usize::from((a.add(2) as *const u16).read_unaligned());
        let u32_at = |at: usize| (a.add(at) as *const u32).read_unaligned();
        if size >= 8 {
            out.category = u32_at(4);
        }
        if size >= 16 {
            let color_type = u32_at(8);
            if color_type == 1 {
                out.color_type = 1;
                out.color = u32_at(12);
            }
        }
        if size >= 32 {
            let payload_type = u32_at(16);
            if (1..=6).contains(&payload_type) {
                out.payload_type = payload_type as u8;
                out.payload = (a.add(24) as *const u64).read_unaligned();
            }
        }
        if size >= 48 {
            let message_type = u32_at(32);
            let message = (a.add(40) as *const *const c_void).read_unaligned();
            out.message = match message_type {
                1 => c_text(message as *const c_char),
                2 => w_text(message as *const WChar),
                // A registered string's handle is its id.
                3 => u32::try_from(message as usize).unwrap_or(0),
                _ => 0,
            };
        }
    }
    out
}

fn domain_id(d: Domain) -> u32 {
    u32::try_from(d as usize).unwrap_or(0)
}

/// Records an event of `kind` on this thread.
fn record(kind: NvtxKind, domain: u32, a: &Attributes, value: u64) {
    let rec = Entry::Nvtx(NvtxEntry {
        kind,
        message: a.message,
        time: 0,
        value,
        domain,
        category: a.category,
    });
    let extra = (a.color_type != 0 || a.payload_type != 0).then_some(Entry::NvtxAttributes {
        color: a.color,
        color_type: a.color_type,
        payload: a.payload,
        payload_type: a.payload_type,
    });
    // Names and domains are kept even outside a capture range: later events use them.
    let always = matches!(
        kind,
        NvtxKind::DomainCreate
            | NvtxKind::DomainDestroy
            | NvtxKind::RegisterString
            | NvtxKind::NameCategory
            | NvtxKind::NameThread
    );
    if always || crate::capture::recording() {
        thread::push_event(rec, extra);
    }
}

fn message(id: u32) -> Attributes {
    Attributes {
        message: id,
        ..Default::default()
    }
}

/// Runs an NVTX callback: no unwinding into the program, `errno` kept.
fn guard<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    thread::with_errno_saved(f).unwrap_or(fallback)
}

static NEXT_RANGE: AtomicU64 = AtomicU64::new(1);
static NEXT_DOMAIN: AtomicU32 = AtomicU32::new(1);

fn push(domain: u32, a: Attributes) -> i32 {
    let level = DEPTH
        .try_with(|d| {
            let mut d = d.borrow_mut();
            match d.iter_mut().find(|(k, _)| *k == domain) {
                Some((_, n)) => {
                    *n += 1;
                    *n - 1
                }
                None => {
                    d.push((domain, 1));
                    0
                }
            }
        })
        .unwrap_or(0);
    crate::capture::nvtx_begin(domain, a.message, Some(level as u64), 0);
    record(NvtxKind::Push, domain, &a, level as u64);
    level
}

fn pop(domain: u32) -> i32 {
    let level = DEPTH
        .try_with(|d| {
            let mut d = d.borrow_mut();
            match d.iter_mut().find(|(k, _)| *k == domain) {
                Some((_, n)) if *n > 0 => {
                    *n -= 1;
                    *n
                }
                _ => -1,
            }
        })
        .unwrap_or(-1);
    if level >= 0 {
        record(NvtxKind::Pop, domain, &Attributes::default(), level as u64);
        crate::capture::nvtx_end(domain, Some(level as u64), 0);
    }
    level
}

fn start(domain: u32, a: Attributes) -> u64 {
    let id = NEXT_RANGE.fetch_add(1, Ordering::Relaxed);
    crate::capture::nvtx_begin(domain, a.message, None, id);
    record(NvtxKind::Start, domain, &a, id);
    id
}

fn end(domain: u32, id: u64) {
    record(NvtxKind::End, domain, &Attributes::default(), id);
    crate::capture::nvtx_end(domain, None, id);
}

unsafe extern "C" fn mark_ex(a: Attr) {
    // SAFETY: NVTX passes the program's attributes.
    guard((), || {
        record(NvtxKind::Mark, 0, &unsafe { attributes(a) }, 0)
    })
}
unsafe extern "C" fn mark_a(m: *const c_char) {
    // SAFETY: a C string or NULL.
    guard((), || {
        record(NvtxKind::Mark, 0, &message(unsafe { c_text(m) }), 0)
    })
}
unsafe extern "C" fn mark_w(m: *const WChar) {
    // SAFETY: a wide string or NULL.
    guard((), || {
        record(NvtxKind::Mark, 0, &message(unsafe { w_text(m) }), 0)
    })
}
unsafe extern "C" fn range_start_ex(a: Attr) -> u64 {
    // SAFETY: as above.
    guard(0, || start(0, unsafe { attributes(a) }))
}
unsafe extern "C" fn range_start_a(m: *const c_char) -> u64 {
    // SAFETY: as above.
    guard(0, || start(0, message(unsafe { c_text(m) })))
}
unsafe extern "C" fn range_start_w(m: *const WChar) -> u64 {
    // SAFETY: as above.
    guard(0, || start(0, message(unsafe { w_text(m) })))
}
unsafe extern "C" fn range_end(id: u64) {
    guard((), || end(0, id))
}
unsafe extern "C" fn range_push_ex(a: Attr) -> i32 {
    // SAFETY: as above.
    guard(-1, || push(0, unsafe { attributes(a) }))
}
unsafe extern "C" fn range_push_a(m: *const c_char) -> i32 {
    // SAFETY: as above.
    guard(-1, || push(0, message(unsafe { c_text(m) })))
}
unsafe extern "C" fn range_push_w(m: *const WChar) -> i32 {
    // SAFETY: as above.
    guard(-1, || push(0, message(unsafe { w_text(m) })))
}
unsafe extern "C" fn range_pop() -> i32 {
    guard(-1, || pop(0))
}
fn name_category(domain: u32, category: u32, name: u32) {
    let a = Attributes {
        message: name,
        category,
        ..Default::default()
    };
    record(NvtxKind::NameCategory, domain, &a, 0);
}
unsafe extern "C" fn name_category_a(category: u32, name: *const c_char) {
    // SAFETY: as above.
    guard((), || name_category(0, category, unsafe { c_text(name) }))
}
unsafe extern "C" fn name_category_w(category: u32, name: *const WChar) {
    // SAFETY: as above.
    guard((), || name_category(0, category, unsafe { w_text(name) }))
}
unsafe extern "C" fn name_os_thread_a(tid: u32, name: *const c_char) {
    // SAFETY: as above.
    guard((), || {
        record(
            NvtxKind::NameThread,
            0,
            &message(unsafe { c_text(name) }),
            u64::from(tid),
        )
    })
}
unsafe extern "C" fn name_os_thread_w(tid: u32, name: *const WChar) {
    // SAFETY: as above.
    guard((), || {
        record(
            NvtxKind::NameThread,
            0,
            &message(unsafe { w_text(name) }),
            u64::from(tid),
        )
    })
}
unsafe extern "C" fn domain_mark_ex(d: Domain, a: Attr) {
    // SAFETY: as above.
    guard((), || {
        record(NvtxKind::Mark, domain_id(d), &unsafe { attributes(a) }, 0)
    })
}
unsafe extern "C" fn domain_range_start_ex(d: Domain, a: Attr) -> u64 {
    // SAFETY: as above.
    guard(0, || start(domain_id(d), unsafe { attributes(a) }))
}
unsafe extern "C" fn domain_range_end(d: Domain, id: u64) {
    guard((), || end(domain_id(d), id))
}
unsafe extern "C" fn domain_range_push_ex(d: Domain, a: Attr) -> i32 {
    // SAFETY: as above.
    guard(-1, || push(domain_id(d), unsafe { attributes(a) }))
}
unsafe extern "C" fn domain_range_pop(d: Domain) -> i32 {
    guard(-1, || pop(domain_id(d)))
}
unsafe extern "C" fn domain_name_category_a(d: Domain, category: u32, name: *const c_char) {
    // SAFETY: as above.
    guard((), || {
        name_category(domain_id(d), category, unsafe { c_text(name) })
    })
}
unsafe extern "C" fn domain_name_category_w(d: Domain, category: u32, name: *const WChar) {
    // SAFETY: as above.
    guard((), || {
        name_category(domain_id(d), category, unsafe { w_text(name) })
    })
}
fn register_string(domain: u32, id: u32) -> *const c_void {
    record(NvtxKind::RegisterString, domain, &message(id), 0);
    id as usize as *const c_void
}
unsafe extern "C" fn domain_register_string_a(d: Domain, s: *const c_char) -> *const c_void {
    // SAFETY: as above.
    guard(std::ptr::null(), || {
        register_string(domain_id(d), unsafe { c_text(s) })
    })
}
unsafe extern "C" fn domain_register_string_w(d: Domain, s: *const WChar) -> *const c_void {
    // SAFETY: as above.
    guard(std::ptr::null(), || {
        register_string(domain_id(d), unsafe { w_text(s) })
    })
}
fn create_domain(name: u32) -> *const c_void {
    let id = NEXT_DOMAIN.fetch_add(1, Ordering::Relaxed);
    crate::capture::domain_created(id, name);
    record(NvtxKind::DomainCreate, id, &message(name), 0);
    id as usize as *const c_void
}
unsafe extern "C" fn domain_create_a(name: *const c_char) -> *const c_void {
    // SAFETY: as above.
    guard(std::ptr::null(), || create_domain(unsafe { c_text(name) }))
}
unsafe extern "C" fn domain_create_w(name: *const WChar) -> *const c_void {
    // SAFETY: as above.
    guard(std::ptr::null(), || create_domain(unsafe { w_text(name) }))
}
unsafe extern "C" fn domain_destroy(d: Domain) {
    guard((), || {
        record(
            NvtxKind::DomainDestroy,
            domain_id(d),
            &Attributes::default(),
            0,
        )
    })
}
unsafe extern "C" fn initialize(_reserved: *const c_void) {}

/// Points `NVTX_INJECTION64_PATH` at this library, unless it is set or `RTRACE_NVTX=0`.
/// Called once, when the library loads (before the program's threads).
pub fn announce() {
    if !state::config().nvtx || std::env::var_os("NVTX_INJECTION64_PATH").is_some() {
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
    // SAFETY: both NUL-terminated; setenv copies them.
    unsafe { libc::setenv(c"NVTX_INJECTION64_PATH".as_ptr(), full.as_ptr(), 0) };
}

// ---- external correlation -----------------------------------------------------------------

thread_local! {
    /// The external ids pushed on this thread, innermost last, with their kind.
    static EXTERNAL: RefCell<Vec<(u32, u64)>> = const { RefCell::new(Vec::new()) };
}

/// Pushes external correlation id `id` of kind `kind` on the calling thread (like CUPTI's
/// `cuptiActivityPushExternalCorrelationId`): every driver call the thread makes until the
/// matching pop is linked to the innermost id of each kind, and through the call so is the
/// GPU work it launched. Returns 0.
#[no_mangle]
pub extern "C" fn rtrace_push_external_correlation(kind: u32, id: u64) -> i32 {
    guard(0, || {
        let _ = EXTERNAL.try_with(|s| s.borrow_mut().push((kind, id)));
        let a = Attributes {
            category: kind,
            ..Default::default()
        };
        record(NvtxKind::ExternalPush, 0, &a, id);
        0
    })
}

/// Pops the innermost external id of kind `kind` on the calling thread and stores it in
/// `*id` (when `id` is not NULL). Returns 0, or -1 when no id of that kind was pushed on this
/// thread (then `*id` is left alone).
///
/// # Safety
/// `id` is NULL or points at a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn rtrace_pop_external_correlation(kind: u32, id: *mut u64) -> i32 {
    guard(-1, || {
        let popped = EXTERNAL
            .try_with(|s| {
                let mut s = s.borrow_mut();
                let at = s.iter().rposition(|&(k, _)| k == kind)?;
                Some(s.remove(at).1)
            })
            .ok()
            .flatten();
        let Some(value) = popped else {
            return -1;
        };
        if !id.is_null() {
            // SAFETY: the caller's contract.
            unsafe { id.write(value) };
        }
        let a = Attributes {
            category: kind,
            ..Default::default()
        };
        record(NvtxKind::ExternalPop, 0, &a, value);
        0
    })
}
