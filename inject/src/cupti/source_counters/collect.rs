//! One chosen launch's source counters: its context and device set up on first use, then
//! CUPTI's SASS metrics enabled on the context (lazy patching: the launched function only),
//! the launch, its data flushed and collection disabled again, so that each chosen launch is
//! counted alone and no other launch runs patched code.
//!
//! The context is synchronized before enabling (CUPTI patches code no kernel is running) and
//! after the launch (the counts are complete only once it ended): chosen launches are
//! serialized; the others run untouched.
//!
//! On a context's first chosen launch, CUPTI's kernel activity is enabled and disabled again
//! before the SASS metrics: without that, CUPTI 13.0 counts only the first function it patches
//! in the process, and nothing after a flush; with it, every launch (measured on an H100:
//! docs/source-counters.md). No launch runs between the two, so no kernel record is made.

use super::api::{call, synchronize, SassApi};
use crate::cupti::api::{describe, Api};
use rtrace_cupti_abi as abi;
use rtrace_format::{
    ChunkKind, InstructionCounters, SourceCounterFunction, SourceCounterLaunch, SourceCounterSetup,
    COUNTERS, COUNTER_COUNT, SOURCE_COUNTERS_NOTICE,
};
use std::collections::BTreeMap;
use std::ffi::{c_void, CStr, CString};

/// What the chosen launches share, under the state's `collector` lock.
#[derive(Default)]
pub(crate) struct Collector {
    /// `cuptiProfilerInitialize` (once per process): its outcome, once called.
    initialized: Option<Result<(), String>>,
    /// Devices configured (`cuptiSassMetricsSetConfig`, once per device), by ordinal.
    devices: Vec<(i32, Result<Device, String>)>,
    /// Contexts seen by a chosen launch: handle, CUPTI's id, the calls that failed there
    /// (said once each).
    contexts: Vec<(usize, u32, Vec<&'static str>)>,
    /// Chosen launches so far.
    chosen: u64,
    /// Devices and the initialization whose failure was said.
    said: Vec<String>,
    /// A chosen launch came back without counts (said once).
    empty_said: bool,
}

/// A configured device: its chip, and for each counter the CUPTI metric and its id.
struct Device {
    chip: String,
    metrics: Vec<String>,
    ids: Vec<Option<u64>>,
}

/// What a chosen launch hands on: chunks for the worker, notices.
#[derive(Default)]
pub(super) struct Output {
    pub chunks: Vec<(ChunkKind, Vec<u8>)>,
    pub notices: Vec<String>,
}

/// The launch `run` (called exactly once) of function `f`, named `name`, on the calling
/// thread's context `ctx` of device `device`, with its counters when CUPTI gives them.
#[allow(clippy::too_many_arguments)]
pub(super) fn collect(
    api: &Api,
    sass: &SassApi,
    c: &mut Collector,
    correlation: u64,
    ctx: *mut c_void,
    device: i32,
    name: String,
    run: &mut dyn FnMut() -> u32,
    out: &mut Output,
) {
    let mut context = 0u32;
    // SAFETY: `ctx` is the calling thread's current context; CUPTI writes its id.
    unsafe { (api.context_id)(ctx, &mut context) };
    let known = c
        .contexts
        .iter()
        .position(|(h, id, _)| *h == ctx as usize && *id == context);
    if known.is_none() {
        // Before anything else of the SASS metrics, as measured.
        arm(api, context, out);
    }
    if let Err(e) = initialize(sass, c) {
        if !c.said.contains(&e) {
            out.notices.push(e.clone());
            c.said.push(e);
        }
        run();
        return;
    }
    let i = match c.devices.iter().position(|(d, _)| *d == device) {
        Some(i) => i,
        None => {
            c.devices.push((device, configure(api, sass, device)));
            c.devices.len() - 1
        }
    };
    let dev = match &c.devices[i].1 {
        Ok(d) => d,
        Err(e) => {
            if !c.said.contains(e) {
                out.notices.push(e.clone());
                c.said.push(e.clone());
            }
            run();
            return;
        }
    };
    let k = match known {
        Some(k) => k,
        None => {
            c.contexts.retain(|(h, _, _)| *h != ctx as usize);
            let setup = SourceCounterSetup {
                context,
                device: device as u32,
                time_ns: crate::clock::now_ns(),
                chip: dev.chip.clone(),
                metrics: dev.metrics.clone(),
                lazy_patching: true,
            };
            let found = dev.metrics.iter().filter(|m| !m.is_empty()).count();
            let missing: Vec<&str> = COUNTERS
                .iter()
                .zip(&dev.metrics)
                .filter(|(_, m)| m.is_empty())
                .map(|(c, _)| c.key)
                .collect();
            out.notices.push(format!(
                "{SOURCE_COUNTERS_NOTICE} on for context {context}: {found} of {COUNTER_COUNT} counters on {}{}",
                dev.chip,
                if missing.is_empty() {
                    String::new()
                } else {
                    format!(" ({} not on this chip)", missing.join(", "))
                }
            ));
            out.chunks.push((
                ChunkKind::SourceCounterSetup,
                rtrace_format::encode_value(&setup),
            ));
            c.contexts.push((ctx as usize, context, Vec::new()));
            c.contexts.len() - 1
        }
    };
    let ordinal = c.chosen;
    c.chosen += 1;
    let said = &mut c.contexts[k].2;
    let mut failed = |name: &'static str, rc: u32, out: &mut Output| {
        if !said.contains(&name) {
            said.push(name);
            out.notices.push(format!(
                "{SOURCE_COUNTERS_NOTICE}: {name} failed on context {context}: {}: a chosen launch ran without them (said once per context)",
                describe(api, rc as i32)
            ));
        }
    };
    let start_ns = crate::clock::now_ns();
    synchronize();
    let mut e = abi::SassMetricsEnable::new();
    e.ctx = ctx;
    e.enable_lazy_patching = 1;
    let rc = call(sass.enable, &mut e);
    if rc != abi::SUCCESS {
        failed("cuptiSassMetricsEnable", rc, out);
        run();
        return;
    }
    run();
    synchronize();
    let functions = match flush(sass, ctx, &dev.ids) {
        Ok(f) => f,
        Err((name, rc)) => {
            failed(name, rc, out);
            Vec::new()
        }
    };
    if functions.is_empty() && !c.empty_said {
        c.empty_said = true;
        out.notices.push(format!(
            "{SOURCE_COUNTERS_NOTICE}: CUPTI gave no counts for launch {ordinal} ({name}): CUPTI 13.0 counts only the first function it patches in a process (docs/source-counters.md); choose the kernel with --kernel-regex, --kernel-skip and --kernel-count (said once)"
        ));
    }
    let mut d = abi::SassMetricsDisable::new();
    d.ctx = ctx;
    let rc = call(sass.disable, &mut d);
    if rc != abi::SUCCESS {
        failed("cuptiSassMetricsDisable", rc, out);
    }
    let record = SourceCounterLaunch {
        context,
        correlation,
        launch: ordinal,
        start_ns,
        end_ns: crate::clock::now_ns(),
        name,
        functions,
        dropped: d.num_of_dropped_records as u64,
    };
    out.chunks.push((
        ChunkKind::SourceCounters,
        rtrace_format::encode_value(&record),
    ));
}

/// CUPTI's kernel activity enabled and disabled on the calling thread's context: what makes
/// CUPTI 13.0 patch every function launched afterwards (not only the first). A failure is said.
fn arm(api: &Api, context: u32, out: &mut Output) {
    let kind = super::super::layout::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL as i32;
    // SAFETY: plain CUPTI calls; no launch runs between them (the caller holds the lock every
    // chosen launch takes, and the program's thread is in its launch call).
    let rc = unsafe { (api.enable)(kind) };
    if rc != 0 {
        out.notices.push(format!(
            "{SOURCE_COUNTERS_NOTICE}: enabling kernel activity on context {context} (which makes CUPTI patch every function): {}: only the first function may be counted",
            describe(api, rc)
        ));
        return;
    }
    // SAFETY: as above.
    unsafe { (api.disable)(kind) };
}

/// `cuptiProfilerInitialize`, once per process.
fn initialize(sass: &SassApi, c: &mut Collector) -> Result<(), String> {
    c.initialized
        .get_or_insert_with(|| {
            let mut p = abi::ProfilerInitialize::new();
            match call(sass.initialize, &mut p) {
                abi::SUCCESS => Ok(()),
                rc => Err(format!(
                    "{SOURCE_COUNTERS_NOTICE} off: cuptiProfilerInitialize: CUPTI error {rc}"
                )),
            }
        })
        .clone()
}

/// Device `device`: its chip, the metric behind each counter (the first of its names the
/// chip has), and `cuptiSassMetricsSetConfig` with them.
fn configure(api: &Api, sass: &SassApi, device: i32) -> Result<Device, String> {
    let off = |what: &str, rc: u32| {
        format!(
            "{SOURCE_COUNTERS_NOTICE} off for device {device}: {what}: {}",
            describe(api, rc as i32)
        )
    };
    let mut cp = abi::DeviceGetChipName::new();
    cp.device_index = device as usize;
    let rc = call(sass.chip_name, &mut cp);
    if rc != abi::SUCCESS || cp.chip_name.is_null() {
        return Err(off("cuptiDeviceGetChipName", rc));
    }
    // SAFETY: CUPTI's NUL-terminated chip name.
    let chip_c = unsafe { CStr::from_ptr(cp.chip_name) }.to_owned();
    let chip = chip_c.to_string_lossy().into_owned();
    let mut metrics = Vec::new();
    let mut ids = Vec::new();
    let mut configs = Vec::new();
    for counter in &COUNTERS {
        let found = counter.metrics.iter().find_map(|m| {
            let name = CString::new(*m).ok()?;
            let mut p = abi::SassMetricsGetProperties::new();
            p.chip_name = chip_c.as_ptr();
            p.metric_name = name.as_ptr();
            (call(sass.properties, &mut p) == abi::SUCCESS).then_some((m, p.metric.metric_id))
        });
        match found {
            Some((m, id)) => {
                metrics.push(m.to_string());
                ids.push(Some(id));
                if !configs
                    .iter()
                    .any(|c: &abi::SassMetricsConfig| c.metric_id == id)
                {
                    configs.push(abi::SassMetricsConfig {
                        metric_id: id,
                        output_granularity: abi::SASS_METRICS_OUTPUT_GRANULARITY_GPU,
                    });
                }
            }
            None => {
                metrics.push(String::new());
                ids.push(None);
            }
        }
    }
    if configs.is_empty() {
        return Err(format!(
            "{SOURCE_COUNTERS_NOTICE} off for device {device}: the chip ({chip}) lists none of the counters' SASS metrics"
        ));
    }
    let mut s = abi::SassMetricsSetConfig::new();
    s.num_of_metric_config = configs.len();
    s.configs = configs.as_mut_ptr();
    s.device_index = device as u32;
    let rc = call(sass.set_config, &mut s);
    if rc != abi::SUCCESS && rc != abi::ERROR_INVALID_OPERATION {
        // INVALID_OPERATION: configured already (by an earlier run of this code in the process).
        return Err(off("cuptiSassMetricsSetConfig", rc));
    }
    Ok(Device { chip, metrics, ids })
}

/// What CUPTI holds for `ctx`, by function and instruction; `ids`: each counter's metric id.
fn flush(
    sass: &SassApi,
    ctx: *mut c_void,
    ids: &[Option<u64>],
) -> Result<Vec<SourceCounterFunction>, (&'static str, u32)> {
    let mut p = abi::SassMetricsGetDataProperties::new();
    p.ctx = ctx;
    let rc = call(sass.data_properties, &mut p);
    if rc != abi::SUCCESS {
        return Err(("cuptiSassMetricsGetDataProperties", rc));
    }
    let (n, k) = (p.num_of_patched_instruction_records, p.num_of_instances);
    if n == 0 || k == 0 {
        return Ok(Vec::new());
    }
    let mut values = vec![abi::SassMetricsInstanceValue::default(); n * k];
    let mut data: Vec<abi::SassMetricsData> = (0..n)
        .map(|i| {
            let mut d = abi::SassMetricsData::new();
            d.instance_values = values[i * k..].as_mut_ptr();
            d
        })
        .collect();
    let mut f = abi::SassMetricsFlushData::with_header_size();
    f.ctx = ctx;
    f.num_of_patched_instruction_records = n;
    f.num_of_instances = k;
    f.metrics_data = data.as_mut_ptr();
    let rc = call(sass.flush, &mut f);
    if rc != abi::SUCCESS {
        return Err(("cuptiSassMetricsFlushData", rc));
    }
    // (crc, function index, name) → pc offset → values
    type Key = (u64, u32, String);
    let mut by: BTreeMap<Key, BTreeMap<u64, [u64; COUNTER_COUNT]>> = BTreeMap::new();
    let mut names: BTreeMap<usize, String> = BTreeMap::new();
    for (i, d) in data.iter().enumerate() {
        let name = if d.function_name.is_null() {
            String::new()
        } else {
            names
                .entry(d.function_name as usize)
                // SAFETY: CUPTI's NUL-terminated function name (copied; CUPTI keeps it).
                .or_insert_with(|| {
                    unsafe { CStr::from_ptr(d.function_name) }
                        .to_string_lossy()
                        .into_owned()
                })
                .clone()
        };
        let row = by
            .entry((u64::from(d.cubin_crc), d.function_index, name))
            .or_default()
            .entry(u64::from(d.pc_offset))
            .or_insert([0; COUNTER_COUNT]);
        for v in &values[i * k..(i + 1) * k] {
            for (c, id) in ids.iter().enumerate() {
                if *id == Some(v.metric_id) {
                    row[c] += v.value;
                }
            }
        }
    }
    Ok(by
        .into_iter()
        .filter(|(_, pcs)| pcs.values().any(|v| v.iter().any(|&x| x != 0)))
        .map(
            |((cubin_crc, function_index, name), pcs)| SourceCounterFunction {
                cubin_crc,
                function_index,
                name,
                instructions: pcs
                    .into_iter()
                    .map(|(pc_offset, values)| InstructionCounters { pc_offset, values })
                    .collect(),
            },
        )
        .collect())
}
