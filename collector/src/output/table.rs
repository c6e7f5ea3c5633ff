//! `--format table`: process sections, then the API summary as aligned
//! columns that fit in [`WIDTH`] columns.

use crate::model::{Duration, Trace};
use crate::output::{human_ns, iso8601_utc, shell_join};
use crate::summary::FunctionSummary;
use std::fmt::Write;

/// The widest line the API summary table is laid out for.
pub const WIDTH: usize = 120;
/// Threads listed by name in a process section; the rest are counted.
const THREADS_LISTED: usize = 16;
/// Notices listed in a process section; the rest are counted.
const NOTICES_LISTED: usize = 20;

pub(super) fn render(traces: &[Trace], summary: &[FunctionSummary]) -> String {
    let mut out = String::new();
    for t in traces {
        process(&mut out, t);
        out.push('\n');
    }
    api(&mut out, traces.len(), summary);
    out
}

fn field(out: &mut String, name: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "  {name:<18} {value}");
}

fn process(out: &mut String, t: &Trace) {
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
    match t.duration() {
        Duration::ToEnd(ns) => field(out, "duration", human_ns(ns)),
        Duration::ToLastRecord(ns) => field(
            out,
            "duration",
            format_args!("at least {} (to the last API record)", human_ns(ns)),
        ),
        Duration::Unknown => field(out, "duration", "unknown"),
    }
    field(out, "tracing ended", t.end_reason());
    threads(out, t);
    field(out, "API records", t.api_records());
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
    warnings(out, t);
}

fn threads(out: &mut String, t: &Trace) {
    field(out, "threads", t.threads.len());
    for th in t.threads.values().take(THREADS_LISTED) {
        let _ = write!(out, "    thread {}", th.tid);
        if let Some(name) = &th.name {
            let _ = write!(out, " ({name})");
        }
        let _ = write!(out, ": {} records", th.records.len());
        if th.dropped > 0 {
            let _ = write!(out, ", {} dropped", th.dropped);
        }
        out.push('\n');
    }
    if t.threads.len() > THREADS_LISTED {
        let _ = writeln!(out, "    … and {} more", t.threads.len() - THREADS_LISTED);
    }
}

fn warnings(out: &mut String, t: &Trace) {
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
        let records = t.api_records();
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
        "API summary: {} functions, {} calls, {} {}",
        summary.len(),
        calls,
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
    let rows: Vec<[String; 8]> = summary
        .iter()
        .map(|s| {
            [
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
    let mut widths = headers.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let numeric: usize = widths[1..].iter().map(|w| w + 2).sum();
    widths[0] = widths[0]
        .min(WIDTH.saturating_sub(numeric))
        .max(headers[0].len());
    let line = |out: &mut String, cells: [&str; 8]| {
        let name = truncate(cells[0], widths[0]);
        let pad = widths[0] - name.chars().count();
        let _ = write!(out, "{name}{}", " ".repeat(pad));
        for (cell, w) in cells[1..].iter().zip(&widths[1..]) {
            let pad = w - cell.chars().count();
            let _ = write!(out, "  {}{cell}", " ".repeat(pad));
        }
        out.push('\n');
    };
    line(out, headers);
    for row in &rows {
        line(out, row.each_ref().map(String::as_str));
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
}
