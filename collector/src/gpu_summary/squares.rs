//! The sample standard deviation of durations, exact whatever the values: the sum of their
//! squares held in 192 bits ([`Squares`]: each square is below 2^128, and there are fewer than
//! 2^64 of them), the variance's numerator n·Σx² − (Σx)² in 256 bits, divided by n(n − 1).
//! Adding a value is one 128-bit multiply and an add with carry: no floating point, no
//! division, and sums of any count merge by adding.

/// Σx² of the values added, in 192 bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Squares {
    lo: u128,
    hi: u64,
}

impl Squares {
    /// Adds `x²`.
    #[inline]
    pub(super) fn add(&mut self, x: u64) {
        let sq = u128::from(x) * u128::from(x);
        let (lo, carry) = self.lo.overflowing_add(sq);
        self.lo = lo;
        self.hi += u64::from(carry);
    }

    /// Adds the squares of `other`.
    pub(super) fn merge(&mut self, other: &Squares) {
        let (lo, carry) = self.lo.overflowing_add(other.lo);
        self.lo = lo;
        self.hi = self
            .hi
            .wrapping_add(other.hi)
            .wrapping_add(u64::from(carry));
    }
}

/// A 256-bit number: high and low halves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct U256(u128, u128);

/// `a · b`, exactly.
fn mul(a: u128, b: u128) -> U256 {
    let (a1, a0) = (a >> 64, a & u128::from(u64::MAX));
    let (b1, b0) = (b >> 64, b & u128::from(u64::MAX));
    let low = a0 * b0;
    let (mid, mid_carry) = (a0 * b1).overflowing_add(a1 * b0);
    let (lo, lo_carry) = low.overflowing_add(mid << 64);
    let hi = a1 * b1 + (mid >> 64) + (u128::from(mid_carry) << 64) + u128::from(lo_carry);
    U256(hi, lo)
}

impl U256 {
    fn sub(self, other: U256) -> U256 {
        let (lo, borrow) = self.1.overflowing_sub(other.1);
        U256(self.0 - other.0 - u128::from(borrow), lo)
    }

    fn bit(self, i: u32) -> u128 {
        if i >= 128 {
            (self.0 >> (i - 128)) & 1
        } else {
            (self.1 >> i) & 1
        }
    }

    /// `self / d`, rounded down, for a quotient below 2^128 (`d` not 0).
    fn div(self, d: u128) -> u128 {
        let (mut q, mut r) = (0u128, 0u128);
        for i in (0..256).rev() {
            // The remainder stays below 2·d: one bit past 128 at most, kept in `out`.
            let out = r >> 127;
            r = (r << 1) | self.bit(i);
            q <<= 1;
            if out == 1 || r >= d {
                r = r.wrapping_sub(d);
                q |= 1;
            }
        }
        q
    }
}

/// Sample standard deviation (n − 1 in the denominator, as `nsys stats`) of `n` values whose
/// sum is `total` and sum of squares `squares`, rounded down; 0 for fewer than two.
/// variance = (n·Σx² − (Σx)²) / (n(n − 1)), and ⌊√⌊v⌋⌋ = ⌊√v⌋.
pub(super) fn sample_stddev(n: u64, total: u128, squares: Squares) -> u64 {
    if n < 2 {
        return 0;
    }
    let n = u128::from(n);
    // n·Σx², Σx² = hi·2^128 + lo (n·hi < 2^128: fewer than 2^64 squares below 2^128 each).
    let low = mul(n, squares.lo);
    let n_squares = U256(low.0 + n * u128::from(squares.hi), low.1);
    // At least (Σx)² (Cauchy–Schwarz); the variance of values below 2^64 is below 2^128.
    let numerator = n_squares.sub(mul(total, total));
    let variance = numerator.div(n * (n - 1));
    u64::try_from(variance.isqrt()).unwrap_or(u64::MAX)
}

/// [`sample_stddev`] of a slice of values whose sum is `total`.
pub(super) fn slice_stddev(d: &[u64], total: u128) -> u64 {
    let mut squares = Squares::default();
    d.iter().for_each(|&x| squares.add(x));
    sample_stddev(d.len() as u64, total, squares)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_arithmetic_is_exact() {
        let m = u128::MAX;
        assert_eq!(mul(m, m), U256(m - 1, 1));
        assert_eq!(mul(1 << 64, 1 << 64), U256(1, 0));
        assert_eq!(mul(3, 5), U256(0, 15));
        assert_eq!(U256(1, 0).sub(U256(0, 1)), U256(0, m));
        assert_eq!(mul(m, 12345).div(12345), m);
        assert_eq!(U256(0, 100).div(7), 14);
        assert_eq!(mul(1 << 100, 1 << 27).div(1 << 27), 1 << 100);
        // A remainder past 2^128 on the way.
        assert_eq!(mul(m, m).div(m), m);
        let mut s = Squares::default();
        s.add(u64::MAX);
        s.add(u64::MAX);
        let sq = u128::from(u64::MAX) * u128::from(u64::MAX);
        assert_eq!(
            s,
            Squares {
                lo: sq.wrapping_mul(2),
                hi: 1
            }
        );
        let mut t = Squares::default();
        t.merge(&s);
        t.merge(&s);
        assert_eq!(
            t,
            Squares {
                lo: sq.wrapping_mul(4),
                hi: 3
            }
        );
    }

    #[test]
    fn standard_deviations_are_exact_sample_ones() {
        let of = |v: &[u64]| slice_stddev(v, v.iter().map(|&x| u128::from(x)).sum());
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, squared deviations 32, / 7 = 4.571, √ = 2.138.
        assert_eq!(of(&[2, 4, 4, 4, 5, 5, 7, 9]), 2);
        assert_eq!((of(&[7]), of(&[])), (0, 0));
        // Σx² past 128 bits: 2^62 three times and 0: squared deviations 12·2^120, / 3, √ = 2^61.
        let big = 1u64 << 62;
        assert_eq!(of(&[big, big, big, 0]), 1 << 61);
        // u64::MAX three times and 0: variance (2^64 − 1)² / 4, √ = 2^63 − 1/2, rounded down.
        let max = u64::MAX;
        assert_eq!(of(&[max, max, max, 0]), (1 << 63) - 1);
        // Two values at the ends: variance (2^64 − 1)² / 2.
        assert_eq!(of(&[0, max]), 13_043_817_825_332_782_211);
        assert_eq!(of(&[max, max]), 0);
    }
}
