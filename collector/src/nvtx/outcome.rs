//! What a [`super::Projector`] keeps of a range while it is built ([`Slot`]) and of an external
//! id ([`ExternalRow`]), and what it hands out at the end ([`projected`]).

use super::chain::Acc;
use super::stats::{
    domain_names, sort, text, ExternalSummary, NameAcc, NvtxRange, Projected, RangeAcc, Ranges,
};
use crate::gpu_summary::fast_hash::FastMap;
use crate::model::Trace;

/// A range being built.
#[derive(Clone, Debug, Default)]
pub(super) struct Slot {
    pub(super) tid: u64,
    pub(super) end_tid: u64,
    pub(super) domain: u32,
    pub(super) message: u32,
    pub(super) category: u32,
    pub(super) start: u64,
    pub(super) end: Option<u64>,
    pub(super) level: Option<u64>,
    /// Order of beginning.
    pub(super) begun: u64,
    /// The work of its calls, from its nodes that are done (per device: [`Mode::Tracks`]).
    pub(super) acc: Acc,
    pub(super) own_gpu_records: u64,
    pub(super) own_gpu_ns: u64,
    /// The work other threads launched while it was open, credited to it (`process.rs`), and
    /// of that, what came while it was the innermost range of its domain on its thread.
    pub(super) foreign: Acc,
    pub(super) foreign_own: (u64, u64),
    /// Its nodes not yet done (`chain.rs`), in its thread's chain and in its (thread, domain)
    /// chain of the process view.
    pub(super) nodes_left: u32,
    /// No later call can be in it.
    pub(super) sealed: bool,
    /// Begun and not yet over.
    pub(super) live: bool,
}

/// An external id's calls and GPU work (records, ns): made on its thread, and in the process
/// view (those and other threads' credited to it).
#[derive(Clone, Copy, Default)]
pub(super) struct ExternalRow {
    pub(super) calls: u64,
    pub(super) gpu: (u64, u64),
    pub(super) process_calls: u64,
    pub(super) process_gpu: (u64, u64),
}

/// Adds `w` (records, ns) to `to`.
pub(super) fn add_work(to: &mut (u64, u64), w: (u64, u64)) {
    to.0 += w.0;
    to.1 = to.1.saturating_add(w.1);
}

/// The name of a domain id of `t`: `(default)` for 0.
fn domain_namer(t: &Trace) -> impl Fn(u32) -> String {
    let domains = domain_names(t);
    move |id: u32| -> String {
        if id == 0 {
            "(default)".to_string()
        } else {
            domains
                .get(&id)
                .cloned()
                .unwrap_or_else(|| format!("domain#{id}"))
        }
    }
}

/// Range `s` of trace `t` of process `pid`, over.
fn range(t: &Trace, pid: u32, domain: &impl Fn(u32) -> String, s: Slot) -> NvtxRange {
    let mut process = s.acc.clone();
    process.merge(&s.foreign, false);
    NvtxRange {
        pid,
        tid: s.tid,
        end_tid: s.end_tid,
        domain: domain(s.domain),
        name: text(t, s.message, "(unnamed)"),
        category: s.category,
        start_ns: s.start,
        end_ns: s.end.unwrap_or(s.start),
        level: s.level,
        gpu_records: s.acc.records,
        gpu_ns: s.acc.ns,
        gpu_span: s.acc.gpu_span(),
        own_gpu_records: s.own_gpu_records,
        own_gpu_ns: s.own_gpu_ns,
        process_gpu_records: process.records,
        process_gpu_ns: process.ns,
        process_gpu_span: process.gpu_span(),
        process_own_gpu_records: s.own_gpu_records + s.foreign_own.0,
        process_own_gpu_ns: s.own_gpu_ns.saturating_add(s.foreign_own.1),
    }
}

/// The ranges of `slots` (over) of trace `t` of process `pid`, each with its order of
/// beginning, in the order given.
pub(super) fn ranges_of(t: &Trace, pid: u32, slots: Vec<Slot>) -> Vec<(u64, NvtxRange)> {
    let domain = domain_namer(t);
    slots
        .into_iter()
        .map(|s| (s.begun, range(t, pid, &domain, s)))
        .collect()
}

/// What was worked out for trace `t` of process `pid`: the ranges begun and never ended and
/// the marks (`open`, `marks`), the statistics per (domain id, message id), the ranges over
/// ([`super::Mode::Collect`]) and the external ids' rows.
pub(super) fn projected(
    t: &Trace,
    pid: u32,
    (open, marks): (u64, u64),
    acc: FastMap<(u32, u32), RangeAcc>,
    ranges: Vec<Slot>,
    rows: std::collections::BTreeMap<(u32, u64), ExternalRow>,
) -> Projected {
    let domain = domain_namer(t);
    let mut summary: Vec<NameAcc> = acc
        .into_iter()
        .map(|((d, m), a)| ((d, m), (domain(d), text(t, m, "(unnamed)")), a))
        .collect();
    summary.sort_by_key(|x| x.0);
    let mut ranges: Vec<NvtxRange> = ranges
        .into_iter()
        .map(|s| range(t, pid, &domain, s))
        .collect();
    sort(&mut ranges);
    let external = rows
        .into_iter()
        .map(|((kind, id), r)| ExternalSummary {
            pid,
            kind,
            id,
            calls: r.calls,
            gpu_records: r.gpu.0,
            gpu_ns: r.gpu.1,
            process_calls: r.process_calls,
            process_gpu_records: r.process_gpu.0,
            process_gpu_ns: r.process_gpu.1,
        })
        .collect();
    Projected {
        summary,
        open,
        marks,
        external,
        ranges: Ranges {
            ranges,
            open,
            marks,
        },
    }
}
