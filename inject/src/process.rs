//! The tracing state of one process: its threads' rings, the trace file's writer (held by
//! one consumer at a time) and its worker. Created on the first record; replaced (not freed)
//! in a forked child. What happens when the first ring arrives (opening the trace, starting
//! the worker) is the session's, handed in to [`Process::register`].

use crate::output::Sink;
use crate::ring::Ring;
use crate::state::{self, State};
use crate::{clock, sys};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock, TryLockError};
use std::time::Duration;

/// The current process's tracing state.
static PROCESS: sys::Leaked<Process> = sys::Leaked::new();

/// The tracing state of one process.
pub struct Process {
    pub pid: u32,
    pub forked_from: Option<u32>,
    pub generation: u64,
    rings: Mutex<Vec<Arc<Ring>>>,
    start: Once,
    started: AtomicBool,
    /// The trace file's writer, held by whoever drains the rings (the worker, or the final
    /// flush).
    sink: Mutex<Option<Sink>>,
    /// The worker, to wake it.
    worker: OnceLock<std::thread::Thread>,
    pub stop: AtomicBool,
}

/// What the first ring of a process runs (set by the session before tracing starts).
static OPENER: OnceLock<fn(&'static Process) -> bool> = OnceLock::new();

/// Sets what the first ring of a process runs: gives it its writer and worker, and says
/// whether it did. Set once, before tracing runs.
pub fn set_opener(open: fn(&'static Process) -> bool) {
    let _ = OPENER.set(open);
}

/// The current process's state, if it has been created.
pub fn current() -> Option<&'static Process> {
    PROCESS.get()
}

/// The current process's state, created on first use.
pub fn get_or_create() -> &'static Process {
    PROCESS
        .get_or_publish(|| Process::new(sys::getpid(), state::forked_from(), state::generation()))
}

/// In a forked child: forgets the parent's state (its buffers, file and worker) without
/// touching it. No allocation.
pub fn forget() {
    PROCESS.forget();
}

impl Process {
    /// A process with no rings, writer or worker yet.
    fn new(pid: u32, forked_from: Option<u32>, generation: u64) -> Process {
        Process {
            pid,
            forked_from,
            generation,
            rings: Mutex::new(Vec::new()),
            start: Once::new(),
            started: AtomicBool::new(false),
            sink: Mutex::new(None),
            worker: OnceLock::new(),
            stop: AtomicBool::new(false),
        }
    }

    /// Adds a thread's ring; the first one runs the opener the session set with [`set_opener`]
    /// (which gives the process its writer and worker, and says whether it did). False when
    /// the ring is not taken: the trace could not be opened, or tracing is no longer running.
    pub fn register(&'static self, ring: Arc<Ring>) -> bool {
        self.start.call_once(|| {
            if OPENER.get().is_some_and(|open| open(self)) {
                self.started.store(true, Ordering::Release);
            }
        });
        if !self.is_started() || state::state() != State::Running {
            return false;
        }
        match self.rings.lock() {
            Ok(mut rings) => {
                rings.push(ring);
                true
            }
            Err(_) => false,
        }
    }

    /// Whether the trace file was opened and the worker started.
    pub fn is_started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    /// Gives the process its writer (before the worker starts).
    pub fn set_sink(&self, sink: Sink) {
        if let Ok(mut s) = self.sink.lock() {
            *s = Some(sink);
        }
    }

    /// Records the worker thread, to wake it.
    pub fn set_worker(&self, worker: std::thread::Thread) {
        let _ = self.worker.set(worker);
    }

    /// Runs `f` as the consumer, waiting at most `wait` for the current one;
    /// `None` if it could not get the buffers in time.
    pub fn with_consumer<R>(&self, wait: Duration, f: impl FnOnce(&mut Sink) -> R) -> Option<R> {
        let deadline = clock::now_ns() + wait.as_nanos() as u64;
        let mut sink = loop {
            match self.sink.try_lock() {
                Ok(g) => break g,
                // A consumer that panicked holds the buffers for good.
                Err(TryLockError::WouldBlock) | Err(TryLockError::Poisoned(_)) => {
                    if clock::now_ns() >= deadline {
                        return None;
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        };
        sink.as_mut().map(f)
    }

    /// Copies the ring list into `out` (reusing its capacity); with `blocking`
    /// false, gives up if the list is locked for more than ~100 ms.
    pub fn snapshot_rings(&self, out: &mut Vec<Arc<Ring>>, blocking: bool) -> bool {
        out.clear();
        let guard = if blocking {
            self.rings.lock().ok()
        } else {
            let mut tries = 0;
            loop {
                match self.rings.try_lock() {
                    Ok(g) => break Some(g),
                    Err(_) if tries < 1000 => {
                        tries += 1;
                        std::thread::sleep(Duration::from_micros(100));
                    }
                    Err(_) => break None,
                }
            }
        };
        match guard {
            Some(g) => {
                out.extend(g.iter().cloned());
                true
            }
            None => false,
        }
    }

    /// Drops rings that are closed and fully drained.
    pub fn forget_finished_rings(&self) {
        if let Ok(mut rings) = self.rings.try_lock() {
            rings.retain(|r| !(r.is_closed() && r.is_empty()));
        }
    }

    /// Asks the worker to stop, and wakes it.
    pub fn stop_worker(&self) {
        self.stop.store(true, Ordering::Release);
        self.wake_worker();
    }

    pub fn wake_worker(&self) {
        if let Some(t) = self.worker.get() {
            t.unpark();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process() -> Process {
        Process::new(1, None, 1)
    }

    #[test]
    fn the_consumer_waits_a_bounded_time_for_the_buffers() {
        let p = process();
        // No writer yet: nothing to run `f` on.
        assert_eq!(p.with_consumer(Duration::from_millis(1), |_| 1), None);
        let held = p.sink.lock().unwrap();
        let t0 = std::time::Instant::now();
        assert_eq!(p.with_consumer(Duration::from_millis(20), |_| 1), None);
        assert!(t0.elapsed() >= Duration::from_millis(20));
        drop(held);
    }
}
