//! One atomic lifecycle state, the per-process tracing state, start-up and the
//! bounded final flush.
//!
//! States advance by compare-and-swap: `Uninit → Running → Finished`, and any
//! internal failure moves to `Disabled`, after which every wrapper passes calls
//! straight through. The trace file and the worker are created when the first
//! record is made, so a process that never calls the driver is left alone.

use crate::config::Config;
use crate::output::Sink;
use crate::ring::Ring;
use crate::{clock, diag, interpose, worker};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock};
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum State {
    Uninit = 0,
    Running = 1,
    Disabled = 2,
    Finished = 3,
}

static STATE: AtomicU8 = AtomicU8::new(State::Uninit as u8);
static INIT: Once = Once::new();
static CONFIG: OnceLock<Config> = OnceLock::new();
/// The current process's tracing state; replaced (not freed) in a forked child.
static PROCESS: AtomicPtr<Process> = AtomicPtr::new(std::ptr::null_mut());
static GENERATION: AtomicU64 = AtomicU64::new(1);
/// Set in a forked child: the pid of the traced parent.
static FORKED_FROM: AtomicU32 = AtomicU32::new(0);
/// Entry points handed out unwrapped (see `ProcessEnd::unwrapped_lookups`).
pub static UNWRAPPED_LOOKUPS: AtomicU64 = AtomicU64::new(0);

/// How long the final flush waits for the worker to let go of the buffers.
const FINAL_FLUSH_WAIT: Duration = Duration::from_secs(2);

#[inline(always)]
pub fn state() -> State {
    match STATE.load(Ordering::Acquire) {
        1 => State::Running,
        0 => State::Uninit,
        2 => State::Disabled,
        _ => State::Finished,
    }
}

#[inline(always)]
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// Reads the configuration, arms the process hooks and moves to `Running`
/// (or `Disabled` with `RTRACE_DISABLE=1`). Idempotent.
pub fn init() {
    INIT.call_once(|| {
        let cfg = CONFIG.get_or_init(Config::from_env);
        diag::set_enabled(cfg.debug);
        if cfg.disabled {
            let _ = STATE.compare_exchange(
                State::Uninit as u8,
                State::Disabled as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
            diag::log(&["disabled by RTRACE_DISABLE"]);
            return;
        }
        clock::choose_source(cfg.clock_monotonic);
        interpose::arm_process_hooks();
        let _ = STATE.compare_exchange(
            State::Uninit as u8,
            State::Running as u8,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        diag::log(&["tracing armed"]);
        crate::capture::configure();
        crate::nvtx::announce();
        if let Some(e) = &config().pc_sampling.error {
            crate::cupti::notice(e.clone());
        }
    });
}

pub fn config() -> &'static Config {
    CONFIG.get_or_init(Config::from_env)
}

/// Turns tracing off for good; the program runs on unchanged.
pub fn disable(why: &str) {
    let prev = STATE.swap(State::Disabled as u8, Ordering::AcqRel);
    if prev != State::Disabled as u8 {
        diag::log(&["tracing disabled: ", why]);
    }
}

pub fn gettid() -> u64 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u64 }
}

fn getpid() -> u32 {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() as u32 }
}

/// The calling thread's name (its `comm`).
pub fn thread_name() -> String {
    let mut buf = [0u8; 32];
    // SAFETY: PR_GET_NAME writes at most 16 bytes into `buf`.
    let rc = unsafe { libc::prctl(libc::PR_GET_NAME, buf.as_mut_ptr()) };
    if rc != 0 {
        return String::new();
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// The tracing state of one process.
pub struct Process {
    pub pid: u32,
    pub forked_from: Option<u32>,
    pub generation: u64,
    rings: Mutex<Vec<Arc<Ring>>>,
    start: Once,
    started: AtomicBool,
    /// Held by whoever drains the rings (the worker, or the final flush).
    consumer: AtomicBool,
    /// Only touched with `consumer` held.
    sink: UnsafeCell<Option<Sink>>,
    /// The worker, to wake it.
    worker: OnceLock<std::thread::Thread>,
    pub stop: AtomicBool,
}

// SAFETY: `sink` is only accessed while holding the `consumer` flag (see `with_consumer`).
unsafe impl Sync for Process {}

/// The current process's state, if it has been created.
pub fn current_process() -> Option<&'static Process> {
    let p = PROCESS.load(Ordering::Acquire);
    // SAFETY: processes are leaked, never freed.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// The current process's state, created on first use.
pub fn process() -> Option<&'static Process> {
    let p = PROCESS.load(Ordering::Acquire);
    if !p.is_null() {
        // SAFETY: processes are leaked, never freed.
        return Some(unsafe { &*p });
    }
    let forked = FORKED_FROM.load(Ordering::Relaxed);
    let fresh = Box::into_raw(Box::new(Process {
        pid: getpid(),
        forked_from: (forked != 0).then_some(forked),
        generation: generation(),
        rings: Mutex::new(Vec::new()),
        start: Once::new(),
        started: AtomicBool::new(false),
        consumer: AtomicBool::new(false),
        sink: UnsafeCell::new(None),
        worker: OnceLock::new(),
        stop: AtomicBool::new(false),
    }));
    match PROCESS.compare_exchange(
        std::ptr::null_mut(),
        fresh,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        // SAFETY: just leaked.
        Ok(_) => Some(unsafe { &*fresh }),
        Err(existing) => {
            // SAFETY: `fresh` was never shared.
            drop(unsafe { Box::from_raw(fresh) });
            // SAFETY: processes are leaked, never freed.
            Some(unsafe { &*existing })
        }
    }
}

impl Process {
    /// Adds a thread's ring; the first one opens the trace and starts the worker.
    pub fn register(&'static self, ring: Arc<Ring>) -> bool {
        self.start.call_once(|| match Sink::create(self) {
            Ok(sink) => {
                // SAFETY: no consumer exists before the worker is started below.
                unsafe { *self.sink.get() = Some(sink) };
                match worker::spawn(self) {
                    Ok(t) => {
                        let _ = self.worker.set(t);
                        self.started.store(true, Ordering::Release);
                    }
                    Err(e) => disable(&format!("cannot start the worker thread: {e}")),
                }
            }
            Err(e) => disable(&e),
        });
        if !self.started.load(Ordering::Acquire) || state() != State::Running {
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

    /// Runs `f` as the consumer, waiting at most `wait` for the current one;
    /// `None` if it could not get the buffers in time.
    pub fn with_consumer<R>(&self, wait: Duration, f: impl FnOnce(&mut Sink) -> R) -> Option<R> {
        let deadline = clock::now_ns() + wait.as_nanos() as u64;
        while self
            .consumer
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            if clock::now_ns() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        // SAFETY: we hold the consumer flag, so nobody else touches the sink.
        let r = unsafe { (*self.sink.get()).as_mut() }.map(f);
        self.consumer.store(false, Ordering::Release);
        r
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

    pub fn wake_worker(&self) {
        if let Some(t) = self.worker.get() {
            t.unpark();
        }
    }
}

/// Writes everything still buffered and the end record, once, with a bounded
/// wait. Called at exit, `_exit` and fatal signals; safe to call repeatedly.
pub fn finish(reason: &str) {
    let p = PROCESS.load(Ordering::Acquire);
    if p.is_null() {
        return;
    }
    // SAFETY: processes are leaked, never freed.
    let process = unsafe { &*p };
    // A vfork child shares our memory: it must neither write nor change our state.
    if process.pid != getpid() || !process.started.load(Ordering::Acquire) {
        return;
    }
    if STATE
        .compare_exchange(
            State::Running as u8,
            State::Finished as u8,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_err()
    {
        return;
    }
    // CUPTI takes locks of its own: never from a signal handler.
    if !reason.starts_with("signal") {
        crate::cupti::finish_pc_sampling();
        crate::cupti::flush(true);
    }
    crate::hook::internal(|| {
        let done = process.with_consumer(FINAL_FLUSH_WAIT, |sink| {
            let _ = worker::drain(process, sink, worker::Drain::Final);
            crate::cupti::drain_into(sink);
            sink.write_end(reason)
        });
        match done {
            Some(Ok(())) => diag::log(&["trace written (", reason, ")"]),
            Some(Err(e)) => diag::log(&["final write failed: ", &e.to_string()]),
            None => diag::log(&["final flush timed out: the worker held the buffers"]),
        }
    });
    process.stop.store(true, Ordering::Release);
    process.wake_worker();
}

/// In a forked child: forget the parent's buffers, file and worker. The child
/// gets its own trace when it makes its first driver call. No allocation.
pub fn after_fork_in_child() {
    let p = PROCESS.load(Ordering::Acquire);
    if !p.is_null() {
        // SAFETY: processes are leaked, never freed.
        FORKED_FROM.store(unsafe { (*p).pid }, Ordering::Relaxed);
    }
    PROCESS.store(std::ptr::null_mut(), Ordering::Release);
    GENERATION.fetch_add(1, Ordering::AcqRel);
    crate::hook::forget_this_thread();
}
