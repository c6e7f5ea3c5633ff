//! The "API summary" section of `--format table` ([`crate::summary`]), and the driver calls
//! made inside runtime calls.

use super::layout::{columns, plural, Align::Left, Page};
use crate::summary::FunctionSummary;
use crate::text::human_ns;
use std::fmt::Write;

/// The "API summary" section: one row per function, runtime calls and the driver calls made
/// outside them.
pub(super) fn section(out: &mut Page, processes: usize, summary: &[FunctionSummary]) {
    if summary.is_empty() {
        out.push_str("API summary: no API calls were recorded\n");
        return;
    }
    titled(out, "API summary", processes, summary);
}

/// The driver calls made inside runtime calls, one row per driver function (nothing without
/// runtime API records): the runtime's own driver calls, which the API summary leaves out.
pub(super) fn in_runtime_section(out: &mut Page, processes: usize, summary: &[FunctionSummary]) {
    if summary.is_empty() {
        return;
    }
    out.push('\n');
    titled(out, "Driver calls inside runtime calls", processes, summary);
}

fn titled(out: &mut Page, title: &str, processes: usize, summary: &[FunctionSummary]) {
    let calls: u64 = summary.iter().map(|s| s.calls).sum();
    let _ = writeln!(
        out,
        "{title}: {} {}, {} {}, {} {}",
        summary.len(),
        plural(summary.len() as u64, "function", "functions"),
        calls,
        plural(calls, "call", "calls"),
        processes,
        if processes == 1 {
            "process"
        } else {
            "processes"
        }
    );
    let headers = [
        "function", "calls", "errors", "total", "mean", "median", "min", "max", "stddev", "share",
    ];
    let rows: Vec<Vec<String>> = summary
        .iter()
        .map(|s| {
            vec![
                s.function.clone(),
                s.calls.to_string(),
                s.errors.to_string(),
                human_ns(s.total_ns),
                human_ns(s.mean_ns),
                human_ns(s.median_ns),
                human_ns(s.min_ns),
                human_ns(s.max_ns),
                human_ns(s.stddev_ns),
                format!("{}%", s.share_percent),
            ]
        })
        .collect();
    columns(out, &headers, &[Left], &rows);
}
