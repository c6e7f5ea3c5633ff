//! Sharing CUPTI with a program that is a CUPTI client itself (the PyTorch profiler, a tool
//! of its own). CUPTI 13.0 serves one activity client and one subscriber per process, so while
//! rtrace's GPU activity is on, rtrace stays CUPTI's only client and serves the program's as a
//! second one (the entry points are interposed in `exports.rs`):
//!
//! - **Activity records.** The program's buffer callbacks are kept here, not given to CUPTI.
//!   Kinds it enables that rtrace has not are enabled in CUPTI for it (and disabled when it
//!   disables them); rtrace converts only its own kinds. Each buffer CUPTI completes is copied,
//!   record by record, into buffers the program's request callback gives, keeping only the
//!   kinds the program enabled; a program buffer is handed back when the next record does not
//!   fit, and when the program flushes (so rtrace's own periodic flushes do not change where
//!   its buffers end).
//! - **Callbacks.** The program's subscriber is a handle of rtrace's; the callbacks it enables
//!   are enabled on rtrace's subscriber, whose callback calls the program's for them.
//! - **Timestamps.** A timestamp callback the program registers is given to CUPTI (its records
//!   must be on its clock), after rtrace has flushed what CUPTI timed on rtrace's clock; from
//!   then on rtrace reads both clocks together at every drain and maps CUPTI's times back to
//!   its own ([`super::clockmap`]).
//! - **`cuptiFinalize`** from the program ends its collection, not CUPTI.
//!
//! Nothing here is on the driver-call hot path but [`forward`], called from rtrace's CUPTI
//! callback: two atomic loads when the program enabled nothing.
// The entry points that use most of this are left out of unit-test builds.
#![cfg_attr(test, allow(dead_code))]

use super::*;
use std::sync::atomic::{AtomicBool, AtomicUsize};

/// The program's buffer callbacks (0: none).
static REQUEST: AtomicUsize = AtomicUsize::new(0);
static COMPLETE: AtomicUsize = AtomicUsize::new(0);
/// Activity kinds the program has enabled now, has enabled at some time, and those rtrace
/// enabled (bit = kind).
pub(super) static PROGRAM_KINDS: AtomicU64 = AtomicU64::new(0);
static PROGRAM_EVER: AtomicU64 = AtomicU64::new(0);
/// For each kind, when (on CUPTI's clock) the program last enabled it and last disabled it
/// (`u64::MAX` while enabled): a record of one of rtrace's kinds, which CUPTI keeps making,
/// goes to the program only if it started in that window (CUPTI hands over what it made while
/// a kind was enabled even after the program disables it, as the PyTorch profiler expects).
#[allow(clippy::declare_interior_mutable_const)]
const NEVER: AtomicU64 = AtomicU64::new(0);
static ENABLED_AT: [AtomicU64; 64] = [NEVER; 64];
static DISABLED_AT: [AtomicU64; 64] = [NEVER; 64];
pub(super) static OUR_KINDS: AtomicU64 = AtomicU64::new(0);
/// Records the program lost (no buffer, or one too small): its dropped count.
static PROGRAM_DROPPED: AtomicU64 = AtomicU64::new(0);

/// The program's subscriber: its callback and userdata (0: none).
static CALLBACK: AtomicUsize = AtomicUsize::new(0);
static USERDATA: AtomicUsize = AtomicUsize::new(0);
/// Callback domains (CUPTI has 7) and ids (below 4096 in every domain).
const DOMAINS: usize = 8;
const WORDS: usize = 64;
type CbidSet = [[AtomicU64; WORDS]; DOMAINS];
#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
#[allow(clippy::declare_interior_mutable_const)]
const ZERO_DOMAIN: [AtomicU64; WORDS] = [ZERO; WORDS];
/// Callbacks the program enabled, and those rtrace enabled.
static PROGRAM_CBIDS: CbidSet = [ZERO_DOMAIN; DOMAINS];
static OUR_CBIDS: CbidSet = [ZERO_DOMAIN; DOMAINS];
/// Whether the program enabled any callback (the fast check in [`forward`]).
static PROGRAM_ANY: AtomicBool = AtomicBool::new(false);

/// The handle the program gets for its subscriber: the address of this static.
static HANDLE: u8 = 0;
pub(super) fn handle() -> *mut c_void {
    &HANDLE as *const u8 as *mut c_void
}

/// The program's timestamp callback (0: none), and whether CUPTI's records are on it.
pub(super) static PROGRAM_CLOCK: AtomicUsize = AtomicUsize::new(0);
pub(super) static ON_PROGRAM_CLOCK: AtomicBool = AtomicBool::new(false);
/// Pairs of readings of the program's clock and rtrace's.
static CLOCK_MAP: Mutex<clockmap::ClockMap> = Mutex::new(clockmap::ClockMap::new());

/// The program's buffer being filled: its address, size, bytes used, records, record limit.
struct Open {
    buf: usize,
    size: usize,
    used: usize,
    records: usize,
    max_records: usize,
}
static OPEN: Mutex<Option<Open>> = Mutex::new(None);

/// rtrace holds CUPTI in this process, so the program's CUPTI calls are served here.
pub(super) fn sharing() -> bool {
    STATE.load(Ordering::Acquire) == ON && in_enabling_process()
}

/// Takes CUPTI for rtrace now if its GPU activity is asked for and not yet on (the program
/// called CUPTI before its first `cuInit`), so that the program becomes the second client.
pub(super) fn take_early() {
    if state::config().gpu_activity.any() {
        ENABLE.call_once(enable);
    }
}

fn bit(kind: i32) -> u64 {
    if (0..64).contains(&kind) {
        1 << kind
    } else {
        0
    }
}

fn has(set: &CbidSet, domain: u32, cbid: u32) -> bool {
    let (d, c) = (domain as usize, cbid as usize);
    d < DOMAINS && c < WORDS * 64 && set[d][c / 64].load(Ordering::Relaxed) & (1 << (c % 64)) != 0
}

fn set(set: &CbidSet, domain: u32, cbid: u32, on: bool) {
    let (d, c) = (domain as usize, cbid as usize);
    if d < DOMAINS && c < WORDS * 64 {
        if on {
            set[d][c / 64].fetch_or(1 << (c % 64), Ordering::Relaxed);
        } else {
            set[d][c / 64].fetch_and(!(1 << (c % 64)), Ordering::Relaxed);
        }
    }
}

fn set_domain(s: &CbidSet, domain: u32, on: bool) {
    if let Some(words) = s.get(domain as usize) {
        for w in words {
            w.store(if on { u64::MAX } else { 0 }, Ordering::Relaxed);
        }
    }
}

fn refresh_any() {
    let any = PROGRAM_CBIDS
        .iter()
        .flatten()
        .any(|w| w.load(Ordering::Relaxed) != 0);
    PROGRAM_ANY.store(any, Ordering::Release);
}

/// rtrace enabled this callback on its subscriber.
pub(super) fn mark_ours(domain: u32, cbid: u32) {
    set(&OUR_CBIDS, domain, cbid, true);
}

pub(super) fn ours(domain: u32, cbid: u32) -> bool {
    has(&OUR_CBIDS, domain, cbid)
}

/// From rtrace's CUPTI callback: the program's callback, if it enabled this one.
#[inline]
pub(super) fn forward(domain: u32, cbid: u32, data: *const u8) {
    if !PROGRAM_ANY.load(Ordering::Acquire) || !has(&PROGRAM_CBIDS, domain, cbid) {
        return;
    }
    let cb = CALLBACK.load(Ordering::Acquire);
    if cb != 0 {
        // SAFETY: the program's CUpti_CallbackFunc, with CUPTI's own arguments.
        let f = unsafe { std::mem::transmute::<usize, CallbackFn>(cb) };
        f(
            USERDATA.load(Ordering::Acquire) as *mut c_void,
            domain,
            cbid,
            data,
        );
    }
}

/// `cuptiActivityRegisterCallbacks` of the program.
pub(super) fn register_callbacks(request: usize, complete: usize) -> i32 {
    if request == 0 || complete == 0 {
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    let first = REQUEST.swap(request, Ordering::AcqRel) == 0;
    COMPLETE.store(complete, Ordering::Release);
    if first {
        notice(
            "GPU activity shared with the program's own CUPTI client (for example the PyTorch \
             profiler): it gets the records it asks for, rtrace keeps its own"
                .into(),
        );
    }
    0
}

/// Now on the clock CUPTI times records with.
fn cupti_now() -> u64 {
    let f = PROGRAM_CLOCK.load(Ordering::Acquire);
    if f != 0 && ON_PROGRAM_CLOCK.load(Ordering::Acquire) {
        // SAFETY: the program's timestamp callback, a plain `uint64_t (*)(void)`.
        unsafe { std::mem::transmute::<usize, TimestampFn>(f)() }
    } else {
        clock::now_ns()
    }
}

/// `cuptiActivityEnable` of the program.
pub(super) fn enable_kind(api: &Api, kind: i32) -> i32 {
    let b = bit(kind);
    if b != 0 && OUR_KINDS.load(Ordering::Acquire) & b == 0 {
        // SAFETY: plain CUPTI call.
        let rc = unsafe { (api.enable)(kind) };
        if rc != 0 {
            return rc;
        }
    } else if b == 0 {
        // SAFETY: plain CUPTI call (CUPTI answers for a kind out of range).
        return unsafe { (api.enable)(kind) };
    }
    let k = kind as usize;
    DISABLED_AT[k].store(u64::MAX, Ordering::Release);
    ENABLED_AT[k].store(cupti_now(), Ordering::Release);
    PROGRAM_EVER.fetch_or(b, Ordering::AcqRel);
    PROGRAM_KINDS.fetch_or(b, Ordering::AcqRel);
    keep_open();
    0
}

/// `cuptiActivityDisable` of the program.
pub(super) fn disable_kind(api: &Api, kind: i32) -> i32 {
    let b = bit(kind);
    if b != 0 && PROGRAM_KINDS.fetch_and(!b, Ordering::AcqRel) & b != 0 {
        DISABLED_AT[kind as usize].store(cupti_now(), Ordering::Release);
    }
    if OUR_KINDS.load(Ordering::Acquire) & b == 0 {
        // SAFETY: plain CUPTI call.
        return unsafe { (api.disable)(kind) };
    }
    0
}

/// `cuptiActivityGetNumDroppedRecords` of the program: what it lost since it last asked.
pub(super) fn dropped(n: *mut usize) -> i32 {
    if n.is_null() {
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    // SAFETY: the caller's out-parameter.
    unsafe { *n = PROGRAM_DROPPED.swap(0, Ordering::AcqRel) as usize };
    0
}

/// `cuptiActivityFlushAll` of the program: CUPTI's flush (which hands every finished buffer to
/// [`complete`]), then the program's open buffer.
pub(super) fn flush_all(api: &Api, flag: u32) -> i32 {
    // SAFETY: plain CUPTI call.
    let rc = unsafe { (api.flush_all)(flag) };
    hand_back(std::ptr::null_mut(), 0);
    rc
}

/// `cuptiActivityRegisterTimestampCallback` of the program: what CUPTI has timed on rtrace's
/// clock is flushed to rtrace first, then CUPTI gets the program's clock.
pub(super) fn register_timestamp(api: &Api, f: TimestampFn) -> i32 {
    flush(false);
    PROGRAM_CLOCK.store(f as usize, Ordering::Release);
    ON_PROGRAM_CLOCK.store(true, Ordering::Release);
    read_clocks();
    // SAFETY: the program's callback, as it asked.
    let rc = unsafe { (api.register_timestamp)(f) };
    // The program's windows restart on the new clock: open ones from now, closed ones end.
    let on = PROGRAM_KINDS.load(Ordering::Acquire);
    let now = cupti_now();
    for (k, at) in ENABLED_AT.iter().enumerate() {
        at.store(
            if on & (1 << k) != 0 { now } else { u64::MAX },
            Ordering::Release,
        );
    }
    if rc == 0 {
        notice(
            "CUPTI times GPU work on the program's own clock (it registered a timestamp \
             callback): rtrace maps those times to its clock from readings of both"
                .into(),
        );
    }
    rc
}

/// Reads the program's clock and rtrace's together (each drain, and when the program's clock
/// is set), for [`map_time`].
pub(super) fn read_clocks() {
    let f = PROGRAM_CLOCK.load(Ordering::Acquire);
    if f == 0 {
        return;
    }
    // SAFETY: the program's timestamp callback, a plain `uint64_t (*)(void)`.
    let program = unsafe { std::mem::transmute::<usize, TimestampFn>(f) };
    let (p, o) = clockmap::read_pair(|| program(), clock::now_ns);
    if let Ok(mut m) = CLOCK_MAP.lock() {
        m.add(p, o);
    }
}

/// The clock map for records CUPTI timed on the program's clock.
pub(super) fn with_map<R>(f: impl FnOnce(&clockmap::ClockMap) -> R) -> R {
    match CLOCK_MAP.lock() {
        Ok(m) => f(&m),
        Err(_) => f(&clockmap::ClockMap::new()),
    }
}

/// `cuptiSubscribe[_v2]` of the program: a handle of rtrace's, or
/// `CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED` if it already has one.
pub(super) fn subscribe(subscriber: *mut *mut c_void, callback: usize, userdata: usize) -> i32 {
    if subscriber.is_null() || callback == 0 {
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    if CALLBACK
        .compare_exchange(0, callback, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    USERDATA.store(userdata, Ordering::Release);
    // SAFETY: the caller's out-parameter.
    unsafe { *subscriber = handle() };
    0
}

/// `cuptiUnsubscribe` of the program's handle: its callbacks off.
pub(super) fn unsubscribe(api: &Api) -> i32 {
    for domain in 1..DOMAINS as u32 {
        if PROGRAM_CBIDS[domain as usize]
            .iter()
            .any(|w| w.load(Ordering::Relaxed) != 0)
        {
            enable_domain(api, 0, domain);
        }
    }
    CALLBACK.store(0, Ordering::Release);
    USERDATA.store(0, Ordering::Release);
    0
}

/// `cuptiEnableCallback` on the program's handle.
pub(super) fn enable_callback(api: &Api, on: u32, domain: u32, cbid: u32) -> i32 {
    let sub = SUBSCRIBER.load(Ordering::Acquire);
    let want = on != 0 || ours(domain, cbid);
    // SAFETY: plain CUPTI call on rtrace's subscriber.
    let rc = unsafe { (api.enable_callback)(u32::from(want), sub, domain, cbid) };
    if rc == 0 {
        set(&PROGRAM_CBIDS, domain, cbid, on != 0);
        refresh_any();
    }
    rc
}

/// `cuptiEnableDomain` on the program's handle: CUPTI's, then rtrace's own callbacks of the
/// domain back on if it was turned off.
pub(super) fn enable_domain(api: &Api, on: u32, domain: u32) -> i32 {
    let sub = SUBSCRIBER.load(Ordering::Acquire);
    // SAFETY: plain CUPTI call on rtrace's subscriber.
    let rc = unsafe { (api.enable_domain)(on, sub, domain) };
    if rc != 0 {
        return rc;
    }
    set_domain(&PROGRAM_CBIDS, domain, on != 0);
    refresh_any();
    if on == 0 && (domain as usize) < DOMAINS {
        for (w, word) in OUR_CBIDS[domain as usize].iter().enumerate() {
            let mut bits = word.load(Ordering::Relaxed);
            while bits != 0 {
                let cbid = (w * 64) as u32 + bits.trailing_zeros();
                bits &= bits - 1;
                // SAFETY: plain CUPTI call on rtrace's subscriber.
                unsafe { (api.enable_callback)(1, sub, domain, cbid) };
            }
        }
    }
    0
}

/// `cuptiGetCallbackState` on the program's handle.
pub(super) fn callback_state(enabled: *mut u32, domain: u32, cbid: u32) -> i32 {
    if enabled.is_null() || domain == 0 || domain as usize >= DOMAINS {
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    // SAFETY: the caller's out-parameter.
    unsafe { *enabled = u32::from(has(&PROGRAM_CBIDS, domain, cbid)) };
    0
}

/// `cuptiFinalize` of the program: its collection ends (what CUPTI holds is flushed to it
/// first); CUPTI stays up for rtrace.
pub(super) fn finalize(api: &Api) -> i32 {
    flush_all(api, layout::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    let kinds = PROGRAM_KINDS.load(Ordering::Acquire);
    for kind in 0..64 {
        if kinds & (1 << kind) != 0 {
            disable_kind(api, kind);
        }
    }
    if CALLBACK.load(Ordering::Acquire) != 0 {
        unsubscribe(api);
    }
    PROGRAM_EVER.store(0, Ordering::Release);
    REQUEST.store(0, Ordering::Release);
    COMPLETE.store(0, Ordering::Release);
    0
}

/// Whether a record of `kind` goes to the program (see [`ENABLED_AT`]).
fn for_program(kind: i32, rec: &[u8]) -> bool {
    let b = bit(kind);
    if PROGRAM_EVER.load(Ordering::Acquire) & b == 0 {
        return false;
    }
    // A kind only the program enabled: CUPTI made the record while it was enabled.
    if OUR_KINDS.load(Ordering::Acquire) & b == 0 {
        return true;
    }
    let now_on = PROGRAM_KINDS.load(Ordering::Acquire) & b != 0;
    let start = match records::time_fields(kind).first() {
        Some(&at) if at + 8 <= rec.len() => records::u64_at(rec, at),
        _ => return now_on,
    };
    if start == 0 {
        return now_on;
    }
    let k = kind as usize;
    start >= ENABLED_AT[k].load(Ordering::Acquire)
        && start <= DISABLED_AT[k].load(Ordering::Acquire)
}

/// A buffer CUPTI completed: the records of the kinds the program enabled are copied into its
/// buffers. On CUPTI's thread (or the flushing one).
pub(super) fn copy_to_program(
    api: &Api,
    ctx: *mut c_void,
    stream: u32,
    buf: *mut u8,
    valid: usize,
) {
    if PROGRAM_EVER.load(Ordering::Acquire) == 0 || REQUEST.load(Ordering::Acquire) == 0 {
        return;
    }
    // A flush from inside the program's own buffer callback finds the buffer in use: what it
    // completes now is counted as lost to the program rather than deadlocking.
    let Some(_inside) = Delivering::enter() else {
        PROGRAM_DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let mut open = match OPEN.lock() {
        Ok(o) => o,
        Err(_) => return,
    };
    let mut rec: *mut u8 = std::ptr::null_mut();
    let mut prev: *mut u8 = std::ptr::null_mut();
    loop {
        // SAFETY: `buf..buf+valid` is the buffer CUPTI filled; `rec` is CUPTI's cursor.
        let more = unsafe { (api.next_record)(buf, valid, &mut rec) } == 0 && !rec.is_null();
        if !prev.is_null() {
            let end = if more {
                rec as usize
            } else {
                buf as usize + valid
            };
            let len = end - prev as usize;
            // SAFETY: a whole record (and its alignment padding) inside the valid part.
            let bytes = unsafe { std::slice::from_raw_parts(prev, len) };
            let kind = u32::from_le_bytes(bytes[..4].try_into().unwrap_or([0; 4])) as i32;
            if for_program(kind, bytes) {
                put(&mut open, ctx, stream, bytes);
            }
        }
        if !more {
            break;
        }
        prev = rec;
    }
}

/// Appends one record to the program's open buffer, handing it back first if it is full.
fn put(open: &mut Option<Open>, ctx: *mut c_void, stream: u32, rec: &[u8]) {
    let len = rec.len().next_multiple_of(8);
    if let Some(o) = open.as_ref() {
        let full = o.used + len > o.size || (o.max_records != 0 && o.records >= o.max_records);
        if full {
            give_back(open.take(), ctx, stream);
        }
    }
    if open.is_none() {
        *open = request_buffer();
        if open.as_ref().is_some_and(|o| o.used + len > o.size) {
            // Too small for this record: handed back as it is, the record counted as lost.
            give_back(open.take(), ctx, stream);
        }
    }
    match open.as_mut() {
        Some(o) => {
            // SAFETY: `o.buf + o.used .. + rec.len()` lies inside the program's buffer.
            unsafe {
                std::ptr::copy_nonoverlapping(rec.as_ptr(), (o.buf + o.used) as *mut u8, rec.len())
            };
            o.used += len;
            o.records += 1;
        }
        None => {
            PROGRAM_DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn request_buffer() -> Option<Open> {
    let request = REQUEST.load(Ordering::Acquire);
    if request == 0 {
        return None;
    }
    // SAFETY: the program's CUpti_BuffersCallbackRequestFunc.
    let request = unsafe { std::mem::transmute::<usize, RequestFn>(request) };
    let (mut buf, mut size, mut max) = (std::ptr::null_mut::<u8>(), 0usize, 0usize);
    request(&mut buf, &mut size, &mut max);
    if buf.is_null() || size == 0 {
        return None;
    }
    // Records start at the buffer's first 8-byte boundary, as CUPTI places them.
    let skip = (buf as usize).next_multiple_of(8) - buf as usize;
    Some(Open {
        buf: buf as usize,
        size,
        used: skip,
        records: 0,
        max_records: max,
    })
}

fn give_back(open: Option<Open>, ctx: *mut c_void, stream: u32) {
    let (Some(o), complete) = (open, COMPLETE.load(Ordering::Acquire)) else {
        return;
    };
    if complete == 0 {
        return;
    }
    // SAFETY: the program's CUpti_BuffersCallbackCompleteFunc, with its own buffer.
    let complete = unsafe { std::mem::transmute::<usize, CompleteFn>(complete) };
    let valid = if o.records == 0 { 0 } else { o.used };
    complete(ctx, stream, o.buf as *mut u8, o.size, valid);
}

/// Marks the thread as delivering to the program (its callbacks may call CUPTI again).
struct Delivering;

thread_local! {
    static DELIVERING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Delivering {
    fn enter() -> Option<Delivering> {
        DELIVERING
            .try_with(|d| (!d.replace(true)).then_some(Delivering))
            .ok()
            .flatten()
    }
}

impl Drop for Delivering {
    fn drop(&mut self) {
        let _ = DELIVERING.try_with(|d| d.set(false));
    }
}

/// Hands the program's open buffer back, if it holds a record, and asks for the next.
fn hand_back(ctx: *mut c_void, stream: u32) {
    let Some(_inside) = Delivering::enter() else {
        return;
    };
    if let Ok(mut open) = OPEN.lock() {
        if open.as_ref().is_some_and(|o| o.records > 0) {
            give_back(open.take(), ctx, stream);
        }
    }
    drop(_inside);
    keep_open();
}

/// While the program collects, it always holds a buffer of CUPTI's, as with CUPTI, which asks
/// for one as soon as it makes a record: the PyTorch profiler flushes at its end only if CUPTI
/// holds one of its buffers.
fn keep_open() {
    if PROGRAM_KINDS.load(Ordering::Acquire) == 0 {
        return;
    }
    let Some(_inside) = Delivering::enter() else {
        return;
    };
    if let Ok(mut open) = OPEN.lock() {
        if open.is_none() {
            *open = request_buffer();
        }
    }
}

const CUPTI_ERROR_INVALID_PARAMETER: i32 = layout::CUPTI_ERROR_INVALID_PARAMETER as i32;
const CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: i32 =
    layout::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED as i32;
