//! A minimal protobuf encoder: varints, fixed 64-bit values and
//! length-delimited fields (strings, bytes, nested messages), written into
//! one growing buffer.
//!
//! Nested messages are written in place: [`Proto::begin`] reserves one byte
//! for the length and [`Proto::end`] fills it in, moving the message right
//! in the rare case its length needs more than one byte.

/// Wire types.
pub const VARINT: u32 = 0;
pub const FIXED64: u32 = 1;
pub const LEN: u32 = 2;

/// The key of field `field` of wire type `wire` as a varint of one byte (fields 1 to 15),
/// for fields written as bytes made beforehand ([`Proto::put`]).
pub const fn key(field: u32, wire: u32) -> u8 {
    assert!(field < 16);
    (field << 3 | wire) as u8
}

/// The key of field `field` (16 to 2047) of wire type `wire`: a varint of two bytes.
pub const fn key2(field: u32, wire: u32) -> [u8; 2] {
    assert!(field >= 16 && field < 2048);
    let k = field << 3 | wire;
    [(k as u8) | 0x80, (k >> 7) as u8]
}

/// The number of bytes of `v` as a varint.
#[inline(always)]
pub fn varint_len(v: u64) -> usize {
    // 1 byte per 7 significant bits, at least 1.
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// A protobuf encoding under construction.
#[derive(Debug, Default)]
pub struct Proto {
    pub buf: Vec<u8>,
}

/// Up to 16 bytes of fields made once and written often ([`Proto::prefix`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Prefix {
    bytes: [u8; 16],
    len: u8,
}

impl Prefix {
    /// The fields `fill` writes (16 bytes at most).
    pub fn of(fill: impl FnOnce(&mut Proto)) -> Prefix {
        let mut p = Proto::default();
        fill(&mut p);
        let mut prefix = Prefix {
            len: p.buf.len() as u8,
            ..Prefix::default()
        };
        prefix.bytes[..p.buf.len()].copy_from_slice(&p.buf);
        prefix
    }
}

/// Where an unfinished nested message starts: see [`Proto::begin`].
#[must_use = "a nested message must be closed with Proto::end"]
#[derive(Debug)]
pub struct Open(usize);

/// Appends `v` as a base-128 varint.
#[inline(always)]
pub fn put_varint(buf: &mut Vec<u8>, v: u64) {
    // Inline up to four bytes (a tag, a small number, time deltas, correlation ids), made
    // byte by byte without a loop; a call for more.
    let byte = |shift: u32| (v >> shift) as u8 | 0x80;
    if v < 1 << 7 {
        buf.push(v as u8);
    } else if v < 1 << 14 {
        buf.extend_from_slice(&[byte(0), (v >> 7) as u8]);
    } else if v < 1 << 21 {
        buf.extend_from_slice(&[byte(0), byte(7), (v >> 14) as u8]);
    } else if v < 1 << 28 {
        buf.extend_from_slice(&[byte(0), byte(7), byte(14), (v >> 21) as u8]);
    } else {
        put_long_varint(buf, v);
    }
}

/// [`put_varint`] for values of five bytes or more.
#[inline(never)]
fn put_long_varint(buf: &mut Vec<u8>, v: u64) {
    let mut bytes = [0u8; 10];
    let n = put_varint_at(&mut bytes, v);
    buf.extend_from_slice(&bytes[..n]);
}

/// Writes `v` as a base-128 varint at the start of `out` (room for 10 bytes); returns its
/// length.
#[inline]
fn put_varint_at(out: &mut [u8], mut v: u64) -> usize {
    let mut n = 0;
    while v >= 0x80 {
        out[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    out[n] = v as u8;
    n + 1
}

impl Proto {
    #[inline(always)]
    fn tag(&mut self, field: u32, wire: u32) {
        put_varint(&mut self.buf, u64::from(field << 3 | wire));
    }

    /// A varint field: uint32/64, int32/64 (negative values take 10 bytes),
    /// bool, enum.
    #[inline(always)]
    pub fn varint(&mut self, field: u32, v: u64) {
        self.tag(field, VARINT);
        put_varint(&mut self.buf, v);
    }

    /// An int64 (or int32) field.
    #[inline(always)]
    pub fn int64(&mut self, field: u32, v: i64) {
        self.varint(field, v as u64);
    }

    /// A fixed64 field.
    #[inline(always)]
    pub fn fixed64(&mut self, field: u32, v: u64) {
        self.tag(field, FIXED64);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// A string (or bytes) field.
    #[inline]
    pub fn string(&mut self, field: u32, s: &str) {
        self.bytes(field, s.as_bytes());
    }

    /// A bytes field.
    #[inline]
    pub fn bytes(&mut self, field: u32, b: &[u8]) {
        self.tag(field, LEN);
        put_varint(&mut self.buf, b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    /// Appends bytes made beforehand: fields whose keys ([`key`]) and lengths are known, in
    /// one copy of fixed size.
    #[inline(always)]
    pub fn put<const N: usize>(&mut self, bytes: [u8; N]) {
        self.buf.extend_from_slice(&bytes);
    }

    /// Appends `v` as a varint (a field's value after its key).
    #[inline(always)]
    pub fn put_varint(&mut self, v: u64) {
        put_varint(&mut self.buf, v);
    }

    /// Starts a nested message whose key ([`key`]) was written; close it with
    /// [`Proto::end`].
    #[inline(always)]
    pub fn open(&mut self) -> Open {
        self.buf.push(0);
        Open(self.buf.len())
    }

    /// Appends bytes made beforehand ([`Prefix`]).
    #[inline(always)]
    pub fn prefix(&mut self, prefix: &Prefix) {
        // A copy of fixed size, the bytes past the prefix's cut off again: no call.
        let len = self.buf.len();
        self.buf.extend_from_slice(&prefix.bytes);
        self.buf.truncate(len + usize::from(prefix.len));
    }

    /// Starts a nested message in `field`; close it with [`Proto::end`].
    #[inline(always)]
    pub fn begin(&mut self, field: u32) -> Open {
        self.tag(field, LEN);
        self.open()
    }

    /// Closes the nested message `open`, writing its length.
    #[inline(always)]
    pub fn end(&mut self, open: Open) {
        let start = open.0;
        let len = self.buf.len() - start;
        if len < 0x80 {
            // The byte reserved holds it (most messages).
            self.buf[start - 1] = len as u8;
        } else {
            self.end_long(start, len);
        }
    }

    /// [`Proto::end`] for a message of 128 bytes or more, whose length takes more than the
    /// byte reserved: the body moves right to make room.
    #[inline(never)]
    fn end_long(&mut self, start: usize, len: usize) {
        let n = varint_len(len as u64);
        let extra = n - 1;
        self.buf.resize(self.buf.len() + extra, 0);
        self.buf.copy_within(start..start + len, start + extra);
        put_varint_at(&mut self.buf[start - 1..], len as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_lengths() {
        for (v, bytes) in [
            (0u64, vec![0u8]),
            (1, vec![1]),
            (127, vec![0x7f]),
            (128, vec![0x80, 0x01]),
            (300, vec![0xac, 0x02]),
            (
                u64::MAX,
                vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(b, bytes, "{v}");
            assert_eq!(varint_len(v), bytes.len(), "{v}");
        }
    }

    #[test]
    fn varints_of_every_length_as_byte_by_byte() {
        // Each length's first and last values, and values between, against the encoding
        // byte by byte.
        let mut values = vec![0u64, u64::MAX];
        for bits in 1..64 {
            let p = 1u64 << bits;
            values.extend([p - 1, p, p + 1, p | (p >> 1) | 0x55, p.wrapping_mul(3) / 2]);
        }
        values.push(1_732_000_123_456_789_012);
        for v in values {
            let mut want = Vec::new();
            let mut rest = v;
            while rest >= 0x80 {
                want.push((rest as u8) | 0x80);
                rest >>= 7;
            }
            want.push(rest as u8);
            let mut got = vec![9u8];
            put_varint(&mut got, v);
            assert_eq!(got[1..], want[..], "{v}");
            assert_eq!(got[0], 9);
        }
    }

    #[test]
    fn nested_messages_of_any_length() {
        for len in [0usize, 1, 127, 128, 200, 16_383, 16_384, 70_000] {
            let mut p = Proto::default();
            p.varint(1, 150);
            let open = p.begin(2);
            p.bytes(3, &vec![7u8; len]);
            p.end(open);
            p.fixed64(4, 5);
            // Expected: built from the parts.
            let mut inner = Vec::new();
            inner.push(3 << 3 | 2);
            put_varint(&mut inner, len as u64);
            inner.extend(std::iter::repeat_n(7u8, len));
            let mut want = vec![0x08, 0x96, 0x01, 0x12];
            put_varint(&mut want, inner.len() as u64);
            want.extend_from_slice(&inner);
            want.push(4 << 3 | 1);
            want.extend_from_slice(&5u64.to_le_bytes());
            assert_eq!(p.buf, want, "{len}");
        }
    }
}
