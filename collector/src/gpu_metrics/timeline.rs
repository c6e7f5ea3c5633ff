//! One GPU's samples on the trace's clock, evaluated, and the average of each metric over a
//! set of intervals: each sample weighted by the nanoseconds it shares with the intervals
//! (exact overlap), with the share of the intervals the samples cover.

/// A metric's values as the section shows them: a counter (`.sum`) becomes its rate, the count
/// in each sample over the sample's own duration (`dram__bytes_read.sum` →
/// `dram__bytes_read.sum.per_second`), so an overlap-weighted average is the count over the
/// time; every other metric (a percentage, a rate) is averaged as it is.
pub fn shown_name(metric: &str) -> String {
    if is_count(metric) {
        format!("{metric}.per_second")
    } else {
        metric.to_string()
    }
}

/// Whether `metric` is a count per sample (its name ends in `.sum`).
pub fn is_count(metric: &str) -> bool {
    metric.ends_with(".sum")
}

/// One sample: its interval (ns, the trace's clock) and its values in [`shown_name`] form.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub start: u64,
    pub end: u64,
    pub values: Vec<f64>,
}

/// What a set of intervals got from a timeline.
#[derive(Clone, Debug, PartialEq)]
pub struct Average {
    /// The intervals' total length, ns.
    pub span_ns: u64,
    /// Of it, the ns inside samples.
    pub covered_ns: u64,
    /// Each metric's overlap-weighted average (NaN where no sample with a value covers any of
    /// the intervals).
    pub values: Vec<f64>,
}

impl Average {
    /// The share of the intervals the samples cover, 0..=1 (0 for no time at all).
    pub fn covered(&self) -> f64 {
        if self.span_ns == 0 {
            0.0
        } else {
            self.covered_ns as f64 / self.span_ns as f64
        }
    }
}

/// A GPU's samples in order of start; samples never overlap (CUPTI's follow one another).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// The metrics in [`shown_name`] form, in the order of each sample's values.
    pub metrics: Vec<String>,
    pub samples: Vec<Sample>,
}

impl Timeline {
    /// Puts the samples in order of start (decodes may come out of order across files).
    pub fn sort(&mut self) {
        self.samples.sort_by_key(|s| (s.start, s.end));
    }

    /// The average of each metric over `intervals` (any order, overlapping or not: they are
    /// merged first, so time two of them share counts once).
    pub fn average(&self, intervals: Vec<(u64, u64)>) -> Average {
        let spans = union(intervals);
        let n = self.metrics.len();
        let (mut vw, mut w) = (vec![0f64; n], vec![0f64; n]);
        let mut covered = 0u64;
        let mut span = 0u64;
        for &(a, b) in &spans {
            span += b - a;
            let first = self.samples.partition_point(|s| s.end <= a);
            for s in self.samples[first..].iter().take_while(|s| s.start < b) {
                let (lo, hi) = (a.max(s.start), b.min(s.end));
                if hi <= lo {
                    continue;
                }
                let ns = hi - lo;
                covered += ns;
                for (m, v) in s.values.iter().enumerate().take(n) {
                    if v.is_finite() {
                        vw[m] += v * ns as f64;
                        w[m] += ns as f64;
                    }
                }
            }
        }
        Average {
            span_ns: span,
            covered_ns: covered,
            values: vw
                .iter()
                .zip(&w)
                .map(|(s, w)| if *w > 0.0 { s / w } else { f64::NAN })
                .collect(),
        }
    }

    /// The average over every sample (the whole run on this GPU).
    pub fn overall(&self) -> Average {
        self.average(self.samples.iter().map(|s| (s.start, s.end)).collect())
    }
}

/// `intervals` merged: sorted, disjoint, empty ones dropped.
pub fn union(mut intervals: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    intervals.retain(|(a, b)| b > a);
    intervals.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(intervals.len());
    for (a, b) in intervals {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeline() -> Timeline {
        // Four samples of 100 ns: a percentage and a byte rate.
        let s = |start, a, b| Sample {
            start,
            end: start + 100,
            values: vec![a, b],
        };
        Timeline {
            metrics: vec!["sm".into(), "bytes.sum.per_second".into()],
            samples: vec![
                s(1000, 10.0, 1e9),
                s(1100, 50.0, 3e9),
                s(1200, 90.0, f64::NAN),
                s(1400, 30.0, 2e9),
            ],
        }
    }

    #[test]
    fn overlap_weights_each_sample_by_the_time_it_shares() {
        let t = timeline();
        // 1050..1150: half of the first, half of the second.
        let a = t.average(vec![(1050, 1150)]);
        assert_eq!((a.span_ns, a.covered_ns), (100, 100));
        assert_eq!(a.values, vec![30.0, 2e9]);
        // 1075..1225: 25 ns at 10, 100 at 50, 25 at 90 (bytes: 25 at 1e9, 100 at 3e9, NaN
        // left out).
        let a = t.average(vec![(1075, 1225)]);
        assert_eq!(
            a.values[0],
            (25.0 * 10.0 + 100.0 * 50.0 + 25.0 * 90.0) / 150.0
        );
        assert_eq!(a.values[1], (25.0 * 1e9 + 100.0 * 3e9) / 125.0);
    }

    #[test]
    fn the_gap_between_samples_is_not_covered() {
        let t = timeline();
        // 1250..1450: 50 ns in the third sample, 100 ns of gap, 50 in the fourth.
        let a = t.average(vec![(1250, 1450)]);
        assert_eq!((a.span_ns, a.covered_ns), (200, 100));
        assert_eq!(a.covered(), 0.5);
        assert_eq!(a.values, vec![60.0, 2e9]);
        // Nothing sampled at all.
        let a = t.average(vec![(5000, 6000)]);
        assert_eq!((a.covered_ns, a.covered()), (0, 0.0));
        assert!(a.values.iter().all(|v| v.is_nan()));
    }

    #[test]
    fn intervals_that_overlap_count_once() {
        let t = timeline();
        let a = t.average(vec![(1100, 1150), (1000, 1100), (1120, 1200), (1190, 1190)]);
        assert_eq!((a.span_ns, a.covered_ns), (200, 200));
        assert_eq!(a.values, vec![30.0, 2e9]);
        assert_eq!(
            union(vec![(5, 9), (1, 3), (3, 4), (8, 12), (20, 20)]),
            vec![(1, 4), (5, 12)]
        );
        let all = t.overall();
        assert_eq!((all.span_ns, all.covered_ns), (400, 400));
        assert_eq!(all.values, vec![45.0, 2e9]);
    }

    #[test]
    fn counts_become_rates() {
        assert_eq!(
            shown_name("dram__bytes_read.sum"),
            "dram__bytes_read.sum.per_second"
        );
        assert_eq!(
            shown_name("sm__cycles_active.avg.pct_of_peak_sustained_elapsed"),
            "sm__cycles_active.avg.pct_of_peak_sustained_elapsed"
        );
        assert!(is_count("pcie__read_bytes.sum"));
        assert!(!is_count("sm__cycles_elapsed.avg.per_second"));
    }
}
