//! The first read of a trace file for the passes that merge its records in time order
//! ([`FirstRead`], records dropped as they are read): its chunks of records indexed by their
//! earliest start, every record's correlation id noted in a [`LinkTable`], and where its
//! records go ([`Places`]: the streams its GPU work ran on, the memory counters its
//! allocations and frees change). The chunks are then read again in order of earliest start
//! ([`super::index::FileSource`]) and merged ([`super::merge`]).

use super::index::ChunkRef;
use super::links::LinkTable;
use super::records::{Gpu, Kind, Place, Records};
use super::trace::RecordSink;
use crate::filter::RecordFilter;
use crate::gpu_summary::fast_hash::FastSet;
use crate::model::{ThreadTrace, Trace};
use rtrace_format::{
    Chunk, MemcpyRecord, MemoryKind, MemoryOperation, MemoryRecord, NvtxEvent, NvtxKind,
};
use std::collections::{BTreeSet, HashMap};

/// Where a trace's records go on the timeline: the (device, context, stream) places its GPU
/// records ran on, and the memory counters its allocations and frees change.
#[derive(Debug, Default)]
pub struct Places {
    pub streams: BTreeSet<Place>,
    pub counters: BTreeSet<CounterKey>,
}

/// A memory counter: (device, host memory).
pub type CounterKey = (u32, bool);

/// The counter `m` changes, by how many bytes; `None` for a record that is neither an
/// allocation nor a free.
pub fn counter_change(m: &MemoryRecord) -> Option<(CounterKey, i64)> {
    let bytes = i64::try_from(m.bytes).unwrap_or(i64::MAX);
    let delta = match m.operation {
        MemoryOperation::Alloc => bytes,
        MemoryOperation::Free => -bytes,
        MemoryOperation::Unknown => return None,
    };
    let host = matches!(m.kind, MemoryKind::Pinned | MemoryKind::Pageable);
    Some(((m.device, host), delta))
}

/// The places of `trace`'s GPU and memory records.
pub fn places_of(trace: &Trace) -> Places {
    let k = trace.kernels.iter().map(|k| Gpu::Kernel(k).place());
    let c = trace.memcpys.iter().map(|m| Gpu::Memcpy(m).place());
    let s = trace.memsets.iter().map(|m| Gpu::Memset(m).place());
    Places {
        streams: k.chain(c).chain(s).collect(),
        counters: trace
            .memory
            .iter()
            .filter_map(|m| counter_change(m).map(|c| c.0))
            .collect(),
    }
}

/// The first read of a trace file: indexes its chunks of API and GPU records
/// (the records `keep` keeps), notes their links and the streams they ran on.
pub struct FirstRead<'a> {
    pub keep: &'a RecordFilter<'a>,
    pub index: Vec<ChunkRef>,
    pub links: LinkTable,
    pub places: Places,
    /// Whether it has NVTX ranges, marks or external ids (indexed, not held).
    pub nvtx: bool,
    api: HashMap<u64, u64>,
    nvtx_events: HashMap<u64, u64>,
    /// The places in `places.streams`, found by hash (a GPU record's place is looked up
    /// once per record).
    seen: FastSet<Place>,
    kernels: u64,
    memcpys: u64,
    memsets: u64,
    memory: u64,
}

impl<'a> FirstRead<'a> {
    pub fn new(keep: &'a RecordFilter<'a>) -> Self {
        FirstRead {
            keep,
            index: Vec::new(),
            links: LinkTable::default(),
            places: Places::default(),
            nvtx: false,
            api: HashMap::new(),
            nvtx_events: HashMap::new(),
            seen: FastSet::default(),
            kernels: 0,
            memcpys: 0,
            memsets: 0,
            memory: 0,
        }
    }

    fn gpu(&mut self, chunk: &Chunk, kind: Kind, first: u64, records: &[Gpu]) -> u64 {
        let mut c = ChunkRef::new(chunk, kind, first);
        for &g in records {
            c.min_start = c.min_start.min(g.span().0);
            let place = g.place();
            if self.seen.insert(place) {
                self.places.streams.insert(place);
            }
            if let Some(id) = g.correlation() {
                self.links.gpu(id);
            }
        }
        if !records.is_empty() {
            self.index.push(c);
        }
        records.len() as u64
    }
}

impl RecordSink for FirstRead<'_> {
    fn records(&mut self, trace: &mut Trace, chunk: &Chunk, records: Records) {
        match records {
            Records::Api(v) => {
                let next = self.api.entry(chunk.header.thread).or_insert(0);
                let mut c = ChunkRef::new(chunk, Kind::Api, *next);
                for r in self.keep.kept(v, RecordFilter::api) {
                    c.min_start = c.min_start.min(r.start_ns);
                    self.links.api(r.correlation);
                    *next += 1;
                }
                if c.min_start != u64::MAX {
                    self.index.push(c);
                }
            }
            Records::Kernels(v) => {
                let kept = self.keep.kept(v, RecordFilter::kernel);
                let g: Vec<Gpu> = kept.iter().map(Gpu::Kernel).collect();
                self.kernels += self.gpu(chunk, Kind::Kernels, self.kernels, &g);
            }
            Records::Memcpys(v) => self.copies(chunk, Kind::Memcpys, v),
            Records::PeerCopies(v) => self.copies(
                chunk,
                Kind::PeerCopies,
                v.into_iter().map(|p| p.copy).collect(),
            ),
            Records::Memsets(v) => {
                let kept = self.keep.kept(v, RecordFilter::memset);
                let g: Vec<Gpu> = kept.iter().map(Gpu::Memset).collect();
                self.memsets += self.gpu(chunk, Kind::Memsets, self.memsets, &g);
            }
            Records::Nvtx(v) => {
                let thread = trace.thread_mut(chunk.header.thread);
                let next = self.nvtx_events.entry(thread.tid).or_insert(0);
                let mut c = ChunkRef::new(chunk, Kind::Nvtx, *next);
                *next += v.len() as u64;
                for e in &v {
                    c.min_start = c.min_start.min(self.keep.time(e.time_ns));
                }
                if hold_names(thread, v) {
                    self.nvtx = true;
                    self.index.push(c);
                }
            }
            Records::Memory(v) => {
                let mut c = ChunkRef::new(chunk, Kind::Memory, self.memory);
                for m in self.keep.kept(v, RecordFilter::memory) {
                    c.min_start = c.min_start.min(m.timestamp_ns);
                    self.memory += 1;
                    if let Some((key, _)) = counter_change(&m) {
                        self.places.counters.insert(key);
                    }
                }
                if c.min_start != u64::MAX {
                    self.index.push(c);
                }
            }
            // Synchronizations are not drawn.
            _ => {}
        }
    }
}

impl FirstRead<'_> {
    fn copies(&mut self, chunk: &Chunk, kind: Kind, records: Vec<MemcpyRecord>) {
        let kept = self.keep.kept(records, RecordFilter::memcpy);
        let g: Vec<Gpu> = kept.iter().map(Gpu::Memcpy).collect();
        self.memcpys += self.gpu(chunk, kind, self.memcpys, &g);
    }
}

/// Keeps in `thread` the events of `events` that name domains and threads (few, needed for
/// names), not the rest (streamed instead); true when there is a rest.
pub fn hold_names(thread: &mut ThreadTrace, events: Vec<NvtxEvent>) -> bool {
    let (n, before) = (events.len(), thread.nvtx.len());
    thread.nvtx.extend(
        events
            .into_iter()
            .filter(|e| matches!(e.kind, NvtxKind::DomainCreate | NvtxKind::NameThread)),
    );
    thread.nvtx.len() - before < n
}
