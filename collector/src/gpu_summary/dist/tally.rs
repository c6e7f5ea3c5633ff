//! Values counted exactly while they are few ([`Tally`]): a [`super::Dist`]'s values on its
//! first pass, and the values inside a middle value's range on a selection pass.

use crate::gpu_summary::fast_hash::FastMap;

/// Distinct values counted exactly before switching to the histogram.
pub const EXACT_VALUES: usize = 256;

/// Each distinct value and how many times it came, while there are at most [`EXACT_VALUES`]
/// of them. A value that comes again at once costs a compare, not a map entry: a kernel's or
/// copy's durations are often one value many times over (a synthetic trace's always are;
/// timers that tick in microseconds too).
#[derive(Clone, Debug, Default)]
pub(super) struct Tally {
    map: FastMap<u64, u64>,
    /// The last value added (in the map), and how many times it came again since, not yet
    /// added to its count there ([`Tally::settle`]).
    last: Option<u64>,
    again: u64,
}

impl Tally {
    /// Adds one value; false once the distinct values are more than [`EXACT_VALUES`] (the
    /// tally is then of no more use).
    #[inline]
    pub(super) fn add(&mut self, v: u64) -> bool {
        if self.last == Some(v) {
            self.again += 1;
            return true;
        }
        self.add_other(v)
    }

    /// Adds a value other than the last one (out of line: [`Tally::add`]'s common case stays
    /// small enough to inline).
    #[inline(never)]
    fn add_other(&mut self, v: u64) -> bool {
        self.settle();
        self.last = Some(v);
        *self.map.entry(v).or_insert(0) += 1;
        self.map.len() <= EXACT_VALUES
    }

    /// Adds the repeats of the last value to its count in the map.
    fn settle(&mut self) {
        if let (Some(last), again @ 1..) = (self.last, self.again) {
            *self.map.entry(last).or_insert(0) += again;
        }
        self.again = 0;
    }

    /// Adds every value of `other`; false once the distinct values are more than
    /// [`EXACT_VALUES`].
    pub(super) fn merge(&mut self, other: &Tally) -> bool {
        self.settle();
        for (v, n) in other.counts() {
            *self.map.entry(v).or_insert(0) += n;
        }
        self.map.len() <= EXACT_VALUES
    }

    /// Each distinct value and its count, in no order.
    pub(super) fn counts(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let pending = self.last.filter(|_| self.again > 0);
        self.map.iter().map(move |(&v, &n)| match pending {
            Some(last) if last == v => (v, n + self.again),
            _ => (v, n),
        })
    }

    /// The value of rank `rank` (from 0) among the values sorted; 0 past the last.
    pub(super) fn value_of_rank(&self, rank: u64) -> u64 {
        let mut v: Vec<(u64, u64)> = self.counts().collect();
        v.sort_unstable();
        let mut seen = 0;
        for (value, n) in v {
            seen += n;
            if seen > rank {
                return value;
            }
        }
        0
    }
}
