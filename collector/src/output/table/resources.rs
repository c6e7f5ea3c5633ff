//! The "Resources" section of `--format table` ([`crate::gpu_summary::resources`]):
//! devices, contexts, streams, modules and functions.

use super::layout::{columns, plural, Align::Left, Align::Right, Page};
use crate::gpu_summary::resources;
use crate::model::Trace;
use crate::text::human_bytes;
use std::fmt::Write;

/// Streams, modules and functions listed in the "Resources" section; the rest are counted.
const RESOURCES_LISTED: usize = 20;

/// The "Resources" section, after the API summary: devices, contexts,
/// streams, modules and functions; nothing when no trace describes a device or
/// holds a resource record.
pub(super) fn section(out: &mut Page, traces: &[Trace]) {
    let r = resources(traces);
    if r.is_empty() {
        return;
    }
    let count = |n: usize, one, many| format!("{n} {}", plural(n as u64, one, many));
    let _ = writeln!(
        out,
        "\nResources: {}, {}, {}, {}, {}",
        count(r.devices.len(), "device", "devices"),
        count(r.contexts.len(), "context", "contexts"),
        count(r.streams.len(), "stream", "streams"),
        count(r.modules.len(), "module", "modules"),
        count(r.functions.len(), "function", "functions"),
    );
    let opt = |v: Option<i32>| v.map_or("?".to_string(), |v| v.to_string());
    let mhz = |khz: Option<i32>| khz.map_or("?".to_string(), |k| format!("{} MHz", k / 1000));
    if !r.devices.is_empty() {
        out.push_str("Devices\n");
        let headers = [
            "name",
            "process",
            "device",
            "compute capability",
            "SMs",
            "memory",
            "clock",
            "memory clock",
        ];
        let rows: Vec<Vec<String>> = r
            .devices
            .iter()
            .map(|d| {
                vec![
                    d.name.clone(),
                    d.pid.to_string(),
                    d.ordinal.to_string(),
                    d.compute_capability
                        .map_or("?".to_string(), |(major, minor)| format!("{major}.{minor}")),
                    opt(d.multiprocessors),
                    human_bytes(d.total_memory),
                    mhz(d.clock_khz),
                    mhz(d.memory_clock_khz),
                ]
            })
            .collect();
        columns(out, &headers, &[Left, Left], &rows);
    }
    if !r.contexts.is_empty() {
        out.push_str("Contexts\n");
        let headers = [
            "process",
            "context",
            "device",
            "NULL stream",
            "streams",
            "modules",
            "functions",
            "kind",
        ];
        let rows: Vec<Vec<String>> = r
            .contexts
            .iter()
            .map(|c| {
                let kind = if c.is_green {
                    format!(
                        "green ({} SMs, from {})",
                        c.multiprocessors, c.parent_context
                    )
                } else {
                    "regular".to_string()
                };
                vec![
                    c.pid.to_string(),
                    c.context.to_string(),
                    c.device.to_string(),
                    c.null_stream.to_string(),
                    c.streams.to_string(),
                    c.modules.to_string(),
                    c.functions.to_string(),
                    kind,
                ]
            })
            .collect();
        let align = [Left, Right, Right, Right, Right, Right, Right, Left];
        columns(out, &headers, &align, &rows);
    }
    let more = |out: &mut Page, n: usize| {
        if n > RESOURCES_LISTED {
            let _ = writeln!(out, "  … and {} more", n - RESOURCES_LISTED);
        }
    };
    if !r.streams.is_empty() {
        out.push_str("Streams (flag: default, non-blocking, null; priority: lower is higher)\n");
        let headers = [
            "process",
            "context",
            "stream",
            "flag",
            "priority",
            "created by",
        ];
        let rows: Vec<Vec<String>> = r
            .streams
            .iter()
            .take(RESOURCES_LISTED)
            .map(|s| {
                vec![
                    s.pid.to_string(),
                    s.context.to_string(),
                    s.stream.to_string(),
                    s.flag.name().to_string(),
                    s.priority.to_string(),
                    s.created_by.clone().unwrap_or_else(|| "-".to_string()),
                ]
            })
            .collect();
        columns(
            out,
            &headers,
            &[Left, Right, Right, Left, Right, Left],
            &rows,
        );
        more(out, r.streams.len());
    }
    if !r.modules.is_empty() {
        out.push_str("Modules\n");
        let headers = [
            "process",
            "context",
            "module",
            "size",
            "functions",
            "loaded by",
            "unloaded by",
        ];
        let rows: Vec<Vec<String>> = r
            .modules
            .iter()
            .take(RESOURCES_LISTED)
            .map(|m| {
                vec![
                    m.pid.to_string(),
                    m.context.to_string(),
                    m.module.to_string(),
                    human_bytes(m.cubin_size),
                    m.functions.to_string(),
                    m.loaded_by.clone().unwrap_or_else(|| "-".to_string()),
                    match (&m.unloaded_by, m.unloaded_ns) {
                        (Some(f), _) => f.clone(),
                        (None, Some(_)) => "(unloaded)".to_string(),
                        (None, None) => "-".to_string(),
                    },
                ]
            })
            .collect();
        columns(
            out,
            &headers,
            &[Left, Right, Right, Right, Right, Left, Left],
            &rows,
        );
        more(out, r.modules.len());
    }
    if !r.functions.is_empty() {
        out.push_str("Functions\n");
        let headers = ["function", "process", "context", "module", "index"];
        let rows: Vec<Vec<String>> = r
            .functions
            .iter()
            .take(RESOURCES_LISTED)
            .map(|f| {
                vec![
                    f.name.clone(),
                    f.pid.to_string(),
                    f.context.to_string(),
                    f.module.to_string(),
                    f.index.to_string(),
                ]
            })
            .collect();
        columns(out, &headers, &[Left], &rows);
        more(out, r.functions.len());
    }
}
