//! Parquet's RLE / bit-packing hybrid encoding, which holds a data page's definition levels
//! (bit width 1: null or not) and its dictionary keys (`RLE_DICTIONARY`): runs of one value
//! as (count, value), the rest bit-packed eight values at a time
//! (<https://parquet.apache.org/docs/file-format/data-pages/encodings/>).

/// Bits needed for every value up to `max`: 0 for 0.
pub fn bit_width(max: u32) -> u8 {
    (u32::BITS - max.leading_zeros()) as u8
}

/// A run this long or longer is written as a run; shorter ones are bit-packed.
const MIN_RUN: usize = 8;
/// Groups of eight values in one bit-packed run at most (its header then fits a byte).
const MAX_GROUPS: usize = 63;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The length of the run of equal values that starts `values`.
fn run_at<T: Copy + PartialEq>(values: &[T]) -> usize {
    let first = values[0];
    values.iter().take_while(|&&v| v == first).count()
}

/// Appends `values` (each below 2^`width`) to `out`, hybrid-encoded with bit width `width`.
/// The last bit-packed group is padded with zeros, as readers expect: they read as many values
/// as the page says it holds.
pub fn encode<T: Copy + PartialEq + Into<u32>>(values: &[T], width: u8, out: &mut Vec<u8>) {
    let value_bytes = usize::from(width).div_ceil(8);
    let mut i = 0;
    while i < values.len() {
        let run = run_at(&values[i..]);
        if run >= MIN_RUN || i + run == values.len() {
            varint(out, (run as u64) << 1);
            out.extend_from_slice(&values[i].into().to_le_bytes()[..value_bytes]);
            i += run;
            continue;
        }
        // Bit-packed groups until a long run starts (or the values end).
        let start = i;
        let mut groups = 0;
        while groups < MAX_GROUPS && i < values.len() {
            i = (i + 8).min(values.len());
            groups += 1;
            if i < values.len() && run_at(&values[i..]) >= MIN_RUN {
                break;
            }
        }
        varint(out, ((groups as u64) << 1) | 1);
        pack(&values[start..i], width, groups, out);
    }
}

/// `values` bit-packed, least significant bit first, as `groups` groups of eight (the last
/// padded with zeros).
fn pack<T: Copy + Into<u32>>(values: &[T], width: u8, groups: usize, out: &mut Vec<u8>) {
    let end = out.len() + groups * usize::from(width);
    let mut acc = 0u64;
    let mut bits = 0u32;
    for &v in values {
        acc |= u64::from(v.into()) << bits;
        bits += u32::from(width);
        while bits >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            bits -= 8;
        }
    }
    if bits > 0 {
        out.push(acc as u8);
    }
    out.resize(end, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hybrid encoding read back, as a reader reads `n` values.
    fn decode(mut data: &[u8], width: u8, n: usize) -> Vec<u32> {
        let mut out = Vec::new();
        while out.len() < n {
            let mut header = 0u64;
            let mut shift = 0;
            loop {
                let b = data[0];
                data = &data[1..];
                header |= u64::from(b & 0x7f) << shift;
                shift += 7;
                if b & 0x80 == 0 {
                    break;
                }
            }
            if header & 1 == 0 {
                let bytes = usize::from(width).div_ceil(8);
                let mut v = [0u8; 4];
                v[..bytes].copy_from_slice(&data[..bytes]);
                data = &data[bytes..];
                out.extend(std::iter::repeat_n(
                    u32::from_le_bytes(v),
                    (header >> 1) as usize,
                ));
            } else {
                let count = (header >> 1) as usize * 8;
                let len = count * usize::from(width) / 8;
                for k in 0..count {
                    let mut v = 0u32;
                    for b in 0..usize::from(width) {
                        let bit = k * usize::from(width) + b;
                        v |= u32::from(data[bit / 8] >> (bit % 8) & 1) << b;
                    }
                    out.push(v);
                }
                data = &data[len..];
            }
        }
        assert!(data.is_empty(), "bytes left over");
        out.truncate(n);
        out
    }

    #[test]
    fn encodes_runs_and_packed_values_readably() {
        let mut cases: Vec<(Vec<u32>, u8)> = vec![
            (vec![], 1),
            (vec![1], 1),
            (vec![0; 5], 0),
            (vec![1; 100_000], 1),
            ((0..1000).map(|i| i % 2).collect(), 1),
            ((0..1000).map(|i| i % 7).collect(), 3),
            ((0..1000).map(|i| (i / 9) % 300).collect(), 9),
            ((0..77).map(|i| u32::from(i % 13 == 0)).collect(), 1),
        ];
        let mut mixed = vec![3u32; 20];
        mixed.extend((0..37).map(|i| i % 5));
        mixed.extend([4; 8]);
        mixed.extend((0..600).map(|i| i % 3));
        mixed.push(2);
        cases.push((mixed, 3));
        cases.push(((0..5000).map(|i| i * 7919 % 1_000_003).collect(), 20));
        for (values, width) in cases {
            let mut out = Vec::new();
            encode(&values, width, &mut out);
            assert_eq!(decode(&out, width, values.len()), values, "width {width}");
        }
    }

    #[test]
    fn long_runs_take_a_few_bytes() {
        let mut out = Vec::new();
        encode(&[1u32; 20_000], 1, &mut out);
        assert_eq!(out, [0xc0, 0xb8, 0x02, 1]);
        assert_eq!(bit_width(0), 0);
        assert_eq!(bit_width(1), 1);
        assert_eq!(bit_width(255), 8);
        assert_eq!(bit_width(256), 9);
    }
}
