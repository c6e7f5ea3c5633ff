//! The "Source counters" section of `--format table` ([`crate::source_counters`]).

use super::layout::{columns, Align::Left, Align::Right, Page};
use crate::model::Trace;
use crate::source_counters::{findings, KernelCounters, Place, LISTED};
use crate::text::file_name;
use std::fmt::Write;
use std::path::Path;

/// Kernels given a breakdown; the rest are counted.
const KERNELS_LISTED: usize = 10;

/// `a` of `b` as a percentage with one decimal.
fn share(a: u64, b: u64) -> String {
    crate::pcsamp::share(a, b)
}

/// A kernel's totals: `1600 instructions, 48640 thread instructions, ...`.
pub(crate) fn totals_line(k: &KernelCounters) -> String {
    let v = &k.totals;
    format!(
        "{} instructions, {} thread instructions, {} global sectors ({} ideal), {} shared wavefronts ({} ideal), {} divergent branch targets",
        v[0], v[1], v[2], v[3], v[4], v[5], v[6]
    )
}

fn place(p: &Place) -> String {
    match (&p.line, p.offset) {
        (Some((f, n)), _) => format!("{}:{n}", file_name(f)),
        (None, Some(o)) => format!("{o:#06x}"),
        (None, None) => "?".into(),
    }
}

/// "Source counters": per kernel, its totals and Nsight Compute's Source Counters findings,
/// each with the lines (or instructions) that cause it; nothing when the traces were not
/// recorded with source counters.
pub(super) fn section(out: &mut Page, traces: &[Trace], nvdisasm: Option<&Path>) {
    if !crate::source_counters::present(traces) {
        return;
    }
    let p = crate::source_counters::report_profile(traces, nvdisasm);
    let _ = writeln!(
        out,
        "\nSource counters: {} {} of {} {} counted on {} {} ({}; CUPTI's SASS metrics{})",
        p.launches,
        if p.launches == 1 {
            "launch"
        } else {
            "launches"
        },
        p.kernels.len(),
        if p.kernels.len() == 1 {
            "kernel"
        } else {
            "kernels"
        },
        p.contexts,
        if p.contexts == 1 {
            "context"
        } else {
            "contexts"
        },
        if p.chips.is_empty() {
            "no chip".to_string()
        } else {
            p.chips.join(", ")
        },
        if p.dropped > 0 {
            format!("; CUPTI dropped {} records", p.dropped)
        } else {
            String::new()
        }
    );
    if p.empty_launches > 0 {
        let _ = writeln!(
            out,
            "  {} of the launches came back without counts from CUPTI",
            p.empty_launches
        );
    }
    if !p.missing.is_empty() {
        let _ = writeln!(
            out,
            "  not collected on this chip: {}",
            p.missing.join(", ")
        );
    }
    for note in p.notes.iter().chain(&p.sass_note) {
        let _ = writeln!(out, "  {note}");
    }
    for k in p.kernels.iter().take(KERNELS_LISTED) {
        let _ = writeln!(
            out,
            "\n  {}: {} {}: {}",
            k.demangled,
            k.launches,
            if k.launches == 1 {
                "launch"
            } else {
                "launches"
            },
            totals_line(k)
        );
        let found = findings(k);
        if found.is_empty() {
            let _ = writeln!(out, "    no uncoalesced global or shared accesses");
        }
        for f in &found {
            let _ = writeln!(
                out,
                "    {}: est. speedup {:.1}%: {}",
                f.rule.title(),
                f.speedup_percent,
                f.message
            );
            let unit = if f.rule.key() == "uncoalesced_global" {
                "excessive sectors"
            } else {
                "excessive wavefronts"
            };
            let headers = ["where", unit, "share", "instruction"];
            let body: Vec<Vec<String>> = f
                .places
                .iter()
                .take(LISTED)
                .map(|pl| {
                    vec![
                        place(pl),
                        pl.excessive.to_string(),
                        share(pl.excessive, f.excessive),
                        pl.instruction.clone().unwrap_or_default(),
                    ]
                })
                .collect();
            columns(out, &headers, &[Left, Right, Right, Left], &body);
            if f.places.len() > LISTED {
                let _ = writeln!(out, "  … and {} more", f.places.len() - LISTED);
            }
        }
    }
    if p.kernels.len() > KERNELS_LISTED {
        let _ = writeln!(
            out,
            "\n  … and {} more kernels (--format json lists them)",
            p.kernels.len() - KERNELS_LISTED
        );
    }
}
