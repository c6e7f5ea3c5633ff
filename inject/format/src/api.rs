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

    /// The `function` of an encoded record, read from its bytes.
    #[inline(always)]
    pub fn function_of(bytes: &[u8; Self::SIZE]) -> u32 {
        u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
    }

    /// The first two 8-byte words of an encoded record (`function | result << 32`, then
    /// `start_ns`), read from its bytes.
    #[inline(always)]
    pub fn words_of(bytes: &[u8; Self::SIZE]) -> (u64, u64) {
        let at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[i..i + 8]);
            u64::from_le_bytes(b)
        };
        (at(0), at(8))
    }

    /// The `start_ns` and `end_ns` of an encoded record, read from its bytes.
    #[inline(always)]
    pub fn times_of(bytes: &[u8; Self::SIZE]) -> (u64, u64) {
        let at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[i..i + 8]);
            u64::from_le_bytes(b)
        };
        (at(8), at(16))
    }
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
