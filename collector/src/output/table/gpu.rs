//! The GPU sections of `--format table` ([`crate::gpu_summary`]): kernels, copies, memsets,
//! utilisation (per process and across processes), launch latency and occupancy.

use super::layout::{columns, plural, Align::Left, Page};
use super::occupancy;
use crate::model::Trace;
use crate::output::options::Section;
use crate::report::Sections;
use crate::text::{human_bytes, human_ns};
use std::fmt::Write;

/// The GPU sections, after the API summary; nothing when no trace holds GPU
/// activity records.
pub(super) fn sections(
    out: &mut Page,
    traces: &[Trace],
    s: &Sections,
    want: &dyn Fn(Section) -> bool,
    filter: Option<&str>,
) {
    let gpu_sections = [
        Section::Kernels,
        Section::Memcpy,
        Section::Memset,
        Section::Utilisation,
        Section::Shared,
        Section::Latency,
        Section::KernExec,
        Section::Occupancy,
    ];
    if s.counts.iter().all(|c| c.gpu() == 0) {
        if !gpu_sections.iter().any(|&g| want(g)) {
            return;
        }
        // Where the user looks for GPU work: why there is none.
        out.push('\n');
        for (t, c) in traces.iter().zip(&s.counts) {
            // GPU activity on: the filter may have left out all there was.
            let why = match filter {
                Some(f) if matches!(t.gpu_activity(), Some(Ok(_))) => {
                    Some(format!("none within the filter ({f})"))
                }
                _ => t.no_gpu_work(c.gpu()),
            };
            if let Some(why) = why {
                let _ = writeln!(out, "GPU work of process {}: none\n  {why}", t.header.pid);
            }
        }
        return;
    }
    if want(Section::Kernels) {
        out.push('\n');
        kernels(out, s);
    }
    if want(Section::Memcpy) {
        out.push('\n');
        memcpys(out, s);
    }
    if want(Section::Memset) {
        out.push('\n');
        memsets(out, s);
    }
    if (want(Section::Memcpy) || want(Section::Memset))
        && s.memcpy.len() + usize::from(s.memset.is_some()) > 0
    {
        out.push('\n');
        sizes(out, s);
    }
    if want(Section::Utilisation) {
        out.push('\n');
        utilisation_section(out, s);
    }
    if want(Section::Shared) && !s.shared.is_empty() {
        out.push('\n');
        shared_section(out, s);
    }
    if want(Section::Latency) {
        out.push('\n');
        latency(out, s);
    }
    if want(Section::KernExec) && !s.kern_exec.is_empty() {
        out.push('\n');
        kern_exec(out, s);
    }
    if want(Section::Occupancy) {
        occupancy::section(out, traces, s);
    }
}

fn kernels(out: &mut Page, s: &Sections) {
    let summary = &s.kernels;
    if summary.is_empty() {
        out.push_str("GPU kernel summary: no kernels were recorded\n");
        return;
    }
    let launches: u64 = summary.iter().map(|k| k.count).sum();
    let total: u64 = summary
        .iter()
        .fold(0u64, |acc, k| acc.saturating_add(k.total_ns));
    let _ = writeln!(
        out,
        "GPU kernel summary: {} {}, {} {}, {} of kernel time",
        summary.len(),
        plural(summary.len() as u64, "kernel", "kernels"),
        launches,
        plural(launches, "launch", "launches"),
        human_ns(total)
    );
    let headers = [
        "kernel",
        "count",
        "total",
        "mean",
        "median",
        "min",
        "max",
        "stddev",
        "share",
        "grid x block",
    ];
    let rows: Vec<Vec<String>> = summary
        .iter()
        .map(|k| {
            vec![
                k.name.clone(),
                k.count.to_string(),
                human_ns(k.total_ns),
                human_ns(k.mean_ns),
                human_ns(k.median_ns),
                human_ns(k.min_ns),
                human_ns(k.max_ns),
                human_ns(k.stddev_ns),
                format!("{}%", k.share_percent),
                k.grid_block.clone(),
            ]
        })
        .collect();
    columns(out, &headers, &[Left], &rows);
}

fn memcpys(out: &mut Page, s: &Sections) {
    let summary = &s.memcpy;
    if summary.is_empty() {
        out.push_str("Memory copies: none were recorded\n");
        return;
    }
    let count: u64 = summary.iter().map(|m| m.count).sum();
    let bytes = summary
        .iter()
        .fold(0u64, |acc, m| acc.saturating_add(m.bytes));
    let total = summary
        .iter()
        .fold(0u64, |acc, m| acc.saturating_add(m.total_ns));
    let _ = writeln!(
        out,
        "Memory copies: {count} {}, {} copied in {}",
        plural(count, "copy", "copies"),
        human_bytes(bytes),
        human_ns(total)
    );
    let headers = [
        "kind",
        "count",
        "bytes",
        "total",
        "mean",
        "median",
        "min",
        "max",
        "stddev",
        "share",
        "bandwidth",
    ];
    let rows: Vec<Vec<String>> = summary
        .iter()
        .map(|m| {
            vec![
                m.kind.name().to_string(),
                m.count.to_string(),
                human_bytes(m.bytes),
                human_ns(m.total_ns),
                human_ns(m.mean_ns),
                human_ns(m.median_ns),
                human_ns(m.min_ns),
                human_ns(m.max_ns),
                human_ns(m.stddev_ns),
                format!("{}%", m.share_percent),
                m.bandwidth_gbps
                    .map_or("-".to_string(), |b| format!("{b} GB/s")),
            ]
        })
        .collect();
    columns(out, &headers, &[Left], &rows);
}

/// The sizes of the copies (per kind) and memsets, like `nsys stats`' `cuda_gpu_mem_size_sum`.
fn sizes(out: &mut Page, s: &Sections) {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut row = |name: &str, count: u64, bytes: u64, z: &crate::gpu_summary::SizeStats| {
        rows.push(vec![
            name.to_string(),
            count.to_string(),
            human_bytes(bytes),
            human_bytes(z.mean_bytes),
            human_bytes(z.median_bytes),
            human_bytes(z.min_bytes),
            human_bytes(z.max_bytes),
            human_bytes(z.stddev_bytes),
        ]);
    };
    for m in &s.memcpy {
        row(m.kind.name(), m.count, m.bytes, &m.size);
    }
    if let Some(m) = &s.memset {
        row("memset", m.count, m.bytes, &m.size);
    }
    if rows.is_empty() {
        return;
    }
    out.push_str("Memory operation sizes\n");
    let headers = [
        "kind", "count", "total", "mean", "median", "min", "max", "stddev",
    ];
    columns(out, &headers, &[Left], &rows);
}

fn memsets(out: &mut Page, s: &Sections) {
    match &s.memset {
        None => out.push_str("Memsets: none were recorded\n"),
        Some(s) => {
            let _ = writeln!(
                out,
                "Memsets: {} {}, {} set in {}",
                s.count,
                plural(s.count, "memset", "memsets"),
                human_bytes(s.bytes),
                human_ns(s.total_ns)
            );
            let headers = [
                "count", "total", "mean", "median", "min", "max", "stddev", "share",
            ];
            let row = vec![
                s.count.to_string(),
                human_ns(s.total_ns),
                human_ns(s.mean_ns),
                human_ns(s.median_ns),
                human_ns(s.min_ns),
                human_ns(s.max_ns),
                human_ns(s.stddev_ns),
                format!("{}%", s.share_percent),
            ];
            columns(out, &headers, &[], &[row]);
        }
    }
}

fn utilisation_section(out: &mut Page, s: &Sections) {
    let rows = &s.utilisation;
    out.push_str(
        "GPU utilisation: busy time (kernels, copies, memsets) from the first start to the \
         last end\n",
    );
    let headers = [
        "process", "device", "stream", "records", "busy", "span", "busy %", "gaps", "idle",
    ];
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|u| {
            let mut row = vec![
                u.pid.to_string(),
                u.device.to_string(),
                u.stream.map_or("all".to_string(), |s| s.to_string()),
            ];
            row.extend(busy_cells(u));
            row
        })
        .collect();
    columns(out, &headers, &[Left], &rows);
}

/// The records, busy, span, busy %, gaps and idle cells of a utilisation row.
fn busy_cells(u: &crate::gpu_summary::Utilisation) -> [String; 6] {
    [
        u.records.to_string(),
        human_ns(u.busy_ns),
        human_ns(u.span_ns),
        format!("{}%", u.busy_percent),
        u.gaps.to_string(),
        human_ns(u.idle_ns),
    ]
}

/// GPUs that several traced processes of one host ran work on, busy over all of them.
fn shared_section(out: &mut Page, s: &Sections) {
    out.push_str(
        "GPU utilisation across processes: GPUs shared by processes of one host \
         (PROCESS:DEVICE, its ordinal in each)\n",
    );
    let headers = [
        "host",
        "GPU",
        "processes",
        "records",
        "busy",
        "span",
        "busy %",
        "gaps",
        "idle",
    ];
    let rows: Vec<Vec<String>> = s
        .shared
        .iter()
        .map(|d| {
            let mut row = vec![
                d.hostname.clone(),
                d.pci_address.clone(),
                d.processes_text(),
            ];
            row.extend(busy_cells(&d.utilisation));
            row
        })
        .collect();
    columns(out, &headers, &[Left, Left, Left], &rows);
}

fn latency(out: &mut Page, s: &Sections) {
    let l = &s.latency;
    if l.slowest.is_empty() {
        out.push_str("Slowest launch-to-start: no GPU record is matched with an API call\n");
        return;
    }
    let _ = writeln!(
        out,
        "Slowest launch-to-start: the {} largest of {} GPU {} matched with an API call",
        l.slowest.len(),
        l.correlated,
        plural(l.correlated, "record", "records"),
    );
    let headers = ["name", "API function", "process", "correlation", "latency"];
    let rows: Vec<Vec<String>> = l
        .slowest
        .iter()
        .map(|r| {
            let latency = if r.latency_ns < 0 {
                format!("-{}", human_ns(r.latency_ns.unsigned_abs()))
            } else {
                human_ns(r.latency_ns.unsigned_abs())
            };
            vec![
                r.name.clone(),
                r.function.clone(),
                r.pid.to_string(),
                r.correlation.to_string(),
                latency,
            ]
        })
        .collect();
    columns(out, &headers, &[Left, Left], &rows);
}

/// "Kernel launch and execution": per kernel name and launching function, the launches and
/// those that waited in the queue, the mean of each part and the median of the total (every
/// statistic of each part is in the CSV and JSON forms).
fn kern_exec(out: &mut Page, s: &Sections) {
    let rows = &s.kern_exec;
    let launches: u64 = rows.iter().map(|r| r.total.count).sum();
    let _ = writeln!(
        out,
        "Kernel launch and execution: {launches} {} matched with their calls \
         (total: from the call's start to the kernel's end)",
        plural(launches, "launch", "launches"),
    );
    let headers = [
        "kernel",
        "API function",
        "count",
        "queued",
        "API mean",
        "queue mean",
        "kernel mean",
        "total mean",
        "total median",
    ];
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.kernel.clone(),
                r.function.clone(),
                r.total.count.to_string(),
                r.queue.count.to_string(),
                human_ns(r.api.mean_ns),
                human_ns(r.queue.mean_ns),
                human_ns(r.kernel_time.mean_ns),
                human_ns(r.total.mean_ns),
                human_ns(r.total.median_ns),
            ]
        })
        .collect();
    columns(out, &headers, &[Left, Left], &body);
}
