//! The "API summary" section of `--format table` ([`crate::summary`]).

use super::layout::{columns, plural, Align::Left, Page};
use crate::summary::FunctionSummary;
use crate::text::human_ns;
use std::fmt::Write;

/// The "API summary" section: one row per driver function.
pub(super) fn section(out: &mut Page, processes: usize, summary: &[FunctionSummary]) {
    if summary.is_empty() {
        out.push_str("API summary: no API calls were recorded\n");
        return;
    }
    let calls: u64 = summary.iter().map(|s| s.calls).sum();
    let _ = writeln!(
        out,
        "API summary: {} {}, {} {}, {} {}",
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
