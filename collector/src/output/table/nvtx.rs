//! The "NVTX ranges" and "External correlation" sections of `--format table`
//! ([`crate::nvtx`]): GPU work in the process view, with the thread view beside it.

use super::layout::{columns, Align::Left, Page};
use crate::text::human_ns;
use std::fmt::Write;

/// "NVTX ranges": one row per range name and domain; nothing when the traces hold no NVTX
/// events.
pub(super) fn ranges_section(out: &mut Page, s: &crate::nvtx::NvtxSection) {
    let (rows, open, marks) = (&s.rows, s.open, s.marks);
    if rows.is_empty() && open == 0 && marks == 0 {
        return;
    }
    let ranges: u64 = rows.iter().map(|r| r.count).sum();
    let _ = writeln!(
        out,
        "\nNVTX ranges: {ranges} {}, {} {}, {open} open, {marks} {}",
        if ranges == 1 { "range" } else { "ranges" },
        rows.len(),
        if rows.len() == 1 { "name" } else { "names" },
        if marks == 1 { "mark" } else { "marks" },
    );
    out.push_str(RANGE_VIEWS);
    let headers = [
        "range",
        "domain",
        "count",
        "total",
        "mean",
        "median",
        "min",
        "max",
        "stddev",
        "share",
        "GPU work",
        "GPU time",
        "own time",
        "thread work",
        "thread time",
    ];
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.name.clone(),
                r.domain.clone(),
                r.count.to_string(),
                human_ns(r.total_ns),
                human_ns(r.mean_ns),
                human_ns(r.median_ns),
                human_ns(r.min_ns),
                human_ns(r.max_ns),
                human_ns(r.stddev_ns),
                format!("{}%", r.share_percent),
                r.process_gpu_records.to_string(),
                human_ns(r.process_gpu_ns),
                human_ns(r.process_own_gpu_ns),
                r.gpu_records.to_string(),
                human_ns(r.gpu_ns),
            ]
        })
        .collect();
    columns(out, &headers, &[Left, Left], &body);
}

/// What the GPU columns of the ranges count.
const RANGE_VIEWS: &str = "GPU work, time and own time: the process view (launches of other \
                           threads with no range of the domain open count too; docs/nvtx.md); \
                           thread: its own thread's launches only\n";

/// What the columns of the external ids count.
const ID_VIEWS: &str = "calls, GPU work and time: the process view (calls of other threads \
                        with no id of the kind pushed count too; docs/nvtx.md); thread: its own \
                        thread's calls only\n";

/// External correlation ids listed; the rest are counted.
const EXTERNAL_LISTED: usize = 20;

/// "External correlation": the ids with the most GPU time; nothing without pushed ids.
pub(super) fn external_section(out: &mut Page, rows: &[crate::nvtx::ExternalSummary]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nExternal correlation: {} {} (rtrace_push_external_correlation), by GPU time",
        rows.len(),
        if rows.len() == 1 { "id" } else { "ids" }
    );
    out.push_str(ID_VIEWS);
    let headers = [
        "id",
        "kind",
        "process",
        "calls",
        "GPU work",
        "GPU time",
        "thread calls",
        "thread work",
        "thread time",
    ];
    let body: Vec<Vec<String>> = rows
        .iter()
        .take(EXTERNAL_LISTED)
        .map(|r| {
            vec![
                r.id.to_string(),
                r.kind.to_string(),
                r.pid.to_string(),
                r.process_calls.to_string(),
                r.process_gpu_records.to_string(),
                human_ns(r.process_gpu_ns),
                r.calls.to_string(),
                r.gpu_records.to_string(),
                human_ns(r.gpu_ns),
            ]
        })
        .collect();
    columns(out, &headers, &[Left], &body);
    if rows.len() > EXTERNAL_LISTED {
        let _ = writeln!(
            out,
            "  … and {} more (--format json lists them)",
            rows.len() - EXTERNAL_LISTED
        );
    }
}
