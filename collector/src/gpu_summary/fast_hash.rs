//! A hasher for the folds' small integer keys ([`Fast`]), and the maps and sets hashed with it.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A hasher for the small integer keys of the folds (ids, durations, launch configurations):
/// a multiply per word, where SipHash took a tenth of a report's time.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fast(u64);

impl Hasher for Fast {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        // Folded: the product's high half mixed into the low, whose bits pick the bucket, so
        // that keys differing only in high bits do not share one.
        let m = u128::from(self.0.rotate_left(5) ^ v) * 0x9E37_79B9_7F4A_7C15;
        self.0 = (m as u64) ^ ((m >> 64) as u64);
    }
    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

/// A map hashed with [`Fast`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<Fast>>;
/// A set hashed with [`Fast`].
pub type FastSet<K> = std::collections::HashSet<K, BuildHasherDefault<Fast>>;
