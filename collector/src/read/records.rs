//! The records of a trace as one typed enum: the kinds of chunk that hold records ([`Kind`]),
//! a chunk's worth ([`Records`], decoded by kind), one record with its place in the trace
//! ([`Rec`], in the order the time-ordered passes hand them on), a GPU record as a slice shows
//! it ([`Gpu`]); and the records of a trace held whole as a source for the merge
//! ([`in_memory`]). A new kind of record is named and decoded here.

use super::merge::{InMemory, Sorted};
use crate::model::Trace;
use rtrace_format::{
    ApiRecord, Chunk, ChunkKind, KernelRecord, MemcpyRecord, MemoryRecord, MemsetRecord, NvtxEvent,
    PeerCopyRecord, SyncRecord, FLAG_CORRELATED,
};
use std::cmp::Reverse;

/// The kind of record a chunk holds, for the chunks of records ([`Records`]).
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
            ChunkKind::ApiRecords | ChunkKind::ApiRecordsInTicks => Kind::Api,
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
}

impl Records {
    /// Takes out the records that end before they start (which no timeline or duration can
    /// place), handing `f` each one's index in the chunk, kind in words, start and end.
    pub fn set_aside_damaged(&mut self, mut f: impl FnMut(usize, &'static str, u64, u64)) {
        fn split<T>(
            v: &mut Vec<T>,
            kind: &'static str,
            span: impl Fn(&T) -> (u64, u64),
            f: &mut impl FnMut(usize, &'static str, u64, u64),
        ) {
            if v.iter().all(|r| {
                let (s, e) = span(r);
                e >= s
            }) {
                return;
            }
            let mut i = 0;
            v.retain(|r| {
                let (s, e) = span(r);
                i += 1;
                if e < s {
                    f(i - 1, kind, s, e);
                }
                e >= s
            });
        }
        match self {
            Records::Api(v) => split(v, "API record", |r| (r.start_ns, r.end_ns), &mut f),
            Records::Kernels(v) => split(v, "kernel", |r| (r.start_ns, r.end_ns), &mut f),
            Records::Memcpys(v) => split(v, "memcpy", |r| (r.start_ns, r.end_ns), &mut f),
            Records::PeerCopies(v) => split(
                v,
                "peer-to-peer memcpy",
                |r| (r.copy.start_ns, r.copy.end_ns),
                &mut f,
            ),
            Records::Memsets(v) => split(v, "memset", |r| (r.start_ns, r.end_ns), &mut f),
            Records::Syncs(v) => split(v, "synchronization", |r| (r.start_ns, r.end_ns), &mut f),
            Records::Nvtx(_) | Records::Memory(_) => {}
        }
    }

    /// How many records there are.
    pub fn count(&self) -> usize {
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

    /// The size in the file of one record of this kind.
    pub fn record_size(&self) -> usize {
        match self {
            Records::Api(_) => ApiRecord::SIZE,
            Records::Kernels(_) => KernelRecord::SIZE,
            Records::Memcpys(_) => MemcpyRecord::SIZE,
            Records::PeerCopies(_) => PeerCopyRecord::SIZE,
            Records::Memsets(_) => MemsetRecord::SIZE,
            Records::Nvtx(_) => NvtxEvent::SIZE,
            Records::Memory(_) => MemoryRecord::SIZE,
            Records::Syncs(_) => SyncRecord::SIZE,
        }
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

    #[inline]
    fn time_of(&self) -> u64 {
        self.span().0
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
