//! The "GPU metrics" part of `--format table` ([`crate::gpu_metrics`]): the sampling set-ups,
//! the notices on why sampling is off, then one table per scope (GPUs over the run, processes,
//! kernels, NVTX ranges): the time the work ran, the share of it sampled, and each metric's
//! average under a short label (byte rates in GB/s, the SM clock in MHz). Nothing when nothing
//! was sampled and no notice says why not.

use super::layout::{columns, plural, Align, Page};
use crate::gpu_metrics::{GpuMetricsSection, Row};
use crate::text::human_ns;
use std::fmt::Write;

/// Rows listed per scope; the rest are counted.
const ROWS_SHOWN: usize = 20;

/// A metric's column label and the factor its values are shown with; `None`: not shown in the
/// table (the sample's own duration, always 1 s per s).
pub(super) fn label(metric: &str) -> Option<(String, f64)> {
    let known = [
        (
            "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
            "SM active %",
            1.0,
        ),
        (
            "sm__issue_active.avg.pct_of_peak_sustained_elapsed",
            "issue %",
            1.0,
        ),
        (
            "sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed",
            "inst %",
            1.0,
        ),
        (
            "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
            "tensor %",
            1.0,
        ),
        (
            "sm__warps_active_realtime.avg.pct_of_peak_sustained_elapsed",
            "warps %",
            1.0,
        ),
        ("dram__bytes_read.sum.per_second", "DRAM rd GB/s", 1e-9),
        ("dram__bytes_write.sum.per_second", "DRAM wr GB/s", 1e-9),
        ("pcie__read_bytes.sum.per_second", "PCIe rd GB/s", 1e-9),
        ("pcie__write_bytes.sum.per_second", "PCIe wr GB/s", 1e-9),
        ("nvlrx__bytes.sum.per_second", "NVL rx GB/s", 1e-9),
        ("nvltx__bytes.sum.per_second", "NVL tx GB/s", 1e-9),
        ("sm__cycles_elapsed.avg.per_second", "SM MHz", 1e-6),
    ];
    if metric == "gpu__time_duration.sum.per_second" {
        return None;
    }
    Some(
        known
            .iter()
            .find(|k| k.0 == metric)
            .map_or((metric.to_string(), 1.0), |k| (k.1.to_string(), k.2)),
    )
}

pub(super) fn section(out: &mut Page, s: &GpuMetricsSection) {
    if s.is_empty() {
        return;
    }
    let samples: u64 = s.setups.iter().map(|u| u.samples).sum();
    let _ = writeln!(
        out,
        "\nGPU metrics: {samples} {} on {} {}",
        plural(samples, "sample", "samples"),
        s.setups.len(),
        plural(s.setups.len() as u64, "device", "devices")
    );
    for u in &s.setups {
        let _ = write!(
            out,
            "  set-up: pid {} device {}: {}, every {} {}, {} {}",
            u.pid,
            u.device,
            u.chip,
            u.interval,
            u.trigger,
            u.metrics,
            plural(u.metrics as u64, "metric", "metrics")
        );
        if u.overflows > 0 || u.dropped > 0 {
            let _ = write!(
                out,
                "; hardware buffer overflowed {} {}, {} {} lost",
                u.overflows,
                plural(u.overflows, "time", "times"),
                u.dropped,
                plural(u.dropped, "sample", "samples")
            );
        }
        out.push('\n');
    }
    for n in &s.notices {
        let _ = writeln!(out, "  notice (pid {}): {}", n.pid, n.message);
    }
    for e in &s.errors {
        let _ = writeln!(out, "  not evaluated: {e}");
    }
    let shown: Vec<(usize, String, f64)> = s
        .metrics
        .iter()
        .enumerate()
        .filter_map(|(i, m)| label(m).map(|(l, f)| (i, l, f)))
        .collect();
    for (title, rows) in [
        ("GPUs, over the run", &s.devices),
        ("Processes, over the time their GPU work ran", &s.processes),
        ("Kernels, over the time their launches ran", &s.kernels),
        ("NVTX ranges, over the time their GPU work ran", &s.nvtx),
    ] {
        if !rows.is_empty() {
            table(out, title, rows, &shown);
        }
    }
}

fn table(out: &mut Page, title: &str, rows: &[Row], shown: &[(usize, String, f64)]) {
    let _ = writeln!(out, "\n{title}");
    let mut headers = vec!["name", "pid", "device", "time", "sampled %"];
    headers.extend(shown.iter().map(|s| s.1.as_str()));
    let mut align = vec![Align::Left];
    align.resize(headers.len(), Align::Right);
    let body: Vec<Vec<String>> = rows
        .iter()
        .take(ROWS_SHOWN)
        .map(|r| {
            let mut cells = vec![
                r.name.clone(),
                r.pid.to_string(),
                r.device.to_string(),
                human_ns(r.span_ns),
                format!("{:.1}", 100.0 * r.covered),
            ];
            cells.extend(shown.iter().map(|&(i, _, f)| {
                let v = r.values.get(i).copied().unwrap_or(f64::NAN);
                if v.is_finite() {
                    format!("{:.2}", v * f)
                } else {
                    "-".to_string()
                }
            }));
            cells
        })
        .collect();
    columns(out, &headers, &align, &body);
    if rows.len() > ROWS_SHOWN {
        let _ = writeln!(out, "  ... and {} more", rows.len() - ROWS_SHOWN);
    }
}
