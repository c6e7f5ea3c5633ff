//! NVTX's callbacks: each event recorded on the calling thread, into its ring as
//! [`crate::ring::Entry::Nvtx`] entries; push and pop nesting kept per thread and domain; range and domain
//! ids numbered by rtrace.

use super::text::{c_text, w_text, WChar};
use crate::ring::{Entry, NvtxEntry};
use crate::thread;
use rtrace_format::NvtxKind;
use std::cell::RefCell;
use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

pub(super) type Attr = *const u8;
pub(super) type Domain = *const c_void;

thread_local! {
    /// Push nesting per domain on this thread.
    static DEPTH: RefCell<Vec<(u32, i32)>> = const { RefCell::new(Vec::new()) };
}

/// What an `nvtxEventAttributes_t` says.
#[derive(Default)]
pub(super) struct Attributes {
    pub(super) message: u32,
    pub(super) category: u32,
    pub(super) color_type: u8,
    pub(super) color: u32,
    pub(super) payload_type: u8,
    pub(super) payload: u64,
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
#[inline]
pub(super) fn record(kind: NvtxKind, domain: u32, a: &Attributes, value: u64) {
    let recording = crate::capture::recording();
    // Names and domains are kept even outside a capture range: later events use them. So are
    // external ids' pushes and pops: the calls recorded later are credited by the stack they
    // leave (a pop while paused would otherwise leave its id to the calls after it); a push
    // made while paused says so, and is not reported for itself.
    let kind = match kind {
        NvtxKind::ExternalPush if !recording => NvtxKind::ExternalPushPaused,
        NvtxKind::DomainCreate
        | NvtxKind::DomainDestroy
        | NvtxKind::RegisterString
        | NvtxKind::NameCategory
        | NvtxKind::NameThread
        | NvtxKind::ExternalPush
        | NvtxKind::ExternalPop => kind,
        _ if recording => kind,
        _ => return,
    };
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
    thread::push_event(rec, extra);
}

fn message(id: u32) -> Attributes {
    Attributes {
        message: id,
        ..Default::default()
    }
}

/// Runs an NVTX callback: no unwinding into the program, `errno` kept.
pub(super) fn guard<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    thread::with_errno_saved(f).unwrap_or(fallback)
}

/// Range and domain ids, for the process (statics: NVTX's callbacks carry no pointer of
/// rtrace's).
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
    if let Some(name) = crate::capture::nvtx_begin(domain, a.message, Some(level as u64), 0) {
        crate::cupti::capture_range_begin(Some(name));
    }
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
        if crate::capture::nvtx_end(domain, Some(level as u64), 0) {
            crate::cupti::capture_range_end();
        }
    }
    level
}

fn start(domain: u32, a: Attributes) -> u64 {
    let id = NEXT_RANGE.fetch_add(1, Ordering::Relaxed);
    if let Some(name) = crate::capture::nvtx_begin(domain, a.message, None, id) {
        crate::cupti::capture_range_begin(Some(name));
    }
    record(NvtxKind::Start, domain, &a, id);
    id
}

fn end(domain: u32, id: u64) {
    record(NvtxKind::End, domain, &Attributes::default(), id);
    if crate::capture::nvtx_end(domain, None, id) {
        crate::cupti::capture_range_end();
    }
}

pub(super) unsafe extern "C" fn mark_ex(a: Attr) {
    // SAFETY: NVTX passes the program's attributes.
    guard((), || {
        record(NvtxKind::Mark, 0, &unsafe { attributes(a) }, 0)
    })
}
pub(super) unsafe extern "C" fn mark_a(m: *const c_char) {
    // SAFETY: a C string or NULL.
    guard((), || {
        record(NvtxKind::Mark, 0, &message(unsafe { c_text(m) }), 0)
    })
}
pub(super) unsafe extern "C" fn mark_w(m: *const WChar) {
    // SAFETY: a wide string or NULL.
    guard((), || {
        record(NvtxKind::Mark, 0, &message(unsafe { w_text(m) }), 0)
    })
}
pub(super) unsafe extern "C" fn range_start_ex(a: Attr) -> u64 {
    // SAFETY: as above.
    guard(0, || start(0, unsafe { attributes(a) }))
}
pub(super) unsafe extern "C" fn range_start_a(m: *const c_char) -> u64 {
    // SAFETY: as above.
    guard(0, || start(0, message(unsafe { c_text(m) })))
}
pub(super) unsafe extern "C" fn range_start_w(m: *const WChar) -> u64 {
    // SAFETY: as above.
    guard(0, || start(0, message(unsafe { w_text(m) })))
}
pub(super) unsafe extern "C" fn range_end(id: u64) {
    guard((), || end(0, id))
}
pub(super) unsafe extern "C" fn range_push_ex(a: Attr) -> i32 {
    // SAFETY: as above.
    guard(-1, || push(0, unsafe { attributes(a) }))
}
pub(super) unsafe extern "C" fn range_push_a(m: *const c_char) -> i32 {
    // SAFETY: as above.
    guard(-1, || push(0, message(unsafe { c_text(m) })))
}
pub(super) unsafe extern "C" fn range_push_w(m: *const WChar) -> i32 {
    // SAFETY: as above.
    guard(-1, || push(0, message(unsafe { w_text(m) })))
}
pub(super) unsafe extern "C" fn range_pop() -> i32 {
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
pub(super) unsafe extern "C" fn name_category_a(category: u32, name: *const c_char) {
    // SAFETY: as above.
    guard((), || name_category(0, category, unsafe { c_text(name) }))
}
pub(super) unsafe extern "C" fn name_category_w(category: u32, name: *const WChar) {
    // SAFETY: as above.
    guard((), || name_category(0, category, unsafe { w_text(name) }))
}
pub(super) unsafe extern "C" fn name_os_thread_a(tid: u32, name: *const c_char) {
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
pub(super) unsafe extern "C" fn name_os_thread_w(tid: u32, name: *const WChar) {
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
pub(super) unsafe extern "C" fn domain_mark_ex(d: Domain, a: Attr) {
    // SAFETY: as above.
    guard((), || {
        record(NvtxKind::Mark, domain_id(d), &unsafe { attributes(a) }, 0)
    })
}
pub(super) unsafe extern "C" fn domain_range_start_ex(d: Domain, a: Attr) -> u64 {
    // SAFETY: as above.
    guard(0, || start(domain_id(d), unsafe { attributes(a) }))
}
pub(super) unsafe extern "C" fn domain_range_end(d: Domain, id: u64) {
    guard((), || end(domain_id(d), id))
}
pub(super) unsafe extern "C" fn domain_range_push_ex(d: Domain, a: Attr) -> i32 {
    // SAFETY: as above.
    guard(-1, || push(domain_id(d), unsafe { attributes(a) }))
}
pub(super) unsafe extern "C" fn domain_range_pop(d: Domain) -> i32 {
    guard(-1, || pop(domain_id(d)))
}
pub(super) unsafe extern "C" fn domain_name_category_a(
    d: Domain,
    category: u32,
    name: *const c_char,
) {
    // SAFETY: as above.
    guard((), || {
        name_category(domain_id(d), category, unsafe { c_text(name) })
    })
}
pub(super) unsafe extern "C" fn domain_name_category_w(
    d: Domain,
    category: u32,
    name: *const WChar,
) {
    // SAFETY: as above.
    guard((), || {
        name_category(domain_id(d), category, unsafe { w_text(name) })
    })
}
fn register_string(domain: u32, id: u32) -> *const c_void {
    record(NvtxKind::RegisterString, domain, &message(id), 0);
    id as usize as *const c_void
}
pub(super) unsafe extern "C" fn domain_register_string_a(
    d: Domain,
    s: *const c_char,
) -> *const c_void {
    // SAFETY: as above.
    guard(std::ptr::null(), || {
        register_string(domain_id(d), unsafe { c_text(s) })
    })
}
pub(super) unsafe extern "C" fn domain_register_string_w(
    d: Domain,
    s: *const WChar,
) -> *const c_void {
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
pub(super) unsafe extern "C" fn domain_create_a(name: *const c_char) -> *const c_void {
    // SAFETY: as above.
    guard(std::ptr::null(), || create_domain(unsafe { c_text(name) }))
}
pub(super) unsafe extern "C" fn domain_create_w(name: *const WChar) -> *const c_void {
    // SAFETY: as above.
    guard(std::ptr::null(), || create_domain(unsafe { w_text(name) }))
}
pub(super) unsafe extern "C" fn domain_destroy(d: Domain) {
    guard((), || {
        record(
            NvtxKind::DomainDestroy,
            domain_id(d),
            &Attributes::default(),
            0,
        )
    })
}
pub(super) unsafe extern "C" fn initialize(_reserved: *const c_void) {}
