//! NVTX ranges: the program's push/pop and start/end ranges rebuilt from its NVTX events, and
//! their statistics per domain and name.
//!
//! - Push/pop ranges nest per thread and domain: a pop ends the innermost range of its domain
//!   on its thread.
//! - Start/end ranges are matched by range id, on any thread.
//! - A range still open when the trace ends is counted as open, not summarised.
//! - Names: the event's message (a registered string included); a range without one is
//!   `(unnamed)`. Domains: the name `nvtxDomainCreate` gave, `(default)` for the default one.
//! - GPU work of a range ("projected" onto the GPU): the kernels, copies and memsets linked to
//!   the API calls its thread (the one it began on) made between its start and end, nested
//!   ranges included; their GPU time is the sum of their durations. A call's innermost range
//!   is the latest begun of those that began last before it. That is the thread view; the
//!   process view adds the launches of the process's other threads made while the range was
//!   open, from threads with no range of its domain open (`process.rs`, docs/nvtx.md).
//!
//! Ranges are built as the events stream by in time order with the API and GPU records
//! ([`Projector`]), held only while open or while their calls' GPU work is still to come;
//! their statistics are kept per name ([`RangeAcc`]), the median exact by further passes over
//! the events ([`NvtxStats`]). An end that comes before its start (damaged times) ends
//! nothing.

mod chain;
mod external;
mod outcome;
mod passes;
mod process;
mod projector;
mod stats;

pub(crate) use passes::project_rec;
pub use passes::{nvtx_in_memory, nvtx_pass, project, project_in_memory};
pub use projector::Projector;

pub use stats::{
    range_name, ExternalSummary, LiveSpan, Mode, NameAcc, NvtxRange, NvtxSection, NvtxStats,
    NvtxSummary, Projected, RangeAcc, Ranges, Shown,
};

use crate::model::Trace;
use rtrace_format::NvtxKind;

/// Rebuilds the ranges of `t` (held in memory), in order of their start, with their GPU work.
pub fn ranges(t: &Trace) -> Ranges {
    let mut p = Projector::new(t, None, Mode::Collect);
    project_in_memory(&mut p, t);
    p.finish(t).ranges
}

/// The NVTX section of `traces` held in memory.
pub fn section(traces: &[Trace]) -> NvtxSection {
    let mut stats = NvtxStats::default();
    let mut ids = Vec::new();
    for t in traces {
        if !has_nvtx(t) {
            continue;
        }
        let mut p = Projector::new(t, None, Mode::Summary);
        project_in_memory(&mut p, t);
        ids.push((t, stats.add(p.finish(t))));
    }
    while stats.end_pass() {
        for (t, ids) in &ids {
            nvtx_in_memory(t, |key, v| {
                if let Some(&row) = ids.get(&key) {
                    stats.select(row, v);
                }
            });
        }
    }
    stats.finish()
}

/// Whether `t` holds NVTX events other than domain and thread names.
pub fn has_nvtx(t: &Trace) -> bool {
    t.threads.values().any(|th| {
        th.nvtx
            .iter()
            .any(|e| !matches!(e.kind, NvtxKind::DomainCreate | NvtxKind::NameThread))
    })
}

/// Summaries of all `traces`' ranges (held in memory), and the open ranges and marks counted.
pub fn nvtx_summary(traces: &[Trace]) -> (Vec<NvtxSummary>, u64, u64) {
    let s = section(traces);
    (s.rows, s.open, s.marks)
}

/// One row per (process, kind, id) pushed with `rtrace_push_external_correlation` in
/// `traces` (held in memory), sorted by GPU time (descending), then process, kind and id.
pub fn external_summary(traces: &[Trace]) -> Vec<ExternalSummary> {
    section(traces).external
}
