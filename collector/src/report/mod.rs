//! `rtrace report` in bounded memory: the trace files are read as streams of chunks, and
//! every API, kernel, copy and memset record is folded into per-key accumulators
//! ([`fold`]) as it is read, then dropped. What the report needs beyond folds comes from
//! reading chunks again (through [`crate::read`]), found through an index of them kept on the
//! first pass (a few words per chunk; `first.rs`), by the passes of `passes.rs` and
//! `shared.rs`:
//!
//! - exact medians: a duration distribution with many distinct values narrows the range
//!   holding its median pass by pass ([`crate::gpu_summary::dist`]);
//! - utilisation: each device's and stream's records are merged into the union of their
//!   intervals in any order; an interval is settled once no chunk still to read starts
//!   before its end ([`crate::gpu_summary::union`]);
//! - launch latency, and kernel launch and execution times (exact medians by passes over the
//!   launches the join matched, kept in memory up to a bound and past it in a temporary file:
//!   `launches.rs`; where they cannot be kept, by joining again): API records are looked up by correlation id in a table of a
//!   window of keys at a time (a key: the rank of an id among those the GPU and
//!   synchronization records look up, `referenced.rs`; `ID_RANGE` keys a window, each
//!   starting past the last: `join.rs`), filled from the API chunks whose keys reach into it,
//!   while the GPU chunks whose keys do are matched against it
//!   ([`crate::gpu_summary::latency`]);
//! - synchronizations: each is folded into its kind's row once the same join has found the
//!   call it is linked to (a `cuStreamQuery` or `cuEventQuery` makes it a query);
//! - the calls that created streams and loaded modules: only the API records with those
//!   correlation ids are kept;
//! - memory in use: the allocation and free chunks of every file are merged by time
//!   (`memory_pass`), holding the allocations in use, not the records.
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

mod first;
pub mod fold;
mod input;
mod join;
mod launches;
mod needs;
mod passes;
pub mod ranks;
mod referenced;
mod shared;
mod windows;

pub use crate::read::inputs::StreamError;
pub use needs::Needs;

use crate::filter::Filter;
use crate::gpu_summary::exec::KernExecFold;
use crate::gpu_summary::{latency, SyncFold};
use crate::gpu_summary::{Latencies, Utilisation, LATENCY_ROWS};
use crate::model::Trace;
use crate::occupancy::OccupancyRows;
use crate::read::inputs::expand_inputs;
use crate::read::parallel::{fold_each, map_ordered, Jobs};
use crate::read::trace::Loaded;
use crate::summary::FunctionSummary;
use first::{first_read, FirstRead};
use fold::{Counts, KeyMap, Merged, TraceFold};
use input::Input;
use passes::{gpu_metric_work, gpu_pass, kern_exec_pass, profiled_links, select_streamed, Join};
use ranks::StepNames;
use shared::{memory_pass, shared_pass};
use std::collections::HashMap;
use std::path::PathBuf;

/// API records whose correlation ids the latency join holds at once (`join`): an array of 25
/// bytes per key for a window of 2^19 keys (12.5 MiB; the keys are the ranks of the ids GPU
/// and synchronization records look up: `referenced.rs`), or, where the ids are too far apart
/// to be ranked, the array for the window's first 2^19 ids and a hash map entry (about 50
/// bytes) for each id past them.
const ID_RANGE: u64 = 1 << 19;

/// Why a selection pass failed where a trace's launches were kept.
const LAUNCHES_LOST: &str = "its kernel launches, kept in a temporary file, could not be read back";

/// How the report reads its traces, beyond what the command line says.
#[derive(Clone, Copy, Debug)]
struct How {
    /// API records whose correlation ids the join holds at once ([`ID_RANGE`]).
    id_range: u64,
    /// Bytes per block of the kernel launches kept for the selection passes
    /// ([`launches::BLOCK`]); 0: not kept, the passes join again.
    launch_block: usize,
    /// Bytes of those blocks held in memory, the rest written to a file ([`launches::HELD`]).
    launches_held: usize,
    /// Pages of the bitmap of the ids GPU records look up ([`referenced::MOST_PAGES`]): past
    /// them, the join's keys are the ids.
    referenced_pages: usize,
    /// The parts of the report computed.
    needs: Needs,
}

impl Default for How {
    fn default() -> How {
        How {
            id_range: ID_RANGE,
            launch_block: launches::BLOCK,
            launches_held: launches::HELD,
            referenced_pages: referenced::MOST_PAGES,
            needs: Needs::ALL,
        }
    }
}

/// Everything the report prints that is computed from the API and GPU records.
#[derive(Clone, Debug, Default)]
pub struct Sections {
    /// Per trace (in order): what it held.
    pub counts: Vec<Counts>,
    /// One row per function: runtime calls (`cuda*`), and driver calls made outside them (by
    /// the program or a library directly, or where no runtime call was recorded).
    pub api: Vec<FunctionSummary>,
    /// One row per driver function called inside runtime calls (empty without runtime API
    /// records): the runtime's own driver calls.
    pub api_in_runtime: Vec<FunctionSummary>,
    pub kernels: Vec<crate::gpu_summary::KernelSummary>,
    pub memcpy: Vec<crate::gpu_summary::MemcpySummary>,
    pub memset: Option<crate::gpu_summary::MemsetSummary>,
    pub utilisation: Vec<Utilisation>,
    /// GPUs that several traced processes of one host ran work on.
    pub shared: Vec<crate::gpu_summary::SharedDevice>,
    pub latency: Latencies,
    /// Kernel launch and execution times per kernel name and launching function.
    pub kern_exec: Vec<crate::gpu_summary::KernExecSummary>,
    /// Every configuration (no row limit).
    pub occupancy: OccupancyRows,
    /// NVTX ranges and external ids.
    pub nvtx: crate::nvtx::NvtxSection,
    /// Memory in use per kind, over every trace.
    pub memory: Vec<crate::gpu_summary::MemorySummary>,
    /// Host waits per kind of synchronization, over every trace.
    pub sync: Vec<crate::gpu_summary::SyncSummary>,
    /// Kernel profiles: empty when nothing was profiled and no notice says why not.
    pub profiles: crate::profiles::ProfileSection,
    /// The processes compared as ranks of one job (empty for fewer than two).
    pub ranks: ranks::RankSection,
    /// GPU metrics over time: empty when nothing was sampled and no notice says why not.
    pub gpu_metrics: crate::gpu_metrics::GpuMetricsSection,
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
            let p = merged.end_pass(fold::Pending::ALL);
            if !p.any() {
                break;
            }
            for (t, k) in traces.iter().zip(&keys) {
                select_in_memory(&mut merged, p, t, k);
            }
        }
        let utilisation = crate::gpu_summary::utilisation(traces);
        let ranks = ranks::section_in_memory(traces, &utilisation, &StepNames::default());
        Sections {
            counts,
            api: merged.api_rows(),
            api_in_runtime: merged.in_runtime_rows(),
            kernels: merged.kernel_rows(),
            memcpy: merged.memcpy_rows(),
            memset: merged.memset(),
            utilisation,
            shared: crate::gpu_summary::shared_devices(traces),
            latency: crate::gpu_summary::launch_latency(traces, LATENCY_ROWS),
            kern_exec: crate::gpu_summary::kern_exec_summary(traces),
            occupancy: merged.occupancy(usize::MAX),
            nvtx: crate::nvtx::section(traces),
            memory: crate::gpu_summary::memory_summary(traces),
            sync: crate::gpu_summary::sync_summary(traces),
            profiles: crate::profiles::section(
                traces,
                &traces
                    .iter()
                    .map(crate::profiles::linked_in_memory)
                    .collect(),
            ),
            ranks,
            gpu_metrics: crate::gpu_metrics::section_with_cupti(
                traces,
                &if crate::gpu_metrics::Work::wanted(traces) {
                    traces
                        .iter()
                        .map(crate::gpu_metrics::Work::in_memory)
                        .collect()
                } else {
                    vec![Default::default(); traces.len()]
                },
            ),
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
    if p.memsets {
        t.memsets.iter().for_each(|s| merged.memset_select(s));
    }
}

/// The report's traces (held without their API and GPU records, unless they have NVTX
/// events) and its sections, reading `paths` (files, or directories of `*.bin` files) as
/// streams; `filter` applied as [`crate::filter::apply_all`] would.
/// `jobs` traces are read at once; `step_names` says which NVTX ranges the ranks section
/// compares; `needs` which parts to compute (the others left empty).
pub fn report_inputs(
    paths: &[PathBuf],
    filter: &Filter,
    jobs: Jobs,
    step_names: &StepNames,
    needs: Needs,
) -> Result<(Loaded, Sections), StreamError> {
    let how = How {
        needs,
        ..How::default()
    };
    report_inputs_with(paths, filter, how, jobs, step_names)
}

/// [`report_inputs`], read as `how` says.
fn report_inputs_with(
    paths: &[PathBuf],
    filter: &Filter,
    how: How,
    jobs: Jobs,
    step_names: &StepNames,
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
    // Each file's first read (its records folded, its chunks indexed, its NVTX ranges
    // projected, the calls behind its streams and modules found) on `jobs` threads; what they
    // give is merged below in input order, as a read one after the other would.
    // With a GPU metrics sampler's trace among the inputs, every trace's NVTX ranges are
    // kept for the GPU metrics part (the samples are in another trace than the ranges).
    let sampled = headers.iter().any(|h| h.is_gpu_sampler());
    let firsts = map_ordered(&kept, jobs, |_, &i| {
        let pages = how.referenced_pages;
        first_read(
            &found.files[i],
            shift_of(i),
            filter,
            base,
            (from, to),
            (pages, sampled),
        )
    })?;
    let mut merged = Merged::default();
    let mut counts = Vec::new();
    let mut inputs: Vec<Input> = Vec::new();
    let mut nvtx_stats = crate::nvtx::NvtxStats::default();
    let mut nvtx_ids = Vec::new();
    let mut syncs = SyncFold::default();
    let mut profiled_ranges = Vec::new();
    let mut nvtx_spans = Vec::new();
    for first in firsts {
        let FirstRead {
            t,
            path,
            keep,
            index,
            fold,
            syncs: first_syncs,
            nvtx,
            referenced,
        } = first;
        syncs.merge(first_syncs);
        match nvtx {
            Some((mut projected, chunks)) => {
                nvtx_spans.push(crate::gpu_metrics::nvtx_spans(&projected.ranges.ranges));
                profiled_ranges.push(std::mem::take(&mut projected.ranges.ranges));
                nvtx_ids.push((nvtx_stats.add(projected), chunks));
            }
            None => {
                profiled_ranges.push(Vec::new());
                nvtx_spans.push(Vec::new());
                nvtx_ids.push((HashMap::new(), Vec::new()));
            }
        }
        counts.push(fold.counts.clone());
        let keys = merged.add(loaded.traces.len(), &t, fold);
        loaded.traces.push(t);
        inputs.push(Input {
            path,
            keep,
            index,
            keys,
            join_keys: referenced.keys(),
        });
    }
    let needs = how.needs;
    loop {
        let p = merged.end_pass(needs.medians);
        if !p.any() {
            break;
        }
        for input in &inputs {
            select_streamed(&mut merged, p, input, &input.index)?;
        }
    }
    // Exact medians of NVTX range durations: the ranges' events read again while needed.
    while needs.nvtx_medians && nvtx_stats.end_pass() {
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
    // The GPU pass of each trace on `jobs` threads, each with folds of its own, merged in
    // input order (their merges give what folding every trace into one would).
    let traces = &loaded.traces;
    let id_range = how.id_range;
    let launch_store = launches::LaunchStore::new(how.launch_block, how.launches_held);
    let gpu = map_ordered(&inputs, jobs, |ti, input| {
        let t = &traces[ti];
        let mut top = latency::Top::new(LATENCY_ROWS);
        let mut syncs = SyncFold::default();
        let mut kern_exec = KernExecFold::default();
        let mut collectives = Vec::new();
        let nccl = ranks::collective_names(t);
        let mut launches = launches::Launches::new(&launch_store);
        let mut join = Join {
            top: &mut top,
            syncs: &mut syncs,
            kern_exec: &mut kern_exec,
            ti,
            trace: t,
            nccl: &nccl,
            collectives: &mut collectives,
            launches: &mut launches,
        };
        let rows = if needs.join {
            gpu_pass(&mut join, input, &input.index, id_range)?
        } else {
            Vec::new()
        };
        // The rank's figures: its collectives' durations, not their times.
        let rank = ranks::RankInput::new(t, &rows, collectives);
        Ok::<_, StreamError>((rows, top, syncs, kern_exec, rank, launches.finish()))
    })?;
    let mut utilisation = Vec::new();
    let mut top = latency::Top::new(LATENCY_ROWS);
    let mut ran = Vec::new();
    let mut kern_exec = KernExecFold::default();
    let mut per_rank = Vec::new();
    let mut matched = Vec::new();
    for (ti, (rows, t_top, t_syncs, t_kern_exec, rank, written)) in gpu.into_iter().enumerate() {
        top.merge(t_top);
        syncs.merge(t_syncs);
        // The launches' rows in the trace's fold, as rows of the merged one.
        let rows_to = kern_exec.merge(t_kern_exec);
        matched.push(written.map(|w| (w, rows_to)));
        ran.extend(
            rows.iter()
                .filter(|u| u.stream.is_none())
                .map(|u| (ti, u.device)),
        );
        per_rank.push(rank);
        utilisation.extend(rows);
    }
    // Exact medians of the launches' parts: the launches the GPU pass matched read back (or,
    // where they could not be kept, the join again) while needed, in pieces (up to `jobs`
    // of each trace's: its blocks of launches), each counted into a copy of the fold taken as
    // the pass begins, the counts added (they add up in any order).
    let threads = jobs.0.get();
    let pieces: Vec<(usize, Option<std::ops::Range<usize>>)> = matched
        .iter()
        .enumerate()
        .flat_map(|(ti, w)| match w {
            Some((w, _)) => {
                let n = w.blocks();
                (0..threads.min(n))
                    .map(|p| {
                        (
                            ti,
                            Some(p * n / threads.min(n)..(p + 1) * n / threads.min(n)),
                        )
                    })
                    .collect::<Vec<_>>()
            }
            None => vec![(ti, None)],
        })
        .collect();
    while needs.kern_exec && kern_exec.end_pass() {
        // Each thread counts the pieces it takes into a copy of the fold of its own, taken as
        // the pass begins; the copies' counts are added once at the end.
        let start = &kern_exec;
        let copies = fold_each(
            &pieces,
            jobs,
            || start.clone(),
            |fold, (ti, blocks)| {
                let (ti, input) = (*ti, &inputs[*ti]);
                match (blocks, &matched[ti]) {
                    (Some(blocks), Some((w, rows_to))) => w
                        .each_in(blocks.clone(), &mut |row, parts| {
                            if let Some(&row) = rows_to.get(row) {
                                fold.select_row(row, parts);
                            }
                        })
                        .ok_or_else(|| StreamError::Changed {
                            path: input.path.clone(),
                            why: LAUNCHES_LOST.into(),
                        }),
                    _ => kern_exec_pass(fold, ti, input, &input.index, id_range),
                }
            },
        )?;
        // The fold's own counts are those of no launch yet.
        copies.iter().for_each(|c| kern_exec.add_selected(c));
    }
    // The step ranges of every trace, for the ranks section.
    if needs.steps {
        let steps = map_ordered(&inputs, jobs, |ti, input| {
            ranks::step_durations(&loaded.traces[ti], input, &nvtx_ids[ti].1, step_names)
        })?;
        for (r, (s, dropped)) in per_rank.iter_mut().zip(steps) {
            (r.steps, r.steps_dropped) = (s, dropped);
        }
    }
    let shared = if needs.shared {
        let groups = crate::gpu_summary::shared_groups(&loaded.traces, ran);
        shared_pass(&loaded.traces, &inputs, groups)?
    } else {
        Vec::new()
    };
    let memory = if needs.memory {
        memory_pass(&inputs)?
    } else {
        Vec::new()
    };
    let mut linked = Vec::new();
    if needs.profiles {
        for ((t, input), nvtx) in loaded.traces.iter().zip(&inputs).zip(profiled_ranges) {
            linked.push(profiled_links(t, input, &input.index, nvtx)?);
        }
    }
    let mut works = Vec::new();
    let want_work = needs.gpu_metrics && crate::gpu_metrics::Work::wanted(&loaded.traces);
    for ((t, input), spans) in loaded.traces.iter().zip(&inputs).zip(nvtx_spans) {
        works.push(if want_work {
            gpu_metric_work(t, input, &input.index, spans)?
        } else {
            Default::default()
        });
    }
    let sections = Sections {
        counts,
        api: merged.api_rows(),
        api_in_runtime: merged.in_runtime_rows(),
        kernels: merged.kernel_rows(),
        memcpy: merged.memcpy_rows(),
        memset: merged.memset(),
        utilisation,
        shared,
        latency: top.finish(&loaded.traces),
        kern_exec: kern_exec.rows(),
        occupancy: merged.occupancy(usize::MAX),
        nvtx: nvtx_stats.finish(),
        memory,
        sync: syncs.rows(),
        profiles: if needs.profiles {
            crate::profiles::section(&loaded.traces, &linked)
        } else {
            Default::default()
        },
        ranks: ranks::section(per_rank),
        gpu_metrics: if needs.gpu_metrics {
            crate::gpu_metrics::section_with_cupti(&loaded.traces, &works)
        } else {
            Default::default()
        },
    };
    Ok((loaded, sections))
}

#[cfg(test)]
mod ranks_tests;
#[cfg(test)]
mod tests;
