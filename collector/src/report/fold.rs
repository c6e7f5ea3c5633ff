//! The report's per-record statistics as folds: each record is added to an accumulator of
//! its key (function, kernel, copy kind, launch configuration) and dropped. Each trace is
//! folded on its own ([`TraceFold`]), then merged by name into the report's rows
//! ([`Merged`]), so memory grows with the number of distinct keys, not of records.

use crate::gpu_summary::dist::Dist;
use crate::gpu_summary::fast_hash::FastMap;
use crate::gpu_summary::{
    ranked_kernels, ranked_memcpys, Hundredths, KernelSummary, MemcpySummary, MemsetSummary,
};
use crate::model::Trace;
use crate::occupancy::{occupancy, ranked, KernelLaunch, OccupancyRow, OccupancyRows};
use crate::summary::FunctionSummary;
use rtrace_format::{ApiRecord, CopyKind, KernelRecord, MemcpyRecord, MemsetRecord};
use std::collections::{BTreeMap, HashMap};

/// What a process section counts of the records a trace held (after the filter).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// API records per thread id (threads without records absent).
    pub threads: HashMap<u64, u64>,
    pub api: u64,
    pub kernels: u64,
    pub memcpys: u64,
    pub memsets: u64,
    /// Allocations and frees; synchronizations.
    pub memory: u64,
    pub syncs: u64,
    /// The latest end of an API record.
    pub last_api_end: Option<u64>,
}

impl Counts {
    /// API records of thread `tid`.
    pub fn thread(&self, tid: u64) -> u64 {
        self.threads.get(&tid).copied().unwrap_or(0)
    }

    /// Kernels, copies and memsets.
    pub fn gpu(&self) -> u64 {
        self.kernels + self.memcpys + self.memsets
    }

    /// How long the process of `t` was traced ([`Trace::duration`], from these counts).
    pub fn duration(&self, t: &Trace) -> crate::model::Duration {
        use crate::model::Duration;
        let start = t.header.start.monotonic_ns;
        if let Some(end) = &t.end {
            Duration::ToEnd(end.end.monotonic_ns.saturating_sub(start))
        } else if let Some(last) = self.last_api_end {
            Duration::ToLastRecord(last.saturating_sub(start))
        } else {
            Duration::Unknown
        }
    }
}

type Launch = ([i32; 3], [i32; 3]);

/// One kernel name id's launches in one trace.
#[derive(Clone, Debug, Default)]
struct KernelAcc {
    dist: Dist,
    /// The first launch (its index among the trace's kernels, and configuration), and
    /// whether every launch agreed with it.
    first: Option<(u64, Launch)>,
    uniform: bool,
}

/// The statistics of one trace's records.
#[derive(Debug, Default)]
pub struct TraceFold {
    pub counts: Counts,
    /// Function id → failed calls by code, durations.
    api: FastMap<u32, (BTreeMap<u32, u64>, Dist)>,
    kernels: FastMap<u32, KernelAcc>,
    /// Copy kind → durations, sizes.
    memcpy: FastMap<CopyKind, (Dist, Dist)>,
    /// Memsets' durations, sizes.
    memset: (Dist, Dist),
    /// (name id, device, configuration) → launches; (name id, device) → their time.
    configs: FastMap<(u32, u32, KernelLaunch), u64>,
    config_time: FastMap<(u32, u32), u128>,
    /// The latest configurations' launches and time, not yet in `configs` and `config_time`
    /// (a few, looked up in order: kernels mostly repeat a few configurations; added to the
    /// maps when a new one finds it full, and by [`TraceFold::settled`]).
    recent: Vec<((u32, u32, KernelLaunch), u64, u128)>,
}

/// Configurations [`TraceFold::recent`] holds.
const RECENT: usize = 8;

fn duration(start: u64, end: u64) -> u64 {
    end.saturating_sub(start)
}

impl TraceFold {
    #[inline]
    pub fn api(&mut self, tid: u64, r: &ApiRecord) {
        *self.counts.threads.entry(tid).or_insert(0) += 1;
        self.api_untallied(r);
    }

    /// [`TraceFold::api`] for a chunk of one thread's records (tallied once).
    pub fn api_chunk(&mut self, tid: u64, records: impl Iterator<Item = ApiRecord>) {
        let mut n = 0;
        for r in records {
            self.api_untallied(&r);
            n += 1;
        }
        if n > 0 {
            *self.counts.threads.entry(tid).or_insert(0) += n;
        }
    }

    /// Takes the API records' fold from `api`, a fold given only API records (this one none):
    /// what folding both kinds into one would give.
    pub fn take_api(&mut self, api: TraceFold) {
        self.counts.threads = api.counts.threads;
        self.counts.api = api.counts.api;
        self.counts.last_api_end = api.counts.last_api_end;
        self.api = api.api;
    }

    #[inline]
    fn api_untallied(&mut self, r: &ApiRecord) {
        self.counts.api += 1;
        self.counts.last_api_end = Some(
            self.counts
                .last_api_end
                .map_or(r.end_ns, |e| e.max(r.end_ns)),
        );
        let e = self.api.entry(r.function).or_default();
        if r.result != 0 {
            *e.0.entry(r.result).or_insert(0) += 1;
        }
        e.1.add(duration(r.start_ns, r.end_ns));
    }

    #[inline]
    pub fn kernel(&mut self, k: &KernelRecord) {
        let index = self.counts.kernels;
        self.counts.kernels += 1;
        let d = duration(k.start_ns, k.end_ns);
        let acc = self.kernels.entry(k.name).or_insert_with(|| KernelAcc {
            uniform: true,
            ..Default::default()
        });
        acc.dist.add(d);
        match acc.first {
            None => acc.first = Some((index, (k.grid, k.block))),
            Some((_, first)) => acc.uniform &= first == (k.grid, k.block),
        }
        let key = (k.name, k.device, KernelLaunch::from(k));
        match self.recent.iter_mut().find(|r| r.0 == key) {
            Some(r) => {
                r.1 += 1;
                r.2 += u128::from(d);
            }
            None => {
                if self.recent.len() == RECENT {
                    self.settle_recent();
                }
                self.recent.push((key, 1, u128::from(d)));
            }
        }
    }

    /// Adds the recent configurations' launches and time to the maps.
    fn settle_recent(&mut self) {
        for ((name, device, launch), n, time) in self.recent.drain(..) {
            *self.configs.entry((name, device, launch)).or_insert(0) += n;
            *self.config_time.entry((name, device)).or_insert(0) += time;
        }
    }

    /// The fold with every launch in the configuration maps (as [`Merged::add`] reads them).
    fn settled(mut self) -> TraceFold {
        self.settle_recent();
        self
    }

    #[inline]
    pub fn memcpy(&mut self, m: &MemcpyRecord) {
        self.counts.memcpys += 1;
        let e = self.memcpy.entry(m.kind).or_default();
        e.0.add(duration(m.start_ns, m.end_ns));
        e.1.add(m.bytes);
    }

    #[inline]
    pub fn memset(&mut self, s: &MemsetRecord) {
        self.counts.memsets += 1;
        self.memset.0.add(duration(s.start_ns, s.end_ns));
        self.memset.1.add(s.bytes);
    }

    /// Every record of an in-memory trace.
    pub fn of(t: &Trace) -> TraceFold {
        let mut f = TraceFold::default();
        for (&tid, th) in &t.threads {
            f.api_chunk(tid, th.records.iter().copied());
        }
        t.kernels.iter().for_each(|k| f.kernel(k));
        t.memcpys.iter().for_each(|m| f.memcpy(m));
        t.memsets.iter().for_each(|s| f.memset(s));
        f.counts.memory = t.memory.len() as u64;
        f.counts.syncs = t.syncs.len() as u64;
        f
    }
}

/// How a trace's keys map to the merged rows (for selection passes).
#[derive(Debug, Default)]
pub struct KeyMap {
    /// Function id → index in [`Merged::api`].
    pub api: HashMap<u32, usize>,
    /// Kernel name id → index in [`Merged::kernels`].
    pub kernels: HashMap<u32, usize>,
}

struct ApiRow {
    name: String,
    /// Driver calls made inside runtime calls ([`rtrace_format::IN_RUNTIME`]): a row of their
    /// own, apart from the same function's calls made outside them.
    in_runtime: bool,
    errors: BTreeMap<u32, u64>,
    dist: Dist,
}

struct KernelRow {
    name: String,
    dist: Dist,
    /// (trace index, kernel index) of the first launch, its configuration; uniform.
    first: Option<((usize, u64), Launch)>,
    uniform: bool,
}

/// The folds of every trace, merged by name.
#[derive(Default)]
pub struct Merged {
    api: Vec<ApiRow>,
    api_index: HashMap<(bool, String), usize>,
    kernels: Vec<KernelRow>,
    kernel_index: HashMap<String, usize>,
    /// Copy kind → durations, sizes; memsets' durations, sizes.
    memcpy: HashMap<CopyKind, (Dist, Dist)>,
    memset: (Dist, Dist),
    /// (name, device, device name, configuration) → launches, and time per name, of kernels
    /// on described devices; launches on others.
    configs: HashMap<(String, u32, String, KernelLaunch), (u64, crate::occupancy::Occupancy)>,
    config_time: HashMap<String, u128>,
    undescribed: u64,
}

impl Merged {
    /// Merges the fold of trace `ti` (`t`: its names, devices); returns how its keys map to
    /// the merged rows.
    pub fn add(&mut self, ti: usize, t: &Trace, f: TraceFold) -> KeyMap {
        let f = f.settled();
        let mut keys = KeyMap::default();
        for (id, (errors, dist)) in f.api {
            let name = t.function_name(id).into_owned();
            let in_runtime = rtrace_format::in_runtime(id);
            let key = (in_runtime, name.clone());
            let i = *self.api_index.entry(key).or_insert_with(|| {
                self.api.push(ApiRow {
                    name,
                    in_runtime,
                    errors: BTreeMap::new(),
                    dist: Dist::default(),
                });
                self.api.len() - 1
            });
            let row = &mut self.api[i];
            for (code, n) in errors {
                *row.errors.entry(code).or_insert(0) += n;
            }
            row.dist.merge(&dist);
            keys.api.insert(id, i);
        }
        let mut names: HashMap<u32, String> = HashMap::new();
        for (id, acc) in f.kernels {
            let name = names
                .entry(id)
                .or_insert_with(|| t.kernel_display_name(id))
                .clone();
            let i = *self.kernel_index.entry(name.clone()).or_insert_with(|| {
                self.kernels.push(KernelRow {
                    name,
                    dist: Dist::default(),
                    first: None,
                    uniform: true,
                });
                self.kernels.len() - 1
            });
            let row = &mut self.kernels[i];
            row.dist.merge(&acc.dist);
            if let Some((index, launch)) = acc.first {
                let at = (ti, index);
                row.first = match row.first {
                    None => Some((at, launch)),
                    Some((a, l)) => {
                        row.uniform &= l == launch;
                        Some(if at < a { (at, launch) } else { (a, l) })
                    }
                };
            }
            row.uniform &= acc.uniform;
            keys.kernels.insert(id, i);
        }
        for (kind, (durations, sizes)) in f.memcpy {
            let e = self.memcpy.entry(kind).or_default();
            e.0.merge(&durations);
            e.1.merge(&sizes);
        }
        self.memset.0.merge(&f.memset.0);
        self.memset.1.merge(&f.memset.1);
        if t.devices.is_empty() {
            self.undescribed += f.configs.values().sum::<u64>();
        } else {
            for ((id, device, launch), n) in f.configs {
                let Some(info) = t.devices.get(&device) else {
                    self.undescribed += n;
                    continue;
                };
                let name = names
                    .entry(id)
                    .or_insert_with(|| t.kernel_display_name(id))
                    .clone();
                self.configs
                    .entry((name, device, info.name.clone(), launch))
                    .or_insert_with(|| (0, occupancy(&launch, info)))
                    .0 += n;
            }
            for ((id, device), time) in f.config_time {
                if t.devices.contains_key(&device) {
                    let name = names
                        .entry(id)
                        .or_insert_with(|| t.kernel_display_name(id))
                        .clone();
                    *self.config_time.entry(name).or_insert(0) += time;
                }
            }
        }
        keys
    }

    /// Ends a pass over the values of the kinds `wanted` (the others' medians are left as
    /// they are); says which kinds' medians need another ([`Merged::api_select`],
    /// [`Merged::kernel_select`], [`Merged::memcpy_select`]).
    pub fn end_pass(&mut self, wanted: Pending) -> Pending {
        let mut p = Pending::default();
        if wanted.api {
            for r in &mut self.api {
                p.api |= r.dist.end_pass();
            }
        }
        if wanted.kernels {
            for r in &mut self.kernels {
                p.kernels |= r.dist.end_pass();
            }
        }
        if wanted.memcpys {
            for (durations, sizes) in self.memcpy.values_mut() {
                p.memcpys |= durations.end_pass();
                p.memcpys |= sizes.end_pass();
            }
        }
        if wanted.memsets {
            p.memsets |= self.memset.0.end_pass();
            p.memsets |= self.memset.1.end_pass();
        }
        p
    }

    #[inline]
    pub fn api_select(&mut self, row: usize, r: &ApiRecord) {
        if let Some(row) = self.api.get_mut(row) {
            row.dist.select(duration(r.start_ns, r.end_ns));
        }
    }

    #[inline]
    pub fn kernel_select(&mut self, row: usize, k: &KernelRecord) {
        if let Some(row) = self.kernels.get_mut(row) {
            row.dist.select(duration(k.start_ns, k.end_ns));
        }
    }

    #[inline]
    pub fn memcpy_select(&mut self, m: &MemcpyRecord) {
        if let Some((durations, sizes)) = self.memcpy.get_mut(&m.kind) {
            if durations.selecting() {
                durations.select(duration(m.start_ns, m.end_ns));
            }
            if sizes.selecting() {
                sizes.select(m.bytes);
            }
        }
    }

    #[inline]
    pub fn memset_select(&mut self, s: &MemsetRecord) {
        self.memset.0.select(duration(s.start_ns, s.end_ns));
        self.memset.1.select(s.bytes);
    }

    /// The time of every copy and memset.
    fn memory_op_time(&self) -> u128 {
        self.memcpy.values().map(|(d, _)| d.total).sum::<u128>() + self.memset.0.total
    }

    /// The rows of the API summary ([`crate::summary::api_summary`]): runtime calls, and
    /// driver calls made outside them.
    pub fn api_rows(&self) -> Vec<FunctionSummary> {
        self.api_rows_of(false)
    }

    /// The rows of driver calls made inside runtime calls.
    pub fn in_runtime_rows(&self) -> Vec<FunctionSummary> {
        self.api_rows_of(true)
    }

    fn api_rows_of(&self, in_runtime: bool) -> Vec<FunctionSummary> {
        let all: u128 = self
            .api
            .iter()
            .filter(|r| r.in_runtime == in_runtime)
            .map(|r| r.dist.total)
            .sum();
        let mut rows: Vec<FunctionSummary> = self
            .api
            .iter()
            .filter(|r| r.in_runtime == in_runtime)
            .map(|r| {
                let s = r.dist.stats();
                FunctionSummary {
                    function: r.name.clone(),
                    calls: s.count,
                    errors: r.errors.values().sum(),
                    total_ns: s.total_ns(),
                    mean_ns: s.mean,
                    median_ns: s.median,
                    min_ns: s.min,
                    max_ns: s.max,
                    stddev_ns: s.stddev,
                    share_percent: Hundredths::percent(s.total, all),
                    error_codes: r.errors.iter().map(|(&c, &n)| (c, n)).collect(),
                }
            })
            .collect();
        crate::summary::sort_rows(&mut rows);
        rows
    }

    /// The rows of the kernel summary ([`crate::gpu_summary::kernel_summary`]).
    pub fn kernel_rows(&self) -> Vec<KernelSummary> {
        let all: u128 = self.kernels.iter().map(|r| r.dist.total).sum();
        let rows = self
            .kernels
            .iter()
            .map(|r| {
                let launch = r.first.filter(|_| r.uniform).map(|(_, launch)| launch);
                KernelSummary::new(r.name.clone(), &r.dist.stats(), all, launch)
            })
            .collect();
        ranked_kernels(rows)
    }

    /// The rows of the copy summary ([`crate::gpu_summary::memcpy_summary`]).
    pub fn memcpy_rows(&self) -> Vec<MemcpySummary> {
        let all = self.memory_op_time();
        let rows = self
            .memcpy
            .iter()
            .map(|(kind, (d, size))| MemcpySummary::new(*kind, &d.stats(), &size.stats(), all))
            .collect();
        ranked_memcpys(rows)
    }

    /// The memsets ([`crate::gpu_summary::memset_summary`]).
    pub fn memset(&self) -> Option<MemsetSummary> {
        let (d, size) = &self.memset;
        MemsetSummary::new(&d.stats(), &size.stats(), self.memory_op_time())
    }

    /// The occupancy rows ([`crate::occupancy::occupancy_rows`]).
    pub fn occupancy(&self, limit: usize) -> OccupancyRows {
        let rows: Vec<OccupancyRow> = self
            .configs
            .iter()
            .map(
                |((name, device, device_name, launch), (launches, occ))| OccupancyRow {
                    name: name.clone(),
                    device: *device,
                    device_name: device_name.clone(),
                    launches: *launches,
                    launch: *launch,
                    occupancy: occ.clone(),
                },
            )
            .collect();
        let time = |name: &str| self.config_time.get(name).copied().unwrap_or(0);
        ranked(rows, time, limit, self.undescribed)
    }
}

/// Which records a selection pass must see again (or, as asked, which kinds' medians are
/// wanted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pending {
    pub api: bool,
    pub kernels: bool,
    pub memcpys: bool,
    pub memsets: bool,
}

impl Pending {
    /// Every kind.
    pub const ALL: Pending = Pending {
        api: true,
        kernels: true,
        memcpys: true,
        memsets: true,
    };

    pub fn any(&self) -> bool {
        self.api || self.kernels || self.memcpys || self.memsets
    }
}
