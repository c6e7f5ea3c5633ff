//! A choice of metrics for a chip: a LIST of set names and raw metric names resolved to
//! metrics, each checked against the chip through CUPTI's host API, and the replay passes the
//! whole choice costs; also the sets' own costs and the chip's base metrics.

use super::host::{Cupti, Host, METRIC_TYPES};
pub use rtrace_format::metric_sets::Chosen;
use rtrace_format::metric_sets::{resolve, SETS};

/// A LIST resolved for a chip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub chip: String,
    /// The metrics the chip has, each once, in the LIST's order.
    pub metrics: Vec<Chosen>,
    /// Metrics of the chosen sets that the chip does not have (left out of the passes).
    pub unavailable: Vec<Chosen>,
    /// Replay passes collecting `metrics` costs (range profiler, one pass per replay).
    pub passes: usize,
}

/// One set's cost on a chip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetCost {
    pub name: &'static str,
    pub about: &'static str,
    /// Metrics the chip has, of `total`.
    pub available: usize,
    pub total: usize,
    pub passes: usize,
}

/// The chip to use: `requested` matched (in any case) against the chips CUPTI supports, else
/// this machine's GPU's.
pub fn chip(cupti: &Cupti, requested: Option<&str>) -> Result<String, String> {
    let chips = cupti.supported_chips()?;
    let Some(requested) = requested else {
        return cupti.local_chip().map_err(|why| {
            format!(
                "give the chip with --chip ({why}); supported chips: {}",
                chips.join(", ")
            )
        });
    };
    chips
        .iter()
        .find(|c| c.eq_ignore_ascii_case(requested))
        .cloned()
        .ok_or_else(|| {
            format!(
                "unknown chip '{requested}'; supported chips: {}",
                chips.join(", ")
            )
        })
}

/// Whether `chip` has metric `name`: added to a host object of its own (a failed add spoils
/// the object). Err for a failure that is not about the name.
fn has(cupti: &Cupti, chip: &str, name: &str) -> Result<Result<(), String>, String> {
    let mut host = cupti.host(chip)?;
    Ok(host.add_metrics(&[name]))
}

fn passes(host: &mut Host<'_>, names: &[&str]) -> Result<usize, String> {
    if names.is_empty() {
        return Ok(0);
    }
    host.add_metrics(names)?;
    host.passes()
}

/// Resolves `list` for `chip` and counts the passes. A raw metric the chip does not have is an
/// error; a set's metric the chip does not have is listed in `unavailable`.
pub fn choose(cupti: &Cupti, chip: &str, list: &str) -> Result<Choice, String> {
    let mut metrics = Vec::new();
    let mut unavailable = Vec::new();
    for c in resolve(list)? {
        match has(cupti, chip, &c.name)? {
            Ok(()) => metrics.push(c),
            Err(_) if c.set.is_some() => unavailable.push(c),
            Err(e) => return Err(format!("unknown metric '{}' for {chip} ({e})", c.name)),
        }
    }
    let names: Vec<&str> = metrics.iter().map(|c| c.name.as_str()).collect();
    let passes = passes(&mut cupti.host(chip)?, &names)?;
    Ok(Choice {
        chip: chip.to_string(),
        metrics,
        unavailable,
        passes,
    })
}

/// Every set's cost on `chip`, in [`SETS`]' order.
pub fn set_costs(cupti: &Cupti, chip: &str) -> Result<Vec<SetCost>, String> {
    SETS.iter()
        .map(|s| {
            let c = choose(cupti, chip, s.name)?;
            Ok(SetCost {
                name: s.name,
                about: s.about,
                available: c.metrics.len(),
                total: s.metrics.len(),
                passes: c.passes,
            })
        })
        .collect()
}

/// The chip's base metrics, by type (`counter`, `ratio`, `throughput`), each type's names in
/// CUPTI's order. A base metric takes a rollup and a submetric (`.sum`, `.avg.per_second`, ...).
pub fn base_metrics(cupti: &Cupti, chip: &str) -> Result<Vec<(&'static str, String)>, String> {
    let host = cupti.host(chip)?;
    let mut out = Vec::new();
    for (t, type_name) in METRIC_TYPES {
        out.extend(host.base_metrics(t)?.into_iter().map(|n| (type_name, n)));
    }
    Ok(out)
}
