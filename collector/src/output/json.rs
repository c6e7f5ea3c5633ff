//! `--format json`: `{"processes":[...],"api":[...]}`, written by hand (the
//! shapes are small and fixed).

use crate::model::{Duration, Trace};
use crate::output::iso8601_utc;
use crate::summary::FunctionSummary;
use std::fmt::Write;

pub(super) fn render(traces: &[Trace], summary: &[FunctionSummary]) -> String {
    let mut out = String::from("{\"processes\":[");
    for (i, t) in traces.iter().enumerate() {
        out.push_str(if i == 0 { "\n  " } else { ",\n  " });
        process(&mut out, t);
    }
    out.push_str(if traces.is_empty() { "],\n" } else { "\n],\n" });
    out.push_str("\"api\":[");
    for (i, s) in summary.iter().enumerate() {
        out.push_str(if i == 0 { "\n  " } else { ",\n  " });
        let _ = write!(
            out,
            "{{\"function\":{},\"calls\":{},\"errors\":{},\"total_ns\":{},\"mean_ns\":{},\
             \"median_ns\":{},\"min_ns\":{},\"max_ns\":{},\"error_codes\":{{{}}}}}",
            string(&s.function),
            s.calls,
            s.errors,
            s.total_ns,
            s.mean_ns,
            s.median_ns,
            s.min_ns,
            s.max_ns,
            s.error_codes
                .iter()
                .map(|(code, n)| format!("\"{code}\":{n}"))
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    out.push_str(if summary.is_empty() { "]}\n" } else { "\n]}\n" });
    out
}

/// One process object. Its keys: the file header's fields under their own
/// names (`pid`, `ppid`, `forked_from`, `command_line`, `executable`,
/// `hostname`, `boot_id`, `writer_version`, `start`, `clock`), then what the
/// reader found.
fn process(out: &mut String, t: &Trace) {
    let h = &t.header;
    let opt = |v: Option<u64>| v.map_or("null".to_string(), |v| v.to_string());
    let command_line: Vec<String> = h.command_line.iter().map(|a| string(a)).collect();
    let (duration, duration_complete) = match t.duration() {
        Duration::ToEnd(ns) => (Some(ns), true),
        Duration::ToLastRecord(ns) => (Some(ns), false),
        Duration::Unknown => (None, false),
    };
    let _ = write!(
        out,
        "{{\"file\":{},\"format_version\":\"{}.{}\",\"pid\":{},\"ppid\":{},\"forked_from\":{},\
         \"command_line\":[{}],\"executable\":{},\"hostname\":{},\"boot_id\":{},\
         \"writer_version\":{},\"start\":{{\"monotonic_ns\":{},\"realtime_ns\":{}}},\
         \"clock\":{},\"start_time\":{},\"duration_ns\":{},\"duration_complete\":{},\
         \"end_reason\":{},\"threads\":{},\"api_records\":{},\"dropped\":{},\
         \"unwrapped_lookups\":{},\"unknown_chunks\":{},\"notices\":[",
        string(&t.path.to_string_lossy()),
        t.format_version.0,
        t.format_version.1,
        h.pid,
        h.ppid,
        opt(h.forked_from.map(u64::from)),
        command_line.join(","),
        string(&h.executable),
        string(&h.hostname),
        string(&h.boot_id),
        string(&h.writer_version),
        h.start.monotonic_ns,
        h.start.realtime_ns,
        string(&h.clock),
        string(&iso8601_utc(h.start.realtime_ns)),
        opt(duration),
        duration_complete,
        t.end
            .as_ref()
            .map_or("null".to_string(), |e| string(&e.reason)),
        t.threads.len(),
        t.api_records(),
        t.dropped,
        opt(t.end.as_ref().map(|e| e.unwrapped_lookups)),
        t.unknown_chunks,
    );
    for (i, n) in t.notices.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(
            out,
            "{sep}{{\"time_ns\":{},\"message\":{}}}",
            n.time_ns,
            string(&n.message)
        );
    }
    let _ = write!(
        out,
        "],\"damage\":{}}}",
        t.damage.as_deref().map_or("null".to_string(), string)
    );
}

/// A JSON string literal.
fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_strings() {
        assert_eq!(string("a\"b\\c\n\u{1}é"), r#""a\"b\\c\n\u0001é""#);
    }
}
