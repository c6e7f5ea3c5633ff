//! The "Memory" and "Synchronization" sections of `--format table`.

use super::layout::{columns, plural, Align::Left, Page};
use crate::gpu_summary::{MemorySummary, SyncSummary};
use crate::output::options::Section;
use crate::report::Sections;
use crate::text::{human_bytes, human_ns};
use std::fmt::Write;

/// The "Memory" and "Synchronization" sections, after the GPU sections; nothing
/// when no trace holds memory or synchronization records.
pub(super) fn sections(out: &mut Page, s: &Sections, want: &dyn Fn(Section) -> bool) {
    if s.counts.iter().all(|c| c.memory + c.syncs == 0) {
        return;
    }
    if want(Section::Memory) {
        out.push('\n');
        memory(out, &s.memory);
    }
    if want(Section::Sync) {
        out.push('\n');
        syncs(out, &s.sync);
    }
}

fn memory(out: &mut Page, summary: &[MemorySummary]) {
    if summary.is_empty() {
        out.push_str("Memory: no allocations or frees were recorded\n");
        return;
    }
    let allocations: u64 = summary.iter().map(|m| m.allocations).sum();
    let frees: u64 = summary.iter().map(|m| m.frees).sum();
    let bytes = summary
        .iter()
        .fold(0u64, |acc, m| acc.saturating_add(m.bytes_allocated));
    let _ = writeln!(
        out,
        "Memory: {allocations} {}, {frees} {}, {} allocated",
        plural(allocations, "allocation", "allocations"),
        plural(frees, "free", "frees"),
        human_bytes(bytes)
    );
    let headers = [
        "kind",
        "allocations",
        "frees",
        "allocated",
        "peak in use",
        "largest",
        "never freed",
    ];
    let rows: Vec<Vec<String>> = summary
        .iter()
        .map(|m| {
            vec![
                m.kind.name().to_string(),
                m.allocations.to_string(),
                m.frees.to_string(),
                human_bytes(m.bytes_allocated),
                human_bytes(m.peak_bytes),
                human_bytes(m.largest_bytes),
                human_bytes(m.live_bytes),
            ]
        })
        .collect();
    columns(out, &headers, &[Left], &rows);
}

fn syncs(out: &mut Page, summary: &[SyncSummary]) {
    if summary.is_empty() {
        out.push_str("Synchronization: none was recorded\n");
        return;
    }
    let count: u64 = summary.iter().map(|s| s.count).sum();
    let total = summary
        .iter()
        .fold(0u64, |acc, s| acc.saturating_add(s.total_wait_ns));
    let _ = writeln!(
        out,
        "Synchronization: {count} {}, {} of host wait",
        plural(count, "synchronization", "synchronizations"),
        human_ns(total)
    );
    let headers = ["type", "count", "total wait", "mean wait", "max wait"];
    let rows: Vec<Vec<String>> = summary
        .iter()
        .map(|s| {
            vec![
                s.kind.to_string(),
                s.count.to_string(),
                human_ns(s.total_wait_ns),
                human_ns(s.mean_wait_ns),
                human_ns(s.max_wait_ns),
            ]
        })
        .collect();
    columns(out, &headers, &[Left], &rows);
}
