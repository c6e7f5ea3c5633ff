//! Reading a trace: its header, then one checksummed chunk after another.

use crate::chunk::{ChunkHeader, CHUNK_HEADER_LEN, MAX_CHUNK_PAYLOAD};
use crate::crc::crc32;
use crate::payload::Chunk;
use crate::ring::Salvage;
use crate::values::{decode_header_body, ProcessHeader, FORMAT_MAJOR, MAGIC, MAX_HEADER_BODY};
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

/// Streams the header and chunks of one trace.
pub struct TraceReader<R: Read> {
    inner: R,
    offset: u64,
    header: ProcessHeader,
    version: (u16, u16),
    done: bool,
    /// The ring regions seen so far, and how far chunks reached in them.
    salvage: Option<Salvage>,
    /// The same for the GPU buffer regions (rebuilt before the rings' chunks).
    gpu_salvage: Option<crate::gpu_region::GpuSalvage>,
    /// At the end: the chunks rebuilt from the rings (last first), then the error that ended
    /// the read, if any.
    rebuilt: Vec<Chunk>,
    ended_by: Option<ReadError>,
    /// The errno of a failed write a ring region reported (28: disk full).
    write_error: Option<u64>,
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
            salvage: Some(Default::default()),
            gpu_salvage: Some(Default::default()),
            rebuilt: Vec::new(),
            ended_by: None,
            write_error: None,
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

    /// The next whole, checksummed chunk; `Ok(None)` at a clean end of file. After the
    /// file's last readable chunk come the chunks rebuilt from its ring regions (flag
    /// [`crate::ring::FLAG_SALVAGED`]: what the writer recorded but had not copied into a
    /// chunk when its process ended), then the error that ended the read, if any; after
    /// that, `Ok(None)`.
    pub fn next_chunk(&mut self) -> Result<Option<Chunk>, ReadError> {
        if !self.done {
            match self.read_chunk() {
                Ok(Some(chunk)) => {
                    if let Some(s) = self.salvage.as_mut() {
                        s.note(&chunk);
                    }
                    if let Some(g) = self.gpu_salvage.as_mut() {
                        g.note(&chunk);
                    }
                    return Ok(Some(chunk));
                }
                Ok(None) => {}
                Err(e) => self.ended_by = Some(e),
            }
            self.done = true;
            if let Some(s) = self.salvage.take() {
                self.write_error = s.write_error();
                if let Some(mut g) = self.gpu_salvage.take().filter(|g| g.wanted()) {
                    for (source, call, symbol) in s.links() {
                        g.link(source, call, symbol);
                    }
                    self.rebuilt = g.finish();
                }
                self.rebuilt.extend(s.finish());
                self.rebuilt.reverse();
            }
        }
        if let Some(chunk) = self.rebuilt.pop() {
            return Ok(Some(chunk));
        }
        match self.ended_by.take() {
            Some(e) => Err(e),
            None => Ok(None),
        }
    }

    /// The `errno` of a failed write of the trace that its ring regions reported (28: the
    /// disk was full), once the read has reached the end.
    pub fn write_error(&self) -> Option<u64> {
        self.write_error
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
