//! Reading a trace: its header, then one checksummed chunk after another.

use crate::api::{ApiRecord, FunctionName};
use crate::chunk::{ChunkHeader, CHUNK_HEADER_LEN, MAX_CHUNK_PAYLOAD};
use crate::crc::crc32;
use crate::values::{
    decode_header_body, decode_value, ProcessHeader, FORMAT_MAJOR, MAGIC, MAX_HEADER_BODY,
};
use serde::Deserialize;
use std::fmt;
use std::io::{self, Read};

/// Why a trace could not be read (further).
#[derive(Debug)]
pub enum ReadError {
    /// The first bytes are not rtrace's magic.
    NotATrace,
    /// The file was written by a newer rtrace with an incompatible format.
    NewerFormat { major: u16, minor: u16 },
    /// The file ends inside a header or chunk that starts at `offset`.
    Truncated { offset: u64, what: &'static str },
    /// The bytes at `offset` are not a valid header or chunk.
    Corrupt { offset: u64, why: String },
    /// An I/O error at `offset`.
    Io { offset: u64, error: io::Error },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::NotATrace => write!(f, "not an rtrace trace (bad magic bytes)"),
            ReadError::NewerFormat { major, minor } => write!(
                f,
                "written in trace format {major}.{minor}, newer than this rtrace reads \
                 ({FORMAT_MAJOR}.x): use a newer rtrace"
            ),
            ReadError::Truncated { offset, what } => {
                write!(
                    f,
                    "truncated: the file ends inside the {what} at byte {offset}"
                )
            }
            ReadError::Corrupt { offset, why } => write!(f, "corrupt at byte {offset}: {why}"),
            ReadError::Io { offset, error } => write!(f, "read error at byte {offset}: {error}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// A chunk read from a trace.
#[derive(Clone, Debug)]
pub struct Chunk {
    /// Byte offset of the chunk in its file.
    pub offset: u64,
    pub header: ChunkHeader,
    pub payload: Vec<u8>,
}

impl Chunk {
    /// The API records of an [`ChunkKind::ApiRecords`](crate::ChunkKind::ApiRecords) chunk.
    pub fn api_records(&self) -> Result<Vec<ApiRecord>, String> {
        fixed_records::<_, { ApiRecord::SIZE }>(self, "API record", ApiRecord::from_bytes)
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
    if !chunk.payload.len().is_multiple_of(N) {
        return Err(format!(
            "{what} chunk of {} bytes is not a multiple of {N}",
            chunk.payload.len()
        ));
    }
    Ok(chunk
        .payload
        .chunks_exact(N)
        .map(|b| decode(b.try_into().unwrap()))
        .collect())
}

/// Streams the header and chunks of one trace.
pub struct TraceReader<R: Read> {
    inner: R,
    offset: u64,
    header: ProcessHeader,
    version: (u16, u16),
    done: bool,
}

/// Reads `len` bytes, or fewer where the input ends, into a vector that
/// grows as they arrive (64 KiB, then doubling, never past `len`): a corrupt
/// length field makes the reader allocate about what the input holds, not
/// what the field claims.
fn read_bounded<R: Read>(r: &mut R, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    while buf.len() < len {
        let capacity = (buf.capacity() * 2).max(64 << 10).min(len);
        buf.reserve_exact(capacity - buf.len());
        let want = capacity - buf.len();
        if r.by_ref().take(want as u64).read_to_end(&mut buf)? < want {
            break;
        }
    }
    Ok(buf)
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl<R: Read> TraceReader<R> {
    /// Reads and checks the file header.
    pub fn new(mut inner: R) -> Result<Self, ReadError> {
        let io_err = |error| ReadError::Io { offset: 0, error };
        let mut fixed = [0u8; 16];
        let n = read_full(&mut inner, &mut fixed).map_err(io_err)?;
        if n < 8 || fixed[..8] != MAGIC {
            if n < 8 && fixed[..n] == MAGIC[..n] && n > 0 {
                return Err(ReadError::Truncated {
                    offset: 0,
                    what: "file header",
                });
            }
            return Err(ReadError::NotATrace);
        }
        if n < 16 {
            return Err(ReadError::Truncated {
                offset: 0,
                what: "file header",
            });
        }
        let major = u16::from_le_bytes([fixed[8], fixed[9]]);
        let minor = u16::from_le_bytes([fixed[10], fixed[11]]);
        if major > FORMAT_MAJOR {
            return Err(ReadError::NewerFormat { major, minor });
        }
        let len = u32::from_le_bytes(fixed[12..16].try_into().unwrap());
        if len > MAX_HEADER_BODY {
            return Err(ReadError::Corrupt {
                offset: 12,
                why: format!("file header claims {len} bytes"),
            });
        }
        let mut body = read_bounded(&mut inner, len as usize + 4).map_err(io_err)?;
        if body.len() < len as usize + 4 {
            return Err(ReadError::Truncated {
                offset: 0,
                what: "file header",
            });
        }
        let crc = u32::from_le_bytes(body[len as usize..].try_into().unwrap());
        body.truncate(len as usize);
        if crc32(&body) != crc {
            return Err(ReadError::Corrupt {
                offset: 16,
                why: "file header checksum mismatch".into(),
            });
        }
        let header: ProcessHeader =
            decode_header_body(&body).map_err(|why| ReadError::Corrupt {
                offset: 16,
                why: format!("file header: {why}"),
            })?;
        Ok(TraceReader {
            inner,
            offset: 16 + len as u64 + 4,
            header,
            version: (major, minor),
            done: false,
        })
    }

    pub fn header(&self) -> &ProcessHeader {
        &self.header
    }

    /// The (major, minor) format version of the file.
    pub fn version(&self) -> (u16, u16) {
        self.version
    }

    /// Bytes consumed so far: the offset where the next chunk starts.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next whole, checksummed chunk; `Ok(None)` at a clean end of file.
    /// After an error, the reader returns `Ok(None)`.
    pub fn next_chunk(&mut self) -> Result<Option<Chunk>, ReadError> {
        if self.done {
            return Ok(None);
        }
        let r = self.read_chunk();
        if !matches!(r, Ok(Some(_))) {
            self.done = true;
        }
        r
    }

    fn read_chunk(&mut self) -> Result<Option<Chunk>, ReadError> {
        let start = self.offset;
        let mut hb = [0u8; CHUNK_HEADER_LEN];
        let n = read_full(&mut self.inner, &mut hb).map_err(|error| ReadError::Io {
            offset: start,
            error,
        })?;
        if n == 0 {
            return Ok(None);
        }
        if n < CHUNK_HEADER_LEN {
            return Err(ReadError::Truncated {
                offset: start,
                what: "chunk header",
            });
        }
        let header = ChunkHeader::decode(&hb).ok_or_else(|| ReadError::Corrupt {
            offset: start,
            why: "no chunk starts here (bad chunk magic)".into(),
        })?;
        if header.payload_len > MAX_CHUNK_PAYLOAD {
            return Err(ReadError::Corrupt {
                offset: start,
                why: format!("chunk claims {} bytes", header.payload_len),
            });
        }
        let payload =
            read_bounded(&mut self.inner, header.payload_len as usize).map_err(|error| {
                ReadError::Io {
                    offset: start,
                    error,
                }
            })?;
        if payload.len() < header.payload_len as usize {
            return Err(ReadError::Truncated {
                offset: start,
                what: "chunk",
            });
        }
        if header.checksum(&payload) != header.crc {
            return Err(ReadError::Corrupt {
                offset: start,
                why: "chunk checksum mismatch".into(),
            });
        }
        self.offset = start + CHUNK_HEADER_LEN as u64 + payload.len() as u64;
        Ok(Some(Chunk {
            offset: start,
            header,
            payload,
        }))
    }
}
