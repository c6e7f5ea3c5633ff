//! The correlation-id join's table: the API record of each id of a window of ids, for the GPU
//! and synchronization records with those ids to look up.
//!
//! A window holds the ids of at most a fixed number of API records, however far apart the ids
//! are: it starts at the least id not yet joined and reaches as far as its records allow. The
//! table is a hash map by id; when a record would make it hold more than its limit, the upper
//! half of its ids is let go and the window ends below them (the next window starts there), so
//! a window costs one read of the API chunks that reach it, and the windows are as few as the
//! records need, whatever the span of the ids (ids 2^23 apart are one window, not one each).

use crate::model::IdMap;

/// The API record with one correlation id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) start: u64,
    pub(crate) function: u32,
    /// Rank of its chunk in (thread, file) order: of two records with one id, the one of the
    /// higher rank wins (as [`crate::model::Trace::api_records_for`]).
    pub(crate) rank: u32,
}

pub(crate) struct IdTable {
    lo: u64,
    hi: u64,
    most: usize,
    slots: IdMap<Slot>,
}

impl IdTable {
    /// A table for windows of the ids of at most `most` API records (at least 1).
    pub(crate) fn new(most: usize) -> IdTable {
        IdTable {
            lo: 0,
            hi: u64::MAX,
            most: most.max(1),
            slots: IdMap::default(),
        }
    }

    /// Starts the window of ids from `lo` on, empty; it reaches as far as
    /// [`IdTable::hi`] says once its records are noted.
    pub(crate) fn window(&mut self, lo: u64) {
        self.lo = lo;
        self.hi = u64::MAX;
        self.slots.clear();
    }

    /// The last id of the window (so far: noting records may lower it).
    pub(crate) fn hi(&self) -> u64 {
        self.hi
    }

    /// Notes the API record `slot` with id `id` (in the window), unless a record of a higher
    /// rank has the id.
    pub(crate) fn note(&mut self, id: u64, slot: Slot) {
        if !self.holds(id) {
            return;
        }
        let s = self.slots.entry(id).or_insert(slot);
        if slot.rank >= s.rank {
            *s = slot;
        }
        if self.slots.len() > self.most {
            self.halve();
        }
    }

    /// Lets the upper half of the ids go: the window ends at the greatest id kept.
    fn halve(&mut self) {
        let mut ids: Vec<u64> = self.slots.keys().copied().collect();
        let k = self.most / 2;
        let (_, &mut last, _) = ids.select_nth_unstable(k);
        self.hi = last;
        self.slots.retain(|&id, _| id <= last);
    }

    /// The API record with id `id`: `None` outside the window or when no record has it.
    pub(crate) fn get(&self, id: u64) -> Option<Slot> {
        self.slots.get(&id).copied().filter(|_| self.holds(id))
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
            function: 1,
            rank,
        }
    }

    #[test]
    fn a_window_holds_only_what_was_noted_in_it() {
        let mut t = IdTable::new(4);
        t.window(10);
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
        t.window(1u64 << 62);
        assert_eq!(t.get(11), None);
        t.note((1u64 << 62) + 1, slot(9, 0));
        assert_eq!(t.get((1u64 << 62) + 1), Some(slot(9, 0)));
        t.window(u64::MAX - 1);
        t.note(u64::MAX, slot(1, 0));
        assert_eq!(t.get(u64::MAX), Some(slot(1, 0)));
    }

    #[test]
    fn a_full_window_ends_below_the_ids_it_lets_go() {
        let mut t = IdTable::new(4);
        t.window(0);
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
