//! A metric's unit, derived from its CUPTI name by one rule (docs/cli.md, "Kernel profiles"),
//! and its value written for people. The first rule that matches wins:
//!
//! 1. the name holds `pct` → `%`;
//! 2. it ends with `.ratio` → `ratio`;
//! 3. it starts with `gpu__time_duration` → `ns`, shown as a duration (`12.3 µs`);
//! 4. it ends with `.per_second`: bytes (`bytes` in the name) → `B/s` (`1.2 GB/s`), cycles
//!    (`cycles` in the name) → `Hz` (`1.6 GHz`), else `/s`;
//! 5. it holds `.per_cycle` → `inst/cycle` when it counts instructions (`inst`), else `/cycle`;
//! 6. it holds `__cycles` → `cycle`;
//! 7. it holds `bytes` → `byte`, shown as a byte count (`4.1 kB`);
//! 8. it holds `inst` → `inst`;
//! 9. else none (a count: wavefronts, conflicts).
//!
//! A leaf: it uses nothing of the crate but the text helpers.

use crate::text::{human_bytes, human_ns};

/// A metric's unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Percent,
    Ratio,
    Nanoseconds,
    BytesPerSecond,
    Hertz,
    PerSecond,
    InstPerCycle,
    PerCycle,
    Cycles,
    Bytes,
    Instructions,
    None,
}

impl Unit {
    /// The unit of the metric named `name` (the rules above).
    pub fn of(name: &str) -> Unit {
        if name.contains("pct") {
            Unit::Percent
        } else if name.ends_with(".ratio") {
            Unit::Ratio
        } else if name.starts_with("gpu__time_duration") {
            Unit::Nanoseconds
        } else if name.ends_with(".per_second") {
            if name.contains("bytes") {
                Unit::BytesPerSecond
            } else if name.contains("cycles") {
                Unit::Hertz
            } else {
                Unit::PerSecond
            }
        } else if name.contains(".per_cycle") {
            if name.contains("inst") {
                Unit::InstPerCycle
            } else {
                Unit::PerCycle
            }
        } else if name.contains("__cycles") {
            Unit::Cycles
        } else if name.contains("bytes") {
            Unit::Bytes
        } else if name.contains("inst") {
            Unit::Instructions
        } else {
            Unit::None
        }
    }

    /// The unit's name in CSV and JSON (`""` for none).
    pub fn name(self) -> &'static str {
        match self {
            Unit::Percent => "%",
            Unit::Ratio => "ratio",
            Unit::Nanoseconds => "ns",
            Unit::BytesPerSecond => "B/s",
            Unit::Hertz => "Hz",
            Unit::PerSecond => "/s",
            Unit::InstPerCycle => "inst/cycle",
            Unit::PerCycle => "/cycle",
            Unit::Cycles => "cycle",
            Unit::Bytes => "byte",
            Unit::Instructions => "inst",
            Unit::None => "",
        }
    }

    /// `v` for people, beside the unit's name: a duration, a byte count or a rate with
    /// decimal prefixes (`12.3 µs`, `4.1 kB`, `1.2 GB/s`, `1.8 GHz`) where the unit is one of
    /// those, else the number alone (two decimals for %, ratios and per-cycle rates; counts
    /// whole when they are); `n/a` for NaN.
    pub fn show(self, v: f64) -> String {
        if !v.is_finite() {
            return "n/a".to_string();
        }
        let whole = || v.max(0.0).round() as u64;
        match self {
            Unit::Nanoseconds => human_ns(whole()),
            Unit::Bytes => human_bytes(whole()),
            Unit::BytesPerSecond => format!("{}/s", human_bytes(whole())),
            Unit::Hertz => prefixed(v, "Hz"),
            Unit::PerSecond => prefixed(v, "").trim_end().to_string(),
            Unit::Percent | Unit::Ratio | Unit::InstPerCycle | Unit::PerCycle => {
                format!("{v:.2}")
            }
            Unit::Cycles | Unit::Instructions | Unit::None => count(v),
        }
    }
}

/// A count: whole when it is one, else two decimals.
fn count(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// `v` with a decimal prefix (k, M, G, T) and one decimal, then `unit`.
fn prefixed(v: f64, unit: &str) -> String {
    let steps = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    for (div, p) in steps {
        if v.abs() >= div {
            return format!("{:.1} {p}{unit}", v / div);
        }
    }
    format!("{v:.1} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_follow_the_names() {
        let cases = [
            ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
            ("l1tex__t_sector_hit_rate.pct", "%"),
            ("smsp__average_warp_latency_per_inst_issued.ratio", "ratio"),
            ("gpu__time_duration.sum", "ns"),
            ("dram__bytes.sum.per_second", "B/s"),
            ("gpc__cycles_elapsed.avg.per_second", "Hz"),
            ("sm__inst_executed.avg.per_cycle_active", "inst/cycle"),
            ("gpc__cycles_elapsed.max", "cycle"),
            ("sm__cycles_active.avg", "cycle"),
            ("dram__bytes_read.sum", "byte"),
            ("smsp__inst_executed.sum", "inst"),
            (
                "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                "",
            ),
        ];
        for (name, unit) in cases {
            assert_eq!(Unit::of(name).name(), unit, "{name}");
        }
    }

    #[test]
    fn values_for_people() {
        assert_eq!(Unit::Nanoseconds.show(12_345.0), "12.3 µs");
        assert_eq!(Unit::Bytes.show(4_096.0), "4.1 kB");
        assert_eq!(Unit::BytesPerSecond.show(1.5e12), "1.5 TB/s");
        assert_eq!(Unit::Hertz.show(1.755e9), "1.8 GHz");
        assert_eq!(Unit::Percent.show(42.5), "42.50");
        assert_eq!(Unit::Cycles.show(1000.0), "1000");
        assert_eq!(Unit::None.show(2.5), "2.50");
        assert_eq!(Unit::Ratio.show(f64::NAN), "n/a");
    }
}
