//! CUPTI's activity buffers: CUPTI asks for one on the program's threads when it needs one
//! ([`request`]: from a small recycled pool, else a new one in the trace file) and hands it
//! back full ([`complete`], which only queues it); the worker converts the queued ones
//! ([`convert_full`]) and flushes CUPTI only if it handed back no buffer since the last
//! period ([`flush_if_idle`]).
//!
//! The buffers are pages of the trace file ([`crate::region::GpuRegion`]): CUPTI writes each
//! record into its buffer when the work is launched, so a reader finds the work of a process
//! that ended before CUPTI handed a buffer back ([`rtrace_format::gpu_region`]). One goes
//! back to CUPTI only once the chunks of its records are written.

use super::api::Api;
use super::records::convert;
use super::share;
use super::state::{Buffer, CUPTI};
use crate::output::Sink;
use std::ffi::c_void;
use std::sync::atomic::Ordering;

/// Size of one CUPTI buffer, in 8-byte words (4 MiB).
const BUFFER_WORDS: usize = 1 << 19;
/// Buffers kept for reuse.
const POOL_MAX: usize = 16;
/// Buffers made when GPU activity starts, so that CUPTI's requests, which come on the
/// program's threads when a buffer fills, find one ready.
const POOL_START: usize = 2;

/// A new buffer: pages of the trace file when the source can make one, else heap memory.
fn new_buffer() -> Buffer {
    let wanted = crate::state::config().gpu_file_buffers;
    let file = CUPTI
        .buffers
        .layout
        .get()
        .filter(|_| wanted)
        .and_then(|layout| {
            let source = CUPTI.buffers.region_source.get()?;
            source((BUFFER_WORDS * 8) as u64, layout)
        });
    match file {
        Some(region) => Buffer::File(region),
        None => Buffer::Heap(vec![0u64; BUFFER_WORDS].into_boxed_slice()),
    }
}

/// Keeps buffers in the trace file ready in the pool, made by the worker, so that CUPTI's
/// requests on the program's threads seldom make one.
pub(super) fn keep_spare(sink: &mut Sink) {
    let Some(layout) = CUPTI.buffers.layout.get() else {
        return;
    };
    if !crate::state::config().gpu_file_buffers || sink.is_broken() {
        return;
    }
    let spare = |pool: &Vec<Buffer>| pool.iter().filter(|b| matches!(b, Buffer::File(_))).count();
    let needed = CUPTI
        .buffers
        .pool
        .lock()
        .map_or(0, |p| POOL_START.saturating_sub(spare(&p)));
    for _ in 0..needed {
        match sink.reserve_gpu_region((BUFFER_WORDS * 8) as u64, layout) {
            Ok(region) => give_back(Buffer::File(region)),
            Err(_) => return,
        }
    }
}

/// Fills the pool when GPU activity starts.
pub(super) fn prefill_pool() {
    let made: Vec<Buffer> = (0..POOL_START).map(|_| new_buffer()).collect();
    if let Ok(mut pool) = CUPTI.buffers.pool.lock() {
        pool.extend(made);
    }
}

/// CUPTI's buffer request (`CUpti_BuffersCallbackRequestFunc`).
pub(super) extern "C" fn request(buf: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    // A forked child finds its parent's buffers in the pool: pages of the parent's trace.
    let pooled = CUPTI.buffers.pool.lock().ok().and_then(|mut p| {
        p.retain(|b| !matches!(b, Buffer::File(r) if !r.is_ours()));
        p.pop()
    });
    let mut b = pooled.unwrap_or_else(new_buffer);
    if matches!(&b, Buffer::File(region) if !region.lent()) {
        // The trace has ended: its buffers are not lent again.
        b = Buffer::Heap(vec![0u64; BUFFER_WORDS].into_boxed_slice());
    }
    let (ptr, len) = b.memory();
    if let Ok(mut lent) = CUPTI.buffers.lent.lock() {
        lent.push(b);
    }
    // SAFETY: CUPTI's out-parameters.
    unsafe {
        *buf = ptr;
        *size = len;
        *max_records = 0;
    }
}

/// CUPTI hands a buffer back (`CUpti_BuffersCallbackCompleteFunc`): queued for the worker, and
/// the program's records copied to it if it is a CUPTI client too.
pub(super) extern "C" fn complete(
    ctx: *mut c_void,
    stream: u32,
    buf: *mut u8,
    _size: usize,
    valid: usize,
) {
    if buf.is_null() {
        return;
    }
    let b = CUPTI.buffers.lent.lock().ok().and_then(|mut lent| {
        let i = lent.iter().position(|b| b.memory().0 == buf)?;
        Some(lent.swap_remove(i))
    });
    let Some(b) = b else {
        return;
    };
    let valid = valid.min(b.memory().1);
    let buffers = &CUPTI.buffers;
    let program_clock = CUPTI.share.on_program_clock.load(Ordering::Acquire);
    if let Buffer::File(region) = &b {
        region.delivered(valid, program_clock);
    }
    if let Some(api) = CUPTI.api.get() {
        let mut n = 0usize;
        // SAFETY: plain CUPTI query with a valid out-pointer.
        if unsafe { (api.dropped)(ctx, stream, &mut n) } == 0 {
            buffers.dropped.fetch_add(n as u64, Ordering::Relaxed);
        }
        let _ = std::panic::catch_unwind(|| share::copy_to_program(api, ctx, stream, buf, valid));
    }
    if let Ok(mut f) = buffers.full.lock() {
        f.push((b, valid, program_clock));
    }
    buffers.completed.fetch_add(1, Ordering::Release);
}

/// The worker's periodic flush: asks CUPTI for its buffers only when it handed back none since
/// the last look. A program making GPU work fast fills buffers, which CUPTI hands back by
/// itself, and is spared the flush, which takes CUPTI's locks while the program launches
/// (docs/benchmarks.md); a slower one gets its records within a flush period.
pub fn flush_if_idle() {
    let buffers = &CUPTI.buffers;
    let completed = buffers.completed.load(Ordering::Acquire);
    if buffers
        .completed_at_last_look
        .swap(completed, Ordering::AcqRel)
        == completed
    {
        CUPTI.flush(false);
        // Buffers this flush handed back are not the program filling them.
        buffers
            .completed_at_last_look
            .store(buffers.completed.load(Ordering::Acquire), Ordering::Release);
    }
}

/// The full buffers, taken from the queue (None: its lock is poisoned).
pub(super) fn take_full() -> Option<Vec<(Buffer, usize, bool)>> {
    match CUPTI.buffers.full.lock() {
        Ok(mut f) => Some(std::mem::take(&mut *f)),
        Err(_) => None,
    }
}

/// Converts `full` buffers into `sink`'s GPU batch. Heap buffers go back to the pool at once;
/// buffers in the file once the chunks of their records are written ([`reuse_written`]).
pub(super) fn convert_full(api: &Api, full: Vec<(Buffer, usize, bool)>, sink: &mut Sink) {
    let buffers = &CUPTI.buffers;
    if full.iter().any(|&(_, _, program_clock)| program_clock) {
        share::read_clocks();
    }
    for (buf, valid, program_clock) in full {
        let (base, _) = buf.memory();
        if let Buffer::File(region) = &buf {
            region.written_from(sink.pending_at());
        }
        if program_clock {
            share::with_map(|map| convert(api, base, valid, sink, Some(map)));
        } else {
            convert(api, base, valid, sink, None);
        }
        match buf {
            Buffer::File(region) => sink.gpu_written.push(region),
            Buffer::Heap(mut b) => {
                // Zeroed before the lock: `request`, on the program's threads, takes it.
                if buffers.zeroed.load(Ordering::Acquire) {
                    b.fill(0);
                }
                give_back(Buffer::Heap(b));
            }
        }
    }
}

/// Learns the names of the kernels CUPTI has written into the buffers it holds (it writes each
/// record at launch, naming the kernel by the address of a string of its own): a reader that
/// rebuilds those records after the process died finds them named. Each buffer is looked at
/// from where the last look stopped, up to a record CUPTI is still writing. (CUPTI may name a
/// kernel only as it completes the record: the launch's link names it too.)
pub(super) fn learn_names(sink: &mut Sink) {
    use rtrace_format::gpu_region::INCOMPLETE;
    let Some(layout) = CUPTI.buffers.layout.get() else {
        return;
    };
    let regions: Vec<&'static crate::region::GpuRegion> = match CUPTI.buffers.lent.try_lock() {
        Ok(lent) => lent
            .iter()
            .filter_map(|b| match b {
                Buffer::File(r) => Some(*r),
                Buffer::Heap(_) => None,
            })
            .collect(),
        Err(_) => return,
    };
    for region in regions {
        let mut at = region.looked_at.load(Ordering::Relaxed);
        while let Some(first) = region.word(at) {
            let kind = first as u32 & !INCOMPLETE;
            let Some(&(_, stride)) = layout.strides.iter().find(|&&(k, _)| k == kind) else {
                break;
            };
            if layout.kernel_kinds.contains(&kind) {
                // A record CUPTI has not named yet is named by its launch's link.
                let name_at = at + layout.kernel.name as usize;
                sink.gpu_batch
                    .learn_name_at(region.word(name_at).unwrap_or(0));
            }
            at += stride as usize;
        }
        region.looked_at.store(at, Ordering::Relaxed);
    }
}

/// Puts the buffers in the file whose records `sink` has written back in the pool.
pub(super) fn reuse_written(sink: &mut Sink) {
    for region in sink.gpu_freed.drain(..) {
        give_back(Buffer::File(region));
    }
}

fn give_back(buf: Buffer) {
    if let Ok(mut pool) = CUPTI.buffers.pool.lock() {
        if pool.len() < POOL_MAX {
            pool.push(buf);
        }
    }
}

/// A notice when CUPTI dropped records since the last one.
pub(super) fn report_dropped(sink: &mut Sink) {
    let buffers = &CUPTI.buffers;
    let dropped = buffers.dropped.load(Ordering::Relaxed);
    if dropped > buffers.reported_dropped.swap(dropped, Ordering::Relaxed) {
        sink.notice(&format!(
            "CUPTI dropped {dropped} GPU activity records so far (its buffers were full)"
        ));
    }
}
