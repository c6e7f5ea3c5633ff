//! The report's "GPU metrics" part (CUPTI's PM sampling, chunks 45 and 46): per sampled GPU,
//! the average of each metric over the run; and each process, kernel and NVTX range the
//! average of each metric over the time its GPU work ran on a sampled GPU (the union of its
//! intervals, each sample weighted by the nanoseconds it shares with them), with the share of
//! that time the samples cover. The sampling set-ups, and every notice on why sampling is off.
//!
//! A GPU is the same one across traces when the host, its boot and the device's PCI address
//! are: a process that did not sample a GPU (only one process can) gets the samples another
//! process took of it. The files read top-down: this one, then `evaluate` (counter data to
//! values, through CUPTI's host API), then `timeline` (the overlap arithmetic).

pub mod evaluate;
pub mod timeline;

use crate::model::Trace;
use evaluate::EvaluateFn;
use rtrace_format::{PmTrigger, GPU_METRICS_NOTICE};
use std::collections::{BTreeMap, HashMap};
use timeline::Timeline;

/// The part; empty (and not shown) when nothing was sampled and no notice says why not.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuMetricsSection {
    pub setups: Vec<SetupRow>,
    pub notices: Vec<NoticeRow>,
    /// Why decodes could not be evaluated (no CUPTI, an unknown chip, a damaged image).
    pub errors: Vec<String>,
    /// The columns of every row below, in [`timeline::shown_name`] form.
    pub metrics: Vec<String>,
    /// Per sampled GPU: the whole run.
    pub devices: Vec<Row>,
    /// Per process and GPU: the time any of its work (kernels, copies, memsets) ran.
    pub processes: Vec<Row>,
    /// Per process, GPU and kernel name: the time its launches ran.
    pub kernels: Vec<Row>,
    /// Per process, GPU and NVTX range name: from the first start to the last end of the work
    /// launched inside each of its ranges, over every range of the name.
    pub nvtx: Vec<Row>,
}

impl GpuMetricsSection {
    pub fn is_empty(&self) -> bool {
        self.setups.is_empty() && self.notices.is_empty()
    }
}

/// Sampling as set up on one device of one process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetupRow {
    pub pid: u32,
    pub device: u32,
    pub chip: String,
    /// ns (`trigger` GPU time) or SYSCLK cycles.
    pub interval: u64,
    pub trigger: &'static str,
    pub metrics: usize,
    /// Samples decoded, decodes that reported an overflow, samples known lost.
    pub samples: u64,
    pub overflows: u64,
    pub dropped: u64,
}

/// A notice on GPU metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoticeRow {
    pub pid: u32,
    pub message: String,
}

/// What one process, kernel, NVTX range or GPU got.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub pid: u32,
    /// The device ordinal in that process.
    pub device: u32,
    /// The kernel (demangled) or range name; the GPU's name for a device or process row.
    pub name: String,
    /// The time the work ran (the union of its intervals), ns.
    pub span_ns: u64,
    /// The share of it the samples cover, 0..=1.
    pub covered: f64,
    /// One value per [`GpuMetricsSection::metrics`] (NaN where nothing covers it).
    pub values: Vec<f64>,
}

/// One trace's GPU work, as attribution needs it.
#[derive(Clone, Debug, Default)]
pub struct Work {
    /// (device, kernel name id, start, end) of each kernel.
    pub kernels: Vec<(u32, u32, u64, u64)>,
    /// (device, start, end) of each copy and memset.
    pub other: Vec<(u32, u64, u64)>,
    /// (range name, device, first start, last end) of each NVTX range with GPU work.
    pub nvtx: Vec<(String, u32, u64, u64)>,
}

impl Work {
    /// A trace held in memory (its records and NVTX ranges).
    pub fn in_memory(t: &Trace) -> Work {
        let nvtx = if crate::nvtx::has_nvtx(t) {
            nvtx_spans(&crate::nvtx::ranges(t).ranges)
        } else {
            Vec::new()
        };
        Work {
            kernels: t
                .kernels
                .iter()
                .map(|k| (k.device, k.name, k.start_ns, k.end_ns))
                .collect(),
            other: t
                .memcpys
                .iter()
                .map(|m| (m.device, m.start_ns, m.end_ns))
                .chain(t.memsets.iter().map(|m| (m.device, m.start_ns, m.end_ns)))
                .collect(),
            nvtx,
        }
    }

    /// Whether any of `t`'s work needs reading: only when some trace sampled a GPU.
    pub fn wanted(traces: &[Trace]) -> bool {
        traces.iter().any(|t| !t.gpu_metric_samples.is_empty())
    }
}

/// Each range's GPU span, by name.
pub fn nvtx_spans(ranges: &[crate::nvtx::NvtxRange]) -> Vec<(String, u32, u64, u64)> {
    ranges
        .iter()
        .filter_map(|r| {
            let (device, a, b) = r.gpu_span?;
            Some((r.name.clone(), device, a, b))
        })
        .collect()
}

/// A physical GPU: (host, PCI address, boot id).
type GpuKey = (String, String, String);

/// Which physical GPU a trace's device ordinal is: host, boot and PCI address where the device
/// is described, else the trace and ordinal themselves.
fn gpu_key(traces: &[Trace], ti: usize, ordinal: u32) -> GpuKey {
    let t = &traces[ti];
    match t.devices.get(&ordinal).and_then(|d| d.pci_address()) {
        Some(pci) => (t.header.hostname.clone(), pci, t.header.boot_id.clone()),
        None => (
            String::new(),
            format!("trace {ti} device {ordinal}"),
            String::new(),
        ),
    }
}

fn trigger_name(t: PmTrigger) -> &'static str {
    match t {
        PmTrigger::GpuTime => "ns",
        PmTrigger::SysClock => "cycles",
    }
}

/// The part for `traces`, with `works[i]` the GPU work of `traces[i]` (an empty [`Work`] where
/// it was not read) and `evaluate` turning a decode without values into values (`Err`: why
/// there is nothing to evaluate with, e.g. CUPTI could not be loaded; said for the decodes
/// that needed it).
pub fn section(
    traces: &[Trace],
    works: &[Work],
    evaluate: Result<&EvaluateFn<'_>, String>,
) -> GpuMetricsSection {
    let mut s = GpuMetricsSection::default();
    for t in traces {
        let pid = t.header.pid;
        s.notices.extend(
            t.notices
                .iter()
                .filter(|n| n.message.starts_with(GPU_METRICS_NOTICE))
                .map(|n| NoticeRow {
                    pid,
                    message: n.message.clone(),
                }),
        );
        for g in &t.gpu_metric_setups {
            let batches = t.gpu_metric_samples.iter().filter(|b| b.device == g.device);
            let (mut samples, mut overflows, mut dropped) = (0, 0, 0);
            if s.setups
                .iter()
                .any(|r| r.pid == pid && r.device == g.device)
            {
                continue;
            }
            for b in batches {
                samples += b.times.len() as u64;
                overflows += u64::from(b.overflow);
                dropped += b.dropped;
            }
            s.setups.push(SetupRow {
                pid,
                device: g.device,
                chip: g.chip.clone(),
                interval: g.interval,
                trigger: trigger_name(g.trigger),
                metrics: g.metrics.len(),
                samples,
                overflows,
                dropped,
            });
        }
    }
    // Each sampled GPU's timeline: (key, pid, ordinal, timeline).
    let mut timelines: Vec<(GpuKey, u32, u32, Timeline)> = Vec::new();
    // Without an evaluator, only the decodes that need one fail (with its reason).
    let why = evaluate.as_ref().err().cloned().unwrap_or_default();
    let failing = |_: &rtrace_format::GpuMetricsSetup,
                   _: &rtrace_format::GpuMetricSamples|
     -> Result<Vec<Vec<f64>>, String> { Err(why.clone()) };
    let f: &EvaluateFn<'_> = match &evaluate {
        Ok(f) => f,
        Err(_) => &failing,
    };
    for (ti, t) in traces.iter().enumerate() {
        if t.gpu_metric_samples.is_empty() {
            continue;
        }
        let (tls, errors) = trace_timelines(t, f);
        for e in errors {
            if !s.errors.contains(&e) {
                s.errors.push(e);
            }
        }
        for (d, tl) in tls {
            timelines.push((gpu_key(traces, ti, d), t.header.pid, d, tl));
        }
    }
    for (_, _, _, tl) in &timelines {
        for m in &tl.metrics {
            if !s.metrics.contains(m) {
                s.metrics.push(m.clone());
            }
        }
    }
    let columns = |tl: &Timeline, values: Vec<f64>| -> Vec<f64> {
        s.metrics
            .iter()
            .map(|m| {
                tl.metrics
                    .iter()
                    .position(|c| c == m)
                    .map_or(f64::NAN, |i| values[i])
            })
            .collect()
    };
    let row = |pid, device, name: String, tl: &Timeline, iv: Vec<(u64, u64)>| {
        let a = tl.average(iv);
        Row {
            pid,
            device,
            name,
            span_ns: a.span_ns,
            covered: a.covered(),
            values: columns(tl, a.values.clone()),
        }
    };
    for (_, pid, d, tl) in &timelines {
        let a = tl.overall();
        let name = device_name(traces, *pid, *d);
        s.devices.push(Row {
            pid: *pid,
            device: *d,
            name,
            span_ns: a.span_ns,
            covered: a.covered(),
            values: columns(tl, a.values),
        });
    }
    let timeline_of = |ti: usize, d: u32| {
        let key = gpu_key(traces, ti, d);
        timelines.iter().find(|x| x.0 == key).map(|x| &x.3)
    };
    for (ti, (t, w)) in traces.iter().zip(works).enumerate() {
        let pid = t.header.pid;
        let mut by_device: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
        let mut by_kernel: HashMap<(u32, u32), Vec<(u64, u64)>> = HashMap::new();
        let mut by_range: BTreeMap<(u32, String), Vec<(u64, u64)>> = BTreeMap::new();
        for &(d, name, a, b) in &w.kernels {
            by_device.entry(d).or_default().push((a, b));
            by_kernel.entry((d, name)).or_default().push((a, b));
        }
        for &(d, a, b) in &w.other {
            by_device.entry(d).or_default().push((a, b));
        }
        for (name, d, a, b) in &w.nvtx {
            by_range
                .entry((*d, name.clone()))
                .or_default()
                .push((*a, *b));
        }
        for (d, iv) in by_device {
            if let Some(tl) = timeline_of(ti, d) {
                s.processes
                    .push(row(pid, d, device_name(traces, pid, d), tl, iv));
            }
        }
        let mut kernels: Vec<Row> = by_kernel
            .into_iter()
            .filter_map(|((d, name), iv)| {
                let tl = timeline_of(ti, d)?;
                let shown = crate::demangle::demangle(&t.kernel_name(name)).into_owned();
                Some(row(pid, d, shown, tl, iv))
            })
            .collect();
        kernels.sort_by(|a, b| b.span_ns.cmp(&a.span_ns).then_with(|| a.name.cmp(&b.name)));
        s.kernels.extend(kernels);
        let mut ranges: Vec<Row> = by_range
            .into_iter()
            .filter_map(|((d, name), iv)| Some(row(pid, d, name, timeline_of(ti, d)?, iv)))
            .collect();
        ranges.sort_by(|a, b| b.span_ns.cmp(&a.span_ns).then_with(|| a.name.cmp(&b.name)));
        s.nvtx.extend(ranges);
    }
    s
}

fn device_name(traces: &[Trace], pid: u32, ordinal: u32) -> String {
    traces
        .iter()
        .find(|t| t.header.pid == pid)
        .and_then(|t| t.devices.get(&ordinal))
        .map_or_else(|| format!("device {ordinal}"), |d| d.name.clone())
}

#[cfg(test)]
mod tests;

/// A trace's sampled devices and their timelines, evaluated by `evaluate`; why decodes could
/// not be evaluated (each reason once).
pub fn trace_timelines(
    t: &Trace,
    evaluate: &EvaluateFn<'_>,
) -> (Vec<(u32, Timeline)>, Vec<String>) {
    let mut devices: Vec<u32> = t.gpu_metric_setups.iter().map(|g| g.device).collect();
    devices.sort_unstable();
    devices.dedup();
    let mut out = Vec::new();
    let mut errors: Vec<String> = Vec::new();
    for d in devices {
        if !t.gpu_metric_samples.iter().any(|b| b.device == d) {
            continue;
        }
        let (tl, e) = evaluate::timeline(d, &t.gpu_metric_setups, &t.gpu_metric_samples, evaluate);
        for e in e {
            if !errors.contains(&e) {
                errors.push(e);
            }
        }
        if !tl.samples.is_empty() {
            out.push((d, tl));
        }
    }
    (out, errors)
}

/// [`trace_timelines`], evaluating the decodes that carry no values through CUPTI loaded as
/// [`section_with_cupti`] loads it.
pub fn trace_timelines_with_cupti(t: &Trace) -> (Vec<(u32, Timeline)>, Vec<String>) {
    let cupti = std::cell::OnceCell::new();
    let f = |s: &rtrace_format::GpuMetricsSetup, b: &rtrace_format::GpuMetricSamples| {
        lazy_evaluate(&cupti, s, b)
    };
    trace_timelines(t, &f)
}

/// Evaluates a decode through CUPTI, loaded (from `$RTRACE_CUPTI_LIBRARY` or the loader's
/// search path) the first time one is needed.
fn lazy_evaluate(
    cupti: &std::cell::OnceCell<Result<crate::metrics::Cupti, String>>,
    s: &rtrace_format::GpuMetricsSetup,
    b: &rtrace_format::GpuMetricSamples,
) -> Result<Vec<Vec<f64>>, String> {
    let c = cupti.get_or_init(|| {
        crate::metrics::Cupti::load(crate::metrics::library_path(None).as_deref())
            .map_err(|e| format!("GPU metrics not evaluated: {e}"))
    });
    evaluate::HostEvaluator::new(c.as_ref().map_err(Clone::clone)?).evaluate(s, b)
}

/// [`section`], the decodes that carry no values evaluated through CUPTI (loaded from
/// `$RTRACE_CUPTI_LIBRARY` or the loader's search path when one is needed).
pub fn section_with_cupti(traces: &[Trace], works: &[Work]) -> GpuMetricsSection {
    let cupti = std::cell::OnceCell::new();
    let f = |s: &rtrace_format::GpuMetricsSetup, b: &rtrace_format::GpuMetricSamples| {
        lazy_evaluate(&cupti, s, b)
    };
    section(traces, works, Ok(&f))
}
