//! CUPTI's PC Sampling API (`cupti_pcsampling.h`, CUDA 13.0), simulated deterministically: every
//! kernel launched on a context where sampling runs adds a fixed set of samples at four PCs of
//! its function (README.md, "PC sampling"). The exported functions are at the end; the state
//! (`PcSampling`) lives in simcupti's `State`, behind its lock.

#![allow(clippy::missing_safety_doc, non_snake_case)]

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::mem::{offset_of, size_of};
use std::os::raw::{c_char, c_void};
use std::sync::OnceLock;

use crate::api::call;
use crate::layout::*;
use crate::sim::*;
use crate::state;

// ---- the C structs (cupti_pcsampling.h; `PACKED_ALIGNMENT` is packed + aligned(8), which
// here gives the natural layout: every field is at its natural alignment)

/// `CUpti_PCSamplingStallReason`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StallReason {
    pub pcSamplingStallReasonIndex: u32,
    pub samples: u32,
}

/// `CUpti_PCSamplingPCData`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PcData {
    pub size: usize,
    pub cubinCrc: u64,
    pub pcOffset: u64,
    pub functionIndex: u32,
    pub pad: u32,
    pub functionName: *mut c_char,
    pub stallReasonCount: usize,
    pub stallReason: *mut StallReason,
    pub correlationId: u32,
}

/// `CUpti_PCSamplingData`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SamplingData {
    pub size: usize,
    pub collectNumPcs: usize,
    pub totalSamples: u64,
    pub droppedSamples: u64,
    pub totalNumPcs: usize,
    pub remainingNumPcs: usize,
    pub rangeId: u64,
    pub pPcData: *mut PcData,
    pub nonUsrKernelsTotalSamples: u64,
    pub hardwareBufferFull: u8,
}

/// `CUpti_PCSamplingConfigurationInfo`: the 24-byte union as three words.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ConfigInfo {
    pub attributeType: u32,
    pub attributeStatus: u32,
    pub attributeData: [u64; 3],
}

/// `CUpti_PCSamplingConfigurationInfoParams`.
#[repr(C)]
pub struct ConfigInfoParams {
    pub size: usize,
    pub pPriv: *mut c_void,
    pub ctx: *mut c_void,
    pub numAttributes: usize,
    pub pPCSamplingConfigurationInfo: *mut ConfigInfo,
}

/// `CUpti_PCSamplingGetDataParams`.
#[repr(C)]
pub struct GetDataParams {
    pub size: usize,
    pub pPriv: *mut c_void,
    pub ctx: *mut c_void,
    pub pcSamplingData: *mut c_void,
}

/// `CUpti_PCSamplingEnableParams`, `...DisableParams`, `...StartParams`, `...StopParams`.
#[repr(C)]
pub struct CtxParams {
    pub size: usize,
    pub pPriv: *mut c_void,
    pub ctx: *mut c_void,
}

/// `CUpti_PCSamplingGetNumStallReasonsParams`.
#[repr(C)]
pub struct GetNumStallReasonsParams {
    pub size: usize,
    pub pPriv: *mut c_void,
    pub ctx: *mut c_void,
    pub numStallReasons: *mut usize,
}

/// `CUpti_PCSamplingGetStallReasonsParams`.
#[repr(C)]
pub struct GetStallReasonsParams {
    pub size: usize,
    pub pPriv: *mut c_void,
    pub ctx: *mut c_void,
    pub numStallReasons: usize,
    pub stallReasonIndex: *mut u32,
    pub stallReasons: *mut *mut c_char,
}

// Sizes and offsets as gcc lays out the CUDA 13.0 header (checked with a C program).
const _: () = {
    assert!(size_of::<StallReason>() == 8);
    assert!(offset_of!(StallReason, samples) == 4);
    assert!(size_of::<PcData>() == 64);
    assert!(offset_of!(PcData, cubinCrc) == 8);
    assert!(offset_of!(PcData, pcOffset) == 16);
    assert!(offset_of!(PcData, functionIndex) == 24);
    assert!(offset_of!(PcData, pad) == 28);
    assert!(offset_of!(PcData, functionName) == 32);
    assert!(offset_of!(PcData, stallReasonCount) == 40);
    assert!(offset_of!(PcData, stallReason) == 48);
    assert!(offset_of!(PcData, correlationId) == 56);
    assert!(size_of::<SamplingData>() == 80);
    assert!(offset_of!(SamplingData, collectNumPcs) == 8);
    assert!(offset_of!(SamplingData, totalSamples) == 16);
    assert!(offset_of!(SamplingData, droppedSamples) == 24);
    assert!(offset_of!(SamplingData, totalNumPcs) == 32);
    assert!(offset_of!(SamplingData, remainingNumPcs) == 40);
    assert!(offset_of!(SamplingData, rangeId) == 48);
    assert!(offset_of!(SamplingData, pPcData) == 56);
    assert!(offset_of!(SamplingData, nonUsrKernelsTotalSamples) == 64);
    assert!(offset_of!(SamplingData, hardwareBufferFull) == 72);
    assert!(size_of::<ConfigInfo>() == 32);
    assert!(offset_of!(ConfigInfo, attributeStatus) == 4);
    assert!(offset_of!(ConfigInfo, attributeData) == 8);
    assert!(size_of::<ConfigInfoParams>() == CONFIG_INFO_PARAMS_SIZE);
    assert!(offset_of!(ConfigInfoParams, pPCSamplingConfigurationInfo) == 32);
    assert!(size_of::<GetDataParams>() == GET_DATA_PARAMS_SIZE);
    assert!(size_of::<CtxParams>() == CTX_PARAMS_SIZE);
    assert!(size_of::<GetNumStallReasonsParams>() == GET_NUM_STALL_REASONS_PARAMS_SIZE);
    assert!(size_of::<GetStallReasonsParams>() == GET_STALL_REASONS_PARAMS_SIZE);
    assert!(offset_of!(GetStallReasonsParams, numStallReasons) == 24);
    assert!(offset_of!(GetStallReasonsParams, stallReasonIndex) == 32);
    assert!(offset_of!(GetStallReasonsParams, stallReasons) == 40);
};

/// The header's `...ParamsSize` macros (`CUPTI_PCSAMPLING_STRUCT_SIZE`: to the end of the last
/// field).
pub const CONFIG_INFO_PARAMS_SIZE: usize = 40;
pub const GET_DATA_PARAMS_SIZE: usize = 32;
pub const CTX_PARAMS_SIZE: usize = 24;
pub const GET_NUM_STALL_REASONS_PARAMS_SIZE: usize = 32;
pub const GET_STALL_REASONS_PARAMS_SIZE: usize = 48;
/// The smallest `CUpti_PCSamplingData::size` accepted: up to `nonUsrKernelsTotalSamples` (the
/// struct before `hardwareBufferFull` was added); that byte is written only if `size` covers it.
pub const SAMPLING_DATA_MIN_SIZE: usize = 72;

/// `CUPTI_STALL_REASON_STRING_SIZE`.
pub const STALL_REASON_STRING_SIZE: usize = 128;

/// The stall reasons served, in this order (a subset of what CUPTI 13.0 listed on an H200).
pub const STALL_REASONS: [(u32, &CStr); 9] = [
    (0, c"smsp__pcsamp_sample_count"),
    (14, c"smsp__pcsamp_warps_issue_stalled_long_scoreboard"),
    (
        15,
        c"smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued",
    ),
    (20, c"smsp__pcsamp_warps_issue_stalled_mio_throttle"),
    (
        21,
        c"smsp__pcsamp_warps_issue_stalled_mio_throttle_not_issued",
    ),
    (28, c"smsp__pcsamp_warps_issue_stalled_selected"),
    (30, c"smsp__pcsamp_warps_issue_stalled_short_scoreboard"),
    (36, c"smsp__pcsamp_warps_issue_stalled_wait"),
    (1, c"smsp__pcsamp_samples_data_dropped"),
];

/// `CUpti_PCSamplingConfigurationAttributeType`.
pub const ATTR_SAMPLING_PERIOD: u32 = 1;
pub const ATTR_STALL_REASON: u32 = 2;
pub const ATTR_SCRATCH_BUFFER_SIZE: u32 = 3;
pub const ATTR_HARDWARE_BUFFER_SIZE: u32 = 4;
pub const ATTR_COLLECTION_MODE: u32 = 5;
pub const ATTR_ENABLE_START_STOP_CONTROL: u32 = 6;
pub const ATTR_OUTPUT_DATA_FORMAT: u32 = 7;
pub const ATTR_SAMPLING_DATA_BUFFER: u32 = 8;
pub const ATTR_WORKER_THREAD_PERIODIC_SLEEP_SPAN: u32 = 9;

/// The samples a launch adds at `pcOffset = 32*k`, k = 0..4: `(stall reason index, samples)`.
pub fn launch_samples(k: u32) -> [(u32, u32); 4] {
    [
        (14, (k + 1) * 10),
        (15, (k + 1) * 5),
        (30, (4 - k) * 3),
        (28, 1),
    ]
}

/// PCs sampled per launch.
pub const PCS_PER_LAUNCH: u32 = 4;

/// Stall reason indices that are not samples of their own: the pseudo-reasons
/// (`sample_count`, `samples_data_dropped`) and the `_not_issued` sub-counts.
fn is_sample(index: u32) -> bool {
    STALL_REASONS
        .iter()
        .find(|(i, _)| *i == index)
        .is_some_and(|(i, n)| *i > 1 && !n.to_bytes().ends_with(b"_not_issued"))
}

/// All samples of one launch (README: every reason, selected or not, but `_not_issued`
/// sub-counts and the pseudo-reasons): 134.
pub fn launch_total() -> u64 {
    (0..PCS_PER_LAUNCH)
        .flat_map(launch_samples)
        .filter(|(i, _)| is_sample(*i))
        .map(|(_, n)| u64::from(n))
        .sum()
}

/// The CRC-32 (IEEE) of `bytes`: `cuptiGetCubinCrc`'s, and the `cubinCrc` of PC records.
pub fn crc32(bytes: &[u8]) -> u64 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    u64::from(!crc)
}

/// `SIMCUPTI_PC_SAMPLING=unsupported`: `cuptiPCSamplingEnable` returns `NOT_SUPPORTED`.
fn unsupported() -> bool {
    static V: OnceLock<bool> = OnceLock::new();
    *V.get_or_init(|| std::env::var_os("SIMCUPTI_PC_SAMPLING").is_some_and(|v| v == "unsupported"))
}

/// A `CUcontext` handle's id (simcuda's: `0x5100_0000_0000 + (1 << 40) + 16·id`).
pub fn context_id_of(ctx: *mut c_void) -> Option<u32> {
    const BASE: usize = 0x5100_0000_0000 + (1 << 40);
    let off = (ctx as usize).checked_sub(BASE)?;
    (off % 16 == 0 && off / 16 > 0 && off / 16 <= u32::MAX as usize).then_some((off / 16) as u32)
}

// ---- the state

/// The CRC and index of kernel `name` in the latest of `modules` on context `ctx` that has it.
fn find_function(modules: &[Module], ctx: u32, name: &CStr) -> Option<(u64, u32)> {
    modules
        .iter()
        .rev()
        .filter(|m| m.context_id == ctx)
        .find_map(|m| {
            let f = m.functions.iter().find(|(n, _)| n == name.to_bytes())?;
            Some((m.crc, f.1))
        })
}

/// A loaded module: its context, CRC and functions `(name, index)`.
struct Module {
    context_id: u32,
    module_id: u32,
    crc: u64,
    functions: Vec<(Vec<u8>, u32)>,
}

/// One pending PC: samples per stall reason, by place in `STALL_REASONS`.
#[derive(Clone, Debug)]
struct Pc {
    crc: u64,
    offset: u64,
    function_index: u32,
    name: CString,
    samples: [u32; STALL_REASONS.len()],
}

#[derive(Clone, Debug)]
pub struct Config {
    /// `None`: not set (reads as 11, the default CUPTI 13.0 gave on an H200).
    pub period: Option<u32>,
    /// Selected stall reason indices (default: all of `STALL_REASONS`, in table order).
    pub reasons: Vec<u32>,
    pub scratch: u64,
    pub hardware: u64,
    pub mode: u32,
    pub start_stop: u32,
    pub format: u32,
    /// The client's `CUpti_PCSamplingData*` (0: none).
    pub buffer: usize,
    pub sleep: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            period: None,
            reasons: STALL_REASONS.iter().map(|(i, _)| *i).collect(),
            scratch: 1_048_576,
            hardware: 536_870_912,
            mode: 1,
            start_stop: 0,
            format: 1,
            buffer: 0,
            sleep: 100,
        }
    }
}

/// PC sampling on one context.
#[derive(Default)]
struct Ctx {
    config: Config,
    /// `cuptiPCSamplingSetConfigurationAttribute` succeeded since the enable.
    configured: bool,
    /// Between `cuptiPCSamplingStart` and `cuptiPCSamplingStop`.
    started: bool,
    pending: Vec<Pc>,
    total: u64,
    dropped: u64,
    non_user: u64,
}

impl Ctx {
    fn sampling(&self) -> bool {
        self.configured && (self.config.start_stop == 0 || self.started)
    }
}

/// The PC sampling state: modules loaded (since simcupti subscribed to simcuda) and the
/// contexts with sampling enabled, by context id.
pub struct PcSampling {
    modules: Vec<Module>,
    contexts: BTreeMap<u32, Ctx>,
}

impl PcSampling {
    pub const fn new() -> PcSampling {
        PcSampling {
            modules: Vec::new(),
            contexts: BTreeMap::new(),
        }
    }

    pub fn enabled(&self, ctx: u32) -> bool {
        self.contexts.contains_key(&ctx)
    }

    pub fn enable(&mut self, ctx: u32) -> u32 {
        if self.enabled(ctx) {
            return CUPTI_ERROR_INVALID_OPERATION;
        }
        self.contexts.insert(ctx, Ctx::default());
        CUPTI_SUCCESS
    }

    /// Disables sampling on `ctx`, copying its pending PCs into the configured buffer (those
    /// that do not fit, or all without a buffer, are discarded).
    ///
    /// # Safety
    /// The configured buffer, if any, must still be the client's valid `CUpti_PCSamplingData`.
    pub unsafe fn disable(&mut self, ctx: u32) -> u32 {
        let Some(mut c) = self.contexts.remove(&ctx) else {
            return CUPTI_ERROR_INVALID_OPERATION;
        };
        let buffer = c.config.buffer as *mut SamplingData;
        if !buffer.is_null() {
            // SAFETY: the caller's contract; its size was checked when it was configured.
            unsafe { fill(&mut c, buffer, false) };
        }
        CUPTI_SUCCESS
    }

    pub fn config(&self, ctx: u32) -> Option<&Config> {
        self.contexts.get(&ctx).map(|c| &c.config)
    }

    /// Applies a validated configuration.
    fn configure(&mut self, ctx: u32, config: Config) -> u32 {
        match self.contexts.get_mut(&ctx) {
            Some(c) => {
                c.config = config;
                c.configured = true;
                CUPTI_SUCCESS
            }
            None => CUPTI_ERROR_INVALID_OPERATION,
        }
    }

    /// `cuptiPCSamplingStart` (`on`) and `Stop`.
    pub fn start_stop(&mut self, ctx: u32, on: bool) -> u32 {
        match self.contexts.get_mut(&ctx) {
            Some(c) if c.config.start_stop != 0 => {
                c.started = on;
                CUPTI_SUCCESS
            }
            _ => CUPTI_ERROR_INVALID_OPERATION,
        }
    }

    /// Pending PCs of `ctx` (for tests).
    #[cfg(test)]
    pub fn pending(&self, ctx: u32) -> usize {
        self.contexts.get(&ctx).map_or(0, |c| c.pending.len())
    }

    /// What a reported operation means here: modules loaded or unloaded, kernels launched.
    pub fn observe(&mut self, op: &SimOp) {
        match op.kind {
            SIMOP_MODULE => {
                let image = if op.image.is_null() {
                    &[][..]
                } else {
                    // SAFETY: simcuda's image of `image_size` bytes, valid during the call.
                    unsafe { std::slice::from_raw_parts(op.image.cast(), op.image_size as usize) }
                };
                let functions = if op.functions.is_null() {
                    &[][..]
                } else {
                    // SAFETY: simcuda's array of `function_count` functions.
                    unsafe { std::slice::from_raw_parts(op.functions, op.function_count as usize) }
                };
                let functions = functions
                    .iter()
                    // SAFETY: a function's name is NUL-terminated.
                    .map(|f| {
                        (
                            unsafe { CStr::from_ptr(f.name) }.to_bytes().to_vec(),
                            f.index,
                        )
                    })
                    .collect();
                self.modules.push(Module {
                    context_id: op.context_id,
                    module_id: op.module_id,
                    crc: crc32(image),
                    functions,
                });
            }
            SIMOP_MODULE_UNLOAD => {
                let (ctx, id) = (op.context_id, op.module_id);
                self.modules
                    .retain(|m| !(m.context_id == ctx && m.module_id == id));
            }
            SIMOP_KERNEL if !op.name.is_null() => {
                // SAFETY: a kernel op's name is NUL-terminated.
                let name = unsafe { CStr::from_ptr(op.name) };
                self.launch(op.context_id, name);
            }
            _ => {}
        }
    }

    /// The module CRC and function index of kernel `name` on context `ctx` (the latest module
    /// that has it).
    pub fn function_of(&self, ctx: u32, name: &CStr) -> Option<(u64, u32)> {
        find_function(&self.modules, ctx, name)
    }

    /// A kernel `name` launched on context `ctx`.
    pub fn launch(&mut self, ctx: u32, name: &CStr) {
        let Some(c) = self.contexts.get_mut(&ctx).filter(|c| c.sampling()) else {
            return;
        };
        let total = launch_total();
        c.total += total;
        let found = find_function(&self.modules, ctx, name);
        let Some((crc, function_index)) = found else {
            c.non_user += total;
            return;
        };
        for k in 0..PCS_PER_LAUNCH {
            let mut samples = [0u32; STALL_REASONS.len()];
            for (reason, n) in launch_samples(k) {
                if c.config.reasons.contains(&reason) {
                    if let Some(at) = STALL_REASONS.iter().position(|(i, _)| *i == reason) {
                        samples[at] = n;
                    }
                }
            }
            if samples.iter().all(|&n| n == 0) {
                continue;
            }
            let offset = u64::from(32 * k);
            let pc = c.pending.iter_mut().find(|p| {
                p.crc == crc && p.offset == offset && p.name.as_bytes() == name.to_bytes()
            });
            match pc {
                Some(p) => {
                    for (a, b) in p.samples.iter_mut().zip(samples) {
                        *a = a.saturating_add(b);
                    }
                }
                None => c.pending.push(Pc {
                    crc,
                    offset,
                    function_index,
                    name: name.to_owned(),
                    samples,
                }),
            }
        }
    }

    /// A context is being destroyed: sampling on it is disabled (as `disable`), its modules
    /// forgotten.
    ///
    /// # Safety
    /// As `disable`.
    pub unsafe fn context_destroyed(&mut self, ctx: u32) {
        // SAFETY: the caller's contract.
        let _ = unsafe { self.disable(ctx) };
        self.modules.retain(|m| m.context_id != ctx);
    }

    /// `cuptiPCSamplingGetData` into the client's `data`.
    ///
    /// # Safety
    /// `data` must be a valid `CUpti_PCSamplingData` (of its `size`), and its `pPcData` hold
    /// `collectNumPcs` records whose `stallReason` arrays hold the configured reason count.
    pub unsafe fn get_data(&mut self, ctx: u32, data: *mut SamplingData) -> u32 {
        let Some(c) = self.contexts.get_mut(&ctx) else {
            return CUPTI_ERROR_INVALID_OPERATION;
        };
        // SAFETY: the caller's contract.
        unsafe { fill(c, data, true) }
    }
}

/// Copies up to `collectNumPcs` pending PCs of `c` into `data` and its totals since the last
/// copy; with `check`, refuses (INVALID_PARAMETER) a buffer that cannot take them.
///
/// # Safety
/// As `PcSampling::get_data`.
unsafe fn fill(c: &mut Ctx, data: *mut SamplingData, check: bool) -> u32 {
    if data.is_null() {
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    // SAFETY: the caller's buffer; `size` is its first field.
    let size = unsafe { data.cast::<usize>().read() };
    if size < SAMPLING_DATA_MIN_SIZE {
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    // SAFETY: at least SAMPLING_DATA_MIN_SIZE bytes, checked above.
    let (want, records) = unsafe { ((*data).collectNumPcs, (*data).pPcData) };
    let n = want.min(c.pending.len());
    if check && n > 0 {
        if records.is_null() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: the client's `collectNumPcs` records.
        if (0..n).any(|i| unsafe { (*records.add(i)).stallReason.is_null() }) {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
    }
    let copied: Vec<Pc> = if records.is_null() {
        Vec::new()
    } else {
        c.pending.drain(..n).collect()
    };
    for (i, pc) in copied.iter().enumerate() {
        // SAFETY: the client's record `i < collectNumPcs`.
        let r = unsafe { &mut *records.add(i) };
        r.cubinCrc = pc.crc;
        r.pcOffset = pc.offset;
        r.functionIndex = pc.function_index;
        r.functionName = malloc_copy(&pc.name);
        r.correlationId = 0;
        let reasons = STALL_REASONS
            .iter()
            .zip(pc.samples)
            .filter(|(_, n)| *n > 0)
            .map(|((i, _), n)| StallReason {
                pcSamplingStallReasonIndex: *i,
                samples: n,
            });
        let mut count = 0;
        for (j, s) in reasons.enumerate() {
            if !r.stallReason.is_null() {
                // SAFETY: the client sized `stallReason` for the configured reason count,
                // and a PC has at most that many non-zero reasons.
                unsafe { r.stallReason.add(j).write(s) };
            }
            count += 1;
        }
        r.stallReasonCount = count;
    }
    // SAFETY: as above.
    let d = unsafe { &mut *data };
    d.totalNumPcs = copied.len();
    d.remainingNumPcs = c.pending.len();
    d.totalSamples = std::mem::take(&mut c.total);
    d.droppedSamples = std::mem::take(&mut c.dropped);
    d.nonUsrKernelsTotalSamples = std::mem::take(&mut c.non_user);
    d.rangeId = 0;
    if size > offset_of!(SamplingData, hardwareBufferFull) {
        d.hardwareBufferFull = 0;
    }
    CUPTI_SUCCESS
}

/// A `malloc`ed NUL-terminated copy (the client may `free` it, as CUPTI's header says).
fn malloc_copy(s: &CStr) -> *mut c_char {
    let bytes = s.to_bytes_with_nul();
    // SAFETY: malloc of a non-zero size; copies into the fresh block.
    unsafe {
        let p = libc::malloc(bytes.len()).cast::<c_char>();
        if !p.is_null() {
            std::ptr::copy_nonoverlapping(bytes.as_ptr().cast(), p, bytes.len());
        }
        p
    }
}

/// Validates one configuration entry against `config`, applying it there: its status.
///
/// # Safety
/// A stall-reason entry's pointer must hold its count of indices; a buffer entry's pointer
/// must be NULL or a `CUpti_PCSamplingData` of at least its `size`.
unsafe fn set_one(config: &mut Config, info: &ConfigInfo) -> u32 {
    let [w0, w1, _] = info.attributeData;
    let u32_value = w0 as u32;
    match info.attributeType {
        ATTR_SAMPLING_PERIOD if (5..=31).contains(&u32_value) => config.period = Some(u32_value),
        ATTR_STALL_REASON => {
            let (count, p) = (w0 as usize, w1 as *const u32);
            if count == 0 || count > STALL_REASONS.len() || p.is_null() {
                return CUPTI_ERROR_INVALID_PARAMETER;
            }
            // SAFETY: the caller's contract.
            let indices = unsafe { std::slice::from_raw_parts(p, count) };
            if indices
                .iter()
                .any(|i| !STALL_REASONS.iter().any(|(s, _)| s == i))
            {
                return CUPTI_ERROR_INVALID_PARAMETER;
            }
            config.reasons = indices.to_vec();
        }
        ATTR_SCRATCH_BUFFER_SIZE if w0 > 0 => config.scratch = w0,
        ATTR_HARDWARE_BUFFER_SIZE if w0 > 0 => config.hardware = w0,
        ATTR_COLLECTION_MODE if (1..=2).contains(&u32_value) => config.mode = u32_value,
        ATTR_ENABLE_START_STOP_CONTROL if u32_value <= 1 => config.start_stop = u32_value,
        ATTR_OUTPUT_DATA_FORMAT if u32_value == 1 => config.format = u32_value,
        ATTR_SAMPLING_DATA_BUFFER => {
            let p = w0 as *const usize;
            // SAFETY: the caller's contract; `size` is the first field.
            if p.is_null() || unsafe { p.read() } < SAMPLING_DATA_MIN_SIZE {
                return CUPTI_ERROR_INVALID_PARAMETER;
            }
            config.buffer = w0 as usize;
        }
        ATTR_WORKER_THREAD_PERIODIC_SLEEP_SPAN => config.sleep = u32_value,
        _ => return CUPTI_ERROR_INVALID_PARAMETER,
    }
    CUPTI_SUCCESS
}

/// Reads one configuration entry into `info`: its status.
///
/// # Safety
/// A stall-reason entry's pointer must be NULL or hold its count of indices.
unsafe fn get_one(config: &Config, info: &mut ConfigInfo) -> u32 {
    let word = |v: u64| [v, 0, 0];
    info.attributeData = match info.attributeType {
        ATTR_SAMPLING_PERIOD => word(u64::from(config.period.unwrap_or(11))),
        ATTR_STALL_REASON => {
            let (room, p) = (
                info.attributeData[0] as usize,
                info.attributeData[1] as *mut u32,
            );
            let n = config.reasons.len();
            if !p.is_null() {
                if room < n {
                    return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
                }
                // SAFETY: the caller's contract: `room >= n` indices.
                unsafe { std::ptr::copy_nonoverlapping(config.reasons.as_ptr(), p, n) };
            }
            [n as u64, p as u64, 0]
        }
        ATTR_SCRATCH_BUFFER_SIZE => word(config.scratch),
        ATTR_HARDWARE_BUFFER_SIZE => word(config.hardware),
        ATTR_COLLECTION_MODE => word(u64::from(config.mode)),
        ATTR_ENABLE_START_STOP_CONTROL => word(u64::from(config.start_stop)),
        ATTR_OUTPUT_DATA_FORMAT => word(u64::from(config.format)),
        ATTR_SAMPLING_DATA_BUFFER => word(config.buffer as u64),
        ATTR_WORKER_THREAD_PERIODIC_SLEEP_SPAN => word(u64::from(config.sleep)),
        _ => return CUPTI_ERROR_INVALID_PARAMETER,
    };
    CUPTI_SUCCESS
}

// ---- the exported functions

/// Reads a params struct's `size` (its first field): `None` if `p` is NULL or `size` is below
/// `min`.
///
/// # Safety
/// `p` must be NULL or point to a struct starting with a `size_t`.
unsafe fn params<'a, T>(p: *mut T, min: usize) -> Option<&'a mut T> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    if unsafe { p.cast::<usize>().read() } < min {
        return None;
    }
    // SAFETY: the client's struct of at least the documented size (all of `T`).
    Some(unsafe { &mut *p })
}

/// The enabled context id a params struct names, or the error to return.
fn enabled_id(ctx: *mut c_void) -> Result<u32, u32> {
    let id = context_id_of(ctx).ok_or(CUPTI_ERROR_INVALID_OPERATION)?;
    if state::with(|st| st.pcs.enabled(id)) {
        Ok(id)
    } else {
        Err(CUPTI_ERROR_INVALID_OPERATION)
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuptiPCSamplingEnable(pParams: *mut CtxParams) -> u32 {
    call(|| {
        // SAFETY: the client's params.
        let Some(p) = (unsafe { params(pParams, CTX_PARAMS_SIZE) }) else {
            return CUPTI_ERROR_INVALID_PARAMETER;
        };
        if unsupported() {
            return CUPTI_ERROR_NOT_SUPPORTED;
        }
        let Some(sim) = state::sim() else {
            return CUPTI_ERROR_NOT_INITIALIZED;
        };
        let mut id = 0u32;
        // SAFETY: a valid out-pointer.
        let rc = unsafe { sim.context_id(p.ctx, &mut id) };
        if rc != CUPTI_SUCCESS {
            return CUPTI_ERROR_INVALID_CONTEXT;
        }
        state::with(|st| match st.attach() {
            Ok(()) => st.pcs.enable(id),
            Err(e) => e,
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiPCSamplingDisable(pParams: *mut CtxParams) -> u32 {
    call(|| {
        // SAFETY: the client's params.
        let Some(p) = (unsafe { params(pParams, CTX_PARAMS_SIZE) }) else {
            return CUPTI_ERROR_INVALID_PARAMETER;
        };
        let Some(id) = context_id_of(p.ctx) else {
            return CUPTI_ERROR_INVALID_OPERATION;
        };
        // SAFETY: the configured buffer is the client's, which it keeps until Disable.
        state::with(|st| unsafe { st.pcs.disable(id) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiPCSamplingStart(pParams: *mut CtxParams) -> u32 {
    call(|| {
        // SAFETY: the client's params.
        let Some(p) = (unsafe { params(pParams, CTX_PARAMS_SIZE) }) else {
            return CUPTI_ERROR_INVALID_PARAMETER;
        };
        let id = context_id_of(p.ctx).unwrap_or(0);
        state::with(|st| st.pcs.start_stop(id, true))
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiPCSamplingStop(pParams: *mut CtxParams) -> u32 {
    call(|| {
        // SAFETY: the client's params.
        let Some(p) = (unsafe { params(pParams, CTX_PARAMS_SIZE) }) else {
            return CUPTI_ERROR_INVALID_PARAMETER;
        };
        let id = context_id_of(p.ctx).unwrap_or(0);
        state::with(|st| st.pcs.start_stop(id, false))
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiPCSamplingGetNumStallReasons(
    pParams: *mut GetNumStallReasonsParams,
) -> u32 {
    call(|| {
        // SAFETY: the client's params.
        let Some(p) = (unsafe { params(pParams, GET_NUM_STALL_REASONS_PARAMS_SIZE) }) else {
            return CUPTI_ERROR_INVALID_PARAMETER;
        };
        if p.numStallReasons.is_null() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        if let Err(e) = enabled_id(p.ctx) {
            return e;
        }
        // SAFETY: checked non-NULL.
        unsafe { p.numStallReasons.write(STALL_REASONS.len()) };
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiPCSamplingGetStallReasons(
    pParams: *mut GetStallReasonsParams,
) -> u32 {
    call(|| {
        // SAFETY: the client's params.
        let Some(p) = (unsafe { params(pParams, GET_STALL_REASONS_PARAMS_SIZE) }) else {
            return CUPTI_ERROR_INVALID_PARAMETER;
        };
        if let Err(e) = enabled_id(p.ctx) {
            return e;
        }
        let n = STALL_REASONS.len();
        if p.numStallReasons != n || p.stallReasonIndex.is_null() || p.stallReasons.is_null() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: the client's array of `n` name buffers.
        let names = unsafe { std::slice::from_raw_parts(p.stallReasons, n) };
        if names.iter().any(|b| b.is_null()) {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        for (i, ((index, name), buf)) in STALL_REASONS.iter().zip(names).enumerate() {
            let bytes = name.to_bytes_with_nul();
            debug_assert!(bytes.len() <= STALL_REASON_STRING_SIZE);
            // SAFETY: the client's arrays: `n` indices, `n` buffers of
            // CUPTI_STALL_REASON_STRING_SIZE bytes.
            unsafe {
                p.stallReasonIndex.add(i).write(*index);
                std::ptr::copy_nonoverlapping(bytes.as_ptr().cast(), *buf, bytes.len());
            }
        }
        CUPTI_SUCCESS
    })
}

/// Validates every entry (each gets its `attributeStatus`); applies them all only if all are
/// valid, else returns the first entry's error.
#[no_mangle]
pub unsafe extern "C" fn cuptiPCSamplingSetConfigurationAttribute(
    pParams: *mut ConfigInfoParams,
) -> u32 {
    call(|| {
        // SAFETY: the client's params.
        let Some(p) = (unsafe { params(pParams, CONFIG_INFO_PARAMS_SIZE) }) else {
            return CUPTI_ERROR_INVALID_PARAMETER;
        };
        let info = p.pPCSamplingConfigurationInfo;
        if info.is_null() || p.numAttributes == 0 {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        let id = match enabled_id(p.ctx) {
            Ok(id) => id,
            Err(e) => return e,
        };
        // SAFETY: the client's `numAttributes` entries.
        let entries = unsafe { std::slice::from_raw_parts_mut(info, p.numAttributes) };
        state::with(|st| {
            let Some(mut config) = st.pcs.config(id).cloned() else {
                return CUPTI_ERROR_INVALID_OPERATION;
            };
            let mut first = CUPTI_SUCCESS;
            for e in entries.iter_mut() {
                // SAFETY: the client's entry, with its pointers.
                e.attributeStatus = unsafe { set_one(&mut config, e) };
                if first == CUPTI_SUCCESS {
                    first = e.attributeStatus;
                }
            }
            if first != CUPTI_SUCCESS {
                return first;
            }
            st.pcs.configure(id, config)
        })
    })
}

/// Reads every entry (each gets its `attributeStatus`); returns the first entry's error.
#[no_mangle]
pub unsafe extern "C" fn cuptiPCSamplingGetConfigurationAttribute(
    pParams: *mut ConfigInfoParams,
) -> u32 {
    call(|| {
        // SAFETY: the client's params.
        let Some(p) = (unsafe { params(pParams, CONFIG_INFO_PARAMS_SIZE) }) else {
            return CUPTI_ERROR_INVALID_PARAMETER;
        };
        let info = p.pPCSamplingConfigurationInfo;
        if info.is_null() || p.numAttributes == 0 {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        let id = match enabled_id(p.ctx) {
            Ok(id) => id,
            Err(e) => return e,
        };
        // SAFETY: the client's `numAttributes` entries.
        let entries = unsafe { std::slice::from_raw_parts_mut(info, p.numAttributes) };
        let Some(config) = state::with(|st| st.pcs.config(id).cloned()) else {
            return CUPTI_ERROR_INVALID_OPERATION;
        };
        let mut first = CUPTI_SUCCESS;
        for e in entries.iter_mut() {
            // SAFETY: the client's entry, with its pointers.
            e.attributeStatus = unsafe { get_one(&config, e) };
            if first == CUPTI_SUCCESS {
                first = e.attributeStatus;
            }
        }
        first
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiPCSamplingGetData(pParams: *mut GetDataParams) -> u32 {
    call(|| {
        // SAFETY: the client's params.
        let Some(p) = (unsafe { params(pParams, GET_DATA_PARAMS_SIZE) }) else {
            return CUPTI_ERROR_INVALID_PARAMETER;
        };
        let id = match enabled_id(p.ctx) {
            Ok(id) => id,
            Err(e) => return e,
        };
        let data = p.pcSamplingData.cast::<SamplingData>();
        // SAFETY: the client's buffer (checked inside).
        state::with(|st| unsafe { st.pcs.get_data(id, data) })
    })
}

#[cfg(test)]
mod tests;
