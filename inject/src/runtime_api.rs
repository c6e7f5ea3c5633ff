//! Runtime API records, by one of two routes ([`Route`], docs/runtime-api.md): CUPTI's runtime
//! callbacks (`CUPTI_CB_DOMAIN_RUNTIME_API`, enabled by `cupti::callbacks`), or rtrace's own
//! exports of libcudart's functions (`generated/runtime_stubs.rs`, through `crate::generic`'s
//! trampoline: [`interposed_enter`], [`interposed_exit`]). Either calls [`enter`] and [`exit`]
//! on the program's thread, around the runtime function (`cudaLaunchKernel`, ...). A runtime
//! call becomes one API record ([`rtrace_format::runtime_function`] of CUPTI's callback id) in
//! the thread's ring, with an rtrace correlation id linked to CUPTI's; the driver calls it makes
//! are recorded as ever, inside its interval, and link the GPU work they make to it
//! ([`crate::thread::link_current`]): that work is linked to the runtime call whichever id CUPTI
//! gives it.
//!
//! Hot path: after the thread's first record, one thread-local access, two time-stamp counter
//! reads and two ring pushes; no lock, no allocation, no system call.

use crate::clock;
use crate::ring::Entry;
use crate::state::{self, State};
use crate::thread;
use rtrace_format::{runtime_function, ApiRecord};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

pub use crate::config::RuntimeRoute as Route;

/// The interposed stubs record: the route is [`Route::Interpose`] (set at start-up, or when
/// CUPTI's route could not be had). The stubs' assembly reads it too (one byte, non-zero:
/// enter the trampoline).
pub(crate) static INTERPOSING: AtomicBool = AtomicBool::new(false);

/// An interposed runtime function was entered while the stubs record; and the trace said so.
static INTERPOSED_SEEN: AtomicBool = AtomicBool::new(false);
static INTERPOSED_SAID: AtomicBool = AtomicBool::new(false);

/// The trace's notice once the stubs recorded a runtime call.
pub const INTERPOSED_NOTICE: &str = "runtime API calls recorded (interposing libcudart)";

/// True once, when the stubs recorded their first runtime call (the worker then writes
/// [`INTERPOSED_NOTICE`]): a program that never calls the runtime gets no notice.
pub fn first_interposed() -> bool {
    INTERPOSED_SEEN.load(Ordering::Relaxed)
        && !INTERPOSED_SAID.load(Ordering::Relaxed)
        && !INTERPOSED_SAID.swap(true, Ordering::Relaxed)
}

/// In a forked child, whose trace is its own: its notice is said once it records a call.
pub fn after_fork_in_child() {
    INTERPOSED_SEEN.store(false, Ordering::Relaxed);
    INTERPOSED_SAID.store(false, Ordering::Relaxed);
}

/// Whether the interposed stubs record runtime calls from now on.
pub fn set_interposing(on: bool) {
    INTERPOSING.store(on, Ordering::Relaxed);
}

/// An interposed runtime function is entered: false (and nothing done) when the stubs do not
/// record; true when [`interposed_exit`] must follow at its return. The session is started
/// (its route read) before the first.
#[cfg_attr(test, allow(dead_code))] // unit tests run the trampoline against stand-ins
#[inline]
pub fn interposed_enter() -> bool {
    if !INTERPOSING.load(Ordering::Relaxed) {
        return false;
    }
    enter(0, crate::capture::recording());
    if !INTERPOSED_SEEN.load(Ordering::Relaxed) {
        INTERPOSED_SEEN.store(true, Ordering::Relaxed);
    }
    true
}

/// The interposed runtime function of stub entry `cbid` (CUPTI's callback id, with
/// `runtime_ids::NO_RESULT` for a function returning no `cudaError_t`) returned `rax`.
#[cfg_attr(test, allow(dead_code))]
#[inline]
pub fn interposed_exit(cbid: u16, rax: u64) {
    use crate::runtime_ids::NO_RESULT;
    let result = if cbid & NO_RESULT != 0 { 0 } else { rax as u32 };
    exit(u32::from(cbid & !NO_RESULT), result);
}

/// A runtime call with CUPTI correlation id `source` (0: none) is entered on this thread;
/// `recording`: capture control lets calls be recorded now.
#[inline]
pub fn enter(source: u32, recording: bool) {
    let _ = thread::with(|t| {
        let rc = &t.runtime;
        let depth = rc.depth.get();
        rc.depth.set(depth + 1);
        let Some(start) = rc.start.get(depth) else {
            return;
        };
        start.set(0);
        let recorded = state::state() == State::Running
            && recording
            && !t.busy.get()
            && !t.excluded.get()
            && t.ensure_ring();
        if recorded {
            let c = t.take_correlation();
            rc.correlation[depth].set(c);
            if source != 0 {
                t.ring.push(Entry::Link {
                    call: c,
                    source,
                    symbol: 0,
                });
            }
            start.set(clock::ticks().max(1));
        }
    });
}

/// The runtime call of callback id `cbid` entered last on this thread returns `result`.
#[inline]
pub fn exit(cbid: u32, result: u32) {
    let _ = thread::with(|t| {
        let rc = &t.runtime;
        let Some(depth) = rc.depth.get().checked_sub(1) else {
            return;
        };
        rc.depth.set(depth);
        let Some(start) = rc.start.get(depth).map(Cell::get) else {
            return;
        };
        if start == 0 || !t.has_ring() {
            return;
        }
        let end_ns = clock::ticks();
        t.ring.push_waiting(Entry::Call(ApiRecord {
            function: runtime_function(cbid),
            result,
            start_ns: start,
            end_ns,
            correlation: rc.correlation[depth].get(),
        }));
    });
}
