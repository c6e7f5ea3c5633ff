//! The tracing session: start-up, the worker's loop, the one drain-and-finish sequence every
//! ending goes through (exit, `_exit`, fatal signals, CUPTI going away), and the fork path.
//!
//! Start-up reads the configuration, picks the clock, registers what the layers below call
//! back (the process opener, the hot path's per-function actions, CUPTI's exit sequence),
//! moves the state to `Running`, and then sets up capture control, NVTX and the notices.
//! The trace file and the worker are created when the first record is made (the opener), so
//! a process that never calls the driver is left alone.

use crate::actions::{self, EndActions};
use crate::drain::{drain_rings, Drain, Drained};
use crate::output::Sink;
use crate::process::{self, Process};
use crate::state::{self, State};
use crate::worker_cpu::Phase;
use crate::{capture, clock, cupti, diag, nvtx, runtime_api, sys, thread};
use rtrace_format::ChunkKind;
use std::sync::atomic::Ordering;
use std::sync::Once;
use std::time::Duration;

static START: Once = Once::new();

/// How long the final flush waits for the worker to let go of the buffers.
const FINAL_FLUSH_WAIT: Duration = Duration::from_secs(2);

/// Reads the configuration and moves to `Running` (or `Disabled` with `RTRACE_DISABLE=1`).
/// Idempotent. The process hooks (signals, fork) are armed by `interpose`'s constructor once
/// tracing runs.
pub fn start() {
    START.call_once(|| {
        let cfg = state::config();
        diag::set_enabled(cfg.debug);
        if cfg.disabled {
            state::advance(State::Uninit, State::Disabled);
            diag::log(&["disabled by RTRACE_DISABLE"]);
            return;
        }
        clock::choose_source(cfg.clock_monotonic);
        process::set_opener(open);
        actions::install(end_actions());
        cupti::set_exit_sequence(|| drain_and_finish(Ending::CuptiExit));
        cupti::set_region_source(gpu_region);
        state::advance(State::Uninit, State::Running);
        diag::log(&["tracing armed"]);
        for msg in capture::configure() {
            cupti::notice(msg);
        }
        nvtx::announce();
        if let Some(e) = &cfg.pc_sampling.error {
            cupti::notice(e.clone());
        }
        if let Some(e) = &cfg.gpu_activity_error {
            cupti::notice(e.clone());
        }
        for e in &cfg.settings_errors {
            cupti::notice(e.clone());
        }
        if let Some(e) = &cfg.runtime_api_error {
            cupti::notice(e.clone());
        }
        if cfg.runtime_api == runtime_api::Route::Interpose {
            runtime_api::set_interposing(true);
        }
        for msg in cupti::configure_profiling() {
            cupti::notice(msg);
        }
    });
}

/// A CUPTI buffer of `len` bytes in the trace file (made by the worker's writer, waited for
/// as a thread's ring is).
fn gpu_region(
    len: u64,
    layout: &rtrace_format::gpu_region::GpuBufferLayout,
) -> Option<&'static crate::region::GpuRegion> {
    process::current()?
        .with_consumer(process::REGION_WAIT, |sink| {
            sink.reserve_gpu_region(len, layout)
        })?
        .ok()
}

/// What the hot path runs after particular calls: GPU activity starts after the program's
/// first successful `cuInit`; `cuProfilerStop` ends a profiler-API capture range.
fn end_actions() -> EndActions {
    use crate::generated::id;
    let mut actions = EndActions::new();
    actions.on_success(id::cuInit, || {
        let _ = thread::with_errno_saved(cupti::after_cuinit);
    });
    actions.always(id::cuProfilerStart, profiler_start);
    actions.always(id::cuProfilerStop, profiler_stop);
    actions.always(id::cuGraphLaunch, cupti::graph_launched);
    actions.always(id::cuGraphLaunch_ptsz, cupti::graph_launched);
    actions
}

/// After `cuProfilerStart`: a profiler-API capture range begins (kernel profiling's
/// application replay profiles it).
fn profiler_start() {
    if state::config().capture.profiler_api {
        cupti::capture_range_begin(None);
    }
}

/// After `cuProfilerStop`: the profiler-API capture range ends.
fn profiler_stop() {
    if state::config().capture.profiler_api {
        cupti::capture_range_end();
    }
    capture::after_stop();
}

/// The first ring of `process`: creates its trace file and starts its worker.
fn open(process: &'static Process) -> bool {
    match Sink::create(process.pid, process.forked_from) {
        Ok(sink) => {
            process.note_clock_pair(sink.calibration.latest());
            process.set_sink(sink);
            match spawn_worker(process) {
                Ok(t) => {
                    process.set_worker(t);
                    true
                }
                Err(e) => {
                    state::disable(&format!("cannot start the worker thread: {e}"));
                    false
                }
            }
        }
        Err(e) => {
            state::disable(&e);
            false
        }
    }
}

/// Starts the worker for `process`, with all signals blocked.
fn spawn_worker(process: &'static Process) -> std::io::Result<std::thread::Thread> {
    thread::spawn_quiet("rtrace-worker", 256 << 10, move || {
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_worker(process))).is_err() {
            state::disable("internal error (panic) in the worker");
        }
    })
}

/// The worker's loop: drains busy rings soon, every ring and CUPTI's buffers every flush
/// period; stops when the trace ends or tracing is turned off.
fn run_worker(process: &'static Process) {
    let cfg = state::config();
    let poll = Duration::from_millis(cfg.poll_ms);
    let period_ns = cfg.flush_ms * 1_000_000;
    let mut last_periodic = clock::now_ns();
    let mut busy = false;
    let mut watch = process.worker_cpu.stopwatch(cfg.debug);
    loop {
        // A thread filling its buffer fast: look again at once (giving the core up to any
        // thread waiting for it), for as long as some ring is a quarter full.
        if busy {
            std::thread::yield_now();
        } else {
            std::thread::park_timeout(poll);
        }
        watch.lap(Phase::Wait);
        if process.stop.load(Ordering::Acquire) || state::state() != State::Running {
            return;
        }
        let now = clock::now_ns();
        let mode = if now - last_periodic >= period_ns {
            last_periodic = now;
            Drain::Periodic
        } else {
            Drain::Busy
        };
        if mode == Drain::Periodic {
            cupti::flush_if_idle();
            watch.lap(Phase::CuptiFlush);
        }
        let ok = process.with_consumer(Duration::from_millis(50), |sink| {
            let drained = drain(process, sink, mode);
            watch.lap(Phase::Rings);
            // Only after every ring was drained: links precede the GPU records they name.
            if mode == Drain::Periodic {
                cupti::drain_into(sink);
                watch.lap(Phase::CuptiConvert);
            }
            let written = sink.flush().map(|()| drained);
            watch.lap(Phase::Write);
            if mode == Drain::Periodic && written.is_ok() {
                process.keep_spare_region(sink, cfg.buffer_records);
                watch.lap(Phase::Spare);
            }
            written
        });
        match ok {
            Some(Err(e)) => {
                // What the rings hold stays in them, where a reader finds it with the cause;
                // calls go on being recorded until a ring is full, then counted as lost.
                let errno = e.raw_os_error().unwrap_or(libc::EIO) as u64;
                process.note_write_error(errno);
                diag::log(&["writing the trace failed: ", &e.to_string()]);
                return;
            }
            Some(Ok(drained)) => busy = drained.busy_rings > 0,
            None => {}
        }
        process.forget_finished_rings();
        watch.lap(Phase::Forget);
        watch.pass();
    }
}

/// One drain pass: the new NVTX texts (before the events that name them), then the rings.
/// Consumer only.
fn drain(process: &Process, sink: &mut Sink, mode: Drain) -> Drained {
    let strings = nvtx::take_new_strings();
    if !strings.is_empty() {
        let payload =
            rtrace_format::encode_function_names(strings.iter().map(|(id, s)| (*id, &**s)));
        sink.chunk(ChunkKind::NvtxStrings, 0, 0, 0, &payload);
    }
    drain_rings(process, sink, mode)
}

/// How the trace ends, or what ends part of it.
#[derive(Clone, Copy)]
pub enum Ending<'a> {
    /// CUPTI is going away (its `atexit` handler, which runs before its destructor): flush it
    /// and convert all it holds while it is alive, with capture control's final notices.
    /// Tracing goes on: the program's later calls are recorded, and the trace ends later.
    CuptiExit,
    /// The process exits (`"exit"`, `"_exit"`): everything buffered, then the end record.
    Exit(&'a str),
    /// A fatal signal (`"signal N"`): as [`Ending::Exit`], but CUPTI, which takes locks of
    /// its own, is left alone.
    Signal(&'a str),
}

/// The one drain-and-finish sequence: with CUPTI still alive, reads PC sampling one last time
/// and flushes CUPTI; then, as the consumer (waiting at most [`FINAL_FLUSH_WAIT`] for the
/// worker to let go), drains the rings, converts CUPTI's buffers, and writes the end record
/// (or, when CUPTI goes away, its final notices); then stops the worker. An ending of the
/// process happens once (`Running → Finished`); repeated calls do nothing.
pub fn drain_and_finish(how: Ending) {
    let process = process::current();
    let reason = match how {
        Ending::CuptiExit => None,
        Ending::Exit(r) | Ending::Signal(r) => Some(r),
    };
    if reason.is_some() {
        let Some(process) = process else {
            return;
        };
        // A vfork child shares our memory: it must neither write nor change our state.
        if process.pid != sys::getpid() || !process.is_started() {
            return;
        }
        if !state::advance(State::Running, State::Finished) {
            return;
        }
    }
    if !matches!(how, Ending::Signal(_)) {
        cupti::finish_pc_sampling();
        cupti::finish_profiling();
        cupti::flush(true);
    }
    // CUPTI going away before any record was made: there is no trace to write into.
    let Some(process) = process else {
        return;
    };
    let mode = if reason.is_some() {
        Drain::Final
    } else {
        Drain::Periodic
    };
    thread::internal(|| {
        let done = process.with_consumer(FINAL_FLUSH_WAIT, |sink| {
            // The rings first: their links name the GPU records.
            let _ = drain(process, sink, mode);
            if runtime_api::first_interposed() {
                sink.notice(runtime_api::INTERPOSED_NOTICE);
            }
            cupti::drain_into(sink);
            match reason {
                Some(reason) => sink.write_end(reason),
                None => {
                    for msg in capture::final_notices() {
                        sink.notice(&msg);
                    }
                    Ok(())
                }
            }
        });
        if let Some(reason) = reason {
            match done {
                Some(Ok(())) => {
                    process.worker_cpu.log();
                    diag::log(&["trace written (", reason, ")"]);
                }
                Some(Err(e)) => diag::log(&["final write failed: ", &e.to_string()]),
                None => diag::log(&["final flush timed out: the worker held the buffers"]),
            }
        }
    });
    if reason.is_some() {
        process.stop_worker();
    }
}

/// In a forked child: forget the parent's buffers, file and worker. The child
/// gets its own trace when it makes its first driver call. No allocation.
pub fn after_fork_in_child() {
    if let Some(parent) = process::current() {
        state::set_forked_from(parent.pid);
    }
    process::forget();
    state::next_generation();
    thread::forget_this_thread();
    runtime_api::after_fork_in_child();
}
