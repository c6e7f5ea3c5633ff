//! The records of one trace in time order, for the writers: a k-way merge of
//! the trace file's chunks, with memory bounded by the chunks that overlap in
//! time, not by the trace's size.
//!
//! A first read of the file ([`FirstRead`], records dropped as they are read)
//! indexes its API and GPU chunks by their earliest start and notes each
//! record's correlation id in a [`LinkTable`]. The chunks are then read again
//! in order of earliest start: before a chunk is read, every record already
//! read that starts before it is handed on, earliest first. librtrace.so
//! flushes each thread's buffer and each CUPTI buffer as it fills, so the
//! chunks read but not yet handed on are few: about one per thread and
//! GPU buffer.
//!
//! [`write`] lays the records out on the lanes of their tracks and gives them
//! their flows, as the writers ([`Emitter`]) show them.

use super::layout::{self, Device, Flow, Gpu, Lanes, LinkTable, Place, Step};
use super::nvtx_tracks::NvtxTracks;
use super::Stats;
use crate::model::{RecordSink, ThreadTrace, Trace};
use crate::stream::{decode, ChunkRef, Keep, Kind, Records, Rereader, StreamError};
use rtrace_format::{
    ApiRecord, Chunk, KernelRecord, MemcpyRecord, MemoryKind, MemoryOperation, MemoryRecord,
    MemsetRecord, NvtxEvent, PeerCopyRecord, SyncRecord,
};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, VecDeque};
use std::io;
use std::path::Path;

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
/// longest first (as [`Lanes`] needs), then allocations and frees; then in
/// file order per kind (NVTX events in file order per thread, memory records
/// in trace, then file order).
type Key = (u64, u8, Reverse<u64>, u8, u64, u64);

impl Rec {
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

    fn span(&self) -> (u64, u64) {
        match self {
            Rec::Api { r, .. } => (r.start_ns, r.end_ns),
            Rec::Nvtx { e, .. } => (e.time_ns, e.time_ns),
            Rec::Memory { m, .. } => (m.timestamp_ns, m.timestamp_ns),
            _ => self.gpu().map_or((0, 0), Gpu::span),
        }
    }

    /// A GPU record's kind (kernel, copy, memset: 0, 1, 2; also 0 for an API
    /// record) and index.
    fn place(&self) -> (u8, u64) {
        match self {
            Rec::Api { index, .. } | Rec::Kernel(index, _) => (0, *index),
            Rec::Memcpy(index, _) => (1, *index),
            Rec::Memset(index, _) => (2, *index),
            Rec::Nvtx { index, .. } => (3, *index),
            Rec::Memory { index, .. } => (4, *index),
        }
    }

    fn gpu(&self) -> Option<Gpu<'_>> {
        match self {
            Rec::Api { .. } | Rec::Nvtx { .. } | Rec::Memory { .. } => None,
            Rec::Kernel(_, k) => Some(Gpu::Kernel(k)),
            Rec::Memcpy(_, m) => Some(Gpu::Memcpy(m)),
            Rec::Memset(_, m) => Some(Gpu::Memset(m)),
        }
    }
}

/// Where a trace's records come from, a batch at a time, batches in order of
/// their earliest start.
pub trait Source {
    /// The earliest start among the records still to read; `None` when all
    /// were read.
    fn next_start(&self) -> Option<u64>;
    /// Reads the next batch into `out`.
    fn read(&mut self, out: &mut Vec<Rec>) -> Result<(), StreamError>;
}

/// Why a trace could not be written.
#[derive(Debug)]
pub enum Failure {
    Read(StreamError),
    Write(io::Error),
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure::Write(e)
    }
}

/// Hands `src`'s records to `emit` in [`Key`] order: each batch is sorted
/// (batches come mostly sorted already), and the batches read are merged
/// through a heap of their first records not yet handed on.
pub fn merge(
    src: &mut dyn Source,
    mut emit: impl FnMut(Rec) -> io::Result<()>,
) -> Result<(), Failure> {
    // Batches being merged, each with the index of its next record; freed slots.
    let mut runs: Vec<(Vec<Rec>, usize)> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut heap: BinaryHeap<Reverse<(Key, usize)>> = BinaryHeap::new();
    loop {
        let next = src.next_start();
        while let Some(&Reverse((key, run))) = heap.peek() {
            if next.is_some_and(|n| key.0 >= n) {
                break;
            }
            heap.pop();
            let (recs, i) = &mut runs[run];
            let rec = std::mem::replace(&mut recs[*i], Rec::Kernel(0, KernelRecord::default()));
            *i += 1;
            match recs.get(*i) {
                Some(r) => heap.push(Reverse((r.key(), run))),
                None => {
                    *recs = Vec::new();
                    free.push(run);
                }
            }
            emit(rec)?;
        }
        if next.is_none() {
            return Ok(());
        }
        let mut batch = Vec::new();
        src.read(&mut batch).map_err(Failure::Read)?;
        if batch.is_empty() {
            continue;
        }
        batch.sort_unstable_by_key(Rec::key);
        let key = batch[0].key();
        let run = match free.pop() {
            Some(r) => {
                runs[r] = (batch, 0);
                r
            }
            None => {
                runs.push((batch, 0));
                runs.len() - 1
            }
        };
        heap.push(Reverse((key, run)));
    }
}

/// The records of a trace held in memory, as one batch.
pub struct InMemory(Option<Vec<Rec>>);

impl InMemory {
    /// `trace`'s records (copied).
    pub fn of(trace: &Trace) -> InMemory {
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
        InMemory(Some(v))
    }

    /// `trace`'s NVTX events alone.
    pub fn nvtx_of(trace: &Trace) -> InMemory {
        InMemory(Some(nvtx_recs(trace).collect()))
    }
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

impl Source for InMemory {
    fn next_start(&self) -> Option<u64> {
        self.0.as_ref().map(|_| 0)
    }
    fn read(&mut self, out: &mut Vec<Rec>) -> Result<(), StreamError> {
        out.extend(self.0.take().unwrap_or_default());
        Ok(())
    }
}

/// Several sources read as one, a batch of the one with the earliest start at a time; each
/// tagged with its trace's index (for [`Rec::Memory`]).
pub struct Sources<'a>(Vec<(usize, FileSource<'a>)>);

impl<'a> Sources<'a> {
    /// `sources`, each with its trace's index.
    pub fn new(sources: Vec<(usize, FileSource<'a>)>) -> Self {
        Sources(sources)
    }

    fn next(&self) -> Option<usize> {
        (0..self.0.len())
            .filter_map(|i| self.0[i].1.next_start().map(|s| (s, i)))
            .min()
            .map(|(_, i)| i)
    }
}

impl Source for Sources<'_> {
    fn next_start(&self) -> Option<u64> {
        self.next().and_then(|i| self.0[i].1.next_start())
    }
    fn read(&mut self, out: &mut Vec<Rec>) -> Result<(), StreamError> {
        let Some(i) = self.next() else {
            return Ok(());
        };
        let (ti, src) = &mut self.0[i];
        let from = out.len();
        src.read(out)?;
        for r in &mut out[from..] {
            if let Rec::Memory { trace, .. } = r {
                *trace = *ti;
            }
        }
        Ok(())
    }
}

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
fn counter_change(m: &MemoryRecord) -> Option<(CounterKey, i64)> {
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
    pub keep: &'a Keep<'a>,
    pub index: Vec<ChunkRef>,
    pub links: LinkTable,
    pub places: Places,
    /// Whether it has NVTX ranges, marks or external ids (indexed, not held).
    pub nvtx: bool,
    api: HashMap<u64, u64>,
    nvtx_events: HashMap<u64, u64>,
    kernels: u64,
    memcpys: u64,
    memsets: u64,
    memory: u64,
}

impl<'a> FirstRead<'a> {
    pub fn new(keep: &'a Keep<'a>) -> Self {
        FirstRead {
            keep,
            index: Vec::new(),
            links: LinkTable::default(),
            places: Places::default(),
            nvtx: false,
            api: HashMap::new(),
            nvtx_events: HashMap::new(),
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
            self.places.streams.insert(g.place());
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
    fn api(&mut self, thread: &mut ThreadTrace, chunk: &Chunk, records: Vec<ApiRecord>) {
        let next = self.api.entry(thread.tid).or_insert(0);
        let mut c = ChunkRef::new(chunk, Kind::Api, *next);
        for r in records.into_iter().filter_map(|r| self.keep.api(r)) {
            c.min_start = c.min_start.min(r.start_ns);
            self.links.api(r.correlation);
            *next += 1;
        }
        if c.min_start != u64::MAX {
            self.index.push(c);
        }
    }
    fn kernels(&mut self, _: &mut Trace, chunk: &Chunk, records: Vec<KernelRecord>) {
        let kept: Vec<KernelRecord> = records
            .into_iter()
            .filter_map(|k| self.keep.kernel(k))
            .collect();
        let g: Vec<Gpu> = kept.iter().map(Gpu::Kernel).collect();
        self.kernels += self.gpu(chunk, Kind::Kernels, self.kernels, &g);
    }
    fn memcpys(&mut self, _: &mut Trace, chunk: &Chunk, records: Vec<MemcpyRecord>) {
        self.copies(chunk, Kind::Memcpys, records.into_iter());
    }
    fn peer_copies(&mut self, _: &mut Trace, chunk: &Chunk, records: Vec<PeerCopyRecord>) {
        self.copies(chunk, Kind::PeerCopies, records.into_iter().map(|p| p.copy));
    }
    fn memsets(&mut self, _: &mut Trace, chunk: &Chunk, records: Vec<MemsetRecord>) {
        let kept: Vec<MemsetRecord> = records
            .into_iter()
            .filter_map(|s| self.keep.memset(s))
            .collect();
        let g: Vec<Gpu> = kept.iter().map(Gpu::Memset).collect();
        self.memsets += self.gpu(chunk, Kind::Memsets, self.memsets, &g);
    }
    fn nvtx(&mut self, thread: &mut ThreadTrace, chunk: &Chunk, events: Vec<NvtxEvent>) {
        let next = self.nvtx_events.entry(thread.tid).or_insert(0);
        let mut c = ChunkRef::new(chunk, Kind::Nvtx, *next);
        *next += events.len() as u64;
        for e in &events {
            c.min_start = c.min_start.min(self.keep.time(e.time_ns));
        }
        if crate::nvtx::hold_names(thread, events) {
            self.nvtx = true;
            self.index.push(c);
        }
    }
    fn memory(&mut self, _: &mut Trace, chunk: &Chunk, records: Vec<MemoryRecord>) {
        let mut c = ChunkRef::new(chunk, Kind::Memory, self.memory);
        for m in records.into_iter().filter_map(|m| self.keep.memory(m)) {
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
    /// Synchronizations are not drawn.
    fn syncs(&mut self, _: &mut Trace, _: &Chunk, _: Vec<SyncRecord>) {}
}

impl FirstRead<'_> {
    fn copies(&mut self, chunk: &Chunk, kind: Kind, records: impl Iterator<Item = MemcpyRecord>) {
        let kept: Vec<MemcpyRecord> = records.filter_map(|m| self.keep.memcpy(m)).collect();
        let g: Vec<Gpu> = kept.iter().map(Gpu::Memcpy).collect();
        self.memcpys += self.gpu(chunk, kind, self.memcpys, &g);
    }
}

/// A trace file's indexed chunks, read again in order of earliest start.
pub struct FileSource<'a> {
    chunks: Vec<ChunkRef>,
    next: usize,
    file: Rereader,
    keep: &'a Keep<'a>,
}

impl<'a> FileSource<'a> {
    pub fn open(
        path: &Path,
        mut chunks: Vec<ChunkRef>,
        keep: &'a Keep<'a>,
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

impl Source for FileSource<'_> {
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
            Records::Syncs(_) => {}
        }
        Ok(())
    }
}

/// A track of the timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Track {
    /// A thread's API calls.
    Thread(u64),
    /// A (device, context, stream)'s GPU work.
    Stream(u32, u32, u32),
    /// The NVTX track of this index.
    Nvtx(usize),
}

/// What a writer does with a trace's tracks, slices, flows and counters.
pub trait Emitter {
    fn stats(&mut self) -> &mut Stats;
    /// Starts a trace: its process and threads, and `devices` with their
    /// streams and counters.
    fn begin_trace(&mut self, trace: &Trace, devices: &[Device]) -> io::Result<()>;
    /// NVTX track `track` is named `name` (before its first slice).
    fn nvtx_track(&mut self, track: usize, name: &str) -> io::Result<()>;
    /// API call `r` of thread `tid`, on `lane` of its track, ending at `end`;
    /// it starts the flows `flows`.
    fn api(
        &mut self,
        trace: &Trace,
        tid: u64,
        lane: u32,
        r: &ApiRecord,
        end: u64,
        flows: std::ops::Range<u64>,
    ) -> io::Result<()>;
    /// GPU record `g`, on `lane` of its stream's track, ending at `end`.
    fn gpu(
        &mut self,
        trace: &Trace,
        lane: u32,
        g: Gpu,
        end: u64,
        flow: Option<Flow>,
    ) -> io::Result<()>;
    /// A slice of NVTX track `track` begins on `lane` (its end comes through
    /// [`Emitter::end`], or never for a range that never ended).
    fn nvtx(&mut self, track: usize, lane: u32, name: &str, start: u64) -> io::Result<()>;
    /// A slice of `track`'s `lane` ends (the innermost open there).
    fn end(&mut self, track: Track, lane: u32, end: u64) -> io::Result<()>;
    /// Memory counter `counter` holds `value` bytes from `ts` on.
    fn counter(&mut self, counter: CounterKey, ts: u64, value: i64) -> io::Result<()>;
    /// Ends the trace (NVTX slices still open stay so).
    fn end_trace(&mut self, trace: &Trace) -> io::Result<()>;
}

/// Writes one trace through `e`: `trace` holds all but its API, GPU and
/// memory records and NVTX events (which may be there too: they are not
/// looked at), `src` gives those, `places` are where they go, `links` their
/// links, numbered; `nvtx` (for a trace with NVTX events) builds its NVTX
/// ranges ([`crate::nvtx::Mode::Tracks`]) as they come. A memory counter's
/// value is written once per distinct time, after every change at that time
/// (in file order).
pub fn write<E: Emitter>(
    e: &mut E,
    trace: &Trace,
    places: &Places,
    mut projector: Option<Box<crate::nvtx::Projector>>,
    links: &mut LinkTable,
    src: &mut dyn Source,
) -> Result<(), Failure> {
    let devices = layout::devices(&places.streams, &places.counters);
    e.begin_trace(trace, &devices)?;
    let mut lanes: HashMap<Track, Lanes> = HashMap::new();
    let mut steps = VecDeque::new();
    let mut nvtx = NvtxTracks::default();
    // Counter → its value, and the point not yet written (time, value).
    let mut counters: BTreeMap<CounterKey, (i64, Option<(u64, i64)>)> = BTreeMap::new();
    merge(src, |rec| {
        if let Rec::Memory { m, .. } = &rec {
            if let Some((key, delta)) = counter_change(m) {
                let (value, pending) = counters.entry(key).or_default();
                *value = value.saturating_add(delta);
                match pending {
                    Some((t, v)) if *t == m.timestamp_ns => *v = *value,
                    _ => {
                        if let Some((t, v)) = pending.replace((m.timestamp_ns, *value)) {
                            e.counter(key, t, v)?;
                        }
                    }
                }
            }
            return Ok(());
        }
        let (start, end) = rec.span();
        if let Some(p) = &mut projector {
            project_rec(p, links, &rec);
            nvtx.take(trace, p, e, start)?;
        }
        let track = match &rec {
            Rec::Nvtx { .. } => return Ok(()),
            Rec::Api { tid, .. } => Track::Thread(*tid),
            _ => {
                let (d, c, s) = rec.gpu().map_or((0, 0, 0), Gpu::place);
                Track::Stream(d, c, s)
            }
        };
        lanes
            .entry(track)
            .or_default()
            .place(0, start, end, &mut steps);
        while let Some(step) = steps.pop_front() {
            match step {
                Step::End { lane, end, .. } => e.end(track, lane, end)?,
                Step::Begin { lane, end, .. } => match &rec {
                    Rec::Api { tid, r, .. } => {
                        let flows = links.api_flows(r);
                        e.api(trace, *tid, lane, r, end, flows)?;
                    }
                    _ => {
                        if let Some(g) = rec.gpu() {
                            let flow = links.gpu_flow(g);
                            e.gpu(trace, lane, g, end, flow)?;
                        }
                    }
                },
            }
        }
        Ok(())
    })?;
    let mut open: Vec<(Track, Lanes)> = lanes.into_iter().collect();
    open.sort_by_key(|(t, _)| *t);
    for (track, mut l) in open {
        l.drain(&mut steps);
        for step in steps.drain(..) {
            if let Step::End { lane, end, .. } = step {
                e.end(track, lane, end)?;
            }
        }
        e.stats().clipped += l.clipped;
    }
    if let Some(p) = &mut projector {
        nvtx.finish(trace, p, e)?;
        let stats = e.stats();
        stats.nvtx_unplaced += nvtx.unplaced;
        stats.nvtx_held = stats.nvtx_held.max(nvtx.most);
    }
    e.stats().flows += links.flows;
    for (key, (_, pending)) in counters {
        if let Some((t, v)) = pending {
            e.counter(key, t, v)?;
        }
    }
    e.end_trace(trace)?;
    Ok(())
}

/// Hands `rec` to `p`, with what `links` knows of its correlation id.
fn project_rec(p: &mut crate::nvtx::Projector, links: &LinkTable, rec: &Rec) {
    match rec {
        Rec::Nvtx { tid, e, .. } => p.nvtx(*tid, e),
        Rec::Memory { .. } => {}
        Rec::Api { tid, index, r } => {
            let (calls, n) = links.counts(r.correlation);
            p.api(*tid, *index, r.start_ns, r.correlation, (calls, n));
        }
        _ => {
            if let Some(g) = rec.gpu() {
                if let Some(c) = g.correlation() {
                    let (device, _, _) = g.place();
                    let (start, end) = g.span();
                    p.gpu(c, links.counts(c).0 > 0, rec.place(), (device, start, end));
                }
            }
        }
    }
}

/// A failure to read as the stream error it is.
pub(crate) fn read_error(path: &Path, e: Failure) -> StreamError {
    match e {
        Failure::Read(e) => e,
        Failure::Write(e) => StreamError::Changed {
            path: path.to_path_buf(),
            why: e.to_string(),
        },
    }
}

/// The NVTX summaries and external-id rows of `trace`, read from `path` without its API and
/// GPU records or NVTX events (as `trace` is held): a first read notes the links and indexes
/// the chunks, a second merges them by time into a [`crate::nvtx::Projector`]. Also gives the
/// trace's NVTX chunks, for [`nvtx_pass`].
pub fn project(
    path: &Path,
    trace: &Trace,
    keep: &Keep,
) -> Result<(crate::nvtx::Projected, Vec<ChunkRef>), StreamError> {
    let mut first = FirstRead::new(keep);
    crate::stream::read_light(path, &mut first)?;
    let window = Some(keep.window_range());
    let mut p = crate::nvtx::Projector::new(trace, window, crate::nvtx::Mode::Summary);
    let links = first.links;
    let nvtx: Vec<ChunkRef> = first
        .index
        .iter()
        .filter(|c| c.kind == Kind::Nvtx)
        .copied()
        .collect();
    let mut src = FileSource::open(path, first.index, keep)?;
    merge(&mut src, |rec| {
        project_rec(&mut p, &links, &rec);
        Ok(())
    })
    .map_err(|e| read_error(path, e))?;
    Ok((p.finish(trace), nvtx))
}

/// A selection pass over the NVTX ranges of `trace` ([`crate::nvtx::NvtxStats`]): reads its
/// NVTX chunks `chunks` again, giving each range's (domain id, message id) and duration to
/// `f`.
pub fn nvtx_pass(
    path: &Path,
    trace: &Trace,
    keep: &Keep,
    chunks: &[ChunkRef],
    f: impl FnMut((u32, u32), u64),
) -> Result<(), StreamError> {
    let window = Some(keep.window_range());
    let mut src = FileSource::open(path, chunks.to_vec(), keep)?;
    durations(trace, window, &mut src, f).map_err(|e| read_error(path, e))
}

/// Builds the ranges of `trace` from the NVTX events of `src`, giving `f` each one's
/// (domain id, message id) and duration as it ends.
fn durations(
    trace: &Trace,
    window: Option<(u64, u64)>,
    src: &mut dyn Source,
    mut f: impl FnMut((u32, u32), u64),
) -> Result<(), Failure> {
    let mut p = crate::nvtx::Projector::new(trace, window, crate::nvtx::Mode::Durations);
    merge(src, |rec| {
        if let Rec::Nvtx { tid, e, .. } = &rec {
            p.nvtx(*tid, e);
            p.durations.drain(..).for_each(|(k, v)| f(k, v));
        }
        Ok(())
    })
}

/// Feeds `p` the records and NVTX events of `trace`, held in memory, in time order.
pub fn project_in_memory(p: &mut crate::nvtx::Projector, trace: &Trace) {
    let links = LinkTable::of(trace, &mut 0);
    let mut src = InMemory::of(trace);
    let _ = merge(&mut src, |rec| {
        project_rec(p, &links, &rec);
        Ok(())
    });
}

/// A selection pass over the NVTX ranges of `trace`, held in memory ([`nvtx_pass`]).
pub fn nvtx_in_memory(trace: &Trace, f: impl FnMut((u32, u32), u64)) {
    // An in-memory source neither fails nor writes.
    let _ = durations(trace, None, &mut InMemory::nvtx_of(trace), f);
}
