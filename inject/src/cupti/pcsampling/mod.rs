//! PC sampling through CUPTI's PC Sampling API (`cupti_pcsampling.h`), opt-in
//! (`RTRACE_PC_SAMPLING`). cudarc binds none of it: the entry points are looked up in the CUPTI
//! library GPU activity loaded (`api.rs`, whose structures mirror the header's).
//!
//! - Each context is enabled in CUPTI's context-created callback, on the creating thread,
//!   in continuous mode (kernels are not serialized), with the stall reasons and period asked
//!   for; its set-up is written as a `PcSamplingConfig` chunk.
//! - The worker reads every enabled context each flush period (`cuptiPCSamplingGetData`,
//!   which never synchronizes the device) and writes `PcSamples` chunks.
//! - Samples are also read when a module is about to be unloaded, when a module loads (CUPTI
//!   moves what it holds into the configuration buffer when a module is loaded after an
//!   unload), when a context is about to be destroyed (then sampling is disabled on it), and
//!   at exit.
//! - Nothing here runs on the program's launch path: only in the callbacks above and on the
//!   worker, so they may allocate and lock. Callbacks wait at most [`CALLBACK_WAIT`] for the
//!   worker's lock, and say so in a notice if they gave up.
//! - If CUPTI lacks the API, or refuses to enable sampling (unsupported device, another tool
//!   sampling the context), tracing goes on and a notice says why sampling is off.
//!
//! Rooms: `api.rs` (the entry points), `data.rs` (CUPTI's sample buffers → rtrace's batches),
//! `config.rs` (a context's set-up); here, the callbacks, the worker's reads and the last ones.

pub(super) mod api;
mod config;
pub(super) mod data;

use super::api::{describe, Api};
use super::state::CUPTI;
use crate::output::Sink;
use crate::thread::internal;
use api::{disable, PcApi, ERROR_OUT_OF_MEMORY};
use config::enable;
use data::{queue, read, take_config, NameCache, PcState, ReadStats, Sampled};
use rtrace_format::{ChunkKind, PcSampleBatch};
use rtrace_format::{PC_SAMPLING_NOTICE, PC_SAMPLING_ON};
use std::ffi::c_void;
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

/// At exit and context destruction, reads go on, this far apart, until they have found
/// nothing for [`FINAL_QUIET`] (CUPTI's own threads decode the hardware buffer every 100 ms by
/// default), for [`FINAL_MAX`] at most.
const FINAL_READ_GAP: Duration = Duration::from_millis(25);
const FINAL_QUIET: Duration = Duration::from_millis(250);
const FINAL_MAX: Duration = Duration::from_secs(2);
/// How long a callback waits for the worker to finish a read.
const CALLBACK_WAIT: Duration = Duration::from_millis(500);

fn lock() -> Option<MutexGuard<'static, Option<PcState>>> {
    CUPTI.pc.lock().ok()
}

/// The lock, waited for at most [`CALLBACK_WAIT`] (a callback on the program's thread).
fn lock_for_callback() -> Option<MutexGuard<'static, Option<PcState>>> {
    let start = Instant::now();
    loop {
        match CUPTI.pc.try_lock() {
            Ok(g) => return Some(g),
            Err(std::sync::TryLockError::Poisoned(_)) => return None,
            Err(std::sync::TryLockError::WouldBlock) => {
                if start.elapsed() > CALLBACK_WAIT {
                    return None;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }
}

fn pc_api(api: &Api) -> Option<&PcApi> {
    api.pc_sampling.as_ref().and_then(|r| r.as_ref().ok())
}

/// Context created (CUPTI's resource callback, on the creating thread): enables and configures
/// sampling on it.
pub(super) fn on_context_created(api: &Api, ctx: *mut c_void) {
    let pc = match &api.pc_sampling {
        Some(Ok(pc)) => pc,
        Some(Err(e)) => return CUPTI.notice(format!("{PC_SAMPLING_NOTICE} off: {e}")),
        None => return,
    };
    internal(|| match enable(api, pc, ctx) {
        Ok((sampled, config)) => {
            let mut msg = format!(
                "{PC_SAMPLING_ON} for context {}: every 2^{} cycles, {} stall reasons",
                config.context,
                config.period_log2,
                config.stall_reasons.len()
            );
            if let Some(mut g) = lock_for_callback() {
                let st = g.get_or_insert_with(PcState::default);
                st.pending.push((
                    ChunkKind::PcSamplingConfig,
                    rtrace_format::encode_value(&config),
                ));
                st.contexts.push(sampled);
            } else {
                disable(pc, ctx);
                msg = format!(
                    "{PC_SAMPLING_NOTICE} off for context {}: rtrace's worker held its state",
                    config.context
                );
            }
            CUPTI.notice(msg);
        }
        Err(e) => CUPTI.notice(format!("{PC_SAMPLING_NOTICE} off: {e}")),
    });
}

/// A module loaded (callback): CUPTI may have flushed into the configuration buffer.
pub(super) fn on_module_loaded(ctx: *mut c_void) {
    with_context(ctx, "a module load", |_, s, names, out, _| {
        take_config(s, names, out)
    });
}

/// A module about to be unloaded (callback): its PCs are read while they still mean it.
pub(super) fn on_module_unloading(api: &Api, ctx: *mut c_void) {
    let Some(pc) = pc_api(api) else { return };
    with_context(ctx, "a module unload", |st, s, names, out, full| {
        let r = read(pc, s, names, out, full);
        st.count(r);
        take_config(s, names, out);
    });
}

/// A context about to be destroyed (callback): its samples are read and sampling disabled.
pub(super) fn on_context_destroying(api: &Api, ctx: *mut c_void) {
    let Some(pc) = pc_api(api) else { return };
    let Some(mut g) = lock_for_callback() else {
        return CUPTI.notice(format!(
            "{PC_SAMPLING_NOTICE}: samples of a destroyed context lost: rtrace's worker held its \
             state"
        ));
    };
    let Some(st) = g.as_mut() else { return };
    let Some(i) = st.contexts.iter().position(|s| s.ctx == ctx as usize) else {
        return;
    };
    let mut s = st.contexts.swap_remove(i);
    let mut out = Vec::new();
    let r = finish_one(pc, &mut s, &mut st.names, &mut out, &mut st.buffer_full);
    st.count(r);
    queue(st, out);
}

/// The last reads of a context, then sampling disabled on it. CUPTI's threads may still be
/// decoding samples when the program ends (reads never wait for the device): reads go on until
/// one finds nothing, and what CUPTI holds after that comes in the configuration buffer.
fn finish_one(
    pc: &PcApi,
    s: &mut Sampled,
    names: &mut NameCache,
    out: &mut Vec<PcSampleBatch>,
    full: &mut u64,
) -> ReadStats {
    let mut stats = ReadStats::default();
    let start = Instant::now();
    let mut last_data = start;
    loop {
        let r = read(pc, s, names, out, full);
        stats.reads += r.reads;
        stats.pcs += r.pcs;
        stats.error = r.error.or(stats.error);
        if r.pcs > 0 {
            last_data = Instant::now();
        }
        if r.error.is_some_and(|e| e != ERROR_OUT_OF_MEMORY)
            || last_data.elapsed() >= FINAL_QUIET
            || start.elapsed() >= FINAL_MAX
        {
            break;
        }
        std::thread::sleep(FINAL_READ_GAP);
    }
    internal(|| disable(pc, s.ctx as *mut c_void));
    let in_config = s.config_buf.data.total_num_pcs;
    take_config(s, names, out);
    if in_config >= s.config_buf.pcs.len() {
        CUPTI.notice(format!(
            "{PC_SAMPLING_NOTICE}: context {}'s last samples filled the {} PCs of the final buffer: PCs past them were lost",
            s.id,
            s.config_buf.pcs.len()
        ));
    }
    stats
}

fn with_context(
    ctx: *mut c_void,
    when: &str,
    f: impl FnOnce(&mut PcState, &mut Sampled, &mut NameCache, &mut Vec<PcSampleBatch>, &mut u64),
) {
    let Some(mut g) = lock_for_callback() else {
        return CUPTI.notice(format!(
            "{PC_SAMPLING_NOTICE}: samples not read at {when}: rtrace's worker held its state"
        ));
    };
    let Some(st) = g.as_mut() else { return };
    let Some(i) = st.contexts.iter().position(|s| s.ctx == ctx as usize) else {
        return;
    };
    let mut s = st.contexts.swap_remove(i);
    let mut names = std::mem::take(&mut st.names);
    let mut full = 0;
    let mut out = Vec::new();
    f(st, &mut s, &mut names, &mut out, &mut full);
    st.names = names;
    st.buffer_full += full;
    st.contexts.push(s);
    queue(st, out);
}

/// At exit: every context still sampled is read one last time and disabled.
pub(super) fn finish(api: &Api) {
    let Some(pc) = pc_api(api) else { return };
    let Some(mut g) = lock() else { return };
    let Some(st) = g.as_mut() else { return };
    let mut out = Vec::new();
    let mut full = 0;
    for mut s in std::mem::take(&mut st.contexts) {
        let r = finish_one(pc, &mut s, &mut st.names, &mut out, &mut full);
        st.count(r);
    }
    st.buffer_full += full;
    queue(st, out);
}

/// The worker's periodic read: every context's new samples, and what callbacks queued, into
/// `sink`.
pub(super) fn drain_into(api: &Api, sink: &mut Sink) {
    let Some(mut g) = lock() else { return };
    let Some(st) = g.as_mut() else { return };
    if let Some(pc) = pc_api(api) {
        let mut out = Vec::new();
        let mut full = 0;
        let mut stats = ReadStats::default();
        for s in st.contexts.iter_mut() {
            let r = read(pc, s, &mut st.names, &mut out, &mut full);
            stats.reads += r.reads;
            stats.pcs += r.pcs;
            stats.error = r.error.or(stats.error);
        }
        st.count(stats);
        if let (Some(rc), false) = (st.read_error, st.error_said) {
            st.error_said = true;
            sink.notice(&format!(
                "PC sampling: cuptiPCSamplingGetData: {}",
                describe(api, rc)
            ));
        }
        if full > 0 && st.buffer_full == 0 {
            sink.notice("PC sampling: CUPTI's hardware buffer was full: samples were lost (a longer period, RTRACE_PC_SAMPLING=N with a larger N, loses fewer)");
        }
        st.buffer_full += full;
        queue(st, out);
    }
    for (kind, bytes) in st.pending.drain(..) {
        sink.chunk(kind, 0, 0, 0, &bytes);
    }
    if crate::diag::enabled() && st.reads > 0 {
        crate::diag::log(&[
            "pc sampling: ",
            &st.reads.to_string(),
            " reads returned ",
            &st.read_pcs.to_string(),
            " PCs (last error ",
            &st.read_error.map_or("none".to_string(), |e| e.to_string()),
            "); ",
            &st.names.by_ptr.len().to_string(),
            " distinct function-name pointers",
        ]);
    }
}
