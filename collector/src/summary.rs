//! Per-function statistics over the API records of one or more traces.

use crate::gpu_summary::{Hundredths, Stats};
use crate::model::Trace;
use std::collections::HashMap;

/// Statistics for one driver function, merged over every thread and trace.
///
/// A call's duration is `end_ns - start_ns` (0 if the clock went backwards). The columns are
/// those of `nsys stats`' `cuda_api_sum`: time share, total, calls, mean, median, min, max and
/// standard deviation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FunctionSummary {
    /// The function's name (`function#ID` where a trace has no name for the id).
    pub function: String,
    /// Number of calls.
    pub calls: u64,
    /// Calls whose result was not 0 (`CUDA_SUCCESS`).
    pub errors: u64,
    /// Sum of the durations, ns (saturates at `u64::MAX`).
    pub total_ns: u64,
    /// `total_ns / calls`, rounded down.
    pub mean_ns: u64,
    /// The middle duration; for an even number of calls, the mean of the two middle
    /// durations, rounded down (as `nsys stats` and pandas take it).
    pub median_ns: u64,
    /// Shortest duration, ns.
    pub min_ns: u64,
    /// Longest duration, ns.
    pub max_ns: u64,
    /// Sample standard deviation (n − 1), rounded down; 0 for one call.
    pub stddev_ns: u64,
    /// This function's share of the time of every function's calls, percent.
    pub share_percent: Hundredths,
    /// Failed calls by result code (`CUresult`), ascending.
    pub error_codes: Vec<(u32, u64)>,
}

/// One row per function name over all `traces`, sorted by total time
/// (descending), ties by name (ascending).
pub fn api_summary(traces: &[Trace]) -> Vec<FunctionSummary> {
    struct Acc {
        errors: std::collections::BTreeMap<u32, u64>,
        durations: Vec<u64>,
    }
    let mut by_name: HashMap<String, Acc> = HashMap::new();
    for trace in traces {
        // Resolve each id once per trace: ids differ between files, names do not.
        let mut per_id: HashMap<u32, (std::collections::BTreeMap<u32, u64>, Vec<u64>)> =
            HashMap::new();
        for thread in trace.threads.values() {
            for r in &thread.records {
                let e = per_id.entry(r.function).or_default();
                if r.result != 0 {
                    *e.0.entry(r.result).or_insert(0) += 1;
                }
                e.1.push(r.end_ns.saturating_sub(r.start_ns));
            }
        }
        for (id, (errors, durations)) in per_id {
            let acc = by_name
                .entry(trace.function_name(id).into_owned())
                .or_insert_with(|| Acc {
                    errors: Default::default(),
                    durations: Vec::new(),
                });
            for (code, n) in errors {
                *acc.errors.entry(code).or_insert(0) += n;
            }
            acc.durations.extend(durations);
        }
    }
    let all: u128 = by_name
        .values()
        .flat_map(|acc| &acc.durations)
        .map(|&d| u128::from(d))
        .sum();
    let mut rows: Vec<FunctionSummary> = by_name
        .into_iter()
        .map(|(function, mut acc)| {
            let s = Stats::of(&mut acc.durations);
            FunctionSummary {
                function,
                calls: s.count,
                errors: acc.errors.values().sum(),
                total_ns: s.total_ns(),
                mean_ns: s.mean,
                median_ns: s.median,
                min_ns: s.min,
                max_ns: s.max,
                stddev_ns: s.stddev,
                share_percent: Hundredths::percent(s.total, all),
                error_codes: acc.errors.into_iter().collect(),
            }
        })
        .collect();
    sort_rows(&mut rows);
    rows
}

/// Sorts API summary rows by total time (descending), ties by name (ascending).
pub(crate) fn sort_rows(rows: &mut [FunctionSummary]) {
    rows.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then_with(|| a.function.cmp(&b.function))
    });
}
