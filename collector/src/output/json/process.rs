//! The `processes` key: one object per trace, with what its header says and what the reader
//! found (records, losses, what was rebuilt from the file's buffers, notices, damage).

use super::syntax::opt;
use crate::model::{Duration, Trace};
use crate::report::fold::Counts;
use crate::report::Sections;
use crate::text::{iso8601_utc, json_string};
use std::fmt::Write;

/// `"processes":[...]`: one object per trace.
pub(super) fn processes_key(out: &mut String, traces: &[Trace], s: &Sections) {
    out.push_str("\"processes\":[");
    for (i, t) in traces.iter().enumerate() {
        out.push_str(if i == 0 { "\n  " } else { ",\n  " });
        process(out, t, &s.counts[i]);
    }
    out.push_str(if traces.is_empty() { "]" } else { "\n]" });
}

/// GPU work launched but never timed, by kind, and kernels by name (`null`: unknown).
fn untimed(t: &Trace) -> String {
    use rtrace_format::gpu_region::{UntimedKind, UNNAMED};
    let count = |k: UntimedKind| t.untimed.iter().filter(|w| w.kind == k).count();
    let mut names: Vec<(String, u64)> = Vec::new();
    for w in t.untimed.iter().filter(|w| w.kind == UntimedKind::Kernel) {
        let name = if w.name == UNNAMED {
            "null".to_string()
        } else {
            json_string(&t.kernel_display_name(w.name))
        };
        match names.iter_mut().find(|(n, _)| *n == name) {
            Some((_, c)) => *c += 1,
            None => names.push((name, 1)),
        }
    }
    let names: Vec<String> = names
        .iter()
        .map(|(n, c)| format!("{{\"name\":{n},\"count\":{c}}}"))
        .collect();
    format!(
        "{{\"kernel\":{},\"memcpy\":{},\"memset\":{},\"kernel_names\":[{}]}}",
        count(UntimedKind::Kernel),
        count(UntimedKind::Memcpy),
        count(UntimedKind::Memset),
        names.join(",")
    )
}

/// One process object. Its keys: the file header's fields under their own
/// names (`pid`, `ppid`, `forked_from`, `command_line`, `executable`,
/// `hostname`, `boot_id`, `writer_version`, `start`, `clock`), then what the
/// reader found.
fn process(out: &mut String, t: &Trace, c: &Counts) {
    let h = &t.header;
    let command_line: Vec<String> = h.command_line.iter().map(|a| json_string(a)).collect();
    let (duration, duration_complete) = match c.duration(t) {
        Duration::ToEnd(ns) => (Some(ns), true),
        Duration::ToLastRecord(ns) => (Some(ns), false),
        Duration::Unknown => (None, false),
    };
    let _ = write!(
        out,
        "{{\"file\":{},\"format_version\":\"{}.{}\",\"pid\":{},\"ppid\":{},\"forked_from\":{},\
         \"command_line\":[{}],\"executable\":{},\"hostname\":{},\"boot_id\":{},\
         \"writer_version\":{},\"start\":{{\"monotonic_ns\":{},\"realtime_ns\":{}}},\
         \"clock\":{},\"clock_shift_ns\":{},\"start_time\":{},\"duration_ns\":{},\
         \"duration_complete\":{},\
         \"end_reason\":{},\"threads\":{},\"api_records\":{},\"kernel_records\":{},\
         \"memcpy_records\":{},\"memset_records\":{},\"dropped\":{},\
         \"salvaged_records\":{},\"salvaged_gpu_records\":{},\"untimed_gpu_work\":{},\"write_error\":{},\"unwrapped_lookups\":{},\"unknown_chunks\":{},\"notices\":[",
        json_string(&t.path.to_string_lossy()),
        t.format_version.0,
        t.format_version.1,
        h.pid,
        h.ppid,
        opt(h.forked_from.map(u64::from)),
        command_line.join(","),
        json_string(&h.executable),
        json_string(&h.hostname),
        json_string(&h.boot_id),
        json_string(&h.writer_version),
        h.start.monotonic_ns,
        h.start.realtime_ns,
        json_string(&h.clock),
        t.clock_shift.as_ref().map_or(0, |s| s.ns),
        json_string(&iso8601_utc(h.start.realtime_ns)),
        opt(duration),
        duration_complete,
        t.end
            .as_ref()
            .map_or("null".to_string(), |e| json_string(&e.reason)),
        t.threads.len(),
        c.api,
        c.kernels,
        c.memcpys,
        c.memsets,
        t.dropped,
        t.salvaged,
        t.salvaged_gpu,
        untimed(t),
        opt(t.write_error),
        opt(t.end.as_ref().map(|e| e.unwrapped_lookups)),
        t.unknown_chunks,
    );
    for (i, n) in t.notices.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(
            out,
            "{sep}{{\"time_ns\":{},\"message\":{}}}",
            n.time_ns,
            json_string(&n.message)
        );
    }
    let listed: Vec<String> = t
        .damaged
        .listed
        .iter()
        .map(|r| {
            format!(
                "{{\"offset\":{},\"kind\":{},\"start_ns\":{},\"end_ns\":{}}}",
                r.offset,
                json_string(r.kind),
                r.start_ns,
                r.end_ns
            )
        })
        .collect();
    let _ = write!(
        out,
        "],\"damaged_records\":{{\"count\":{},\"listed\":[{}]}},\"damage\":{}}}",
        t.damaged.count,
        listed.join(","),
        t.damage.as_deref().map_or("null".to_string(), json_string)
    );
}
