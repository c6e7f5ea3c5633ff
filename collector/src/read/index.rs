//! The chunks of a trace file found on its first read ([`ChunkRef`]: offset, kind, thread,
//! correlation-id range, earliest start), reading them again by offset ([`Rereader`]),
//! checked as on the first read, and decoding them again ([`decode`]); a file's indexed chunks
//! read again in order of earliest start, as a source for the merge ([`FileSource`]).

use super::inputs::{LoadError, StreamError};
use super::merge::Source;
use super::records::{Kind, Rec, Records};
use crate::filter::RecordFilter;
use rtrace_format::ring::{rebuild_salvaged, FLAG_SALVAGED};
use rtrace_format::{Chunk, ChunkHeader, ChunkKind, CHUNK_HEADER_LEN, MAX_CHUNK_PAYLOAD};
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

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
    /// A chunk the format's reader rebuilt from the ring region at `offset`: its kind and
    /// first ring position ([`rtrace_format::ring::rebuild_salvaged`]).
    pub salvaged: Option<(ChunkKind, u64)>,
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
            salvaged: (chunk.header.flags & FLAG_SALVAGED != 0)
                .then_some((chunk.header.kind, chunk.header.seq)),
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
    /// The chunks the format's reader rebuilds from the file's GPU buffer regions (read
    /// through the whole file once, when first needed).
    gpu_rebuilt: Option<Vec<Chunk>>,
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
            gpu_rebuilt: None,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The chunk `c` refers to, read again (rebuilt from its ring region if the first read
    /// rebuilt it).
    pub fn chunk_of(&mut self, c: &ChunkRef) -> Result<Chunk, StreamError> {
        let chunk = self.chunk(c.offset)?;
        let Some((kind, from)) = c.salvaged else {
            return Ok(chunk);
        };
        if chunk.header.kind == ChunkKind::GpuBufferRegion {
            return self.gpu_rebuilt(c.offset, kind);
        }
        rebuild_salvaged(&chunk, kind, from).ok_or_else(|| StreamError::Changed {
            path: self.path.clone(),
            why: format!("the ring region at byte {}: it changed", c.offset),
        })
    }

    /// The chunk of `kind` rebuilt from the GPU buffer regions, the last at `offset`: CUPTI's
    /// records are read with what the whole file says (their layout, the kernel names'
    /// addresses, the rings' links), so the file is read through once more.
    fn gpu_rebuilt(&mut self, offset: u64, kind: ChunkKind) -> Result<Chunk, StreamError> {
        let changed = |path: &Path, why: String| StreamError::Changed {
            path: path.to_path_buf(),
            why: format!("the GPU buffer region at byte {offset}: {why}"),
        };
        if self.gpu_rebuilt.is_none() {
            let file = File::open(&self.path).map_err(|e| changed(&self.path, e.to_string()))?;
            let mut reader =
                rtrace_format::TraceReader::new(BufReader::with_capacity(1 << 16, file))
                    .map_err(|e| changed(&self.path, e.to_string()))?;
            let mut rebuilt = Vec::new();
            while let Ok(Some(chunk)) = reader.next_chunk() {
                if chunk.header.flags & FLAG_SALVAGED != 0 && chunk.header.thread == 0 {
                    rebuilt.push(chunk);
                }
            }
            self.gpu_rebuilt = Some(rebuilt);
        }
        self.gpu_rebuilt
            .iter()
            .flatten()
            .find(|c| c.offset == offset && c.header.kind == kind)
            .cloned()
            .ok_or_else(|| changed(&self.path, "it changed".into()))
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
        // Read into the vector's spare capacity, not zeroed first (`read_exact` into a zeroed
        // vector spent a twentieth of the report's time in `memset`).
        let len = header.payload_len as usize;
        let mut payload = Vec::with_capacity(len);
        let read = (&mut self.file)
            .take(len as u64)
            .read_to_end(&mut payload)
            .map_err(|e| changed(e.to_string()))?;
        if read < len {
            // What `read_exact` says.
            return Err(changed("failed to fill whole buffer".into()));
        }
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

/// The records of indexed chunk `c`, read again as `chunk` from the file at `path`
/// (damaged payloads were skipped on the first pass and are not indexed; records that end
/// before they start are set aside, as on the first pass); peer-to-peer copies as the copies
/// they are.
pub fn decode(c: &ChunkRef, chunk: &Chunk, path: &Path) -> Result<Records, StreamError> {
    let mut records = Records::decode(c.kind, chunk);
    if let Ok(r) = &mut records {
        // Counted on the first read.
        r.set_aside_damaged(|_, _, _, _| {});
    }
    match records {
        Ok(Records::PeerCopies(p)) => Ok(Records::Memcpys(p.into_iter().map(|p| p.copy).collect())),
        Ok(r) => Ok(r),
        Err(why) => Err(StreamError::Changed {
            path: path.to_path_buf(),
            why,
        }),
    }
}

/// A trace file's indexed chunks, read again in order of earliest start.
pub struct FileSource<'a> {
    chunks: Vec<ChunkRef>,
    next: usize,
    file: Rereader,
    keep: &'a RecordFilter<'a>,
}

impl<'a> FileSource<'a> {
    pub fn open(
        path: &Path,
        mut chunks: Vec<ChunkRef>,
        keep: &'a RecordFilter<'a>,
    ) -> Result<Self, StreamError> {
        chunks.sort_by_key(|c| (c.min_start, c.offset));
        Ok(FileSource {
            chunks,
            next: 0,
            file: Rereader::open(path)?,
            keep,
        })
    }
}

impl Source<Rec> for FileSource<'_> {
    fn next_start(&self) -> Option<u64> {
        self.chunks.get(self.next).map(|c| c.min_start)
    }

    fn read(&mut self, out: &mut Vec<Rec>) -> Result<(), StreamError> {
        let Some(c) = self.chunks.get(self.next).copied() else {
            return Ok(());
        };
        self.next += 1;
        let chunk = self.file.chunk_of(&c)?;
        let keep = self.keep;
        let index = |i: usize| c.first + i as u64;
        let records = decode(&c, &chunk, self.file.path())?;
        out.reserve(records.count());
        match records {
            Records::Api(v) => out.extend(
                keep.kept(v, RecordFilter::api)
                    .into_iter()
                    .enumerate()
                    .map(|(i, r)| Rec::Api {
                        tid: c.thread,
                        index: index(i),
                        r,
                    }),
            ),
            Records::Kernels(v) => out.extend(
                keep.kept(v, RecordFilter::kernel)
                    .into_iter()
                    .enumerate()
                    .map(|(i, k)| Rec::Kernel(index(i), k)),
            ),
            Records::Memcpys(v) => out.extend(
                keep.kept(v, RecordFilter::memcpy)
                    .into_iter()
                    .enumerate()
                    .map(|(i, m)| Rec::Memcpy(index(i), m)),
            ),
            Records::Memsets(v) => out.extend(
                keep.kept(v, RecordFilter::memset)
                    .into_iter()
                    .enumerate()
                    .map(|(i, s)| Rec::Memset(index(i), s)),
            ),
            // Every event: a range begun outside the time window still pairs its end.
            Records::Nvtx(v) => out.extend(v.into_iter().enumerate().map(|(i, mut e)| {
                e.time_ns = keep.time(e.time_ns);
                Rec::Nvtx {
                    tid: c.thread,
                    index: index(i),
                    e,
                }
            })),
            Records::Memory(v) => out.extend(
                keep.kept(v, RecordFilter::memory)
                    .into_iter()
                    .enumerate()
                    .map(|(i, m)| Rec::Memory {
                        trace: 0,
                        index: index(i),
                        m,
                    }),
            ),
            _ => {}
        }
        Ok(())
    }
}
