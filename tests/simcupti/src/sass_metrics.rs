//! CUPTI's SASS Metric API (`cupti_sass_metrics.h`, CUDA 13.0), simulated deterministically.
//! The state (`SassMetrics`) lives in simcupti's `State`, behind its lock; the exported
//! functions are at the end, with the C ABI of `rtrace-cupti-abi`'s structures.
//!
//! The rules (README.md, "SASS metrics"):
//! - The chip `GH100` lists the metrics of [`METRICS`] (ids `1000 + 7·i`); any other chip name
//!   is `CUPTI_ERROR_INVALID_PARAMETER`. Nothing needs `cuptiProfilerInitialize` but
//!   `SetConfig` and `Enable` (`CUPTI_ERROR_NOT_INITIALIZED` without it).
//! - `SetConfig` once per device (again: `INVALID_OPERATION`, until `UnsetConfig`), at
//!   `CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU` only (another: `NOT_SUPPORTED`); an unknown
//!   metric id is `INVALID_PARAMETER`. `SIMCUPTI_SASS_METRICS=unsupported`: `SetConfig` returns
//!   `NOT_SUPPORTED`.
//! - `Enable` on a context of a configured device (else `INVALID_OPERATION`; twice:
//!   `INVALID_OPERATION`); `Disable` ends it, dropping what was not flushed
//!   (`numOfDroppedRecords` = records × instances).
//! - Each kernel launched on an enabled context adds, at offsets 0, 16, 32, 48 (k = 0..3) of
//!   its function (named by its module's CRC and index, as PC sampling names it), with W the
//!   launch's warps (blocks × ⌈threads per block / 32⌉) and T its threads:
//!   `inst_executed` W·(k+1); `thread_inst_executed` T·(k+1); `..._pred_on` T·(k+1), less T/2
//!   at k = 3; at k = 1 global sectors 32·W and ideal 4·W; at k = 2 shared wavefronts 32·W and
//!   ideal W; at k = 3 divergent branch targets W. Launches of one function add up until a
//!   flush.
//! - As CUPTI 13.0 on an H100 (tests/gpu/sassmetrics_probe.sh), only the first function patched
//!   in the process is counted, and only until its first flush, unless its context was
//!   *armed*: kernel activity (`CONCURRENT_KERNEL`) enabled while the context existed (and
//!   disabled again: while it stays on, every value is 0). Enabling kernel activity while SASS
//!   metrics are enabled on a context is `NOT_COMPATIBLE` (state.rs).
//! - As CUPTI 13.0 on an H100: one record per instruction and
//!   configured metric, one instance (GPU granularity). `GetDataProperties`: records = pending
//!   instructions × configured metrics, instances = 1; `FlushData` fills the records in order
//!   of (function name, offset, configuration order), each with its one `(metric id, value)`,
//!   and empties the context's data. Both `INVALID_OPERATION` outside Enable … Disable.

#![allow(clippy::missing_safety_doc, non_snake_case)]

use std::collections::BTreeMap;
use std::ffi::{c_char, CStr, CString};
use std::sync::OnceLock;

use rtrace_cupti_abi as abi;

use crate::api::call;
use crate::layout::*;
use crate::profiler::DEVICE_CHIP;
use crate::profiling::sized;
use crate::sim::{SimOp, SIMOP_CONTEXT, SIMOP_KERNEL};
use crate::state;

/// The metrics the chip lists: name and description.
pub const METRICS: [(&str, &str); 8] = [
    (
        "smsp__sass_inst_executed",
        "# of warp instructions executed",
    ),
    (
        "smsp__sass_thread_inst_executed",
        "# of thread instructions executed",
    ),
    (
        "smsp__sass_thread_inst_executed_pred_on",
        "# of thread instructions executed where the predicate was true",
    ),
    (
        "smsp__sass_sectors_mem_global",
        "# of global memory sectors accessed",
    ),
    (
        "smsp__sass_sectors_mem_global_ideal",
        "ideal # of global memory sectors accessed",
    ),
    (
        "smsp__sass_l1tex_pipe_lsu_wavefronts_mem_shared",
        "# of shared memory wavefronts processed",
    ),
    (
        "smsp__sass_l1tex_pipe_lsu_wavefronts_mem_shared_ideal",
        "ideal # of shared memory wavefronts",
    ),
    (
        "smsp__sass_branch_targets_threads_divergent",
        "# of divergent branch targets",
    ),
];

/// The id of metric `i` of [`METRICS`].
pub fn metric_id(i: usize) -> u64 {
    1000 + 7 * i as u64
}

/// Instructions a launch adds, 16 bytes apart.
pub const INSTRUCTIONS: u32 = 4;

/// What one launch of `warps` warps and `threads` threads adds at instruction `k`, by place in
/// [`METRICS`].
pub fn launch_values(k: u32, warps: u64, threads: u64) -> [u64; 8] {
    let n = u64::from(k) + 1;
    let mut v = [0u64; 8];
    v[0] = warps * n;
    v[1] = threads * n;
    v[2] = threads * n - if k == 3 { threads / 2 } else { 0 };
    if k == 1 {
        v[3] = 32 * warps;
        v[4] = 4 * warps;
    }
    if k == 2 {
        v[5] = 32 * warps;
        v[6] = warps;
    }
    if k == 3 {
        v[7] = warps;
    }
    v
}

/// `SIMCUPTI_SASS_METRICS=unsupported`.
fn unsupported() -> bool {
    static V: OnceLock<bool> = OnceLock::new();
    *V.get_or_init(|| std::env::var_os("SIMCUPTI_SASS_METRICS").is_some_and(|v| v == "unsupported"))
}

/// One context's collection: pending values by (function name, offset).
#[derive(Default)]
struct Ctx {
    pending: BTreeMap<(CString, u32), Pending>,
}

struct Pending {
    crc: u32,
    function_index: u32,
    values: [u64; 8],
}

/// The SASS metrics state: configured devices (their metrics, by place in [`METRICS`]) and
/// enabled contexts.
pub struct SassMetrics {
    devices: BTreeMap<u32, Vec<usize>>,
    contexts: BTreeMap<u32, (u32, Ctx)>,
    /// Each context's device, from simcuda's context ops (unknown: device 0).
    context_devices: BTreeMap<u32, u32>,
    /// Contexts armed by kernel activity enabled while they existed.
    armed: Vec<u32>,
    /// Kernel activity is on now.
    kernel_activity: bool,
    /// The first function patched in the process (context, name), and whether it was flushed
    /// since: what an unarmed context may still count.
    first: Option<(u32, CString)>,
    first_flushed: bool,
}

impl SassMetrics {
    pub const fn new() -> SassMetrics {
        SassMetrics {
            devices: BTreeMap::new(),
            contexts: BTreeMap::new(),
            context_devices: BTreeMap::new(),
            armed: Vec::new(),
            kernel_activity: false,
            first: None,
            first_flushed: false,
        }
    }

    /// Whether SASS metrics are enabled on any context.
    pub fn any_enabled(&self) -> bool {
        !self.contexts.is_empty()
    }

    /// Kernel activity enabled (`on`) or disabled: enabling arms every context that exists.
    pub fn kernel_activity(&mut self, on: bool) {
        self.kernel_activity = on;
        if on {
            for &ctx in self.context_devices.keys() {
                if !self.armed.contains(&ctx) {
                    self.armed.push(ctx);
                }
            }
        }
    }

    /// A kernel launched (simcuda's op): adds its values on an enabled context. `function`:
    /// the function's module CRC and index on that context, if known.
    pub fn observe(&mut self, op: &SimOp, function: impl FnOnce(u32, &CStr) -> Option<(u64, u32)>) {
        if op.kind == SIMOP_CONTEXT {
            self.context_devices.insert(op.context_id, op.device);
            return;
        }
        if op.kind != SIMOP_KERNEL || op.name.is_null() {
            return;
        }
        let Some((_, c)) = self.contexts.get_mut(&op.context_id) else {
            return;
        };
        // SAFETY: a kernel op's name is NUL-terminated.
        let name = unsafe { CStr::from_ptr(op.name) };
        if !self.armed.contains(&op.context_id) {
            match &self.first {
                None => self.first = Some((op.context_id, name.to_owned())),
                Some((ctx, f)) if *ctx == op.context_id && f.as_c_str() == name => {}
                Some(_) => return,
            }
            if self.first_flushed {
                return;
            }
        }
        let zero = self.kernel_activity;
        let Some((crc, function_index)) = function(op.context_id, name) else {
            return;
        };
        let blocks: u64 = op.grid.iter().map(|&g| u64::from(g.max(1))).product();
        let per_block: u64 = op.block.iter().map(|&b| u64::from(b.max(1))).product();
        let (warps, threads) = (blocks * per_block.div_ceil(32), blocks * per_block);
        for k in 0..INSTRUCTIONS {
            let p = c
                .pending
                .entry((name.to_owned(), 16 * k))
                .or_insert(Pending {
                    crc: crc as u32,
                    function_index,
                    values: [0; 8],
                });
            if zero {
                continue;
            }
            for (a, b) in p.values.iter_mut().zip(launch_values(k, warps, threads)) {
                *a += b;
            }
        }
    }
}

/// The place in [`METRICS`] of `name`.
fn metric_named(name: &[u8]) -> Option<usize> {
    METRICS.iter().position(|(n, _)| n.as_bytes() == name)
}

/// The chip a params struct names: `Ok` for `GH100`.
unsafe fn known_chip(chip: *const c_char) -> Result<(), u32> {
    if chip.is_null() {
        return Err(CUPTI_ERROR_INVALID_PARAMETER);
    }
    // SAFETY: the caller's NUL-terminated chip name.
    match unsafe { CStr::from_ptr(chip) }.to_bytes() == DEVICE_CHIP.as_bytes() {
        true => Ok(()),
        false => Err(CUPTI_ERROR_INVALID_PARAMETER),
    }
}

/// Static NUL-terminated names and descriptions.
fn cstrings() -> &'static [(CString, CString)] {
    static S: OnceLock<Vec<(CString, CString)>> = OnceLock::new();
    S.get_or_init(|| {
        METRICS
            .iter()
            .map(|(n, d)| (CString::new(*n).unwrap(), CString::new(*d).unwrap()))
            .collect()
    })
}

fn details(i: usize) -> abi::SassMetricDetails {
    let (n, d) = &cstrings()[i];
    abi::SassMetricDetails {
        metric_id: metric_id(i),
        metric_name: n.as_ptr(),
        metric_description: d.as_ptr(),
    }
}

/// A context handle's id.
fn context_of(ctx: *mut std::ffi::c_void) -> Result<u32, u32> {
    crate::pcsampling::context_id_of(ctx).ok_or(CUPTI_ERROR_INVALID_CONTEXT)
}

fn result(r: Result<(), u32>) -> u32 {
    r.err().unwrap_or(CUPTI_SUCCESS)
}

#[no_mangle]
pub unsafe extern "C" fn cuptiSassMetricsGetNumOfMetrics(
    p: *mut abi::SassMetricsGetNumOfMetrics,
) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`; the chip name is the caller's.
        if !unsafe { sized(p, abi::SassMetricsGetNumOfMetrics::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        let p = unsafe { &mut *p };
        // SAFETY: as above.
        result(unsafe { known_chip(p.chip_name) }.map(|()| p.num_of_metrics = METRICS.len()))
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiSassMetricsGetMetrics(p: *mut abi::SassMetricsGetMetrics) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::SassMetricsGetMetrics::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        let p = unsafe { &mut *p };
        // SAFETY: the caller's chip name.
        if let Err(e) = unsafe { known_chip(p.chip_name) } {
            return e;
        }
        if p.metrics_list.is_null() || p.num_of_metrics < METRICS.len() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        for i in 0..METRICS.len() {
            // SAFETY: the caller's list holds `num_of_metrics` entries.
            unsafe { p.metrics_list.add(i).write(details(i)) };
        }
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiSassMetricsGetProperties(
    p: *mut abi::SassMetricsGetProperties,
) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::SassMetricsGetProperties::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        let p = unsafe { &mut *p };
        // SAFETY: the caller's chip name.
        if let Err(e) = unsafe { known_chip(p.chip_name) } {
            return e;
        }
        if p.metric_name.is_null() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: the caller's NUL-terminated metric name.
        match metric_named(unsafe { CStr::from_ptr(p.metric_name) }.to_bytes()) {
            Some(i) => {
                p.metric = details(i);
                CUPTI_SUCCESS
            }
            None => CUPTI_ERROR_INVALID_METRIC_NAME,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiSassMetricsSetConfig(p: *mut abi::SassMetricsSetConfig) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::SassMetricsSetConfig::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        let p = unsafe { &*p };
        if p.configs.is_null() || p.num_of_metric_config == 0 {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: the caller's array of `num_of_metric_config` configs.
        let configs = unsafe { std::slice::from_raw_parts(p.configs, p.num_of_metric_config) };
        let mut places = Vec::new();
        for c in configs {
            if c.output_granularity != abi::SASS_METRICS_OUTPUT_GRANULARITY_GPU {
                return CUPTI_ERROR_NOT_SUPPORTED;
            }
            match (0..METRICS.len()).find(|&i| metric_id(i) == c.metric_id) {
                Some(i) => places.push(i),
                None => return CUPTI_ERROR_INVALID_PARAMETER,
            }
        }
        if unsupported() {
            return CUPTI_ERROR_NOT_SUPPORTED;
        }
        state::with(|st| {
            if !st.prof.initialized {
                return CUPTI_ERROR_NOT_INITIALIZED;
            }
            if st.sass.devices.contains_key(&p.device_index) {
                return CUPTI_ERROR_INVALID_OPERATION;
            }
            st.sass.devices.insert(p.device_index, places);
            CUPTI_SUCCESS
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiSassMetricsUnsetConfig(p: *mut abi::SassMetricsUnsetConfig) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::SassMetricsUnsetConfig::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        let device = unsafe { (*p).device_index };
        state::with(|st| match st.sass.devices.remove(&device) {
            Some(_) => {
                st.sass.contexts.retain(|_, (d, _)| *d != device);
                CUPTI_SUCCESS
            }
            None => CUPTI_ERROR_INVALID_OPERATION,
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiSassMetricsEnable(p: *mut abi::SassMetricsEnable) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::SassMetricsEnable::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        let ctx = match context_of(unsafe { (*p).ctx }) {
            Ok(c) => c,
            Err(e) => return e,
        };
        state::with(|st| {
            let device = st.sass.context_devices.get(&ctx).copied().unwrap_or(0);
            if !st.prof.initialized {
                return CUPTI_ERROR_NOT_INITIALIZED;
            }
            if !st.sass.devices.contains_key(&device) || st.sass.contexts.contains_key(&ctx) {
                return CUPTI_ERROR_INVALID_OPERATION;
            }
            st.sass.contexts.insert(ctx, (device, Ctx::default()));
            CUPTI_SUCCESS
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiSassMetricsDisable(p: *mut abi::SassMetricsDisable) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::SassMetricsDisable::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        let p = unsafe { &mut *p };
        let ctx = match context_of(p.ctx) {
            Ok(c) => c,
            Err(e) => return e,
        };
        state::with(|st| {
            let Some((device, c)) = st.sass.contexts.remove(&ctx) else {
                return CUPTI_ERROR_INVALID_OPERATION;
            };
            let metrics = st.sass.devices.get(&device).map_or(0, Vec::len);
            p.num_of_dropped_records = c.pending.len() * metrics;
            CUPTI_SUCCESS
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiSassMetricsGetDataProperties(
    p: *mut abi::SassMetricsGetDataProperties,
) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::SassMetricsGetDataProperties::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        let p = unsafe { &mut *p };
        let ctx = match context_of(p.ctx) {
            Ok(c) => c,
            Err(e) => return e,
        };
        state::with(|st| {
            let Some((device, c)) = st.sass.contexts.get(&ctx) else {
                return CUPTI_ERROR_INVALID_OPERATION;
            };
            let metrics = st.sass.devices.get(device).map_or(0, Vec::len);
            p.num_of_patched_instruction_records = c.pending.len() * metrics;
            p.num_of_instances = usize::from(!c.pending.is_empty() && metrics > 0);
            CUPTI_SUCCESS
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiSassMetricsFlushData(p: *mut abi::SassMetricsFlushData) -> u32 {
    call(|| {
        // SAFETY: checked by `sized` (the header's size, which stops before `pMetricsData`).
        if !unsafe { sized(p, abi::SassMetricsFlushData::HEADER_SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        let p = unsafe { &mut *p };
        let ctx = match context_of(p.ctx) {
            Ok(c) => c,
            Err(e) => return e,
        };
        state::with(|st| {
            let Some((device, c)) = st.sass.contexts.get_mut(&ctx) else {
                return CUPTI_ERROR_INVALID_OPERATION;
            };
            let places = st.sass.devices.get(device).cloned().unwrap_or_default();
            if p.metrics_data.is_null()
                || p.num_of_patched_instruction_records < c.pending.len() * places.len()
                || (!c.pending.is_empty() && p.num_of_instances < 1)
            {
                return CUPTI_ERROR_INVALID_PARAMETER;
            }
            if !c.pending.is_empty() && !st.sass.armed.contains(&ctx) {
                st.sass.first_flushed = true;
            }
            let Some((_, c)) = st.sass.contexts.get_mut(&ctx) else {
                return CUPTI_ERROR_INVALID_OPERATION;
            };
            let mut i = 0;
            for ((name, offset), v) in std::mem::take(&mut c.pending) {
                // Leaked: CUPTI's names live as long as the process (one per instruction).
                let name = name.into_raw();
                for &place in &places {
                    // SAFETY: the caller's array of `num_of_patched_instruction_records`
                    // records, each with room for one instance.
                    let d = unsafe { &mut *p.metrics_data.add(i) };
                    d.cubin_crc = v.crc;
                    d.function_index = v.function_index;
                    d.function_name = name;
                    d.pc_offset = offset;
                    // SAFETY: as above.
                    unsafe {
                        d.instance_values.write(abi::SassMetricsInstanceValue {
                            metric_id: metric_id(place),
                            value: v.values[place],
                        })
                    };
                    i += 1;
                }
            }
            CUPTI_SUCCESS
        })
    })
}
