//! A column chunk's statistics (min, max, null count), as Parquet's own column writer gives
//! them with chunk statistics on (parquet 57, `EnabledStatistics::Chunk`), so that readers
//! prune row groups by them as before: NaN left out of a double's min and max, a zero min
//! written as -0.0 and a zero max as +0.0; a string's min and max cut to 64 bytes at a character
//! boundary (the max's last character then incremented), marked inexact when cut.

use parquet::data_type::ByteArray;
use parquet::file::statistics::{Statistics, ValueStatistics};

/// Bytes of a string statistic kept at most (parquet's `DEFAULT_STATISTICS_TRUNCATE_LENGTH`).
const TRUNCATE: usize = 64;

/// A type of the values that [`Bounds`] bounds (one with Parquet statistics).
pub trait Value: Copy + PartialOrd {
    fn statistics(s: ValueStatistics<Self>) -> Statistics;
}

macro_rules! value {
    ($($t:ty),*) => {$(
        impl Value for $t {
            fn statistics(s: ValueStatistics<Self>) -> Statistics {
                s.into()
            }
        }
    )*};
}
value!(i64, i32, f64, bool);

/// The least and greatest value of a chunk's values so far (of those that have an order).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Bounds<T> {
    pub range: Option<(T, T)>,
}

impl<T: Value> Bounds<T> {
    fn add(&mut self, (lo, hi): (T, T)) {
        self.range = Some(match self.range {
            None => (lo, hi),
            Some((min, max)) => (
                if lo < min { lo } else { min },
                if hi > max { hi } else { max },
            ),
        });
    }

    /// Statistics of a chunk with these bounds and `nulls` nulls; `signed`: whether the type's
    /// order is signed (then the deprecated min and max fields are written too).
    pub fn statistics(&self, nulls: u64, signed: bool) -> Statistics {
        T::statistics(
            ValueStatistics::new(
                self.range.map(|r| r.0),
                self.range.map(|r| r.1),
                None,
                Some(nulls),
                false,
            )
            .with_backwards_compatible_min_max(signed),
        )
    }
}

impl<T: Value + Ord> Bounds<T> {
    pub fn add_ints(&mut self, values: &[T]) {
        let Some(&first) = values.first() else {
            return;
        };
        // Four minimums and maximums side by side: no comparison waits for the one before.
        let (mut lo, mut hi) = ([first; 4], [first; 4]);
        let mut fours = values.chunks_exact(4);
        for four in &mut fours {
            for i in 0..4 {
                lo[i] = lo[i].min(four[i]);
                hi[i] = hi[i].max(four[i]);
            }
        }
        for &v in fours.remainder() {
            lo[0] = lo[0].min(v);
            hi[0] = hi[0].max(v);
        }
        let min = lo.into_iter().min().unwrap_or(first);
        let max = hi.into_iter().max().unwrap_or(first);
        self.add((min, max));
    }
}

impl Bounds<f64> {
    pub fn add_doubles(&mut self, values: &[f64]) {
        let mut range: Option<(f64, f64)> = None;
        for &v in values.iter().filter(|v| !v.is_nan()) {
            range = Some(match range {
                None => (v, v),
                Some((lo, hi)) => (if v < lo { v } else { lo }, if v > hi { v } else { hi }),
            });
        }
        if let Some(r) = range {
            self.add(r);
        }
    }

    /// The bounds as written: a zero min as -0.0, a zero max as +0.0.
    pub fn signed_zeros(self) -> Self {
        Bounds {
            range: self.range.map(|(lo, hi)| {
                (
                    if lo == 0.0 { -0.0 } else { lo },
                    if hi == 0.0 { 0.0 } else { hi },
                )
            }),
        }
    }
}

impl Bounds<bool> {
    pub fn add_bools(&mut self, values: &[bool]) {
        if values.is_empty() {
            return;
        }
        let any_false = values.iter().any(|&v| !v);
        let any_true = values.iter().any(|&v| v);
        self.add((!any_false, any_true));
    }
}

/// Statistics of a string chunk whose distinct values are `values` (none: every row null).
pub fn strings(values: &[String], nulls: u64) -> Statistics {
    let min = values.iter().min();
    let max = values.iter().max();
    let (Some(min), Some(max)) = (min, max) else {
        return ValueStatistics::<ByteArray>::new(None, None, None, Some(nulls), false).into();
    };
    let (min, min_cut) = match truncate(min) {
        Some(cut) => (cut, true),
        None => (min.as_bytes().to_vec(), false),
    };
    let (max, max_cut) = match truncate_and_increment(max) {
        Some(cut) => (cut, true),
        None => (max.as_bytes().to_vec(), false),
    };
    ValueStatistics::new(
        Some(ByteArray::from(min)),
        Some(ByteArray::from(max)),
        None,
        Some(nulls),
        false,
    )
    .with_max_is_exact(!max_cut)
    .with_min_is_exact(!min_cut)
    .into()
}

/// `s` cut to at most [`TRUNCATE`] bytes at a character boundary, when longer.
fn truncate(s: &str) -> Option<Vec<u8>> {
    if s.len() <= TRUNCATE {
        return None;
    }
    let split = (1..=TRUNCATE).rfind(|&i| s.is_char_boundary(i))?;
    Some(s.as_bytes()[..split].to_vec())
}

/// `s` cut near [`TRUNCATE`] bytes and its last character incremented (an upper bound), when
/// longer and when that can be done without a character growing.
fn truncate_and_increment(s: &str) -> Option<Vec<u8>> {
    if s.len() <= TRUNCATE {
        return None;
    }
    let split = (TRUNCATE - 3..=TRUNCATE).rfind(|&i| s.is_char_boundary(i))?;
    let kept = &s[..split];
    kept.char_indices().rev().find_map(|(at, c)| {
        let next = char::from_u32(c as u32 + 1).filter(|n| n.len_utf8() == c.len_utf8())?;
        let mut out = kept.as_bytes()[..at + c.len_utf8()].to_vec();
        next.encode_utf8(&mut out[at..]);
        Some(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_strings_are_cut_as_parquet_cuts_them() {
        let long =
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>";
        assert_eq!(truncate(long).unwrap(), long.as_bytes()[..64].to_vec());
        let mut max = long.as_bytes()[..64].to_vec();
        *max.last_mut().unwrap() += 1;
        assert_eq!(truncate_and_increment(long).unwrap(), max);
        assert_eq!(truncate("short"), None);
        // A character over the cut is left out whole; U+10FFFF cannot be incremented.
        let wide = format!("{}é{}", "a".repeat(63), "b");
        assert_eq!(truncate(&wide).unwrap(), "a".repeat(63).into_bytes());
        let top = format!("{}\u{10FFFF}{}", "a".repeat(60), "z".repeat(9));
        let mut up = "a".repeat(60).into_bytes();
        *up.last_mut().unwrap() = b'b';
        assert_eq!(truncate_and_increment(&top).unwrap(), up);
    }

    #[test]
    fn bounds_of_integers_are_the_least_and_greatest() {
        for n in 0..20usize {
            let v: Vec<i64> = (0..n).map(|i| (i as i64 * 7919 % 23) - 11).collect();
            let mut b = Bounds::default();
            b.add_ints(&v);
            let want = v.iter().min().map(|&lo| (lo, *v.iter().max().unwrap()));
            assert_eq!(b.range, want, "{v:?}");
        }
    }

    #[test]
    fn bounds_of_doubles_skip_nan_and_sign_zeros() {
        let mut b = Bounds::default();
        b.add_doubles(&[f64::NAN, 0.0, 3.5]);
        b.add_doubles(&[f64::NAN]);
        let b = b.signed_zeros();
        let (lo, hi) = b.range.unwrap();
        assert!(lo == 0.0 && lo.is_sign_negative());
        assert_eq!(hi, 3.5);
        let mut t = Bounds::default();
        t.add_bools(&[true, true]);
        assert_eq!(t.range, Some((true, true)));
        t.add_bools(&[false]);
        assert_eq!(t.range, Some((false, true)));
    }
}
