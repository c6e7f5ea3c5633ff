//! The drain pass: moves the per-thread rings' entries into the trace file's writer in
//! batches (calls as API record chunks, NVTX events as NVTX chunks, links into the link table).
//! The worker's loop and the final flush, and when they drain what, are the session's.

use crate::diag;
use crate::output::Sink;
use crate::process::Process;
use crate::ring::Entry;
use rtrace_format::ChunkKind;
use std::sync::atomic::Ordering;

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

/// Appends ring entry `e` (an NVTX event, or the attributes of the one before it) to `out` as
/// [`rtrace_format::NvtxEvent`]s; links go to `links`.
fn other_entry(
    e: Entry,
    out: &mut Vec<u8>,
    links: &mut crate::gpu_batch::Links,
    to_ns: impl Fn(u64) -> u64,
) {
    use rtrace_format::NvtxEvent;
    const SIZE: usize = NvtxEvent::SIZE;
    match e {
        Entry::Link { call, source } => links.insert(source, call),
        Entry::NvtxAttributes {
            color,
            color_type,
            payload,
            payload_type,
        } => {
            let Some(at) = out.len().checked_sub(SIZE) else {
                return;
            };
            let Ok(bytes) = <&[u8; SIZE]>::try_from(&out[at..]) else {
                return;
            };
            let mut last = NvtxEvent::from_bytes(bytes);
            last.color = color;
            last.payload = payload;
            last.payload_type = payload_type;
            last.color_type = color_type;
            out[at..].copy_from_slice(&last.to_bytes());
        }
        Entry::Nvtx(n) => {
            let ev = NvtxEvent {
                kind: n.kind,
                message: n.message,
                time_ns: to_ns(n.time),
                value: n.value,
                domain: n.domain,
                category: n.category,
                ..Default::default()
            };
            out.extend_from_slice(&ev.to_bytes());
        }
        Entry::Call(_) => {}
    }
}

/// What a drain pass found.
pub struct Drained {
    /// Rings that were at least a quarter full.
    pub busy_rings: usize,
}

/// Moves records from the rings into `sink`'s pending output. Consumer only. The NVTX texts
/// the events name must be in `sink` before (the session's drain sequence sees to it).
pub fn drain_rings(process: &Process, sink: &mut Sink, mode: Drain) -> Drained {
    let mut busy_rings = 0;
    let mut rings = std::mem::take(&mut sink.scratch);
    sink.calibration.sample();
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
        let n = ring.drain(
            &mut sink.payload,
            |t| calibration.to_ns(t),
            |e| other_entry(e, nvtx, links, |t| calibration.to_ns(t)),
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
