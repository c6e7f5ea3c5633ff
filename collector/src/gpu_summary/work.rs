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
    /// The middle duration; for an even count, the mean of the two middle ones, rounded down.
    pub median_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    /// Sample standard deviation (n − 1) of the durations, ns, rounded down.
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

/// The sizes of a set of memory operations, bytes: `nsys stats`' `cuda_gpu_mem_size_sum`
/// columns beside the total ([`Stats`] of the sizes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SizeStats {
    /// Mean size, rounded down.
    pub mean_bytes: u64,
    /// The middle size; the mean of the two middle ones for an even count, rounded down.
    pub median_bytes: u64,
    pub min_bytes: u64,
    pub max_bytes: u64,
    /// Sample standard deviation, rounded down.
    pub stddev_bytes: u64,
}

impl SizeStats {
    pub(crate) fn new(s: &Stats) -> SizeStats {
        SizeStats {
            mean_bytes: s.mean,
            median_bytes: s.median,
            min_bytes: s.min,
            max_bytes: s.max,
            stddev_bytes: s.stddev,
        }
    }
}

/// Statistics for one direction of memory copy, merged over every trace: the columns of
/// `nsys stats`' `cuda_gpu_mem_time_sum` and `cuda_gpu_mem_size_sum`, and the bandwidth.
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
    /// The middle duration; for an even count, the mean of the two middle ones, rounded down.
    pub median_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    /// Sample standard deviation of the durations, rounded down.
    pub stddev_ns: u64,
    /// This kind's share of the time of every copy and memset, percent.
    pub share_percent: Hundredths,
    /// The copies' sizes.
    pub size: SizeStats,
    /// `bytes / total_ns` in GB/s (10⁹ bytes per second), rounded half up;
    /// `None` when the total time is 0.
    pub bandwidth_gbps: Option<Hundredths>,
}

impl MemcpySummary {
    /// The row of copies of `kind` whose durations are `d` and sizes `size`; `all`: the time
    /// of every copy and memset.
    pub(crate) fn new(kind: CopyKind, d: &Stats, size: &Stats, all: u128) -> MemcpySummary {
        MemcpySummary {
            kind,
            count: d.count,
            bytes: saturate(size.total),
            total_ns: d.total_ns(),
            mean_ns: d.mean,
            median_ns: d.median,
            min_ns: d.min,
            max_ns: d.max,
            stddev_ns: d.stddev,
            share_percent: Hundredths::percent(d.total, all),
            size: SizeStats::new(size),
            // bytes per ns = GB/s.
            bandwidth_gbps: (d.total > 0).then(|| Hundredths::ratio(size.total, d.total)),
        }
    }
}

/// Copy rows in the report's order: the most time first, then by kind name.
pub(crate) fn ranked_memcpys(mut rows: Vec<MemcpySummary>) -> Vec<MemcpySummary> {
    rows.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then_with(|| a.kind.name().cmp(b.kind.name()))
    });
    rows
}

/// One row per copy kind over all `traces`, sorted by total time
/// (descending), ties by kind name.
pub fn memcpy_summary(traces: &[Trace]) -> Vec<MemcpySummary> {
    let mut by_kind: HashMap<CopyKind, (Vec<u64>, Vec<u64>)> = HashMap::new();
    for m in traces.iter().flat_map(|t| &t.memcpys) {
        let e = by_kind.entry(m.kind).or_default();
        e.0.push(duration(m.start_ns, m.end_ns));
        e.1.push(m.bytes);
    }
    let all = memory_op_time(traces);
    let rows = by_kind
        .into_iter()
        .map(|(kind, (mut durations, mut sizes))| {
            MemcpySummary::new(
                kind,
                &Stats::of(&mut durations),
                &Stats::of(&mut sizes),
                all,
            )
        })
        .collect();
    ranked_memcpys(rows)
}

/// The time of every copy and memset of `traces`.
fn memory_op_time(traces: &[Trace]) -> u128 {
    let copies = traces.iter().flat_map(|t| &t.memcpys);
    let memsets = traces.iter().flat_map(|t| &t.memsets);
    copies
        .map(|m| duration(m.start_ns, m.end_ns))
        .chain(memsets.map(|m| duration(m.start_ns, m.end_ns)))
        .map(u128::from)
        .sum()
}

/// The memsets of every trace, together: the columns of a `[CUDA memset]` row of
/// `nsys stats`' `cuda_gpu_mem_time_sum` and `cuda_gpu_mem_size_sum`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemsetSummary {
    /// Number of memsets.
    pub count: u64,
    /// Bytes set (saturates at `u64::MAX`).
    pub bytes: u64,
    /// Sum of the memsets' durations, ns (saturates at `u64::MAX`).
    pub total_ns: u64,
    /// `total_ns / count`, rounded down.
    pub mean_ns: u64,
    /// The middle duration; for an even count, the mean of the two middle ones, rounded down.
    pub median_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    /// Sample standard deviation of the durations, rounded down.
    pub stddev_ns: u64,
    /// The memsets' share of the time of every copy and memset, percent.
    pub share_percent: Hundredths,
    /// The memsets' sizes.
    pub size: SizeStats,
}

impl MemsetSummary {
    /// The memsets whose durations are `d` and sizes `size`; `all`: the time of every copy
    /// and memset. `None` without memsets.
    pub(crate) fn new(d: &Stats, size: &Stats, all: u128) -> Option<MemsetSummary> {
        (d.count > 0).then(|| MemsetSummary {
            count: d.count,
            bytes: saturate(size.total),
            total_ns: d.total_ns(),
            mean_ns: d.mean,
            median_ns: d.median,
            min_ns: d.min,
            max_ns: d.max,
            stddev_ns: d.stddev,
            share_percent: Hundredths::percent(d.total, all),
            size: SizeStats::new(size),
        })
    }
}

/// The memsets over all `traces`; `None` when there are none.
pub fn memset_summary(traces: &[Trace]) -> Option<MemsetSummary> {
    let (mut durations, mut sizes) = (Vec::new(), Vec::new());
    for s in traces.iter().flat_map(|t| &t.memsets) {
        durations.push(duration(s.start_ns, s.end_ns));
        sizes.push(s.bytes);
    }
    MemsetSummary::new(
        &Stats::of(&mut durations),
        &Stats::of(&mut sizes),
        memory_op_time(traces),
    )
}
