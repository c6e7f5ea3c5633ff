//! GPU utilisation from records fed in any order: the union of their intervals, settled as
//! far as a watermark (no record still to come starts before it) allows.

use super::common::{Hundredths, Utilisation};
use super::fast_hash::FastMap;
use std::collections::BinaryHeap;

/// The union of the intervals of one device or stream, built incrementally.
///
/// Records mostly come in order of start (one stream's, a chunk at a time) and extend the
/// interval that starts last; the others wait, as they came, until a sweep sorts and merges
/// them and settles those that end before the watermark (no record still to come starts
/// before it, so none can touch them). A sweep comes once the intervals waiting are twice
/// as many as the last sweep kept (and at least [`SWEEP`]): each interval is sorted a few
/// times at most, and what waits is at most twice what the sweeps keep.
#[derive(Clone, Debug, Default)]
pub struct Union {
    records: u64,
    start: u64,
    end: u64,
    busy: u64,
    /// Merged intervals settled (each ended before the watermark).
    settled: u64,
    /// Intervals not yet settled, not merged with each other (but those a sweep left,
    /// which are disjoint and not touching); none of them is `last`.
    pending: Vec<(u64, u64)>,
    /// The interval records extend while they come in order of start.
    last: Option<(u64, u64)>,
    /// The least start of a record still to come, as last said ([`Union::settle`]).
    watermark: u64,
    /// How many intervals may wait before the next sweep.
    sweep_at: usize,
}

/// The fewest intervals waiting that a sweep is made for.
const SWEEP: usize = 4096;

impl Union {
    /// Adds the interval of one record; an end before its start counts as the start.
    #[inline]
    pub fn add(&mut self, start: u64, end: u64) {
        let end = end.max(start);
        if self.records == 0 {
            (self.start, self.end) = (start, end);
        } else {
            self.start = self.start.min(start);
            self.end = self.end.max(end);
        }
        self.records += 1;
        match &mut self.last {
            // Touching the last interval: one with it.
            Some((ls, le)) if start <= *le && end >= *ls => {
                *ls = (*ls).min(start);
                *le = (*le).max(end);
            }
            Some(last) => {
                self.pending.push(*last);
                *last = (start, end);
                if self.pending.len() >= self.sweep_at.max(SWEEP) {
                    self.sweep(self.watermark);
                }
            }
            None => self.last = Some((start, end)),
        }
    }

    /// Sorts and merges the intervals waiting (and the last), settling those that end before
    /// `watermark`; the one that starts last is the last again.
    fn sweep(&mut self, watermark: u64) {
        self.pending.extend(self.last.take());
        // A stable sort, for its merge of runs: what waits is a few runs already in order
        // (what the last sweep kept, then each chunk's records in time order), which it merges
        // in about one pass where a quicksort partitions them all (half the sort's time).
        self.pending.sort();
        let mut kept = 0;
        let mut i = 0;
        while i < self.pending.len() {
            let (s, mut e) = self.pending[i];
            i += 1;
            while i < self.pending.len() && self.pending[i].0 <= e {
                e = e.max(self.pending[i].1);
                i += 1;
            }
            if e < watermark {
                self.busy = self.busy.saturating_add(e - s);
                self.settled += 1;
            } else {
                self.pending[kept] = (s, e);
                kept += 1;
            }
        }
        self.pending.truncate(kept);
        self.last = self.pending.pop();
        self.sweep_at = 2 * self.pending.len();
    }

    /// Settles the intervals that end before `watermark` (when a sweep is due): no later
    /// record can touch them.
    pub fn settle(&mut self, watermark: u64) {
        self.watermark = self.watermark.max(watermark);
        if self.pending.len() >= self.sweep_at.max(SWEEP) {
            self.sweep(self.watermark);
        }
    }

    /// Intervals held, not yet settled.
    pub fn pending(&self) -> usize {
        self.pending.len() + usize::from(self.last.is_some())
    }

    /// The row, once every record was added.
    pub fn row(mut self, pid: u32, device: u32, stream: Option<u32>) -> Utilisation {
        self.sweep(u64::MAX);
        if let Some((s, e)) = self.last.take() {
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

/// A (device, stream) key, and where its unions are: the index of its device's in
/// [`Devices::devices`], and of its own among that device's streams.
type Placed = ((u32, u32), (usize, usize));

/// Slots of [`Devices::recent`].
const RECENT: usize = 16;

/// The slot of (device, stream) among [`Devices::recent`].
fn recent_slot(device: u32, stream: u32) -> usize {
    (stream ^ device.wrapping_mul(5)) as usize % RECENT
}

/// One device's union, and its streams' (in order of first record).
type DeviceUnions = (u32, Union, Vec<(u32, Union)>);

/// The utilisation rows of one process: a union per device and per stream.
#[derive(Debug, Default)]
pub struct Devices {
    devices: Vec<DeviceUnions>,
    /// (device, stream) → (index in `devices`, index in its streams).
    index: FastMap<(u32, u32), (usize, usize)>,
    /// Recent (device, stream) keys and where their unions are, in the slot [`recent_slot`]
    /// says: a device's streams take turns record by record (a chunk of kernels holds those
    /// of every thread), one slot each where their ids are few.
    recent: [Option<Placed>; RECENT],
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
            ..Devices::default()
        }
    }

    #[inline]
    pub fn add(&mut self, device: u32, stream: u32, start: u64, end: u64) {
        let key = (device, stream);
        let slot = recent_slot(device, stream);
        let (d, s) = match self.recent[slot] {
            Some((k, at)) if k == key => at,
            _ => {
                let at = self.place(key);
                self.recent[slot] = Some((key, at));
                at
            }
        };
        let (_, all, streams) = &mut self.devices[d];
        all.add(start, end);
        streams[s].1.add(start, end);
    }

    /// Where the unions of (device, stream) are, made if new.
    fn place(&mut self, key: (u32, u32)) -> (usize, usize) {
        if let Some(&at) = self.index.get(&key) {
            return at;
        }
        let d = match self.devices.iter().position(|(dev, _, _)| *dev == key.0) {
            Some(d) => d,
            None => {
                self.devices.push((key.0, Union::default(), Vec::new()));
                self.devices.len() - 1
            }
        };
        let streams = &mut self.devices[d].2;
        streams.push((key.1, Union::default()));
        let at = (d, streams.len() - 1);
        self.index.insert(key, at);
        at
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
        for (_, all, streams) in &mut self.devices {
            all.settle(watermark);
            for (_, u) in streams {
                u.settle(watermark);
            }
        }
    }

    /// The rows: per device (ascending), the device's, then each stream's (ascending).
    pub fn rows(mut self, pid: u32) -> Vec<Utilisation> {
        let mut rows = Vec::new();
        self.devices.sort_unstable_by_key(|(device, _, _)| *device);
        for (device, all, mut streams) in self.devices {
            rows.push(all.row(pid, device, None));
            streams.sort_unstable_by_key(|(stream, _)| *stream);
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
        // Growing the last interval back: touching it, and touching a pending one too.
        assert_eq!(union_of(&[(10, 20), (30, 40), (25, 30)], false), (25, 1));
        assert_eq!(union_of(&[(10, 20), (30, 40), (20, 30)], true), (30, 0));
        assert_eq!(union_of(&[(10, 20), (30, 40), (21, 29)], false), (28, 2));
    }

    /// Busy time and gaps of `iv` from the intervals sorted by start.
    fn sorted_union(iv: &[(u64, u64)]) -> (u64, u64) {
        let mut v = iv.to_vec();
        v.sort_unstable();
        let (mut busy, mut pieces) = (0, 0u64);
        let mut cur: Option<(u64, u64)> = None;
        for (s, e) in v {
            match &mut cur {
                Some((_, ce)) if s <= *ce => *ce = (*ce).max(e),
                _ => {
                    if let Some((cs, ce)) = cur {
                        busy += ce - cs;
                    }
                    pieces += 1;
                    cur = Some((s, e));
                }
            }
        }
        if let Some((cs, ce)) = cur {
            busy += ce - cs;
        }
        (busy, pieces.saturating_sub(1))
    }

    #[test]
    fn interleaved_streams_agree_with_the_sorted_computation() {
        // Four streams' kernels, each stream's in order, the streams interleaved as a
        // device's chunks give them (their starts going back and forth).
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        };
        let mut now = [0u64; 4];
        let mut iv = Vec::new();
        for i in 0..4000 {
            let s = i % 4;
            now[s] += next() % 50;
            let len = next() % 40;
            iv.push((now[s], now[s] + len));
            now[s] += len;
        }
        assert_eq!(union_of(&iv, false), sorted_union(&iv));
        assert_eq!(union_of(&iv[..500], true), sorted_union(&iv[..500]));
    }
}
