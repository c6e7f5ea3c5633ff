//! The chunks of a trace file found on its first read ([`ChunkRef`]: offset, kind, thread,
//! correlation-id range, earliest start), and reading them again by offset ([`Rereader`]),
//! checked as on the first read.

use super::inputs::LoadError;
use rtrace_format::{Chunk, ChunkHeader, ChunkKind, CHUNK_HEADER_LEN, MAX_CHUNK_PAYLOAD};
use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Why a trace could not be read in bounded memory (for a report or an export).
#[derive(Debug)]
pub enum StreamError {
    Load(LoadError),
    /// The filter keeps nothing (no trace of the processes asked for).
    Filter(String),
    /// A file read a second time no longer holds what the first read found.
    Changed {
        path: PathBuf,
        why: String,
    },
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamError::Load(e) => write!(f, "{e}"),
            StreamError::Filter(e) => f.write_str(e),
            StreamError::Changed { path, why } => {
                write!(f, "{}: changed while it was read: {why}", path.display())
            }
        }
    }
}

impl From<LoadError> for StreamError {
    fn from(e: LoadError) -> Self {
        StreamError::Load(e)
    }
}

/// The kind of record a chunk holds, for the chunks of records ([`super::records::Records`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Api,
    Kernels,
    Memcpys,
    PeerCopies,
    Memsets,
    Nvtx,
    Memory,
    Syncs,
}

impl Kind {
    /// The kind of records a chunk of kind `kind` holds; `None` for the chunks that are not
    /// records (names, resources, images, ...).
    #[inline]
    pub fn of(kind: ChunkKind) -> Option<Kind> {
        Some(match kind {
            ChunkKind::ApiRecords => Kind::Api,
            ChunkKind::Kernels => Kind::Kernels,
            ChunkKind::Memcpys => Kind::Memcpys,
            ChunkKind::PeerCopies => Kind::PeerCopies,
            ChunkKind::Memsets => Kind::Memsets,
            ChunkKind::NvtxEvents => Kind::Nvtx,
            ChunkKind::Memory => Kind::Memory,
            ChunkKind::Sync => Kind::Syncs,
            _ => return None,
        })
    }

    /// Kernels, copies and memsets: the GPU work of the utilisation and latency sections.
    pub fn gpu_work(self) -> bool {
        matches!(
            self,
            Kind::Kernels | Kind::Memcpys | Kind::PeerCopies | Kind::Memsets
        )
    }
}

/// A chunk of records, as found on the first pass (its kept records only).
#[derive(Clone, Copy, Debug)]
pub struct ChunkRef {
    pub offset: u64,
    pub kind: Kind,
    pub thread: u64,
    /// Index of its first kept record among the trace's kept records of its activity.
    pub first: u64,
    /// Least and greatest correlation id of its (correlated) records; min > max for none.
    pub min_id: u64,
    pub max_id: u64,
    /// Earliest start of its records.
    pub min_start: u64,
}

impl ChunkRef {
    pub fn new(chunk: &Chunk, kind: Kind, first: u64) -> ChunkRef {
        ChunkRef {
            offset: chunk.offset,
            kind,
            thread: chunk.header.thread,
            first,
            min_id: u64::MAX,
            max_id: 0,
            min_start: u64::MAX,
        }
    }

    /// Notes a correlation id of one of its records.
    #[inline]
    pub fn id(&mut self, id: u64) {
        self.min_id = self.min_id.min(id);
        self.max_id = self.max_id.max(id);
    }

    /// Whether it holds a correlation id in `lo..=hi`.
    pub fn reaches(&self, lo: u64, hi: u64) -> bool {
        self.min_id <= hi && self.max_id >= lo && self.min_id <= self.max_id
    }
}

/// Reads the chunks of one file again, by offset.
pub struct Rereader {
    path: PathBuf,
    file: BufReader<File>,
}

impl Rereader {
    pub fn open(path: &Path) -> Result<Rereader, StreamError> {
        let file = File::open(path).map_err(|error| LoadError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        Ok(Rereader {
            path: path.to_path_buf(),
            file: BufReader::with_capacity(1 << 16, file),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The chunk at `offset`, checked as on the first read ([`rtrace_format::TraceReader`]):
    /// its magic, its size within [`MAX_CHUNK_PAYLOAD`], its checksum.
    pub fn chunk(&mut self, offset: u64) -> Result<Chunk, StreamError> {
        let changed = |why: String| StreamError::Changed {
            path: self.path.clone(),
            why: format!("the chunk at byte {offset}: {why}"),
        };
        self.file
            .seek(SeekFrom::Start(offset))
            .map_err(|e| changed(e.to_string()))?;
        let mut hb = [0u8; CHUNK_HEADER_LEN];
        self.file
            .read_exact(&mut hb)
            .map_err(|e| changed(e.to_string()))?;
        let header = ChunkHeader::decode(&hb).ok_or_else(|| changed("bad chunk magic".into()))?;
        if header.payload_len > MAX_CHUNK_PAYLOAD {
            return Err(changed(format!(
                "chunk claims {} bytes",
                header.payload_len
            )));
        }
        let mut payload = vec![0u8; header.payload_len as usize];
        self.file
            .read_exact(&mut payload)
            .map_err(|e| changed(e.to_string()))?;
        if header.checksum(&payload) != header.crc {
            return Err(changed("checksum mismatch".into()));
        }
        crate::progress::advance((CHUNK_HEADER_LEN + payload.len()) as u64);
        Ok(Chunk {
            offset,
            header,
            payload,
        })
    }
}
