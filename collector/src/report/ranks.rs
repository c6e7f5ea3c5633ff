//! The ranks section: the traced processes of one job compared with one another. Each process
//! is a rank, named by the first of the launcher's rank variables its trace recorded
//! ([`rtrace_format::env::RANK_VARS`]: `RANK`, `OMPI_COMM_WORLD_RANK`, `SLURM_PROCID`,
//! `LOCAL_RANK`), else by its pid. For each rank: its GPUs' busy and idle time (the
//! utilisation section's device rows added up), its collective (NCCL) kernels' time and the
//! part of it estimated as waiting for other ranks; for each step (an NVTX range whose name
//! the step pattern matches, the same name on each rank that has it (two or more) matched by
//! occurrence, in order of ending, as many as the fewest of them has) its duration on each of
//! those ranks, the fastest, the median and the slowest rank, and the slowest one's lag over
//! the median.
//!
//! Waiting in collectives: the k-th collective kernel of each rank (by start) is taken as the
//! same collective on every rank; it cannot end before the last rank arrives, so the rank
//! that arrived last spent the least time in it. A rank's wait in that collective is its
//! kernel's duration less the shortest duration of it over the ranks; its wait share is the
//! sum of those over the sum of its matched kernels' durations. Only ranks that ran
//! collectives take part, over the first K collectives, K the fewest any of them ran.
//!
//! What is held per rank: its step durations (at most [`MAX_STEPS`]) and its collectives'
//! durations, not its records.

use super::input::Input;
use crate::gpu_summary::fast_hash::FastSet;
use crate::gpu_summary::Utilisation;
use crate::model::Trace;
use crate::read::index::ChunkRef;
use crate::read::inputs::StreamError;
use regex::Regex;
use std::collections::HashMap;

/// Step durations held per rank, at most: past them a rank's steps are counted, not compared.
pub const MAX_STEPS: usize = 1 << 20;

/// Which NVTX ranges are steps: those whose name the pattern matches.
#[derive(Clone, Debug)]
pub struct StepNames(pub Regex);

impl Default for StepNames {
    /// Names holding `step` in any case.
    fn default() -> StepNames {
        StepNames(Regex::new("(?i)step").expect("a valid pattern"))
    }
}

/// One rank's figures, before they are compared.
#[derive(Clone, Debug, Default)]
pub struct RankInput {
    pub pid: u32,
    pub hostname: String,
    /// The rank variable that names it and its value, when the trace recorded one.
    pub rank: Option<(String, String)>,
    pub gpu_busy_ns: u64,
    pub gpu_idle_ns: u64,
    /// Its collective kernels' durations, in order of start.
    pub collectives: Vec<u64>,
    /// Per step name (in order of first ending): the durations, in order of ending.
    pub steps: Vec<(String, Vec<u64>)>,
    /// Steps past [`MAX_STEPS`], not compared.
    pub steps_dropped: u64,
    /// The trace is the GPU metrics sampler's, no rank's: left out.
    pub sampler: bool,
}

impl RankInput {
    /// Trace `t`'s figures: its utilisation rows `rows` (those of the whole device counted),
    /// its collective kernels' `(start, end)`.
    pub fn new(t: &Trace, rows: &[Utilisation], mut collectives: Vec<(u64, u64)>) -> RankInput {
        let devices = rows.iter().filter(|u| u.stream.is_none());
        collectives.sort_unstable();
        RankInput {
            pid: t.header.pid,
            hostname: t.header.hostname.clone(),
            rank: rank_of(&t.header),
            gpu_busy_ns: devices.clone().map(|u| u.busy_ns).sum(),
            gpu_idle_ns: devices.map(|u| u.idle_ns).sum(),
            collectives: collectives
                .into_iter()
                .map(|(s, e)| e.saturating_sub(s))
                .collect(),
            steps: Vec::new(),
            steps_dropped: 0,
            sampler: t.header.is_gpu_sampler(),
        }
    }
}

/// The first of the launcher's rank variables the header recorded, with its value.
pub fn rank_of(h: &rtrace_format::ProcessHeader) -> Option<(String, String)> {
    h.rank().map(|(n, v)| (n.to_string(), v.to_string()))
}

/// The kernel name ids of `t` that are collectives: names starting with `nccl`.
pub fn collective_names(t: &Trace) -> FastSet<u32> {
    t.kernel_names
        .iter()
        .filter(|(_, n)| n.starts_with("nccl") || crate::demangle::demangle(n).starts_with("nccl"))
        .map(|(&id, _)| id)
        .collect()
}

/// Step durations by name (in order of first ending), each in order of ending; and how many
/// past [`MAX_STEPS`] were not held.
pub type StepDurations = (Vec<(String, Vec<u64>)>, u64);

/// Collects step durations by name, in order of ending.
#[derive(Default)]
struct Steps {
    by_key: HashMap<(u32, u32), Option<usize>>,
    steps: Vec<(String, Vec<u64>)>,
    held: usize,
    dropped: u64,
}

impl Steps {
    fn add(&mut self, t: &Trace, names: &StepNames, key: (u32, u32), d: u64) {
        let steps = &mut self.steps;
        let row = *self.by_key.entry(key).or_insert_with(|| {
            let name = crate::nvtx::range_name(t, key.1);
            names
                .0
                .is_match(&name)
                .then(|| match steps.iter().position(|(n, _)| *n == name) {
                    Some(i) => i,
                    None => {
                        steps.push((name, Vec::new()));
                        steps.len() - 1
                    }
                })
        });
        if let Some(row) = row {
            if self.held < MAX_STEPS {
                self.steps[row].1.push(d);
                self.held += 1;
            } else {
                self.dropped += 1;
            }
        }
    }
}

/// The step ranges of a streamed trace (`chunks`: its NVTX chunks), by name.
pub(super) fn step_durations(
    t: &Trace,
    input: &Input,
    chunks: &[ChunkRef],
    names: &StepNames,
) -> Result<StepDurations, StreamError> {
    let mut steps = Steps::default();
    if !chunks.is_empty() {
        crate::nvtx::nvtx_pass(&input.path, t, &input.keep, chunks, |k, d| {
            steps.add(t, names, k, d)
        })?;
    }
    Ok((steps.steps, steps.dropped))
}

/// The step ranges of a trace held in memory, by name.
pub(super) fn steps_in_memory(t: &Trace, names: &StepNames) -> StepDurations {
    let mut steps = Steps::default();
    crate::nvtx::nvtx_in_memory(t, |k, d| steps.add(t, names, k, d));
    (steps.steps, steps.dropped)
}

/// The collective kernels of a trace held in memory, as `(start, end)`.
pub(super) fn collectives_in_memory(t: &Trace) -> Vec<(u64, u64)> {
    let nccl = collective_names(t);
    t.kernels
        .iter()
        .filter(|k| nccl.contains(&k.name))
        .map(|k| (k.start_ns, k.end_ns))
        .collect()
}

/// One rank's row.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RankRow {
    /// The rank's name: the value of its rank variable, else `pid N`.
    pub rank: String,
    /// The variable that named it (empty: none, named by pid).
    pub rank_var: String,
    pub pid: u32,
    pub hostname: String,
    pub gpu_busy_ns: u64,
    pub gpu_idle_ns: u64,
    /// Steps compared (on every rank) and how many times this rank was the slowest.
    pub steps: u64,
    pub steps_slowest: u64,
    /// Its compared steps' total duration.
    pub step_ns: u64,
    /// Collective kernels and their time (all of them).
    pub collectives: u64,
    pub collective_ns: u64,
    /// Collectives matched across ranks, their time here, and the wait estimated in them.
    pub collectives_matched: u64,
    pub collective_matched_ns: u64,
    pub collective_wait_ns: u64,
    /// `collective_wait_ns / collective_matched_ns`, in hundredths of a percent.
    pub wait_percent: crate::gpu_summary::Hundredths,
    /// Steps past [`MAX_STEPS`], not compared.
    pub steps_dropped: u64,
}

/// One step (a range name's k-th occurrence) compared across ranks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepRow {
    pub name: String,
    /// From 1: the k-th range of that name to end on each rank.
    pub occurrence: u64,
    pub ranks: u64,
    pub fastest_rank: String,
    pub fastest_ns: u64,
    /// The median over the ranks (the mean of the two middle ones for an even number).
    pub median_ns: u64,
    pub slowest_rank: String,
    pub slowest_ns: u64,
    /// `slowest_ns - median_ns`: the slowest rank's lag over the median.
    pub lag_ns: u64,
    /// `slowest_ns - fastest_ns`.
    pub spread_ns: u64,
}

/// The ranks section: empty unless two or more ranks are compared ([`section`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RankSection {
    /// In rank order (numeric ranks first, by number; then by input order).
    pub ranks: Vec<RankRow>,
    /// Every compared step, by name (in order of first ending on the first rank) and
    /// occurrence.
    pub steps: Vec<StepRow>,
}

/// Compares the ranks `inputs` (one per trace, in input order): nothing unless there are two
/// or more and they look like one job's ranks (some recorded a rank variable, or two or more
/// ran GPU work or steps; a program and the helper processes it forked are not compared).
pub fn section(mut inputs: Vec<RankInput>) -> RankSection {
    inputs.retain(|r| !r.sampler);
    let working = inputs
        .iter()
        .filter(|r| r.gpu_busy_ns > 0 || !r.steps.is_empty())
        .count();
    let named = inputs.iter().any(|r| r.rank.is_some());
    if inputs.len() < 2 || !(named || working >= 2) {
        return RankSection::default();
    }
    let mut order: Vec<usize> = (0..inputs.len()).collect();
    let number = |r: &RankInput| {
        r.rank
            .as_ref()
            .and_then(|(_, v)| v.trim().parse::<u64>().ok())
    };
    order.sort_by_key(|&i| (number(&inputs[i]).unwrap_or(u64::MAX), i));
    let inputs: Vec<RankInput> = {
        let mut slots: Vec<Option<RankInput>> = inputs.into_iter().map(Some).collect();
        order.iter().filter_map(|&i| slots[i].take()).collect()
    };
    let mut ranks: Vec<RankRow> = inputs
        .iter()
        .map(|r| {
            let (rank_var, rank) = match &r.rank {
                Some((n, v)) => (n.clone(), v.clone()),
                None => (String::new(), format!("pid {}", r.pid)),
            };
            RankRow {
                rank,
                rank_var,
                pid: r.pid,
                hostname: r.hostname.clone(),
                gpu_busy_ns: r.gpu_busy_ns,
                gpu_idle_ns: r.gpu_idle_ns,
                collectives: r.collectives.len() as u64,
                collective_ns: r.collectives.iter().sum(),
                steps_dropped: r.steps_dropped,
                ..Default::default()
            }
        })
        .collect();
    // Collectives: the k-th of each rank that ran any, over the fewest.
    let with: Vec<usize> = (0..inputs.len())
        .filter(|&i| !inputs[i].collectives.is_empty())
        .collect();
    let k = with
        .iter()
        .map(|&i| inputs[i].collectives.len())
        .min()
        .unwrap_or(0);
    if with.len() >= 2 {
        for j in 0..k {
            let least = with
                .iter()
                .map(|&i| inputs[i].collectives[j])
                .min()
                .unwrap_or(0);
            for &i in &with {
                let d = inputs[i].collectives[j];
                let row = &mut ranks[i];
                row.collectives_matched += 1;
                row.collective_matched_ns += d;
                row.collective_wait_ns += d - least;
            }
        }
    }
    for row in &mut ranks {
        row.wait_percent = crate::gpu_summary::Hundredths::percent(
            row.collective_wait_ns.into(),
            row.collective_matched_ns.into(),
        );
    }
    // Steps: names in order of first ending on the first rank that has them.
    let mut names: Vec<&str> = Vec::new();
    for r in &inputs {
        for (n, _) in &r.steps {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
    }
    let mut steps = Vec::new();
    for name in names {
        let per: Vec<Option<&Vec<u64>>> = inputs
            .iter()
            .map(|r| r.steps.iter().find(|(n, _)| n == name).map(|(_, d)| d))
            .collect();
        // Compared over the ranks that have it (two or more), as many times as the fewest.
        let have = per.iter().filter(|d| d.is_some()).count();
        let count = per
            .iter()
            .filter_map(|d| d.map(Vec::len))
            .min()
            .unwrap_or(0);
        if have < 2 {
            continue;
        }
        for occ in 0..count {
            let mut v: Vec<(u64, usize)> = per
                .iter()
                .enumerate()
                .filter_map(|(i, d)| Some((d.as_ref()?[occ], i)))
                .collect();
            v.sort_unstable();
            let (fastest, fi) = v[0];
            let (slowest, si) = v[v.len() - 1];
            let n = v.len();
            let median = if n % 2 == 1 {
                v[n / 2].0
            } else {
                ((u128::from(v[n / 2 - 1].0) + u128::from(v[n / 2].0)) / 2) as u64
            };
            for &(d, i) in &v {
                ranks[i].steps += 1;
                ranks[i].step_ns += d;
            }
            ranks[si].steps_slowest += 1;
            steps.push(StepRow {
                name: name.to_string(),
                occurrence: occ as u64 + 1,
                ranks: n as u64,
                fastest_rank: ranks[fi].rank.clone(),
                fastest_ns: fastest,
                median_ns: median,
                slowest_rank: ranks[si].rank.clone(),
                slowest_ns: slowest,
                lag_ns: slowest - median,
                spread_ns: slowest - fastest,
            });
        }
    }
    RankSection { ranks, steps }
}

/// The ranks section of traces held in memory (`utilisation`: their rows).
pub fn section_in_memory(
    traces: &[Trace],
    utilisation: &[Utilisation],
    names: &StepNames,
) -> RankSection {
    let inputs = traces
        .iter()
        .map(|t| {
            let rows: Vec<Utilisation> = utilisation
                .iter()
                .filter(|u| u.pid == t.header.pid)
                .cloned()
                .collect();
            let mut r = RankInput::new(t, &rows, collectives_in_memory(t));
            (r.steps, r.steps_dropped) = steps_in_memory(t, names);
            r
        })
        .collect();
    section(inputs)
}
