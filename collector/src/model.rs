//! The in-memory model of a trace: one [`Trace`] per file, as [`crate::read`] reads it.

use rtrace_format::{
    ApiRecord, ContextRecord, DeviceInfo, FunctionRecord, KernelRecord, MemcpyRecord, MemoryRecord,
    MemsetRecord, ModuleRecord, Notice, PeerCopyRecord, ProcessEnd, ProcessHeader, StreamRecord,
    SyncRecord,
};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

mod ending;

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
    /// Kernel profiling as set up on each profiled context, in file order.
    pub profiler_setups: Vec<rtrace_format::ProfilerSetup>,
    /// Profiled launches (metric values and counter data), in file order.
    pub kernel_profiles: Vec<rtrace_format::KernelProfile>,
    /// Source counters as set up on each context, in file order.
    pub source_counter_setups: Vec<rtrace_format::SourceCounterSetup>,
    /// Launches with source counters, in file order.
    pub source_counters: Vec<rtrace_format::SourceCounterLaunch>,
    /// GPU metrics sampling as set up on each sampled device, in file order.
    pub gpu_metric_setups: Vec<rtrace_format::GpuMetricsSetup>,
    /// GPU metric samples as decoded (counter data and sample times), in file order.
    pub gpu_metric_samples: Vec<rtrace_format::GpuMetricSamples>,
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
    /// API records rebuilt from the file's ring regions: recorded by the process but not yet
    /// copied into a chunk when it ended (killed, crashed, `exec`, or still calling while its
    /// trace's end was written).
    pub salvaged: u64,
    /// Kernels, copies and memsets rebuilt from CUPTI's buffers in the file, with their times
    /// (CUPTI had timed them but the library had not written them out).
    pub salvaged_gpu: u64,
    /// GPU work the process launched that CUPTI had not timed when it ended (rebuilt from
    /// CUPTI's buffers in the file).
    pub untimed: Vec<rtrace_format::gpu_region::UntimedWork>,
    /// The `errno` of a failed write of the trace the library reported (28: the disk was full).
    pub write_error: Option<u64>,
    /// Records set aside, counted, because the collector cannot place them (an end before
    /// its start): read, never folded into a section, never dropped silently.
    pub damaged: DamagedRecords,
    /// How this trace's times were put on another host's clock ([`crate::clocks::shifts`]);
    /// `None` when they are its own host's.
    pub clock_shift: Option<crate::clocks::Shift>,
}

/// The records of a trace the collector cannot place ([`Trace::damaged`]): how many, and the
/// first [`DamagedRecords::LISTED`] with their place in the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DamagedRecords {
    /// Every one.
    pub count: u64,
    /// Those of them that are API records (which the end record counts).
    pub api: u64,
    /// The first ones, in file order.
    pub listed: Vec<DamagedRecord>,
}

/// A record set aside ([`DamagedRecords`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DamagedRecord {
    /// Its first byte's offset in the file.
    pub offset: u64,
    /// Its kind, in words: `API record`, `kernel`, `memcpy`, `memset`, `synchronization`.
    pub kind: &'static str,
    pub start_ns: u64,
    pub end_ns: u64,
}

impl DamagedRecords {
    /// Records listed with their offsets; the rest are counted.
    pub const LISTED: usize = 10;

    /// Counts a record set aside.
    pub fn add(&mut self, r: DamagedRecord) {
        self.count += 1;
        if r.kind == "API record" {
            self.api += 1;
        }
        if self.listed.len() < Self::LISTED {
            self.listed.push(r);
        }
    }

    /// In words, for a warning: `2 records end before they start, set aside: the API record
    /// at byte 120 (start 50, end 10), the kernel at byte 4000 (...)`; `None` for none.
    pub fn describe(&self) -> Option<String> {
        if self.count == 0 {
            return None;
        }
        let listed: Vec<String> = self
            .listed
            .iter()
            .map(|r| {
                format!(
                    "the {} at byte {} (start {} ns, end {} ns)",
                    r.kind, r.offset, r.start_ns, r.end_ns
                )
            })
            .collect();
        let more = self.count - self.listed.len() as u64;
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        let (n, verb) = match self.count {
            1 => ("1 record ends".to_string(), "starts"),
            n => (format!("{n} records end"), "start"),
        };
        Some(format!(
            "{n} before {} {verb}, set aside as damaged: {}{more}",
            if self.count == 1 { "it" } else { "they" },
            listed.join(", ")
        ))
    }
}

/// One thread's part of a trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadTrace {
    /// OS thread id (gettid).
    pub tid: u64,
    /// The thread's name from its ThreadInfo chunk, if one was read.
    pub name: Option<String>,
    /// The thread's API records, in file order (which is start order, but for runtime API
    /// records: `Trace::read` sorts a thread's records by start when it has some).
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
    /// One multiplication, folded: the high half of the product mixed into the low, whose bits
    /// pick the bucket, so that ids differing only in high bits (ids 2^23 apart) do not all
    /// land in one bucket.
    fn write_u64(&mut self, v: u64) {
        let m = u128::from(self.0 ^ v) * 0x9E37_79B9_7F4A_7C15;
        self.0 = (m as u64) ^ ((m >> 64) as u64);
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
    pub end_ns: u64,
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
                    end_ns: r.end_ns,
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

/// Why GPU activity that was on (`on`: the library's list of the kinds it recorded, "kernels,
/// memory copies, ... through CUPTI") holds no kernels, copies or memsets: `untimed` pieces of
/// work were launched that CUPTI had not timed when the process ended; `captured`: capture
/// control chose what was recorded.
pub fn none_recorded(on: &str, untimed: usize, captured: bool) -> String {
    if !["kernels", "copies", "memsets"]
        .iter()
        .any(|k| on.contains(k))
    {
        return format!("none recorded: kernels, copies and memsets were not asked for (on: {on})");
    }
    if untimed > 0 {
        return format!(
            "none timed: {untimed} launched, not timed by CUPTI when the process ended (listed \
             as never timed)"
        );
    }
    if captured {
        return "none recorded while capture control recorded (see its notices)".into();
    }
    "none recorded (the program ran no kernels, copies or memsets while recording)".into()
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
        for g in &mut self.gpu_metric_setups {
            s(&mut g.time_ns);
        }
        for b in &mut self.gpu_metric_samples {
            s(&mut b.time_ns);
            for (start, end) in &mut b.times {
                s(start);
                s(end);
            }
        }
        for th in self.threads.values_mut() {
            for e in &mut th.nvtx {
                s(&mut e.time_ns);
            }
        }
    }

    /// Names threads from the program's `nvtxNameOsThread` events (a thread named by its
    /// ThreadInfo keeps that name).
    pub(crate) fn name_threads_from_nvtx(&mut self) {
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
            end_ns: 0,
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
                        end_ns: r.end_ns,
                        function: r.function,
                    };
                }
            }
        }
        ApiLookup::Map(map)
    }

    pub(crate) fn thread_mut(&mut self, tid: u64) -> &mut ThreadTrace {
        self.threads.entry(tid).or_insert_with(|| ThreadTrace {
            tid,
            ..Default::default()
        })
    }

    /// What librtrace.so said of GPU activity in this trace: the rest of its `GPU activity on`
    /// notice, or `Err` with the reason of its `GPU activity off` one; `None` when it said
    /// neither (GPU activity was not asked for, or CUPTI never started: the driver was never
    /// initialised).
    pub fn gpu_activity(&self) -> Option<Result<String, String>> {
        let said = |prefix: &str| {
            self.notices.iter().find_map(|n| {
                let rest = n.message.strip_prefix(prefix)?;
                Some(rest.strip_prefix(':').unwrap_or(rest).trim().to_string())
            })
        };
        match (
            said(rtrace_format::GPU_ACTIVITY_OFF),
            said(rtrace_format::GPU_ACTIVITY_ON),
        ) {
            (Some(why), _) => Some(Err(why)),
            (None, Some(on)) => Some(Ok(on)),
            (None, None) => None,
        }
    }

    /// Why a trace holds no GPU work, in a line (None: it holds some).
    ///
    /// GPU activity "on" with no work: either the program ran none, or the kinds on did not
    /// include kernels, copies or memsets ([`none_recorded`]).
    pub fn no_gpu_work(&self, gpu_records: u64) -> Option<String> {
        if gpu_records > 0 {
            return None;
        }
        Some(match self.gpu_activity() {
            Some(Err(why)) => format!("GPU activity off: {why}"),
            Some(Ok(on)) => format!(
                "GPU activity on, {}",
                none_recorded(&on, self.untimed.len(), self.captured())
            ),
            None => "GPU activity not recorded (not asked for, or CUPTI never started: no \
                     successful cuInit, no GPU, or a forked child); `rtrace record` records it \
                     by default, LD_PRELOAD needs RTRACE_GPU_ACTIVITY=1"
                .into(),
        })
    }

    /// What the trace's notices say of PC sampling other than that a context is sampled:
    /// stall reasons the chip lacks, why it is off, samples lost.
    pub fn pc_sampling_notes(&self) -> impl Iterator<Item = &str> {
        self.notices.iter().map(|n| n.message.as_str()).filter(|m| {
            m.starts_with(rtrace_format::PC_SAMPLING_NOTICE)
                && !m.starts_with(rtrace_format::PC_SAMPLING_ON)
        })
    }

    /// Whether capture control chose what was recorded (a notice of it says so).
    pub fn captured(&self) -> bool {
        self.notices
            .iter()
            .any(|n| n.message.starts_with(rtrace_format::CAPTURE_NOTICE))
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
}
