//! NVTX's callbacks: each event recorded on the calling thread, into its ring as
//! [`crate::ring::Entry::Nvtx`] entries; push and pop nesting kept per thread and domain; range and domain
//! ids numbered by rtrace.

use super::text::{c_text, w_text, WChar};
use crate::capture::recording;
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
    static DEPTH: RefCell<Vec<Nesting>> = const { RefCell::new(Vec::new()) };
}

/// A domain's push/pop ranges open on this thread.
struct Nesting {
    domain: u32,
    /// How many are open.
    depth: i32,
    /// Bit L: the push at level L (below 64) was recorded.
    recorded: u64,
}

/// The bit of `level` in [`Nesting::recorded`]; 0 from level 64 on.
fn level_bit(level: i32) -> u64 {
    1u64.checked_shl(level as u32).unwrap_or(0)
}

/// Whether the start of each range id was recorded: bit `id % STARTED_IDS`. A range open
/// while `STARTED_IDS` newer ones start can find its bit taken by one of them.
static STARTED: [AtomicU64; STARTED_IDS / 64] = [const { AtomicU64::new(0) }; STARTED_IDS / 64];
const STARTED_IDS: usize = 1 << 16;

fn started_bit(id: u64) -> (&'static AtomicU64, u64) {
    let i = (id % STARTED_IDS as u64) as usize;
    (&STARTED[i / 64], 1 << (i % 64))
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

/// Records an event of `kind` on this thread, as capture control says.
#[inline]
pub(super) fn record(kind: NvtxKind, domain: u32, a: &Attributes, value: u64) {
    record_when(kind, domain, a, value, recording());
}

/// Records an event of `kind` on this thread as if capture control were recording or not
/// (`recording`); returns whether it was recorded. A pop or an end is recorded exactly when
/// its range's push or start was, whatever capture control says when it comes: the reader
/// then never pairs a pop with another range's push.
fn record_when(kind: NvtxKind, domain: u32, a: &Attributes, value: u64, recording: bool) -> bool {
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
        _ => return false,
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
    true
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
            match d.iter_mut().find(|n| n.domain == domain) {
                Some(n) => {
                    n.depth += 1;
                    n.depth - 1
                }
                None => {
                    d.push(Nesting {
                        domain,
                        depth: 1,
                        recorded: 0,
                    });
                    0
                }
            }
        })
        .unwrap_or(0);
    if let Some(name) = crate::capture::nvtx_begin(domain, a.message, Some(level as u64), 0) {
        crate::cupti::capture_range_begin(Some(name));
    }
    let recorded = record_when(NvtxKind::Push, domain, &a, level as u64, recording());
    let _ = DEPTH.try_with(|d| {
        if let Some(n) = d.borrow_mut().iter_mut().find(|n| n.domain == domain) {
            n.recorded = (n.recorded & !level_bit(level)) | (level_bit(level) * recorded as u64);
        }
    });
    level
}

fn pop(domain: u32) -> i32 {
    let popped = DEPTH
        .try_with(|d| {
            let mut d = d.borrow_mut();
            let n = d.iter_mut().find(|n| n.domain == domain && n.depth > 0)?;
            n.depth -= 1;
            let bit = level_bit(n.depth);
            // From level 64 on, whether the push was recorded is not kept: capture control
            // says now.
            let pushed = (bit != 0).then_some(n.recorded & bit != 0);
            n.recorded &= !bit;
            Some((n.depth, pushed))
        })
        .ok()
        .flatten();
    let Some((level, pushed)) = popped else {
        return -1;
    };
    let recording = pushed.unwrap_or_else(recording);
    record_when(
        NvtxKind::Pop,
        domain,
        &Attributes::default(),
        level as u64,
        recording,
    );
    if crate::capture::nvtx_end(domain, Some(level as u64), 0) {
        crate::cupti::capture_range_end();
    }
    level
}

fn start(domain: u32, a: Attributes) -> u64 {
    let id = NEXT_RANGE.fetch_add(1, Ordering::Relaxed);
    if let Some(name) = crate::capture::nvtx_begin(domain, a.message, None, id) {
        crate::cupti::capture_range_begin(Some(name));
    }
    let recorded = record_when(NvtxKind::Start, domain, &a, id, recording());
    let (word, bit) = started_bit(id);
    if recorded {
        word.fetch_or(bit, Ordering::Relaxed);
    } else {
        word.fetch_and(!bit, Ordering::Relaxed);
    }
    id
}

fn end(domain: u32, id: u64) {
    let (word, bit) = started_bit(id);
    let started = word.fetch_and(!bit, Ordering::Relaxed) & bit != 0;
    record_when(NvtxKind::End, domain, &Attributes::default(), id, started);
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
