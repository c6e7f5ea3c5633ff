//! What the summaries here share: exact hundredths ([`Hundredths`]), duration statistics
//! ([`Stats`]), the rows of utilisation and launch latency, and small helpers.

pub(super) use crate::model::Trace;
pub(super) use rtrace_format::{
    attr, CopyKind, MemoryKind, MemoryOperation, MemoryRecord, StreamFlag, SyncKind, SyncRecord,
    FLAG_CORRELATED,
};
pub(super) use std::collections::{BTreeMap, HashMap};
pub(super) use std::fmt;

/// A non-negative number with two decimals, held exactly as hundredths:
/// `Hundredths(7550)` is 75.50 and displays as `75.50`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hundredths(pub u64);

impl Hundredths {
    /// `num / den`, in hundredths, rounded half up (`den` must not be 0).
    pub(crate) fn ratio(num: u128, den: u128) -> Hundredths {
        let h = (num.saturating_mul(100).saturating_add(den / 2)) / den;
        Hundredths(u64::try_from(h).unwrap_or(u64::MAX))
    }

    /// `part / whole` as a percentage; 0.00 when `whole` is 0.
    pub(crate) fn percent(part: u128, whole: u128) -> Hundredths {
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

/// Count, total, mean, median, min, max and sample standard deviation of a set of
/// durations (ns), as `nsys stats` gives them: the median of an even count is the mean of the
/// two middle values; mean and median are rounded down to a whole ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stats {
    pub(crate) count: u64,
    /// The exact sum (the summaries saturate it at `u64::MAX`).
    pub(crate) total: u128,
    pub(crate) mean: u64,
    pub(crate) median: u64,
    pub(crate) min: u64,
    pub(crate) max: u64,
    pub(crate) stddev: u64,
}

impl Stats {
    /// Statistics of `d` (sorted in place); all zero when it is empty.
    pub(crate) fn of(d: &mut [u64]) -> Stats {
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
            median: middle_mean(d[(d.len() - 1) / 2], d[d.len() / 2]),
            min: d[0],
            max: d[d.len() - 1],
            stddev: super::squares::slice_stddev(d, total),
        }
    }

    pub(crate) fn total_ns(&self) -> u64 {
        saturate(self.total)
    }
}

pub(crate) fn saturate(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// The median of an odd count's middle value `a` or an even count's two, `a` and `b`: their
/// mean, rounded down.
pub(super) fn middle_mean(a: u64, b: u64) -> u64 {
    ((u128::from(a) + u128::from(b)) / 2) as u64
}

pub(super) fn duration(start_ns: u64, end_ns: u64) -> u64 {
    end_ns.saturating_sub(start_ns)
}

/// Whether a record with these flags (a stream's, module's, allocation's or
/// synchronization's) is linked to the API call with its correlation id.
pub(crate) fn linked(flags: u8) -> bool {
    u32::from(flags) & FLAG_CORRELATED != 0
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
