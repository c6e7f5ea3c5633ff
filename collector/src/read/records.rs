//! The records of a trace as one typed enum: a chunk's worth ([`Records`], decoded by kind),
//! one record with its place in the trace ([`Rec`], in the order the time-ordered passes
//! hand them on), a GPU record as a slice shows it ([`Gpu`]); and the sources of [`Rec`]s for
//! the merge ([`FileSource`]: indexed chunks read again; [`in_memory`]: a trace held whole).

use super::index::{ChunkRef, Kind, Rereader, StreamError};
use super::merge::{InMemory, Sorted, Source};
use crate::filter::RecordFilter;
use crate::model::Trace;
use rtrace_format::{
    ApiRecord, Chunk, KernelRecord, MemcpyRecord, MemoryRecord, MemsetRecord, NvtxEvent,
    PeerCopyRecord, SyncRecord, FLAG_CORRELATED,
};
use std::cmp::Reverse;
use std::path::Path;

/// The records of a chunk, decoded.
pub enum Records {
    Api(Vec<ApiRecord>),
    Kernels(Vec<KernelRecord>),
    Memcpys(Vec<MemcpyRecord>),
    PeerCopies(Vec<PeerCopyRecord>),
    Memsets(Vec<MemsetRecord>),
    Nvtx(Vec<NvtxEvent>),
    Memory(Vec<MemoryRecord>),
    Syncs(Vec<SyncRecord>),
}

impl Records {
    /// The records of `chunk`, a chunk of kind `kind`; why not, for a payload that cannot be
    /// decoded.
    #[inline]
    pub fn decode(kind: Kind, chunk: &Chunk) -> Result<Records, String> {
        match kind {
            Kind::Api => chunk.api_records().map(Records::Api),
            Kind::Kernels => chunk.kernel_records().map(Records::Kernels),
            Kind::Memcpys => chunk.memcpy_records().map(Records::Memcpys),
            Kind::PeerCopies => chunk.peer_copy_records().map(Records::PeerCopies),
            Kind::Memsets => chunk.memset_records().map(Records::Memsets),
            Kind::Nvtx => chunk.nvtx_events().map(Records::Nvtx),
            Kind::Memory => chunk.memory_records().map(Records::Memory),
            Kind::Syncs => chunk.sync_records().map(Records::Syncs),
        }
    }

    /// How many records.
    pub fn len(&self) -> usize {
        match self {
            Records::Api(v) => v.len(),
            Records::Kernels(v) => v.len(),
            Records::Memcpys(v) => v.len(),
            Records::PeerCopies(v) => v.len(),
            Records::Memsets(v) => v.len(),
            Records::Nvtx(v) => v.len(),
            Records::Memory(v) => v.len(),
            Records::Syncs(v) => v.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The records of indexed chunk `c`, read again as `chunk` from the file at `path`
/// (damaged payloads were skipped on the first pass and are not indexed); peer-to-peer copies
/// as the copies they are.
pub fn decode(c: &ChunkRef, chunk: &Chunk, path: &Path) -> Result<Records, StreamError> {
    match Records::decode(c.kind, chunk) {
        Ok(Records::PeerCopies(p)) => Ok(Records::Memcpys(p.into_iter().map(|p| p.copy).collect())),
        Ok(r) => Ok(r),
        Err(why) => Err(StreamError::Changed {
            path: path.to_path_buf(),
            why,
        }),
    }
}

/// A GPU record, as a slice shows it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Gpu<'a> {
    Kernel(&'a KernelRecord),
    Memcpy(&'a MemcpyRecord),
    Memset(&'a MemsetRecord),
}

/// Where GPU work ran: (device ordinal, context id, stream id), ids as the
/// activity source gave them.
pub type Place = (u32, u32, u32);

impl Gpu<'_> {
    /// The correlation id of the API call it links to: a kernel or copy
    /// flagged `FLAG_CORRELATED`, a memset with a non-zero correlation (the
    /// rules of the report's launch latency).
    pub fn correlation(self) -> Option<u64> {
        match self {
            Gpu::Kernel(k) => (k.flags & FLAG_CORRELATED != 0).then_some(k.correlation),
            Gpu::Memcpy(m) => (u32::from(m.flags) & FLAG_CORRELATED != 0).then_some(m.correlation),
            Gpu::Memset(m) => (m.correlation != 0).then_some(m.correlation),
        }
    }

    /// (device, context, stream).
    pub fn place(self) -> Place {
        match self {
            Gpu::Kernel(k) => (k.device, k.context, k.stream),
            Gpu::Memcpy(m) => (m.device, m.context, m.stream),
            Gpu::Memset(m) => (m.device, m.context, m.stream),
        }
    }

    /// (start, end).
    pub fn span(self) -> (u64, u64) {
        match self {
            Gpu::Kernel(k) => (k.start_ns, k.end_ns),
            Gpu::Memcpy(m) => (m.start_ns, m.end_ns),
            Gpu::Memset(m) => (m.start_ns, m.end_ns),
        }
    }
}

/// A record of a trace, with its place in the trace (`index`: among its
/// thread's API records, or among the trace's kernels, copies or memsets,
/// in file order).
#[derive(Clone, Debug)]
pub enum Rec {
    Api {
        tid: u64,
        index: u64,
        r: ApiRecord,
    },
    Kernel(u64, KernelRecord),
    Memcpy(u64, MemcpyRecord),
    Memset(u64, MemsetRecord),
    /// An NVTX event of thread `tid`, `index` its place among the thread's NVTX events.
    Nvtx {
        tid: u64,
        index: u64,
        e: NvtxEvent,
    },
    /// An allocation or free of trace `trace` (0 for a single trace's records), `index` its
    /// place among the trace's memory records.
    Memory {
        trace: usize,
        index: u64,
        m: MemoryRecord,
    },
}

/// The order records are handed on in: by start; at one start NVTX events
/// first (a range begun or ended then holds a call made then), then API calls
/// (so a call is seen before work that starts with it), then GPU work, the
/// longest first (as the export's lanes need), then allocations and frees; then in
/// file order per kind (NVTX events in file order per thread, memory records
/// in trace, then file order).
pub type Key = (u64, u8, Reverse<u64>, u8, u64, u64);

impl Sorted for Rec {
    type Key = Key;

    #[inline]
    fn key(&self) -> Key {
        let (start, end) = self.span();
        let end = Reverse(end.max(start));
        match self {
            Rec::Nvtx { tid, index, .. } => (start, 0, end, 0, *tid, *index),
            Rec::Api { tid, index, .. } => (start, 1, end, 0, *tid, *index),
            Rec::Memory { trace, index, .. } => (start, 3, end, 0, *trace as u64, *index),
            _ => {
                let (kind, index) = self.place();
                (start, 2, end, kind, 0, index)
            }
        }
    }

    #[inline]
    fn time(key: &Key) -> u64 {
        key.0
    }
}

impl Rec {
    /// (start, end); an instant's start and end are its time.
    pub fn span(&self) -> (u64, u64) {
        match self {
            Rec::Api { r, .. } => (r.start_ns, r.end_ns),
            Rec::Nvtx { e, .. } => (e.time_ns, e.time_ns),
            Rec::Memory { m, .. } => (m.timestamp_ns, m.timestamp_ns),
            _ => self.gpu().map_or((0, 0), Gpu::span),
        }
    }

    /// A GPU record's kind (kernel, copy, memset: 0, 1, 2; also 0 for an API
    /// record) and index.
    pub fn place(&self) -> (u8, u64) {
        match self {
            Rec::Api { index, .. } | Rec::Kernel(index, _) => (0, *index),
            Rec::Memcpy(index, _) => (1, *index),
            Rec::Memset(index, _) => (2, *index),
            Rec::Nvtx { index, .. } => (3, *index),
            Rec::Memory { index, .. } => (4, *index),
        }
    }

    pub fn gpu(&self) -> Option<Gpu<'_>> {
        match self {
            Rec::Api { .. } | Rec::Nvtx { .. } | Rec::Memory { .. } => None,
            Rec::Kernel(_, k) => Some(Gpu::Kernel(k)),
            Rec::Memcpy(_, m) => Some(Gpu::Memcpy(m)),
            Rec::Memset(_, m) => Some(Gpu::Memset(m)),
        }
    }

    /// Tags an allocation or free with the index of its trace among several
    /// ([`super::merge::Sources`]).
    pub fn tag_trace(&mut self, ti: usize) {
        if let Rec::Memory { trace, .. } = self {
            *trace = ti;
        }
    }
}

/// The records of `trace`, held in memory, as one batch (copied).
pub fn in_memory(trace: &Trace) -> InMemory<Rec> {
    let mut v = Vec::with_capacity((trace.api_records() + trace.gpu_records()) as usize);
    for (&tid, th) in &trace.threads {
        v.extend(th.records.iter().enumerate().map(|(i, &r)| Rec::Api {
            tid,
            index: i as u64,
            r,
        }));
    }
    let n = |i: usize| i as u64;
    v.extend(
        trace
            .kernels
            .iter()
            .enumerate()
            .map(|(i, &k)| Rec::Kernel(n(i), k)),
    );
    v.extend(
        trace
            .memcpys
            .iter()
            .enumerate()
            .map(|(i, &m)| Rec::Memcpy(n(i), m)),
    );
    v.extend(
        trace
            .memsets
            .iter()
            .enumerate()
            .map(|(i, &m)| Rec::Memset(n(i), m)),
    );
    v.extend(nvtx_recs(trace));
    v.extend(trace.memory.iter().enumerate().map(|(i, &m)| Rec::Memory {
        trace: 0,
        index: n(i),
        m,
    }));
    InMemory::new(v)
}

/// The NVTX events of `trace`, held in memory, alone, as one batch.
pub fn nvtx_in_memory(trace: &Trace) -> InMemory<Rec> {
    InMemory::new(nvtx_recs(trace).collect())
}

fn nvtx_recs(trace: &Trace) -> impl Iterator<Item = Rec> + '_ {
    trace.threads.iter().flat_map(|(&tid, th)| {
        th.nvtx.iter().enumerate().map(move |(i, &e)| Rec::Nvtx {
            tid,
            index: i as u64,
            e,
        })
    })
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
        let chunk = self.file.chunk(c.offset)?;
        let keep = self.keep;
        let index = |i: usize| c.first + i as u64;
        match decode(&c, &chunk, self.file.path())? {
            Records::Api(v) => out.extend(
                v.into_iter()
                    .filter_map(|r| keep.api(r))
                    .enumerate()
                    .map(|(i, r)| Rec::Api {
                        tid: c.thread,
                        index: index(i),
                        r,
                    }),
            ),
            Records::Kernels(v) => out.extend(
                v.into_iter()
                    .filter_map(|k| keep.kernel(k))
                    .enumerate()
                    .map(|(i, k)| Rec::Kernel(index(i), k)),
            ),
            Records::Memcpys(v) => out.extend(
                v.into_iter()
                    .filter_map(|m| keep.memcpy(m))
                    .enumerate()
                    .map(|(i, m)| Rec::Memcpy(index(i), m)),
            ),
            Records::Memsets(v) => out.extend(
                v.into_iter()
                    .filter_map(|s| keep.memset(s))
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
                v.into_iter()
                    .filter_map(|m| keep.memory(m))
                    .enumerate()
                    .map(|(i, m)| Rec::Memory {
                        trace: 0,
                        index: index(i),
                        m,
                    }),
            ),
            Records::PeerCopies(_) | Records::Syncs(_) => {}
        }
        Ok(())
    }
}
