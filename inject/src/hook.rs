//! The hot path every generated wrapper runs: [`begin`] before the real
//! function, [`end`] after it.
//!
//! After a thread's first record, a call costs one thread-local access, two
//! time-stamp counter reads and one ring push: no lock, no allocation, no system call.
//! The first record of a thread registers its ring (and, for the first thread,
//! opens the trace and starts the worker): that slow path ([`crate::thread`]) may allocate
//! and lock, saves and restores `errno`, and never unwinds into the caller. What runs after
//! particular functions is the session's table ([`crate::actions`]).
//!
//! One `unsafe` block stays here, outside the FFI and system-call modules: [`CallToken`]
//! points at the thread's state, so that [`end`] reaches it without a second thread-local
//! lookup (in a shared library, a call to `__tls_get_addr`).

use crate::ring::Entry;
use crate::state::{self, State};
use crate::thread::{self, ThreadState};
use crate::{actions, clock};
use rtrace_format::{ApiRecord, IN_RUNTIME};
use std::ffi::c_void;

/// The real driver function `id` that a wrapper calls (null when the driver lacks it). Its
/// first use — the first call of each function — also looks for libraries loaded since that
/// bind the driver past rtrace ([`crate::got::rescan`]).
#[inline(always)]
pub fn real(id: u32) -> *mut c_void {
    let p = crate::driver::resolved(id);
    if !p.is_null() {
        return p;
    }
    first_use(id)
}

#[cold]
fn first_use(id: u32) -> *mut c_void {
    let p = crate::driver::real(id);
    crate::got::rescan();
    p
}

/// Returned by a wrapper whose real function the driver does not have
/// (`CUDA_ERROR_NOT_FOUND`).
pub const MISSING_RESULT: u32 = 500;

/// What [`begin`] hands to [`end`] for one recorded call (on the same thread: it holds
/// a pointer to the thread's state, so it is neither `Send` nor `Sync`). Neither `Copy` nor
/// `Clone`: [`end`] consumes it, so a call cannot be ended twice.
#[derive(Debug)]
pub struct CallToken {
    function: u32,
    start_ns: u64,
    correlation: u64,
    thread: *const ThreadState,
}

impl CallToken {
    /// The state of the thread that made the token (the one calling).
    #[inline(always)]
    fn thread(&self) -> &ThreadState {
        // SAFETY: `begin` made the token on this thread from its thread-local state, which
        // lives as long as the thread; the wrapper hands it back before returning, and a
        // token is neither `Send` nor `Copy`.
        unsafe { &*self.thread }
    }
}

/// `CallToken` must not be `Copy` (a copy could end a call twice): this fails to compile
/// (the trait's item becomes ambiguous) if it were.
const _: fn() = || {
    trait AmbiguousIfCopy<A> {
        fn some_item() {}
    }
    impl<T: ?Sized> AmbiguousIfCopy<()> for T {}
    impl<T: Copy> AmbiguousIfCopy<u8> for T {}
    let _ = <CallToken as AmbiguousIfCopy<_>>::some_item;
};

/// Starts recording a call of function `id`; `None` when this call is not recorded
/// (tracing off, rtrace's own thread, or a call nested in another).
#[inline(always)]
pub fn begin(function: u32) -> Option<CallToken> {
    if state::state() != State::Running {
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
    match state::state() {
        State::Uninit => {
            crate::session::start();
            if state::state() == State::Running {
                return begin_running(function);
            }
            None
        }
        // The trace's end is written; the rings are pages of the file: a reader finds calls
        // other threads make while the process ends.
        State::Finished if crate::capture::recording() => begin_running(function),
        _ => None,
    }
}

#[inline(always)]
fn begin_running(function: u32) -> Option<CallToken> {
    thread::with(|t| {
        if t.busy.get() || t.excluded.get() {
            return None;
        }
        if !t.ensure_ring() {
            return None;
        }
        let c = t.take_correlation();
        t.busy.set(true);
        t.current.set(c);
        Some(CallToken {
            function,
            start_ns: clock::ticks(),
            correlation: c,
            thread: t,
        })
    })
    .flatten()
}

/// Runs the real launch `run` of kernel `f` (a launch wrapper's call, after [`begin`]):
/// exactly once, its result returned unchanged. Profiled when kernel profiling is on, the call
/// is recorded and the kernel controls choose it; otherwise one relaxed load more than a plain
/// call.
#[inline(always)]
pub fn launch(token: &Option<CallToken>, f: *mut c_void, run: impl FnOnce() -> u32) -> u32 {
    if !crate::cupti::profiling() {
        return run();
    }
    match token {
        Some(t) => {
            // Keyed as the kernel record will be (by the runtime call that launched it, if
            // any), so that the record takes the profiled times and the profile its record.
            let correlation = t.thread().runtime.work_correlation(t.correlation);
            crate::cupti::profiled_launch(correlation, f, run)
        }
        None => run(),
    }
}

/// Finishes a call started by [`begin`]: stores its record in the thread's ring.
#[inline(always)]
pub fn end(token: Option<CallToken>, result: u32) {
    let Some(tok) = token else {
        return;
    };
    let end_ns = clock::ticks();
    let t = tok.thread();
    t.busy.set(false);
    t.current.set(0);
    if !t.ring.is_some() {
        return;
    }
    // A driver call inside a recorded runtime call says so (the runtime call's record comes
    // after it, when the runtime call returns).
    let function = if t.runtime.inside_recorded() {
        tok.function | IN_RUNTIME
    } else {
        tok.function
    };
    t.ring.push_waiting(Entry::Call(ApiRecord {
        function,
        result,
        start_ns: tok.start_ns,
        end_ns,
        correlation: tok.correlation,
    }));
    actions::after_call(tok.function, result);
}
