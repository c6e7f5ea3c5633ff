//! The "Ranks" and "Steps" sections of `--format table` ([`crate::report::ranks`]): only when
//! two or more processes are compared.

use super::layout::{columns, plural, Align::Left, Align::Right, Page};
use crate::report::ranks::RankSection;
use crate::text::human_ns;
use std::fmt::Write;

/// Steps the table lists (those with the largest lag; CSV and JSON list every one).
const STEP_ROWS: usize = 10;

/// The per-rank table.
pub(super) fn ranks_section(out: &mut Page, s: &RankSection) {
    if s.ranks.is_empty() {
        return;
    }
    let vars: Vec<&str> = {
        let mut v: Vec<&str> = s.ranks.iter().map(|r| r.rank_var.as_str()).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let named = match vars.as_slice() {
        [""] => "named by pid: no rank variable recorded".to_string(),
        [one] => format!("named by {one}"),
        _ => format!(
            "named by {} (pid where none)",
            vars.iter()
                .filter(|v| !v.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let _ = writeln!(
        out,
        "\nRanks: {} processes compared, {named}; collective wait: a collective kernel's time \
         less the shortest time of the same collective (k-th by start) on any rank",
        s.ranks.len()
    );
    let headers = [
        "rank",
        "pid",
        "host",
        "GPU busy",
        "GPU idle",
        "steps",
        "slowest",
        "step time",
        "collectives",
        "coll. time",
        "coll. wait",
        "wait %",
    ];
    let rows: Vec<Vec<String>> = s
        .ranks
        .iter()
        .map(|r| {
            vec![
                r.rank.clone(),
                r.pid.to_string(),
                r.hostname.clone(),
                human_ns(r.gpu_busy_ns),
                human_ns(r.gpu_idle_ns),
                r.steps.to_string(),
                r.steps_slowest.to_string(),
                human_ns(r.step_ns),
                r.collectives.to_string(),
                human_ns(r.collective_ns),
                human_ns(r.collective_wait_ns),
                r.wait_percent.to_string(),
            ]
        })
        .collect();
    columns(out, &headers, &[Left, Right, Left], &rows);
    let dropped: u64 = s.ranks.iter().map(|r| r.steps_dropped).sum();
    if dropped > 0 {
        let _ = writeln!(
            out,
            "{dropped} step {} past the {} held per rank not compared",
            plural(dropped, "range", "ranges"),
            crate::report::ranks::MAX_STEPS
        );
    }
}

/// The steps with the largest lag of their slowest rank over the median.
pub(super) fn steps_section(out: &mut Page, s: &RankSection) {
    if s.ranks.is_empty() {
        return;
    }
    if s.steps.is_empty() {
        out.push_str("\nSteps: no NVTX range matching the step pattern on every rank\n");
        return;
    }
    let mut worst: Vec<&crate::report::ranks::StepRow> = s.steps.iter().collect();
    worst.sort_by(|a, b| {
        b.lag_ns
            .cmp(&a.lag_ns)
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.occurrence.cmp(&b.occurrence))
    });
    worst.truncate(STEP_ROWS);
    let _ = writeln!(
        out,
        "\nSteps: {} compared across ranks (same name, k-th to end); {} with the largest lag \
         of the slowest rank over the median",
        s.steps.len(),
        if s.steps.len() > STEP_ROWS {
            format!("the {STEP_ROWS}")
        } else {
            "each".to_string()
        }
    );
    let headers = [
        "step", "#", "fastest", "on", "median", "slowest", "on", "lag", "spread",
    ];
    let rows: Vec<Vec<String>> = worst
        .iter()
        .map(|r| {
            vec![
                r.name.clone(),
                r.occurrence.to_string(),
                human_ns(r.fastest_ns),
                r.fastest_rank.clone(),
                human_ns(r.median_ns),
                human_ns(r.slowest_ns),
                r.slowest_rank.clone(),
                human_ns(r.lag_ns),
                human_ns(r.spread_ns),
            ]
        })
        .collect();
    columns(out, &headers, &[Left], &rows);
}
