//! Kernels, memory copies and memsets: per-name and per-kind statistics.

use super::common::*;

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
    let rows = by_name
        .into_iter()
        .map(|(name, mut acc)| {
            let s = Stats::of(&mut acc.durations);
            KernelSummary::new(name, &s, all, acc.launch.filter(|_| acc.uniform))
        })
        .collect();
    ranked_kernels(rows)
}

impl KernelSummary {
    /// Kernel `name`'s row from its durations' statistics `s`, `all` being every kernel's time
    /// (ns); `launch`: the grid and block every launch had, `None` when they varied.
    pub(crate) fn new(
        name: String,
        s: &Stats,
        all: u128,
        launch: Option<([i32; 3], [i32; 3])>,
    ) -> KernelSummary {
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
            grid_block: match launch {
                Some((grid, block)) => grid_block(grid, block),
                None => "various".to_string(),
            },
        }
    }
}

/// Kernel rows in the report's order: the most time first, then by name.
pub fn ranked_kernels(mut rows: Vec<KernelSummary>) -> Vec<KernelSummary> {
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
