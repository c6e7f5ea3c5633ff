//! The worker: a named thread, started with every signal blocked and never
//! traced, that drains the per-thread rings into the trace file in batches.

use crate::lifecycle::{self, Process, State};
use crate::output::Sink;
use crate::{clock, diag, hook};
use rtrace_format::ChunkKind;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How much of a ring is drained on a pass.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Drain {
    /// Rings at least a quarter full, and closed ones.
    Busy,
    /// Every ring with anything in it (the flush period elapsed).
    Periodic,
    /// Everything, for the end of the trace.
    Final,
}

/// Starts the worker for `process` with all signals blocked.
pub fn spawn(process: &'static Process) -> std::io::Result<std::thread::Thread> {
    spawn_quiet("rtrace-worker", 256 << 10, move || {
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(process))).is_err() {
            lifecycle::disable("internal error (panic) in the worker");
        }
    })
}

/// Starts a thread of rtrace's own: every signal blocked (it never takes the program's), never
/// traced.
pub fn spawn_quiet(
    name: &str,
    stack: usize,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<std::thread::Thread> {
    // SAFETY: plain signal-mask manipulation on the calling thread, restored below.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    let r = std::thread::Builder::new()
        .name(name.into())
        .stack_size(stack)
        .spawn(move || {
            hook::exclude_this_thread();
            f();
        });
    // SAFETY: restores the mask saved above.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
    r.map(|h| h.thread().clone())
}

fn run(process: &'static Process) {
    let cfg = lifecycle::config();
    let poll = Duration::from_millis(cfg.poll_ms);
    let period_ns = cfg.flush_ms * 1_000_000;
    let mut last_periodic = clock::now_ns();
    let mut busy = false;
    loop {
        // A thread filling its buffer fast: look again soon.
        std::thread::park_timeout(if busy { BUSY_POLL } else { poll });
        if process.stop.load(Ordering::Acquire) || lifecycle::state() != State::Running {
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
            crate::cupti::flush_if_idle();
        }
        let ok = process.with_consumer(Duration::from_millis(50), |sink| {
            let drained = drain(process, sink, mode);
            // Only after every ring was drained: links precede the GPU records they name.
            if mode == Drain::Periodic {
                crate::cupti::drain_into(sink);
            }
            sink.flush().map(|()| drained)
        });
        match ok {
            Some(Err(e)) => {
                lifecycle::disable(&format!("writing the trace failed: {e}"));
                return;
            }
            Some(Ok(drained)) => busy = drained.busy_rings > 0,
            None => {}
        }
        process.forget_finished_rings();
    }
}

/// Appends ring record `e` (an NVTX event, or the attributes of the one before it) to `out`
/// as [`rtrace_format::NvtxEvent`]s.
fn nvtx_event(out: &mut Vec<u8>, e: &rtrace_format::ApiRecord, to_ns: impl Fn(u64) -> u64) {
    use rtrace_format::{NvtxEvent, NvtxKind};
    const SIZE: usize = NvtxEvent::SIZE;
    if e.function == crate::ring::NVTX_ATTRIBUTES {
        let Some(at) = out.len().checked_sub(SIZE) else {
            return;
        };
        let Ok(bytes) = <&[u8; SIZE]>::try_from(&out[at..]) else {
            return;
        };
        let mut last = NvtxEvent::from_bytes(bytes);
        last.color = e.result;
        last.payload = e.start_ns;
        last.payload_type = (e.end_ns >> 8) as u8;
        last.color_type = e.end_ns as u8;
        out[at..].copy_from_slice(&last.to_bytes());
        return;
    }
    let ev = NvtxEvent {
        kind: NvtxKind::from_u16((e.function & 0xFF) as u16),
        message: e.result,
        time_ns: to_ns(e.start_ns),
        value: e.end_ns,
        domain: (e.correlation >> 32) as u32,
        category: e.correlation as u32,
        ..Default::default()
    };
    out.extend_from_slice(&ev.to_bytes());
}

/// How long the worker sleeps after a pass that found a ring a quarter full.
const BUSY_POLL: Duration = Duration::from_micros(500);

/// What a drain pass found.
pub struct Drained {
    /// Rings that were at least a quarter full.
    pub busy_rings: usize,
}

/// Moves records from the rings into `sink`'s pending output. Consumer only.
pub fn drain(process: &Process, sink: &mut Sink, mode: Drain) -> Drained {
    let mut busy_rings = 0;
    let mut rings = std::mem::take(&mut sink.scratch);
    sink.calibration.sample();
    // NVTX texts before the events that name them.
    let strings = crate::nvtx::take_new_strings();
    if !strings.is_empty() {
        let payload =
            rtrace_format::encode_function_names(strings.iter().map(|(id, s)| (*id, &**s)));
        sink.chunk(ChunkKind::NvtxStrings, 0, 0, 0, &payload);
    }
    if !process.snapshot_rings(&mut rings, mode != Drain::Final) {
        diag::log(&["could not list the buffers: another thread holds the list"]);
    }
    for ring in rings.iter() {
        if !ring.announced.swap(true, Ordering::Relaxed) {
            sink.thread_info(ring.tid, &ring.name);
        }
        let waiting = ring.len();
        let busy = waiting >= ring.capacity() / 4;
        busy_rings += usize::from(busy);
        let due = match mode {
            Drain::Busy => busy || ring.is_closed(),
            Drain::Periodic | Drain::Final => true,
        };
        if !due {
            continue;
        }
        sink.payload.clear();
        sink.nvtx.clear();
        let calibration = &sink.calibration;
        let links = &mut sink.links;
        let nvtx = &mut sink.nvtx;
        let n = ring.drain_all(
            &mut sink.payload,
            |t| calibration.to_ns(t),
            |l| links.insert(l.result, l.correlation),
            |e| nvtx_event(nvtx, e, |t| calibration.to_ns(t)),
        );
        let dropped = ring.take_dropped();
        if !sink.nvtx.is_empty() {
            let payload = std::mem::take(&mut sink.nvtx);
            sink.chunk(ChunkKind::NvtxEvents, ring.tid, 0, 0, &payload);
            sink.nvtx = payload;
        }
        if n == 0 && dropped == 0 {
            continue;
        }
        let seq = ring.seq.fetch_add(1, Ordering::Relaxed);
        sink.payload_chunk(ChunkKind::ApiRecords, ring.tid, seq, dropped);
        sink.records += n as u64;
        sink.dropped += dropped;
        if sink.should_flush() && mode != Drain::Final {
            if let Err(e) = sink.flush() {
                diag::log(&["write failed: ", &e.to_string()]);
            }
        }
    }
    rings.clear();
    sink.scratch = rings;
    Drained { busy_rings }
}
