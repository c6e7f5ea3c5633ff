//! CUPTI's activity buffers: CUPTI asks for one on the program's threads when it needs one
//! ([`request`], from a small recycled pool) and hands it back full ([`complete`], which only
//! queues it); the worker converts the queued ones ([`convert_full`]) and flushes CUPTI only if
//! it handed back no buffer since the last period ([`flush_if_idle`]).

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
/// Buffers allocated when GPU activity starts, so that CUPTI's requests, which come on the
/// program's threads when a buffer fills, find one ready instead of allocating 4 MiB there.
const POOL_START: usize = 4;

/// Fills the pool when GPU activity starts.
pub(super) fn prefill_pool() {
    if let Ok(mut pool) = CUPTI.buffers.pool.lock() {
        pool.extend((0..POOL_START).map(|_| vec![0u64; BUFFER_WORDS].into_boxed_slice()));
    }
}

/// CUPTI's buffer request (`CUpti_BuffersCallbackRequestFunc`).
pub(super) extern "C" fn request(buf: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    let b = CUPTI
        .buffers
        .pool
        .lock()
        .ok()
        .and_then(|mut p| p.pop())
        .unwrap_or_else(|| vec![0u64; BUFFER_WORDS].into_boxed_slice());
    let ptr = Box::into_raw(b) as *mut u64 as *mut u8;
    // SAFETY: CUPTI's out-parameters.
    unsafe {
        *buf = ptr;
        *size = BUFFER_WORDS * 8;
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
    // SAFETY: `buf` is a buffer `request` leaked from a Box<[u64]> of BUFFER_WORDS words.
    let b: Buffer = unsafe {
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(
            buf as *mut u64,
            BUFFER_WORDS,
        ))
    };
    let buffers = &CUPTI.buffers;
    let program_clock = CUPTI.share.on_program_clock.load(Ordering::Acquire);
    if let Some(api) = CUPTI.api.get() {
        let mut n = 0usize;
        // SAFETY: plain CUPTI query with a valid out-pointer.
        if unsafe { (api.dropped)(ctx, stream, &mut n) } == 0 {
            buffers.dropped.fetch_add(n as u64, Ordering::Relaxed);
        }
        let _ = std::panic::catch_unwind(|| {
            share::copy_to_program(api, ctx, stream, buf, valid.min(BUFFER_WORDS * 8))
        });
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

/// Converts `full` buffers into `sink`'s GPU batch and puts them back in the pool.
pub(super) fn convert_full(api: &Api, full: Vec<(Buffer, usize, bool)>, sink: &mut Sink) {
    let buffers = &CUPTI.buffers;
    if full.iter().any(|&(_, _, program_clock)| program_clock) {
        share::read_clocks();
    }
    for (mut buf, valid, program_clock) in full {
        if program_clock {
            share::with_map(|map| convert(api, &mut buf, valid, sink, Some(map)));
        } else {
            convert(api, &mut buf, valid, sink, None);
        }
        // Zeroed before the lock: `request`, on the program's threads, takes it.
        if buffers.zeroed.load(Ordering::Acquire) {
            buf.fill(0);
        }
        if let Ok(mut pool) = buffers.pool.lock() {
            if pool.len() < POOL_MAX {
                pool.push(buf);
            }
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
