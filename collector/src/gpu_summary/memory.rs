//! Memory in use per memory kind, and host waits per kind of synchronization.

use super::common::*;

/// Allocations and frees of one kind of memory, merged over every trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemorySummary {
    /// The memory kind (`device`, `pinned`, `managed`, ...; [`MemoryKind::name`]).
    pub kind: MemoryKind,
    /// Allocation records.
    pub allocations: u64,
    /// Free records (those of allocations made before tracing began included).
    pub frees: u64,
    /// Bytes of all the allocations (saturates at `u64::MAX`).
    pub bytes_allocated: u64,
    /// The most bytes in use at once (see [`memory_summary`]).
    pub peak_bytes: u64,
    /// The largest single allocation, bytes.
    pub largest_bytes: u64,
    /// Bytes still in use after the last record: allocated and never freed.
    pub live_bytes: u64,
}

/// One row per memory kind over all `traces`, sorted by bytes allocated
/// (descending), ties by kind name.
///
/// Bytes in use follow the records in time order (`timestamp_ns`; records of
/// equal time in trace, then file order), all traces together on their shared
/// host clock: an allocation adds its bytes under its address, a free of an
/// address in use takes away what that allocation added (a free of an unknown
/// address, allocated before tracing began, changes nothing), and an
/// allocation at an address still in use replaces it (its free was lost).
/// `peak_bytes` is the largest total reached.
pub fn memory_summary(traces: &[Trace]) -> Vec<MemorySummary> {
    let mut events: Vec<(u64, usize, usize)> = Vec::new();
    for (ti, trace) in traces.iter().enumerate() {
        events.extend(
            trace
                .memory
                .iter()
                .enumerate()
                .map(|(i, m)| (m.timestamp_ns, ti, i)),
        );
    }
    events.sort_unstable();
    let mut acc = MemoryFold::default();
    for (_, ti, i) in events {
        acc.add(ti, &traces[ti].memory[i]);
    }
    acc.rows()
}

/// Memory in use per kind, as [`memory_summary`] computes it, from the records handed to it
/// in time order (records of equal time in trace, then file order): holds the allocations
/// still in use, not the records.
#[derive(Default)]
pub struct MemoryFold {
    by_kind: HashMap<MemoryKind, KindAcc>,
}

#[derive(Default)]
struct KindAcc {
    row: MemorySummary,
    bytes: u128,
    in_use: u128,
    peak: u128,
    /// (trace index, address) → bytes.
    live: HashMap<(usize, u64), u64>,
}

impl MemoryFold {
    /// Record `m` of trace `ti`.
    pub fn add(&mut self, ti: usize, m: &MemoryRecord) {
        let acc = self.by_kind.entry(m.kind).or_default();
        match m.operation {
            MemoryOperation::Alloc => {
                acc.row.allocations += 1;
                acc.bytes += u128::from(m.bytes);
                acc.row.largest_bytes = acc.row.largest_bytes.max(m.bytes);
                if let Some(old) = acc.live.insert((ti, m.address), m.bytes) {
                    acc.in_use -= u128::from(old);
                }
                acc.in_use += u128::from(m.bytes);
                acc.peak = acc.peak.max(acc.in_use);
            }
            MemoryOperation::Free => {
                acc.row.frees += 1;
                if let Some(old) = acc.live.remove(&(ti, m.address)) {
                    acc.in_use -= u128::from(old);
                }
            }
            MemoryOperation::Unknown => {}
        }
    }

    /// One row per memory kind with records, sorted by bytes allocated (descending), ties
    /// by kind name.
    pub fn rows(self) -> Vec<MemorySummary> {
        let mut rows: Vec<MemorySummary> = self
            .by_kind
            .into_iter()
            .filter(|(_, acc)| acc.row.allocations + acc.row.frees > 0)
            .map(|(kind, acc)| MemorySummary {
                kind,
                bytes_allocated: saturate(acc.bytes),
                peak_bytes: saturate(acc.peak),
                live_bytes: saturate(acc.in_use),
                ..acc.row
            })
            .collect();
        rows.sort_by(|a, b| {
            b.bytes_allocated
                .cmp(&a.bytes_allocated)
                .then_with(|| a.kind.name().cmp(b.kind.name()))
        });
        rows
    }
}

/// Host waits of one kind of synchronization, merged over every trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncSummary {
    /// `event synchronize`, `stream wait event`, `stream synchronize`,
    /// `context synchronize` ([`SyncKind::name`]), or `stream query` /
    /// `event query` for records linked to a `cuStreamQuery*` / `cuEventQuery`
    /// call (CUPTI reports queries as synchronizations), or `unknown`.
    pub kind: &'static str,
    /// Number of records.
    pub count: u64,
    /// Sum of the host waits (`end_ns - start_ns`), ns (saturates at `u64::MAX`).
    pub total_wait_ns: u64,
    /// `total_wait_ns / count`, rounded down.
    pub mean_wait_ns: u64,
    pub max_wait_ns: u64,
}

/// The kind of synchronization a record stands for: its [`SyncKind`], or a
/// query when it is linked to a query call (`function` of its API record: a driver call, or
/// the runtime call that made it).
pub fn sync_kind(kind: SyncKind, function: Option<&str>) -> &'static str {
    let query =
        |f: &str, driver: &str, runtime: &str| f.starts_with(driver) || f.starts_with(runtime);
    match (kind, function) {
        (SyncKind::StreamSynchronize, Some(f)) if query(f, "cuStreamQuery", "cudaStreamQuery") => {
            "stream query"
        }
        (SyncKind::EventSynchronize, Some(f)) if query(f, "cuEventQuery", "cudaEventQuery") => {
            "event query"
        }
        (kind, _) => kind.name(),
    }
}

/// One row per kind of synchronization over all `traces`, sorted by total
/// wait (descending), ties by kind name.
pub fn sync_summary(traces: &[Trace]) -> Vec<SyncSummary> {
    let mut fold = SyncFold::default();
    for trace in traces {
        let api = trace.api_records_for(
            trace
                .syncs
                .iter()
                .filter(|s| linked(s.flags))
                .map(|s| s.correlation),
        );
        for s in &trace.syncs {
            let function = linked(s.flags)
                .then(|| api.get(s.correlation))
                .flatten()
                .and_then(|a| trace.functions.get(&a.function));
            fold.add(sync_kind(s.kind, function.map(String::as_str)), s);
        }
    }
    fold.rows()
}

/// Host waits per kind of synchronization, folded as the records come, in any order.
#[derive(Default)]
pub struct SyncFold {
    /// Kind → (count, total wait, longest wait).
    by_kind: HashMap<&'static str, (u64, u128, u64)>,
}

impl SyncFold {
    /// Record `s`, of kind `kind` ([`sync_kind`]).
    pub fn add(&mut self, kind: &'static str, s: &SyncRecord) {
        let wait = s.wait_ns();
        let e = self.by_kind.entry(kind).or_default();
        e.0 += 1;
        e.1 += u128::from(wait);
        e.2 = e.2.max(wait);
    }

    /// Adds what `other` folded.
    pub fn merge(&mut self, other: SyncFold) {
        for (kind, (count, total, max)) in other.by_kind {
            let e = self.by_kind.entry(kind).or_default();
            e.0 += count;
            e.1 += total;
            e.2 = e.2.max(max);
        }
    }

    /// One row per kind, sorted by total wait (descending), ties by kind name.
    pub fn rows(self) -> Vec<SyncSummary> {
        let mut rows: Vec<SyncSummary> = self
            .by_kind
            .into_iter()
            .map(|(kind, (count, total, max))| SyncSummary {
                kind,
                count,
                total_wait_ns: saturate(total),
                mean_wait_ns: saturate(total / u128::from(count.max(1))),
                max_wait_ns: max,
            })
            .collect();
        rows.sort_by(|a, b| {
            b.total_wait_ns
                .cmp(&a.total_wait_ns)
                .then_with(|| a.kind.cmp(b.kind))
        });
        rows
    }
}
