//! The report's "Kernel profiles" part: each profiled kernel launch's metric values
//! ([`rtrace_format::KernelProfile`]) grouped by kernel name, laid out like Nsight Compute's
//! sections (one block per named set of [`rtrace_format::metric_sets::SETS`] whose metrics
//! were collected, in that order, then "Other metrics"), with mean, min and max over the
//! launches; each launch linked to its kernel record by correlation id; the profiling set-ups
//! and every notice on why profiling is off; and the rules' findings.
//!
//! The files read top-down: this one (the part, built from the traces and their profiled
//! launches' kernel records), then `rules` (the findings), then `units` (a metric's unit).

pub mod rules;
pub mod units;

use crate::model::Trace;
use crate::occupancy::{occupancy, KernelLaunch, Theoretical};
use rtrace_format::metric_sets::SETS;
use rtrace_format::{KernelProfile, KernelRecord, ProfilerSetup, Replay, PROFILING_NOTICE};
use rules::{Facts, Finding};
use std::collections::HashMap;
use units::Unit;

/// The title of the block of metrics named by themselves.
pub const OTHER_METRICS: &str = "Other metrics";

/// The part; empty (and not shown) when nothing was profiled and no notice says why not.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProfileSection {
    pub setups: Vec<SetupRow>,
    pub notices: Vec<NoticeRow>,
    pub kernels: Vec<ProfiledKernel>,
}

impl ProfileSection {
    pub fn is_empty(&self) -> bool {
        self.setups.is_empty() && self.notices.is_empty() && self.kernels.is_empty()
    }
}

/// Profiling as set up on one context of one process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetupRow {
    pub pid: u32,
    pub context: u32,
    pub device: u32,
    pub chip: String,
    pub passes: u32,
    pub metrics: usize,
    pub replay: &'static str,
}

/// A notice on kernel profiling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoticeRow {
    pub pid: u32,
    pub message: String,
}

/// One kernel name's profiled launches.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfiledKernel {
    /// Demangled, as the rest of the report names kernels.
    pub name: String,
    pub launches: Vec<ProfiledLaunch>,
    pub blocks: Vec<Block>,
    /// Theoretical occupancy (%) of the first linked launch's configuration, where its device
    /// is described.
    pub theoretical_occupancy: Option<f64>,
    pub findings: Vec<Finding>,
    /// Why metrics asked for with `rtrace report --metrics` could not be evaluated, each
    /// reason once.
    pub evaluation_errors: Vec<String>,
}

/// One profiled launch.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfiledLaunch {
    pub pid: u32,
    pub context: u32,
    pub correlation: u64,
    /// Its place among the launches profiling chose.
    pub launch: u64,
    /// CUPTI's range name.
    pub range: String,
    /// What profiling it cost (end − start), ns.
    pub profiling_ns: u64,
    /// Its kernel record, when one has its correlation id.
    pub kernel: Option<LinkedKernel>,
    /// The metric values, in the setup's order.
    pub values: Vec<(String, f64)>,
    /// The NVTX ranges open around its launch call, outermost first.
    pub nvtx: Vec<String>,
    /// Metrics evaluated again from the launch's counter data (`rtrace report --metrics`):
    /// each value, or why CUPTI could not evaluate it.
    pub evaluated: Vec<(String, Result<f64, String>)>,
}

/// A profiled launch's kernel record, as the timeline shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkedKernel {
    pub device: u32,
    pub stream: u32,
    pub grid: [i32; 3],
    pub block: [i32; 3],
    pub start_ns: u64,
    pub duration_ns: u64,
}

/// A section: a named set's metrics that were collected, or the metrics named by themselves.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// The set's name (`SpeedOfLight`) or [`OTHER_METRICS`].
    pub title: String,
    pub rows: Vec<MetricRow>,
}

/// One metric over a kernel's launches.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricRow {
    pub metric: String,
    /// Nsight Compute's label (the metric's name for one named by itself).
    pub label: String,
    pub unit: Unit,
    /// Launches with a value (CUPTI evaluates NaN where it cannot).
    pub count: u64,
    /// NaN when `count` is 0.
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

/// What one trace's profiled launches link to.
#[derive(Clone, Debug, Default)]
pub struct TraceLinks {
    /// Their kernel records, by correlation id.
    pub kernels: HashMap<u64, KernelRecord>,
    /// Their launch calls' thread and start, by correlation id.
    pub calls: HashMap<u64, (u64, u64)>,
    /// The trace's NVTX ranges (empty without NVTX events).
    pub nvtx: Vec<crate::nvtx::NvtxRange>,
}

/// What profiled launches link to, per trace (as `traces` are ordered).
pub type Linked = Vec<TraceLinks>;

/// The correlation ids of a trace's profiled launches (what to link).
pub fn wanted(t: &Trace) -> std::collections::HashSet<u64> {
    t.kernel_profiles
        .iter()
        .map(|p| p.correlation)
        .filter(|&c| c != 0)
        .collect()
}

/// What the profiled launches of `t`, held in memory, link to.
pub fn linked_in_memory(t: &Trace) -> TraceLinks {
    let want = wanted(t);
    if want.is_empty() {
        return TraceLinks::default();
    }
    TraceLinks {
        kernels: t
            .kernels
            .iter()
            .filter(|k| {
                k.flags & rtrace_format::FLAG_CORRELATED != 0 && want.contains(&k.correlation)
            })
            .map(|k| (k.correlation, *k))
            .collect(),
        calls: t
            .threads
            .values()
            .flat_map(|th| th.records.iter().map(move |r| (th.tid, r)))
            .filter(|(_, r)| want.contains(&r.correlation))
            .map(|(tid, r)| (r.correlation, (tid, r.start_ns)))
            .collect(),
        nvtx: if crate::nvtx::has_nvtx(t) {
            crate::nvtx::ranges(t).ranges
        } else {
            Vec::new()
        },
    }
}

/// The NVTX ranges open when the call on thread `tid` started at `at`, outermost first:
/// push/pop ranges of that thread, start/end ranges of any. Each named `name`, or
/// `name@domain` outside the default domain.
fn open_ranges(ranges: &[crate::nvtx::NvtxRange], (tid, at): (u64, u64)) -> Vec<String> {
    ranges
        .iter()
        .filter(|r| (r.level.is_none() || r.tid == tid) && r.start_ns <= at && at < r.end_ns)
        .map(|r| {
            if r.domain == "(default)" {
                r.name.clone()
            } else {
                format!("{}@{}", r.name, r.domain)
            }
        })
        .collect()
}

/// A kernel's first linked launch configuration: the launch, its device and its trace.
type Config = (KernelLaunch, u32, usize);

/// The part over `traces`, with the kernel records `linked` (one map per trace).
pub fn section(traces: &[Trace], linked: &Linked) -> ProfileSection {
    let mut s = ProfileSection::default();
    let mut kernels: Vec<(ProfiledKernel, Option<Config>)> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    let none = TraceLinks::default();
    for (ti, t) in traces.iter().enumerate() {
        let pid = t.header.pid;
        s.setups.extend(t.profiler_setups.iter().map(|p| SetupRow {
            pid,
            context: p.context,
            device: p.device,
            chip: p.chip.clone(),
            passes: p.passes,
            metrics: p.metrics.len(),
            replay: match p.replay {
                Replay::Kernel => "kernel",
                Replay::Application => "application",
            },
        }));
        s.notices.extend(
            t.notices
                .iter()
                .filter(|n| n.message.starts_with(PROFILING_NOTICE))
                .map(|n| NoticeRow {
                    pid,
                    message: n.message.clone(),
                }),
        );
        let records = linked.get(ti).unwrap_or(&none);
        for p in &t.kernel_profiles {
            let setup = t
                .profiler_setups
                .iter()
                .rev()
                .find(|s| s.context == p.context);
            let names = setup.map_or(&[][..], |s| &s.metrics[..]);
            let record = records
                .kernels
                .get(&p.correlation)
                .filter(|_| p.correlation != 0);
            let nvtx = records
                .calls
                .get(&p.correlation)
                .filter(|_| p.correlation != 0)
                .map_or_else(Vec::new, |&call| open_ranges(&records.nvtx, call));
            let launch = ProfiledLaunch {
                pid,
                context: p.context,
                correlation: p.correlation,
                launch: p.launch,
                range: p.range.clone(),
                profiling_ns: p.end_ns.saturating_sub(p.start_ns),
                kernel: record.map(|k| LinkedKernel {
                    device: k.device,
                    stream: k.stream,
                    grid: k.grid,
                    block: k.block,
                    start_ns: k.start_ns,
                    duration_ns: k.end_ns.saturating_sub(k.start_ns),
                }),
                values: names
                    .iter()
                    .zip(p.values.iter().chain(std::iter::repeat(&f64::NAN)))
                    .map(|(n, &v)| (n.clone(), v))
                    .collect(),
                evaluated: Vec::new(),
                nvtx,
            };
            let name = crate::demangle::demangle(&p.name).into_owned();
            let i = *by_name.entry(name.clone()).or_insert_with(|| {
                kernels.push((
                    ProfiledKernel {
                        name,
                        launches: Vec::new(),
                        blocks: Vec::new(),
                        theoretical_occupancy: None,
                        findings: Vec::new(),
                        evaluation_errors: Vec::new(),
                    },
                    None,
                ));
                kernels.len() - 1
            });
            let (k, config) = &mut kernels[i];
            if config.is_none() {
                *config = record.map(|r| (KernelLaunch::from(r), r.device, ti));
            }
            k.launches.push(launch);
        }
    }
    s.kernels = kernels
        .into_iter()
        .map(|(mut k, config)| {
            k.blocks = blocks(&k.launches);
            let theoretical: Option<(Theoretical, KernelLaunch)> =
                config.and_then(|(launch, device, ti)| {
                    let info = traces[ti].devices.get(&device)?;
                    Some((occupancy(&launch, info).theoretical.ok()?, launch))
                });
            k.theoretical_occupancy = theoretical
                .as_ref()
                .map(|(t, _)| t.occupancy_percent.0 as f64 / 100.0);
            let means: HashMap<String, f64> = k
                .blocks
                .iter()
                .flat_map(|b| &b.rows)
                .map(|r| (r.metric.clone(), r.mean))
                .collect();
            k.findings = rules::findings(&Facts {
                means: &means,
                theoretical: theoretical.as_ref().map(|(t, _)| t),
                block_size: theoretical.as_ref().map_or(0, |(_, l)| l.block_size()),
                registers_per_thread: theoretical
                    .as_ref()
                    .map_or(0, |(_, l)| l.registers_per_thread),
            });
            k
        })
        .collect();
    s
}

/// The title of the block of metrics evaluated from counter data.
pub const EVALUATED: &str = "Evaluated from counter data";

/// Evaluates metrics from one range of a counter data image (the set-up's chip).
pub type Evaluate<'a> =
    dyn Fn(&ProfilerSetup, &[u8], usize) -> Vec<(String, Result<f64, String>)> + 'a;

/// The counter data image `p` was evaluated from, and its range there: its own image (range 0,
/// one launch per image), or in application replay, the image an earlier range of the same
/// context carries (range `launch`: one image holds a run's ranges; the library keeps it once).
fn counter_data<'t>(
    t: &'t Trace,
    setup: &ProfilerSetup,
    p: &'t KernelProfile,
) -> (&'t [u8], usize) {
    if setup.replay != rtrace_format::Replay::Application {
        return (&p.counter_data, 0);
    }
    let image = if p.counter_data.is_empty() {
        t.kernel_profiles
            .iter()
            .take_while(|q| !std::ptr::eq(*q, p))
            .filter(|q| q.context == p.context && !q.counter_data.is_empty())
            .last()
            .map_or(&[][..], |q| &q.counter_data[..])
    } else {
        &p.counter_data[..]
    };
    (image, p.launch as usize)
}

/// Adds to each launch of `s` the metrics `evaluate` finds in its counter data, and to each
/// kernel a block [`EVALUATED`] of them over its launches (labelled as the sets label them)
/// and the reasons any could not be evaluated. The rules read the recorded values only.
pub fn add_evaluated(s: &mut ProfileSection, traces: &[Trace], evaluate: &Evaluate) {
    for k in &mut s.kernels {
        for l in &mut k.launches {
            let found = traces
                .iter()
                .filter(|t| t.header.pid == l.pid)
                .find_map(|t| {
                    let p = t.kernel_profiles.iter().find(|p| {
                        (p.context, p.launch, p.correlation) == (l.context, l.launch, l.correlation)
                    })?;
                    let setup = t
                        .profiler_setups
                        .iter()
                        .rev()
                        .find(|s| s.context == p.context);
                    Some((t, setup, p))
                });
            l.evaluated = match found {
                Some((t, Some(setup), p)) => {
                    let (image, range) = counter_data(t, setup, p);
                    evaluate(setup, image, range)
                }
                _ => Vec::new(),
            };
            for (_, r) in &l.evaluated {
                if let Err(e) = r {
                    if !k.evaluation_errors.contains(e) {
                        k.evaluation_errors.push(e.clone());
                    }
                }
            }
        }
        let as_values: Vec<ProfiledLaunch> = k
            .launches
            .iter()
            .map(|l| ProfiledLaunch {
                values: l
                    .evaluated
                    .iter()
                    .map(|(n, r)| (n.clone(), *r.as_ref().unwrap_or(&f64::NAN)))
                    .collect(),
                evaluated: Vec::new(),
                ..l.clone()
            })
            .collect();
        let rows: Vec<MetricRow> = blocks(&as_values)
            .into_iter()
            .flat_map(|b| b.rows)
            .filter(|r| r.count > 0)
            .collect();
        if !rows.is_empty() {
            k.blocks.push(Block {
                title: EVALUATED.to_string(),
                rows,
            });
        }
    }
}

/// The blocks of a kernel's launches: each set's collected metrics in the set's order, then
/// the others in the order first met.
fn blocks(launches: &[ProfiledLaunch]) -> Vec<Block> {
    let mut order: Vec<&str> = Vec::new();
    let mut values: HashMap<&str, Vec<f64>> = HashMap::new();
    for l in launches {
        for (n, v) in &l.values {
            let e = values.entry(n.as_str()).or_insert_with(|| {
                order.push(n.as_str());
                Vec::new()
            });
            if v.is_finite() {
                e.push(*v);
            }
        }
    }
    let row = |name: &str, label: &str| {
        let v = &values[name];
        let (mut min, mut max, mut sum) = (f64::INFINITY, f64::NEG_INFINITY, 0.0);
        for &x in v {
            min = min.min(x);
            max = max.max(x);
            sum += x;
        }
        let n = v.len();
        MetricRow {
            metric: name.to_string(),
            label: label.to_string(),
            unit: Unit::of(name),
            count: n as u64,
            mean: if n == 0 { f64::NAN } else { sum / n as f64 },
            min: if n == 0 { f64::NAN } else { min },
            max: if n == 0 { f64::NAN } else { max },
        }
    };
    let mut out: Vec<Block> = SETS
        .iter()
        .map(|set| Block {
            title: set.name.to_string(),
            rows: set
                .metrics
                .iter()
                .filter(|m| values.contains_key(m.name))
                .map(|m| row(m.name, m.label))
                .collect(),
        })
        .filter(|b| !b.rows.is_empty())
        .collect();
    let others: Vec<MetricRow> = order
        .iter()
        .filter(|n| !SETS.iter().any(|s| s.metrics.iter().any(|m| m.name == **n)))
        .map(|n| row(n, n))
        .collect();
    if !others.is_empty() {
        out.push(Block {
            title: OTHER_METRICS.to_string(),
            rows: others,
        });
    }
    out
}

#[cfg(test)]
mod tests;
