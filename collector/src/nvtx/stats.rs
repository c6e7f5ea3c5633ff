//! What NVTX ranges are and add up to: a range ([`NvtxRange`]), the statistics of the ranges
//! of one name ([`RangeAcc`], [`NvtxStats`]) and of external ids ([`ExternalSummary`]), and
//! what a [`super::Projector`] keeps ([`Mode`]) and worked out for one trace ([`Projected`]).

use crate::gpu_summary::dist::Dist;
use crate::model::Trace;
use rtrace_format::NvtxKind;
use std::collections::HashMap;

/// What a [`super::Projector`] keeps of the ranges that are over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Their statistics per name.
    Summary,
    /// Their statistics, and the ranges themselves ([`super::ranges`]).
    Collect,
    /// Their statistics, and what a timeline shows of them ([`Shown`]).
    Tracks,
    /// Only their durations, handed out as they end (a selection pass: no API or GPU records
    /// are given).
    Durations,
}

/// One NVTX range that began and ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvtxRange {
    pub pid: u32,
    /// The thread it began on, and the one it ended on (differ only for start/end ranges).
    pub tid: u64,
    pub end_tid: u64,
    pub domain: String,
    pub name: String,
    pub category: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Push/pop ranges: nesting level on its thread and domain, from 0; start/end: `None`.
    pub level: Option<u64>,
    /// GPU records launched by the calls of `tid` inside the range, and their total duration.
    pub gpu_records: u64,
    pub gpu_ns: u64,
    /// Where that work ran: (device of the first record, first start, last end).
    pub gpu_span: Option<(u32, u64, u64)>,
    /// Of that work, what calls made while this was the innermost range on the thread launched
    /// (NVTX ranges as external correlation: each call is linked to its innermost range).
    pub own_gpu_records: u64,
    pub own_gpu_ns: u64,
    /// The process view (docs/nvtx.md, "Which thread's work"): that work and the work other
    /// threads launched while it was open, credited to it; where it ran; and of it, what came
    /// while this was the innermost range (of its domain, for other threads' launches).
    pub process_gpu_records: u64,
    pub process_gpu_ns: u64,
    pub process_gpu_span: Option<(u32, u64, u64)>,
    pub process_own_gpu_records: u64,
    pub process_own_gpu_ns: u64,
}

/// The ranges of a trace, in order of their start, and how many began but never ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ranges {
    pub ranges: Vec<NvtxRange>,
    pub open: u64,
    pub marks: u64,
}

/// The display name of a string id of `t` (0: none).
pub(super) fn text(t: &Trace, id: u32, none: &str) -> String {
    if id == 0 {
        return none.to_string();
    }
    t.nvtx_strings
        .get(&id)
        .cloned()
        .unwrap_or_else(|| format!("string#{id}"))
}

/// The name of NVTX string `id` of `t` as a range's name (`(unnamed)` for none).
pub fn range_name(t: &Trace, id: u32) -> String {
    text(t, id, "(unnamed)")
}

pub(super) fn sort(ranges: &mut [NvtxRange]) {
    ranges.sort_by(|a, b| (a.start_ns, a.tid, &a.name).cmp(&(b.start_ns, b.tid, &b.name)));
}

/// The domains `nvtxDomainCreate` named in `t`, by id.
pub(super) fn domain_names(t: &Trace) -> HashMap<u32, String> {
    let mut domains = HashMap::new();
    for th in t.threads.values() {
        for e in &th.nvtx {
            if e.kind == NvtxKind::DomainCreate {
                domains.insert(e.domain, text(t, e.message, "(unnamed domain)"));
            }
        }
    }
    domains
}

/// Statistics of the ranges of one name in one domain, over every trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NvtxSummary {
    pub domain: String,
    pub name: String,
    pub count: u64,
    pub total_ns: u64,
    pub mean_ns: u64,
    /// The middle duration (the mean of the two middle ones for an even count, rounded down).
    pub median_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    /// Sample standard deviation of the durations, rounded down.
    pub stddev_ns: u64,
    /// These ranges' share of the time of every range, percent (`nsys stats`' `nvtx_sum`).
    pub share_percent: crate::gpu_summary::Hundredths,
    /// GPU records launched inside these ranges, and their total GPU time (ns).
    pub gpu_records: u64,
    pub gpu_ns: u64,
    /// Of those, launched while these were the innermost range.
    pub own_gpu_records: u64,
    pub own_gpu_ns: u64,
    /// The same in the process view ([`NvtxRange::process_gpu_records`]).
    pub process_gpu_records: u64,
    pub process_gpu_ns: u64,
    pub process_own_gpu_records: u64,
    pub process_own_gpu_ns: u64,
}

/// The report's NVTX section: a row per range name and domain (sorted by total time,
/// descending, then domain and name), the ranges still open when their trace ended, the marks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NvtxSection {
    pub rows: Vec<NvtxSummary>,
    pub open: u64,
    pub marks: u64,
    /// This section's external-id rows ([`super::external_summary`]).
    pub external: Vec<ExternalSummary>,
}

/// What the ranges of one name in one domain add up to: their durations (exact median by
/// passes, [`Dist`]) and their GPU work.
#[derive(Clone, Debug, Default)]
pub struct RangeAcc {
    pub durations: Dist,
    pub gpu_records: u64,
    pub gpu_ns: u64,
    pub own_gpu_records: u64,
    pub own_gpu_ns: u64,
    pub process_gpu_records: u64,
    pub process_gpu_ns: u64,
    pub process_own_gpu_records: u64,
    pub process_own_gpu_ns: u64,
}

impl RangeAcc {
    fn merge(&mut self, o: &RangeAcc) {
        self.durations.merge(&o.durations);
        self.gpu_records += o.gpu_records;
        self.gpu_ns = self.gpu_ns.saturating_add(o.gpu_ns);
        self.own_gpu_records += o.own_gpu_records;
        self.own_gpu_ns = self.own_gpu_ns.saturating_add(o.own_gpu_ns);
        self.process_gpu_records += o.process_gpu_records;
        self.process_gpu_ns = self.process_gpu_ns.saturating_add(o.process_gpu_ns);
        self.process_own_gpu_records += o.process_own_gpu_records;
        self.process_own_gpu_ns = (self.process_own_gpu_ns).saturating_add(o.process_own_gpu_ns);
    }
}

/// The NVTX summaries of several traces, combined by domain and range name: the first pass
/// adds each trace's [`Projected`]; while a median needs it ([`NvtxStats::end_pass`]), each
/// trace's durations are given again ([`NvtxStats::select`], through the row ids that
/// [`NvtxStats::add`] returned).
#[derive(Default)]
pub struct NvtxStats {
    index: HashMap<(String, String), usize>,
    rows: Vec<((String, String), RangeAcc)>,
    open: u64,
    marks: u64,
    external: Vec<ExternalSummary>,
}

impl NvtxStats {
    /// Adds one trace's summaries; returns its (domain id, message id) → row map.
    pub fn add(&mut self, p: Projected) -> HashMap<(u32, u32), usize> {
        self.open += p.open;
        self.marks += p.marks;
        self.external.extend(p.external);
        let mut ids = HashMap::new();
        for (id, key, acc) in p.summary {
            let row = match self.index.get(&key) {
                Some(&row) => {
                    self.rows[row].1.merge(&acc);
                    row
                }
                None => {
                    self.index.insert(key.clone(), self.rows.len());
                    self.rows.push((key, acc));
                    self.rows.len() - 1
                }
            };
            ids.insert(id, row);
        }
        ids
    }

    /// Ends a pass: true when some median needs the durations again.
    pub fn end_pass(&mut self) -> bool {
        let mut again = false;
        for (_, acc) in &mut self.rows {
            again |= acc.durations.end_pass();
        }
        again
    }

    /// Counts a duration of row `row` again, in a selection pass.
    pub fn select(&mut self, row: usize, v: u64) {
        if let Some((_, acc)) = self.rows.get_mut(row) {
            acc.durations.select(v);
        }
    }

    /// The section, once the passes are over.
    pub fn finish(self) -> NvtxSection {
        let all: u128 = self.rows.iter().map(|(_, a)| a.durations.total).sum();
        let mut rows: Vec<NvtxSummary> = self
            .rows
            .into_iter()
            .map(|((domain, name), a)| {
                let s = a.durations.stats();
                NvtxSummary {
                    domain,
                    name,
                    count: s.count,
                    total_ns: u64::try_from(s.total).unwrap_or(u64::MAX),
                    mean_ns: s.mean,
                    median_ns: s.median,
                    min_ns: s.min,
                    max_ns: s.max,
                    stddev_ns: s.stddev,
                    share_percent: crate::gpu_summary::Hundredths::percent(s.total, all),
                    gpu_records: a.gpu_records,
                    gpu_ns: a.gpu_ns,
                    own_gpu_records: a.own_gpu_records,
                    own_gpu_ns: a.own_gpu_ns,
                    process_gpu_records: a.process_gpu_records,
                    process_gpu_ns: a.process_gpu_ns,
                    process_own_gpu_records: a.process_own_gpu_records,
                    process_own_gpu_ns: a.process_own_gpu_ns,
                }
            })
            .collect();
        rows.sort_by(|a, b| {
            b.total_ns
                .cmp(&a.total_ns)
                .then_with(|| (&a.domain, &a.name).cmp(&(&b.domain, &b.name)))
        });
        let mut external = self.external;
        external.sort_by(|a, b| {
            b.process_gpu_ns
                .cmp(&a.process_gpu_ns)
                .then_with(|| (a.pid, a.kind, a.id).cmp(&(b.pid, b.kind, b.id)))
        });
        NvtxSection {
            rows,
            open: self.open,
            marks: self.marks,
            external,
        }
    }
}

/// The calls and GPU work linked to one external correlation id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExternalSummary {
    pub pid: u32,
    /// The id's kind, as the program pushed it.
    pub kind: u32,
    pub id: u64,
    /// API calls made while the id was the innermost of its kind on their thread.
    pub calls: u64,
    /// GPU records those calls launched, and their total GPU time (ns).
    pub gpu_records: u64,
    pub gpu_ns: u64,
    /// The process view (docs/nvtx.md, "Which thread's work"): those calls and the calls of
    /// other threads, with no id of this kind of their own, made while this was the innermost
    /// of its kind on its thread; the GPU records they launched and their GPU time (ns).
    pub process_calls: u64,
    pub process_gpu_records: u64,
    pub process_gpu_ns: u64,
}

/// A range name's (domain id, message id), its (domain, name), and what its ranges add up to.
pub type NameAcc = ((u32, u32), (String, String), RangeAcc);

/// What a [`super::Projector`] worked out for one trace.
#[derive(Clone, Debug, Default)]
pub struct Projected {
    /// Per (domain id, message id): the names, and what their ranges add up to.
    pub summary: Vec<NameAcc>,
    pub open: u64,
    pub marks: u64,
    /// The trace's rows of [`super::external_summary`], unsorted.
    pub external: Vec<ExternalSummary>,
    /// The ranges themselves, in order of start ([`super::Mode::Collect`] only).
    pub ranges: Ranges,
}

/// What a timeline shows of the ranges, as the stream comes to it ([`super::Mode::Tracks`] only):
/// ranges beginning and ending on their thread, and ranges over with the spans of their GPU
/// work. `slot` names a range while it is held (reused once it is over); `id` names it for
/// good (its order of beginning).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shown {
    /// Range `slot` began on `tid` at `start`; `parent`: for a push, the range of its domain
    /// it was pushed inside, if shown.
    Begin {
        slot: u32,
        tid: u64,
        message: u32,
        start: u64,
        parent: Option<u32>,
    },
    /// Range `slot` ended at `end`.
    End { slot: u32, end: u64 },
    /// Range `id` of `tid` is over: per device, (device, first start, last end) of its GPU
    /// work ([`super::Projector::gpu_spans`] may have given them already, their ends unknown).
    Over {
        id: u64,
        tid: u64,
        message: u32,
        spans: Vec<(u32, u64, u64)>,
    },
}

/// A span of a range's GPU work on one device that can no longer start earlier
/// ([`super::Projector::gpu_spans`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveSpan {
    pub id: u64,
    pub tid: u64,
    pub message: u32,
    /// (device, first start, last end so far).
    pub span: (u32, u64, u64),
}

/// The GPU work of one call: records, summed GPU time (ns), and the span from the first start
/// to the last end, on the device of its first record.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Work {
    pub(super) records: u64,
    pub(super) ns: u64,
    pub(super) device: u32,
    pub(super) start: u64,
    pub(super) end: u64,
}

impl Work {
    /// Adds a record, `key` its place in file order.
    pub(super) fn add(
        &mut self,
        first: &mut (u8, u64),
        key: (u8, u64),
        device: u32,
        start: u64,
        end: u64,
    ) {
        if self.records == 0 {
            (self.device, self.start, self.end) = (device, start, end.max(start));
            *first = key;
        } else {
            if key < *first {
                self.device = device;
                *first = key;
            }
            self.start = self.start.min(start);
            self.end = self.end.max(end);
        }
        self.records += 1;
        self.ns = self.ns.saturating_add(end.saturating_sub(start));
    }
}
