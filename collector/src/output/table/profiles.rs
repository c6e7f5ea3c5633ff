//! The "Kernel profiles" part of `--format table` ([`crate::profiles`]): the set-ups and the
//! notices on why profiling is off, then per kernel its launches, one table per section
//! (the value for one launch; mean, min, max and the count over several) and the findings.
//! Nothing when nothing was profiled and no notice says why not.

use super::layout::{columns, plural, Align::Left, Page};
use crate::profiles::{ProfileSection, ProfiledKernel};
use crate::text::human_ns;
use std::fmt::Write;

/// Launches listed under a kernel; the rest are counted.
const LAUNCHES_SHOWN: usize = 10;

pub(super) fn section(out: &mut Page, s: &ProfileSection) {
    if s.is_empty() {
        return;
    }
    let launches: usize = s.kernels.iter().map(|k| k.launches.len()).sum();
    let _ = writeln!(
        out,
        "\nKernel profiles: {launches} {} of {} {} profiled",
        plural(launches as u64, "launch", "launches"),
        s.kernels.len(),
        plural(s.kernels.len() as u64, "kernel", "kernels")
    );
    for u in &s.setups {
        let _ = writeln!(
            out,
            "  set-up: pid {} context {} device {}: {}, {} {}, {} {}, {} replay",
            u.pid,
            u.context,
            u.device,
            u.chip,
            u.passes,
            plural(u64::from(u.passes), "pass", "passes"),
            u.metrics,
            plural(u.metrics as u64, "metric", "metrics"),
            u.replay
        );
    }
    for n in &s.notices {
        let _ = writeln!(out, "  notice (pid {}): {}", n.pid, n.message);
    }
    for k in &s.kernels {
        kernel(out, k);
    }
}

fn kernel(out: &mut Page, k: &ProfiledKernel) {
    let n = k.launches.len();
    let _ = writeln!(
        out,
        "\n{}: {n} {} profiled",
        k.name,
        plural(n as u64, "launch", "launches")
    );
    for l in k.launches.iter().take(LAUNCHES_SHOWN) {
        let _ = write!(
            out,
            "  launch {} (pid {}, correlation {}): profiling took {}",
            l.launch,
            l.pid,
            l.correlation,
            human_ns(l.profiling_ns)
        );
        match &l.kernel {
            Some(r) => {
                let dim = |d: [i32; 3]| format!("({},{},{})", d[0], d[1], d[2]);
                let _ = writeln!(
                    out,
                    "; ran {} on device {} stream {}, grid {} block {}",
                    human_ns(r.duration_ns),
                    r.device,
                    r.stream,
                    dim(r.grid),
                    dim(r.block)
                );
            }
            None => out.push_str("; no kernel record\n"),
        }
        if !l.nvtx.is_empty() {
            let _ = writeln!(out, "    inside NVTX {}", l.nvtx.join(" > "));
        }
    }
    if n > LAUNCHES_SHOWN {
        let _ = writeln!(out, "  ... {} more launches", n - LAUNCHES_SHOWN);
    }
    for b in &k.blocks {
        let _ = writeln!(out, "  {}", b.title);
        let rows: Vec<Vec<String>> = b
            .rows
            .iter()
            .map(|r| {
                let mut row = vec![format!("  {}", r.label), r.unit.name().to_string()];
                if n == 1 {
                    row.push(r.unit.show(r.mean));
                } else {
                    row.extend([
                        r.unit.show(r.mean),
                        r.unit.show(r.min),
                        r.unit.show(r.max),
                        r.count.to_string(),
                    ]);
                }
                row
            })
            .collect();
        let headers: &[&str] = if n == 1 {
            &["  metric", "unit", "value"]
        } else {
            &["  metric", "unit", "mean", "min", "max", "launches"]
        };
        columns(out, headers, &[Left, Left], &rows);
    }
    for e in &k.evaluation_errors {
        let _ = writeln!(out, "  not evaluated: {e}");
    }
    if let Some(t) = k.theoretical_occupancy {
        let _ = writeln!(out, "  theoretical occupancy {t:.2}%");
    }
    if !k.findings.is_empty() {
        out.push_str("  Findings:\n");
        for f in &k.findings {
            let speedup = f
                .speedup_pct
                .map(|s| format!(" (est. local speedup {s:.2}%)"))
                .unwrap_or_default();
            let _ = writeln!(out, "    {}: {}{speedup}", f.rule, f.message);
        }
    }
}
