//! PC samples as CUPTI leaves them (`CUpti_PCSamplingData`) → rtrace's batches: the buffers
//! CUPTI fills, the function-name cache, the contexts being sampled, and reading them.

use super::api::{GetDataParams, PcApi, PcData, SamplingData, StallReason, ERROR_OUT_OF_MEMORY};
use crate::clock;
use crate::thread::internal;
use rtrace_format::{ChunkKind, PcSample, PcSampleBatch};
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr};

/// PCs the read buffer holds; a read that finds more asks again.
pub(super) const BUFFER_PCS: usize = 4096;
/// PCs the configuration buffer holds: what CUPTI still has when sampling is disabled goes
/// there, and what does not fit is lost.
pub(super) const CONFIG_BUFFER_PCS: usize = 32768;
/// Reads of one context in a row before the worker moves on.
pub(super) const MAX_READS: usize = 64;

/// A `CUpti_PCSamplingData` with room for [`BUFFER_PCS`] PCs of `stalls` reasons each; the
/// pointers inside point into the boxes, which never move.
pub(super) struct Buffer {
    pub(super) data: Box<SamplingData>,
    pub(super) pcs: Box<[PcData]>,
    pub(super) stalls: Box<[StallReason]>,
}

impl Buffer {
    pub(super) fn new(capacity: usize, stalls: usize) -> Buffer {
        let mut reasons = vec![StallReason::default(); capacity * stalls.max(1)].into_boxed_slice();
        let base = reasons.as_mut_ptr();
        let mut pcs: Box<[PcData]> = (0..capacity)
            .map(|i| PcData {
                size: std::mem::size_of::<PcData>(),
                cubin_crc: 0,
                pc_offset: 0,
                function_index: 0,
                pad: 0,
                function_name: std::ptr::null(),
                stall_reason_count: 0,
                // SAFETY: within `reasons`, which has `stalls` entries per PC.
                stall_reason: unsafe { base.add(i * stalls.max(1)) },
                correlation_id: 0,
            })
            .collect();
        let data = Box::new(SamplingData {
            size: std::mem::size_of::<SamplingData>(),
            collect_num_pcs: capacity,
            total_samples: 0,
            dropped_samples: 0,
            total_num_pcs: 0,
            remaining_num_pcs: 0,
            range_id: 0,
            pc_data: pcs.as_mut_ptr(),
            non_user_samples: 0,
            hardware_buffer_full: 0,
        });
        Buffer {
            data,
            pcs,
            stalls: reasons,
        }
    }

    /// What CUPTI left in the buffer, as a batch (None: nothing), and the buffer emptied.
    pub(super) fn take(&mut self, context: u32, names: &mut NameCache) -> Option<PcSampleBatch> {
        let d = &mut *self.data;
        let n = d.total_num_pcs.min(self.pcs.len());
        if n == 0 && d.total_samples == 0 && d.dropped_samples == 0 && d.hardware_buffer_full == 0 {
            return None;
        }
        let mut batch = PcSampleBatch {
            context,
            time_ns: clock::now_ns(),
            total_samples: d.total_samples,
            dropped_samples: d.dropped_samples,
            non_user_samples: d.non_user_samples,
            hardware_buffer_full: d.hardware_buffer_full != 0,
            ..Default::default()
        };
        let mut local: HashMap<*const c_char, u32> = HashMap::new();
        for i in 0..n {
            // SAFETY: CUPTI filled the first `total_num_pcs` entries of `pc_data`.
            let pc = unsafe { &*d.pc_data.add(i) };
            let function = *local.entry(pc.function_name).or_insert_with(|| {
                batch.functions.push(names.name(pc.function_name));
                (batch.functions.len() - 1) as u32
            });
            let count = pc
                .stall_reason_count
                .min(self.stalls.len() / self.pcs.len().max(1));
            let stalls = (0..count)
                .map(|k| {
                    // SAFETY: CUPTI wrote `stall_reason_count` entries of this PC's array.
                    let r = unsafe { *pc.stall_reason.add(k) };
                    (r.index, r.samples)
                })
                .collect();
            batch.pcs.push(PcSample {
                cubin_crc: pc.cubin_crc,
                pc_offset: pc.pc_offset,
                function,
                function_index: pc.function_index,
                stalls,
            });
        }
        d.total_num_pcs = 0;
        d.total_samples = 0;
        d.dropped_samples = 0;
        d.non_user_samples = 0;
        d.hardware_buffer_full = 0;
        Some(batch)
    }
}

/// Function names by CUPTI's pointer. CUPTI may share one name among records and leaves
/// freeing it to the client once nothing uses it; rtrace copies it and leaves it alone.
#[derive(Default)]
pub(super) struct NameCache {
    pub(super) by_ptr: HashMap<usize, String>,
}

impl NameCache {
    pub(super) fn name(&mut self, p: *const c_char) -> String {
        if p.is_null() {
            return String::new();
        }
        self.by_ptr
            .entry(p as usize)
            // SAFETY: CUPTI's NUL-terminated function name.
            .or_insert_with(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
            .clone()
    }
}

/// One context being sampled.
pub(super) struct Sampled {
    pub(super) ctx: usize,
    pub(super) id: u32,
    /// Where CUPTI puts what it flushes by itself (module loads after an unload, disable).
    pub(super) config_buf: Buffer,
    /// What `cuptiPCSamplingGetData` fills.
    pub(super) read_buf: Buffer,
}

// SAFETY: the raw pointers inside point into boxes the struct owns (and a context handle used
// only as a value), touched only under STATE's lock.
unsafe impl Send for Sampled {}

#[derive(Default)]
pub(crate) struct PcState {
    pub(super) contexts: Vec<Sampled>,
    pub(super) names: NameCache,
    /// Chunks for the worker to write: configurations and batches read in callbacks.
    pub(super) pending: Vec<(ChunkKind, Vec<u8>)>,
    /// Reads that returned the hardware-buffer-full error.
    pub(super) buffer_full: u64,
    /// Reads made, PCs they returned, and the last error a read returned (said once).
    pub(super) reads: u64,
    pub(super) read_pcs: u64,
    pub(super) read_error: Option<i32>,
    pub(super) error_said: bool,
}

impl PcState {
    pub(super) fn count(&mut self, r: ReadStats) {
        self.reads += r.reads;
        self.read_pcs += r.pcs;
        if r.error.is_some() {
            self.read_error = r.error;
        }
    }
}

/// Counts of reads: (reads, PCs returned, last error).
#[derive(Default)]
pub(super) struct ReadStats {
    pub(super) reads: u64,
    pub(super) pcs: u64,
    pub(super) error: Option<i32>,
}

/// Reads `s`'s samples until CUPTI has none left (at most [`MAX_READS`] reads).
pub(super) fn read(
    pc: &PcApi,
    s: &mut Sampled,
    names: &mut NameCache,
    out: &mut Vec<PcSampleBatch>,
    full: &mut u64,
) -> ReadStats {
    let mut stats = ReadStats::default();
    for _ in 0..MAX_READS {
        let mut p = GetDataParams {
            size: std::mem::size_of::<GetDataParams>(),
            priv_: std::ptr::null_mut(),
            ctx: s.ctx as *mut c_void,
            data: &mut *s.read_buf.data,
        };
        // SAFETY: CUPTI fills the buffer, which has room for `collect_num_pcs` PCs of the
        // configured stall reasons.
        let rc = internal(|| unsafe { (pc.get_data)(&mut p) });
        stats.reads += 1;
        stats.pcs += s.read_buf.data.total_num_pcs as u64;
        if rc != 0 {
            stats.error = Some(rc);
        }
        if rc == ERROR_OUT_OF_MEMORY || s.read_buf.data.hardware_buffer_full != 0 {
            *full += 1;
        }
        let more = s.read_buf.data.remaining_num_pcs > 0;
        if let Some(b) = s.read_buf.take(s.id, names) {
            out.push(b);
        }
        if (rc != 0 && rc != ERROR_OUT_OF_MEMORY) || !more {
            return stats;
        }
    }
    stats
}

/// What CUPTI moved into `s`'s configuration buffer by itself.
pub(super) fn take_config(s: &mut Sampled, names: &mut NameCache, out: &mut Vec<PcSampleBatch>) {
    if let Some(b) = s.config_buf.take(s.id, names) {
        out.push(b);
    }
}

pub(super) fn queue(st: &mut PcState, batches: Vec<PcSampleBatch>) {
    for b in batches {
        st.pending
            .push((ChunkKind::PcSamples, rtrace_format::encode_value(&b)));
    }
}
