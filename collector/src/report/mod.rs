//! `rtrace report` in bounded memory: the trace files are read as streams of chunks, and
//! every API, kernel, copy and memset record is folded into per-key accumulators
//! ([`fold`]) as it is read, then dropped. What the report needs beyond folds comes from
//! reading chunks again, found through an index of them kept on the first pass (a few words
//! per chunk):
//!
//! - exact medians: a duration distribution with many distinct values narrows the range
//!   holding its median pass by pass ([`dist`]);
//! - utilisation: each device's and stream's records are merged into the union of their
//!   intervals in any order; an interval is settled once no chunk still to read starts
//!   before its end ([`union`]);
//! - launch latency: API records are looked up by correlation id in a table of a window of
//!   ids at a time (`ID_RANGE` ids, each window starting at the least id a call has that no
//!   window held yet: `join.rs`), filled from the API chunks whose ids reach into it, while
//!   the GPU chunks whose ids do are matched against it ([`latency`]);
//! - synchronizations: each is folded into its kind's row once the same join has found the
//!   call it is linked to (a `cuStreamQuery` or `cuEventQuery` makes it a query);
//! - the calls that created streams and loaded modules: only the API records with those
//!   correlation ids are kept;
//! - memory in use: the allocation and free chunks of every file are merged by time
//!   ([`memory_pass`]), holding the allocations in use, not the records.
//!
//! Every section but the memory one is per process or a sum over processes, so files are
//! read one after the other; no merge by time across files is needed but for memory in use
//! and the GPUs that processes shared. The other records (resources, module images, PC
//! samples, notices) are kept as [`Trace::read`] keeps them: they grow with what the program
//! loads and creates, not with how long it runs. A trace holding
//! NVTX events is read twice more, to project its ranges and external ids onto the GPU work
//! of the calls inside them in time order ([`crate::nvtx::project`]).
//! Memory grows with the number of distinct functions, kernels, launch configurations,
//! devices and streams, and of the chunks, not with the number of records.

pub mod fold;
mod join;

pub use crate::read::index::StreamError;

use crate::filter::{Filter, RecordFilter};
use crate::gpu_summary::{latency, union};
use crate::gpu_summary::{linked, MemoryFold, SyncFold};
use crate::gpu_summary::{Latencies, Utilisation, LATENCY_ROWS};
use crate::model::Trace;
use crate::occupancy::OccupancyRows;
use crate::read::first::hold_names;
use crate::read::index::{ChunkRef, Kind, Rereader};
use crate::read::inputs::expand_inputs;
use crate::read::merge::{merge, read_error, Sources};
use crate::read::records::{decode, FileSource, Rec, Records};
use crate::read::trace::{kernel_names_kept, read_light, Loaded, RecordSink};
use crate::summary::FunctionSummary;
use fold::{Counts, KeyMap, Merged, TraceFold};
use rtrace_format::{Chunk, MemcpyRecord, FLAG_CORRELATED};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Correlation ids looked up at once by the latency join: a table of 16 bytes per id (64 MiB).
const ID_RANGE: u64 = 1 << 22;

/// Everything the report prints that is computed from the API and GPU records.
#[derive(Clone, Debug, Default)]
pub struct Sections {
    /// Per trace (in order): what it held.
    pub counts: Vec<Counts>,
    pub api: Vec<FunctionSummary>,
    pub kernels: Vec<crate::gpu_summary::KernelSummary>,
    pub memcpy: Vec<crate::gpu_summary::MemcpySummary>,
    pub memset: Option<crate::gpu_summary::MemsetSummary>,
    pub utilisation: Vec<Utilisation>,
    /// GPUs that several traced processes of one host ran work on.
    pub shared: Vec<crate::gpu_summary::SharedDevice>,
    pub latency: Latencies,
    /// Every configuration (no row limit).
    pub occupancy: OccupancyRows,
    /// NVTX ranges and external ids.
    pub nvtx: crate::nvtx::NvtxSection,
    /// Memory in use per kind, over every trace.
    pub memory: Vec<crate::gpu_summary::MemorySummary>,
    /// Host waits per kind of synchronization, over every trace.
    pub sync: Vec<crate::gpu_summary::SyncSummary>,
}

impl Sections {
    /// The sections of traces held in memory.
    pub fn of(traces: &[Trace]) -> Sections {
        let mut merged = Merged::default();
        let mut counts = Vec::new();
        let mut keys = Vec::new();
        for (ti, t) in traces.iter().enumerate() {
            let f = TraceFold::of(t);
            counts.push(f.counts.clone());
            keys.push(merged.add(ti, t, f));
        }
        loop {
            let p = merged.end_pass();
            if !p.any() {
                break;
            }
            for (t, k) in traces.iter().zip(&keys) {
                select_in_memory(&mut merged, p, t, k);
            }
        }
        Sections {
            counts,
            api: merged.api_rows(),
            kernels: merged.kernel_rows(),
            memcpy: merged.memcpy_rows(),
            memset: merged.memset(),
            utilisation: crate::gpu_summary::utilisation(traces),
            shared: crate::gpu_summary::shared_devices(traces),
            latency: crate::gpu_summary::launch_latency(traces, LATENCY_ROWS),
            occupancy: merged.occupancy(usize::MAX),
            nvtx: crate::nvtx::section(traces),
            memory: crate::gpu_summary::memory_summary(traces),
            sync: crate::gpu_summary::sync_summary(traces),
        }
    }
}

fn select_in_memory(merged: &mut Merged, p: fold::Pending, t: &Trace, k: &KeyMap) {
    if p.api {
        for r in t.threads.values().flat_map(|th| &th.records) {
            if let Some(&row) = k.api.get(&r.function) {
                merged.api_select(row, r);
            }
        }
    }
    if p.kernels {
        for r in &t.kernels {
            if let Some(&row) = k.kernels.get(&r.name) {
                merged.kernel_select(row, r);
            }
        }
    }
    if p.memcpys {
        t.memcpys.iter().for_each(|m| merged.memcpy_select(m));
    }
}

/// The first pass's sink: folds the kept records, indexes their chunks, notes whether there
/// are NVTX ranges, marks or external ids (streamed later, not held).
struct FirstPass<'a> {
    keep: &'a RecordFilter<'a>,
    fold: TraceFold,
    index: Vec<ChunkRef>,
    nvtx: bool,
    /// The synchronizations linked to no call (those linked to one wait for the join).
    syncs: SyncFold,
}

impl RecordSink for FirstPass<'_> {
    fn records(&mut self, trace: &mut Trace, chunk: &Chunk, records: Records) {
        match records {
            Records::Nvtx(v) => {
                self.nvtx |= hold_names(trace.thread_mut(chunk.header.thread), v);
            }
            Records::Api(v) => {
                let mut c = ChunkRef::new(chunk, Kind::Api, 0);
                let keep = self.keep;
                let kept = v.into_iter().filter_map(|r| keep.api(r)).inspect(|r| {
                    c.id(r.correlation);
                    c.min_start = c.min_start.min(r.start_ns);
                });
                self.fold.api_chunk(chunk.header.thread, kept);
                if c.min_start != u64::MAX {
                    self.index.push(c);
                }
            }
            Records::Kernels(v) => {
                let mut c = ChunkRef::new(chunk, Kind::Kernels, self.fold.counts.kernels);
                for k in v.into_iter().filter_map(|k| self.keep.kernel(k)) {
                    if k.flags & FLAG_CORRELATED != 0 {
                        c.id(k.correlation);
                    }
                    c.min_start = c.min_start.min(k.start_ns);
                    self.fold.kernel(&k);
                }
                if c.min_start != u64::MAX {
                    self.index.push(c);
                }
            }
            Records::Memcpys(v) => self.copies(chunk, Kind::Memcpys, v.into_iter()),
            Records::PeerCopies(v) => {
                self.copies(chunk, Kind::PeerCopies, v.into_iter().map(|p| p.copy))
            }
            Records::Memsets(v) => {
                let mut c = ChunkRef::new(chunk, Kind::Memsets, self.fold.counts.memsets);
                for s in v.into_iter().filter_map(|s| self.keep.memset(s)) {
                    if s.correlation != 0 {
                        c.id(s.correlation);
                    }
                    c.min_start = c.min_start.min(s.start_ns);
                    self.fold.memset(&s);
                }
                if c.min_start != u64::MAX {
                    self.index.push(c);
                }
            }
            Records::Memory(v) => {
                let mut c = ChunkRef::new(chunk, Kind::Memory, self.fold.counts.memory);
                for m in v.into_iter().filter_map(|m| self.keep.memory(m)) {
                    c.min_start = c.min_start.min(m.timestamp_ns);
                    self.fold.counts.memory += 1;
                }
                if c.min_start != u64::MAX {
                    self.index.push(c);
                }
            }
            Records::Syncs(v) => {
                let mut c = ChunkRef::new(chunk, Kind::Syncs, self.fold.counts.syncs);
                for y in v.into_iter().filter_map(|y| self.keep.sync(y)) {
                    self.fold.counts.syncs += 1;
                    if linked(y.flags) {
                        c.id(y.correlation);
                    } else {
                        self.syncs.add(y.kind.name(), &y);
                    }
                }
                if c.min_id <= c.max_id {
                    self.index.push(c);
                }
            }
        }
    }
}

impl FirstPass<'_> {
    fn copies(&mut self, chunk: &Chunk, kind: Kind, records: impl Iterator<Item = MemcpyRecord>) {
        let mut c = ChunkRef::new(chunk, kind, self.fold.counts.memcpys);
        for m in records.filter_map(|m| self.keep.memcpy(m)) {
            if u32::from(m.flags) & FLAG_CORRELATED != 0 {
                c.id(m.correlation);
            }
            c.min_start = c.min_start.min(m.start_ns);
            self.fold.memcpy(&m);
        }
        if c.min_start != u64::MAX {
            self.index.push(c);
        }
    }
}

/// One input as the report reads it.
struct Input<'a> {
    path: PathBuf,
    keep: RecordFilter<'a>,
    index: Vec<ChunkRef>,
    keys: KeyMap,
}

/// The report's traces (held without their API and GPU records, unless they have NVTX
/// events) and its sections, reading `paths` (files, or directories of `*.bin` files) as
/// streams; `filter` applied as [`crate::filter::apply_all`] would.
pub fn report_inputs(
    paths: &[PathBuf],
    filter: &Filter,
) -> Result<(Loaded, Sections), StreamError> {
    report_inputs_with(paths, filter, ID_RANGE)
}

/// [`report_inputs`], looking correlation ids up `id_range` at a time.
fn report_inputs_with(
    paths: &[PathBuf],
    filter: &Filter,
    id_range: u64,
) -> Result<(Loaded, Sections), StreamError> {
    let found = expand_inputs(paths)?;
    let headers = crate::filter::read_headers(&found.files)?;
    let refs: Vec<&rtrace_format::ProcessHeader> = headers.iter().collect();
    let shifts = crate::clocks::shifts(&refs);
    let shift_of = |i: usize| shifts.get(i).cloned().flatten();
    let base = crate::filter::earliest_start(headers.iter().enumerate().map(|(i, h)| {
        let delta = shift_of(i).map_or(0, |s| s.ns);
        crate::clocks::shifted(h.start.monotonic_ns, delta)
    }));
    let kept: Vec<usize> = (0..found.files.len())
        .filter(|&i| filter.keeps_process(headers[i].pid))
        .collect();
    if kept.is_empty() && !filter.pids.is_empty() {
        let all: Vec<String> = headers.iter().map(|h| h.pid.to_string()).collect();
        let pids: Vec<String> = filter.pids.iter().map(u32::to_string).collect();
        return Err(StreamError::Filter(format!(
            "no trace of process {} among the inputs (their processes: {})",
            pids.join(", "),
            all.join(", ")
        )));
    }
    let from = filter.from_ns.map_or(0, |f| base.saturating_add(f));
    let to = filter.to_ns.map_or(u64::MAX, |v| base.saturating_add(v));
    let mut loaded = Loaded {
        traces: Vec::new(),
        skipped: found.skipped,
    };
    let mut merged = Merged::default();
    let mut counts = Vec::new();
    let mut inputs: Vec<Input> = Vec::new();
    let mut nvtx_stats = crate::nvtx::NvtxStats::default();
    let mut nvtx_ids = Vec::new();
    let mut syncs = SyncFold::default();
    for &i in &kept {
        let path = &found.files[i];
        let shift = shift_of(i);
        let names = match &filter.kernel {
            Some(re) => Some(kernel_names_kept(path, re)?),
            None => None,
        };
        let keep = RecordFilter::new(shift.as_ref().map_or(0, |s| s.ns), from, to, filter, names);
        let mut first = FirstPass {
            keep: &keep,
            fold: TraceFold::default(),
            index: Vec::new(),
            nvtx: false,
            syncs: SyncFold::default(),
        };
        let mut t = read_light(path, &mut first)?;
        let index = std::mem::take(&mut first.index);
        let (fold, nvtx) = (first.fold, first.nvtx);
        syncs.merge(first.syncs);
        if let Some(s) = shift {
            t.shift_times(s.ns);
            t.clock_shift = Some(s);
        }
        filter.apply(&mut t, base);
        if nvtx {
            // NVTX ranges are built and projected onto the GPU work of the calls inside them
            // as the events and records stream by again, in time order.
            let (projected, chunks) = crate::nvtx::project(path, &t, &keep)?;
            nvtx_ids.push((nvtx_stats.add(projected), chunks));
        } else {
            nvtx_ids.push((HashMap::new(), Vec::new()));
        }
        counts.push(fold.counts.clone());
        let keys = merged.add(loaded.traces.len(), &t, fold);
        loaded.traces.push(t);
        inputs.push(Input {
            path: path.clone(),
            keep,
            index,
            keys,
        });
    }
    // The API calls that created streams, loaded or unloaded modules.
    for (t, input) in loaded.traces.iter_mut().zip(&inputs) {
        linked_calls(t, input, &input.index)?;
    }
    loop {
        let p = merged.end_pass();
        if !p.any() {
            break;
        }
        for input in &inputs {
            select_streamed(&mut merged, p, input, &input.index)?;
        }
    }
    // Exact medians of NVTX range durations: the ranges' events read again while needed.
    while nvtx_stats.end_pass() {
        for ((t, input), (ids, chunks)) in loaded.traces.iter().zip(&inputs).zip(&nvtx_ids) {
            if !chunks.is_empty() {
                crate::nvtx::nvtx_pass(&input.path, t, &input.keep, chunks, |k, v| {
                    if let Some(&row) = ids.get(&k) {
                        nvtx_stats.select(row, v);
                    }
                })?;
            }
        }
    }
    let mut utilisation = Vec::new();
    let mut top = latency::Top::new(LATENCY_ROWS);
    let mut ran = Vec::new();
    for (ti, (t, input)) in loaded.traces.iter().zip(&inputs).enumerate() {
        let mut join = Join {
            top: &mut top,
            syncs: &mut syncs,
            ti,
            trace: t,
        };
        let rows = gpu_pass(&mut join, input, &input.index, id_range)?;
        ran.extend(
            rows.iter()
                .filter(|u| u.stream.is_none())
                .map(|u| (ti, u.device)),
        );
        utilisation.extend(rows);
    }
    let groups = crate::gpu_summary::shared_groups(&loaded.traces, ran);
    let shared = shared_pass(&loaded.traces, &inputs, groups)?;
    let memory = memory_pass(&inputs)?;
    let sections = Sections {
        counts,
        api: merged.api_rows(),
        kernels: merged.kernel_rows(),
        memcpy: merged.memcpy_rows(),
        memset: merged.memset(),
        utilisation,
        shared,
        latency: top.finish(&loaded.traces),
        occupancy: merged.occupancy(usize::MAX),
        nvtx: nvtx_stats.finish(),
        memory,
        sync: syncs.rows(),
    };
    Ok((loaded, sections))
}

/// Puts into `t` the kept API records whose correlation ids its linked streams and modules
/// name (what [`Trace::api_records_for`] is asked for about them).
fn linked_calls(t: &mut Trace, input: &Input, index: &[ChunkRef]) -> Result<(), StreamError> {
    let wanted: std::collections::HashSet<u64> = t
        .streams
        .iter()
        .filter(|s| linked(s.flags))
        .map(|s| s.correlation)
        .chain(
            t.modules
                .iter()
                .chain(&t.module_unloads)
                .filter(|m| linked(m.flags))
                .map(|m| m.correlation),
        )
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let (lo, hi) = (
        wanted.iter().min().copied().unwrap_or(0),
        wanted.iter().max().copied().unwrap_or(0),
    );
    let mut file = Rereader::open(&input.path)?;
    for c in index
        .iter()
        .filter(|c| c.kind == Kind::Api && c.reaches(lo, hi))
    {
        let chunk = file.chunk(c.offset)?;
        if let Records::Api(records) = decode(c, &chunk, &input.path)? {
            let found = records
                .into_iter()
                .filter_map(|r| input.keep.api(r))
                .filter(|r| wanted.contains(&r.correlation));
            if let Some(th) = t.threads.get_mut(&c.thread) {
                th.records.extend(found);
            }
        }
    }
    Ok(())
}

/// A selection pass over the streamed trace's records of the kinds `p` names.
fn select_streamed(
    merged: &mut Merged,
    p: fold::Pending,
    input: &Input,
    index: &[ChunkRef],
) -> Result<(), StreamError> {
    let wanted = |k: Kind| match k {
        Kind::Api => p.api,
        Kind::Kernels => p.kernels,
        Kind::Memcpys | Kind::PeerCopies => p.memcpys,
        Kind::Memsets | Kind::Nvtx | Kind::Memory | Kind::Syncs => false,
    };
    let mut file = Rereader::open(&input.path)?;
    for c in index.iter().filter(|c| wanted(c.kind)) {
        let chunk = file.chunk(c.offset)?;
        match decode(c, &chunk, &input.path)? {
            Records::Api(v) => {
                for r in v.into_iter().filter_map(|r| input.keep.api(r)) {
                    if let Some(&row) = input.keys.api.get(&r.function) {
                        merged.api_select(row, &r);
                    }
                }
            }
            Records::Kernels(v) => {
                for k in v.into_iter().filter_map(|k| input.keep.kernel(k)) {
                    if let Some(&row) = input.keys.kernels.get(&k.name) {
                        merged.kernel_select(row, &k);
                    }
                }
            }
            Records::Memcpys(v) => {
                for m in v.into_iter().filter_map(|m| input.keep.memcpy(m)) {
                    merged.memcpy_select(&m);
                }
            }
            Records::PeerCopies(_)
            | Records::Memsets(_)
            | Records::Nvtx(_)
            | Records::Memory(_)
            | Records::Syncs(_) => {}
        }
    }
    Ok(())
}

/// What the join of [`gpu_pass`] adds its matches to.
struct Join<'a> {
    top: &'a mut latency::Top,
    syncs: &'a mut SyncFold,
    /// The trace's index among the report's, and the trace (its function names).
    ti: usize,
    trace: &'a Trace,
}

/// The GPU pass over a streamed trace: utilisation, launch latency, and the synchronizations
/// linked to calls (each one's kind depends on its call).
fn gpu_pass(
    join: &mut Join,
    input: &Input,
    index: &[ChunkRef],
    id_range: u64,
) -> Result<Vec<Utilisation>, StreamError> {
    let gpu: Vec<&ChunkRef> = index.iter().filter(|c| c.kind.gpu_work()).collect();
    let sync: Vec<&ChunkRef> = index.iter().filter(|c| c.kind == Kind::Syncs).collect();
    if gpu.is_empty() && sync.is_empty() {
        return Ok(Vec::new());
    }
    let mut api: Vec<&ChunkRef> = index.iter().filter(|c| c.kind == Kind::Api).collect();
    // A repeated id: the last in thread, then file order, wins (as `api_records_for`).
    api.sort_by_key(|c| (c.thread, c.offset));
    let ranks: HashMap<u64, u32> = api
        .iter()
        .enumerate()
        .map(|(i, c)| (c.offset, u32::try_from(i).unwrap_or(u32::MAX - 1)))
        .collect();
    api.sort_by_key(|c| c.offset);
    let mut devices = union::Devices::new(gpu.iter().map(|c| c.min_start));
    let mut file = Rereader::open(&input.path)?;
    let id_lo = api.iter().map(|c| c.min_id).min().unwrap_or(u64::MAX);
    let id_hi = api.iter().map(|c| c.max_id).max().unwrap_or(0);
    let span = id_hi.saturating_sub(id_lo).saturating_add(1);
    let mut table = join::IdTable::new(span.min(id_range.max(1)) as usize);
    // The id ranges joined, ascending.
    let mut joined: Vec<(u64, u64)> = Vec::new();
    // Each window starts at the least id an API record has that no window held yet.
    let mut next = (id_lo <= id_hi).then_some(id_lo);
    while let Some(lo) = next.take() {
        table.window(lo);
        let hi = table.hi();
        for c in &api {
            if c.min_id > hi {
                next = Some(next.map_or(c.min_id, |n| n.min(c.min_id)));
                continue;
            }
            if !c.reaches(lo, hi) {
                continue;
            }
            let rank = ranks.get(&c.offset).copied().unwrap_or(0);
            let chunk = file.chunk(c.offset)?;
            if let Records::Api(v) = decode(c, &chunk, &input.path)? {
                for r in v.into_iter().filter_map(|r| input.keep.api(r)) {
                    let id = r.correlation;
                    if id > hi {
                        next = Some(next.map_or(id, |n| n.min(id)));
                    }
                    let slot = join::Slot {
                        start: r.start_ns,
                        function: r.function,
                        rank,
                    };
                    table.note(id, slot);
                }
            }
        }
        for (gi, c) in gpu.iter().enumerate() {
            if !c.reaches(lo, hi) {
                continue;
            }
            let first_visit = !devices.was_fed(gi);
            let chunk = file.chunk(c.offset)?;
            let records = decode(c, &chunk, &input.path)?;
            gpu_records(
                input,
                c,
                records,
                &mut |work, i, id, dev, stream, start, end| {
                    if first_visit {
                        devices.add(dev, stream, start, end);
                    }
                    if let Some((id, s)) = id.and_then(|id| Some((id, table.get(id)?))) {
                        join.top
                            .matched(join.ti, work, i, id, start, s.start, s.function);
                    }
                },
            );
            if first_visit {
                devices.fed(gi);
            }
        }
        for c in sync.iter().filter(|c| c.reaches(lo, hi)) {
            sync_records(&mut file, input, c, join, |id| {
                table.holds(id).then(|| table.get(id))
            })?;
        }
        joined.push((lo, hi));
    }
    drop(table);
    // Synchronizations whose ids no range joined: linked to no call the trace holds.
    for c in sync.iter().filter(|c| !covers(&joined, c.min_id, c.max_id)) {
        sync_records(&mut file, input, c, join, |id| {
            (!covers(&joined, id, id)).then_some(None)
        })?;
    }
    // Chunks no id range reached: utilisation only.
    for (gi, c) in gpu.iter().enumerate() {
        if devices.was_fed(gi) {
            continue;
        }
        let chunk = file.chunk(c.offset)?;
        let records = decode(c, &chunk, &input.path)?;
        gpu_records(
            input,
            c,
            records,
            &mut |_, _, _, dev, stream, start, end| devices.add(dev, stream, start, end),
        );
        devices.fed(gi);
    }
    Ok(devices.rows(join.trace.header.pid))
}

/// Whether the ascending, disjoint id ranges `ranges` hold every id of `lo..=hi`.
fn covers(ranges: &[(u64, u64)], lo: u64, hi: u64) -> bool {
    let mut need = lo;
    for &(a, b) in ranges {
        if a <= need && need <= b {
            if b >= hi {
                return true;
            }
            need = b.saturating_add(1);
        }
    }
    false
}

/// Folds the linked synchronizations of sync chunk `c` whose call `slot(id)` says (`None`: not
/// this time; `Some(None)`: linked to no call the trace holds).
fn sync_records(
    file: &mut Rereader,
    input: &Input,
    c: &ChunkRef,
    join: &mut Join,
    slot: impl Fn(u64) -> Option<Option<join::Slot>>,
) -> Result<(), StreamError> {
    let chunk = file.chunk(c.offset)?;
    if let Records::Syncs(v) = decode(c, &chunk, &input.path)? {
        for y in v.into_iter().filter_map(|y| input.keep.sync(y)) {
            if !linked(y.flags) {
                continue;
            }
            if let Some(s) = slot(y.correlation) {
                let function = s.and_then(|s| join.trace.functions.get(&s.function));
                let kind = crate::gpu_summary::sync_kind(y.kind, function.map(String::as_str));
                join.syncs.add(kind, &y);
            }
        }
    }
    Ok(())
}

/// Memory in use per kind over every input: their allocation and free chunks read together,
/// in order of earliest time, and merged by (time, input, file order), as
/// [`crate::gpu_summary::memory_summary`] orders them; one file open per input that has any,
/// memory bounded by the chunks that overlap in time and the allocations in use.
fn memory_pass(inputs: &[Input]) -> Result<Vec<crate::gpu_summary::MemorySummary>, StreamError> {
    let mut sources = Vec::new();
    for (ti, input) in inputs.iter().enumerate() {
        let chunks: Vec<ChunkRef> = input
            .index
            .iter()
            .filter(|c| c.kind == Kind::Memory)
            .copied()
            .collect();
        if !chunks.is_empty() {
            sources.push((ti, FileSource::open(&input.path, chunks, &input.keep)?));
        }
    }
    let mut fold = MemoryFold::default();
    let mut src = Sources::new(sources, Rec::tag_trace);
    merge(&mut src, |rec| {
        if let Rec::Memory { trace, m, .. } = rec {
            fold.add(trace, &m);
        }
        Ok(())
    })
    // The fold writes nothing: a failure is a read's.
    .map_err(|e| read_error(Path::new(""), e))?;
    Ok(fold.rows())
}

/// The [`crate::gpu_summary::SharedDevice`] rows of `groups`: the GPU chunks of their traces read
/// together, in order of earliest start, each group's union settled as far as the next chunk's
/// start allows; one file open per trace, memory bounded by the chunks that overlap in time.
fn shared_pass(
    traces: &[Trace],
    inputs: &[Input],
    groups: Vec<Vec<(usize, u32)>>,
) -> Result<Vec<crate::gpu_summary::SharedDevice>, StreamError> {
    let member: HashMap<(usize, u32), usize> = groups
        .iter()
        .enumerate()
        .flat_map(|(g, m)| m.iter().map(move |&k| (k, g)))
        .collect();
    let mut unions = vec![union::Union::default(); groups.len()];
    let mut files: HashMap<usize, Rereader> = HashMap::new();
    for &(ti, _) in member.keys() {
        if let std::collections::hash_map::Entry::Vacant(v) = files.entry(ti) {
            v.insert(Rereader::open(&inputs[ti].path)?);
        }
    }
    let mut chunks: Vec<(u64, usize, &ChunkRef)> = files
        .keys()
        .flat_map(|&ti| {
            let gpu = inputs[ti].index.iter().filter(|c| c.kind.gpu_work());
            gpu.map(move |c| (c.min_start, ti, c))
        })
        .collect();
    chunks.sort_by_key(|&(start, ti, c)| (start, ti, c.offset));
    for (start, ti, c) in chunks {
        for u in &mut unions {
            u.settle(start);
        }
        let input = &inputs[ti];
        let Some(file) = files.get_mut(&ti) else {
            continue;
        };
        let chunk = file.chunk(c.offset)?;
        let records = decode(c, &chunk, &input.path)?;
        gpu_records(input, c, records, &mut |_, _, _, dev, _, s, e| {
            if let Some(&g) = member.get(&(ti, dev)) {
                unions[g].add(s, e);
            }
        });
    }
    Ok(groups
        .iter()
        .zip(unions)
        .map(|(g, u)| crate::gpu_summary::shared_row(traces, g, u))
        .collect())
}

/// Calls `f(work, index, correlation id if correlated, device, stream, start, end)` for each
/// kept record of an indexed GPU chunk.
#[allow(clippy::type_complexity)]
fn gpu_records(
    input: &Input,
    c: &ChunkRef,
    records: Records,
    f: &mut dyn FnMut(latency::Work, u64, Option<u64>, u32, u32, u64, u64),
) {
    use latency::Work;
    let mut i = c.first;
    match records {
        Records::Kernels(v) => {
            for k in v.into_iter().filter_map(|k| input.keep.kernel(k)) {
                let id = (k.flags & FLAG_CORRELATED != 0).then_some(k.correlation);
                f(
                    Work::Kernel(k.name),
                    i,
                    id,
                    k.device,
                    k.stream,
                    k.start_ns,
                    k.end_ns,
                );
                i += 1;
            }
        }
        Records::Memcpys(v) => {
            for m in v.into_iter().filter_map(|m| input.keep.memcpy(m)) {
                let id = (u32::from(m.flags) & FLAG_CORRELATED != 0).then_some(m.correlation);
                f(
                    Work::Memcpy(m.kind),
                    i,
                    id,
                    m.device,
                    m.stream,
                    m.start_ns,
                    m.end_ns,
                );
                i += 1;
            }
        }
        Records::Memsets(v) => {
            for s in v.into_iter().filter_map(|s| input.keep.memset(s)) {
                let id = (s.correlation != 0).then_some(s.correlation);
                f(
                    Work::Memset,
                    i,
                    id,
                    s.device,
                    s.stream,
                    s.start_ns,
                    s.end_ns,
                );
                i += 1;
            }
        }
        Records::Api(_)
        | Records::PeerCopies(_)
        | Records::Nvtx(_)
        | Records::Memory(_)
        | Records::Syncs(_) => {}
    }
}

#[cfg(test)]
mod tests;
