//! Statistics over the GPU activity records (kernels, memory copies, memsets)
//! of one or more traces: per-kernel and per-copy-kind summaries, memsets,
//! per-device and per-stream utilisation, and launch-to-start latency; and over
//! the memory (allocation and free) and synchronization records: memory in use
//! per memory kind, and host waits per kind of synchronization; and the
//! resources of the traced processes ([`resources`]): devices, contexts,
//! streams, modules and functions.
//!
//! A record's duration is `end_ns - start_ns` (0 if the end is before the
//! start). Means, medians and standard deviations are in integer ns, rounded
//! down; the median of an even count is the lower middle value.

use crate::model::Trace;
use rtrace_format::{
    attr, CopyKind, MemoryKind, MemoryOperation, StreamFlag, SyncKind, FLAG_CORRELATED,
};
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// A non-negative number with two decimals, held exactly as hundredths:
/// `Hundredths(7550)` is 75.50 and displays as `75.50`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hundredths(pub u64);

impl Hundredths {
    /// `num / den`, in hundredths, rounded half up (`den` must not be 0).
    fn ratio(num: u128, den: u128) -> Hundredths {
        let h = (num.saturating_mul(100).saturating_add(den / 2)) / den;
        Hundredths(u64::try_from(h).unwrap_or(u64::MAX))
    }

    /// `part / whole` as a percentage; 0.00 when `whole` is 0.
    fn percent(part: u128, whole: u128) -> Hundredths {
        if whole == 0 {
            Hundredths(0)
        } else {
            Hundredths::ratio(part.saturating_mul(100), whole)
        }
    }
}

impl fmt::Display for Hundredths {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:02}", self.0 / 100, self.0 % 100)
    }
}

/// Count, total, mean, median, min, max and population standard deviation of
/// a set of durations (ns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Stats {
    count: u64,
    /// The exact sum (the summaries saturate it at `u64::MAX`).
    total: u128,
    mean: u64,
    median: u64,
    min: u64,
    max: u64,
    stddev: u64,
}

impl Stats {
    /// Statistics of `d` (sorted in place); all zero when it is empty.
    fn of(d: &mut [u64]) -> Stats {
        if d.is_empty() {
            return Stats::default();
        }
        d.sort_unstable();
        let n = d.len() as u128;
        let total: u128 = d.iter().map(|&x| u128::from(x)).sum();
        Stats {
            count: d.len() as u64,
            total,
            mean: (total / n) as u64,
            median: d[(d.len() - 1) / 2],
            min: d[0],
            max: d[d.len() - 1],
            stddev: stddev(d, total),
        }
    }

    fn total_ns(&self) -> u64 {
        saturate(self.total)
    }
}

fn saturate(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// Population standard deviation of `d` (whose sum is `total`), rounded down.
///
/// Exact: variance = (n·Σx² − (Σx)²) / n², and ⌊√⌊v⌋⌋ = ⌊√v⌋. Falls back to
/// floating point only if Σx² does not fit in 128 bits.
fn stddev(d: &[u64], total: u128) -> u64 {
    let n = d.len() as u128;
    let squares = d.iter().try_fold(0u128, |acc, &x| {
        u128::from(x)
            .checked_mul(u128::from(x))
            .and_then(|sq| acc.checked_add(sq))
    });
    let exact = squares.and_then(|sq| {
        let num = sq.checked_mul(n)?.checked_sub(total.checked_mul(total)?)?;
        Some(num / n.checked_mul(n)?)
    });
    match exact {
        Some(variance) => saturate(variance.isqrt()),
        None => {
            let mean = total as f64 / n as f64;
            let var = d
                .iter()
                .map(|&x| (x as f64 - mean) * (x as f64 - mean))
                .sum::<f64>()
                / n as f64;
            var.sqrt() as u64
        }
    }
}

fn duration(start_ns: u64, end_ns: u64) -> u64 {
    end_ns.saturating_sub(start_ns)
}

/// Statistics for one kernel (by demangled name), merged over every trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelSummary {
    /// The kernel's demangled name (`kernel#ID` where a trace has no name for
    /// the id; the mangled name where it cannot be demangled).
    pub name: String,
    /// Number of executions.
    pub count: u64,
    /// Sum of the durations, ns (saturates at `u64::MAX`).
    pub total_ns: u64,
    /// `total_ns / count`, rounded down.
    pub mean_ns: u64,
    /// The middle duration; for an even count, the lower of the two middle ones.
    pub median_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    /// Population standard deviation of the durations, ns, rounded down.
    pub stddev_ns: u64,
    /// This kernel's share of the time of all kernels, %, rounded half up.
    pub share_percent: Hundredths,
    /// Grid and block of the launches, `(gx,gy,gz)x(bx,by,bz)`, when every
    /// launch used the same; else `various`.
    pub grid_block: String,
}

/// `(gx,gy,gz)x(bx,by,bz)`.
pub fn grid_block(grid: [i32; 3], block: [i32; 3]) -> String {
    format!(
        "({},{},{})x({},{},{})",
        grid[0], grid[1], grid[2], block[0], block[1], block[2]
    )
}

/// One row per kernel name (demangled) over all `traces`, sorted by total
/// time (descending), ties by name (ascending).
pub fn kernel_summary(traces: &[Trace]) -> Vec<KernelSummary> {
    type Launch = ([i32; 3], [i32; 3]);
    struct Acc {
        durations: Vec<u64>,
        /// The first launch's configuration, and whether every launch agreed.
        launch: Option<Launch>,
        uniform: bool,
    }
    let mut by_name: HashMap<String, Acc> = HashMap::new();
    for trace in traces {
        // Resolve (and demangle) each id once per trace: ids differ between files.
        let mut names: HashMap<u32, String> = HashMap::new();
        for k in &trace.kernels {
            let name = names
                .entry(k.name)
                .or_insert_with(|| trace.kernel_display_name(k.name));
            let acc = match by_name.get_mut(name.as_str()) {
                Some(acc) => acc,
                None => by_name.entry(name.clone()).or_insert(Acc {
                    durations: Vec::new(),
                    launch: None,
                    uniform: true,
                }),
            };
            acc.durations.push(duration(k.start_ns, k.end_ns));
            match acc.launch {
                None => acc.launch = Some((k.grid, k.block)),
                Some(first) => acc.uniform &= first == (k.grid, k.block),
            }
        }
    }
    let all: u128 = by_name
        .values()
        .flat_map(|a| a.durations.iter().map(|&d| u128::from(d)))
        .sum();
    let mut rows: Vec<KernelSummary> = by_name
        .into_iter()
        .map(|(name, mut acc)| {
            let s = Stats::of(&mut acc.durations);
            let grid_block = match acc.launch {
                Some((grid, block)) if acc.uniform => grid_block(grid, block),
                _ => "various".to_string(),
            };
            KernelSummary {
                name,
                count: s.count,
                total_ns: s.total_ns(),
                mean_ns: s.mean,
                median_ns: s.median,
                min_ns: s.min,
                max_ns: s.max,
                stddev_ns: s.stddev,
                share_percent: Hundredths::percent(s.total, all),
                grid_block,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then_with(|| a.name.cmp(&b.name))
    });
    rows
}

/// Statistics for one direction of memory copy, merged over every trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemcpySummary {
    /// The copy kind (`HtoD`, `DtoH`, ...; [`CopyKind::name`]).
    pub kind: CopyKind,
    /// Number of copies.
    pub count: u64,
    /// Bytes copied (saturates at `u64::MAX`).
    pub bytes: u64,
    /// Sum of the copies' durations, ns (saturates at `u64::MAX`).
    pub total_ns: u64,
    /// `total_ns / count`, rounded down.
    pub mean_ns: u64,
    /// The middle duration; for an even count, the lower of the two middle ones.
    pub median_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    /// `bytes / total_ns` in GB/s (10⁹ bytes per second), rounded half up;
    /// `None` when the total time is 0.
    pub bandwidth_gbps: Option<Hundredths>,
}

/// One row per copy kind over all `traces`, sorted by total time
/// (descending), ties by kind name.
pub fn memcpy_summary(traces: &[Trace]) -> Vec<MemcpySummary> {
    let mut by_kind: HashMap<CopyKind, (u128, Vec<u64>)> = HashMap::new();
    for m in traces.iter().flat_map(|t| &t.memcpys) {
        let e = by_kind.entry(m.kind).or_default();
        e.0 += u128::from(m.bytes);
        e.1.push(duration(m.start_ns, m.end_ns));
    }
    let mut rows: Vec<MemcpySummary> = by_kind
        .into_iter()
        .map(|(kind, (bytes, mut durations))| {
            let s = Stats::of(&mut durations);
            MemcpySummary {
                kind,
                count: s.count,
                bytes: saturate(bytes),
                total_ns: s.total_ns(),
                mean_ns: s.mean,
                median_ns: s.median,
                min_ns: s.min,
                max_ns: s.max,
                // bytes per ns = GB/s.
                bandwidth_gbps: (s.total > 0).then(|| Hundredths::ratio(bytes, s.total)),
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then_with(|| a.kind.name().cmp(b.kind.name()))
    });
    rows
}

/// The memsets of every trace, together.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemsetSummary {
    /// Number of memsets.
    pub count: u64,
    /// Bytes set (saturates at `u64::MAX`).
    pub bytes: u64,
    /// Sum of the memsets' durations, ns (saturates at `u64::MAX`).
    pub total_ns: u64,
}

/// The memsets over all `traces`; `None` when there are none.
pub fn memset_summary(traces: &[Trace]) -> Option<MemsetSummary> {
    let (mut count, mut bytes, mut total) = (0u64, 0u128, 0u128);
    for s in traces.iter().flat_map(|t| &t.memsets) {
        count += 1;
        bytes += u128::from(s.bytes);
        total += u128::from(duration(s.start_ns, s.end_ns));
    }
    (count > 0).then(|| MemsetSummary {
        count,
        bytes: saturate(bytes),
        total_ns: saturate(total),
    })
}

/// How busy one device, or one stream of it, was in one traced process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Utilisation {
    /// The traced process (from its trace's header).
    pub pid: u32,
    /// The device id of the records.
    pub device: u32,
    /// The stream id; `None` for the row of the whole device (all its streams).
    pub stream: Option<u32>,
    /// GPU records (kernels, copies, memsets) on the device or stream.
    pub records: u64,
    /// The earliest start of those records, ns.
    pub start_ns: u64,
    /// The latest end of those records, ns.
    pub end_ns: u64,
    /// `end_ns - start_ns`.
    pub span_ns: u64,
    /// Length of the union of the records' intervals, ns: time when at least
    /// one of them ran.
    pub busy_ns: u64,
    /// `busy_ns / span_ns`, %, rounded half up (0.00 for an empty span).
    pub busy_percent: Hundredths,
    /// Idle gaps: stretches inside the span when none of the records ran.
    pub gaps: u64,
    /// Total length of the gaps: `span_ns - busy_ns`.
    pub idle_ns: u64,
}

/// The union of `intervals` (sorted in place): (busy ns, number of gaps
/// between the merged intervals). Touching intervals merge (no gap).
fn union(intervals: &mut [(u64, u64)]) -> (u64, u64) {
    intervals.sort_unstable();
    let mut busy = 0u64;
    let mut gaps = 0u64;
    let mut current: Option<(u64, u64)> = None;
    for &(start, end) in intervals.iter() {
        current = match current {
            Some((s, e)) if start <= e => Some((s, e.max(end))),
            Some((s, e)) => {
                busy = busy.saturating_add(e - s);
                gaps += 1;
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    if let Some((s, e)) = current {
        busy = busy.saturating_add(e - s);
    }
    (busy, gaps)
}

fn utilisation_row(
    pid: u32,
    device: u32,
    stream: Option<u32>,
    iv: &mut [(u64, u64)],
) -> Utilisation {
    let start_ns = iv.iter().map(|i| i.0).min().unwrap_or(0);
    let end_ns = iv.iter().map(|i| i.1).max().unwrap_or(0);
    let span_ns = end_ns - start_ns;
    let (busy_ns, gaps) = union(iv);
    Utilisation {
        pid,
        device,
        stream,
        records: iv.len() as u64,
        start_ns,
        end_ns,
        span_ns,
        busy_ns,
        busy_percent: Hundredths::percent(u128::from(busy_ns), u128::from(span_ns)),
        gaps,
        idle_ns: span_ns - busy_ns,
    }
}

/// Per traced process (in `traces` order), for each device (ascending): a row
/// for the device (`stream: None`), then one for each of its streams
/// (ascending). Processes are not merged: device and stream ids are each
/// process's own.
pub fn utilisation(traces: &[Trace]) -> Vec<Utilisation> {
    let mut rows = Vec::new();
    for trace in traces {
        // device → stream → intervals; an end before its start counts as the start.
        let mut by_device: BTreeMap<u32, BTreeMap<u32, Vec<(u64, u64)>>> = BTreeMap::new();
        let mut add = |device: u32, stream: u32, start: u64, end: u64| {
            by_device
                .entry(device)
                .or_default()
                .entry(stream)
                .or_default()
                .push((start, end.max(start)));
        };
        for k in &trace.kernels {
            add(k.device, k.stream, k.start_ns, k.end_ns);
        }
        for m in &trace.memcpys {
            add(m.device, m.stream, m.start_ns, m.end_ns);
        }
        for s in &trace.memsets {
            add(s.device, s.stream, s.start_ns, s.end_ns);
        }
        let pid = trace.header.pid;
        for (device, streams) in by_device {
            let mut all: Vec<(u64, u64)> = streams.values().flatten().copied().collect();
            rows.push(utilisation_row(pid, device, None, &mut all));
            for (stream, mut iv) in streams {
                rows.push(utilisation_row(pid, device, Some(stream), &mut iv));
            }
        }
    }
    rows
}

/// What kind of GPU work a record is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Activity {
    #[default]
    Kernel,
    Memcpy,
    Memset,
}

impl Activity {
    /// `kernel`, `memcpy` or `memset`.
    pub fn name(self) -> &'static str {
        match self {
            Activity::Kernel => "kernel",
            Activity::Memcpy => "memcpy",
            Activity::Memset => "memset",
        }
    }
}

/// The time from an API call's start to the start of the GPU work it caused.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaunchLatency {
    /// The traced process.
    pub pid: u32,
    pub activity: Activity,
    /// The kernel's demangled name; `memcpy KIND` (e.g. `memcpy HtoD`) for a
    /// copy; `memset` for a memset.
    pub name: String,
    /// The API function of the call (`function#ID` without a name).
    pub function: String,
    /// The correlation id linking the two.
    pub correlation: u64,
    /// When the API call was entered (host clock), ns.
    pub api_start_ns: u64,
    /// When the GPU work started (host clock), ns.
    pub gpu_start_ns: u64,
    /// `gpu_start_ns - api_start_ns`; negative if the clocks disagree.
    pub latency_ns: i64,
}

/// The launch-to-start latencies of `traces`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Latencies {
    /// GPU records matched with an API record.
    pub correlated: u64,
    /// The largest latencies, largest first (ties in trace and file order:
    /// kernels, then copies, then memsets).
    pub slowest: Vec<LaunchLatency>,
}

/// How many of the largest latencies the report lists.
pub const LATENCY_ROWS: usize = 10;

/// The `limit` largest launch-to-start latencies over all `traces`.
///
/// A kernel or copy is matched when it has [`FLAG_CORRELATED`] and its
/// `correlation` is that of an API record of the same trace. Memset records
/// carry no flags, so a memset is matched by a non-zero `correlation`.
pub fn launch_latency(traces: &[Trace], limit: usize) -> Latencies {
    // (latency, trace index, activity, record index, api record)
    let mut found: Vec<(i64, usize, Activity, usize, rtrace_format::ApiRecord)> = Vec::new();
    for (ti, trace) in traces.iter().enumerate() {
        let api: HashMap<u64, &rtrace_format::ApiRecord> = trace
            .threads
            .values()
            .flat_map(|t| &t.records)
            .map(|r| (r.correlation, r))
            .collect();
        let mut check = |activity, index, correlated: bool, correlation: u64, start: u64| {
            if !correlated {
                return;
            }
            if let Some(&r) = api.get(&correlation) {
                let latency = i128::from(start) - i128::from(r.start_ns);
                let latency = latency.clamp(i64::MIN.into(), i64::MAX.into()) as i64;
                found.push((latency, ti, activity, index, *r));
            }
        };
        for (i, k) in trace.kernels.iter().enumerate() {
            let flagged = k.flags & FLAG_CORRELATED != 0;
            check(Activity::Kernel, i, flagged, k.correlation, k.start_ns);
        }
        for (i, m) in trace.memcpys.iter().enumerate() {
            let flagged = u32::from(m.flags) & FLAG_CORRELATED != 0;
            check(Activity::Memcpy, i, flagged, m.correlation, m.start_ns);
        }
        for (i, s) in trace.memsets.iter().enumerate() {
            check(
                Activity::Memset,
                i,
                s.correlation != 0,
                s.correlation,
                s.start_ns,
            );
        }
    }
    let correlated = found.len() as u64;
    // Stable: equal latencies stay in trace and file order.
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    found.truncate(limit);
    let slowest = found
        .into_iter()
        .map(|(latency_ns, ti, activity, i, api)| {
            let trace = &traces[ti];
            let (name, gpu_start_ns) = match activity {
                Activity::Kernel => {
                    let k = &trace.kernels[i];
                    (trace.kernel_display_name(k.name), k.start_ns)
                }
                Activity::Memcpy => {
                    let m = &trace.memcpys[i];
                    (format!("memcpy {}", m.kind.name()), m.start_ns)
                }
                Activity::Memset => ("memset".to_string(), trace.memsets[i].start_ns),
            };
            LaunchLatency {
                pid: trace.header.pid,
                activity,
                name,
                function: trace.function_name(api.function).into_owned(),
                correlation: api.correlation,
                api_start_ns: api.start_ns,
                gpu_start_ns,
                latency_ns,
            }
        })
        .collect();
    Latencies {
        correlated,
        slowest,
    }
}

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
    #[derive(Default)]
    struct Acc {
        row: MemorySummary,
        bytes: u128,
        in_use: u128,
        peak: u128,
        /// (trace index, address) → bytes.
        live: HashMap<(usize, u64), u64>,
    }
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
    let mut by_kind: HashMap<MemoryKind, Acc> = HashMap::new();
    for (_, ti, i) in events {
        let m = &traces[ti].memory[i];
        let acc = by_kind.entry(m.kind).or_default();
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
    let mut rows: Vec<MemorySummary> = by_kind
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
/// query when it is linked to a query call (`function` of its API record).
fn sync_kind(kind: SyncKind, function: Option<&str>) -> &'static str {
    match (kind, function) {
        (SyncKind::StreamSynchronize, Some(f)) if f.starts_with("cuStreamQuery") => "stream query",
        (SyncKind::EventSynchronize, Some(f)) if f.starts_with("cuEventQuery") => "event query",
        (kind, _) => kind.name(),
    }
}

/// One row per kind of synchronization over all `traces`, sorted by total
/// wait (descending), ties by kind name.
pub fn sync_summary(traces: &[Trace]) -> Vec<SyncSummary> {
    let mut by_kind: HashMap<&'static str, Vec<u64>> = HashMap::new();
    for trace in traces {
        let functions: HashMap<u64, u32> = trace
            .threads
            .values()
            .flat_map(|t| &t.records)
            .map(|r| (r.correlation, r.function))
            .collect();
        for s in &trace.syncs {
            let function = (u32::from(s.flags) & FLAG_CORRELATED != 0)
                .then(|| functions.get(&s.correlation))
                .flatten()
                .and_then(|f| trace.functions.get(f));
            let kind = sync_kind(s.kind, function.map(String::as_str));
            by_kind.entry(kind).or_default().push(s.wait_ns());
        }
    }
    let mut rows: Vec<SyncSummary> = by_kind
        .into_iter()
        .map(|(kind, mut waits)| {
            let s = Stats::of(&mut waits);
            SyncSummary {
                kind,
                count: s.count,
                total_wait_ns: s.total_ns(),
                mean_wait_ns: s.mean,
                max_wait_ns: s.max,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.total_wait_ns
            .cmp(&a.total_wait_ns)
            .then_with(|| a.kind.cmp(b.kind))
    });
    rows
}

/// A device a trace describes (its DeviceInfo).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceRow {
    /// The traced process.
    pub pid: u32,
    /// The device ordinal (the `device` of the GPU records).
    pub ordinal: u32,
    pub name: String,
    /// `(major, minor)`; `None` when the trace does not say.
    pub compute_capability: Option<(i32, i32)>,
    /// Multiprocessors (SMs).
    pub multiprocessors: Option<i32>,
    /// Bytes.
    pub total_memory: u64,
    /// Peak SM clock, kHz.
    pub clock_khz: Option<i32>,
    /// Peak memory clock, kHz.
    pub memory_clock_khz: Option<i32>,
}

/// A context created while GPU activity was recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContextRow {
    pub pid: u32,
    pub context: u32,
    pub device: u32,
    /// Its NULL (legacy default) stream.
    pub null_stream: u32,
    /// The context it was made from (green contexts); 0 for none.
    pub parent_context: u32,
    pub is_green: bool,
    /// Green contexts: multiprocessors given to it.
    pub multiprocessors: u16,
    /// Stream, module and function records of the context.
    pub streams: u64,
    pub modules: u64,
    pub functions: u64,
}

/// A stream created while GPU activity was recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamRow {
    pub pid: u32,
    pub context: u32,
    pub stream: u32,
    pub flag: StreamFlag,
    /// Clamped to the device's range; lower is higher.
    pub priority: i32,
    /// The API function of the call that created it (with its context, for the NULL
    /// stream and the driver's own), when the record is linked to one of the trace.
    pub created_by: Option<String>,
    /// That call's correlation id.
    pub correlation: Option<u64>,
}

/// A module loaded while GPU activity was recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModuleRow {
    pub pid: u32,
    pub context: u32,
    pub module: u32,
    /// Size of its image, bytes.
    pub cubin_size: u64,
    /// When it was loaded (host clock), ns.
    pub timestamp_ns: u64,
    /// Its function records.
    pub functions: u64,
    /// The API function of the call that loaded it, when linked to one of the trace.
    pub loaded_by: Option<String>,
    /// That call's correlation id.
    pub correlation: Option<u64>,
}

/// A function (kernel) of a loaded module.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FunctionRow {
    pub pid: u32,
    pub context: u32,
    pub module: u32,
    /// The function's id.
    pub function: u32,
    /// Its symbol index in the module.
    pub index: u32,
    /// Its name, demangled ([`Trace::kernel_display_name`]).
    pub name: String,
}

/// The resources of the traced processes: devices, and the contexts, streams, modules and
/// functions created or loaded while GPU activity was recorded. Per process (in `traces`
/// order): devices by ordinal, the others in file order (the order they were made).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    pub devices: Vec<DeviceRow>,
    pub contexts: Vec<ContextRow>,
    pub streams: Vec<StreamRow>,
    pub modules: Vec<ModuleRow>,
    pub functions: Vec<FunctionRow>,
}

impl Resources {
    /// Nothing to show: no device and no resource record.
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
            && self.contexts.is_empty()
            && self.streams.is_empty()
            && self.modules.is_empty()
            && self.functions.is_empty()
    }
}

/// The resources of `traces` ([`Resources`]).
pub fn resources(traces: &[Trace]) -> Resources {
    let mut r = Resources::default();
    for t in traces {
        let pid = t.header.pid;
        let api: HashMap<u64, u32> = t
            .threads
            .values()
            .flat_map(|th| &th.records)
            .map(|a| (a.correlation, a.function))
            .collect();
        // The API function of a linked record, and its correlation id.
        let call = |flags: u8, correlation: u64| -> (Option<String>, Option<u64>) {
            if u32::from(flags) & FLAG_CORRELATED == 0 {
                return (None, None);
            }
            match api.get(&correlation) {
                Some(&f) => (Some(t.function_name(f).into_owned()), Some(correlation)),
                None => (None, None),
            }
        };
        for (&ordinal, d) in &t.devices {
            r.devices.push(DeviceRow {
                pid,
                ordinal,
                name: d.name.clone(),
                compute_capability: d.compute_capability(),
                multiprocessors: d.attribute(attr::MULTIPROCESSOR_COUNT),
                total_memory: d.total_memory,
                clock_khz: d.attribute(attr::CLOCK_RATE),
                memory_clock_khz: d.attribute(attr::MEMORY_CLOCK_RATE),
            });
        }
        for c in &t.contexts {
            let count = |n: usize| n as u64;
            r.contexts.push(ContextRow {
                pid,
                context: c.context,
                device: c.device,
                null_stream: c.null_stream,
                parent_context: c.parent_context,
                is_green: c.is_green,
                multiprocessors: c.num_multiprocessors,
                streams: count(t.streams.iter().filter(|s| s.context == c.context).count()),
                modules: count(t.modules.iter().filter(|m| m.context == c.context).count()),
                functions: count(
                    t.gpu_functions
                        .iter()
                        .filter(|f| f.context == c.context)
                        .count(),
                ),
            });
        }
        for s in &t.streams {
            let (created_by, correlation) = call(s.flags, s.correlation);
            r.streams.push(StreamRow {
                pid,
                context: s.context,
                stream: s.stream,
                flag: s.flag,
                priority: s.priority,
                created_by,
                correlation,
            });
        }
        for m in &t.modules {
            let (loaded_by, correlation) = call(m.flags, m.correlation);
            let functions = t.gpu_functions.iter().filter(|f| f.module == m.module);
            r.modules.push(ModuleRow {
                pid,
                context: m.context,
                module: m.module,
                cubin_size: m.cubin_size,
                timestamp_ns: m.timestamp_ns,
                functions: functions.count() as u64,
                loaded_by,
                correlation,
            });
        }
        let mut names: HashMap<u32, String> = HashMap::new();
        for f in &t.gpu_functions {
            let name = names
                .entry(f.name)
                .or_insert_with(|| t.kernel_display_name(f.name))
                .clone();
            r.functions.push(FunctionRow {
                pid,
                context: f.context,
                module: f.module,
                function: f.function,
                index: f.function_index,
                name,
            });
        }
    }
    r
}

/// Traces for the tests of the summaries and their rendering.
#[cfg(test)]
pub(crate) mod samples {
    use crate::model::Trace;
    use rtrace_format::{MemoryKind, MemoryOperation, MemoryRecord, SyncKind, SyncRecord, ID_NONE};

    /// One process: device allocations A (4096 B at 1000 ns), B (1 MiB at 2000), a pinned P
    /// (8192 at 2500), free A (3000), device C (4096 at 3500), free B (4000), free P (4500):
    /// C is never freed. Synchronizations: stream 1000-6000 and 7000-7100, context
    /// 8000-10000, event 11000-11500.
    pub fn memory_and_sync() -> Trace {
        use MemoryKind::{Device, Pinned};
        use MemoryOperation::{Alloc, Free};
        let mem = |operation, kind, timestamp_ns, address, bytes| MemoryRecord {
            timestamp_ns,
            address,
            bytes,
            operation,
            kind,
            stream: ID_NONE,
            ..Default::default()
        };
        let sync = |kind, start_ns, end_ns| SyncRecord {
            start_ns,
            end_ns,
            kind,
            stream: ID_NONE,
            event: ID_NONE,
            ..Default::default()
        };
        Trace {
            memory: vec![
                mem(Alloc, Device, 1_000, 0xA000, 4_096),
                mem(Alloc, Device, 2_000, 0xB000, 1 << 20),
                mem(Alloc, Pinned, 2_500, 0xF000, 8_192),
                mem(Free, Device, 3_000, 0xA000, 4_096),
                mem(Alloc, Device, 3_500, 0xC000, 4_096),
                mem(Free, Device, 4_000, 0xB000, 1 << 20),
                mem(Free, Pinned, 4_500, 0xF000, 8_192),
            ],
            syncs: vec![
                sync(SyncKind::StreamSynchronize, 1_000, 6_000),
                sync(SyncKind::StreamSynchronize, 7_000, 7_100),
                sync(SyncKind::ContextSynchronize, 8_000, 10_000),
                sync(SyncKind::EventSynchronize, 11_000, 11_500),
            ],
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtrace_format::MemoryRecord;

    #[test]
    fn hundredths_round_half_up() {
        assert_eq!(Hundredths::ratio(1, 3).to_string(), "0.33");
        assert_eq!(Hundredths::ratio(2, 3).to_string(), "0.67");
        assert_eq!(Hundredths::ratio(1, 200).to_string(), "0.01");
        assert_eq!(Hundredths::ratio(1, 201).to_string(), "0.00");
        assert_eq!(Hundredths::percent(3, 4).to_string(), "75.00");
        assert_eq!(Hundredths::percent(5, 0).to_string(), "0.00");
        assert_eq!(Hundredths(123_456).to_string(), "1234.56");
        assert_eq!(Hundredths(5).to_string(), "0.05");
    }

    #[test]
    fn stats_are_exact() {
        let s = Stats::of(&mut [40, 10, 30, 20]);
        assert_eq!(
            s,
            Stats {
                count: 4,
                total: 100,
                mean: 25,
                median: 20,
                min: 10,
                max: 40,
                // variance 125 → 11.18
                stddev: 11,
            }
        );
        assert_eq!(Stats::of(&mut [2, 4, 4, 4, 5, 5, 7, 9]).stddev, 2);
        assert_eq!(Stats::of(&mut [7]).stddev, 0);
        assert_eq!(Stats::of(&mut []), Stats::default());
        // Σx² overflows 128 bits: the floating-point fallback.
        let big = u64::MAX;
        let s = Stats::of(&mut [big, big, big, 0]);
        assert_eq!(s.total_ns(), u64::MAX);
        assert_eq!(s.stddev, (big as f64 * 3f64.sqrt() / 4.0) as u64);
    }

    #[test]
    fn union_merges_overlaps_and_touching() {
        assert_eq!(union(&mut []), (0, 0));
        assert_eq!(union(&mut [(10, 20)]), (10, 0));
        // 10-20 and 15-30 overlap, 30-35 touches, 40-50 after a gap, 42-45 inside.
        assert_eq!(
            union(&mut [(40, 50), (15, 30), (10, 20), (30, 35), (42, 45)]),
            (25 + 10, 1)
        );
        assert_eq!(union(&mut [(0, 1), (2, 3), (4, 5)]), (3, 2));
        assert_eq!(union(&mut [(5, 5), (5, 5)]), (0, 0));
    }

    fn mem(
        op: MemoryOperation,
        kind: MemoryKind,
        at: u64,
        address: u64,
        bytes: u64,
    ) -> MemoryRecord {
        MemoryRecord {
            timestamp_ns: at,
            address,
            bytes,
            operation: op,
            kind,
            stream: rtrace_format::ID_NONE,
            ..Default::default()
        }
    }

    #[test]
    fn memory_peak_follows_allocations_and_frees_by_address() {
        use MemoryKind::{Device, Managed, Pinned};
        use MemoryOperation::{Alloc, Free};
        // Device, in time order (file order differs): +100 @A, +50 @B, free A (-100),
        // +300 @C (peak 350), free B, free @X (allocated before tracing: no change),
        // +20 @A again; left in use: C and A = 320.
        let first = Trace {
            memory: vec![
                mem(Alloc, Device, 10, 0xA, 100),
                mem(Alloc, Device, 20, 0xB, 50),
                mem(Alloc, Device, 40, 0xC, 300),
                mem(Free, Device, 30, 0xA, 100),
                mem(Free, Device, 50, 0xB, 50),
                mem(Free, Device, 55, 0xF00, 999),
                mem(Alloc, Device, 60, 0xA, 20),
                mem(Alloc, Pinned, 15, 0xA, 4096),
                mem(Free, Pinned, 16, 0xA, 4096),
                mem(MemoryOperation::Unknown, Pinned, 17, 0xA, 7),
            ],
            ..Default::default()
        };
        // A second process on the same clock: device +200 @A at 35 (its own A), while the
        // first holds B (50) and C is not yet allocated: 250; at 40 the first's C makes 550.
        // Then an allocation at an address still in use replaces it (its free was lost).
        let second = Trace {
            memory: vec![
                mem(Alloc, Device, 35, 0xA, 200),
                mem(Alloc, Managed, 1, 0x10, 64),
                mem(Alloc, Managed, 2, 0x10, 32),
            ],
            ..Default::default()
        };
        let rows = memory_summary(&[first.clone(), second]);
        let row = |kind, allocations, frees, bytes, peak, largest, live| MemorySummary {
            kind,
            allocations,
            frees,
            bytes_allocated: bytes,
            peak_bytes: peak,
            largest_bytes: largest,
            live_bytes: live,
        };
        assert_eq!(
            rows,
            vec![
                row(Pinned, 1, 1, 4096, 4096, 4096, 0),
                row(Device, 5, 3, 670, 550, 300, 520),
                row(Managed, 2, 0, 96, 64, 64, 32),
            ]
        );
        // The first process alone.
        assert_eq!(
            memory_summary(&[first])[1],
            row(Device, 4, 3, 470, 350, 300, 320)
        );
        assert!(memory_summary(&[]).is_empty());
    }

    #[test]
    fn sync_waits_by_kind_and_queries_by_their_call() {
        use rtrace_format::{ApiRecord, SyncRecord};
        let sync = |kind, start, end, correlation: u64| SyncRecord {
            correlation,
            start_ns: start,
            end_ns: end,
            kind,
            flags: if correlation != 0 {
                FLAG_CORRELATED as u8
            } else {
                0
            },
            ..Default::default()
        };
        let mut t = Trace {
            syncs: vec![
                sync(SyncKind::StreamSynchronize, 100, 1_100, 1),
                sync(SyncKind::StreamSynchronize, 2_000, 2_500, 2),
                sync(SyncKind::StreamSynchronize, 3_000, 3_000, 0),
                sync(SyncKind::StreamSynchronize, 4_000, 4_010, 3),
                sync(SyncKind::EventSynchronize, 5_000, 9_000, 4),
                sync(SyncKind::EventSynchronize, 9_000, 9_001, 5),
                sync(SyncKind::ContextSynchronize, 10_000, 10_300, 6),
                sync(SyncKind::StreamWaitEvent, 11_000, 11_000, 7),
                // An end before the start counts as no wait.
                sync(SyncKind::ContextSynchronize, 12_000, 11_000, 0),
            ],
            ..Default::default()
        };
        t.functions = [
            (0, "cuStreamSynchronize"),
            (1, "cuStreamQuery"),
            (2, "cuEventSynchronize"),
            (3, "cuEventQuery"),
            (4, "cuCtxSynchronize"),
            (5, "cuStreamWaitEvent"),
        ]
        .into_iter()
        .map(|(id, n)| (id, n.to_string()))
        .collect();
        let api = |function, correlation| ApiRecord {
            function,
            correlation,
            ..Default::default()
        };
        t.threads.insert(
            1,
            crate::model::ThreadTrace {
                tid: 1,
                records: vec![
                    api(0, 1),
                    api(0, 2),
                    api(1, 3),
                    api(2, 4),
                    api(3, 5),
                    api(4, 6),
                    api(5, 7),
                ],
                ..Default::default()
            },
        );
        let row = |kind, count, total, mean, max| SyncSummary {
            kind,
            count,
            total_wait_ns: total,
            mean_wait_ns: mean,
            max_wait_ns: max,
        };
        assert_eq!(
            sync_summary(std::slice::from_ref(&t)),
            vec![
                row("event synchronize", 1, 4_000, 4_000, 4_000),
                row("stream synchronize", 3, 1_500, 500, 1_000),
                row("context synchronize", 2, 300, 150, 300),
                row("stream query", 1, 10, 10, 10),
                row("event query", 1, 1, 1, 1),
                row("stream wait event", 1, 0, 0, 0),
            ]
        );
        assert!(sync_summary(&[]).is_empty());
    }
}
