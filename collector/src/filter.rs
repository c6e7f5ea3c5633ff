//! What `rtrace report` and `rtrace export` keep of the traces they read: a time window,
//! processes, devices, streams and a kernel-name regular expression.
//!
//! - The window is relative to the earliest process start among the inputs (their start
//!   anchors): a record is kept when it starts at or after `from` and before `to`. API records,
//!   kernels, copies, memsets, allocations and frees, synchronizations, and NVTX ranges (whole,
//!   by their start), marks and external ids are windowed; resources (contexts, streams,
//!   modules, functions), devices and NVTX names are kept.
//! - Processes: only the traces of these process ids.
//! - Devices and streams: GPU records (kernels, copies, memsets; allocations and frees by
//!   device; synchronizations by stream) on those; API records stay, as they have neither.
//! - Kernels: only kernels whose demangled or mangled name matches; copies and memsets stay.

use crate::model::Trace;
use crate::read::inputs::LoadError;
use regex::Regex;
use rtrace_format::{
    ApiRecord, KernelRecord, MemcpyRecord, MemoryRecord, MemsetRecord, SyncRecord,
};
use std::collections::HashMap;
use std::fmt;

/// A filter; the default keeps everything.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Start of the window, ns after the earliest process start.
    pub from_ns: Option<u64>,
    /// End of the window (exclusive), ns after the earliest process start.
    pub to_ns: Option<u64>,
    pub pids: Vec<u32>,
    pub devices: Vec<u32>,
    pub streams: Vec<u32>,
    pub kernel: Option<Regex>,
}

impl Filter {
    /// Whether it keeps everything.
    pub fn is_empty(&self) -> bool {
        self.from_ns.is_none()
            && self.to_ns.is_none()
            && self.pids.is_empty()
            && self.devices.is_empty()
            && self.streams.is_empty()
            && self.kernel.is_none()
    }

    /// Whether the trace of process `pid` is kept.
    pub fn keeps_process(&self, pid: u32) -> bool {
        self.pids.is_empty() || self.pids.contains(&pid)
    }

    /// Removes from `t` what the filter does not keep; `base_ns` is the earliest process start
    /// (`CLOCK_MONOTONIC`) among the inputs, which the window is relative to.
    pub fn apply(&self, t: &mut Trace, base_ns: u64) {
        let from = self.from_ns.map_or(0, |f| base_ns.saturating_add(f));
        let to = self.to_ns.map_or(u64::MAX, |v| base_ns.saturating_add(v));
        let in_window = |start: u64| in_window(start, (from, to));
        let device = |d: u32| self.devices.is_empty() || self.devices.contains(&d);
        let stream = |s: u32| self.streams.is_empty() || self.streams.contains(&s);
        for th in t.threads.values_mut() {
            th.records.retain(|r| in_window(r.start_ns));
        }
        if self.from_ns.is_some() || self.to_ns.is_some() {
            window_nvtx(t, &in_window);
        }
        let names = self.kernel.as_ref().map(|re| {
            let mut keep = std::collections::HashMap::new();
            for k in &t.kernels {
                keep.entry(k.name).or_insert_with(|| {
                    re.is_match(&t.kernel_display_name(k.name))
                        || re.is_match(&t.kernel_name(k.name))
                });
            }
            keep
        });
        t.kernels.retain(|k| {
            in_window(k.start_ns)
                && device(k.device)
                && stream(k.stream)
                && names.as_ref().is_none_or(|n| n.get(&k.name) == Some(&true))
        });
        t.memcpys
            .retain(|c| in_window(c.start_ns) && device(c.device) && stream(c.stream));
        t.peer_copies.retain(|p| {
            in_window(p.copy.start_ns) && device(p.copy.device) && stream(p.copy.stream)
        });
        t.memsets
            .retain(|m| in_window(m.start_ns) && device(m.device) && stream(m.stream));
        t.memory
            .retain(|m| in_window(m.timestamp_ns) && device(m.device));
        t.syncs
            .retain(|s| in_window(s.start_ns) && (self.streams.is_empty() || stream(s.stream)));
    }
}

/// Whether a record starting at `time` is in the window `from..to`; `to` = `u64::MAX` is no
/// end (no `--to`), so that a record starting at `u64::MAX` is kept too.
#[inline]
pub fn in_window(time: u64, (from, to): (u64, u64)) -> bool {
    time >= from && (time < to || to == u64::MAX)
}

/// Keeps the NVTX ranges that begin in the window, whole (a kept push keeps its pop, a kept
/// start its end, wherever they fall), the marks in it, and every name and domain.
fn window_nvtx(t: &mut Trace, in_window: &impl Fn(u64) -> bool) {
    use rtrace_format::NvtxKind;
    use std::collections::{HashMap, HashSet};
    // Start/end ranges kept, by id: decided by their start, on any thread.
    let started: HashSet<u64> = t
        .threads
        .values()
        .flat_map(|th| th.nvtx.iter())
        .filter(|e| e.kind == NvtxKind::Start && in_window(e.time_ns))
        .map(|e| e.value)
        .collect();
    for th in t.threads.values_mut() {
        // Push/pop by domain and level, external ids by kind: a pop keeps what its push kept.
        let mut stacks: HashMap<(bool, u32), Vec<(u64, bool)>> = HashMap::new();
        th.nvtx.retain(|e| match e.kind {
            k if k == NvtxKind::Push || k.is_external_push() => {
                let keep = in_window(e.time_ns);
                let key = (e.kind == NvtxKind::Push, stack_key(e));
                stacks.entry(key).or_default().push((e.value, keep));
                keep
            }
            NvtxKind::Pop => {
                let Some(stack) = stacks.get_mut(&(true, e.domain)) else {
                    return false;
                };
                match rtrace_format::pop_matches(stack, e.value) {
                    Some(at) => stack.drain(at..).next().is_some_and(|(_, keep)| keep),
                    None => false,
                }
            }
            NvtxKind::ExternalPop => stacks
                .get_mut(&(false, e.category))
                .and_then(Vec::pop)
                .is_some_and(|(_, keep)| keep),
            NvtxKind::Start | NvtxKind::End => started.contains(&e.value),
            NvtxKind::Mark => in_window(e.time_ns),
            _ => true,
        });
    }
}

/// What a push and its pop share: the domain of an NVTX range, the kind of an external id.
fn stack_key(e: &rtrace_format::NvtxEvent) -> u32 {
    use rtrace_format::NvtxKind;
    match e.kind {
        k if k.is_external_push() || k == NvtxKind::ExternalPop => e.category,
        _ => e.domain,
    }
}

/// Applies `filter` to `traces`: drops the traces of other processes, then windows and
/// filters the rest, relative to the earliest process start among all of them. Fails when no
/// trace is of a process asked for.
pub fn apply_all(filter: &Filter, traces: &mut Vec<Trace>) -> Result<(), String> {
    let base = earliest_start(traces.iter().map(|t| t.header.start.monotonic_ns));
    if !filter.pids.is_empty() {
        let all: Vec<String> = traces.iter().map(|t| t.header.pid.to_string()).collect();
        traces.retain(|t| filter.keeps_process(t.header.pid));
        if traces.is_empty() {
            return Err(format!(
                "no trace of process {} among the inputs (their processes: {})",
                filter
                    .pids
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                all.join(", ")
            ));
        }
    }
    for t in traces.iter_mut() {
        filter.apply(t, base);
    }
    Ok(())
}

/// The process id and start (`CLOCK_MONOTONIC`, ns) of each trace file, from its header alone.
pub fn process_starts(files: &[std::path::PathBuf]) -> Result<Vec<(u32, u64)>, LoadError> {
    Ok(read_headers(files)?
        .iter()
        .map(|h| (h.pid, h.start.monotonic_ns))
        .collect())
}

/// The header of each trace file, read alone.
pub fn read_headers(
    files: &[std::path::PathBuf],
) -> Result<Vec<rtrace_format::ProcessHeader>, LoadError> {
    let mut out = Vec::with_capacity(files.len());
    for path in files {
        let file = std::fs::File::open(path).map_err(|error| LoadError::Io {
            path: path.clone(),
            error,
        })?;
        out.push(crate::read::inputs::read_header(path, file)?);
    }
    Ok(out)
}

/// The earliest of process start times (`CLOCK_MONOTONIC`, ns); 0 without any. A start of 0
/// (unknown) is passed over.
pub fn earliest_start(starts: impl IntoIterator<Item = u64>) -> u64 {
    starts.into_iter().filter(|&s| s != 0).min().unwrap_or(0)
}

/// The filter in words, for the report's header: `from 1 s to 2.5 s, processes 4242, ...`.
impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        let secs = |ns: u64| format_seconds(ns);
        match (self.from_ns, self.to_ns) {
            (Some(a), Some(b)) => parts.push(format!("from {} to {}", secs(a), secs(b))),
            (Some(a), None) => parts.push(format!("from {}", secs(a))),
            (None, Some(b)) => parts.push(format!("to {}", secs(b))),
            (None, None) => {}
        }
        let list = |what: &str, v: &[u32]| {
            let ids: Vec<String> = v.iter().map(u32::to_string).collect();
            format!("{what} {}", ids.join(", "))
        };
        if !self.pids.is_empty() {
            parts.push(list("processes", &self.pids));
        }
        if !self.devices.is_empty() {
            parts.push(list("devices", &self.devices));
        }
        if !self.streams.is_empty() {
            parts.push(list("streams", &self.streams));
        }
        if let Some(re) = &self.kernel {
            parts.push(format!("kernels matching /{}/", re.as_str()));
        }
        if parts.is_empty() {
            return f.write_str("none");
        }
        f.write_str(&parts.join(", "))
    }
}

/// `ns` as seconds, as short as exact to the nanosecond: `1 s`, `2.5 s`, `0.000001 s`.
pub fn format_seconds(ns: u64) -> String {
    let (s, frac) = (ns / 1_000_000_000, ns % 1_000_000_000);
    if frac == 0 {
        return format!("{s} s");
    }
    let f = format!("{frac:09}");
    format!("{s}.{} s", f.trim_end_matches('0'))
}

/// Parses a time offset: a number with an optional unit (`s`, `ms`, `us`, `ns`; none means
/// seconds), e.g. `2`, `1.5s`, `250ms`, `30us`, `1500ns` ([`rtrace_format::parse_time`]).
pub fn parse_time(s: &str) -> Result<u64, String> {
    rtrace_format::parse_time(s)
}

/// Parses a kernel-name regular expression.
pub fn parse_regex(s: &str) -> Result<Regex, String> {
    Regex::new(s).map_err(|e| format!("not a regular expression: {e}"))
}

/// What a [`Filter`] keeps of single records as they are read (what [`Filter::apply`] keeps
/// of a trace held whole), after the trace's clock shift, applied first.
pub struct RecordFilter<'a> {
    shift: i64,
    from: u64,
    to: u64,
    filter: &'a Filter,
    /// Kernel name id → kept, when the filter has a kernel regex.
    names: Option<HashMap<u32, bool>>,
}

impl<'a> RecordFilter<'a> {
    /// What `filter` keeps of a trace whose times are shifted by `shift` ns: records
    /// starting in `from..to`; `names`: kernel name id → kept, when it has a kernel regex.
    pub fn new(
        shift: i64,
        from: u64,
        to: u64,
        filter: &'a Filter,
        names: Option<HashMap<u32, bool>>,
    ) -> RecordFilter<'a> {
        RecordFilter {
            shift,
            from,
            to,
            filter,
            names,
        }
    }

    /// Whether it keeps every record as it is (no shift, no window, no device, stream or
    /// kernel filter): then each of its record methods returns the record given.
    pub fn keeps_all(&self) -> bool {
        self.shift == 0
            && self.from == 0
            && self.to == u64::MAX
            && self.filter.devices.is_empty()
            && self.filter.streams.is_empty()
            && self.names.is_none()
    }

    /// The records of `records` that `keep` (one of its record methods) keeps, as it gives
    /// them, in place; `records` themselves when it keeps every one ([`Self::keeps_all`]).
    #[inline]
    pub fn kept<T>(&self, records: Vec<T>, keep: impl Fn(&Self, T) -> Option<T>) -> Vec<T> {
        if self.keeps_all() {
            records
        } else {
            records.into_iter().filter_map(|r| keep(self, r)).collect()
        }
    }

    #[inline]
    pub fn time(&self, t: u64) -> u64 {
        if self.shift == 0 {
            t
        } else {
            crate::clocks::shifted(t, self.shift)
        }
    }
    #[inline]
    fn window(&self, start: u64) -> bool {
        in_window(start, (self.from, self.to))
    }
    /// The (shifted) times a record must start in to be kept.
    pub fn window_range(&self) -> (u64, u64) {
        (self.from, self.to)
    }
    #[inline]
    fn place(&self, device: u32, stream: u32) -> bool {
        (self.filter.devices.is_empty() || self.filter.devices.contains(&device))
            && (self.filter.streams.is_empty() || self.filter.streams.contains(&stream))
    }
    #[inline(always)]
    pub fn api(&self, mut r: ApiRecord) -> Option<ApiRecord> {
        r.start_ns = self.time(r.start_ns);
        r.end_ns = self.time(r.end_ns);
        self.window(r.start_ns).then_some(r)
    }
    #[inline(always)]
    pub fn kernel(&self, mut k: KernelRecord) -> Option<KernelRecord> {
        k.start_ns = self.time(k.start_ns);
        k.end_ns = self.time(k.end_ns);
        let named = self
            .names
            .as_ref()
            .is_none_or(|n| n.get(&k.name) == Some(&true));
        (self.window(k.start_ns) && self.place(k.device, k.stream) && named).then_some(k)
    }
    #[inline(always)]
    pub fn memcpy(&self, mut m: MemcpyRecord) -> Option<MemcpyRecord> {
        m.start_ns = self.time(m.start_ns);
        m.end_ns = self.time(m.end_ns);
        (self.window(m.start_ns) && self.place(m.device, m.stream)).then_some(m)
    }
    #[inline(always)]
    pub fn memset(&self, mut s: MemsetRecord) -> Option<MemsetRecord> {
        s.start_ns = self.time(s.start_ns);
        s.end_ns = self.time(s.end_ns);
        (self.window(s.start_ns) && self.place(s.device, s.stream)).then_some(s)
    }
    /// An allocation or free: kept by its time and device (streams do not apply).
    #[inline]
    pub fn memory(&self, mut m: MemoryRecord) -> Option<MemoryRecord> {
        m.timestamp_ns = self.time(m.timestamp_ns);
        let device = self.filter.devices.is_empty() || self.filter.devices.contains(&m.device);
        (self.window(m.timestamp_ns) && device).then_some(m)
    }
    /// A synchronization: kept by its start and stream (devices do not apply).
    #[inline]
    pub fn sync(&self, mut y: SyncRecord) -> Option<SyncRecord> {
        y.start_ns = self.time(y.start_ns);
        y.end_ns = self.time(y.end_ns);
        let stream = self.filter.streams.is_empty() || self.filter.streams.contains(&y.stream);
        (self.window(y.start_ns) && stream).then_some(y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_exactly() {
        assert_eq!(parse_time("2"), Ok(2_000_000_000));
        assert_eq!(parse_time("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_time("250ms"), Ok(250_000_000));
        assert_eq!(parse_time("0.25 ms"), Ok(250_000));
        assert_eq!(parse_time("30us"), Ok(30_000));
        assert_eq!(parse_time("30µs"), Ok(30_000));
        assert_eq!(parse_time("1500ns"), Ok(1_500));
        assert_eq!(parse_time(".5"), Ok(500_000_000));
        assert_eq!(parse_time("1.0000000019"), Ok(1_000_000_001));
        assert!(parse_time("-1").is_err());
        assert!(parse_time("1.5x").is_err());
        assert!(parse_time("").is_err());
        assert!(parse_time("s").is_err());
        assert!(parse_time("99999999999999999999").is_err());
    }

    #[test]
    fn seconds_are_written_exactly() {
        assert_eq!(format_seconds(2_000_000_000), "2 s");
        assert_eq!(format_seconds(1_500_000_000), "1.5 s");
        assert_eq!(format_seconds(1_000), "0.000001 s");
    }

    #[test]
    fn the_filter_says_what_it_keeps() {
        let f = Filter {
            from_ns: Some(1_000_000_000),
            to_ns: Some(2_500_000_000),
            pids: vec![42, 43],
            devices: vec![1],
            streams: vec![13],
            kernel: Some(parse_regex("gemm|conv").unwrap()),
        };
        assert_eq!(
            f.to_string(),
            "from 1 s to 2.5 s, processes 42, 43, devices 1, streams 13, kernels matching /gemm|conv/"
        );
        assert_eq!(Filter::default().to_string(), "none");
        assert!(Filter::default().is_empty());
        assert!(parse_regex("(").is_err());
    }
}
