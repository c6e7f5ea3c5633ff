//! The correlation-id join's table: the API record of each id of a window of ids, for the GPU
//! and synchronization records with those ids to look up.
//!
//! The windows follow the ids the API records hold: each starts at the least id not yet
//! joined that an API record has, so a stray id far from the others (a damaged record) costs
//! one window, not the windows of all the ids between. Moving to a new window empties the
//! table without writing its slots: each slot has the number of the window it was written in, a
//! byte (so that 2^22 ids take 68 MiB, not 64 + 16), the bytes zeroed once every 255 windows.

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
    slots: Vec<Slot>,
    /// The window each slot was written in (0: none).
    written: Vec<u8>,
    window: u8,
}

impl IdTable {
    /// A table for windows of `len` ids (at least 1).
    pub(crate) fn new(len: usize) -> IdTable {
        let len = len.max(1);
        IdTable {
            lo: 0,
            slots: vec![
                Slot {
                    start: 0,
                    function: 0,
                    rank: 0,
                };
                len
            ],
            written: vec![0; len],
            window: 0,
        }
    }

    /// Starts the window of ids `lo..=self.hi()`, empty.
    pub(crate) fn window(&mut self, lo: u64) {
        self.lo = lo;
        if self.window == u8::MAX {
            self.written.iter_mut().for_each(|w| *w = 0);
            self.window = 0;
        }
        self.window += 1;
    }

    /// The last id of the window.
    pub(crate) fn hi(&self) -> u64 {
        self.lo.saturating_add(self.slots.len() as u64 - 1)
    }

    fn index(&self, id: u64) -> Option<usize> {
        (id >= self.lo && id <= self.hi()).then(|| (id - self.lo) as usize)
    }

    /// Notes the API record `slot` with id `id` (in the window), unless a record of a higher
    /// rank has the id.
    pub(crate) fn note(&mut self, id: u64, slot: Slot) {
        if let Some(i) = self.index(id) {
            if self.written[i] != self.window || slot.rank >= self.slots[i].rank {
                self.slots[i] = slot;
                self.written[i] = self.window;
            }
        }
    }

    /// The API record with id `id`: `None` outside the window or when no record has it.
    pub(crate) fn get(&self, id: u64) -> Option<Slot> {
        self.index(id)
            .filter(|&i| self.written[i] == self.window)
            .map(|i| self.slots[i])
    }

    /// Whether `id` is in the window.
    pub(crate) fn holds(&self, id: u64) -> bool {
        self.index(id).is_some()
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
            (t.hi(), t.holds(9), t.holds(13), t.holds(14)),
            (13, false, true, false)
        );
        t.note(11, slot(5, 2));
        t.note(11, slot(6, 1)); // a lower rank loses
        t.note(11, slot(7, 2)); // an equal rank, later, wins
        t.note(20, slot(8, 0)); // outside: not noted
        assert_eq!(t.get(11), Some(slot(7, 2)));
        assert_eq!(t.get(12), None);
        assert_eq!(t.get(20), None);
        // The next window starts empty, whatever the slots still hold.
        t.window(1u64 << 62);
        assert_eq!(t.get(11), None);
        assert_eq!(t.get((1u64 << 62) + 1), None);
        t.note((1u64 << 62) + 1, slot(9, 0));
        assert_eq!(t.get((1u64 << 62) + 1), Some(slot(9, 0)));
        // A window at the top of the ids ends at u64::MAX.
        t.window(u64::MAX - 1);
        assert_eq!(t.hi(), u64::MAX);
        t.note(u64::MAX, slot(1, 0));
        assert_eq!(t.get(u64::MAX), Some(slot(1, 0)));
    }

    #[test]
    fn window_numbers_wrap_without_stale_slots() {
        let mut t = IdTable::new(2);
        t.window(0);
        t.note(0, slot(1, 0));
        t.window = u8::MAX - 1;
        t.window(0);
        t.note(1, slot(2, 0));
        t.window(0); // wraps: every slot marked unwritten
        assert_eq!((t.get(0), t.get(1)), (None, None));
    }
}
