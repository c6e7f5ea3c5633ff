//! `--format table`: process sections, the API summary, then (when the traces
//! hold them) the resources (devices, contexts, streams, modules, functions),
//! the GPU sections, and the memory and synchronization sections, as aligned
//! columns that fit in [`WIDTH`] columns, or the width [`set_width`] gave (the terminal's).

use crate::gpu_summary::{resources, MemorySummary, SyncSummary};
use crate::model::{Duration, Trace};
use crate::output::{human_bytes, human_ns, iso8601_utc, shell_join};
use crate::report::fold::Counts;
use crate::report::Sections;
use crate::summary::FunctionSummary;
use std::fmt::Write;

mod occupancy;

/// The first column is never cut narrower than this (lines may then be wider than the width).
const MIN_FIRST_COLUMN: usize = 24;
/// The widest line tables are laid out for, unless [`set_width`] says otherwise.
pub const WIDTH: usize = 120;

static TABLE_WIDTH: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(WIDTH);

/// Lays tables out for lines of at most `width` characters (the first column of a table is
/// cut to fit; the others never are).
pub fn set_width(width: usize) {
    TABLE_WIDTH.store(width, std::sync::atomic::Ordering::Relaxed);
}

fn width() -> usize {
    TABLE_WIDTH.load(std::sync::atomic::Ordering::Relaxed)
}
/// Threads listed by name in a process section; the rest are counted.
const THREADS_LISTED: usize = 16;
/// Notices listed in a process section; the rest are counted.
const NOTICES_LISTED: usize = 20;
/// Streams, modules and functions listed in the "Resources" section; the rest are counted.
const RESOURCES_LISTED: usize = 20;

pub(super) fn render(traces: &[Trace], s: &Sections) -> String {
    let mut out = String::new();
    for (t, c) in traces.iter().zip(&s.counts) {
        process(&mut out, t, c);
        out.push('\n');
    }
    api(&mut out, traces.len(), &s.api);
    nvtx_section(&mut out, &s.nvtx);
    external_section(&mut out, &s.nvtx.external);
    resources_section(&mut out, traces);
    gpu(&mut out, traces, s);
    memory_and_sync(&mut out, s);
    pc_sampling_section(&mut out, traces);
    out
}

/// Kernels given a breakdown in "PC sampling"; the rest are counted.
const PC_KERNELS_LISTED: usize = 10;

/// "PC sampling": per kernel, its samples by stall reason, its hottest instructions and source
/// lines; nothing when the traces were not recorded with PC sampling.
fn pc_sampling_section(out: &mut String, traces: &[Trace]) {
    use crate::pcsamp::{share, top_stalls, LISTED};
    if !crate::pcsamp::present(traces) {
        return;
    }
    let p = crate::pcsamp::report_profile(traces);
    let samples: u64 = p.kernels.iter().map(|k| k.samples).sum();
    let periods = p
        .periods
        .iter()
        .map(|n| format!("2^{n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        out,
        "\nPC sampling: {samples} samples in {} {} ({} {} sampled every {periods} cycles; CUPTI counted {} samples, {} dropped, {} in kernels without PCs{})",
        p.kernels.len(),
        if p.kernels.len() == 1 { "kernel" } else { "kernels" },
        p.contexts,
        if p.contexts == 1 { "context" } else { "contexts" },
        p.total_samples,
        p.dropped_samples,
        p.non_user_samples,
        if p.buffer_full_reads > 0 {
            format!("; its hardware buffer was full at {} reads", p.buffer_full_reads)
        } else {
            String::new()
        }
    );
    for note in p.notes.iter().chain(&p.sass_note) {
        let _ = writeln!(out, "  {note}");
    }
    for k in p.kernels.iter().take(PC_KERNELS_LISTED) {
        let _ = writeln!(
            out,
            "\n  {}: {} samples ({} of all): {}",
            k.demangled,
            k.samples,
            share(k.samples, samples),
            top_stalls(&k.stalls, k.samples, 4)
        );
        let headers = [
            "instruction",
            "offset",
            "samples",
            "share",
            "source",
            "stall reasons",
        ];
        let body: Vec<Vec<String>> = k
            .pcs
            .iter()
            .take(LISTED)
            .map(|r| {
                vec![
                    r.instruction.clone().unwrap_or_else(|| "?".to_string()),
                    format!("{:#06x}", r.offset),
                    r.samples.to_string(),
                    share(r.samples, k.samples),
                    r.line
                        .as_ref()
                        .map(|(f, n)| format!("{}:{n}", file_name(f)))
                        .unwrap_or_default(),
                    top_stalls(&r.stalls, r.samples, 3),
                ]
            })
            .collect();
        columns(
            out,
            &headers,
            &[Left, Right, Right, Right, Left, Left],
            &body,
        );
        if k.pcs.len() > LISTED {
            let _ = writeln!(out, "  … and {} more instructions", k.pcs.len() - LISTED);
        }
        if !k.lines.is_empty() {
            let headers = ["source line", "samples", "share", "stall reasons"];
            let body: Vec<Vec<String>> = k
                .lines
                .iter()
                .take(LISTED)
                .map(|l| {
                    vec![
                        format!("{}:{}", file_name(&l.file), l.line),
                        l.samples.to_string(),
                        share(l.samples, k.samples),
                        top_stalls(&l.stalls, l.samples, 3),
                    ]
                })
                .collect();
            columns(out, &headers, &[Left, Right, Right, Left], &body);
            if k.lines.len() > LISTED {
                let _ = writeln!(out, "  … and {} more lines", k.lines.len() - LISTED);
            }
        }
    }
    if p.kernels.len() > PC_KERNELS_LISTED {
        let _ = writeln!(
            out,
            "\n  … and {} more kernels (--format json lists them)",
            p.kernels.len() - PC_KERNELS_LISTED
        );
    }
}

/// The last component of a source path.
fn file_name(path: &str) -> String {
    std::path::Path::new(path)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_string())
}

/// "NVTX ranges": one row per range name and domain; nothing when the traces hold no NVTX
/// events.
fn nvtx_section(out: &mut String, s: &crate::nvtx::NvtxSection) {
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
    let headers = [
        "range", "domain", "count", "total", "mean", "median", "min", "max", "GPU work",
        "GPU time", "own time",
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
                r.gpu_records.to_string(),
                human_ns(r.gpu_ns),
                human_ns(r.own_gpu_ns),
            ]
        })
        .collect();
    columns(out, &headers, &[Left, Left], &body);
}

/// External correlation ids listed; the rest are counted.
const EXTERNAL_LISTED: usize = 20;

/// "External correlation": the ids with the most GPU time; nothing without pushed ids.
fn external_section(out: &mut String, rows: &[crate::nvtx::ExternalSummary]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nExternal correlation: {} {} (rtrace_push_external_correlation), by GPU time",
        rows.len(),
        if rows.len() == 1 { "id" } else { "ids" }
    );
    let headers = ["id", "kind", "process", "calls", "GPU work", "GPU time"];
    let body: Vec<Vec<String>> = rows
        .iter()
        .take(EXTERNAL_LISTED)
        .map(|r| {
            vec![
                r.id.to_string(),
                r.kind.to_string(),
                r.pid.to_string(),
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

fn field(out: &mut String, name: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "  {name:<18} {value}");
}

fn process(out: &mut String, t: &Trace, c: &Counts) {
    let h = &t.header;
    let _ = writeln!(out, "Process {} ({})", h.pid, t.path.display());
    field(out, "pid", h.pid);
    field(out, "ppid", h.ppid);
    match h.forked_from {
        Some(parent) => field(out, "forked from", parent),
        None => field(out, "forked from", "-"),
    }
    field(out, "command line", shell_join(&h.command_line));
    field(out, "executable", &h.executable);
    field(out, "host", &h.hostname);
    if let Some(shift) = &t.clock_shift {
        field(out, "clock", crate::clocks::describe(shift));
    }
    field(
        out,
        "writer version",
        format_args!(
            "{} (format {}.{})",
            h.writer_version, t.format_version.0, t.format_version.1
        ),
    );
    if h.start.realtime_ns == 0 {
        field(out, "start time", "unknown");
    } else {
        field(out, "start time", iso8601_utc(h.start.realtime_ns));
    }
    match c.duration(t) {
        Duration::ToEnd(ns) => field(out, "duration", human_ns(ns)),
        Duration::ToLastRecord(ns) => field(
            out,
            "duration",
            format_args!("at least {} (to the last API record)", human_ns(ns)),
        ),
        Duration::Unknown => field(out, "duration", "unknown"),
    }
    field(out, "tracing ended", t.end_reason());
    threads(out, t, c);
    field(out, "API records", c.api);
    if c.gpu() > 0 {
        let (k, c, m) = (c.kernels, c.memcpys, c.memsets);
        field(
            out,
            "GPU records",
            format_args!(
                "{k} {}, {c} {}, {m} {}",
                plural(k, "kernel", "kernels"),
                plural(c, "copy", "copies"),
                plural(m, "memset", "memsets")
            ),
        );
    }
    if t.resource_records() > 0 {
        let counts = [
            (t.contexts.len(), "context", "contexts"),
            (t.streams.len(), "stream", "streams"),
            (t.modules.len(), "module", "modules"),
            (t.module_unloads.len(), "module unload", "module unloads"),
            (t.gpu_functions.len(), "function", "functions"),
        ];
        let text: Vec<String> = counts
            .iter()
            .filter(|&&(n, one, _)| n > 0 || one != "module unload")
            .map(|&(n, one, many)| format!("{n} {}", plural(n as u64, one, many)))
            .collect();
        field(out, "resource records", text.join(", "));
    }
    if !t.module_images.is_empty() {
        let stored: u64 = t.images.values().map(|b| b.len() as u64).sum();
        field(
            out,
            "module images",
            format!(
                "{} distinct for {} {}, {} stored",
                t.images.len(),
                t.module_images.len(),
                if t.module_images.len() == 1 {
                    "module"
                } else {
                    "modules"
                },
                human_bytes(stored)
            ),
        );
    }
    if c.memory + c.syncs > 0 {
        let (a, s) = (c.memory, c.syncs);
        field(
            out,
            "memory records",
            format_args!(
                "{a} {}",
                plural(a, "allocation or free", "allocations and frees")
            ),
        );
        field(
            out,
            "sync records",
            format_args!("{s} {}", plural(s, "synchronization", "synchronizations")),
        );
    }
    field(out, "dropped records", t.dropped);
    match &t.end {
        Some(end) => field(out, "unwrapped lookups", end.unwrapped_lookups),
        None => field(out, "unwrapped lookups", "unknown (no end record)"),
    }
    field(out, "notices", t.notices.len());
    for n in t.notices.iter().take(NOTICES_LISTED) {
        let at = n.time_ns.checked_sub(h.start.monotonic_ns);
        match at {
            Some(at) if n.time_ns != 0 => {
                let _ = writeln!(out, "    at +{}: {}", human_ns(at), n.message);
            }
            _ => {
                let _ = writeln!(out, "    {}", n.message);
            }
        }
    }
    if t.notices.len() > NOTICES_LISTED {
        let _ = writeln!(out, "    … and {} more", t.notices.len() - NOTICES_LISTED);
    }
    if t.unknown_chunks > 0 {
        field(
            out,
            "unknown chunks",
            format_args!("{} (skipped: written by a newer rtrace)", t.unknown_chunks),
        );
    }
    warnings(out, t, c);
}

fn threads(out: &mut String, t: &Trace, c: &Counts) {
    field(out, "threads", t.threads.len());
    for th in t.threads.values().take(THREADS_LISTED) {
        let _ = write!(out, "    thread {}", th.tid);
        if let Some(name) = &th.name {
            let _ = write!(out, " ({name})");
        }
        let _ = write!(out, ": {} records", c.thread(th.tid));
        if th.dropped > 0 {
            let _ = write!(out, ", {} dropped", th.dropped);
        }
        out.push('\n');
    }
    if t.threads.len() > THREADS_LISTED {
        let _ = writeln!(out, "    … and {} more", t.threads.len() - THREADS_LISTED);
    }
}

fn warnings(out: &mut String, t: &Trace, c: &Counts) {
    if t.dropped > 0 {
        let _ = writeln!(
            out,
            "  warning: {} API records were lost (a thread's buffer was full); \
             the summary misses them: try a larger --buffer-records",
            t.dropped
        );
    }
    if let Some(damage) = &t.damage {
        field(out, "damaged file", damage);
    }
    for bad in &t.bad_chunks {
        let _ = writeln!(out, "  warning: skipped the {bad}");
    }
    if let (Some(end), None) = (&t.end, &t.damage) {
        let records = c.api;
        if end.records != records || end.dropped != t.dropped {
            let _ = writeln!(
                out,
                "  warning: the end record counts {} API records and {} dropped, \
                 the file holds {} and {}",
                end.records, end.dropped, records, t.dropped
            );
        }
    }
}

fn api(out: &mut String, processes: usize, summary: &[FunctionSummary]) {
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
        "function", "calls", "errors", "total", "mean", "median", "min", "max",
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
            ]
        })
        .collect();
    columns(out, &headers, &[Left], &rows);
}

/// How a column's cells line up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Align {
    Left,
    Right,
}
use Align::{Left, Right};

/// `rows` under `headers`, two spaces between columns. The first column is
/// cut (ending in `…`) where the line would be wider than the table width, but not
/// below [`MIN_FIRST_COLUMN`] characters. Columns
/// are aligned as `align` says, those past its end to the right; trailing
/// spaces are dropped.
fn columns(out: &mut String, headers: &[&str], align: &[Align], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let rest: usize = widths[1..].iter().map(|w| w + 2).sum();
    // Cut to fit, but never below a width that still tells names apart.
    let floor = widths[0]
        .min(MIN_FIRST_COLUMN)
        .max(headers[0].chars().count());
    widths[0] = widths[0].min(width().saturating_sub(rest)).max(floor);
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            let cell = if i == 0 {
                truncate(cell, *w)
            } else {
                cell.to_string()
            };
            let pad = " ".repeat(w.saturating_sub(cell.chars().count()));
            if i > 0 {
                text.push_str("  ");
            }
            match align.get(i).copied().unwrap_or(Right) {
                Left => {
                    text.push_str(&cell);
                    text.push_str(&pad);
                }
                Right => {
                    text.push_str(&pad);
                    text.push_str(&cell);
                }
            }
        }
        out.push_str(text.trim_end_matches(' '));
        out.push('\n');
    };
    line(out, &mut headers.iter().copied());
    for row in rows {
        line(out, &mut row.iter().map(String::as_str));
    }
}

/// The GPU sections, after the API summary; nothing when no trace holds GPU
/// activity records.
fn gpu(out: &mut String, traces: &[Trace], s: &Sections) {
    if s.counts.iter().all(|c| c.gpu() == 0) {
        return;
    }
    out.push('\n');
    kernels(out, s);
    out.push('\n');
    memcpys(out, s);
    out.push('\n');
    memsets(out, s);
    out.push('\n');
    utilisation_section(out, s);
    out.push('\n');
    if !s.shared.is_empty() {
        shared_section(out, s);
        out.push('\n');
    }
    latency(out, s);
    occupancy::section(out, traces, s);
}

/// The "Memory" and "Synchronization" sections, after the GPU sections; nothing
/// when no trace holds memory or synchronization records.
fn memory_and_sync(out: &mut String, s: &Sections) {
    if s.counts.iter().all(|c| c.memory + c.syncs == 0) {
        return;
    }
    out.push('\n');
    memory(out, &s.memory);
    out.push('\n');
    syncs(out, &s.sync);
}

/// The "Resources" section, after the API summary: devices, contexts,
/// streams, modules and functions; nothing when no trace describes a device or
/// holds a resource record.
fn resources_section(out: &mut String, traces: &[Trace]) {
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
    let more = |out: &mut String, n: usize| {
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

fn memory(out: &mut String, summary: &[MemorySummary]) {
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

fn syncs(out: &mut String, summary: &[SyncSummary]) {
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

fn kernels(out: &mut String, s: &Sections) {
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

fn memcpys(out: &mut String, s: &Sections) {
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
                m.bandwidth_gbps
                    .map_or("-".to_string(), |b| format!("{b} GB/s")),
            ]
        })
        .collect();
    columns(out, &headers, &[Left], &rows);
}

fn memsets(out: &mut String, s: &Sections) {
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
        }
    }
}

fn utilisation_section(out: &mut String, s: &Sections) {
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
fn shared_section(out: &mut String, s: &Sections) {
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

fn latency(out: &mut String, s: &Sections) {
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

fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// `s` cut to `width` characters, the last one replaced by `…` when cut.
fn truncate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_with_ellipsis() {
        assert_eq!(truncate("cuMemAlloc", 10), "cuMemAlloc");
        assert_eq!(truncate("cuMemAlloc_v2", 10), "cuMemAllo…");
    }

    #[test]
    fn memory_and_sync_sections_come_last() {
        let t = crate::gpu_summary::samples::memory_and_sync();
        let out = render(
            std::slice::from_ref(&t),
            &Sections::of(std::slice::from_ref(&t)),
        );
        assert!(
            out.contains(
                "  memory records     7 allocations and frees\n  \
                 sync records       4 synchronizations\n  dropped records"
            ),
            "{out}"
        );
        // No kernels, copies or memsets: no GPU sections.
        assert!(!out.contains("GPU kernel summary"), "{out}");
        let tail = &out[out.find("\nMemory:").unwrap() + 1..];
        let expected = "\
Memory: 4 allocations, 3 frees, 1.1 MB allocated
kind    allocations  frees  allocated  peak in use  largest  never freed
device            3      2     1.1 MB       1.1 MB   1.0 MB       4.1 kB
pinned            1      1     8.2 kB       8.2 kB   8.2 kB          0 B

Synchronization: 4 synchronizations, 7.6 µs of host wait
type                 count  total wait  mean wait  max wait
stream synchronize       2      5.1 µs     2.6 µs    5.0 µs
context synchronize      1      2.0 µs     2.0 µs    2.0 µs
event synchronize        1      500 ns     500 ns    500 ns
";
        assert_eq!(tail, expected, "\n{tail}");
        // Syncs without memory records, and the other way round.
        let only_syncs = Trace {
            memory: Vec::new(),
            ..t.clone()
        };
        let one = std::slice::from_ref(&only_syncs);
        let out = render(one, &Sections::of(one));
        assert!(
            out.contains("\nMemory: no allocations or frees were recorded\n\nSynchronization: 4")
        );
        let only_memory = Trace {
            syncs: Vec::new(),
            ..t
        };
        let one = std::slice::from_ref(&only_memory);
        let out = render(one, &Sections::of(one));
        assert!(
            out.ends_with("\nSynchronization: none was recorded\n"),
            "{out}"
        );
        assert!(
            !render(&[Trace::default()], &Sections::of(&[Trace::default()])).contains("Memory")
        );
    }
}
