//! `rtrace metrics`' output: a table for people, or JSON.

use super::choice::{Choice, SetCost};
use crate::text::json_string;
use std::fmt::Write;

/// Rows as columns padded to their widest cell (the last column is not padded).
fn columns(rows: &[Vec<String>]) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, cell) in r.iter().enumerate() {
            if i + 1 < r.len() {
                let _ = write!(line, "{cell:<w$}  ", w = widths[i]);
            } else {
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A choice: one row per metric (set, metric, label), then the passes it costs.
pub fn choice_table(c: &Choice) -> String {
    let mut rows = vec![vec![
        "set".to_string(),
        "metric".to_string(),
        "shown as".to_string(),
    ]];
    for m in &c.metrics {
        rows.push(vec![
            m.set.unwrap_or("-").to_string(),
            m.name.clone(),
            m.label.to_string(),
        ]);
    }
    let mut out = columns(&rows);
    for m in &c.unavailable {
        let _ = writeln!(
            out,
            "not on {}: {} ({})",
            c.chip,
            m.name,
            m.set.unwrap_or("-")
        );
    }
    let _ = writeln!(
        out,
        "{} metrics on {}: {} replay {}",
        c.metrics.len(),
        c.chip,
        c.passes,
        if c.passes == 1 { "pass" } else { "passes" }
    );
    out
}

/// A choice as one JSON object.
pub fn choice_json(c: &Choice) -> String {
    let list = |ms: &[super::choice::Chosen]| {
        ms.iter()
            .map(|m| {
                format!(
                    "{{\"set\":{},\"name\":{},\"label\":{}}}",
                    m.set.map_or("null".to_string(), json_string),
                    json_string(&m.name),
                    json_string(m.label)
                )
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    format!(
        "{{\"chip\":{},\"passes\":{},\"metrics\":[{}],\"unavailable\":[{}]}}\n",
        json_string(&c.chip),
        c.passes,
        list(&c.metrics),
        list(&c.unavailable)
    )
}

/// The sets with their costs on a chip, and the cost of all of them together.
pub fn sets_table(chip: &str, sets: &[SetCost], all: &Choice) -> String {
    let mut rows = vec![vec![
        "set".to_string(),
        "metrics".to_string(),
        "passes".to_string(),
        "what".to_string(),
    ]];
    for s in sets {
        let count = if s.available == s.total {
            s.total.to_string()
        } else {
            format!("{}/{}", s.available, s.total)
        };
        rows.push(vec![
            s.name.to_string(),
            count,
            s.passes.to_string(),
            s.about.to_string(),
        ]);
    }
    let mut out = columns(&rows);
    let _ = writeln!(
        out,
        "all sets on {chip}: {} metrics, {} replay passes",
        all.metrics.len(),
        all.passes
    );
    out
}

/// The sets as JSON.
pub fn sets_json(chip: &str, sets: &[SetCost], all: &Choice) -> String {
    let rows: Vec<String> = sets
        .iter()
        .map(|s| {
            format!(
                "{{\"name\":{},\"about\":{},\"metrics\":{},\"of\":{},\"passes\":{}}}",
                json_string(s.name),
                json_string(s.about),
                s.available,
                s.total,
                s.passes
            )
        })
        .collect();
    format!(
        "{{\"chip\":{},\"sets\":[{}],\"all_passes\":{}}}\n",
        json_string(chip),
        rows.join(","),
        all.passes
    )
}

/// The chip's base metrics: one `type name` line each.
pub fn base_table(metrics: &[(&str, String)]) -> String {
    let rows: Vec<Vec<String>> = metrics
        .iter()
        .map(|(t, n)| vec![t.to_string(), n.clone()])
        .collect();
    columns(&rows)
}

/// The chip's base metrics as JSON.
pub fn base_json(chip: &str, metrics: &[(&str, String)]) -> String {
    let rows: Vec<String> = metrics
        .iter()
        .map(|(t, n)| {
            format!(
                "{{\"type\":{},\"name\":{}}}",
                json_string(t),
                json_string(n)
            )
        })
        .collect();
    format!(
        "{{\"chip\":{},\"base_metrics\":[{}]}}\n",
        json_string(chip),
        rows.join(",")
    )
}
