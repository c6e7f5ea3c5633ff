//! Reading trace files into an in-memory model: one [`Trace`] per file.
//!
//! Every source goes through [`rtrace_format::TraceReader`]. A file whose
//! header cannot be read is an error ([`LoadError`]); damage after the header
//! (a truncated or corrupt chunk) ends the read, and the chunks before it are
//! kept, with the damage described in [`Trace::damage`].

use rtrace_format::{
    ApiRecord, Chunk, ChunkKind, ContextRecord, DeviceInfo, FunctionRecord, KernelRecord,
    MemcpyRecord, MemoryRecord, MemsetRecord, ModuleRecord, Notice, PeerCopyRecord, ProcessEnd,
    ProcessHeader, ReadError, StreamRecord, SyncRecord, ThreadInfo, TraceReader,
};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

/// Everything read from one trace file.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// The file the trace was read from.
    pub path: PathBuf,
    /// The file's (major, minor) format version.
    pub format_version: (u16, u16),
    /// The traced process, from the file header.
    pub header: ProcessHeader,
    /// Function id → name, from the FunctionNames chunks (later entries win).
    pub functions: HashMap<u32, String>,
    /// The threads that sent records or a ThreadInfo chunk, by OS thread id.
    pub threads: BTreeMap<u64, ThreadTrace>,
    /// Kernel name id → mangled name, from the KernelNames chunks (later entries win).
    pub kernel_names: HashMap<u32, String>,
    /// Kernel executions, in file order.
    pub kernels: Vec<KernelRecord>,
    /// Memory copies, in file order; peer-to-peer copies (kind `PtoP`) included, each also
    /// in `peer_copies`.
    pub memcpys: Vec<MemcpyRecord>,
    /// Peer-to-peer copies with their source and destination, in file order (each is also
    /// in `memcpys`).
    pub peer_copies: Vec<PeerCopyRecord>,
    /// Memsets, in file order.
    pub memsets: Vec<MemsetRecord>,
    /// Memory allocations and frees, in file order.
    pub memory: Vec<MemoryRecord>,
    /// Host synchronizations, in file order.
    pub syncs: Vec<SyncRecord>,
    /// The GPUs described by DeviceInfo chunks, by ordinal (later chunks win).
    pub devices: BTreeMap<u32, DeviceInfo>,
    /// Contexts as they were created, in file order.
    pub contexts: Vec<ContextRecord>,
    /// Streams as they were created (by the program or with a context), in file order.
    pub streams: Vec<StreamRecord>,
    /// Modules as they were loaded, in file order.
    pub modules: Vec<ModuleRecord>,
    /// Modules as they were unloaded (records with `FLAG_UNLOADED`), in file order.
    pub module_unloads: Vec<ModuleRecord>,
    /// The GPU functions (kernels) of loaded modules, in file order (names in
    /// `kernel_names`).
    pub gpu_functions: Vec<FunctionRecord>,
    /// NVTX string id → text, from the NvtxStrings chunks.
    pub nvtx_strings: HashMap<u32, String>,
    /// Loaded modules' images as recorded (the bytes moved to `images`), in file order.
    pub module_images: Vec<rtrace_format::ModuleImage>,
    /// Image content hash → the image, stored once per content.
    pub images: HashMap<u64, Vec<u8>>,
    /// PC sampling as set up on each sampled context, in file order.
    pub pc_configs: Vec<rtrace_format::PcSamplingConfig>,
    /// PC samples as read, in file order.
    pub pc_batches: Vec<rtrace_format::PcSampleBatch>,
    /// API records lost because a buffer was full: the sum of every chunk
    /// header's `dropped` count.
    pub dropped: u64,
    /// The ProcessEnd record; `None` when the process was killed or crashed
    /// before tracing could end normally.
    pub end: Option<ProcessEnd>,
    /// Notices from the tracer, in file order.
    pub notices: Vec<Notice>,
    /// Whole, checksummed chunks read (of every kind).
    pub chunks: u64,
    /// Chunks of kinds this collector does not know; counted and skipped.
    pub unknown_chunks: u64,
    /// Chunks whose checksum was right but whose payload could not be decoded;
    /// each was skipped. One line each: `chunk at byte N: why`.
    pub bad_chunks: Vec<String>,
    /// Why reading stopped before the end of the file, with what was kept:
    /// e.g. `truncated: the file ends inside the chunk at byte 120; reported
    /// the 2 chunks (3 records) before it`. `None` for an undamaged file.
    pub damage: Option<String>,
    /// How this trace's times were put on another host's clock ([`crate::clocks::align`]);
    /// `None` when they are its own host's.
    pub clock_shift: Option<crate::clocks::Shift>,
}

/// One thread's part of a trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadTrace {
    /// OS thread id (gettid).
    pub tid: u64,
    /// The thread's name from its ThreadInfo chunk, if one was read.
    pub name: Option<String>,
    /// The thread's API records, in file order.
    pub records: Vec<ApiRecord>,
    /// The thread's NVTX events, in file order.
    pub nvtx: Vec<rtrace_format::NvtxEvent>,
    /// Records this thread lost (sum of its chunks' `dropped`).
    pub dropped: u64,
}

/// How long a traced process ran, and how that was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Duration {
    /// From the start anchor to the ProcessEnd anchor.
    ToEnd(u64),
    /// No end record: from the start anchor to the end of the last API record
    /// (the process ran at least this long).
    ToLastRecord(u64),
    /// No end record and no API records.
    Unknown,
}

/// A hasher for the ids traces key records by (correlation ids, which are mostly sequential):
/// one multiplication, where SipHash would spend most of a report's time hashing.
#[derive(Clone, Copy, Debug, Default)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A map keyed by an id (correlation id), hashed with [`IdHasher`].
pub type IdMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<IdHasher>>;

/// API records looked up by correlation id ([`Trace::api_records_for`]).
///
/// librtrace.so hands each thread correlation ids in blocks, so a thread's records mostly
/// carry consecutive ids: the lookup is a sorted list of such runs (a few thousand for
/// millions of records), searched by bisection. A trace whose runs overlap (an id given to two
/// records) is looked up through a map of the ids asked for instead, the last of a repeated
/// id in thread and file order winning.
#[derive(Debug)]
pub enum ApiLookup<'a> {
    Runs {
        /// Sorted by `first`; disjoint.
        runs: Vec<Run>,
        threads: Vec<&'a [ApiRecord]>,
    },
    Map(IdMap<ApiCall>),
}

/// Records `index..index + len` of thread `thread` carry ids `first..first + len`.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    first: u64,
    len: u64,
    thread: u32,
    index: u32,
}

/// What [`ApiLookup`] gives of an API record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiCall {
    pub start_ns: u64,
    /// The function id; `u32::MAX` while no record was found.
    pub function: u32,
}

impl ApiLookup<'_> {
    /// The API call with correlation id `correlation`, if there is one (for a map, if it was
    /// also asked for).
    pub fn get(&self, correlation: u64) -> Option<ApiCall> {
        match self {
            ApiLookup::Runs { runs, threads } => {
                let after = runs.partition_point(|r| r.first <= correlation);
                let run = runs.get(after.checked_sub(1)?)?;
                let offset = correlation - run.first;
                if offset >= run.len {
                    return None;
                }
                let r = threads[run.thread as usize].get(run.index as usize + offset as usize)?;
                Some(ApiCall {
                    start_ns: r.start_ns,
                    function: r.function,
                })
            }
            ApiLookup::Map(map) => map
                .get(&correlation)
                .copied()
                .filter(|c| c.function != u32::MAX),
        }
    }
}

impl Trace {
    /// Adds `delta` ns to every timestamp of the trace: its anchors, API records, GPU records,
    /// allocations, synchronizations, modules and notices (an unknown time, 0, stays 0).
    pub fn shift_times(&mut self, delta: i64) {
        use crate::clocks::shifted;
        let s = |t: &mut u64| *t = shifted(*t, delta);
        s(&mut self.header.start.monotonic_ns);
        if let Some(end) = &mut self.end {
            s(&mut end.end.monotonic_ns);
        }
        for th in self.threads.values_mut() {
            for r in &mut th.records {
                s(&mut r.start_ns);
                s(&mut r.end_ns);
            }
        }
        for k in &mut self.kernels {
            s(&mut k.start_ns);
            s(&mut k.end_ns);
        }
        for c in &mut self.memcpys {
            s(&mut c.start_ns);
            s(&mut c.end_ns);
        }
        for p in &mut self.peer_copies {
            s(&mut p.copy.start_ns);
            s(&mut p.copy.end_ns);
        }
        for m in &mut self.memsets {
            s(&mut m.start_ns);
            s(&mut m.end_ns);
        }
        for m in &mut self.memory {
            s(&mut m.timestamp_ns);
        }
        for y in &mut self.syncs {
            s(&mut y.start_ns);
            s(&mut y.end_ns);
        }
        for m in self.modules.iter_mut().chain(&mut self.module_unloads) {
            s(&mut m.timestamp_ns);
        }
        for n in &mut self.notices {
            s(&mut n.time_ns);
        }
        for th in self.threads.values_mut() {
            for e in &mut th.nvtx {
                s(&mut e.time_ns);
            }
        }
    }

    /// Names threads from the program's `nvtxNameOsThread` events (a thread named by its
    /// ThreadInfo keeps that name).
    fn name_threads_from_nvtx(&mut self) {
        let named: Vec<(u64, String)> = self
            .threads
            .values()
            .flat_map(|th| th.nvtx.iter())
            .filter(|e| e.kind == rtrace_format::NvtxKind::NameThread)
            .filter_map(|e| Some((e.value, self.nvtx_strings.get(&e.message)?.clone())))
            .collect();
        for (tid, name) in named {
            if let Some(th) = self.threads.get_mut(&tid) {
                if th.name.is_none() {
                    th.name = Some(name);
                }
            }
        }
    }

    /// The API records of the trace by correlation id, for looking up those among `wanted`
    /// ([`ApiLookup`]).
    pub fn api_records_for(&self, wanted: impl IntoIterator<Item = u64>) -> ApiLookup<'_> {
        let threads: Vec<&[ApiRecord]> = self.threads.values().map(|t| &t.records[..]).collect();
        let mut runs: Vec<Run> = Vec::new();
        for (ti, recs) in threads.iter().enumerate() {
            let mut i = 0;
            while i < recs.len() {
                let first = recs[i].correlation;
                let mut len = 1u64;
                while i + (len as usize) < recs.len()
                    && recs[i + len as usize].correlation == first.wrapping_add(len)
                    && len < u64::from(u32::MAX)
                {
                    len += 1;
                }
                runs.push(Run {
                    first,
                    len,
                    thread: ti as u32,
                    index: i as u32,
                });
                i += len as usize;
            }
        }
        runs.sort_by_key(|r| r.first);
        let disjoint = runs.windows(2).all(|w| {
            w[0].first
                .checked_add(w[0].len)
                .is_some_and(|end| end <= w[1].first)
        });
        let fits = threads.len() <= u32::MAX as usize
            && threads.iter().all(|t| t.len() <= u32::MAX as usize);
        if disjoint && fits {
            return ApiLookup::Runs { runs, threads };
        }
        drop(runs);
        let none = ApiCall {
            start_ns: 0,
            function: u32::MAX,
        };
        let mut map: IdMap<ApiCall> = IdMap::default();
        for c in wanted {
            map.insert(c, none);
        }
        if !map.is_empty() {
            for r in threads.iter().flat_map(|t| t.iter()) {
                if let Some(slot) = map.get_mut(&r.correlation) {
                    *slot = ApiCall {
                        start_ns: r.start_ns,
                        function: r.function,
                    };
                }
            }
        }
        ApiLookup::Map(map)
    }

    /// Reads a trace from `input`; `path` names it in messages.
    ///
    /// Fails only when the file header cannot be read; later damage is
    /// recorded in [`Trace::damage`].
    pub fn read<R: Read>(path: &Path, input: R) -> Result<Trace, LoadError> {
        Trace::read_with(path, input, &mut Keep)
    }

    /// [`Trace::read`], handing the API, kernel, copy and memset records to `sink` instead of
    /// keeping them ([`Keep`] keeps them): what `rtrace report` folds as it reads
    /// ([`crate::stream`]).
    pub fn read_with<R: Read>(
        path: &Path,
        input: R,
        sink: &mut dyn RecordSink,
    ) -> Result<Trace, LoadError> {
        let mut api_read = 0u64;
        let mut reader = TraceReader::new(input).map_err(|error| LoadError::Header {
            path: path.to_path_buf(),
            error,
        })?;
        let mut trace = Trace {
            path: path.to_path_buf(),
            format_version: reader.version(),
            header: reader.header().clone(),
            ..Default::default()
        };
        loop {
            match reader.next_chunk() {
                Ok(Some(chunk)) => {
                    trace.chunks += 1;
                    trace.dropped = trace.dropped.saturating_add(chunk.header.dropped);
                    let thread = chunk.header.thread;
                    if chunk.header.dropped > 0 && thread != 0 {
                        let t = trace.thread_mut(thread);
                        t.dropped = t.dropped.saturating_add(chunk.header.dropped);
                    }
                    let bad = |why: String| format!("chunk at byte {}: {why}", chunk.offset);
                    match chunk.header.kind {
                        ChunkKind::FunctionNames => match chunk.function_names() {
                            Ok(names) => trace
                                .functions
                                .extend(names.into_iter().map(|n| (n.id, n.name))),
                            Err(why) => trace.bad_chunks.push(bad(why)),
                        },
                        ChunkKind::ApiRecords => match chunk.api_records() {
                            Ok(records) => {
                                api_read += records.len() as u64;
                                sink.api(trace.thread_mut(thread), &chunk, records);
                            }
                            Err(why) => trace.bad_chunks.push(bad(why)),
                        },
                        ChunkKind::ThreadInfo => match chunk.value::<ThreadInfo>() {
                            Ok(info) => {
                                let tid = if info.tid != 0 { info.tid } else { thread };
                                trace.thread_mut(tid).name = Some(info.name);
                            }
                            Err(why) => trace.bad_chunks.push(bad(format!("thread info: {why}"))),
                        },
                        ChunkKind::ProcessEnd => match chunk.value::<ProcessEnd>() {
                            Ok(end) => trace.end = Some(end),
                            Err(why) => trace.bad_chunks.push(bad(format!("process end: {why}"))),
                        },
                        ChunkKind::Notice => match chunk.value::<Notice>() {
                            Ok(notice) => trace.notices.push(notice),
                            Err(why) => trace.bad_chunks.push(bad(format!("notice: {why}"))),
                        },
                        ChunkKind::KernelNames => match chunk.function_names() {
                            Ok(names) => trace
                                .kernel_names
                                .extend(names.into_iter().map(|n| (n.id, n.name))),
                            Err(why) => trace.bad_chunks.push(bad(format!("kernel names: {why}"))),
                        },
                        ChunkKind::Kernels => match chunk.kernel_records() {
                            Ok(records) => sink.kernels(&mut trace, &chunk, records),
                            Err(why) => trace.bad_chunks.push(bad(why)),
                        },
                        ChunkKind::Memcpys => match chunk.memcpy_records() {
                            Ok(records) => sink.memcpys(&mut trace, &chunk, records),
                            Err(why) => trace.bad_chunks.push(bad(why)),
                        },
                        ChunkKind::Memsets => match chunk.memset_records() {
                            Ok(records) => sink.memsets(&mut trace, &chunk, records),
                            Err(why) => trace.bad_chunks.push(bad(why)),
                        },
                        ChunkKind::Memory => match chunk.memory_records() {
                            Ok(records) => sink.memory(&mut trace, &chunk, records),
                            Err(why) => trace.bad_chunks.push(bad(why)),
                        },
                        ChunkKind::Sync => match chunk.sync_records() {
                            Ok(records) => sink.syncs(&mut trace, &chunk, records),
                            Err(why) => trace.bad_chunks.push(bad(why)),
                        },
                        ChunkKind::PeerCopies => match chunk.peer_copy_records() {
                            Ok(records) => sink.peer_copies(&mut trace, &chunk, records),
                            Err(why) => trace.bad_chunks.push(bad(why)),
                        },
                        ChunkKind::Contexts => match chunk.context_records() {
                            Ok(records) => trace.contexts.extend(records),
                            Err(why) => trace.bad_chunks.push(bad(why)),
                        },
                        ChunkKind::Streams => match chunk.stream_records() {
                            Ok(records) => trace.streams.extend(records),
                            Err(why) => trace.bad_chunks.push(bad(why)),
                        },
                        ChunkKind::Modules => match chunk.module_records() {
                            Ok(records) => {
                                for m in records {
                                    if u32::from(m.flags) & rtrace_format::FLAG_UNLOADED != 0 {
                                        trace.module_unloads.push(m);
                                    } else {
                                        trace.modules.push(m);
                                    }
                                }
                            }
                            Err(why) => trace.bad_chunks.push(bad(why)),
                        },
                        ChunkKind::NvtxStrings => match chunk.function_names() {
                            Ok(names) => trace
                                .nvtx_strings
                                .extend(names.into_iter().map(|n| (n.id, n.name))),
                            Err(why) => trace.bad_chunks.push(bad(why)),
                        },
                        ChunkKind::ModuleImage => {
                            match rtrace_format::ModuleImage::decode(&chunk.payload) {
                                Ok(mut image) => {
                                    if let Some(bytes) = image.bytes.take() {
                                        trace.images.insert(image.hash, bytes);
                                    }
                                    trace.module_images.push(image);
                                }
                                Err(why) => trace.bad_chunks.push(bad(why)),
                            }
                        }
                        ChunkKind::NvtxEvents => match chunk.nvtx_events() {
                            Ok(events) => sink.nvtx(trace.thread_mut(thread), &chunk, events),
                            Err(why) => trace.bad_chunks.push(bad(why)),
                        },
                        ChunkKind::Functions => match chunk.function_records() {
                            Ok(records) => trace.gpu_functions.extend(records),
                            Err(why) => trace.bad_chunks.push(bad(why)),
                        },
                        ChunkKind::DeviceInfo => match chunk.value::<DeviceInfo>() {
                            Ok(device) => {
                                trace.devices.insert(device.ordinal, device);
                            }
                            Err(why) => trace.bad_chunks.push(bad(format!("device info: {why}"))),
                        },
                        ChunkKind::PcSamplingConfig => match chunk.value() {
                            Ok(config) => trace.pc_configs.push(config),
                            Err(why) => trace
                                .bad_chunks
                                .push(bad(format!("PC sampling set-up: {why}"))),
                        },
                        ChunkKind::PcSamples => match chunk.value() {
                            Ok(batch) => trace.pc_batches.push(batch),
                            Err(why) => trace.bad_chunks.push(bad(format!("PC samples: {why}"))),
                        },
                        ChunkKind::Unknown(_) => trace.unknown_chunks += 1,
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    let records = api_read;
                    trace.damage = Some(format!(
                        "{error}; reported the {} {} ({records} {}) before it",
                        trace.chunks,
                        plural(trace.chunks, "chunk", "chunks"),
                        plural(records, "record", "records"),
                    ));
                    break;
                }
            }
        }
        trace.name_threads_from_nvtx();
        Ok(trace)
    }

    fn thread_mut(&mut self, tid: u64) -> &mut ThreadTrace {
        self.threads.entry(tid).or_insert_with(|| ThreadTrace {
            tid,
            ..Default::default()
        })
    }

    /// Number of API records read, over all threads.
    pub fn api_records(&self) -> u64 {
        self.threads.values().map(|t| t.records.len() as u64).sum()
    }

    /// The name of function `id`, or `function#ID` when the file has no name for it.
    pub fn function_name(&self, id: u32) -> Cow<'_, str> {
        match self.functions.get(&id) {
            Some(name) => Cow::Borrowed(name),
            None => Cow::Owned(format!("function#{id}")),
        }
    }

    /// Number of GPU activity records read: kernels, memory copies and memsets.
    pub fn gpu_records(&self) -> u64 {
        (self.kernels.len() + self.memcpys.len() + self.memsets.len()) as u64
    }

    /// Number of resource records read: contexts, streams, module loads and unloads, and
    /// functions.
    pub fn resource_records(&self) -> u64 {
        (self.contexts.len()
            + self.streams.len()
            + self.modules.len()
            + self.module_unloads.len()
            + self.gpu_functions.len()) as u64
    }

    /// The (mangled) name of kernel `id`, or `kernel#ID` when the file has no
    /// name for it.
    pub fn kernel_name(&self, id: u32) -> Cow<'_, str> {
        match self.kernel_names.get(&id) {
            Some(name) => Cow::Borrowed(name),
            None => Cow::Owned(format!("kernel#{id}")),
        }
    }

    /// The name of kernel `id` for display: [`Trace::kernel_name`], demangled
    /// where it is an Itanium C++ symbol ([`crate::demangle::demangle`]).
    pub fn kernel_display_name(&self, id: u32) -> String {
        crate::demangle::demangle(&self.kernel_name(id)).into_owned()
    }

    /// The latest `end_ns` of any API record.
    pub fn last_record_end_ns(&self) -> Option<u64> {
        self.threads
            .values()
            .flat_map(|t| t.records.iter().map(|r| r.end_ns))
            .max()
    }

    /// How long the process was traced.
    pub fn duration(&self) -> Duration {
        let start = self.header.start.monotonic_ns;
        if let Some(end) = &self.end {
            Duration::ToEnd(end.end.monotonic_ns.saturating_sub(start))
        } else if let Some(last) = self.last_record_end_ns() {
            Duration::ToLastRecord(last.saturating_sub(start))
        } else {
            Duration::Unknown
        }
    }

    /// How tracing ended, in words.
    pub fn end_reason(&self) -> &str {
        match &self.end {
            Some(end) => &end.reason,
            None => "no end record: the process was killed or crashed",
        }
    }
}

/// Where [`Trace::read_with`] hands the records it does not keep itself.
pub trait RecordSink {
    /// API records of thread `thread` (a chunk's worth).
    fn api(&mut self, thread: &mut ThreadTrace, chunk: &Chunk, records: Vec<ApiRecord>);
    fn kernels(&mut self, trace: &mut Trace, chunk: &Chunk, records: Vec<KernelRecord>);
    fn memcpys(&mut self, trace: &mut Trace, chunk: &Chunk, records: Vec<MemcpyRecord>);
    fn peer_copies(&mut self, trace: &mut Trace, chunk: &Chunk, records: Vec<PeerCopyRecord>);
    fn memsets(&mut self, trace: &mut Trace, chunk: &Chunk, records: Vec<MemsetRecord>);
    /// NVTX events of thread `thread` (a chunk's worth): kept in it, unless the sink takes
    /// them otherwise.
    fn nvtx(&mut self, thread: &mut ThreadTrace, _: &Chunk, events: Vec<rtrace_format::NvtxEvent>) {
        thread.nvtx.extend(events);
    }
    /// Allocations and frees (a chunk's worth): kept in the trace, unless the sink takes them
    /// otherwise.
    fn memory(&mut self, trace: &mut Trace, _: &Chunk, records: Vec<MemoryRecord>) {
        trace.memory.extend(records);
    }
    /// Host synchronizations (a chunk's worth): kept in the trace, unless the sink takes them
    /// otherwise.
    fn syncs(&mut self, trace: &mut Trace, _: &Chunk, records: Vec<SyncRecord>) {
        trace.syncs.extend(records);
    }
}

/// The [`RecordSink`] of [`Trace::read`]: every record kept in the [`Trace`].
pub struct Keep;

impl RecordSink for Keep {
    fn api(&mut self, thread: &mut ThreadTrace, _: &Chunk, records: Vec<ApiRecord>) {
        thread.records.extend(records);
    }
    fn kernels(&mut self, trace: &mut Trace, _: &Chunk, records: Vec<KernelRecord>) {
        trace.kernels.extend(records);
    }
    fn memcpys(&mut self, trace: &mut Trace, _: &Chunk, records: Vec<MemcpyRecord>) {
        trace.memcpys.extend(records);
    }
    fn peer_copies(&mut self, trace: &mut Trace, _: &Chunk, records: Vec<PeerCopyRecord>) {
        trace.memcpys.extend(records.iter().map(|p| p.copy));
        trace.peer_copies.extend(records);
    }
    fn memsets(&mut self, trace: &mut Trace, _: &Chunk, records: Vec<MemsetRecord>) {
        trace.memsets.extend(records);
    }
}

fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// Why a trace could not be loaded at all.
#[derive(Debug)]
pub enum LoadError {
    /// The path could not be opened or read (missing, unreadable, ...).
    Io { path: PathBuf, error: io::Error },
    /// The file is empty.
    Empty { path: PathBuf },
    /// The file header could not be read: not a trace, a newer format, or a
    /// damaged header.
    Header { path: PathBuf, error: ReadError },
    /// A directory given as input holds no `*.bin` traces.
    NoTraces { path: PathBuf },
}

impl LoadError {
    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            LoadError::Io { path, .. }
            | LoadError::Empty { path }
            | LoadError::Header { path, .. }
            | LoadError::NoTraces { path } => path,
        }
    }

    /// True when the file is simply not an rtrace trace (bad magic, or empty).
    pub fn is_not_a_trace(&self) -> bool {
        matches!(
            self,
            LoadError::Empty { .. }
                | LoadError::Header {
                    error: ReadError::NotATrace,
                    ..
                }
        )
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.path().display())?;
        match self {
            LoadError::Io { error, .. } => f.write_str(&io_message(error)),
            LoadError::Empty { .. } => f.write_str("empty file, not an rtrace trace"),
            LoadError::Header { error, .. } => write!(f, "{error}"),
            LoadError::NoTraces { .. } => f.write_str("no rtrace traces (*.bin) in this directory"),
        }
    }
}

impl std::error::Error for LoadError {}

/// An I/O error's message without the ` (os error N)` suffix std adds.
pub(crate) fn io_message(error: &io::Error) -> String {
    let text = error.to_string();
    match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => text[..at].to_string(),
        _ => text,
    }
}

/// Loads the trace file at `path`.
pub fn load_trace(path: &Path) -> Result<Trace, LoadError> {
    let io_err = |error| LoadError::Io {
        path: path.to_path_buf(),
        error,
    };
    let file = File::open(path).map_err(io_err)?;
    let meta = file.metadata().map_err(io_err)?;
    if meta.is_dir() {
        return Err(io_err(io::Error::from_raw_os_error(libc::EISDIR)));
    }
    if meta.len() == 0 {
        return Err(LoadError::Empty {
            path: path.to_path_buf(),
        });
    }
    Trace::read(
        path,
        crate::progress::Counting(BufReader::with_capacity(1 << 16, file)),
    )
}

/// Traces loaded from the command line's inputs, with the warnings met on the way.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The traces, in input order (a directory's files sorted by name).
    pub traces: Vec<Trace>,
    /// Files skipped, one line each (`PATH: why; skipped`).
    pub skipped: Vec<String>,
}

/// Loads every input: a file is one trace; a directory contributes each
/// `*.bin` file directly in it, sorted by name, skipping files in it that are
/// not rtrace traces. A path given twice is loaded once.
pub fn load_inputs(paths: &[PathBuf]) -> Result<Loaded, LoadError> {
    let mut loaded = Loaded::default();
    let mut seen = HashSet::new();
    for path in paths {
        let is_dir = std::fs::metadata(path)
            .map_err(|error| LoadError::Io {
                path: path.clone(),
                error,
            })?
            .is_dir();
        if !is_dir {
            if seen.insert(identity(path)) {
                loaded.traces.push(load_trace(path)?);
            }
            continue;
        }
        let files = bin_files(path)?;
        let mut found = false;
        for file in files {
            if !seen.insert(identity(&file)) {
                found = true;
                continue;
            }
            match load_trace(&file) {
                Ok(trace) => {
                    found = true;
                    loaded.traces.push(trace);
                }
                Err(e) if e.is_not_a_trace() => loaded.skipped.push(format!("{e}; skipped")),
                Err(e) => return Err(e),
            }
        }
        if !found {
            return Err(LoadError::NoTraces { path: path.clone() });
        }
    }
    // Traces from several hosts: on the clock of the first-started process's host.
    crate::clocks::align(&mut loaded.traces);
    Ok(loaded)
}

/// The `*.bin` regular files directly in `dir`, sorted.
fn bin_files(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let io_err = |error| LoadError::Io {
        path: dir.to_path_buf(),
        error,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_err)? {
        let entry = entry.map_err(io_err)?;
        let path = entry.path();
        let is_bin = path.extension().is_some_and(|e| e == "bin");
        if is_bin && std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// A key that is the same for two spellings of one file.
fn identity(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}
