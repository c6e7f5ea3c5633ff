//! The `"source_counters"` key of `--format json` ([`crate::source_counters`]): every kernel
//! counted, with every instruction's counters, its source lines and its findings.

use crate::model::Trace;
use crate::source_counters::{findings, Values};
use crate::text::json_string;
use rtrace_format::COUNTERS;
use std::fmt::Write;
use std::path::Path;

/// `{"inst_executed":N,...}` in the order of [`COUNTERS`].
fn counters_json(v: &Values) -> String {
    let items: Vec<String> = COUNTERS
        .iter()
        .zip(v)
        .map(|(c, n)| format!("\"{}\":{n}", c.key))
        .collect();
    format!("{{{}}}", items.join(","))
}

fn opt_str(s: Option<&str>) -> String {
    s.map(json_string).unwrap_or_else(|| "null".to_string())
}

/// `,\n"source_counters":{...}`; only when the traces were recorded with source counters.
pub(super) fn key(out: &mut String, traces: &[Trace], nvdisasm: Option<&Path>) {
    if !crate::source_counters::present(traces) {
        return;
    }
    let p = crate::source_counters::report_profile(traces, nvdisasm);
    let list = |v: &[String]| {
        v.iter()
            .map(|s| json_string(s))
            .collect::<Vec<_>>()
            .join(",")
    };
    let _ =
        write!(
        out,
        ",\n\"source_counters\":{{\"contexts\":{},\"launches\":{},\"empty_launches\":{},\"dropped\":{},\"chips\":[{}],\
         \"missing\":[{}],\"notes\":[{}],\"sass_note\":{},\"kernels\":[",
        p.contexts,
        p.launches,
        p.empty_launches,
        p.dropped,
        list(&p.chips),
        p.missing.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(","),
        list(&p.notes),
        opt_str(p.sass_note.as_deref()),
    );
    for (i, k) in p.kernels.iter().enumerate() {
        out.push_str(if i == 0 { "\n  " } else { ",\n  " });
        let _ = write!(
            out,
            "{{\"name\":{},\"demangled\":{},\"cubin_crc\":{},\"image\":{},\"launches\":{},\
             \"totals\":{},\"findings\":[",
            json_string(&k.name),
            json_string(&k.demangled),
            k.crc,
            k.image
                .map(|h| format!("\"{h:016x}\""))
                .unwrap_or_else(|| "null".to_string()),
            k.launches,
            counters_json(&k.totals),
        );
        for (j, f) in findings(k).iter().enumerate() {
            let places: Vec<String> = f
                .places
                .iter()
                .map(|pl| {
                    format!(
                        "{{\"file\":{},\"line\":{},\"offset\":{},\"instruction\":{},\"excessive\":{}}}",
                        opt_str(pl.line.as_ref().map(|(f, _)| f.as_str())),
                        pl.line.as_ref().map_or("null".to_string(), |(_, n)| n.to_string()),
                        pl.offset.map_or("null".to_string(), |o| o.to_string()),
                        opt_str(pl.instruction.as_deref()),
                        pl.excessive
                    )
                })
                .collect();
            let _ = write!(
                out,
                "{}{{\"rule\":\"{}\",\"title\":{},\"excessive\":{},\"total\":{},\
                 \"est_speedup_percent\":{:.2},\"message\":{},\"places\":[{}]}}",
                if j == 0 { "" } else { "," },
                f.rule.key(),
                json_string(f.rule.title()),
                f.excessive,
                f.total,
                f.speedup_percent,
                json_string(&f.message),
                places.join(",")
            );
        }
        out.push_str("],\"instructions\":[");
        for (j, r) in k.instructions.iter().enumerate() {
            let _ =
                write!(
                out,
                "{}{{\"offset\":{},\"instruction\":{},\"file\":{},\"line\":{},\"counters\":{}}}",
                if j == 0 { "" } else { "," },
                r.offset,
                opt_str(r.instruction.as_deref()),
                opt_str(r.line.as_ref().map(|(f, _)| f.as_str())),
                r.line.as_ref().map_or("null".to_string(), |(_, n)| n.to_string()),
                counters_json(&r.values)
            );
        }
        out.push_str("],\"lines\":[");
        for (j, l) in k.lines.iter().enumerate() {
            let _ = write!(
                out,
                "{}{{\"file\":{},\"line\":{},\"counters\":{}}}",
                if j == 0 { "" } else { "," },
                json_string(&l.file),
                l.line,
                counters_json(&l.values)
            );
        }
        out.push_str("]}");
    }
    out.push_str("]}");
}
