//! API records in ticks (chunk kind 34, format 3.0): a thread's calls as its ring held them,
//! timestamps still raw, with the clock samples that convert them to `CLOCK_MONOTONIC` ns.
//!
//! ```text
//! payload := record[n] sample[k] ClockTrailer
//! record  := an ApiRecord (32 bytes) whose start_ns and end_ns are raw ticks
//! sample  := ticks:u64 ns:u64            (ticks ascending)
//! trailer := samples:u32 (k) flags:u32  (bit 0 TICKS_TSC: ticks are time-stamp-counter
//!                                         ticks; else they are already ns)
//! ```
//!
//! The library's worker copies the calls out of a ring as they are (no field decoded, no time
//! converted) and puts after them the samples of its calibration from the one that begins the
//! segment of the chunk's earliest timestamp to its latest: a reader converts each timestamp
//! with [`convert`] over them and gets exactly the ns the worker's own conversion (the same
//! function over all its samples) gives. The conversion is declared here once for both.

use crate::api::ApiRecord;
use crate::codec::record;

/// [`ClockTrailer::flags`]: the records' times are time-stamp-counter ticks.
pub const TICKS_TSC: u32 = 1;

record! {
    /// The last bytes of a kind-34 payload: how many clock samples are before it.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct ClockTrailer: 8 bytes {
        pub samples: u32,
        pub flags: u32,
    }
}

/// Bytes of one clock sample (ticks, ns).
pub const SAMPLE_LEN: usize = 16;

/// The line through two samples, and the ticks `lo..hi` it converts.
#[derive(Clone, Copy, Debug)]
pub struct Segment {
    pub lo: u64,
    pub hi: u64,
    pub t0: u64,
    pub n0: u64,
    /// ns per tick in 32.32 fixed point: the conversion is integer multiplies and a shift.
    pub per_tick: u128,
}

impl Segment {
    pub fn new(lo: u64, hi: u64, (t0, n0): (u64, u64), (t1, n1): (u64, u64)) -> Segment {
        let (dn, dt) = (u128::from(n1 - n0), u128::from(t1 - t0));
        Segment {
            lo,
            hi,
            t0,
            n0,
            per_tick: ((dn << 32) + dt / 2) / dt,
        }
    }

    /// The ns of `t`, rounded to the nearest (halves away from the segment's start). (The
    /// products wrap rather than panic: only a damaged file's slope could overflow them.)
    #[inline(always)]
    pub fn at(&self, t: u64) -> u64 {
        const HALF: u128 = 1 << 31;
        let scaled = |dt: u64| {
            (u128::from(dt)
                .wrapping_mul(self.per_tick)
                .wrapping_add(HALF)
                >> 32) as u64
        };
        if t >= self.t0 {
            self.n0.saturating_add(scaled(t - self.t0))
        } else {
            self.n0.saturating_sub(scaled(self.t0 - t))
        }
    }
}

/// The index of the segment (between sample `i` and `i + 1`) that converts `t`, of `n >= 2`
/// samples whose ticks `ticks(i)` ascend strictly: the one whose ticks hold `t`, else the
/// first or the last.
pub fn segment_index(n: usize, ticks: impl Fn(usize) -> u64, t: u64) -> usize {
    // How many samples are at or before `t`.
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if ticks(mid) <= t {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo.saturating_sub(1).min(n - 2)
}

/// The segment of `n` samples (`sample(i)`) that converts `t`, if there are two or more.
pub fn segment(n: usize, sample: impl Fn(usize) -> (u64, u64), t: u64) -> Option<Segment> {
    if n < 2 {
        return None;
    }
    let i = segment_index(n, |i| sample(i).0, t);
    let (a, b) = (sample(i), sample(i + 1));
    let lo = if i == 0 { 0 } else { a.0 };
    let hi = if i + 2 == n { u64::MAX } else { b.0 };
    Some(Segment::new(lo, hi, a, b))
}

/// Piecewise-linear interpolation over `n` samples (ticks ascending), rounded to the nearest
/// ns; beyond either end, the nearest segment's slope; one sample: its ns; none: `t`.
pub fn convert(n: usize, sample: impl Fn(usize) -> (u64, u64), t: u64) -> u64 {
    match n {
        0 => t,
        1 => sample(0).1,
        _ => segment(n, sample, t).map_or(t, |s| s.at(t)),
    }
}

/// The first of `n` samples a chunk whose earliest timestamp is `earliest` must carry: the
/// start of the segment that converts it (so [`convert`] over the samples from there gives
/// what it gives over all `n`).
pub fn first_needed(n: usize, ticks: impl Fn(usize) -> u64, earliest: u64) -> usize {
    if n < 2 {
        0
    } else {
        segment_index(n, ticks, earliest)
    }
}

/// Appends a kind-34 trailer to `out`, after the records: `samples` (ticks ascending) and
/// whether the ticks are the time-stamp counter's.
pub fn write_trailer(out: &mut Vec<u8>, samples: impl Iterator<Item = (u64, u64)>, tsc: bool) {
    let mut k = 0u32;
    for (t, n) in samples {
        out.extend_from_slice(&t.to_le_bytes());
        out.extend_from_slice(&n.to_le_bytes());
        k += 1;
    }
    let trailer = ClockTrailer {
        samples: k,
        flags: if tsc { TICKS_TSC } else { 0 },
    };
    out.extend_from_slice(&trailer.to_bytes());
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// A kind-34 payload split: its records' bytes, its samples' bytes, whether they are TSC
/// ticks.
fn split(payload: &[u8]) -> Result<(&[u8], &[u8], bool), String> {
    let bad = || {
        format!(
            "API records in ticks: a malformed payload of {} bytes",
            payload.len()
        )
    };
    let t_at = payload
        .len()
        .checked_sub(ClockTrailer::SIZE)
        .ok_or_else(bad)?;
    let trailer = ClockTrailer::from_bytes(payload[t_at..].try_into().unwrap());
    let samples_len = (trailer.samples as usize)
        .checked_mul(SAMPLE_LEN)
        .filter(|&l| l <= t_at)
        .ok_or_else(bad)?;
    let records_len = t_at - samples_len;
    if !records_len.is_multiple_of(ApiRecord::SIZE) {
        return Err(bad());
    }
    let samples = &payload[records_len..t_at];
    let tsc = trailer.flags & TICKS_TSC != 0;
    // Ticks ascend strictly and ns do not go back (as the writer's samples do): every
    // segment has a slope.
    let at = |i: usize, f: usize| u64_at(samples, i * SAMPLE_LEN + f);
    if (1..trailer.samples as usize).any(|i| at(i, 0) <= at(i - 1, 0) || at(i, 8) < at(i - 1, 8)) {
        return Err(bad());
    }
    Ok((&payload[..records_len], samples, tsc))
}

/// Converts the timestamps of one chunk: [`convert`] over its samples, the segment used last
/// kept (a chunk's times are close together).
struct Converter<'a> {
    samples: &'a [u8],
    tsc: bool,
    last: Option<Segment>,
}

impl Converter<'_> {
    fn ns(&mut self, t: u64) -> u64 {
        if !self.tsc {
            return t;
        }
        if let Some(s) = self.last.filter(|s| t >= s.lo && t < s.hi) {
            return s.at(t);
        }
        let n = self.samples.len() / SAMPLE_LEN;
        let at = |i: usize| i * SAMPLE_LEN;
        let sample = |i: usize| (u64_at(self.samples, at(i)), u64_at(self.samples, at(i) + 8));
        match segment(n, sample, t) {
            Some(s) => {
                self.last = Some(s);
                s.at(t)
            }
            None => convert(n, sample, t),
        }
    }
}

/// The API records of a kind-34 payload, times converted to ns.
pub fn decode_api_ticks(payload: &[u8]) -> Result<Vec<ApiRecord>, String> {
    let mut out = Vec::with_capacity(payload.len() / ApiRecord::SIZE);
    pick_api_ticks(payload, |_| Some(()), |(), r| out.push(r))?;
    Ok(out)
}

/// The API records of a kind-34 payload that `pick` picks by correlation id, times converted
/// to ns, each handed to `take` with what `pick` gave for it; the others are not converted.
pub fn pick_api_ticks<K>(
    payload: &[u8],
    mut pick: impl FnMut(u64) -> Option<K>,
    mut take: impl FnMut(K, ApiRecord),
) -> Result<(), String> {
    let (records, samples, tsc) = split(payload)?;
    let mut clock = Converter {
        samples,
        tsc,
        last: None,
    };
    for b in records.chunks_exact(ApiRecord::SIZE) {
        let b: &[u8; ApiRecord::SIZE] = b.try_into().unwrap();
        if let Some(k) = pick(ApiRecord::correlation_of(b)) {
            let mut r = ApiRecord::from_bytes(b);
            r.start_ns = clock.ns(r.start_ns);
            r.end_ns = clock.ns(r.end_ns);
            take(k, r);
        }
    }
    Ok(())
}

/// The start (ns) of the last record of a kind-34 payload, if it holds one.
pub fn last_api_start(payload: &[u8]) -> Option<u64> {
    let (records, samples, tsc) = split(payload).ok()?;
    let last = records.len().checked_sub(ApiRecord::SIZE)?;
    let mut clock = Converter {
        samples,
        tsc,
        last: None,
    };
    Some(clock.ns(u64_at(records, last + 8)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<(u64, u64)> {
        // Ticks at about 2.9 a ns, with a step in the slope.
        vec![
            (1_000_000, 5_000_000),
            (30_000_000, 15_000_017),
            (59_000_000, 25_000_101),
            (88_000_000, 35_000_000),
        ]
    }

    #[test]
    fn picked_records_are_those_decoded_with_their_ids_picked() {
        use crate::{Chunk, ChunkHeader, ChunkKind};
        let all = samples();
        let records: Vec<ApiRecord> = (0..40u64)
            .map(|i| ApiRecord {
                function: i as u32,
                result: (i % 5) as u32,
                start_ns: 2_000_000 + i * 2_000_000,
                end_ns: 2_000_000 + i * 2_000_000 + 777,
                correlation: 1000 + i * 3,
            })
            .collect();
        let mut bytes = Vec::new();
        records.iter().for_each(|r| r.write_to(&mut bytes));
        let plain = bytes.clone();
        write_trailer(&mut bytes, all.iter().copied(), true);
        for (kind, payload) in [
            (ChunkKind::ApiRecordsInTicks, bytes),
            (ChunkKind::ApiRecords, plain),
        ] {
            let chunk = Chunk {
                offset: 0,
                header: ChunkHeader::new(kind, 1, 0, 0, &payload),
                payload,
            };
            let decoded = chunk.api_records().unwrap();
            assert_eq!(decoded.len(), records.len());
            let mut picked = Vec::new();
            let pick = |id: u64| id.is_multiple_of(2).then_some(id / 2);
            chunk
                .pick_api_records(pick, |k, r| picked.push((k, r)))
                .unwrap();
            let want: Vec<(u64, ApiRecord)> = decoded
                .iter()
                .filter_map(|r| Some((pick(r.correlation)?, *r)))
                .collect();
            assert_eq!((picked.len(), &picked), (20, &want), "{kind:?}");
        }
        // A payload that is not whole records is refused, as by api_records.
        let chunk = Chunk {
            offset: 0,
            header: ChunkHeader::new(ChunkKind::ApiRecords, 1, 0, 0, &[0; 33]),
            payload: vec![0; 33],
        };
        let why = chunk.pick_api_records(Some, |_, _| {}).unwrap_err();
        assert_eq!(why, chunk.api_records().unwrap_err());
    }

    #[test]
    fn a_chunk_converts_as_all_samples_do() {
        let all = samples();
        let ref_ns = |t| convert(all.len(), |i| all[i], t);
        for earliest in [
            0, 999_999, 1_000_000, 29_999_999, 30_000_000, 70_000_000, 99_000_000,
        ] {
            let times: Vec<u64> = (0..50).map(|i| earliest + i * 1_900_000).collect();
            let mut payload = Vec::new();
            for (i, &t) in times.iter().enumerate() {
                let r = ApiRecord {
                    function: i as u32,
                    result: 0,
                    start_ns: t,
                    end_ns: t + 12_345,
                    correlation: i as u64,
                };
                r.write_to(&mut payload);
            }
            let first = first_needed(all.len(), |i| all[i].0, earliest);
            write_trailer(&mut payload, all[first..].iter().copied(), true);
            let got = decode_api_ticks(&payload).unwrap();
            assert_eq!(got.len(), times.len());
            for (r, &t) in got.iter().zip(&times) {
                assert_eq!(
                    (r.start_ns, r.end_ns),
                    (ref_ns(t), ref_ns(t + 12_345)),
                    "{t}"
                );
            }
            assert_eq!(
                last_api_start(&payload),
                Some(ref_ns(*times.last().unwrap()))
            );
        }
    }

    #[test]
    fn few_samples_and_no_counter() {
        let mut payload = Vec::new();
        let r = ApiRecord {
            function: 1,
            result: 2,
            start_ns: 77,
            end_ns: 99,
            correlation: 3,
        };
        r.write_to(&mut payload);
        let mut ns = payload.clone();
        write_trailer(&mut ns, std::iter::empty(), false);
        assert_eq!(decode_api_ticks(&ns).unwrap(), vec![r]);
        let mut one = payload.clone();
        write_trailer(&mut one, [(5, 1_000)].into_iter(), true);
        let got = decode_api_ticks(&one).unwrap()[0];
        assert_eq!((got.start_ns, got.end_ns), (1_000, 1_000));
        let mut empty = Vec::new();
        write_trailer(&mut empty, [(5, 1_000)].into_iter(), true);
        assert_eq!(decode_api_ticks(&empty).unwrap(), vec![]);
        assert_eq!(last_api_start(&empty), None);
    }

    #[test]
    fn malformed_payloads_are_refused() {
        assert!(decode_api_ticks(&[1, 2, 3]).is_err());
        let mut p = vec![0u8; 31];
        write_trailer(&mut p, std::iter::empty(), true);
        assert!(decode_api_ticks(&p).is_err());
        let mut p = Vec::new();
        write_trailer(&mut p, [(9, 1), (8, 2)].into_iter(), true);
        assert!(decode_api_ticks(&p).is_err());
        let mut p = ClockTrailer {
            samples: u32::MAX,
            flags: 1,
        }
        .to_bytes()
        .to_vec();
        p.insert(0, 0);
        assert!(decode_api_ticks(&p).is_err());
    }
}
