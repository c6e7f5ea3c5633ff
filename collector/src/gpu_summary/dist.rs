//! Exact statistics of a set of durations without keeping the durations: count, total, min,
//! max, sum of squares, and the median by selection over passes.
//!
//! The median is that of `nsys stats` and pandas: the middle value of an odd count, the mean
//! of the two middle values of an even one (rounded down to a whole ns, as the mean is).
//! A [`Dist`] counts each distinct value while there are at most [`EXACT_VALUES`] of them
//! (enough for the median in one pass). Past that it keeps a histogram of [`LOG_BUCKETS`]
//! buckets of logarithmic width, which tells the range holding each middle value, and how
//! many values it holds; further passes over the same values ([`Dist::select`]) look at those
//! in each range. A range that holds no more values than a pass has buckets ([`SELECT_BUCKETS`])
//! has them kept, and its middle value picked from them once the pass ends. A range holding
//! more is counted in that many buckets, narrowing it to one bucket for the next pass; where
//! the buckets are many (a pass given more than [`SELECT_BUCKETS`]: [`TALLY_BUCKETS`]), its
//! distinct values are counted exactly too while they are few: a middle value among at most
//! [`EXACT_VALUES`] distinct values in its range is then settled by the pass however wide the
//! range. Memory per distribution: at most about 16 KiB with the default buckets (two
//! selections of 1024 counts or values), whatever the number of values; a quarter more
//! beside larger counts.
//!
//! The standard deviation is the sample one (n − 1 in the denominator), as `nsys stats`
//! reports it, exact from the integer sums Σx and Σx² (in 192 bits: [`super::squares`]).

use super::common::middle_mean;
use super::squares::{sample_stddev, Squares};
use tally::Tally;
pub use tally::EXACT_VALUES;

/// Sub-buckets per power of two of the logarithmic histogram.
const SUB: u32 = 16;
/// Buckets of the logarithmic histogram: values below `SUB` one each, then `SUB` per power of
/// two.
pub const LOG_BUCKETS: usize = (SUB as usize) * 61;
/// Buckets of a selection pass.
pub const SELECT_BUCKETS: u128 = 1024;
/// The fewest buckets of a range's counts beside which its distinct values are counted exactly
/// too ([`Seen::Counts`]): the exact counts (at most [`EXACT_VALUES`], about 8 KiB) then add at
/// most a quarter to what the pass holds for the range.
const TALLY_BUCKETS: usize = 4096;

/// The logarithmic bucket of `v`: exact below `SUB`, then `SUB` buckets per power of two.
fn log_bucket(v: u64) -> usize {
    if v < u64::from(SUB) {
        return v as usize;
    }
    let k = 63 - v.leading_zeros(); // 4..=63
    let shift = k - SUB.trailing_zeros();
    let sub = ((v >> shift) as u32) - SUB; // 0..SUB
    ((k - SUB.trailing_zeros() + 1) * SUB + sub) as usize
}

/// The smallest value of log bucket `b`, and its largest.
fn log_range(b: usize) -> (u64, u64) {
    let b = b as u32;
    if b < SUB {
        return (u64::from(b), u64::from(b));
    }
    let shift = b / SUB - 1;
    let sub = u64::from(b % SUB + SUB);
    let lo = sub << shift;
    (lo, lo + ((1u64 << shift) - 1))
}

/// Where one middle value is being looked for.
#[derive(Clone, Debug)]
struct Select {
    /// The range holding it (inclusive), and how many values are below `lo`.
    lo: u64,
    hi: u64,
    below: u64,
    /// What the current pass has seen of the values in the range.
    seen: Seen,
}

/// What a selection pass keeps of the values in a middle value's range.
#[derive(Clone, Debug)]
enum Seen {
    /// Every one (the range holds no more than the pass's buckets), sorted as the pass ends.
    Values(Vec<u64>),
    /// Their counts over the range in buckets of `width`, a power of two (`1 << shift`: a
    /// value's bucket is a shift, not a division); and, where a bucket is wider than one
    /// value and the buckets are at least [`TALLY_BUCKETS`], each distinct value's count
    /// while they are few (`None` once they are not, or where not counted).
    Counts {
        width: u128,
        shift: u32,
        counts: Vec<u64>,
        tally: Option<Tally>,
    },
}

/// One middle value: being looked for, or found.
#[derive(Clone, Debug)]
enum Middle {
    Select(Select),
    /// The upper middle value, looked for in the same range as the lower one, with its
    /// counts (counted once: an even count's two middle values are most often in one range).
    Same,
    Found(u64),
}

#[derive(Clone, Debug)]
enum Values {
    /// Each distinct value and how many times it came.
    Exact(Tally),
    /// Counts per [`log_bucket`].
    Log(Box<[u64]>),
    /// The middle values' ranges (the lower and the upper middle value; one where the
    /// count is odd), narrowed by passes.
    Select(Box<[Middle]>),
    /// The median, found.
    Median(u64),
}

/// Count, sum, min, max, sum of squares and (exactly) the median of durations.
#[derive(Clone, Debug)]
pub struct Dist {
    pub count: u64,
    pub total: u128,
    pub min: u64,
    pub max: u64,
    /// Σx², exactly.
    squares: Squares,
    values: Values,
}

impl Default for Dist {
    fn default() -> Self {
        Dist {
            count: 0,
            total: 0,
            min: u64::MAX,
            max: 0,
            squares: Squares::default(),
            values: Values::Exact(Tally::default()),
        }
    }
}

impl Dist {
    /// Adds one value (the first pass).
    #[inline]
    pub fn add(&mut self, v: u64) {
        self.count += 1;
        self.total += u128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.squares.add(v);
        match &mut self.values {
            Values::Exact(tally) => {
                if !tally.add(v) {
                    self.switch_to_log();
                }
            }
            Values::Log(h) => h[log_bucket(v)] += 1,
            Values::Select(_) | Values::Median(_) => {}
        }
    }

    /// From exact counts to the histogram (out of line: [`Dist::add`]'s common cases stay
    /// small enough to inline).
    #[inline(never)]
    fn switch_to_log(&mut self) {
        let mut h = vec![0u64; LOG_BUCKETS].into_boxed_slice();
        if let Values::Exact(tally) = &self.values {
            for (v, n) in tally.counts() {
                h[log_bucket(v)] += n;
            }
        }
        self.values = Values::Log(h);
    }

    /// Adds every value of `other` (both from first passes).
    pub fn merge(&mut self, other: &Dist) {
        self.count += other.count;
        self.total += other.total;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.squares.merge(&other.squares);
        if let Values::Log(_) = other.values {
            if let Values::Exact(_) = self.values {
                self.switch_to_log();
            }
        }
        match (&mut self.values, &other.values) {
            (Values::Exact(a), Values::Exact(b)) => {
                let exact = a.merge(b);
                if !exact {
                    self.switch_to_log();
                }
            }
            (Values::Log(a), Values::Exact(b)) => {
                for (v, n) in b.counts() {
                    a[log_bucket(v)] += n;
                }
            }
            (Values::Log(a), Values::Log(b)) => {
                for (x, y) in a.iter_mut().zip(b.iter()) {
                    *x += y;
                }
            }
            _ => {}
        }
    }

    /// The ranks of the middle values among the sorted values: the lower and the upper
    /// (the same where the count is odd).
    fn ranks(&self) -> [u64; 2] {
        let n = self.count.max(1);
        [(n - 1) / 2, n / 2]
    }

    /// Ends a pass. True when the median needs another pass over the same values
    /// ([`Dist::select`] for each of them, then `end_pass` again).
    pub fn end_pass(&mut self) -> bool {
        self.end_pass_with(SELECT_BUCKETS)
    }

    /// [`Dist::end_pass`], the next pass counting in up to `buckets` buckets (at least
    /// [`SELECT_BUCKETS`]): a range of up to that many values is settled in one pass.
    pub fn end_pass_with(&mut self, buckets: u128) -> bool {
        let buckets = buckets.max(SELECT_BUCKETS);
        let [lower, upper] = self.ranks();
        let ranks: &[u64] = if lower == upper {
            &[lower]
        } else {
            &[lower, upper]
        };
        if let Values::Select(middles) = &mut self.values {
            middles.iter_mut().for_each(Middle::sort);
        }
        let mut middles: Vec<Middle> = match &self.values {
            Values::Exact(tally) => {
                let median = middle_mean(tally.value_of_rank(lower), tally.value_of_rank(upper));
                self.values = Values::Median(median);
                return false;
            }
            Values::Log(h) => ranks
                .iter()
                .map(|&rank| {
                    let mut below = 0;
                    for (b, &n) in h.iter().enumerate() {
                        if below + n > rank {
                            let (lo, hi) = log_range(b);
                            let (lo, hi) = (lo.max(self.min), hi.min(self.max));
                            return Select::search((lo, hi), below, n, buckets);
                        }
                        below += n;
                    }
                    Middle::Found(0)
                })
                .collect(),
            Values::Select(middles) => middles
                .iter()
                .zip(ranks)
                .map(|(m, &rank)| match m {
                    Middle::Found(v) => Middle::Found(*v),
                    Middle::Select(s) => s.narrow(rank, buckets),
                    Middle::Same => match &middles[0] {
                        Middle::Select(s) => s.narrow(rank, buckets),
                        _ => Middle::Found(0),
                    },
                })
                .collect(),
            Values::Median(_) => return false,
        };
        if matches!(&middles[..], [Middle::Select(a), Middle::Select(b)]
            if (a.lo, a.hi, a.below) == (b.lo, b.hi, b.below))
        {
            middles[1] = Middle::Same;
        }
        let found: Vec<u64> = middles
            .iter()
            .filter_map(|m| match m {
                Middle::Found(v) => Some(*v),
                Middle::Select(_) | Middle::Same => None,
            })
            .collect();
        if found.len() == middles.len() {
            self.values = Values::Median(middle_mean(found[0], found[found.len() - 1]));
            false
        } else {
            self.values = Values::Select(middles.into_boxed_slice());
            true
        }
    }

    /// Counts a value again, in a selection pass.
    #[inline]
    pub fn select(&mut self, v: u64) {
        if let Values::Select(middles) = &mut self.values {
            for m in middles.iter_mut() {
                if let Middle::Select(s) = m {
                    s.take(v);
                }
            }
        }
    }

    /// Adds the counts `other`, a copy of this one taken when the pass began and given other
    /// values ([`Dist::select`]), made in this pass: a pass split over several threads.
    pub fn add_selected(&mut self, other: &Dist) {
        if let (Values::Select(mine), Values::Select(theirs)) = (&mut self.values, &other.values) {
            for (m, o) in mine.iter_mut().zip(theirs) {
                if let (Middle::Select(m), Middle::Select(o)) = (m, o) {
                    m.add(o);
                }
            }
        }
    }

    /// Whether a selection pass is under way.
    pub fn selecting(&self) -> bool {
        matches!(self.values, Values::Select(_))
    }

    /// The median (valid once [`Dist::end_pass`] returned false); 0 without values.
    pub fn median(&self) -> u64 {
        match &self.values {
            Values::Median(m) => *m,
            _ => 0,
        }
    }

    /// The statistics, once the passes are over.
    pub(crate) fn stats(&self) -> super::common::Stats {
        let n = u128::from(self.count.max(1));
        super::common::Stats {
            count: self.count,
            total: self.total,
            mean: (self.total / n) as u64,
            median: if self.count == 0 { 0 } else { self.median() },
            min: if self.count == 0 { 0 } else { self.min },
            max: self.max,
            stddev: self.stddev(),
        }
    }

    /// Sample standard deviation, rounded down ([`sample_stddev`]).
    fn stddev(&self) -> u64 {
        sample_stddev(self.count, self.total, self.squares)
    }
}

impl Middle {
    /// Sorts the values kept of its range, as a pass ends.
    fn sort(&mut self) {
        if let Middle::Select(Select {
            seen: Seen::Values(v),
            ..
        }) = self
        {
            v.sort_unstable();
        }
    }
}

impl Select {
    /// The middle value's search over `lo..=hi`, which holds `n` values (`below` values under
    /// `lo`), in a pass of up to `buckets` buckets: found where the range is one value wide;
    /// its values kept where they are no more than the buckets.
    fn search((lo, hi): (u64, u64), below: u64, n: u64, buckets: u128) -> Middle {
        if lo >= hi {
            return Middle::Found(lo);
        }
        let seen = if u128::from(n) <= buckets {
            // Room for them all: the vector does not grow past them (a copy taken for another
            // thread starts empty, holding none of it).
            Seen::Values(Vec::with_capacity(usize::try_from(n).unwrap_or(0)))
        } else {
            let span = u128::from(hi) - u128::from(lo) + 1;
            let width = span.div_ceil(buckets).max(1).next_power_of_two();
            let counts = span.div_ceil(width) as usize;
            Seen::Counts {
                width,
                shift: width.trailing_zeros(),
                counts: vec![0; counts],
                // Buckets one value wide settle the middle value without it.
                tally: (width > 1 && counts >= TALLY_BUCKETS).then(Tally::default),
            }
        };
        Middle::Select(Select {
            lo,
            hi,
            below,
            seen,
        })
    }

    /// Sees one value of a pass.
    #[inline]
    fn take(&mut self, v: u64) {
        if v < self.lo || v > self.hi {
            return;
        }
        match &mut self.seen {
            Seen::Values(values) => values.push(v),
            Seen::Counts {
                shift,
                counts,
                tally,
                ..
            } => {
                // A width is at most 2^64 / SELECT_BUCKETS: a shift under 64.
                counts[((v - self.lo) >> *shift) as usize] += 1;
                if let Some(t) = tally {
                    if !t.add(v) {
                        *tally = None;
                    }
                }
            }
        }
    }

    /// Adds what `other` (a copy taken as the pass began) saw of other values of the pass.
    fn add(&mut self, other: &Select) {
        match (&mut self.seen, &other.seen) {
            (Seen::Values(mine), Seen::Values(theirs)) => mine.extend_from_slice(theirs),
            (
                Seen::Counts { counts, tally, .. },
                Seen::Counts {
                    counts: their_counts,
                    tally: their_tally,
                    ..
                },
            ) => {
                counts
                    .iter_mut()
                    .zip(their_counts)
                    .for_each(|(a, b)| *a += b);
                *tally = match (tally.take(), their_tally) {
                    (Some(mut t), Some(o)) => t.merge(o).then_some(t),
                    _ => None,
                };
            }
            _ => {}
        }
    }

    /// After a pass (its values sorted: [`Middle::sort`]): the value of rank `rank`, found
    /// among the values kept or counted exactly, or the bucket holding it, searched next in
    /// up to `buckets` buckets.
    fn narrow(&self, rank: u64, buckets: u128) -> Middle {
        let (width, counts) = match &self.seen {
            Seen::Values(v) => {
                let at = usize::try_from(rank.saturating_sub(self.below)).unwrap_or(usize::MAX);
                return Middle::Found(v.get(at).copied().unwrap_or(self.lo));
            }
            Seen::Counts { tally: Some(t), .. } => {
                return Middle::Found(t.value_of_rank(rank.saturating_sub(self.below)))
            }
            Seen::Counts { width, counts, .. } => (*width, counts),
        };
        let mut below = self.below;
        for (b, &n) in counts.iter().enumerate() {
            if below + n > rank {
                let lo = u128::from(self.lo) + b as u128 * width;
                let hi = (lo + width - 1).min(u128::from(self.hi));
                return Select::search((lo as u64, hi as u64), below, n, buckets);
            }
            below += n;
        }
        Middle::Found(self.lo)
    }
}

mod tally;
#[cfg(test)]
mod tests;
