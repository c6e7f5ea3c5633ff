//! PC sampling through CUPTI's PC Sampling API (`cupti_pcsampling.h`), opt-in
//! (`RTRACE_PC_SAMPLING`). cudarc binds none of it: the entry points are looked up in the CUPTI
//! library GPU activity loaded, and the structures below mirror the header's.
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

use super::{describe, notice, Api};
use crate::clock;
use crate::output::Sink;
use crate::thread::internal;
use rtrace_format::{ChunkKind, PcSample, PcSampleBatch, PcSamplingConfig};
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// `CUpti_PCSamplingStallReason`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct StallReason {
    index: u32,
    samples: u32,
}

/// `CUpti_PCSamplingPCData` (packed, 8-aligned: 64 bytes).
#[repr(C)]
struct PcData {
    size: usize,
    cubin_crc: u64,
    pc_offset: u64,
    function_index: u32,
    pad: u32,
    function_name: *const c_char,
    stall_reason_count: usize,
    stall_reason: *mut StallReason,
    correlation_id: u32,
}

/// `CUpti_PCSamplingData` (packed, 8-aligned: 80 bytes).
#[repr(C)]
struct SamplingData {
    size: usize,
    collect_num_pcs: usize,
    total_samples: u64,
    dropped_samples: u64,
    total_num_pcs: usize,
    remaining_num_pcs: usize,
    range_id: u64,
    pc_data: *mut PcData,
    non_user_samples: u64,
    hardware_buffer_full: u8,
}

const _: () = assert!(std::mem::size_of::<PcData>() == 64);
const _: () = assert!(std::mem::size_of::<SamplingData>() == 80);

/// `CUpti_PCSamplingConfigurationInfo`: type, status, then a 24-byte union.
#[repr(C)]
#[derive(Clone, Copy)]
struct ConfigInfo {
    kind: u32,
    status: u32,
    data: [u64; 3],
}

const _: () = assert!(std::mem::size_of::<ConfigInfo>() == 32);

// CUpti_PCSamplingConfigurationAttributeType.
const ATTR_SAMPLING_PERIOD: u32 = 1;
const ATTR_STALL_REASON: u32 = 2;
const ATTR_SCRATCH_BUFFER_SIZE: u32 = 3;
const ATTR_HARDWARE_BUFFER_SIZE: u32 = 4;
const ATTR_COLLECTION_MODE: u32 = 5;
const ATTR_SAMPLING_DATA_BUFFER: u32 = 8;
const COLLECTION_MODE_CONTINUOUS: u64 = 1;

/// `CUpti_PCSamplingConfigurationInfoParams`.
#[repr(C)]
struct ConfigParams {
    size: usize,
    priv_: *mut c_void,
    ctx: *mut c_void,
    num_attributes: usize,
    info: *mut ConfigInfo,
}

/// `CUpti_PCSamplingGetDataParams`.
#[repr(C)]
struct GetDataParams {
    size: usize,
    priv_: *mut c_void,
    ctx: *mut c_void,
    data: *mut SamplingData,
}

/// `CUpti_PCSamplingEnableParams`, `..DisableParams` (same layout).
#[repr(C)]
struct CtxParams {
    size: usize,
    priv_: *mut c_void,
    ctx: *mut c_void,
}

/// `CUpti_PCSamplingGetNumStallReasonsParams`.
#[repr(C)]
struct NumStallParams {
    size: usize,
    priv_: *mut c_void,
    ctx: *mut c_void,
    num: *mut usize,
}

/// `CUpti_PCSamplingGetStallReasonsParams`.
#[repr(C)]
struct StallParams {
    size: usize,
    priv_: *mut c_void,
    ctx: *mut c_void,
    num: usize,
    index: *mut u32,
    names: *mut *mut c_char,
}

/// `CUPTI_STALL_REASON_STRING_SIZE`.
const STALL_NAME_BYTES: usize = 128;
/// PCs the read buffer holds; a read that finds more asks again.
const BUFFER_PCS: usize = 4096;
/// PCs the configuration buffer holds: what CUPTI still has when sampling is disabled goes
/// there, and what does not fit is lost.
const CONFIG_BUFFER_PCS: usize = 32768;
/// At exit and context destruction, reads go on, this far apart, until they have found
/// nothing for [`FINAL_QUIET`] (CUPTI's own threads decode the hardware buffer every 100 ms by
/// default), for [`FINAL_MAX`] at most.
const FINAL_READ_GAP: Duration = Duration::from_millis(25);
const FINAL_QUIET: Duration = Duration::from_millis(250);
const FINAL_MAX: Duration = Duration::from_secs(2);
/// Reads of one context in a row before the worker moves on.
const MAX_READS: usize = 64;
/// How long a callback waits for the worker to finish a read.
const CALLBACK_WAIT: Duration = Duration::from_millis(500);
/// `CUPTI_ERROR_OUT_OF_MEMORY`: the hardware buffer is full.
const ERROR_OUT_OF_MEMORY: i32 = 8;

type ParamsFn<P> = unsafe extern "C" fn(*mut P) -> i32;
type DeviceIdFn = unsafe extern "C" fn(*mut c_void, *mut u32) -> i32;

/// The PC Sampling entry points.
pub(super) struct PcApi {
    enable: ParamsFn<CtxParams>,
    disable: ParamsFn<CtxParams>,
    num_stall_reasons: ParamsFn<NumStallParams>,
    stall_reasons: ParamsFn<StallParams>,
    set_config: ParamsFn<ConfigParams>,
    get_config: ParamsFn<ConfigParams>,
    get_data: ParamsFn<GetDataParams>,
    device_id: Option<DeviceIdFn>,
}

impl PcApi {
    /// Looks the entry points up with `sym`; `Err` names the first one missing.
    pub(super) fn load(
        sym: impl Fn(&CStr) -> Result<*mut c_void, String>,
    ) -> Result<PcApi, String> {
        // SAFETY: each symbol is the CUPTI function of that name, whose C signature
        // (cupti_pcsampling.h, cupti.h) is the type it is transmuted to.
        unsafe {
            Ok(PcApi {
                enable: std::mem::transmute::<*mut c_void, ParamsFn<CtxParams>>(sym(
                    c"cuptiPCSamplingEnable",
                )?),
                disable: std::mem::transmute::<*mut c_void, ParamsFn<CtxParams>>(sym(
                    c"cuptiPCSamplingDisable",
                )?),
                num_stall_reasons: std::mem::transmute::<*mut c_void, ParamsFn<NumStallParams>>(
                    sym(c"cuptiPCSamplingGetNumStallReasons")?,
                ),
                stall_reasons: std::mem::transmute::<*mut c_void, ParamsFn<StallParams>>(sym(
                    c"cuptiPCSamplingGetStallReasons",
                )?),
                set_config: std::mem::transmute::<*mut c_void, ParamsFn<ConfigParams>>(sym(
                    c"cuptiPCSamplingSetConfigurationAttribute",
                )?),
                get_config: std::mem::transmute::<*mut c_void, ParamsFn<ConfigParams>>(sym(
                    c"cuptiPCSamplingGetConfigurationAttribute",
                )?),
                get_data: std::mem::transmute::<*mut c_void, ParamsFn<GetDataParams>>(sym(
                    c"cuptiPCSamplingGetData",
                )?),
                device_id: sym(c"cuptiGetDeviceId")
                    .ok()
                    .map(|p| std::mem::transmute::<*mut c_void, DeviceIdFn>(p)),
            })
        }
    }
}

/// A `CUpti_PCSamplingData` with room for [`BUFFER_PCS`] PCs of `stalls` reasons each; the
/// pointers inside point into the boxes, which never move.
struct Buffer {
    data: Box<SamplingData>,
    pcs: Box<[PcData]>,
    stalls: Box<[StallReason]>,
}

impl Buffer {
    fn new(capacity: usize, stalls: usize) -> Buffer {
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
    fn take(&mut self, context: u32, names: &mut NameCache) -> Option<PcSampleBatch> {
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
struct NameCache {
    by_ptr: HashMap<usize, String>,
}

impl NameCache {
    fn name(&mut self, p: *const c_char) -> String {
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
struct Sampled {
    ctx: usize,
    id: u32,
    /// Where CUPTI puts what it flushes by itself (module loads after an unload, disable).
    config_buf: Buffer,
    /// What `cuptiPCSamplingGetData` fills.
    read_buf: Buffer,
}

// SAFETY: the raw pointers inside point into boxes the struct owns (and a context handle used
// only as a value), touched only under STATE's lock.
unsafe impl Send for Sampled {}

#[derive(Default)]
struct State {
    contexts: Vec<Sampled>,
    names: NameCache,
    /// Chunks for the worker to write: configurations and batches read in callbacks.
    pending: Vec<(ChunkKind, Vec<u8>)>,
    /// Reads that returned the hardware-buffer-full error.
    buffer_full: u64,
    /// Reads made, PCs they returned, and the last error a read returned (said once).
    reads: u64,
    read_pcs: u64,
    read_error: Option<i32>,
    error_said: bool,
}

impl State {
    fn count(&mut self, r: ReadStats) {
        self.reads += r.reads;
        self.read_pcs += r.pcs;
        if r.error.is_some() {
            self.read_error = r.error;
        }
    }
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn lock() -> Option<MutexGuard<'static, Option<State>>> {
    STATE.lock().ok()
}

/// The lock, waited for at most [`CALLBACK_WAIT`] (a callback on the program's thread).
fn lock_for_callback() -> Option<MutexGuard<'static, Option<State>>> {
    let start = Instant::now();
    loop {
        match STATE.try_lock() {
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
        Some(Err(e)) => return notice(format!("PC sampling off: {e}")),
        None => return,
    };
    internal(|| match enable(api, pc, ctx) {
        Ok((sampled, config)) => {
            let mut msg = format!(
                "PC sampling on for context {}: every 2^{} cycles, {} stall reasons",
                config.context,
                config.period_log2,
                config.stall_reasons.len()
            );
            if let Some(mut g) = lock_for_callback() {
                let st = g.get_or_insert_with(State::default);
                st.pending.push((
                    ChunkKind::PcSamplingConfig,
                    rtrace_format::encode_value(&config),
                ));
                st.contexts.push(sampled);
            } else {
                disable(pc, ctx);
                msg = format!(
                    "PC sampling off for context {}: rtrace's worker held its state",
                    config.context
                );
            }
            notice(msg);
        }
        Err(e) => notice(format!("PC sampling off: {e}")),
    });
}

fn disable(pc: &PcApi, ctx: *mut c_void) -> i32 {
    let mut p = CtxParams {
        size: std::mem::size_of::<CtxParams>(),
        priv_: std::ptr::null_mut(),
        ctx,
    };
    // SAFETY: CUPTI reads the parameters.
    unsafe { (pc.disable)(&mut p) }
}

/// Enables sampling on `ctx` and sets it up as configured.
fn enable(api: &Api, pc: &PcApi, ctx: *mut c_void) -> Result<(Sampled, PcSamplingConfig), String> {
    let mut id = 0u32;
    // SAFETY: plain CUPTI query with a valid out-pointer.
    if unsafe { (api.context_id)(ctx, &mut id) } != 0 {
        id = 0;
    }
    let mut device = 0u32;
    if let Some(f) = pc.device_id {
        // SAFETY: as above.
        if unsafe { f(ctx, &mut device) } != 0 {
            device = 0;
        }
    }
    let mut p = CtxParams {
        size: std::mem::size_of::<CtxParams>(),
        priv_: std::ptr::null_mut(),
        ctx,
    };
    // SAFETY: CUPTI reads the parameters.
    let rc = unsafe { (pc.enable)(&mut p) };
    if rc != 0 {
        return Err(format!(
            "cuptiPCSamplingEnable on context {id}: {}{}",
            describe(api, rc),
            if rc == 7 || rc == 39 {
                " (another tool sampling it?)"
            } else {
                ""
            }
        ));
    }
    let fail = |what: &str, rc: i32| {
        disable(pc, ctx);
        Err(format!("{what} on context {id}: {}", describe(api, rc)))
    };
    let mut count = 0usize;
    let mut np = NumStallParams {
        size: std::mem::size_of::<NumStallParams>(),
        priv_: std::ptr::null_mut(),
        ctx,
        num: &mut count,
    };
    // SAFETY: CUPTI writes the count.
    let rc = unsafe { (pc.num_stall_reasons)(&mut np) };
    if rc != 0 {
        return fail("cuptiPCSamplingGetNumStallReasons", rc);
    }
    let count = count.min(1024);
    let mut indices = vec![0u32; count];
    let mut storage = vec![0 as c_char; count * STALL_NAME_BYTES];
    let mut names: Vec<*mut c_char> = (0..count)
        // SAFETY: within `storage`.
        .map(|i| unsafe { storage.as_mut_ptr().add(i * STALL_NAME_BYTES) })
        .collect();
    let mut sp = StallParams {
        size: std::mem::size_of::<StallParams>(),
        priv_: std::ptr::null_mut(),
        ctx,
        num: count,
        index: indices.as_mut_ptr(),
        names: names.as_mut_ptr(),
    };
    // SAFETY: CUPTI writes `count` indices and names of at most STALL_NAME_BYTES each.
    let rc = unsafe { (pc.stall_reasons)(&mut sp) };
    if rc != 0 {
        return fail("cuptiPCSamplingGetStallReasons", rc);
    }
    let all: Vec<(u32, String)> = (0..count)
        .map(|i| {
            let bytes = &storage[i * STALL_NAME_BYTES..(i + 1) * STALL_NAME_BYTES];
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            let name: Vec<u8> = bytes[..end].iter().map(|&b| b as u8).collect();
            (indices[i], String::from_utf8_lossy(&name).into_owned())
        })
        .collect();
    let cfg = &crate::state::config().pc_sampling;
    let (chosen, unknown) = choose_stalls(&all, &cfg.stalls);
    if !unknown.is_empty() {
        notice(format!(
            "PC sampling: no stall reason named {} on context {id}; known: {}",
            unknown.join(", "),
            all.iter()
                .map(|(_, n)| short_name(n))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if chosen.is_empty() {
        disable(pc, ctx);
        return Err(format!("no stall reason to sample on context {id}"));
    }
    let mut chosen_indices: Vec<u32> = chosen.iter().map(|(i, _)| *i).collect();
    let mut sampled = Sampled {
        ctx: ctx as usize,
        id,
        config_buf: Buffer::new(CONFIG_BUFFER_PCS, chosen.len()),
        read_buf: Buffer::new(BUFFER_PCS, chosen.len()),
    };
    let mut info = vec![
        ConfigInfo {
            kind: ATTR_STALL_REASON,
            status: 0,
            data: [
                chosen_indices.len() as u64,
                chosen_indices.as_mut_ptr() as u64,
                0,
            ],
        },
        ConfigInfo {
            kind: ATTR_SAMPLING_DATA_BUFFER,
            status: 0,
            data: [
                &mut *sampled.config_buf.data as *mut SamplingData as u64,
                0,
                0,
            ],
        },
        ConfigInfo {
            kind: ATTR_COLLECTION_MODE,
            status: 0,
            data: [COLLECTION_MODE_CONTINUOUS, 0, 0],
        },
    ];
    if let Some(period) = cfg.period_log2 {
        info.push(ConfigInfo {
            kind: ATTR_SAMPLING_PERIOD,
            status: 0,
            data: [u64::from(period), 0, 0],
        });
    }
    let mut cp = ConfigParams {
        size: std::mem::size_of::<ConfigParams>(),
        priv_: std::ptr::null_mut(),
        ctx,
        num_attributes: info.len(),
        info: info.as_mut_ptr(),
    };
    // SAFETY: CUPTI reads the attributes; the stall index array and the configuration buffer
    // outlive the call (the buffer lives in `sampled`, kept until sampling is disabled).
    let rc = unsafe { (pc.set_config)(&mut cp) };
    if rc != 0 {
        return fail("cuptiPCSamplingSetConfigurationAttribute", rc);
    }
    // What CUPTI chose for what was left at its defaults.
    let mut q = [
        ATTR_SAMPLING_PERIOD,
        ATTR_SCRATCH_BUFFER_SIZE,
        ATTR_HARDWARE_BUFFER_SIZE,
    ]
    .map(|kind| ConfigInfo {
        kind,
        status: 0,
        data: [0; 3],
    });
    let mut cp = ConfigParams {
        size: std::mem::size_of::<ConfigParams>(),
        priv_: std::ptr::null_mut(),
        ctx,
        num_attributes: q.len(),
        info: q.as_mut_ptr(),
    };
    // SAFETY: CUPTI writes the attributes' values.
    let got = unsafe { (pc.get_config)(&mut cp) } == 0;
    let config = PcSamplingConfig {
        context: id,
        device,
        time_ns: clock::now_ns(),
        // The period is a uint32_t, the sizes size_t, each first in the union.
        period_log2: if got {
            q[0].data[0] as u32
        } else {
            cfg.period_log2.unwrap_or(0)
        },
        scratch_bytes: if got { q[1].data[0] } else { 0 },
        hardware_bytes: if got { q[2].data[0] } else { 0 },
        stall_reasons: chosen,
    };
    Ok((sampled, config))
}

/// CUPTI's stall reason names without the common prefix: `long_scoreboard`, `selected`, ...
pub fn short_name(name: &str) -> &str {
    name.strip_prefix("smsp__pcsamp_warps_issue_stalled_")
        .unwrap_or(name)
}

/// The stall reasons `wanted` names (short names; a reason brings its `_not_issued` twin), or
/// all of them when `wanted` is empty; and the names that matched none.
fn choose_stalls(all: &[(u32, String)], wanted: &[String]) -> (Vec<(u32, String)>, Vec<String>) {
    if wanted.is_empty() {
        return (all.to_vec(), Vec::new());
    }
    let unknown = wanted
        .iter()
        .filter(|w| !all.iter().any(|(_, n)| short_name(n) == w.as_str()))
        .cloned()
        .collect();
    let chosen = all
        .iter()
        .filter(|(_, n)| {
            let s = short_name(n);
            let base = s.strip_suffix("_not_issued").unwrap_or(s);
            wanted.iter().any(|w| w == s || w == base)
        })
        .cloned()
        .collect();
    (chosen, unknown)
}

/// Counts of reads: (reads, PCs returned, last error).
#[derive(Default)]
struct ReadStats {
    reads: u64,
    pcs: u64,
    error: Option<i32>,
}

/// Reads `s`'s samples until CUPTI has none left (at most [`MAX_READS`] reads).
fn read(
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
fn take_config(s: &mut Sampled, names: &mut NameCache, out: &mut Vec<PcSampleBatch>) {
    if let Some(b) = s.config_buf.take(s.id, names) {
        out.push(b);
    }
}

fn queue(st: &mut State, batches: Vec<PcSampleBatch>) {
    for b in batches {
        st.pending
            .push((ChunkKind::PcSamples, rtrace_format::encode_value(&b)));
    }
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
        return notice(
            "PC sampling: samples of a destroyed context lost: rtrace's worker held its state"
                .into(),
        );
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
        notice(format!(
            "PC sampling: context {}'s last samples filled the {} PCs of the final buffer: PCs past them were lost",
            s.id,
            s.config_buf.pcs.len()
        ));
    }
    stats
}

fn with_context(
    ctx: *mut c_void,
    when: &str,
    f: impl FnOnce(&mut State, &mut Sampled, &mut NameCache, &mut Vec<PcSampleBatch>, &mut u64),
) {
    let Some(mut g) = lock_for_callback() else {
        return notice(format!(
            "PC sampling: samples not read at {when}: rtrace's worker held its state"
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
