//! What a call's GPU work adds to the ranges it was made in, without a step per range: each
//! thread's open ranges are a chain of nodes ([`Nodes`]), one per range, each pointing to the
//! node of the range below it; a call's work goes to the node on top ([`Acc`]), and a node,
//! once no call can come to it any more and its calls' work and its nodes above are all in,
//! hands what it gathered to its range and to the node below. So a call costs the same
//! whatever the number of ranges open around it, and every range gets the work of every call
//! made while it was open (when a range that is not on top is sealed, the nodes above it are
//! built again on the node below it, a step per range above it: ranges that end out of
//! nesting order).

/// The GPU work gathered for a range (or a node): records, summed GPU time, where the first
/// call's work ran and the span of it all, and per device the span ([`super::Mode::Tracks`]).
#[derive(Clone, Debug, Default)]
pub(super) struct Acc {
    pub(super) records: u64,
    pub(super) ns: u64,
    /// (start, index) of the first call with work, and the device of that call's work.
    pub(super) first: Option<((u64, u64), u32)>,
    /// First start and last end.
    pub(super) span: Option<(u64, u64)>,
    /// Per device: (device, first start, last end), by device.
    pub(super) spans: Spans,
}

impl Acc {
    /// Adds the work (records, ns, device, start, end) of the call whose (start, index) is
    /// `call`; `spans`: per device too.
    pub(super) fn add(&mut self, call: (u64, u64), w: (u64, u64, u32, u64, u64), spans: bool) {
        let (records, ns, device, start, end) = w;
        self.merge(
            &Acc {
                records,
                ns,
                first: Some((call, device)),
                span: Some((start, end)),
                spans: if spans {
                    vec![(device, start, end)]
                } else {
                    Vec::new()
                },
            },
            spans,
        );
    }

    /// Adds `o` (gathered from other calls).
    pub(super) fn merge(&mut self, o: &Acc, spans: bool) {
        if o.records == 0 {
            return;
        }
        self.records += o.records;
        self.ns = self.ns.saturating_add(o.ns);
        if self
            .first
            .is_none_or(|f| o.first.is_some_and(|g| g.0 < f.0))
        {
            self.first = o.first;
        }
        self.span = match (self.span, o.span) {
            (Some((s, e)), Some((s2, e2))) => Some((s.min(s2), e.max(e2))),
            (a, b) => a.or(b),
        };
        if spans {
            merge_spans(&mut self.spans, &o.spans);
        }
    }

    /// (device of the first call's work, first start, last end).
    pub(super) fn gpu_span(&self) -> Option<(u32, u64, u64)> {
        Some((self.first?.1, self.span?.0, self.span?.1))
    }
}

/// Per device, (device, first start, last end), by device.
pub(super) type Spans = Vec<(u32, u64, u64)>;

/// Adds the per-device spans `from` to `into` (both by device).
pub(super) fn merge_spans(into: &mut Spans, from: &[(u32, u64, u64)]) {
    for &(d, s, e) in from {
        match into.binary_search_by_key(&d, |x| x.0) {
            Ok(i) => {
                let x = &mut into[i];
                (x.1, x.2) = (x.1.min(s), x.2.max(e));
            }
            Err(i) => into.insert(i, (d, s, e)),
        }
    }
}

/// A node of a thread's chain of open ranges.
pub(super) struct Node {
    /// The range (its slot).
    pub(super) slot: u32,
    /// The node of the range below it when it was made.
    pub(super) below: Option<u32>,
    /// The work of its calls and of the nodes above it that are done.
    pub(super) acc: Acc,
    /// Its calls whose work is still to come, and the nodes above it not yet done.
    pub(super) pending: u32,
    /// No call or node can come to it any more.
    pub(super) closed: bool,
    /// Order of making: a node is made after the node below it.
    pub(super) made: u64,
    /// Not yet done (its place not free).
    pub(super) live: bool,
}

/// The nodes of every thread's chain.
#[derive(Default)]
pub(super) struct Nodes {
    pub(super) nodes: Vec<Node>,
    free: Vec<u32>,
    made: u64,
}

impl Nodes {
    /// A node of range `slot` on node `below`.
    pub(super) fn make(&mut self, slot: u32, below: Option<u32>) -> u32 {
        self.made += 1;
        let node = Node {
            slot,
            below,
            acc: Acc::default(),
            pending: 0,
            closed: false,
            made: self.made,
            live: true,
        };
        if let Some(b) = below {
            self.nodes[b as usize].pending += 1;
        }
        match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    /// Hands what node `n` gathered down the chain as far as nodes are done: `done` is given
    /// each done node's range and its work, from the top down.
    pub(super) fn settle(&mut self, mut n: u32, spans: bool, mut done: impl FnMut(u32, &Acc)) {
        loop {
            let node = &mut self.nodes[n as usize];
            if !node.closed || node.pending > 0 {
                return;
            }
            let acc = std::mem::take(&mut node.acc);
            let (slot, below) = (node.slot, node.below);
            node.live = false;
            self.free.push(n);
            done(slot, &acc);
            let Some(b) = below else {
                return;
            };
            let b_node = &mut self.nodes[b as usize];
            b_node.acc.merge(&acc, spans);
            b_node.pending -= 1;
            n = b;
        }
    }

    /// Per node not done, what it and the nodes above it not done gathered so far, per
    /// device (for the spans of ranges not over: [`super::Mode::Tracks`]), as (range, spans).
    pub(super) fn live_spans(&self) -> Vec<(u32, Spans)> {
        let mut order: Vec<u32> = (0..self.nodes.len() as u32)
            .filter(|&n| self.nodes[n as usize].live)
            .collect();
        order.sort_by_key(|&n| std::cmp::Reverse(self.nodes[n as usize].made));
        let mut partial: crate::gpu_summary::fast_hash::FastMap<u32, Spans> = Default::default();
        let mut out = Vec::with_capacity(order.len());
        for n in order {
            let node = &self.nodes[n as usize];
            let mut spans = partial.remove(&n).unwrap_or_default();
            merge_spans(&mut spans, &node.acc.spans);
            if let Some(b) = node.below {
                merge_spans(partial.entry(b).or_default(), &spans);
            }
            out.push((node.slot, spans));
        }
        out
    }
}

/// A thread's open ranges: those it began that a call could still be in, in order of
/// beginning, with the node of each, and those of them that ended.
#[derive(Default)]
pub(super) struct Chain {
    pub(super) open: Vec<u32>,
    pub(super) nodes: Vec<u32>,
    /// (end, order of beginning, slot), earliest end first.
    ended: std::collections::BinaryHeap<std::cmp::Reverse<(u64, u64, u32)>>,
}

impl Chain {
    /// Range `slot` begun: its node on top.
    pub(super) fn push(&mut self, slot: u32, nodes: &mut Nodes) {
        let n = nodes.make(slot, self.nodes.last().copied());
        self.open.push(slot);
        self.nodes.push(n);
    }

    /// Range `slot`, begun `begun`-th, ended at `end`.
    pub(super) fn ended(&mut self, end: u64, begun: u64, slot: u32) {
        self.ended.push(std::cmp::Reverse((end, begun, slot)));
    }

    /// The ranges that ended before `time` (every one that ended, with `all`), taken out of
    /// the ended ones, as (order of beginning, slot), the latest begun first; `still(slot,
    /// begun)`: whether that range is still to be sealed.
    pub(super) fn due(
        &mut self,
        time: u64,
        all: bool,
        still: impl Fn(u32, u64) -> bool,
    ) -> Vec<(u64, u32)> {
        let mut due = Vec::new();
        while let Some(&std::cmp::Reverse((end, begun, slot))) = self.ended.peek() {
            if end >= time && !all {
                break;
            }
            self.ended.pop();
            if still(slot, begun) {
                due.push((begun, slot));
            }
        }
        due.sort_unstable_by(|a, b| b.cmp(a));
        due
    }

    /// Takes range `slot` out: its node and those above it are closed, the ranges above it
    /// get new nodes on the one below it (`renewed` is told each). The closed node on top, to
    /// be settled; `None` when the range is not here.
    pub(super) fn remove(
        &mut self,
        slot: u32,
        nodes: &mut Nodes,
        mut renewed: impl FnMut(u32),
    ) -> Option<u32> {
        let k = self.open.iter().rposition(|&x| x == slot)?;
        self.open.remove(k);
        let old: Vec<u32> = self.nodes.drain(k..).collect();
        let mut below = self.nodes.last().copied();
        for &s in &self.open[k..] {
            let n = nodes.make(s, below);
            renewed(s);
            self.nodes.push(n);
            below = Some(n);
        }
        for &n in &old {
            nodes.nodes[n as usize].closed = true;
        }
        old.last().copied()
    }
}
