//! API records (one driver call each) and the function-name table they index.

use crate::codec::record;

record! {
    /// One driver API call, as the injected library records it.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct ApiRecord: 32 bytes {
        /// Index into the trace's function-name table.
        pub function: u32,
        /// The call's return value (a `CUresult`), as the 32 bits the caller got.
        pub result: u32,
        /// Host `CLOCK_MONOTONIC` ns when the wrapper was entered.
        pub start_ns: u64,
        /// Host `CLOCK_MONOTONIC` ns when the real function returned.
        pub end_ns: u64,
        /// Process-unique id linking this call to the work it caused.
        pub correlation: u64,
    }
}

impl ApiRecord {
    /// Appends the record's encoding to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_bytes());
    }

    /// The first 8-byte word of an encoded record (`function | result << 32`), read from its
    /// bytes whole (one load).
    #[inline(always)]
    pub fn first_word_of(bytes: &[u8; Self::SIZE]) -> u64 {
        word_at(bytes, 0)
    }

    /// The correlation id of an encoded record, read from its bytes.
    #[inline(always)]
    pub fn correlation_of(bytes: &[u8; Self::SIZE]) -> u64 {
        word_at(bytes, 24)
    }

    /// The `start_ns` and `end_ns` of an encoded record, read from its bytes.
    #[inline(always)]
    pub fn times_of(bytes: &[u8; Self::SIZE]) -> (u64, u64) {
        (word_at(bytes, 8), word_at(bytes, 16))
    }
}

/// The little-endian 8-byte word at byte `i` of an encoded record.
#[inline(always)]
fn word_at(bytes: &[u8; ApiRecord::SIZE], i: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[i..i + 8]);
    u64::from_le_bytes(b)
}

/// One entry of the function-name table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionName {
    pub id: u32,
    pub name: String,
}

/// Encodes a function-name table payload: `count:u32 (id:u32 len:u16 bytes)*`.
pub fn encode_function_names<'a>(names: impl IntoIterator<Item = (u32, &'a str)>) -> Vec<u8> {
    let mut body = Vec::new();
    let mut count = 0u32;
    for (id, name) in names {
        let bytes = &name.as_bytes()[..name.len().min(u16::MAX as usize)];
        body.extend_from_slice(&id.to_le_bytes());
        body.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        body.extend_from_slice(bytes);
        count += 1;
    }
    let mut out = count.to_le_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}
