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
    if let Some(msg) = process.take_region_notice() {
        sink.notice(&msg);
    }
    let pair = sink.calibration.latest();
    process.note_clock_pair(pair);
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
        sink.nvtx.clear();
        if waiting == 0 {
            // Nothing to copy: only losses to report.
            let dropped = ring.take_dropped();
            if dropped > 0 {
                sink.chunk(
                    ChunkKind::ApiRecords,
                    ring.tid,
                    ring.drained(),
                    dropped,
                    &[],
                );
                sink.dropped += dropped;
            }
            continue;
        }
        let at = sink.open_chunk();
        let calibration = &sink.calibration;
        let links = &mut sink.links;
        let batch = &mut sink.gpu_batch;
        let nvtx = &mut sink.nvtx;
        let to_ns = |t| calibration.to_ns(t);
        // Calls are copied as the ring holds them; the chunk's trailer carries the clock
        // samples that convert their ticks (`rtrace_format::ticks`).
        let (n, end, earliest) = ring.drain(&mut sink.pending, &mut |e| match e {
            Entry::Link {
                call,
                source,
                symbol,
            } => {
                links.insert(source, call);
                batch.learn_name_at(symbol);
            }
            e => e.append_nvtx(nvtx, to_ns),
        });
        let dropped = ring.take_dropped();
        // A chunk's `seq` is the ring position after its last entry: a reader of a file whose
        // process died before `release` knows which of the ring's entries a chunk holds.
        if n > 0 || dropped > 0 {
            sink.calibration.write_trailer(&mut sink.pending, earliest);
            sink.close_chunk(at, ChunkKind::ApiRecordsInTicks, ring.tid, end, dropped);
            sink.records += n as u64;
            sink.dropped += dropped;
        } else {
            sink.drop_chunk(at);
        }
        if !sink.nvtx.is_empty() {
            let payload = std::mem::take(&mut sink.nvtx);
            sink.chunk(ChunkKind::NvtxEvents, ring.tid, end, 0, &payload);
            sink.nvtx = payload;
        }
        ring.set_calibration(pair);
        if let Some(errno) = ring.region().grow_error() {
            if !sink.grow_error_said {
                sink.grow_error_said = true;
                sink.notice(&format!(
                    "a thread's buffer could not grow in the trace file ({}): its later \
                     records were counted as lost",
                    std::io::Error::from_raw_os_error(errno as i32)
                ));
            }
        }
        sink.releases.push((ring.clone(), end));
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
