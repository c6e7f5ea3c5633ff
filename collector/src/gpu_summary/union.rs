//! GPU utilisation from records fed in any order: the union of their intervals, settled as
//! far as a watermark (no record still to come starts before it) allows.

use super::common::{Hundredths, Utilisation};
use std::collections::{BTreeMap, BinaryHeap};

/// The union of the intervals of one device or stream, built incrementally.
#[derive(Clone, Debug, Default)]
pub struct Union {
    records: u64,
    start: u64,
    end: u64,
    busy: u64,
    /// Merged intervals settled (each ended before the watermark).
    settled: u64,
    /// Merged intervals not yet settled: start → end, disjoint and not touching; all before
    /// `last`.
    pending: BTreeMap<u64, u64>,
    /// The pending interval that starts last, kept out of the map: records mostly come in
    /// order of start, and extend it.
    last: Option<(u64, u64)>,
}

impl Union {
    /// Adds the interval of one record; an end before its start counts as the start.
    pub fn add(&mut self, start: u64, end: u64) {
        let end = end.max(start);
        if self.records == 0 {
            (self.start, self.end) = (start, end);
        } else {
            self.start = self.start.min(start);
            self.end = self.end.max(end);
        }
        self.records += 1;
        match self.last {
            Some((ls, le)) if start >= ls => {
                if start <= le {
                    self.last = Some((ls, le.max(end)));
                } else {
                    self.pending.insert(ls, le);
                    self.last = Some((start, end));
                }
                return;
            }
            None if self.pending.is_empty() => {
                self.last = Some((start, end));
                return;
            }
            _ => {}
        }
        if let Some((ls, le)) = self.last.take() {
            self.pending.insert(ls, le);
        }
        let (mut s, mut e) = (start, end);
        // Touching intervals merge: those with start <= e and end >= s.
        while let Some((&ps, &pe)) = self.pending.range(..=e).next_back() {
            if pe < s {
                break;
            }
            self.pending.remove(&ps);
            s = s.min(ps);
            e = e.max(pe);
        }
        self.pending.insert(s, e);
        self.last = self.pending.pop_last();
    }

    /// Settles the intervals that end before `watermark`: no later record can touch them.
    pub fn settle(&mut self, watermark: u64) {
        while let Some(entry) = self.pending.first_entry() {
            if *entry.get() >= watermark {
                return;
            }
            let (s, e) = entry.remove_entry();
            self.busy = self.busy.saturating_add(e - s);
            self.settled += 1;
        }
        if let Some((s, e)) = self.last.filter(|&(_, e)| e < watermark) {
            self.busy = self.busy.saturating_add(e - s);
            self.settled += 1;
            self.last = None;
        }
    }

    /// Intervals held, not yet settled.
    pub fn pending(&self) -> usize {
        self.pending.len() + usize::from(self.last.is_some())
    }

    /// The row, once every record was added.
    pub fn row(mut self, pid: u32, device: u32, stream: Option<u32>) -> Utilisation {
        if let Some(last) = self.last.take() {
            self.pending.insert(last.0, last.1);
        }
        while let Some((s, e)) = self.pending.pop_first() {
            self.busy = self.busy.saturating_add(e - s);
            self.settled += 1;
        }
        let span_ns = self.end - self.start;
        Utilisation {
            pid,
            device,
            stream,
            records: self.records,
            start_ns: self.start,
            end_ns: self.end,
            span_ns,
            busy_ns: self.busy,
            busy_percent: Hundredths::percent(u128::from(self.busy), u128::from(span_ns)),
            gaps: self.settled.saturating_sub(1),
            idle_ns: span_ns - self.busy,
        }
    }
}

/// The utilisation rows of one process: a union per device and per stream.
#[derive(Debug, Default)]
pub struct Devices {
    devices: BTreeMap<u32, (Union, BTreeMap<u32, Union>)>,
    /// (earliest start, chunk) of the chunks not yet fed: the watermark is the least.
    unfed: BinaryHeap<std::cmp::Reverse<(u64, usize)>>,
    fed: Vec<bool>,
}

impl Devices {
    /// Expects chunks `0..starts.len()`, the earliest start of each's records.
    pub fn new(starts: impl Iterator<Item = u64>) -> Devices {
        let unfed: BinaryHeap<_> = starts
            .enumerate()
            .map(|(i, s)| std::cmp::Reverse((s, i)))
            .collect();
        Devices {
            fed: vec![false; unfed.len()],
            unfed,
            devices: BTreeMap::new(),
        }
    }

    #[inline]
    pub fn add(&mut self, device: u32, stream: u32, start: u64, end: u64) {
        let d = self.devices.entry(device).or_default();
        d.0.add(start, end);
        d.1.entry(stream).or_default().add(start, end);
    }

    /// Whether chunk `i` was fed.
    pub fn was_fed(&self, i: usize) -> bool {
        self.fed.get(i).copied().unwrap_or(true)
    }

    /// Chunk `i` was fed: settles what no chunk still to come can touch.
    pub fn fed(&mut self, i: usize) {
        if let Some(f) = self.fed.get_mut(i) {
            *f = true;
        }
        while let Some(std::cmp::Reverse((_, c))) = self.unfed.peek() {
            if !self.fed.get(*c).copied().unwrap_or(true) {
                break;
            }
            self.unfed.pop();
        }
        let watermark = self
            .unfed
            .peek()
            .map_or(u64::MAX, |std::cmp::Reverse((s, _))| *s);
        for (all, streams) in self.devices.values_mut() {
            all.settle(watermark);
            for u in streams.values_mut() {
                u.settle(watermark);
            }
        }
    }

    /// The rows: per device (ascending), the device's, then each stream's (ascending).
    pub fn rows(self, pid: u32) -> Vec<Utilisation> {
        let mut rows = Vec::new();
        for (device, (all, streams)) in self.devices {
            rows.push(all.row(pid, device, None));
            for (stream, u) in streams {
                rows.push(u.row(pid, device, Some(stream)));
            }
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn union_of(iv: &[(u64, u64)], settle_every: bool) -> (u64, u64) {
        let mut u = Union::default();
        for &(s, e) in iv {
            u.add(s, e);
            if settle_every {
                // Only what ends before the least start still to come.
                let rest = iv.iter().skip_while(|x| **x != (s, e)).skip(1);
                u.settle(rest.map(|x| x.0).min().unwrap_or(u64::MAX));
            }
        }
        let r = u.row(1, 0, None);
        (r.busy_ns, r.gaps)
    }

    #[test]
    fn unions_agree_with_the_sorted_computation() {
        let iv = [(40, 50), (15, 30), (10, 20), (30, 35), (42, 45), (60, 55)];
        assert_eq!(union_of(&iv, false), (35, 2));
        assert_eq!(union_of(&iv, true), (35, 2));
        assert_eq!(union_of(&[(0, 1), (2, 3), (4, 5)], true), (3, 2));
        assert_eq!(union_of(&[(5, 5), (5, 5)], false), (0, 0));
        // A long interval swallowing earlier ones, and one bridging two.
        assert_eq!(
            union_of(&[(10, 12), (20, 22), (12, 20), (0, 100)], true),
            (100, 0)
        );
    }
}
