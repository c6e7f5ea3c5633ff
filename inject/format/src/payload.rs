//! A chunk as read from a trace, and its payload's decoders.

use crate::api::{ApiRecord, FunctionName};
use crate::chunk::{ChunkHeader, ChunkKind};
use crate::values::decode_value;
use serde::Deserialize;

/// A chunk read from a trace.
#[derive(Clone, Debug)]
pub struct Chunk {
    /// Byte offset of the chunk in its file.
    pub offset: u64,
    pub header: ChunkHeader,
    pub payload: Vec<u8>,
}

impl Chunk {
    /// The API records of an [`ChunkKind::ApiRecords`](crate::ChunkKind::ApiRecords) chunk,
    /// or of an [`ChunkKind::ApiRecordsInTicks`](crate::ChunkKind::ApiRecordsInTicks) one
    /// with their times converted to ns ([`crate::ticks`]).
    pub fn api_records(&self) -> Result<Vec<ApiRecord>, String> {
        if self.header.kind == ChunkKind::ApiRecordsInTicks {
            return crate::ticks::decode_api_ticks(&self.payload);
        }
        fixed_records::<_, { ApiRecord::SIZE }>(self, "API record", ApiRecord::from_bytes)
    }

    /// The API records of an API chunk (either kind, as [`Chunk::api_records`]) that `pick`
    /// picks by correlation id, in order, each handed to `take` with what `pick` gave for it;
    /// the others are not decoded.
    pub fn pick_api_records<K>(
        &self,
        mut pick: impl FnMut(u64) -> Option<K>,
        mut take: impl FnMut(K, ApiRecord),
    ) -> Result<(), String> {
        if self.header.kind == ChunkKind::ApiRecordsInTicks {
            return crate::ticks::pick_api_ticks(&self.payload, pick, take);
        }
        whole_records::<{ ApiRecord::SIZE }>(self, "API record")?.for_each(|b| {
            if let Some(k) = pick(ApiRecord::correlation_of(b)) {
                take(k, ApiRecord::from_bytes(b));
            }
        });
        Ok(())
    }

    /// The entries of a [`ChunkKind::FunctionNames`](crate::ChunkKind::FunctionNames) chunk.
    pub fn function_names(&self) -> Result<Vec<FunctionName>, String> {
        let p = &self.payload;
        let bad = || "malformed function-name table".to_string();
        let count = u32::from_le_bytes(p.get(0..4).ok_or_else(bad)?.try_into().unwrap());
        let mut at = 4usize;
        let mut out = Vec::with_capacity(count.min(1 << 16) as usize);
        for _ in 0..count {
            let id = u32::from_le_bytes(p.get(at..at + 4).ok_or_else(bad)?.try_into().unwrap());
            let len =
                u16::from_le_bytes(p.get(at + 4..at + 6).ok_or_else(bad)?.try_into().unwrap());
            let name = p.get(at + 6..at + 6 + len as usize).ok_or_else(bad)?;
            out.push(FunctionName {
                id,
                name: String::from_utf8_lossy(name).into_owned(),
            });
            at += 6 + len as usize;
        }
        Ok(out)
    }

    /// Decodes a serde payload ([`ThreadInfo`](crate::ThreadInfo), [`ProcessEnd`](crate::ProcessEnd), [`Notice`](crate::Notice)).
    pub fn value<T: for<'de> Deserialize<'de>>(&self) -> Result<T, String> {
        decode_value(&self.payload)
    }
}

/// The records of a chunk that holds an array of `N`-byte records, each decoded by `decode`;
/// `what` names them when the payload is not a whole number of records.
pub(crate) fn fixed_records<T, const N: usize>(
    chunk: &Chunk,
    what: &str,
    decode: impl Fn(&[u8; N]) -> T,
) -> Result<Vec<T>, String> {
    Ok(whole_records::<N>(chunk, what)?.map(decode).collect())
}

/// The `N`-byte records of a chunk that holds an array of them; `what` names them when the
/// payload is not a whole number of records.
fn whole_records<'a, const N: usize>(
    chunk: &'a Chunk,
    what: &str,
) -> Result<impl Iterator<Item = &'a [u8; N]>, String> {
    if !chunk.payload.len().is_multiple_of(N) {
        return Err(format!(
            "{what} chunk of {} bytes is not a multiple of {N}",
            chunk.payload.len()
        ));
    }
    Ok(chunk.payload.chunks_exact(N).map(|b| b.try_into().unwrap()))
}
