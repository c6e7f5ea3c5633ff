//! The projection of a trace's NVTX ranges and external ids onto its GPU work, as its
//! records stream by in time order ([`Projector`]).

use super::chain::{merge_spans, Chain, Nodes, Spans};
use super::external::{ExternalStacks, PausedCall};
use super::outcome::{add_work, projected, ExternalRow, Slot};
use super::process::Foreign;
use super::stats::{LiveSpan, Mode, Projected, RangeAcc, Shown, Work};
use crate::gpu_summary::fast_hash::FastMap;
use crate::model::Trace;
use rtrace_format::{NvtxEvent, NvtxKind};

/// Builds a trace's NVTX ranges and projects them and its external ids onto its GPU work as
/// its NVTX events, API and GPU records stream by in time order (a merge of the trace's
/// chunks by time, NVTX events first at one time, then calls, then GPU work: what
/// `read::merge` gives), holding only what is open: ranges not yet ended, or whose calls'
/// GPU work is still to come, calls whose work is still to come, and the work of calls still
/// to come (only for work that started before its call).
///
/// - A range is made at its push (or start) when it begins in the window the filter keeps;
///   push/pop ranges nest per thread and domain (a pop ends the innermost of its domain),
///   start/end ranges match by id on any thread.
/// - A call of thread T at time s is inside the ranges T began that are open at s or ended at
///   or after s; its innermost one is the latest begun of those that began last.
/// - A call's work is settled once its GPU records (whose number the caller knows from a
///   first read) have all come, then added to the ranges and external ids it was made in
///   (through the thread's chain of nodes, `chain.rs`: a step per call, not per range), and in
///   the process view to other threads' open ranges and ids (`process.rs`: a step per
///   (thread, domain) with a range open in a domain where the calling thread has none). A
///   correlation id given to several calls (a damaged trace) gives each of them its work.
/// - A range is over once it ended, no later call can be in it, and its calls' work is
///   settled; its statistics are then added to its name's.
pub struct Projector {
    pid: u32,
    mode: Mode,
    window: Option<(u64, u64)>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    nodes: Nodes,
    /// The process view: other threads' launches credited to ranges (`process.rs`).
    foreign: Foreign,
    begun: u64,
    threads: FastMap<u64, ThreadState>,
    started: FastMap<u64, Option<u32>>,
    acc: FastMap<(u32, u32), RangeAcc>,
    marks: u64,
    rows: std::collections::BTreeMap<(u32, u64), ExternalRow>,
    /// Which calls capture control records while paused.
    paused_call: PausedCall,
    calls: crate::model::IdMap<Call>,
    early: crate::model::IdMap<(Work, (u8, u64), u32)>,
    ranges: Vec<Slot>,
    /// What a timeline shows, to be taken as it comes ([`Mode::Tracks`]).
    pub shown: Vec<Shown>,
    /// Ranges begun and never ended ([`Projector::close`]), and whether it was called.
    open: u64,
    closed: bool,
    /// (domain id, message id, duration) of ranges over ([`Mode::Durations`]).
    pub durations: Vec<((u32, u32), u64)>,
}

/// A thread's open ranges and external ids.
#[derive(Default)]
struct ThreadState {
    /// Per domain: the pushed ranges with their levels (`None`: outside the window).
    stacks: FastMap<u32, Vec<(u64, Option<u32>)>>,
    /// The ranges it began that a call could still be in.
    chain: Chain,
    /// Its external ids.
    external: ExternalStacks,
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
    /// The node on top of its thread's chain: its innermost range's.
    node: Option<u32>,
    /// The nodes of other threads' ranges it is credited to in the process view.
    foreign: Vec<u32>,
    external: Vec<(u32, u64)>,
    /// Other threads' external ids it is credited to in the process view.
    external_process: Vec<(u32, u64)>,
}

impl Projector {
    /// The projector of `t` (held without its records, or with them); `window`: the
    /// (shifted) times a range must begin in to be kept, for events not yet filtered.
    pub fn new(t: &Trace, window: Option<(u64, u64)>, mode: Mode) -> Projector {
        Projector {
            pid: t.header.pid,
            mode,
            window,
            slots: Vec::new(),
            free: Vec::new(),
            nodes: Nodes::default(),
            foreign: Foreign::default(),
            begun: 0,
            threads: FastMap::default(),
            started: FastMap::default(),
            acc: FastMap::default(),
            marks: 0,
            rows: Default::default(),
            paused_call: PausedCall::of(t),
            calls: Default::default(),
            early: Default::default(),
            ranges: Vec::new(),
            shown: Vec::new(),
            open: 0,
            closed: false,
            durations: Vec::new(),
        }
    }

    /// The most ranges it held at once.
    pub fn held(&self) -> usize {
        self.slots.len()
    }

    /// What a layout looks at: the most ranges held at once, the calls whose work is to come.
    pub fn layout_cost(&self) -> usize {
        self.slots.len() + self.calls.len() + self.early.len()
    }

    fn kept(&self, time: u64) -> bool {
        self.window
            .is_none_or(|w| crate::filter::in_window(time, w))
    }

    /// Makes a range begun on `tid` at `e`, inside range `parent` (a push's).
    fn begin(&mut self, tid: u64, e: &NvtxEvent, level: Option<u64>, parent: Option<u32>) -> u32 {
        self.begun += 1;
        let slot = Slot {
            tid,
            end_tid: tid,
            domain: e.domain,
            message: e.message,
            category: e.category,
            start: e.time_ns,
            level,
            begun: self.begun,
            live: true,
            ..Default::default()
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        if self.mode != Mode::Durations {
            let th = self.threads.entry(tid).or_default();
            th.chain.push(i, &mut self.nodes);
            self.foreign.begin(tid, e.domain, i);
            self.slots[i as usize].nodes_left = 2;
        }
        if self.mode == Mode::Tracks {
            self.shown.push(Shown::Begin {
                slot: i,
                tid,
                message: e.message,
                start: e.time_ns,
                parent,
            });
        }
        i
    }

    /// Ends range `i` at `time`, on `tid`.
    fn end(&mut self, i: u32, tid: u64, time: u64) {
        let s = &mut self.slots[i as usize];
        s.end = Some(time);
        s.end_tid = tid;
        if self.mode == Mode::Tracks {
            self.shown.push(Shown::End { slot: i, end: time });
        }
        if self.mode == Mode::Durations {
            s.sealed = true;
            self.over(i);
        } else {
            (self.threads.entry(s.tid).or_default().chain).ended(time, s.begun, i);
        }
    }

    /// Seals the ranges of `tid` that ended before `time` (every one that ended, with `all`):
    /// no call still to come is in them.
    fn seal(&mut self, tid: u64, time: u64, all: bool) {
        let Some(th) = self.threads.get_mut(&tid) else {
            return;
        };
        let slots = &self.slots;
        // The latest begun first: ranges that nest come off the top of the chain.
        let due = th.chain.due(time, all, |i, begun| {
            let s = &slots[i as usize];
            s.live && !s.sealed && s.begun == begun
        });
        for (_, i) in due {
            self.slots[i as usize].sealed = true;
            let domain = self.slots[i as usize].domain;
            let (slots, th) = (&mut self.slots, self.threads.entry(tid).or_default());
            let top = (th.chain).remove(i, &mut self.nodes, |s| slots[s as usize].nodes_left += 1);
            // Done nodes hand their work down the chain from the top.
            if let Some(top) = top {
                self.settle_node(top, false);
            }
            let slots = &mut self.slots;
            let top = (self.foreign).remove(tid, domain, i, |s| slots[s as usize].nodes_left += 1);
            if let Some(top) = top {
                self.settle_node(top, true);
            }
        }
    }

    /// Hands what node `n` (of the process view's chains, with `foreign`) gathered to the
    /// ranges of the nodes that are done, from it down.
    fn settle_node(&mut self, n: u32, foreign: bool) {
        let spans = self.mode == Mode::Tracks;
        let mut done = Vec::new();
        let nodes = if foreign {
            &mut self.foreign.nodes
        } else {
            &mut self.nodes
        };
        nodes.settle(n, spans, |slot, acc| done.push((slot, acc.clone())));
        for (slot, acc) in done {
            let s = &mut self.slots[slot as usize];
            if foreign {
                s.foreign.merge(&acc, spans);
            } else {
                s.acc.merge(&acc, spans);
            }
            s.nodes_left -= 1;
            self.over(slot);
        }
    }

    /// Retires range `i` if it is over: sealed, its calls' work settled.
    fn over(&mut self, i: u32) {
        let s = &mut self.slots[i as usize];
        if !s.live || !s.sealed || s.nodes_left > 0 {
            return;
        }
        let Some(end) = s.end else {
            return;
        };
        s.live = false;
        let s = &self.slots[i as usize];
        let key = (s.domain, s.message);
        let duration = end.saturating_sub(s.start);
        match self.mode {
            Mode::Durations => self.durations.push((key, duration)),
            Mode::Summary | Mode::Collect | Mode::Tracks => {
                let a = self.acc.entry(key).or_default();
                a.durations.add(duration);
                a.gpu_records += s.acc.records;
                a.gpu_ns = a.gpu_ns.saturating_add(s.acc.ns);
                a.own_gpu_records += s.own_gpu_records;
                a.own_gpu_ns = a.own_gpu_ns.saturating_add(s.own_gpu_ns);
                a.process_gpu_records += s.acc.records + s.foreign.records;
                a.process_gpu_ns = (a.process_gpu_ns)
                    .saturating_add(s.acc.ns)
                    .saturating_add(s.foreign.ns);
                a.process_own_gpu_records += s.own_gpu_records + s.foreign_own.0;
                a.process_own_gpu_ns = (a.process_own_gpu_ns)
                    .saturating_add(s.own_gpu_ns)
                    .saturating_add(s.foreign_own.1);
                match self.mode {
                    Mode::Collect => self.ranges.push(s.clone()),
                    Mode::Tracks => {
                        let (id, tid, message) = (s.begun, s.tid, s.message);
                        // The timeline draws the process view.
                        let s = &mut self.slots[i as usize];
                        let mut spans = std::mem::take(&mut s.acc.spans);
                        merge_spans(&mut spans, &s.foreign.spans);
                        self.shown.push(Shown::Over {
                            id,
                            tid,
                            message,
                            spans,
                        });
                    }
                    _ => {}
                }
            }
        }
        self.free.push(i);
    }

    /// An NVTX event of thread `tid` (its time shifted as the trace's).
    pub fn nvtx(&mut self, tid: u64, e: &NvtxEvent) {
        let time = e.time_ns;
        if self.mode != Mode::Durations {
            self.seal(tid, time, false);
        }
        let kept = self.kept(time);
        match e.kind {
            NvtxKind::Push => {
                let parent = self
                    .threads
                    .get(&tid)
                    .and_then(|th| th.stacks.get(&e.domain))
                    .and_then(|stack| stack.last().and_then(|&(_, i)| i));
                let i = kept.then(|| self.begin(tid, e, Some(e.value), parent));
                let th = self.threads.entry(tid).or_default();
                th.stacks.entry(e.domain).or_default().push((e.value, i));
            }
            NvtxKind::Pop => {
                let th = self.threads.entry(tid).or_default();
                let stack = th.stacks.entry(e.domain).or_default();
                // Ranges above the one it ends lost their pops: they end with it.
                let at = rtrace_format::pop_matches(stack, e.value).unwrap_or(stack.len());
                for _ in at..stack.len() {
                    let th = self.threads.get_mut(&tid);
                    let top = th.and_then(|th| th.stacks.get_mut(&e.domain)?.pop());
                    if let Some((_, Some(i))) = top {
                        self.end(i, tid, time);
                    }
                }
            }
            NvtxKind::Start => {
                let i = kept.then(|| self.begin(tid, e, None, None));
                // A range id started again: the first one stays open.
                self.started.insert(e.value, i);
            }
            NvtxKind::End => {
                if let Some(Some(i)) = self.started.remove(&e.value) {
                    self.end(i, tid, time);
                }
            }
            NvtxKind::Mark if kept => self.marks += 1,
            k if k.is_external_push() && self.mode != Mode::Durations => {
                let paused = k == NvtxKind::ExternalPushPaused;
                let th = self.threads.entry(tid).or_default();
                if th.external.push(e.category, e.value, kept, paused) {
                    self.foreign.external(tid, e.category, true);
                    // Ids pushed with no call inside still get a row, unless pushed while
                    // capture control was not recording (then only the calls credited to
                    // them, recorded later, make one).
                    if !paused {
                        self.rows.entry((e.category, e.value)).or_default();
                    }
                }
            }
            NvtxKind::ExternalPop if self.mode != Mode::Durations => {
                let th = self.threads.entry(tid).or_default();
                if th.external.pop(e.category, e.value) == Some(true) {
                    self.foreign.external(tid, e.category, false);
                }
            }
            _ => {}
        }
    }

    /// API call `index` of thread `tid` to `function`, started at `start` (`at`: index, start,
    /// function), whose correlation id `counts` (API calls, GPU records) have in the trace.
    pub fn api(&mut self, tid: u64, at: (u64, u64, u32), correlation: u64, counts: (u32, u32)) {
        let ((index, start, function), (calls, gpu_records)) = (at, counts);
        // A call capture control records while paused credits no id pushed while paused.
        let paused_call = self.paused_call.is(function);
        self.seal(tid, start, false);
        let mut target = Target {
            start: (start, index),
            node: None,
            foreign: Vec::new(),
            external: Vec::new(),
            external_process: Vec::new(),
        };
        let th = self.threads.get(&tid);
        if let Some(th) = th {
            for (kind, id) in th.external.tops(paused_call) {
                let row = self.rows.entry((kind, id)).or_default();
                row.calls += 1;
                row.process_calls += 1;
                target.external.push((kind, id));
            }
            if gpu_records > 0 {
                target.node = th.chain.nodes.last().copied();
            }
        }
        // The process view: other threads' innermost ids of the kinds this thread has none of.
        let has = |kind| th.is_some_and(|th| th.external.has(kind));
        for (kind, other) in self.foreign.external_others(tid, has) {
            let top = (self.threads.get(&other)).and_then(|th| th.external.top(kind, paused_call));
            if let Some(id) = top {
                self.rows.entry((kind, id)).or_default().process_calls += 1;
                target.external_process.push((kind, id));
            }
        }
        if gpu_records == 0 {
            return;
        }
        if let Some(n) = target.node {
            self.nodes.nodes[n as usize].pending += 1;
        }
        // The process view: other threads' ranges open now, in the domains where this thread
        // has none (their ranges that ended before now sealed first).
        for other in self.foreign.others(tid) {
            self.seal(other, start, false);
        }
        target.foreign = self.foreign.targets(tid);
        for &n in &target.foreign {
            self.foreign.nodes.nodes[n as usize].pending += 1;
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
                self.settle(call);
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
                    self.settle(call);
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
    fn settle(&mut self, call: Call) {
        let w = call.work;
        let spans = self.mode == Mode::Tracks;
        for t in call.calls {
            if let Some(n) = t.node {
                let node = &mut self.nodes.nodes[n as usize];
                if w.records > 0 {
                    let work = (w.records, w.ns, w.device, w.start, w.end);
                    node.acc.add(t.start, work, spans);
                    let r = &mut self.slots[node.slot as usize];
                    r.own_gpu_records += w.records;
                    r.own_gpu_ns = r.own_gpu_ns.saturating_add(w.ns);
                }
                node.pending -= 1;
                self.settle_node(n, false);
            }
            for &n in &t.foreign {
                let node = &mut self.foreign.nodes.nodes[n as usize];
                if w.records > 0 {
                    let work = (w.records, w.ns, w.device, w.start, w.end);
                    node.acc.add(t.start, work, spans);
                    let r = &mut self.slots[node.slot as usize];
                    add_work(&mut r.foreign_own, (w.records, w.ns));
                }
                node.pending -= 1;
                self.settle_node(n, true);
            }
            if w.records > 0 {
                for key in &t.external {
                    let row = self.rows.entry(*key).or_default();
                    add_work(&mut row.gpu, (w.records, w.ns));
                    add_work(&mut row.process_gpu, (w.records, w.ns));
                }
                for key in &t.external_process {
                    let row = self.rows.entry(*key).or_default();
                    add_work(&mut row.process_gpu, (w.records, w.ns));
                }
            }
        }
    }

    /// The earliest start that GPU work given after a record starting at `time` can add to
    /// a range's span: work still to come starts at `time` or later, work already come but
    /// not yet added to its ranges (its call's records not all come, or its call still to
    /// come) where it started.
    pub fn floor(&self, time: u64) -> u64 {
        let calls = self.calls.values().map(|c| &c.work);
        let early = self.early.values().map(|e| &e.0);
        calls
            .chain(early)
            .filter(|w| w.records > 0)
            .map(|w| w.start)
            .fold(time, u64::min)
    }

    /// Gives `f` the spans of the GPU work of ranges not yet over ([`Mode::Tracks`]) that
    /// start before `floor` ([`Projector::floor`]): no later work can start them earlier, though
    /// it may end them later.
    pub fn gpu_spans(&self, floor: u64, mut f: impl FnMut(LiveSpan)) {
        let mut so_far: FastMap<u32, Spans> = Default::default();
        let own = self.nodes.live_spans();
        for (slot, spans) in own.into_iter().chain(self.foreign.nodes.live_spans()) {
            merge_spans(so_far.entry(slot).or_default(), &spans);
        }
        for (i, s) in self.slots.iter().enumerate().filter(|(_, s)| s.live) {
            let mut spans = s.acc.spans.clone();
            merge_spans(&mut spans, &s.foreign.spans);
            if let Some(live) = so_far.get(&(i as u32)) {
                merge_spans(&mut spans, live);
            }
            for &span in spans.iter().filter(|sp| sp.1 < floor) {
                f(LiveSpan {
                    id: s.begun,
                    tid: s.tid,
                    message: s.message,
                    span,
                });
            }
        }
    }

    /// Ends the stream: calls whose work did not all come (cut by damage) get what came;
    /// ranges that ended are over, those that did not are counted open (and stay held, for
    /// [`Projector::gpu_spans`]). Once.
    pub fn close(&mut self) {
        self.closed = true;
        let calls: Vec<Call> = self.calls.drain().map(|(_, c)| c).collect();
        for c in calls {
            self.settle(c);
        }
        self.early.clear();
        let tids: Vec<u64> = self.threads.keys().copied().collect();
        for tid in tids {
            self.seal(tid, u64::MAX, true);
        }
        self.open = 0;
        for i in 0..self.slots.len() as u32 {
            let s = &mut self.slots[i as usize];
            if !s.live {
                continue;
            }
            if s.end.is_some() {
                s.sealed = true;
                self.over(i);
            } else {
                self.open += 1;
            }
        }
    }

    /// The ranges over so far ([`Mode::Collect`]) with their order of beginning, in the order
    /// they were over, taken (a caller that takes them as they come holds none). `t`: names.
    pub fn take_ranges(&mut self, t: &Trace) -> Vec<(u64, super::stats::NvtxRange)> {
        super::outcome::ranges_of(t, self.pid, std::mem::take(&mut self.ranges))
    }

    /// What was worked out ([`Projector::close`] first, if not yet). `t`: the trace, for the
    /// names.
    pub fn finish(mut self, t: &Trace) -> Projected {
        if !self.closed {
            self.close();
        }
        let (open, marks) = (self.open, self.marks);
        projected(t, self.pid, (open, marks), self.acc, self.ranges, self.rows)
    }
}
