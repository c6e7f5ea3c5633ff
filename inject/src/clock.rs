//! Host time. Every timestamp in a trace is `CLOCK_MONOTONIC`, in ns (as a reader sees it).
//!
//! The hot path reads [`ticks`]: the CPU's time-stamp counter when the kernel itself keeps
//! time with it (clocksource `tsc`, invariant TSC), else `CLOCK_MONOTONIC` directly. Ticks
//! become `CLOCK_MONOTONIC` ns through a [`Calibration`]: pairs of (ticks, ns) read back to
//! back at every drain, interpolated piecewise linearly, so the conversion is exact at each
//! pair and follows the kernel's own clock adjustments. The consumer converts NVTX events'
//! times itself; API records it writes in ticks, followed by the pairs that convert them
//! ([`Calibration::write_trailer`]), and the reader converts them with the same function
//! (`rtrace_format::ticks`).

use crate::sys::{clock_ns as read, rdtsc};
use rtrace_format::ticks::{self, Segment};
use rtrace_format::ClockAnchor;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether [`ticks`] reads the TSC (decided once, at start-up).
static USE_TSC: AtomicBool = AtomicBool::new(false);

/// Now on the trace clock, in ns.
#[inline(always)]
pub fn now_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC)
}

/// A raw timestamp for a record: TSC ticks or ns (see [`Calibration::to_ns`]).
#[inline(always)]
pub fn ticks() -> u64 {
    if USE_TSC.load(Ordering::Relaxed) {
        rdtsc()
    } else {
        now_ns()
    }
}

/// Decides the tick source: the TSC only when the kernel's clocksource is `tsc` and the CPU
/// says its TSC is constant-rate and never stops. `RTRACE_CLOCK=monotonic` forces the
/// clock_gettime path.
pub fn choose_source(force_monotonic: bool) {
    let source =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .unwrap_or_default();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or("");
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    let tsc =
        !force_monotonic && source.trim() == "tsc" && has("constant_tsc") && has("nonstop_tsc");
    USE_TSC.store(tsc, Ordering::Relaxed);
}

/// Whether records carry TSC ticks.
pub fn uses_tsc() -> bool {
    USE_TSC.load(Ordering::Relaxed)
}

/// Monotonic and real-time clocks read back to back (the tighter of three tries).
pub fn anchor() -> ClockAnchor {
    let mut best = (u64::MAX, ClockAnchor::default());
    for _ in 0..3 {
        let a = now_ns();
        let r = read(libc::CLOCK_REALTIME);
        let b = now_ns();
        if b - a < best.0 {
            best = (
                b - a,
                ClockAnchor {
                    monotonic_ns: a + (b - a) / 2,
                    realtime_ns: r,
                },
            );
        }
    }
    best.1
}

/// One (ticks, ns) pair, read back to back (the tighter of three tries).
fn pair() -> (u64, u64) {
    let mut best = (u64::MAX, (0, 0));
    for _ in 0..3 {
        let a = rdtsc();
        let ns = now_ns();
        let b = rdtsc();
        if b.wrapping_sub(a) < best.0 {
            best = (b.wrapping_sub(a), (a + (b - a) / 2, ns));
        }
    }
    best.1
}

/// The least time between two calibration pairs.
const MIN_SAMPLE_GAP_NS: u64 = 1_000_000;

/// Converts ticks to ns. Consumer-owned; keeps the pairs of the last
/// [`Calibration::CAPACITY`] samples (more than the longest a record waits in a buffer).
pub struct Calibration {
    /// Whether timestamps are TSC ticks (fixed at start-up, before the first record).
    tsc: bool,
    samples: VecDeque<(u64, u64)>,
    /// The segment used last (records come mostly in order), in the short form.
    hint: std::cell::Cell<Hint>,
}

/// A [`Segment`] whose slope fits 64 bits (every time-stamp counter: under 2^32 ns a tick),
/// for the conversion of nearly every timestamp: a range check, one 64x64-bit multiply and a
/// shift, with the same result as [`Segment::at`]. `lo > hi`: none.
#[derive(Clone, Copy)]
struct Hint {
    lo: u64,
    hi: u64,
    t0: u64,
    n0: u64,
    per_tick: u64,
}

impl Hint {
    const NONE: Hint = Hint {
        lo: 1,
        hi: 0,
        t0: 0,
        n0: 0,
        per_tick: 0,
    };

    fn of(seg: &Segment) -> Hint {
        match u64::try_from(seg.per_tick) {
            Ok(per_tick) => Hint {
                lo: seg.lo,
                hi: seg.hi,
                t0: seg.t0,
                n0: seg.n0,
                per_tick,
            },
            Err(_) => Hint::NONE,
        }
    }

    /// As [`Segment::at`] (the same arithmetic, with the slope's high half known to be 0).
    #[inline(always)]
    fn at(&self, t: u64) -> u64 {
        const HALF: u128 = 1 << 31;
        if t >= self.t0 {
            let d = (u128::from(t - self.t0) * u128::from(self.per_tick) + HALF) >> 32;
            self.n0.saturating_add(d as u64)
        } else {
            let d = (u128::from(self.t0 - t) * u128::from(self.per_tick) + HALF) >> 32;
            self.n0.saturating_sub(d as u64)
        }
    }
}

impl Calibration {
    pub const CAPACITY: usize = 1024;

    /// Starts with one pair read now (before any record is made).
    pub fn new() -> Calibration {
        let tsc = uses_tsc();
        let mut samples = VecDeque::with_capacity(Self::CAPACITY);
        if tsc {
            samples.push_back(pair());
        }
        Calibration {
            tsc,
            samples,
            hint: std::cell::Cell::new(Hint::NONE),
        }
    }

    /// Reads a new pair (no allocation once at capacity). Call before converting a batch.
    pub fn sample(&mut self) {
        if !self.tsc {
            return;
        }
        let p = pair();
        // Pairs at least 1 ms apart: a pair read back to back is off by tens of ns, which over a
        // short segment would tilt its slope (and could put a later call before an earlier one).
        if self
            .samples
            .back()
            .is_some_and(|&(t, n)| p.0 <= t || p.1 < n + MIN_SAMPLE_GAP_NS)
        {
            return;
        }
        if self.samples.len() == Self::CAPACITY {
            self.samples.pop_front();
        }
        self.samples.push_back(p);
        self.hint.set(Hint::NONE);
    }

    /// The latest pair read (ticks, ns); with no time-stamp counter, ticks are ns.
    pub fn latest(&self) -> (u64, u64) {
        match self.samples.back() {
            Some(&p) if self.tsc => p,
            _ => {
                let n = now_ns();
                (n, n)
            }
        }
    }

    /// `CLOCK_MONOTONIC` ns of a raw timestamp made by [`ticks`].
    #[inline]
    pub fn to_ns(&self, t: u64) -> u64 {
        let hint = self.hint.get();
        if t >= hint.lo && t < hint.hi {
            return hint.at(t);
        }
        self.to_ns_searched(t)
    }

    /// Appends the trailer of a chunk of API records in ticks whose earliest timestamp is
    /// `earliest` (`rtrace_format::ticks`): the samples a reader needs to convert them as
    /// [`Calibration::to_ns`] does now.
    pub fn write_trailer(&self, out: &mut Vec<u8>, earliest: u64) {
        let s = &self.samples;
        let (samples, tsc) = if self.tsc {
            let first = ticks::first_needed(s.len(), |i| s[i].0, earliest);
            (s.range(first..), true)
        } else {
            (s.range(0..0), false)
        };
        ticks::write_trailer(out, samples.copied(), tsc);
    }

    /// [`Calibration::to_ns`] outside the last segment used: finds the segment.
    #[cold]
    fn to_ns_searched(&self, t: u64) -> u64 {
        if !self.tsc {
            return t;
        }
        match segment(&self.samples, t) {
            Some(seg) => {
                self.hint.set(Hint::of(&seg));
                seg.at(t)
            }
            None => convert(&self.samples, t),
        }
    }
}

impl Default for Calibration {
    fn default() -> Self {
        Self::new()
    }
}

/// The segment of `samples` that converts `t` (as [`convert`] picks it), if there are two
/// samples or more.
fn segment(samples: &VecDeque<(u64, u64)>, t: u64) -> Option<Segment> {
    ticks::segment(samples.len(), |i| samples[i], t)
}

/// Piecewise-linear interpolation over `samples` (ticks ascending), rounded to the nearest
/// ns; beyond either end, the nearest segment's slope (the format crate's, so that a reader
/// converting a chunk's ticks gets what the worker would have).
fn convert(samples: &VecDeque<(u64, u64)>, t: u64) -> u64 {
    ticks::convert(samples.len(), |i| samples[i], t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolates_piecewise_and_extrapolates_at_the_ends() {
        let s: VecDeque<(u64, u64)> = [(1000, 500), (3000, 1500), (5000, 2600)].into();
        assert_eq!(convert(&s, 1000), 500);
        assert_eq!(convert(&s, 2000), 1000);
        assert_eq!(convert(&s, 3000), 1500);
        assert_eq!(convert(&s, 4000), 2050);
        assert_eq!(convert(&s, 3999), 2049);
        assert_eq!(convert(&s, 2999), 1500); // 1499.5 rounds up
        assert_eq!(convert(&s, 7000), 3700);
        assert_eq!(convert(&s, 0), 0);
        assert_eq!(convert(&s, 500), 250);
    }

    #[test]
    fn cached_segments_convert_like_the_reference() {
        let samples: VecDeque<(u64, u64)> =
            [(1_000, 500), (3_000, 1_500), (5_000, 2_600), (9_000, 4_600)].into();
        let c = Calibration {
            tsc: true,
            samples: samples.clone(),
            hint: std::cell::Cell::new(Hint::NONE),
        };
        for t in [
            0, 500, 1_000, 2_000, 2_999, 3_000, 4_000, 5_000, 7_000, 9_000, 12_000, 4_500, 100,
        ] {
            assert_eq!(c.to_ns(t), convert(&samples, t), "t={t}");
        }
    }

    #[test]
    fn a_reader_converts_a_chunk_as_the_worker_would() {
        let samples: VecDeque<(u64, u64)> = (0..40u64)
            .map(|i| (1_000 + i * 2_000 + i * i, 500 + i * 1_000 + (i * 7) % 13))
            .collect();
        let c = Calibration {
            tsc: true,
            samples,
            hint: std::cell::Cell::new(Hint::NONE),
        };
        for first in [0, 900, 1_000, 17_001, 40_000, 79_000, 90_000] {
            let times: Vec<u64> = (0..200).map(|i| first + i * 397).collect();
            let mut payload = Vec::new();
            for (i, &t) in times.iter().enumerate() {
                let rec = rtrace_format::ApiRecord {
                    function: 1,
                    result: 0,
                    start_ns: t,
                    end_ns: t + 3 * i as u64,
                    correlation: i as u64,
                };
                rec.write_to(&mut payload);
            }
            c.write_trailer(&mut payload, first);
            let got = rtrace_format::ticks::decode_api_ticks(&payload).unwrap();
            for (r, (i, &t)) in got.iter().zip(times.iter().enumerate()) {
                let want = (c.to_ns(t), c.to_ns(t + 3 * i as u64));
                assert_eq!((r.start_ns, r.end_ns), want, "t={t}");
            }
        }
    }

    #[test]
    fn ticks_convert_to_the_monotonic_clock() {
        choose_source(false);
        let mut c = Calibration::new();
        let before = now_ns();
        let t = ticks();
        let after = now_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        c.sample();
        let ns = c.to_ns(t);
        // Within the bracket, allowing for the pair reads' own width.
        assert!(
            ns + 2_000 >= before && ns <= after + 2_000,
            "{before} {ns} {after}"
        );
    }
}
