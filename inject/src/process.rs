//! The tracing state of one process: its threads' rings, the trace file's writer (held by
//! one consumer at a time) and its worker. Created on the first record; replaced (not freed)
//! in a forked child. What happens when the first ring arrives (opening the trace, starting
//! the worker) is the session's, handed in to [`Process::register`].

use crate::output::Sink;
use crate::ring::{ClockPair, Region, Ring, Waker, WhenFull};
use crate::state::{self, State};
use crate::worker_cpu::WorkerCpu;
use crate::{clock, sys};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock, TryLockError};
use std::time::Duration;

/// The current process's tracing state.
static PROCESS: sys::Leaked<Process> = sys::Leaked::new();

/// The tracing state of one process.
pub struct Process {
    pub pid: u32,
    pub forked_from: Option<u32>,
    pub generation: u64,
    rings: Mutex<Rings>,
    /// The next ring's positions begin at this << `POSITION_BITS`.
    next_base: AtomicU64,
    /// A clock pair read when the trace began, and the latest the consumer read: the pairs a
    /// reader converts a ring's timestamps with.
    clock_pairs: Mutex<(ClockPair, ClockPair)>,
    /// Why a ring could not be put in the trace file (said once, by the consumer).
    anonymous: Mutex<Option<String>>,
    anonymous_said: AtomicBool,
    start: Once,
    started: AtomicBool,
    /// The trace file's writer, held by whoever drains the rings (the worker, or the final
    /// flush).
    sink: Mutex<Option<Sink>>,
    /// The worker, to wake it.
    worker: OnceLock<std::thread::Thread>,
    pub stop: AtomicBool,
    /// Where the worker's CPU went (measured under `RTRACE_DEBUG=1`).
    pub worker_cpu: WorkerCpu,
}

/// The rings of a process's threads, and the regions no ring uses now.
#[derive(Default)]
struct Rings {
    live: Vec<Arc<Ring>>,
    free: Vec<&'static Region>,
}

/// How long a thread's first record waits for the consumer to put a new region in the file
/// (a consumer descheduled while it holds the writer, on a loaded machine, can take a second).
pub const REGION_WAIT: Duration = Duration::from_secs(5);
/// Regions the consumer keeps ready for new threads, so that threads starting together seldom
/// wait for it.
const SPARE_REGIONS: usize = 4;

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
            rings: Mutex::new(Rings::default()),
            next_base: AtomicU64::new(1),
            clock_pairs: Mutex::new(((0, 0), (0, 0))),
            anonymous: Mutex::new(None),
            anonymous_said: AtomicBool::new(false),
            start: Once::new(),
            started: AtomicBool::new(false),
            sink: Mutex::new(None),
            worker: OnceLock::new(),
            stop: AtomicBool::new(false),
            worker_cpu: WorkerCpu::default(),
        }
    }

    /// A ring for thread `tid`, registered with the process; the first one runs the opener
    /// the session set with [`set_opener`] (which gives the process its writer and worker, and
    /// says whether it did). Its region is a free one, else a new one in the file (waiting at
    /// most [`REGION_WAIT`] for the consumer), else anonymous memory. `None` when the trace
    /// could not be opened, or tracing is off.
    pub fn new_ring(&'static self, tid: u64, name: String, capacity: usize) -> Option<Arc<Ring>> {
        self.start.call_once(|| {
            if OPENER.get().is_some_and(|open| open(self)) {
                self.started.store(true, Ordering::Release);
            }
        });
        if !self.is_started() || !matches!(state::state(), State::Running | State::Finished) {
            return None;
        }
        let capacity = capacity.max(2).next_power_of_two() as u64;
        let free = self.rings.lock().ok()?.free.pop();
        let region = match free {
            Some(r) => r,
            None => match self.with_consumer(REGION_WAIT, |sink| sink.reserve_region(capacity)) {
                Some(Ok(r)) => r,
                why => {
                    let why = match why {
                        Some(Err(e)) => crate::files::plain(&e).to_lowercase(),
                        _ => "the writer was busy".to_string(),
                    };
                    if !self.anonymous_said.swap(true, Ordering::Relaxed) {
                        if let Ok(mut a) = self.anonymous.lock() {
                            *a = Some(format!(
                                "a thread's buffer could not be put in the trace file ({why}): \
                                 what it holds when the process ends abruptly is lost"
                            ));
                        }
                    }
                    Region::anonymous(capacity).ok()?
                }
            },
        };
        let base =
            self.next_base.fetch_add(1, Ordering::Relaxed) << rtrace_format::ring::POSITION_BITS;
        let (start, latest) = self.clock_pairs.lock().map(|p| *p).unwrap_or_default();
        let full = WhenFull {
            waker: Some(self),
            wait: Duration::from_millis(state::config().full_wait_ms),
        };
        let ring = Arc::new(Ring::on(region, base, (tid, name), (start, latest), full));
        self.rings.lock().ok()?.live.push(ring.clone());
        Some(ring)
    }

    /// Why a ring could not be put in the trace file, once (for the consumer's notice).
    pub fn take_region_notice(&self) -> Option<String> {
        self.anonymous.try_lock().ok()?.take()
    }

    /// Notes the clock pair read when the trace began (the first) or the latest one.
    pub fn note_clock_pair(&self, pair: ClockPair) {
        if let Ok(mut p) = self.clock_pairs.lock() {
            if p.0 == (0, 0) {
                p.0 = pair;
            }
            p.1 = pair;
        }
    }

    /// Keeps [`SPARE_REGIONS`] free regions ready in the file, so that new threads seldom wait
    /// for the consumer. Consumer only.
    pub fn keep_spare_region(&self, sink: &mut Sink, capacity: usize) {
        let capacity = capacity.max(2).next_power_of_two() as u64;
        let needed = self
            .rings
            .try_lock()
            .map_or(0, |r| SPARE_REGIONS.saturating_sub(r.free.len()));
        for _ in 0..needed {
            if sink.is_broken() {
                return;
            }
            match sink.reserve_region(capacity) {
                Ok(region) => {
                    if let Ok(mut r) = self.rings.lock() {
                        r.free.push(region);
                    }
                }
                Err(_) => return,
            }
        }
    }

    /// Writes the `errno` of a failed write of the trace into every ring's region.
    pub fn note_write_error(&self, errno: u64) {
        if let Ok(r) = self.rings.lock() {
            for ring in &r.live {
                ring.region().set_write_error(errno);
            }
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
                out.extend(g.live.iter().cloned());
                true
            }
            None => false,
        }
    }

    /// Drops rings that are closed and whose entries and losses are all in the file (a thread's
    /// last call may count a loss after the consumer's last look: the next pass writes it);
    /// their regions serve later threads.
    pub fn forget_finished_rings(&self) {
        if let Ok(mut rings) = self.rings.try_lock() {
            let Rings { live, free } = &mut *rings;
            live.retain(|r| {
                let done = r.is_closed() && r.is_empty() && r.is_written() && r.drops_taken();
                // Only once nothing else holds the ring can its region serve another thread.
                if done && Arc::strong_count(r) == 1 {
                    free.push(r.region());
                    return false;
                }
                true
            });
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

impl Waker for Process {
    fn wake(&self) -> bool {
        if self.stop.load(Ordering::Acquire) || state::state() != State::Running {
            return false;
        }
        self.wake_worker();
        true
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
