//! NVTX ranges: the program's push/pop and start/end ranges rebuilt from its NVTX events, and
//! their statistics per domain and name.
//!
//! - Push/pop ranges nest per thread and domain: a pop ends the innermost range of its domain
//!   on its thread.
//! - Start/end ranges are matched by range id, on any thread.
//! - A range still open when the trace ends is counted as open, not summarised.
//! - Names: the event's message (a registered string included); a range without one is
//!   `(unnamed)`. Domains: the name `nvtxDomainCreate` gave, `(default)` for the default one.
//! - GPU work of a range ("projected" onto the GPU): the kernels, copies and memsets linked to
//!   the API calls its thread (the one it began on) made between its start and end, nested
//!   ranges included; their GPU time is the sum of their durations.

use crate::model::Trace;
use rtrace_format::{NvtxEvent, NvtxKind};
use std::collections::HashMap;

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
}

/// The ranges of a trace, in order of their start, and how many began but never ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ranges {
    pub ranges: Vec<NvtxRange>,
    pub open: u64,
    pub marks: u64,
}

/// The display name of a string id of `t` (0: none).
fn text(t: &Trace, id: u32, none: &str) -> String {
    if id == 0 {
        return none.to_string();
    }
    t.nvtx_strings
        .get(&id)
        .cloned()
        .unwrap_or_else(|| format!("string#{id}"))
}

/// Rebuilds the ranges of `t`.
pub fn ranges(t: &Trace) -> Ranges {
    if let Some(p) = &t.projected {
        return p.ranges.clone();
    }
    let mut out = unprojected(t);
    project(t, &mut out.ranges);
    sort(&mut out.ranges);
    out
}

fn sort(ranges: &mut [NvtxRange]) {
    ranges.sort_by(|a, b| (a.start_ns, a.tid, &a.name).cmp(&(b.start_ns, b.tid, &b.name)));
}

/// The ranges of `t` from its NVTX events alone (no GPU work), in the order they ended.
fn unprojected(t: &Trace) -> Ranges {
    let mut domains: HashMap<u32, String> = HashMap::new();
    for th in t.threads.values() {
        for e in &th.nvtx {
            if e.kind == NvtxKind::DomainCreate {
                domains.insert(e.domain, text(t, e.message, "(unnamed domain)"));
            }
        }
    }
    let domain = |id: u32| -> String {
        if id == 0 {
            "(default)".to_string()
        } else {
            domains
                .get(&id)
                .cloned()
                .unwrap_or_else(|| format!("domain#{id}"))
        }
    };
    let mut out = Ranges::default();
    let mut started: HashMap<u64, (u64, NvtxEvent)> = HashMap::new();
    let mut ended: Vec<(u64, NvtxEvent)> = Vec::new();
    for (&tid, th) in &t.threads {
        let mut stacks: HashMap<u32, Vec<NvtxEvent>> = HashMap::new();
        for e in &th.nvtx {
            match e.kind {
                NvtxKind::Push => stacks.entry(e.domain).or_default().push(*e),
                NvtxKind::Pop => {
                    if let Some(p) = stacks.get_mut(&e.domain).and_then(Vec::pop) {
                        out.ranges.push(NvtxRange {
                            pid: t.header.pid,
                            tid,
                            end_tid: tid,
                            domain: domain(p.domain),
                            name: text(t, p.message, "(unnamed)"),
                            category: p.category,
                            start_ns: p.time_ns,
                            end_ns: e.time_ns,
                            level: Some(p.value),
                            gpu_records: 0,
                            gpu_ns: 0,
                            gpu_span: None,
                            own_gpu_records: 0,
                            own_gpu_ns: 0,
                        });
                    }
                }
                NvtxKind::Start => {
                    started.insert(e.value, (tid, *e));
                }
                NvtxKind::End => ended.push((tid, *e)),
                NvtxKind::Mark => out.marks += 1,
                _ => {}
            }
        }
        out.open += stacks.values().map(|s| s.len() as u64).sum::<u64>();
    }
    for (end_tid, e) in ended {
        if let Some((tid, s)) = started.remove(&e.value) {
            out.ranges.push(NvtxRange {
                pid: t.header.pid,
                tid,
                end_tid,
                domain: domain(s.domain),
                name: text(t, s.message, "(unnamed)"),
                category: s.category,
                start_ns: s.time_ns,
                end_ns: e.time_ns,
                level: None,
                gpu_records: 0,
                gpu_ns: 0,
                gpu_span: None,
                own_gpu_records: 0,
                own_gpu_ns: 0,
            });
        }
    }
    out.open += started.len() as u64;
    out
}

/// The GPU work of one call: records, summed GPU time (ns), and the span from the first start
/// to the last end, on the device of its first record.
#[derive(Clone, Copy, Debug, Default)]
struct Work {
    records: u64,
    ns: u64,
    device: u32,
    start: u64,
    end: u64,
}

/// The GPU work of each launching call, by its correlation id.
fn gpu_work(t: &Trace) -> crate::model::IdMap<Work> {
    use rtrace_format::FLAG_CORRELATED;
    let mut work: crate::model::IdMap<Work> = Default::default();
    let mut add = |correlation: u64, device: u32, start: u64, end: u64| {
        let w = work.entry(correlation).or_default();
        if w.records == 0 {
            (w.device, w.start, w.end) = (device, start, end.max(start));
        } else {
            w.start = w.start.min(start);
            w.end = w.end.max(end);
        }
        w.records += 1;
        w.ns = w.ns.saturating_add(end.saturating_sub(start));
    };
    for k in t.kernels.iter().filter(|k| k.flags & FLAG_CORRELATED != 0) {
        add(k.correlation, k.device, k.start_ns, k.end_ns);
    }
    for c in t
        .memcpys
        .iter()
        .filter(|c| u32::from(c.flags) & FLAG_CORRELATED != 0)
    {
        add(c.correlation, c.device, c.start_ns, c.end_ns);
    }
    for s in t.memsets.iter().filter(|s| s.correlation != 0) {
        add(s.correlation, s.device, s.start_ns, s.end_ns);
    }
    work
}

/// Sets each range's GPU work: the GPU records linked to its thread's API calls that started
/// inside it, their GPU time, and the span they cover.
fn project(t: &Trace, ranges: &mut [NvtxRange]) {
    if ranges.is_empty() {
        return;
    }
    let work = gpu_work(t);
    if work.is_empty() {
        return;
    }
    // Per thread: its calls' starts in order, their work, and running sums of (GPU records,
    // GPU ns) before each.
    struct Calls {
        starts: Vec<u64>,
        work: Vec<Work>,
        sums: Vec<(u64, u64)>,
    }
    let mut per_thread: HashMap<u64, Calls> = HashMap::new();
    for (&tid, th) in &t.threads {
        let mut calls: Vec<(u64, Work)> = th
            .records
            .iter()
            .map(|r| {
                (
                    r.start_ns,
                    work.get(&r.correlation).copied().unwrap_or_default(),
                )
            })
            .collect();
        calls.sort_by_key(|c| c.0);
        let mut sums = Vec::with_capacity(calls.len() + 1);
        let mut acc = (0u64, 0u64);
        sums.push(acc);
        for (_, w) in &calls {
            acc = (acc.0 + w.records, acc.1.saturating_add(w.ns));
            sums.push(acc);
        }
        per_thread.insert(
            tid,
            Calls {
                starts: calls.iter().map(|c| c.0).collect(),
                work: calls.iter().map(|c| c.1).collect(),
                sums,
            },
        );
    }
    for r in ranges.iter_mut() {
        if let Some(c) = per_thread.get(&r.tid) {
            let a = c.starts.partition_point(|&s| s < r.start_ns);
            // A range that ends before it starts (damaged times) holds nothing.
            let b = c.starts.partition_point(|&s| s <= r.end_ns).max(a);
            r.gpu_records = c.sums[b].0 - c.sums[a].0;
            r.gpu_ns = c.sums[b].1.saturating_sub(c.sums[a].1);
            if r.gpu_records > 0 {
                let mut span: Option<(u32, u64, u64)> = None;
                for w in c.work[a..b].iter().filter(|w| w.records > 0) {
                    span = Some(match span {
                        None => (w.device, w.start, w.end),
                        Some((d, s, e)) => (d, s.min(w.start), e.max(w.end)),
                    });
                }
                r.gpu_span = span;
            }
        }
    }
    // Each call's work also goes to its innermost range: the latest-starting range of its
    // thread that holds it.
    let mut by_thread: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, r) in ranges.iter().enumerate() {
        by_thread.entry(r.tid).or_default().push(i);
    }
    for (tid, mut idx) in by_thread {
        let Some(c) = per_thread.get(&tid) else {
            continue;
        };
        idx.sort_by_key(|&i| (ranges[i].start_ns, std::cmp::Reverse(ranges[i].end_ns)));
        let mut open: Vec<usize> = Vec::new();
        let mut next = 0;
        for (k, &t) in c.starts.iter().enumerate() {
            let w = c.work[k];
            if w.records == 0 {
                continue;
            }
            while next < idx.len() && ranges[idx[next]].start_ns <= t {
                open.push(idx[next]);
                next += 1;
            }
            open.retain(|&i| ranges[i].end_ns >= t);
            if let Some(&i) = open
                .iter()
                .filter(|&&i| ranges[i].start_ns <= t)
                .max_by_key(|&&i| (ranges[i].start_ns, std::cmp::Reverse(ranges[i].end_ns)))
            {
                ranges[i].own_gpu_records += w.records;
                ranges[i].own_gpu_ns = ranges[i].own_gpu_ns.saturating_add(w.ns);
            }
        }
    }
}

/// Statistics of the ranges of one name in one domain, over every trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NvtxSummary {
    pub domain: String,
    pub name: String,
    pub count: u64,
    pub total_ns: u64,
    pub mean_ns: u64,
    /// The middle duration (the lower of the two middle ones for an even count).
    pub median_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    /// GPU records launched inside these ranges, and their total GPU time (ns).
    pub gpu_records: u64,
    pub gpu_ns: u64,
    /// Of those, launched while these were the innermost range.
    pub own_gpu_records: u64,
    pub own_gpu_ns: u64,
}

/// Summaries of all `traces`' ranges, and the open ranges and marks counted: rows sorted by
/// total time (descending), then domain and name.
pub fn nvtx_summary(traces: &[Trace]) -> (Vec<NvtxSummary>, u64, u64) {
    let mut by: HashMap<(String, String), (Vec<u64>, [u64; 4])> = HashMap::new();
    let (mut open, mut marks) = (0, 0);
    for t in traces {
        // A projected trace's ranges are read where they are, not copied.
        let owned;
        let r = match &t.projected {
            Some(p) => &p.ranges,
            None => {
                owned = ranges(t);
                &owned
            }
        };
        open += r.open;
        marks += r.marks;
        for x in &r.ranges {
            let key = (x.domain.clone(), x.name.clone());
            let e = by.entry(key).or_default();
            e.0.push(x.end_ns.saturating_sub(x.start_ns));
            e.1[0] += x.gpu_records;
            e.1[1] = e.1[1].saturating_add(x.gpu_ns);
            e.1[2] += x.own_gpu_records;
            e.1[3] = e.1[3].saturating_add(x.own_gpu_ns);
        }
    }
    let mut rows: Vec<NvtxSummary> = by
        .into_iter()
        .map(
            |((domain, name), (mut d, [gpu_records, gpu_ns, own_gpu_records, own_gpu_ns]))| {
                d.sort_unstable();
                let total: u128 = d.iter().map(|&x| u128::from(x)).sum();
                NvtxSummary {
                    domain,
                    name,
                    count: d.len() as u64,
                    total_ns: u64::try_from(total).unwrap_or(u64::MAX),
                    mean_ns: (total / d.len() as u128) as u64,
                    median_ns: d[(d.len() - 1) / 2],
                    min_ns: d[0],
                    max_ns: d[d.len() - 1],
                    gpu_records,
                    gpu_ns,
                    own_gpu_records,
                    own_gpu_ns,
                }
            },
        )
        .collect();
    rows.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then_with(|| (&a.domain, &a.name).cmp(&(&b.domain, &b.name)))
    });
    (rows, open, marks)
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
}

/// One row per (process, kind, id) pushed with `rtrace_push_external_correlation`, sorted by
/// GPU time (descending), then process, kind and id.
pub fn external_summary(traces: &[Trace]) -> Vec<ExternalSummary> {
    let mut rows = Vec::new();
    for t in traces {
        if let Some(p) = &t.projected {
            rows.extend(p.external.iter().cloned());
            continue;
        }
        let pushed = t
            .threads
            .values()
            .any(|th| th.nvtx.iter().any(|e| e.kind == NvtxKind::ExternalPush));
        if !pushed {
            continue;
        }
        let work = gpu_work(t);
        let mut by: std::collections::BTreeMap<(u32, u64), (u64, u64, u64)> = Default::default();
        for th in t.threads.values() {
            let Some(mut cursor) = ExternalCursor::of(th) else {
                continue;
            };
            let mut calls: Vec<&rtrace_format::ApiRecord> = th.records.iter().collect();
            calls.sort_by_key(|r| r.start_ns);
            for r in calls {
                cursor.advance(r.start_ns);
                let stacks = &cursor.stacks;
                let w = work.get(&r.correlation).copied().unwrap_or_default();
                let (n, ns) = (w.records, w.ns);
                for (&kind, stack) in stacks {
                    if let Some(&id) = stack.last() {
                        let acc = by.entry((kind, id)).or_default();
                        acc.0 += 1;
                        acc.1 += n;
                        acc.2 = acc.2.saturating_add(ns);
                    }
                }
            }
            // Ids pushed with no call inside still get a row.
            for e in &cursor.events {
                if e.kind == NvtxKind::ExternalPush {
                    by.entry((e.category, e.value)).or_default();
                }
            }
        }
        rows.extend(
            by.into_iter().map(
                |((kind, id), (calls, gpu_records, gpu_ns))| ExternalSummary {
                    pid: t.header.pid,
                    kind,
                    id,
                    calls,
                    gpu_records,
                    gpu_ns,
                },
            ),
        );
    }
    rows.sort_by(|a, b| {
        b.gpu_ns
            .cmp(&a.gpu_ns)
            .then_with(|| (a.pid, a.kind, a.id).cmp(&(b.pid, b.kind, b.id)))
    });
    rows
}

/// What [`ranges`] and [`external_summary`] give for a trace, worked out by a [`Projector`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Projected {
    pub ranges: Ranges,
    /// This trace's rows of [`external_summary`], unsorted.
    pub external: Vec<ExternalSummary>,
}

/// Projects a trace's NVTX ranges and external ids onto its GPU work as its API and GPU
/// records stream by, without holding them: API calls must come in order of their start on
/// each thread, and each GPU record not long after its call (as a merge of the trace's chunks
/// by time gives them). A call's work is settled once its GPU records (whose number the caller
/// knows from a first read) have all come, then added to the ranges and external ids it was
/// made in; what is held is the ranges, the calls whose work is still to come, and the work
/// of calls still to come (only for work that started before its call).
///
/// It gives what [`ranges`] and [`external_summary`] give from the records held: a
/// correlation id given to several calls (a damaged trace) gives each of them its work, as
/// there; only such calls are held until the last of them came.
pub struct Projector {
    pid: u32,
    ranges: Ranges,
    /// Per range: the (start, index) of the first call with work, whose device the span takes.
    first: Vec<(u64, u64)>,
    threads: HashMap<u64, RangeCursor>,
    external: HashMap<u64, ExternalCursor>,
    rows: std::collections::BTreeMap<(u32, u64), (u64, u64, u64)>,
    calls: crate::model::IdMap<Call>,
    early: crate::model::IdMap<(Work, (u8, u64), u32)>,
}

/// A thread's ranges in order of start (then longest first), and those open at the last call.
#[derive(Default)]
struct RangeCursor {
    order: Vec<u32>,
    next: usize,
    open: Vec<u32>,
}

/// A thread's external-id pushes and pops in time order, and the ids pushed at the last call.
struct ExternalCursor {
    events: Vec<NvtxEvent>,
    next: usize,
    stacks: std::collections::BTreeMap<u32, Vec<u64>>,
}

impl ExternalCursor {
    /// The external-id pushes and pops of `th`, if it has any.
    fn of(th: &crate::model::ThreadTrace) -> Option<ExternalCursor> {
        let mut events: Vec<NvtxEvent> = th
            .nvtx
            .iter()
            .filter(|e| matches!(e.kind, NvtxKind::ExternalPush | NvtxKind::ExternalPop))
            .copied()
            .collect();
        if events.is_empty() {
            return None;
        }
        events.sort_by_key(|e| e.time_ns);
        Some(ExternalCursor {
            events,
            next: 0,
            stacks: Default::default(),
        })
    }

    /// Applies the pushes and pops at or before `time` (by kind: a pop removes the latest push
    /// of its id).
    fn advance(&mut self, time: u64) {
        while self.next < self.events.len() && self.events[self.next].time_ns <= time {
            let e = self.events[self.next];
            let stack = self.stacks.entry(e.category).or_default();
            if e.kind == NvtxKind::ExternalPush {
                stack.push(e.value);
            } else if let Some(at) = stack.iter().rposition(|&v| v == e.value) {
                stack.remove(at);
            }
            self.next += 1;
        }
    }
}

/// The calls with one correlation id (one, but for a damaged trace) whose GPU work is still
/// coming, or which are still to come.
struct Call {
    calls: Vec<Target>,
    /// API calls with the id still to come.
    calls_left: u32,
    work: Work,
    /// (kind, index) of the work's first record in file order: its device is the work's.
    first: (u8, u64),
    /// GPU records still to come.
    left: u32,
}

/// Where a call's work goes.
struct Target {
    start: (u64, u64),
    ranges: Vec<u32>,
    innermost: Option<u32>,
    external: Vec<(u32, u64)>,
}

impl Work {
    /// Adds a record as [`gpu_work`] does, `key` its place in file order.
    fn add(&mut self, first: &mut (u8, u64), key: (u8, u64), device: u32, start: u64, end: u64) {
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

impl Projector {
    /// The projector of `t` (its NVTX events, as filtered).
    pub fn new(t: &Trace) -> Projector {
        let ranges = unprojected(t);
        let mut threads: HashMap<u64, RangeCursor> = HashMap::new();
        for (i, r) in ranges.ranges.iter().enumerate() {
            threads.entry(r.tid).or_default().order.push(i as u32);
        }
        for c in threads.values_mut() {
            let rs = &ranges.ranges;
            c.order.sort_by_key(|&i| {
                let r = &rs[i as usize];
                (r.start_ns, std::cmp::Reverse(r.end_ns))
            });
        }
        let mut external = HashMap::new();
        let mut rows = std::collections::BTreeMap::new();
        for (&tid, th) in &t.threads {
            let Some(cursor) = ExternalCursor::of(th) else {
                continue;
            };
            // Ids pushed with no call inside still get a row.
            for e in cursor
                .events
                .iter()
                .filter(|e| e.kind == NvtxKind::ExternalPush)
            {
                rows.entry((e.category, e.value)).or_insert((0, 0, 0));
            }
            external.insert(tid, cursor);
        }
        Projector {
            pid: t.header.pid,
            first: vec![(u64::MAX, u64::MAX); ranges.ranges.len()],
            ranges,
            threads,
            external,
            rows,
            calls: Default::default(),
            early: Default::default(),
        }
    }

    /// API call `index` of thread `tid`, started at `start`, whose correlation id `counts`
    /// (API calls, GPU records) have in the trace.
    pub fn api(&mut self, tid: u64, index: u64, start: u64, correlation: u64, counts: (u32, u32)) {
        let (calls, gpu_records) = counts;
        let mut target = Target {
            start: (start, index),
            ranges: Vec::new(),
            innermost: None,
            external: Vec::new(),
        };
        if let Some(c) = self.external.get_mut(&tid) {
            c.advance(start);
            for (&kind, stack) in &c.stacks {
                if let Some(&id) = stack.last() {
                    self.rows.entry((kind, id)).or_insert((0, 0, 0)).0 += 1;
                    target.external.push((kind, id));
                }
            }
        }
        if gpu_records == 0 {
            return;
        }
        if let Some(c) = self.threads.get_mut(&tid) {
            let rs = &self.ranges.ranges;
            while c.next < c.order.len() && rs[c.order[c.next] as usize].start_ns <= start {
                c.open.push(c.order[c.next]);
                c.next += 1;
            }
            c.open.retain(|&i| rs[i as usize].end_ns >= start);
            target.ranges.clone_from(&c.open);
            target.innermost = c.open.iter().copied().max_by_key(|&i| {
                let r = &rs[i as usize];
                (r.start_ns, std::cmp::Reverse(r.end_ns))
            });
        }
        let early = self.early.remove(&correlation);
        let call = self.calls.entry(correlation).or_insert_with(|| {
            let (work, first, n) = early.unwrap_or((Work::default(), (u8::MAX, u64::MAX), 0));
            Call {
                calls: Vec::new(),
                calls_left: calls.max(1),
                work,
                first,
                left: gpu_records.saturating_sub(n),
            }
        });
        call.calls.push(target);
        call.calls_left = call.calls_left.saturating_sub(1);
        if call.calls_left == 0 && call.left == 0 {
            if let Some(call) = self.calls.remove(&correlation) {
                self.settle(&call);
            }
        }
    }

    /// A GPU record linked to correlation id `correlation` (`has_call`: an API call of the
    /// trace has the id), `key` its (kind, index) in file order.
    pub fn gpu(&mut self, correlation: u64, has_call: bool, key: (u8, u64), span: (u32, u64, u64)) {
        let (device, start, end) = span;
        if let Some(call) = self.calls.get_mut(&correlation) {
            call.work.add(&mut call.first, key, device, start, end);
            call.left = call.left.saturating_sub(1);
            if call.left == 0 && call.calls_left == 0 {
                if let Some(call) = self.calls.remove(&correlation) {
                    self.settle(&call);
                }
            }
        } else if has_call {
            let e =
                self.early
                    .entry(correlation)
                    .or_insert((Work::default(), (u8::MAX, u64::MAX), 0));
            e.0.add(&mut e.1, key, device, start, end);
            e.2 += 1;
        }
    }

    /// Adds the settled work of the calls with one id to their ranges and external ids.
    fn settle(&mut self, call: &Call) {
        let w = call.work;
        if w.records == 0 {
            return;
        }
        for t in &call.calls {
            for &i in &t.ranges {
                let r = &mut self.ranges.ranges[i as usize];
                r.gpu_records += w.records;
                r.gpu_ns = r.gpu_ns.saturating_add(w.ns);
                let first = &mut self.first[i as usize];
                let device = if t.start < *first {
                    *first = t.start;
                    w.device
                } else {
                    r.gpu_span.map_or(w.device, |s| s.0)
                };
                r.gpu_span = Some(match r.gpu_span {
                    None => (device, w.start, w.end),
                    Some((_, s, e)) => (device, s.min(w.start), e.max(w.end)),
                });
            }
            if let Some(i) = t.innermost {
                let r = &mut self.ranges.ranges[i as usize];
                r.own_gpu_records += w.records;
                r.own_gpu_ns = r.own_gpu_ns.saturating_add(w.ns);
            }
            for key in &t.external {
                let row = self.rows.entry(*key).or_insert((0, 0, 0));
                row.1 += w.records;
                row.2 = row.2.saturating_add(w.ns);
            }
        }
    }

    /// Ends the stream: calls whose work did not all come (cut by damage) get what came.
    pub fn finish(mut self) -> Projected {
        let calls: Vec<Call> = self.calls.drain().map(|(_, c)| c).collect();
        for c in &calls {
            self.settle(c);
        }
        let mut ranges = self.ranges;
        sort(&mut ranges.ranges);
        let pid = self.pid;
        let external = self
            .rows
            .into_iter()
            .map(
                |((kind, id), (calls, gpu_records, gpu_ns))| ExternalSummary {
                    pid,
                    kind,
                    id,
                    calls,
                    gpu_records,
                    gpu_ns,
                },
            )
            .collect();
        Projected { ranges, external }
    }
}
