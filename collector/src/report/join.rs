//! The correlation-id join's table: the API record of each id of a window of ids, for the GPU
//! and synchronization records with those ids to look up.
//!
//! A window holds the ids of at most a fixed number of API records, however far apart the ids
//! are: it starts at the least id not yet joined and reaches as far as its records allow. The
//! first ids of the window (as many as it may hold) are slots of an array, the ids past them
//! entries of a hash map, so that dense ids (a real trace's) cost an array index and ids far
//! apart a map entry. When a record would make it hold more than its limit, the upper half of
//! its ids is let go and the window ends below them (the next window starts there): a window
//! costs one read of the API chunks that reach it, and the windows are as few as the records
//! need, whatever the span of the ids (ids 2^23 apart are one window, not one each). A new
//! window empties the array without writing its slots: each has the number of the window it
//! was written in (a byte, zeroed once every 255 windows).

use crate::model::IdMap;

/// The API record with one correlation id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) function: u32,
    /// Rank of its chunk in (thread, file) order: of two records with one id, the one of the
    /// higher rank wins (as [`crate::model::Trace::api_records_for`]).
    pub(crate) rank: u32,
}

const EMPTY: Slot = Slot {
    start: 0,
    end: 0,
    function: 0,
    rank: 0,
};

pub(crate) struct IdTable {
    lo: u64,
    hi: u64,
    most: usize,
    /// Ids `lo..lo + dense.len()`.
    dense: Vec<Slot>,
    /// The window each dense slot was written in (0: none).
    written: Vec<u8>,
    window: u8,
    /// Dense slots written this window.
    in_dense: usize,
    /// Ids past the dense ones.
    sparse: IdMap<Slot>,
}

impl IdTable {
    /// A table for windows of the ids of at most `most` API records (at least 1).
    pub(crate) fn new(most: usize) -> IdTable {
        IdTable {
            lo: 0,
            hi: u64::MAX,
            most: most.max(1),
            dense: Vec::new(),
            written: Vec::new(),
            window: 0,
            in_dense: 0,
            sparse: IdMap::default(),
        }
    }

    /// Starts the window of ids from `lo` on, empty; it reaches as far as
    /// [`IdTable::hi`] says once its records are noted. Dense ids (`dense`: every id a slot
    /// worth holding, as the join's keys, the ranks of the ids looked up: `referenced.rs`) make
    /// it the window of the `most` ids from `lo` on, all slots of the array (records of one id
    /// share its slot, as ever).
    pub(crate) fn window(&mut self, lo: u64, dense: bool) {
        self.lo = lo;
        self.hi = match dense {
            true => lo.saturating_add(self.most as u64 - 1),
            false => u64::MAX,
        };
        self.sparse.clear();
        self.in_dense = 0;
        if self.window == u8::MAX {
            self.written.iter_mut().for_each(|w| *w = 0);
            self.window = 0;
        }
        self.window += 1;
    }

    /// The last id of the window (so far: noting records may lower it).
    pub(crate) fn hi(&self) -> u64 {
        self.hi
    }

    /// The dense index of `id` (in the window).
    fn dense_index(&self, id: u64) -> Option<usize> {
        let i = id - self.lo;
        (i < self.most as u64).then_some(i as usize)
    }

    /// Notes the API record `slot` with id `id` (in the window), unless a record of a higher
    /// rank has the id.
    pub(crate) fn note(&mut self, id: u64, slot: Slot) {
        if !self.holds(id) {
            return;
        }
        match self.dense_index(id) {
            Some(i) => {
                if i >= self.dense.len() {
                    let len = (i + 1).max(self.dense.len() * 2).min(self.most);
                    // Room for the whole window at once: growing copies nothing, and only the
                    // pages written are touched.
                    if self.dense.capacity() < self.most {
                        self.dense.reserve_exact(self.most - self.dense.len());
                        self.written.reserve_exact(self.most - self.written.len());
                    }
                    self.dense.resize(len, EMPTY);
                    self.written.resize(len, 0);
                }
                if self.written[i] != self.window {
                    self.written[i] = self.window;
                    self.dense[i] = slot;
                    self.in_dense += 1;
                } else if slot.rank >= self.dense[i].rank {
                    self.dense[i] = slot;
                }
            }
            None => {
                let s = self.sparse.entry(id).or_insert(slot);
                if slot.rank >= s.rank {
                    *s = slot;
                }
            }
        }
        if self.in_dense + self.sparse.len() > self.most {
            self.halve();
        }
    }

    /// Lets the upper half of the ids go: the window ends at the greatest id kept.
    fn halve(&mut self) {
        let k = self.most / 2;
        if k < self.in_dense {
            // The (k + 1)-th dense id is the last kept; every sparse one goes.
            let mut seen = 0;
            let i = (0..self.dense.len())
                .find(|&i| {
                    seen += usize::from(self.written[i] == self.window);
                    seen == k + 1
                })
                .unwrap_or(0);
            for w in &mut self.written[i + 1..] {
                if *w == self.window {
                    *w = 0;
                }
            }
            self.in_dense = k + 1;
            self.sparse.clear();
            self.hi = self.lo + i as u64;
        } else {
            let mut ids: Vec<u64> = self.sparse.keys().copied().collect();
            let (_, &mut last, _) = ids.select_nth_unstable(k - self.in_dense);
            self.hi = last;
            self.sparse.retain(|&id, _| id <= last);
        }
    }

    /// The API record with id `id`: `None` outside the window or when no record has it.
    pub(crate) fn get(&self, id: u64) -> Option<Slot> {
        if !self.holds(id) {
            return None;
        }
        match self.dense_index(id) {
            Some(i) => (self.written.get(i) == Some(&self.window)).then(|| self.dense[i]),
            None => self.sparse.get(&id).copied(),
        }
    }

    /// Whether `id` is in the window.
    pub(crate) fn holds(&self, id: u64) -> bool {
        id >= self.lo && id <= self.hi
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(start: u64, rank: u32) -> Slot {
        Slot {
            start,
            end: start,
            function: 1,
            rank,
        }
    }

    #[test]
    fn a_window_holds_only_what_was_noted_in_it() {
        let mut t = IdTable::new(4);
        t.window(10, false);
        assert_eq!(
            (t.hi(), t.holds(9), t.holds(13), t.holds(u64::MAX)),
            (u64::MAX, false, true, true)
        );
        t.note(11, slot(5, 2));
        t.note(11, slot(6, 1)); // a lower rank loses
        t.note(11, slot(7, 2)); // an equal rank, later, wins
        t.note(9, slot(8, 0)); // below the window: not noted
        assert_eq!(t.get(11), Some(slot(7, 2)));
        assert_eq!((t.get(12), t.get(9)), (None, None));
        // The next window starts empty.
        t.window(1u64 << 62, false);
        assert_eq!(t.get(11), None);
        t.note((1u64 << 62) + 1, slot(9, 0));
        assert_eq!(t.get((1u64 << 62) + 1), Some(slot(9, 0)));
        t.window(u64::MAX - 1, false);
        t.note(u64::MAX, slot(1, 0));
        assert_eq!(t.get(u64::MAX), Some(slot(1, 0)));
    }

    #[test]
    fn a_full_dense_window_ends_below_the_ids_it_lets_go() {
        let mut t = IdTable::new(4);
        t.window(100, false);
        for id in [103u64, 100, 1 << 40, 101, 102] {
            t.note(id, slot(id, 0));
        }
        // Five ids: the upper half let go (the far one among them), ending at the third.
        assert_eq!(t.hi(), 102);
        assert_eq!(
            (100..104).map(|i| t.get(i).is_some()).collect::<Vec<_>>(),
            [true, true, true, false]
        );
        assert_eq!(t.get(1 << 40), None);
        // The next window starts past it, empty, and numbers wrap without stale slots.
        for _ in 0..300 {
            t.window(103, false);
        }
        assert_eq!((t.get(103), t.holds(102)), (None, false));
        t.note(103, slot(7, 0));
        assert_eq!(t.get(103), Some(slot(7, 0)));
    }

    #[test]
    fn a_dense_window_holds_its_ids_alone() {
        let mut t = IdTable::new(4);
        t.window(8, true);
        assert_eq!(
            (t.hi(), t.holds(7), t.holds(11), t.holds(12)),
            (11, false, true, false)
        );
        for id in [12u64, 8, 11, 9, 10, 1 << 40] {
            t.note(id, slot(id, 0));
        }
        // Ids past the window are not noted; the window stays whole.
        assert_eq!(t.hi(), 11);
        assert_eq!(
            (8..13).map(|i| t.get(i).is_some()).collect::<Vec<_>>(),
            [true, true, true, true, false]
        );
        t.window(u64::MAX - 1, true);
        assert_eq!(t.hi(), u64::MAX);
    }

    #[test]
    fn a_full_window_ends_below_the_ids_it_lets_go() {
        let mut t = IdTable::new(4);
        t.window(0, false);
        // Ids 2^23 apart, given out of order.
        for i in [3u64, 0, 4, 1, 2] {
            t.note(i << 23, slot(i, 0));
        }
        // Five ids: the upper half let go, the window ends at the third.
        assert_eq!(t.hi(), 2 << 23);
        assert_eq!(
            (0..5).map(|i| t.get(i << 23)).collect::<Vec<_>>(),
            [
                Some(slot(0, 0)),
                Some(slot(1, 0)),
                Some(slot(2, 0)),
                None,
                None
            ]
        );
        // Ids past the end are not noted any more.
        t.note(5 << 23, slot(5, 0));
        assert_eq!((t.get(5 << 23), t.holds(5 << 23)), (None, false));
    }
}
