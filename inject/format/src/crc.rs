//! CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of headers and chunks.
//! Uses the SSE4.2 `crc32` instruction where the CPU has it, on three streams at once, else a
//! slicing-by-8 table (about 2 GB/s); both give the same values.
#![allow(unsafe_code)]

const POLY: u32 = 0x82F6_3B78;

/// `TABLES[k][b]`: the CRC of byte `b` followed by `k` zero bytes.
static TABLES: [[u32; 256]; 8] = make_tables();

const fn make_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { POLY ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut s = 1;
    while s < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[s - 1][i];
            t[s][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        s += 1;
    }
    t
}

fn update_soft(crc: u32, data: &[u8]) -> u32 {
    let mut c = !crc;
    let mut chunks = data.chunks_exact(8);
    for ch in &mut chunks {
        let lo = u32::from_le_bytes([ch[0], ch[1], ch[2], ch[3]]) ^ c;
        let hi = u32::from_le_bytes([ch[4], ch[5], ch[6], ch[7]]);
        c = TABLES[7][(lo & 0xff) as usize]
            ^ TABLES[6][((lo >> 8) & 0xff) as usize]
            ^ TABLES[5][((lo >> 16) & 0xff) as usize]
            ^ TABLES[4][(lo >> 24) as usize]
            ^ TABLES[3][(hi & 0xff) as usize]
            ^ TABLES[2][((hi >> 8) & 0xff) as usize]
            ^ TABLES[1][((hi >> 16) & 0xff) as usize]
            ^ TABLES[0][(hi >> 24) as usize];
    }
    for &b in chunks.remainder() {
        c = TABLES[0][((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// Bytes of each of the three streams [`update_hw`] interleaves.
const LANE: usize = 1024;

/// `SHIFT[k][b]`: the CRC register `b << 8k` becomes after [`LANE`] zero bytes (the register
/// as the `crc32` instruction keeps it, not inverted). The register after `a` then `b` is the
/// register after `a`, moved past `b.len()` zero bytes, XOR the register of `b` from 0.
static SHIFT: [[u32; 256]; 4] = make_shift();

/// The image of `v` under the GF(2) matrix `m` (column `i`: the image of bit `i`).
const fn gf2_apply(m: &[u32; 32], mut v: u32) -> u32 {
    let mut sum = 0;
    let mut i = 0;
    while v != 0 {
        if v & 1 != 0 {
            sum ^= m[i];
        }
        v >>= 1;
        i += 1;
    }
    sum
}

/// `m` applied twice.
const fn gf2_square(m: &[u32; 32]) -> [u32; 32] {
    let mut sq = [0u32; 32];
    let mut i = 0;
    while i < 32 {
        sq[i] = gf2_apply(m, m[i]);
        i += 1;
    }
    sq
}

const fn make_shift() -> [[u32; 256]; 4] {
    // One zero bit: the register shifts right, the polynomial folded in for a 1 shifted out.
    let mut m = [0u32; 32];
    m[0] = POLY;
    let mut i = 1;
    while i < 32 {
        m[i] = 1 << (i - 1);
        i += 1;
    }
    // 8 · LANE zero bits (LANE a power of two).
    let mut bits = 1;
    while bits < 8 * LANE {
        m = gf2_square(&m);
        bits *= 2;
    }
    let mut t = [[0u32; 256]; 4];
    let mut k = 0;
    while k < 4 {
        let mut b = 0;
        while b < 256 {
            t[k][b] = gf2_apply(&m, (b as u32) << (8 * k));
            b += 1;
        }
        k += 1;
    }
    t
}

/// The register `c` after [`LANE`] zero bytes.
#[inline]
fn shift_lane(c: u32) -> u32 {
    SHIFT[0][(c & 0xff) as usize]
        ^ SHIFT[1][((c >> 8) & 0xff) as usize]
        ^ SHIFT[2][((c >> 16) & 0xff) as usize]
        ^ SHIFT[3][(c >> 24) as usize]
}

/// The `crc32` instruction, eight bytes at a time: three streams of [`LANE`] bytes at once
/// (the instruction's latency is three times its throughput), joined by [`shift_lane`], then
/// the rest in one stream.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn update_hw(crc: u32, data: &[u8]) -> u32 {
    use core::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let word = |w: &[u8]| u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
    let mut c = !crc as u64;
    let mut blocks = data.chunks_exact(3 * LANE);
    for block in &mut blocks {
        let (a, rest) = block.split_at(LANE);
        let (b, d) = rest.split_at(LANE);
        let (mut c1, mut c2) = (0u64, 0u64);
        for ((x, y), z) in a
            .chunks_exact(8)
            .zip(b.chunks_exact(8))
            .zip(d.chunks_exact(8))
        {
            c = _mm_crc32_u64(c, word(x));
            c1 = _mm_crc32_u64(c1, word(y));
            c2 = _mm_crc32_u64(c2, word(z));
        }
        let ab = shift_lane(c as u32) ^ c1 as u32;
        c = u64::from(shift_lane(ab) ^ c2 as u32);
    }
    let rest = blocks.remainder();
    let mut words = rest.chunks_exact(8);
    for w in &mut words {
        c = _mm_crc32_u64(c, word(w));
    }
    let mut c = c as u32;
    for &b in words.remainder() {
        c = _mm_crc32_u8(c, b);
    }
    !c
}

/// Continues a CRC-32C over `data`; start with `crc = 0`.
pub fn crc32_update(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU supports SSE4.2, checked just above.
            return unsafe { update_hw(crc, data) };
        }
    }
    update_soft(crc, data)
}

/// The CRC-32C of `data`.
pub fn crc32(data: &[u8]) -> u32 {
    crc32_update(0, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hardware_and_table_agree_on_every_length_and_split() {
        let data: Vec<u8> = (0..20_000u32)
            .map(|i| (i * 7 + i / 3 + (i >> 9)) as u8)
            .collect();
        let lanes = [
            3 * LANE - 1,
            3 * LANE,
            3 * LANE + 1,
            3 * LANE + 8,
            6 * LANE + 13,
        ];
        for len in [0, 1, 7, 8, 9, 63, 64, 65, 999, 1000, 19_999, 20_000]
            .into_iter()
            .chain(lanes)
        {
            let d = &data[..len];
            assert_eq!(crc32(d), update_soft(0, d), "len {len}");
            let (a, b) = d.split_at(len / 3);
            assert_eq!(crc32_update(crc32(a), b), crc32(d), "split {len}");
            assert_eq!(update_soft(update_soft(0, a), b), crc32(d));
        }
    }
}
