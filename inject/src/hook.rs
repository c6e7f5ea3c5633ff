//! The hot path every generated wrapper runs: [`begin`] before the real
//! function, [`end`] after it.
//!
//! After a thread's first record, a call costs one thread-local access, two
//! time-stamp counter reads and one ring push: no lock, no allocation, no system call.
//! The first record of a thread registers its ring (and, for the first thread,
//! opens the trace and starts the worker): that slow path may allocate and
//! lock, saves and restores `errno`, and never unwinds into the caller.

use crate::lifecycle::{self, State};
use crate::ring::Ring;
use crate::{clock, generated};
use rtrace_format::ApiRecord;
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;

/// Returned by a wrapper whose real function the driver does not have
/// (`CUDA_ERROR_NOT_FOUND`).
pub const MISSING_RESULT: u32 = 500;

/// Correlation ids are handed to threads in blocks of this many.
const CORRELATION_BLOCK: u64 = 1024;
static NEXT_CORRELATION_BLOCK: AtomicU64 = AtomicU64::new(1);

/// What [`begin`] hands to [`end`] for one recorded call (on the same thread: it holds
/// a pointer to the thread's state, so it is neither `Send` nor `Sync`).
#[derive(Clone, Copy, Debug)]
pub struct CallToken {
    function: u32,
    start_ns: u64,
    correlation: u64,
    thread: *const ThreadState,
}

struct ThreadState {
    /// This thread is inside rtrace or inside a recorded call: nested calls pass through.
    busy: Cell<bool>,
    /// Never record on this thread (the worker).
    excluded: Cell<bool>,
    /// The thread's ring (a leaked `Arc`, kept alive by the registry until closed).
    ring: Cell<*const Ring>,
    /// The process generation the ring belongs to (changes in a forked child).
    generation: Cell<u64>,
    next_correlation: Cell<u64>,
    correlation_end: Cell<u64>,
    /// Correlation id of the recorded call in progress on this thread (0: none).
    current: Cell<u64>,
}

thread_local! {
    static TLS: ThreadState = const {
        ThreadState {
            busy: Cell::new(false),
            excluded: Cell::new(false),
            ring: Cell::new(std::ptr::null()),
            generation: Cell::new(0),
            next_correlation: Cell::new(0),
            correlation_end: Cell::new(0),
            current: Cell::new(0),
        }
    };
    /// Dropped when the thread exits: closes its ring so the worker drains and frees it.
    static EXIT_GUARD: ExitGuard = const { ExitGuard { ring: Cell::new(std::ptr::null()) } };
}

struct ExitGuard {
    ring: Cell<*const Ring>,
}

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let ring = self.ring.replace(std::ptr::null());
        if ring.is_null() {
            return;
        }
        // SAFETY: the registry holds a strong reference until the ring is closed and drained.
        unsafe { (*ring).close() };
        let _ = TLS.try_with(|t| {
            if t.ring.get() == ring {
                t.ring.set(std::ptr::null());
            }
        });
    }
}

/// Real driver functions, by function id; null until resolved.
static REAL: [AtomicPtr<c_void>; generated::FUNCTION_COUNT] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; generated::FUNCTION_COUNT];

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

#[cold]
fn resolve_real(id: u32) -> *mut c_void {
    let p = with_errno_saved(|| crate::driver::lookup(id)).unwrap_or(std::ptr::null_mut());
    if !p.is_null() {
        REAL[id as usize].store(p, Ordering::Release);
    }
    p
}

/// Starts recording a call of function `id`; `None` when this call is not recorded
/// (tracing off, rtrace's own thread, or a call nested in another).
#[inline(always)]
pub fn begin(function: u32) -> Option<CallToken> {
    if lifecycle::state() != State::Running {
        return begin_not_running(function);
    }
    if !crate::capture::recording() {
        return begin_paused(function);
    }
    begin_running(function)
}

/// A call while capture control keeps recording off: most pass through unrecorded.
#[cold]
fn begin_paused(function: u32) -> Option<CallToken> {
    if crate::capture::paused_call(function) {
        return begin_running(function);
    }
    None
}

#[cold]
fn begin_not_running(function: u32) -> Option<CallToken> {
    if lifecycle::state() == State::Uninit {
        lifecycle::init();
        if lifecycle::state() == State::Running {
            return begin_running(function);
        }
    }
    None
}

#[inline(always)]
fn begin_running(function: u32) -> Option<CallToken> {
    TLS.try_with(|t| {
        if t.busy.get() || t.excluded.get() {
            return None;
        }
        if t.ring.get().is_null() || t.generation.get() != lifecycle::generation() {
            t.busy.set(true);
            let ok = with_errno_saved(|| register_thread(t)).unwrap_or(false);
            t.busy.set(false);
            if !ok {
                return None;
            }
        }
        let mut c = t.next_correlation.get();
        if c == t.correlation_end.get() {
            c = NEXT_CORRELATION_BLOCK.fetch_add(CORRELATION_BLOCK, Ordering::Relaxed);
            t.correlation_end.set(c + CORRELATION_BLOCK);
        }
        t.next_correlation.set(c + 1);
        t.busy.set(true);
        t.current.set(c);
        Some(CallToken {
            function,
            start_ns: clock::ticks(),
            correlation: c,
            thread: t,
        })
    })
    .ok()
    .flatten()
}

/// Finishes a call started by [`begin`]: stores its record in the thread's ring.
#[inline(always)]
pub fn end(token: Option<CallToken>, result: u32) {
    let Some(tok) = token else {
        return;
    };
    let end_ns = clock::ticks();
    // SAFETY: `begin` made the token on this thread from its thread-local state, which
    // lives as long as the thread; the wrapper hands it back before returning.
    let t = unsafe { &*tok.thread };
    t.busy.set(false);
    t.current.set(0);
    let ring = t.ring.get();
    if ring.is_null() {
        return;
    }
    // SAFETY: a non-null ring pointer stays valid until this thread's ExitGuard closes it.
    let ring = unsafe { &*ring };
    ring.push(ApiRecord {
        function: tok.function,
        result,
        start_ns: tok.start_ns,
        end_ns,
        correlation: tok.correlation,
    });
    if tok.function == generated::id::cuInit && result == 0 {
        after_cuinit();
    }
    if tok.function == generated::id::cuProfilerStop {
        crate::capture::after_stop();
    }
}

#[cold]
fn after_cuinit() {
    let _ = with_errno_saved(crate::cupti::after_cuinit);
}

/// Links the recorded call in progress on this thread to `source` (CUPTI's correlation id
/// for it): called by CUPTI's API callback, inside the real call. No allocation, no lock.
pub fn link_current(source: u32) {
    let _ = TLS.try_with(|t| {
        let current = t.current.get();
        let ring = t.ring.get();
        if current == 0 || ring.is_null() {
            return;
        }
        // SAFETY: a non-null ring pointer stays valid until this thread's ExitGuard closes it.
        unsafe { &*ring }.push(ApiRecord {
            function: crate::ring::LINK,
            result: source,
            start_ns: 0,
            end_ns: 0,
            correlation: current,
        });
    });
}

/// Pushes `rec` (an NVTX event, [`crate::ring::NVTX`]), and `attributes` after it if any,
/// into the calling thread's ring, giving the thread one first if it has none; `rec.start_ns`
/// is stamped with the tick counter now. Nothing when tracing is off, this is rtrace's
/// worker, or capture control keeps recording off (unless `always`: names and domains, which
/// later events need). No allocation or lock after the thread's first record.
pub fn push_event(mut rec: ApiRecord, attributes: Option<ApiRecord>, always: bool) {
    if !always && !crate::capture::recording() {
        return;
    }
    if lifecycle::state() != State::Running {
        if lifecycle::state() != State::Uninit {
            return;
        }
        lifecycle::init();
        if lifecycle::state() != State::Running {
            return;
        }
    }
    let _ = TLS.try_with(|t| {
        if t.excluded.get() {
            return;
        }
        if t.ring.get().is_null() || t.generation.get() != lifecycle::generation() {
            let was = t.busy.replace(true);
            let ok = with_errno_saved(|| register_thread(t)).unwrap_or(false);
            t.busy.set(was);
            if !ok {
                return;
            }
        }
        let ring = t.ring.get();
        if ring.is_null() {
            return;
        }
        rec.start_ns = clock::ticks();
        // SAFETY: a non-null ring pointer stays valid until this thread's ExitGuard closes it.
        let ring = unsafe { &*ring };
        if ring.push(rec) {
            if let Some(a) = attributes {
                ring.push(a);
            }
        }
    });
}

/// The correlation id of the recorded call in progress on this thread (0: none), for
/// records made inside it (CUPTI's resource callbacks). No allocation, no lock.
pub fn current_correlation() -> u64 {
    TLS.try_with(|t| t.current.get()).unwrap_or(0)
}

/// Runs `f` as rtrace's own code on this thread: driver calls and dlsym lookups it
/// makes are neither recorded nor rerouted.
pub fn internal<R>(f: impl FnOnce() -> R) -> R {
    let prev = TLS.try_with(|t| t.busy.replace(true)).unwrap_or(true);
    let r = f();
    let _ = TLS.try_with(|t| t.busy.set(prev));
    r
}

/// True while this thread runs rtrace's own code or a recorded call.
pub fn in_rtrace() -> bool {
    TLS.try_with(|t| t.busy.get() || t.excluded.get())
        .unwrap_or(true)
}

/// Marks the calling thread as never traced (the worker).
pub fn exclude_this_thread() {
    let _ = TLS.try_with(|t| t.excluded.set(true));
}

/// Forgets the calling thread's ring without touching it (after fork, in the child).
pub fn forget_this_thread() {
    let _ = TLS.try_with(|t| t.ring.set(std::ptr::null()));
    let _ = EXIT_GUARD.try_with(|g| g.ring.set(std::ptr::null()));
}

/// Slow path: gives the calling thread a ring registered with the process.
fn register_thread(t: &ThreadState) -> bool {
    let Some(process) = lifecycle::process() else {
        return false;
    };
    let tid = lifecycle::gettid();
    let ring = Arc::new(Ring::new(
        lifecycle::config().buffer_records,
        tid,
        lifecycle::thread_name(),
    ));
    let ptr = Arc::as_ptr(&ring);
    if !process.register(ring) {
        return false;
    }
    t.ring.set(ptr);
    t.generation.set(process.generation);
    // Not fatal if the guard is already gone (thread teardown): the final flush drains it.
    let _ = EXIT_GUARD.try_with(|g| g.ring.set(ptr));
    true
}

/// Runs `f` with errno preserved, catching any panic.
pub fn with_errno_saved<R>(f: impl FnOnce() -> R) -> Option<R> {
    // SAFETY: __errno_location returns this thread's errno slot.
    let errno = unsafe { *libc::__errno_location() };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
    match r {
        Ok(v) => Some(v),
        Err(_) => {
            lifecycle::disable("internal error (panic) in rtrace");
            None
        }
    }
}
