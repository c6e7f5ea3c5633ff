//! Runtime API records: CUPTI's runtime callbacks (`CUPTI_CB_DOMAIN_RUNTIME_API`, enabled by
//! `cupti::callbacks` when GPU activity is on) call [`enter`] and [`exit`] on the program's
//! thread, around the runtime function (`cudaLaunchKernel`, `cudaMemcpyAsync`, ...). A runtime
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
