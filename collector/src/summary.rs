//! Per-function statistics over the API records of one or more traces.

use crate::model::Trace;
use std::collections::HashMap;

/// Statistics for one driver function, merged over every thread and trace.
///
/// A call's duration is `end_ns - start_ns` (0 if the clock went backwards).
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
    /// The middle duration; for an even number of calls, the lower of the two
    /// middle durations (so it is always a duration that occurred).
    pub median_ns: u64,
    /// Shortest duration, ns.
    pub min_ns: u64,
    /// Longest duration, ns.
    pub max_ns: u64,
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
    let mut rows: Vec<FunctionSummary> = by_name
        .into_iter()
        .map(|(function, mut acc)| {
            acc.durations.sort_unstable();
            let d = &acc.durations;
            let calls = d.len() as u64;
            let total: u128 = d.iter().map(|&x| u128::from(x)).sum();
            FunctionSummary {
                function,
                calls,
                errors: acc.errors.values().sum(),
                total_ns: u64::try_from(total).unwrap_or(u64::MAX),
                mean_ns: (total / u128::from(calls.max(1))) as u64,
                median_ns: d[(d.len() - 1) / 2],
                min_ns: d[0],
                max_ns: d[d.len() - 1],
                error_codes: acc.errors.into_iter().collect(),
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then_with(|| a.function.cmp(&b.function))
    });
    rows
}
