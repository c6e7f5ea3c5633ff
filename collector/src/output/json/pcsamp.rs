//! The `"pc_sampling"` key of `--format json` ([`crate::pcsamp`]).

use crate::model::Trace;
use crate::text::json_string;
use std::fmt::Write;
use std::path::Path;

/// `[["long_scoreboard",N],...]`
fn stalls_json(stalls: &[(String, u64)]) -> String {
    let items: Vec<String> = stalls
        .iter()
        .map(|(s, n)| format!("[{},{n}]", json_string(s)))
        .collect();
    format!("[{}]", items.join(","))
}

/// `,\n"pc_sampling":{...}`: every kernel sampled with every PC and source line; only when
/// the traces were recorded with PC sampling.
pub(super) fn key(out: &mut String, traces: &[Trace], nvdisasm: Option<&Path>) {
    if !crate::pcsamp::present(traces) {
        return;
    }
    let p = crate::pcsamp::report_profile(traces, nvdisasm);
    let _ = write!(
        out,
        ",\n\"pc_sampling\":{{\"contexts\":{},\"periods_log2\":[{}],\"total_samples\":{},\
         \"dropped_samples\":{},\"non_user_samples\":{},\"buffer_full_reads\":{},\"notes\":[{}],\
         \"sass_note\":{},\"kernels\":[",
        p.contexts,
        p.periods
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(","),
        p.total_samples,
        p.dropped_samples,
        p.non_user_samples,
        p.buffer_full_reads,
        p.notes
            .iter()
            .map(|n| json_string(n))
            .collect::<Vec<_>>()
            .join(","),
        p.sass_note
            .as_deref()
            .map(json_string)
            .unwrap_or_else(|| "null".to_string()),
    );
    for (i, k) in p.kernels.iter().enumerate() {
        out.push_str(if i == 0 { "\n  " } else { ",\n  " });
        let _ = write!(
            out,
            "{{\"name\":{},\"demangled\":{},\"cubin_crc\":{},\"image\":{},\"samples\":{},\
             \"not_issued\":{},\"stalls\":{},\"pcs\":[",
            json_string(&k.name),
            json_string(&k.demangled),
            k.crc,
            k.image
                .map(|h| format!("\"{h:016x}\""))
                .unwrap_or_else(|| "null".to_string()),
            k.samples,
            k.not_issued,
            stalls_json(&k.stalls)
        );
        for (j, r) in k.pcs.iter().enumerate() {
            let _ = write!(
                out,
                "{}{{\"offset\":{},\"samples\":{},\"not_issued\":{},\"instruction\":{},\
                 \"file\":{},\"line\":{},\"stalls\":{}}}",
                if j == 0 { "" } else { "," },
                r.offset,
                r.samples,
                r.not_issued,
                r.instruction
                    .as_deref()
                    .map(json_string)
                    .unwrap_or_else(|| "null".to_string()),
                r.line
                    .as_ref()
                    .map(|(f, _)| json_string(f))
                    .unwrap_or_else(|| "null".to_string()),
                r.line
                    .as_ref()
                    .map(|(_, n)| n.to_string())
                    .unwrap_or_else(|| "null".to_string()),
                stalls_json(&r.stalls)
            );
        }
        out.push_str("],\"lines\":[");
        for (j, l) in k.lines.iter().enumerate() {
            let _ = write!(
                out,
                "{}{{\"file\":{},\"line\":{},\"samples\":{},\"stalls\":{}}}",
                if j == 0 { "" } else { "," },
                json_string(&l.file),
                l.line,
                l.samples,
                stalls_json(&l.stalls)
            );
        }
        out.push_str("]}");
    }
    out.push_str(if p.kernels.is_empty() { "]}" } else { "\n]}" });
}
