//! Each thread's tracing state: its reentrancy flag, its ring, its block of correlation ids and
//! the recorded call in progress. The hot path ([`crate::hook`]) reads it through [`with`];
//! CUPTI's callbacks and NVTX push records made inside a call through [`link_current`] and
//! [`push_event`]; rtrace's own code runs inside [`internal`].
//!
//! A thread's first record gives it a ring, registered with the process ([`register`]): that
//! slow path may allocate and lock, saves and restores `errno`, and never unwinds.

use crate::process;
use crate::ring::{Entry, RingRef};
use crate::state;
use crate::{clock, sys};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// One thread's tracing state.
pub struct ThreadState {
    /// This thread is inside rtrace or inside a recorded call: nested calls pass through.
    pub busy: Cell<bool>,
    /// Never record on this thread (the worker).
    pub excluded: Cell<bool>,
    /// The thread's ring (kept alive by the process's registry until closed).
    pub ring: RingRef,
    /// The process generation the ring belongs to (changes in a forked child).
    pub generation: Cell<u64>,
    pub next_correlation: Cell<u64>,
    pub correlation_end: Cell<u64>,
    /// Correlation id of the recorded call in progress on this thread (0: none).
    pub current: Cell<u64>,
    /// The runtime API calls in progress on this thread ([`crate::runtime_api`]).
    pub runtime: RuntimeCalls,
}

/// Runtime API calls in progress on one thread, innermost last: CUPTI's runtime callbacks
/// come in enter/exit pairs on the calling thread.
pub struct RuntimeCalls {
    /// Calls entered and not yet exited (may exceed [`RUNTIME_DEPTH`]: deeper ones are not
    /// recorded).
    pub depth: Cell<usize>,
    /// Each level's start in ticks (0: that call is not recorded) and rtrace correlation id.
    pub start: [Cell<u64>; RUNTIME_DEPTH],
    pub correlation: [Cell<u64>; RUNTIME_DEPTH],
}

impl RuntimeCalls {
    /// Whether the innermost runtime call in progress on this thread is recorded (a driver
    /// call made now is inside it).
    #[inline(always)]
    pub fn inside_recorded(&self) -> bool {
        self.innermost_recorded().is_some()
    }

    /// The correlation id of the innermost runtime call in progress, if it is recorded.
    #[inline(always)]
    pub fn innermost_recorded(&self) -> Option<u64> {
        let d = self.depth.get().checked_sub(1)?;
        if self.start.get(d)?.get() == 0 {
            return None;
        }
        self.correlation.get(d).map(Cell::get)
    }

    /// The correlation id GPU work launched now by the recorded driver call `driver_call` is
    /// linked to: the innermost recorded runtime call's, as nsys and CUPTI link it, else the
    /// driver call's own. Its kernel record and its profile carry the same id.
    #[inline(always)]
    pub fn work_correlation(&self, driver_call: u64) -> u64 {
        self.innermost_recorded().unwrap_or(driver_call)
    }
}

/// Runtime calls nested deeper than this on one thread are not recorded.
pub const RUNTIME_DEPTH: usize = 4;

thread_local! {
    static TLS: ThreadState = const {
        ThreadState {
            busy: Cell::new(false),
            excluded: Cell::new(false),
            ring: RingRef::none(),
            generation: Cell::new(0),
            next_correlation: Cell::new(0),
            correlation_end: Cell::new(0),
            current: Cell::new(0),
            runtime: RuntimeCalls {
                depth: Cell::new(0),
                start: [const { Cell::new(0) }; RUNTIME_DEPTH],
                correlation: [const { Cell::new(0) }; RUNTIME_DEPTH],
            },
        }
    };
    /// Dropped when the thread exits: closes its ring so the worker drains and frees it.
    static EXIT_GUARD: ExitGuard = const { ExitGuard { ring: RingRef::none() } };
}

struct ExitGuard {
    ring: RingRef,
}

impl Drop for ExitGuard {
    fn drop(&mut self) {
        if !self.ring.is_some() {
            return;
        }
        let _ = TLS.try_with(|t| {
            if t.ring.same(&self.ring) {
                t.ring.release();
            }
        });
        self.ring.close();
    }
}

/// Runs `f` on the calling thread's state; `None` in the thread's teardown.
#[inline(always)]
pub fn with<R>(f: impl FnOnce(&ThreadState) -> R) -> Option<R> {
    TLS.try_with(f).ok()
}

/// Correlation ids are handed to threads in blocks of this many.
const CORRELATION_BLOCK: u64 = 1024;
static NEXT_CORRELATION_BLOCK: AtomicU64 = AtomicU64::new(1);

impl ThreadState {
    /// The thread's next correlation id (process-unique: threads take them in blocks).
    #[inline(always)]
    pub fn take_correlation(&self) -> u64 {
        let mut c = self.next_correlation.get();
        if c == self.correlation_end.get() {
            c = NEXT_CORRELATION_BLOCK.fetch_add(CORRELATION_BLOCK, Ordering::Relaxed);
            self.correlation_end.set(c + CORRELATION_BLOCK);
        }
        self.next_correlation.set(c + 1);
        c
    }

    /// Whether this thread's ring belongs to the current process (not a forked parent's).
    #[inline(always)]
    pub fn has_ring(&self) -> bool {
        self.ring.is_some() && self.generation.get() == state::generation()
    }

    /// Gives the thread a ring if it has none of this process's, as rtrace's own code
    /// (`busy` set meanwhile); false if it could not.
    #[inline(always)]
    pub fn ensure_ring(&self) -> bool {
        self.has_ring() || self.register_ring()
    }

    #[cold]
    fn register_ring(&self) -> bool {
        let was = self.busy.replace(true);
        let ok = with_errno_saved(|| register(self)).unwrap_or(false);
        self.busy.set(was);
        ok
    }
}

/// Slow path: gives the calling thread a ring registered with the process.
fn register(t: &ThreadState) -> bool {
    let process = process::get_or_create();
    let Some(ring) = process.new_ring(
        sys::gettid(),
        sys::thread_name(),
        state::config().buffer_records,
    ) else {
        return false;
    };
    t.ring.hold(ring.clone());
    t.generation.set(process.generation);
    // Not fatal if the guard is already gone (thread teardown): the final flush drains it.
    let _ = EXIT_GUARD.try_with(|g| g.ring.hold(ring));
    true
}

/// Links the recorded call in progress on this thread to `source` (CUPTI's correlation id
/// for it): called by CUPTI's API callback, inside the real call. No allocation, no lock. A
/// driver call made inside a recorded runtime call links its GPU work to the runtime call,
/// whichever of the two ids CUPTI gives that work (docs/runtime-api.md).
pub fn link_current(source: u32, symbol: u64) {
    let _ = TLS.try_with(|t| {
        let current = t.current.get();
        if current == 0 {
            return;
        }
        let call = t.runtime.work_correlation(current);
        t.ring.push(Entry::Link {
            call,
            source,
            symbol,
        });
    });
}

/// Pushes `event` (an NVTX event), and its `attributes` after it if any, into the calling
/// thread's ring, giving the thread one first if it has none; the event is stamped with the
/// tick counter now. Nothing when tracing is off or this is one of rtrace's threads. No
/// allocation or lock after the thread's first record. Inlined into its one caller, where the
/// entries' variants are known, so that neither their time stamp nor their encoding in the
/// ring branches on the variant.
#[inline(always)]
pub fn push_event(event: Entry, attributes: Option<Entry>) {
    if !state::records() {
        return;
    }
    let _ = TLS.try_with(|t| {
        if t.excluded.get() || !t.ensure_ring() {
            return;
        }
        if t.ring.push_waiting(event.stamped(clock::ticks())) {
            if let Some(a) = attributes {
                t.ring.push_waiting(a);
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

/// Marks the calling thread as never traced (rtrace's own threads).
pub fn exclude_this_thread() {
    let _ = TLS.try_with(|t| t.excluded.set(true));
}

/// Forgets the calling thread's ring without touching it (after fork, in the child).
pub fn forget_this_thread() {
    let _ = TLS.try_with(|t| t.ring.forget());
    let _ = EXIT_GUARD.try_with(|g| g.ring.forget());
}

/// Starts a thread of rtrace's own: every signal blocked (it never takes the program's), never
/// traced.
pub fn spawn_quiet(
    name: &str,
    stack: usize,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<std::thread::Thread> {
    let mask = sys::block_all_signals();
    let r = std::thread::Builder::new()
        .name(name.into())
        .stack_size(stack)
        .spawn(move || {
            exclude_this_thread();
            f();
        });
    sys::restore_signals(mask);
    r.map(|h| h.thread().clone())
}

/// Runs `f` with errno preserved, catching any panic (which disables tracing).
pub fn with_errno_saved<R>(f: impl FnOnce() -> R) -> Option<R> {
    let errno = sys::errno();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    sys::set_errno(errno);
    match r {
        Ok(v) => Some(v),
        Err(_) => {
            state::disable("internal error (panic) in rtrace");
            None
        }
    }
}
