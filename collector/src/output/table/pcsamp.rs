//! The "PC sampling" section of `--format table` ([`crate::pcsamp`]).

use super::layout::{columns, Align::Left, Align::Right, Page};
use crate::model::Trace;
use crate::text::file_name;
use std::fmt::Write;
use std::path::Path;

/// Kernels given a breakdown in "PC sampling"; the rest are counted.
const PC_KERNELS_LISTED: usize = 10;

/// "PC sampling": per kernel, its samples by stall reason, its hottest instructions and source
/// lines; nothing when the traces were not recorded with PC sampling.
pub(super) fn section(out: &mut Page, traces: &[Trace], nvdisasm: Option<&Path>) {
    use crate::pcsamp::{share, top_stalls, LISTED};
    if !crate::pcsamp::present(traces) {
        return;
    }
    let p = crate::pcsamp::report_profile(traces, nvdisasm);
    if p.contexts == 0 {
        // Asked for, and no context was sampled: the notices say why.
        let _ = writeln!(out, "\nPC sampling: no context was sampled");
        for note in &p.notes {
            let _ = writeln!(out, "  {note}");
        }
        return;
    }
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
