//! Kernel launch and execution times, as `nsys stats`' `cuda_kern_exec_sum` splits them: for
//! each kernel matched with the API call that launched it, the call's time (API), the wait
//! from the call's end to the kernel's start (queue, when the kernel started after the call
//! returned), the kernel's own time, and the whole from the call's start to the kernel's end
//! (total). One row per kernel name and launching function, merged over every trace, with the
//! count, mean, median, min, max and sample standard deviation of each part (exact medians by
//! passes over the same launches: [`Dist`]).

use super::common::{saturate, Stats};
use super::dist::Dist;
use super::fast_hash::FastMap;
use crate::model::Trace;
use rtrace_format::FLAG_CORRELATED;
use std::collections::HashMap;

/// One launch's parts, ns: `(api, queue, kernel, total)`.
pub type LaunchParts = (u64, Option<u64>, u64, u64);

/// One launch's parts: the call's duration, the queue from the call's end to the kernel's
/// start (`None` when the kernel started before the call returned: nsys leaves its queue
/// empty then), the kernel's duration, and from the call's start to the kernel's end. A part
/// whose end is before its start is 0.
pub fn launch_parts(
    api_start: u64,
    api_end: u64,
    kernel_start: u64,
    kernel_end: u64,
) -> LaunchParts {
    (
        api_end.saturating_sub(api_start),
        (kernel_start > api_end).then(|| kernel_start - api_end),
        kernel_end.saturating_sub(kernel_start),
        kernel_end.saturating_sub(api_start),
    )
}

/// Statistics of one part of the launches of a row, ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartStats {
    /// Launches with this part (for the queue: those that waited).
    pub count: u64,
    /// The sum (saturates at `u64::MAX`).
    pub total_ns: u64,
    /// Rounded down.
    pub mean_ns: u64,
    /// The mean of the two middle values for an even count, rounded down.
    pub median_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    /// Sample standard deviation, rounded down.
    pub stddev_ns: u64,
}

impl PartStats {
    fn new(s: &Stats) -> PartStats {
        PartStats {
            count: s.count,
            total_ns: saturate(s.total),
            mean_ns: s.mean,
            median_ns: s.median,
            min_ns: s.min,
            max_ns: s.max,
            stddev_ns: s.stddev,
        }
    }
}

/// One kernel name launched by one API function: `cuda_kern_exec_sum`'s row (its `Count`,
/// `QCount` and the `T`, `A`, `Q`, `K` statistics).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernExecSummary {
    /// The kernel's demangled name.
    pub kernel: String,
    /// The function that launched it (`cuLaunchKernel`, ...).
    pub function: String,
    /// From the call's start to the kernel's end.
    pub total: PartStats,
    /// The launch call.
    pub api: PartStats,
    /// From the call's end to the kernel's start, over the launches that waited
    /// (`queue.count` of `total.count`).
    pub queue: PartStats,
    /// The kernel.
    pub kernel_time: PartStats,
}

/// The four parts' distributions of one row.
#[derive(Clone, Debug, Default)]
struct Parts {
    total: Dist,
    api: Dist,
    queue: Dist,
    kernel: Dist,
}

impl Parts {
    fn add(&mut self, (api, queue, kernel, total): LaunchParts) {
        self.total.add(total);
        self.api.add(api);
        if let Some(q) = queue {
            self.queue.add(q);
        }
        self.kernel.add(kernel);
    }

    fn select(&mut self, (api, queue, kernel, total): LaunchParts) {
        self.total.select(total);
        self.api.select(api);
        if let Some(q) = queue {
            self.queue.select(q);
        }
        self.kernel.select(kernel);
    }

    fn merge(&mut self, other: &Parts) {
        self.total.merge(&other.total);
        self.api.merge(&other.api);
        self.queue.merge(&other.queue);
        self.kernel.merge(&other.kernel);
    }

    fn end_pass(&mut self, buckets: u128) -> bool {
        // Every part ends its pass (no short circuit).
        let a = self.total.end_pass_with(buckets);
        let b = self.api.end_pass_with(buckets);
        let c = self.queue.end_pass_with(buckets);
        let d = self.kernel.end_pass_with(buckets);
        a | b | c | d
    }
}

/// Selection buckets a pass of [`KernExecFold`] may count in (8 bytes each: 16 MiB; with the
/// exact counts kept beside 4096 buckets or more, at most 512 of about 9 KiB), shared
/// among its middle values.
const SELECT_BUDGET: u128 = 1 << 21;
/// Selection buckets of one middle value at most.
const MOST_BUCKETS: u128 = 1 << 16;

/// The launches of every trace folded by (kernel name, function) as they are matched with
/// their calls; while a median needs it ([`KernExecFold::end_pass`]), the same launches are
/// given again ([`KernExecFold::select`]).
#[derive(Clone, Default)]
pub struct KernExecFold {
    rows: Vec<((String, String), Parts)>,
    index: HashMap<(String, String), usize>,
    /// (trace, kernel name id, function id) → row.
    keys: FastMap<RowKey, usize>,
    /// Keys met lately and their rows, each in its [`recent_slot`]: most launches are of a
    /// few kernels, whose rows are found without hashing their keys.
    recent: [Option<(RowKey, usize)>; RECENT],
}

/// A launch's trace, kernel name id and function id.
type RowKey = (usize, u32, u32);

/// Slots of [`KernExecFold::recent`].
const RECENT: usize = 32;

/// The slot of a key among [`KernExecFold::recent`].
fn recent_slot((ti, name, function): RowKey) -> usize {
    (ti ^ (name ^ function.wrapping_mul(7)) as usize) % RECENT
}

impl KernExecFold {
    fn row(&mut self, t: &Trace, ti: usize, name: u32, function: u32) -> usize {
        let slot = recent_slot((ti, name, function));
        match self.recent[slot] {
            Some((key, row)) if key == (ti, name, function) => row,
            _ => {
                let row = self.row_of(t, ti, name, function);
                self.recent[slot] = Some(((ti, name, function), row));
                row
            }
        }
    }

    /// The row of kernel `name` launched by `function` in trace `ti`, made if new.
    fn row_of(&mut self, t: &Trace, ti: usize, name: u32, function: u32) -> usize {
        if let Some(&row) = self.keys.get(&(ti, name, function)) {
            return row;
        }
        let key = (
            t.kernel_display_name(name),
            t.function_name(function).into_owned(),
        );
        let row = match self.index.get(&key) {
            Some(&row) => row,
            None => {
                self.index.insert(key.clone(), self.rows.len());
                self.rows.push((key, Parts::default()));
                self.rows.len() - 1
            }
        };
        self.keys.insert((ti, name, function), row);
        row
    }

    /// Kernel `name` of trace `ti` (`t`) launched by a call of `function`; its four parts
    /// ([`launch_parts`]). Its row: what [`KernExecFold::select_row`] takes, here and in
    /// a fold this one is merged into through what [`KernExecFold::merge`] gives.
    pub fn add(
        &mut self,
        t: &Trace,
        ti: usize,
        name: u32,
        function: u32,
        parts: LaunchParts,
    ) -> usize {
        let row = self.row(t, ti, name, function);
        self.rows[row].1.add(parts);
        row
    }

    /// Adds what `other` folded (other traces'), row by row; its traces' keys lead to the
    /// rows here. The row here of each of `other`'s rows.
    pub fn merge(&mut self, other: KernExecFold) -> Vec<usize> {
        let mut to = Vec::with_capacity(other.rows.len());
        for (key, parts) in other.rows {
            let row = match self.index.get(&key) {
                Some(&row) => row,
                None => {
                    self.index.insert(key.clone(), self.rows.len());
                    self.rows.push((key, Parts::default()));
                    self.rows.len() - 1
                }
            };
            self.rows[row].1.merge(&parts);
            to.push(row);
        }
        for (k, row) in other.keys {
            self.keys.insert(k, to[row]);
        }
        to
    }

    /// Adds the selection counts of `other`, a clone of this fold taken when the pass began
    /// and given other traces' launches ([`KernExecFold::select`]).
    pub fn add_selected(&mut self, other: &KernExecFold) {
        for ((_, mine), (_, theirs)) in self.rows.iter_mut().zip(&other.rows) {
            mine.total.add_selected(&theirs.total);
            mine.api.add_selected(&theirs.api);
            mine.queue.add_selected(&theirs.queue);
            mine.kernel.add_selected(&theirs.kernel);
        }
    }

    /// The same launch again, in a selection pass, by its row (no lookup of its key).
    pub fn select_row(&mut self, row: usize, parts: LaunchParts) {
        if let Some((_, p)) = self.rows.get_mut(row) {
            p.select(parts);
        }
    }

    /// The same launch again, in a selection pass.
    pub fn select(&mut self, ti: usize, name: u32, function: u32, parts: LaunchParts) {
        if let Some(&row) = self.keys.get(&(ti, name, function)) {
            self.rows[row].1.select(parts);
        }
    }

    /// Ends a pass: true when some median needs the launches again. The next pass's buckets
    /// share [`SELECT_BUDGET`] among the rows' eight middle values (a pass settles a range of
    /// up to that many values, one of up to 65 536 where the rows are few: most medians of a
    /// few kernels' times need one pass instead of two).
    pub fn end_pass(&mut self) -> bool {
        let middles = (self.rows.len() as u128 * 8).max(1);
        let buckets = (SELECT_BUDGET / middles).min(MOST_BUCKETS);
        let mut again = false;
        for (_, p) in &mut self.rows {
            again |= p.end_pass(buckets);
        }
        again
    }

    /// The rows, once the passes are over: most total time first, then by kernel name and
    /// function.
    pub fn rows(&self) -> Vec<KernExecSummary> {
        let mut rows: Vec<KernExecSummary> = self
            .rows
            .iter()
            .map(|((kernel, function), p)| KernExecSummary {
                kernel: kernel.clone(),
                function: function.clone(),
                total: PartStats::new(&p.total.stats()),
                api: PartStats::new(&p.api.stats()),
                queue: PartStats::new(&p.queue.stats()),
                kernel_time: PartStats::new(&p.kernel.stats()),
            })
            .collect();
        rows.sort_by(|a, b| {
            b.total
                .total_ns
                .cmp(&a.total.total_ns)
                .then_with(|| a.kernel.cmp(&b.kernel))
                .then_with(|| a.function.cmp(&b.function))
        });
        rows
    }
}

/// Each correlated kernel of `t` (trace `ti`) with the call that launched it: `(name id,
/// function id, parts)`.
fn launches(t: &Trace) -> Vec<(u32, u32, LaunchParts)> {
    let ids = t
        .kernels
        .iter()
        .filter(|k| k.flags & FLAG_CORRELATED != 0)
        .map(|k| k.correlation);
    let api = t.api_records_for(ids);
    t.kernels
        .iter()
        .filter(|k| k.flags & FLAG_CORRELATED != 0)
        .filter_map(|k| {
            let c = api.get(k.correlation)?;
            let parts = launch_parts(c.start_ns, c.end_ns, k.start_ns, k.end_ns);
            Some((k.name, c.function, parts))
        })
        .collect()
}

/// The `cuda_kern_exec_sum` rows of traces held in memory.
pub fn kern_exec_summary(traces: &[Trace]) -> Vec<KernExecSummary> {
    let mut fold = KernExecFold::default();
    let all: Vec<_> = traces.iter().map(launches).collect();
    for (ti, (t, launched)) in traces.iter().zip(&all).enumerate() {
        for &(name, function, parts) in launched {
            fold.add(t, ti, name, function, parts);
        }
    }
    while fold.end_pass() {
        for (ti, launched) in all.iter().enumerate() {
            for &(name, function, parts) in launched {
                fold.select(ti, name, function, parts);
            }
        }
    }
    fold.rows()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_follow_nsys() {
        // The call 100..130, the kernel 180..250: queue 50, total 150.
        assert_eq!(launch_parts(100, 130, 180, 250), (30, Some(50), 70, 150));
        // The kernel started before the call returned: no queue.
        assert_eq!(launch_parts(100, 130, 120, 250), (30, None, 130, 150));
        assert_eq!(launch_parts(100, 130, 130, 140), (30, None, 10, 40));
        // Clocks that disagree: 0, never a wrapped value.
        assert_eq!(launch_parts(100, 90, 50, 40), (0, None, 0, 0));
    }
}
