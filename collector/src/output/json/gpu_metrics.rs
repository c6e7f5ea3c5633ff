//! The `"gpu_metrics"` key of `--format json` ([`crate::gpu_metrics`]): only when something was
//! sampled or a notice says why not. Values as computed (`null` for NaN), metric names in
//! `"metrics"`, each row's `"values"` in that order.

use super::profiles::number;
use crate::gpu_metrics::{GpuMetricsSection, Row};
use crate::text::json_string;
use std::fmt::Write;

/// `,\n"gpu_metrics":{"setups":[...],"notices":[...],"errors":[...],"metrics":[...],
/// "devices":[...],"processes":[...],"kernels":[...],"nvtx":[...]}`.
pub(super) fn key(out: &mut String, s: &GpuMetricsSection) {
    if s.is_empty() {
        return;
    }
    out.push_str(",\n\"gpu_metrics\":{\"setups\":[");
    for (i, u) in s.setups.iter().enumerate() {
        let sep = if i > 0 { "," } else { "" };
        let _ = write!(
            out,
            "{sep}{{\"pid\":{},\"device\":{},\"chip\":{},\"interval\":{},\"interval_unit\":{},\
             \"metrics\":{},\"samples\":{},\"overflows\":{},\"dropped\":{}}}",
            u.pid,
            u.device,
            json_string(&u.chip),
            u.interval,
            json_string(u.trigger),
            u.metrics,
            u.samples,
            u.overflows,
            u.dropped
        );
    }
    out.push_str("],\"notices\":[");
    for (i, n) in s.notices.iter().enumerate() {
        let sep = if i > 0 { "," } else { "" };
        let _ = write!(
            out,
            "{sep}{{\"pid\":{},\"message\":{}}}",
            n.pid,
            json_string(&n.message)
        );
    }
    out.push_str("],\"errors\":[");
    let errors: Vec<String> = s.errors.iter().map(|e| json_string(e)).collect();
    out.push_str(&errors.join(","));
    out.push_str("],\"metrics\":[");
    let metrics: Vec<String> = s.metrics.iter().map(|m| json_string(m)).collect();
    out.push_str(&metrics.join(","));
    out.push(']');
    for (name, rows) in [
        ("devices", &s.devices),
        ("processes", &s.processes),
        ("kernels", &s.kernels),
        ("nvtx", &s.nvtx),
    ] {
        let _ = write!(out, ",\"{name}\":[");
        for (i, r) in rows.iter().enumerate() {
            out.push_str(if i == 0 { "\n  " } else { ",\n  " });
            row(out, r);
        }
        out.push_str(if rows.is_empty() { "]" } else { "\n]" });
    }
    out.push('}');
}

fn row(out: &mut String, r: &Row) {
    let values: Vec<String> = r.values.iter().map(|v| number(*v)).collect();
    let _ = write!(
        out,
        "{{\"pid\":{},\"device\":{},\"name\":{},\"span_ns\":{},\"covered\":{},\"values\":[{}]}}",
        r.pid,
        r.device,
        json_string(&r.name),
        r.span_ns,
        number(r.covered),
        values.join(",")
    );
}
