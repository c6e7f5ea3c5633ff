//! The largest launch-to-start latencies, kept as GPU records are matched with their API
//! calls, in whatever order that happens.

use super::common::{Activity, Latencies, LaunchLatency};
use crate::model::Trace;
use rtrace_format::CopyKind;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Larger is kept first: the latency, then trace and file order (kernels, then copies, then
/// memsets; each in file order) for equal latencies.
type Key = (i64, Reverse<(usize, Activity, u64)>);

/// What a GPU record is, for its row's name.
#[derive(Clone, Copy, Debug)]
pub enum Work {
    Kernel(u32),
    Memcpy(CopyKind),
    Memset,
}

#[derive(Clone, Copy, Debug)]
struct Found {
    work: Work,
    function: u32,
    correlation: u64,
    api_start: u64,
    gpu_start: u64,
}

/// The `limit` largest latencies, and how many records were matched.
#[derive(Debug)]
pub struct Top {
    limit: usize,
    /// Min-heap of (key, slot in `slots`).
    kept: BinaryHeap<Reverse<(Key, usize)>>,
    slots: Vec<(Key, Found)>,
    correlated: u64,
}

impl Top {
    pub fn new(limit: usize) -> Top {
        Top {
            limit,
            kept: BinaryHeap::new(),
            slots: Vec::new(),
            correlated: 0,
        }
    }

    /// GPU record `index` (among trace `ti`'s records of its activity, in file order), which
    /// started at `gpu_start`, matched with the API call of `function` started at `api_start`.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn matched(
        &mut self,
        ti: usize,
        work: Work,
        index: u64,
        correlation: u64,
        gpu_start: u64,
        api_start: u64,
        function: u32,
    ) {
        self.correlated += 1;
        if self.limit == 0 {
            return;
        }
        let latency = i128::from(gpu_start) - i128::from(api_start);
        let latency = latency.clamp(i64::MIN.into(), i64::MAX.into()) as i64;
        let activity = match work {
            Work::Kernel(_) => Activity::Kernel,
            Work::Memcpy(_) => Activity::Memcpy,
            Work::Memset => Activity::Memset,
        };
        let key = (latency, Reverse((ti, activity, index)));
        let found = Found {
            work,
            function,
            correlation,
            api_start,
            gpu_start,
        };
        self.keep(key, found);
    }

    /// Keeps `found` if its key is among the `limit` largest.
    fn keep(&mut self, key: Key, found: Found) {
        if self.slots.len() < self.limit {
            self.kept.push(Reverse((key, self.slots.len())));
            self.slots.push((key, found));
        } else if self.kept.peek().is_some_and(|m| key > (m.0).0) {
            if let Some(Reverse((_, slot))) = self.kept.pop() {
                self.kept.push(Reverse((key, slot)));
                self.slots[slot] = (key, found);
            }
        }
    }

    /// Adds what `other` kept and counted (the records of other traces: keys are unique, so
    /// the latencies kept are those one `Top` given every record would keep, in any order).
    pub fn merge(&mut self, other: Top) {
        self.correlated += other.correlated;
        for (key, found) in other.slots {
            self.keep(key, found);
        }
    }

    /// The latencies, largest first; names from `traces` (indexed as `ti` was).
    pub fn finish(self, traces: &[Trace]) -> Latencies {
        let mut found = self.slots;
        found.sort_by_key(|f| Reverse(f.0));
        let slowest = found
            .into_iter()
            .filter_map(|((latency_ns, Reverse((ti, activity, _))), f)| {
                let trace = traces.get(ti)?;
                let name = match f.work {
                    Work::Kernel(id) => trace.kernel_display_name(id),
                    Work::Memcpy(kind) => format!("memcpy {}", kind.name()),
                    Work::Memset => "memset".to_string(),
                };
                Some(LaunchLatency {
                    pid: trace.header.pid,
                    activity,
                    name,
                    function: trace.function_name(f.function).into_owned(),
                    correlation: f.correlation,
                    api_start_ns: f.api_start,
                    gpu_start_ns: f.gpu_start,
                    latency_ns,
                })
            })
            .collect();
        Latencies {
            correlated: self.correlated,
            slowest,
        }
    }
}
