//! A process's section of `--format table`: its header, threads, record counts, notices and
//! warnings.

use super::layout::{plural, Page};
use crate::model::{Duration, Trace};
use crate::report::fold::Counts;
use crate::text::{human_bytes, human_ns, iso8601_utc, shell_join};
use std::fmt::Write;

/// Threads listed by name in a process section; the rest are counted.
const THREADS_LISTED: usize = 16;
/// Notices listed in a process section; the rest are counted.
const NOTICES_LISTED: usize = 20;

/// One `name  value` line of a process section.
fn field(out: &mut Page, name: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "  {name:<18} {value}");
}

/// The section of one process: what it was, what its trace holds, and what went wrong.
pub(super) fn section(out: &mut Page, t: &Trace, c: &Counts) {
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
        field(out, "module images", module_images(t));
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
    if t.salvaged > 0 {
        field(
            out,
            "from the buffers",
            format_args!(
                "{} API {} rebuilt from the rings in the file (not written when the \
                 process ended)",
                t.salvaged,
                plural(t.salvaged, "record", "records")
            ),
        );
    }
    if t.salvaged_gpu > 0 {
        field(
            out,
            "GPU from buffers",
            format_args!(
                "{} GPU {} rebuilt from CUPTI's buffers in the file (timed, not written when \
                 the process ended)",
                t.salvaged_gpu,
                plural(t.salvaged_gpu, "record", "records")
            ),
        );
    }
    if !t.untimed.is_empty() {
        use rtrace_format::gpu_region::UntimedKind;
        let count = |k: UntimedKind| t.untimed.iter().filter(|w| w.kind == k).count() as u64;
        let (k, c, s) = (
            count(UntimedKind::Kernel),
            count(UntimedKind::Memcpy),
            count(UntimedKind::Memset),
        );
        field(
            out,
            "never timed",
            format_args!(
                "{k} {}, {c} {}, {s} {} launched that CUPTI had not timed when the process \
                 ended (in the file, without GPU times)",
                plural(k, "kernel", "kernels"),
                plural(c, "copy", "copies"),
                plural(s, "memset", "memsets")
            ),
        );
    }
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

fn threads(out: &mut Page, t: &Trace, c: &Counts) {
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

fn warnings(out: &mut Page, t: &Trace, c: &Counts) {
    if let Some(lost) = t.lost_warning(true) {
        let _ = writeln!(out, "  warning: {lost}");
    }
    if let Some(damage) = &t.damage {
        field(out, "damaged file", damage);
    }
    for bad in &t.bad_chunks {
        let _ = writeln!(out, "  warning: skipped the {bad}");
    }
    if let Some(damaged) = t.damaged.describe() {
        field(out, "damaged records", damaged);
    }
    if let (Some(end), None) = (&t.end, &t.damage) {
        // Set-aside API records were written, and counted by the end record; records other
        // threads made after the end record was written came from the rings.
        let records = (c.api + t.damaged.api).saturating_sub(t.salvaged);
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

/// What a trace holds of its modules' images: the distinct contents it stores, and why it
/// holds no more (another trace of the run has them, or they were not recorded).
fn module_images(t: &Trace) -> String {
    let n = t.module_images.len();
    let modules = format!("{n} {}", plural(n as u64, "module", "modules"));
    let elsewhere = {
        let mut hashes: Vec<u64> = t
            .module_images
            .iter()
            .filter(|i| i.in_run && !t.images.contains_key(&i.hash))
            .map(|i| i.hash)
            .collect();
        hashes.sort_unstable();
        hashes.dedup();
        hashes.len()
    };
    let in_run = match elsewhere {
        0 => String::new(),
        k => format!("; {k} in another trace of the run"),
    };
    if t.images.is_empty() {
        if elsewhere == 0 {
            return format!("not recorded ({modules}; rtrace record --module-images stores them)");
        }
        return format!("{modules}, none stored here{in_run}");
    }
    let stored: u64 = t.images.values().map(|b| b.len() as u64).sum();
    format!(
        "{} distinct for {modules}, {} stored{in_run}",
        t.images.len(),
        human_bytes(stored)
    )
}
