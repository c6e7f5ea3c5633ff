//! Timestamps of a clock of the program's (a CUPTI timestamp callback it registered) put on
//! rtrace's clock, from pairs of readings of both.

use std::collections::VecDeque;

/// Pairs `(program clock, rtrace clock)` read together, in increasing order of both; a time
/// is mapped by linear interpolation between the pairs around it (integer arithmetic: no
/// precision lost far from a reference), by the nearest segment outside them, and with a slope
/// of 1 while there is one pair or the program's clock has not moved.
#[derive(Default, Debug)]
pub struct ClockMap {
    pairs: VecDeque<(u64, u64)>,
}

impl ClockMap {
    pub const fn new() -> Self {
        ClockMap {
            pairs: VecDeque::new(),
        }
    }

    /// Pairs kept: the oldest go (GPU records are converted within seconds of their time).
    const KEEP: usize = 4096;

    /// Adds a pair; one that goes back on either clock, or repeats the last program time, is
    /// ignored.
    pub fn add(&mut self, program: u64, ours: u64) {
        if let Some(&(p, o)) = self.pairs.back() {
            if program <= p || ours < o {
                return;
            }
        }
        self.pairs.push_back((program, ours));
        if self.pairs.len() > Self::KEEP {
            self.pairs.pop_front();
        }
    }

    /// `t` of the program's clock on rtrace's clock; `t` itself without pairs; 0 stays 0 (an
    /// unknown time in a CUPTI record).
    pub fn map(&self, t: u64) -> u64 {
        if t == 0 || self.pairs.is_empty() {
            return t;
        }
        if self.pairs.len() == 1 {
            let (p, o) = self.pairs[0];
            return (o as i128 + (t as i128 - p as i128)).max(0) as u64;
        }
        // The segment [i, i+1] around `t`, or the first or last one outside.
        let after = self.pairs.partition_point(|&(p, _)| p <= t);
        let i = after.saturating_sub(1).min(self.pairs.len() - 2);
        let (p0, o0) = self.pairs[i];
        let (p1, o1) = self.pairs[i + 1];
        let (dp, dout) = (p1 as i128 - p0 as i128, o1 as i128 - o0 as i128);
        let v = o0 as i128 + (t as i128 - p0 as i128) * dout / dp;
        v.max(0) as u64
    }
}

/// Reads `program` and `ours` together, three times, and keeps the reading whose two program
/// clock reads are closest: the program's time is their midpoint.
pub fn read_pair(program: impl Fn() -> u64, ours: impl Fn() -> u64) -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..3 {
        let a = program();
        let b = ours();
        let c = program();
        let width = c.wrapping_sub(a);
        if width < best.0 {
            best = (width, a + width / 2, b);
        }
    }
    (best.1, best.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_pairs_times_are_ours_and_zero_stays_zero() {
        let m = ClockMap::default();
        assert_eq!(m.map(123), 123);
        let mut m = ClockMap::default();
        m.add(1_000, 50_000);
        assert_eq!(m.map(0), 0);
    }

    #[test]
    fn one_pair_is_an_offset() {
        let mut m = ClockMap::default();
        m.add(1_000_000_000, 5_000);
        assert_eq!(m.map(1_000_002_000), 7_000);
        assert_eq!(m.map(999_999_000), 4_000);
        // A clock that never moves (the same reading again) keeps the offset.
        m.add(1_000_000_000, 9_000);
        assert_eq!(m.map(1_000_000_500), 5_500);
    }

    #[test]
    fn interpolates_between_pairs_and_extends_the_outer_segments() {
        let mut m = ClockMap::default();
        // A TSC-like clock at 2.5 ticks per ns, then a segment at 2 ticks per ns.
        m.add(10_000, 1_000);
        m.add(35_000, 11_000);
        m.add(55_000, 21_000);
        assert_eq!(m.map(10_000), 1_000);
        assert_eq!(m.map(22_500), 6_000);
        assert_eq!(m.map(35_000), 11_000);
        assert_eq!(m.map(45_000), 16_000);
        assert_eq!(m.map(59_000), 23_000);
        assert_eq!(m.map(5_000), 0);
        assert_eq!(m.map(7_500), 0);
        assert_eq!(m.map(9_000), 600);
    }

    #[test]
    fn far_from_the_pairs_nothing_is_lost_to_rounding() {
        let mut m = ClockMap::default();
        // Ten minutes of a 3 GHz TSC against nanoseconds: exact to the nanosecond.
        m.add(3_000_000_000_000, 1_000_000_000_000);
        m.add(4_800_000_000_000, 1_600_000_000_000);
        assert_eq!(m.map(4_799_999_999_997), 1_599_999_999_999);
        assert_eq!(m.map(3_000_000_000_003), 1_000_000_000_001);
    }

    #[test]
    fn pairs_going_back_are_ignored_and_old_ones_dropped() {
        let mut m = ClockMap::default();
        m.add(100, 100);
        m.add(90, 200);
        m.add(200, 50);
        m.add(300, 300);
        assert_eq!(m.pairs.len(), 2);
        for i in 0..(ClockMap::KEEP as u64 + 10) {
            m.add(1_000 + i, 1_000 + i);
        }
        assert_eq!(m.pairs.len(), ClockMap::KEEP);
        assert_eq!(m.pairs[0], (1_010, 1_010));
    }

    #[test]
    fn a_pair_is_read_at_the_midpoint_of_the_program_reads() {
        let ticks = std::cell::Cell::new(0u64);
        let program = || {
            ticks.set(ticks.get() + 10);
            ticks.get()
        };
        assert_eq!(read_pair(program, || 7), (15, 7));
    }
}
