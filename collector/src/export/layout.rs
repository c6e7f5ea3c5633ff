//! What both export formats show, worked out once per trace: slices laid out
//! on properly nested lanes, the GPU tracks of each device, the links from API
//! calls to the GPU work they launched, and the memory counters.

use crate::model::Trace;
use rtrace_format::{ApiRecord, MemoryKind, MemoryOperation, FLAG_CORRELATED, ID_NONE};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Lanes a track may grow to before overlapping slices are clipped (see [`Nest`]).
pub const MAX_LANES: usize = 32;

/// One step of drawing slices on a track: a slice begins or ends on one of
/// the track's lanes (lane 0 is the track itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Slice `index` (into the spans given to [`Nest::new`]) begins at its
    /// start; `end` is where it will end (its own end, or the end it was
    /// clipped to).
    Begin { index: u32, lane: u32, end: u64 },
    /// Slice `index` ends at `end`.
    End { index: u32, lane: u32, end: u64 },
}

/// Lays slices out so that on each lane every slice either nests inside the
/// one open before it or starts after it ends, as begin/end (and complete)
/// events require: sorted by start (then longest first), each slice goes to
/// the first lane where it fits. Calls on one thread always fit lane 0 (they
/// nest); GPU work that overlaps on one stream takes further lanes. A slice
/// that fits none of [`MAX_LANES`] lanes goes to the last one, its end
/// clipped to that of the slice it would overlap ([`Nest::clipped`]).
///
/// The steps come in an order valid for each lane: on one lane, ends and
/// begins alternate as the nesting requires, with ties (a slice ending where
/// the next begins) ending first.
#[derive(Debug)]
pub struct Nest<'a> {
    spans: &'a [(u64, u64)],
    order: Vec<u32>,
    next: usize,
    /// Per lane, the open slices: (end, index), innermost last.
    lanes: Vec<Vec<(u64, u32)>>,
    pending: VecDeque<Step>,
    drain: usize,
    /// Slices whose end was clipped for want of a lane.
    pub clipped: u64,
}

impl<'a> Nest<'a> {
    /// `spans`: (start, end) of each slice; an end before its start counts as
    /// the start (a zero-length slice).
    pub fn new(spans: &'a [(u64, u64)]) -> Self {
        let mut order: Vec<u32> = (0..spans.len() as u32).collect();
        order.sort_by_key(|&i| {
            let (s, e) = spans[i as usize];
            (s, std::cmp::Reverse(e.max(s)), i)
        });
        Nest {
            spans,
            order,
            next: 0,
            lanes: Vec::new(),
            pending: VecDeque::new(),
            drain: 0,
            clipped: 0,
        }
    }

    fn place(&mut self, index: u32) {
        let (start, end) = self.spans[index as usize];
        let mut end = end.max(start);
        let mut chosen = None;
        for (li, lane) in self.lanes.iter_mut().enumerate() {
            while let Some(&(e, i)) = lane.last() {
                if e > start {
                    break;
                }
                lane.pop();
                self.pending.push_back(Step::End {
                    index: i,
                    lane: li as u32,
                    end: e,
                });
            }
            if lane.last().is_none_or(|&(e, _)| e >= end) {
                chosen = Some(li);
                break;
            }
        }
        let lane = match chosen {
            Some(li) => li,
            None if self.lanes.len() < MAX_LANES => {
                self.lanes.push(Vec::new());
                self.lanes.len() - 1
            }
            None => {
                let li = self.lanes.len() - 1;
                // The top ends after `start` (else it was popped) and before `end`.
                end = self.lanes[li].last().map_or(end, |&(e, _)| e);
                self.clipped += 1;
                li
            }
        };
        self.lanes[lane].push((end, index));
        self.pending.push_back(Step::Begin {
            index,
            lane: lane as u32,
            end,
        });
    }
}

impl Iterator for Nest<'_> {
    type Item = Step;

    fn next(&mut self) -> Option<Step> {
        loop {
            if let Some(step) = self.pending.pop_front() {
                return Some(step);
            }
            if self.next < self.order.len() {
                let index = self.order[self.next];
                self.next += 1;
                self.place(index);
                continue;
            }
            while self.drain < self.lanes.len() {
                let lane = self.drain as u32;
                if let Some((end, index)) = self.lanes[self.drain].pop() {
                    return Some(Step::End { index, lane, end });
                }
                self.drain += 1;
            }
            return None;
        }
    }
}

/// Which GPU record a GPU slice is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gpu {
    Kernel(u32),
    Memcpy(u32),
    Memset(u32),
}

/// The GPU work of one stream of one device, in file order (kernels, then
/// copies, then memsets).
#[derive(Debug, Default)]
pub struct Stream {
    pub id: u32,
    pub records: Vec<Gpu>,
    /// (start, end) of each record.
    pub spans: Vec<(u64, u64)>,
}

/// A memory counter of one device: bytes in use after each change.
#[derive(Debug, PartialEq, Eq)]
pub struct Counter {
    /// `false`: memory on the device (device, array, managed, static and
    /// unknown kinds); `true`: host memory (pinned and pageable).
    pub host: bool,
    /// (timestamp, bytes in use), one point per distinct timestamp, in time
    /// order: allocations add their size, frees subtract theirs.
    pub points: Vec<(u64, i64)>,
}

/// One device of a trace: its streams (ascending) and memory counters.
#[derive(Debug, Default)]
pub struct Device {
    pub ordinal: u32,
    pub streams: Vec<Stream>,
    pub counters: Vec<Counter>,
}

/// The devices of `trace` that ran GPU work or have memory records, ascending.
pub fn devices(trace: &Trace) -> Vec<Device> {
    let mut by_device: BTreeMap<u32, BTreeMap<u32, Stream>> = BTreeMap::new();
    let mut add = |device: u32, stream: u32, record: Gpu, span: (u64, u64)| {
        let s = by_device
            .entry(device)
            .or_default()
            .entry(stream)
            .or_insert_with(|| Stream {
                id: stream,
                ..Default::default()
            });
        s.records.push(record);
        s.spans.push(span);
    };
    for (i, k) in trace.kernels.iter().enumerate() {
        add(
            k.device,
            k.stream,
            Gpu::Kernel(i as u32),
            (k.start_ns, k.end_ns),
        );
    }
    for (i, m) in trace.memcpys.iter().enumerate() {
        add(
            m.device,
            m.stream,
            Gpu::Memcpy(i as u32),
            (m.start_ns, m.end_ns),
        );
    }
    for (i, m) in trace.memsets.iter().enumerate() {
        add(
            m.device,
            m.stream,
            Gpu::Memset(i as u32),
            (m.start_ns, m.end_ns),
        );
    }
    let mut counters = memory_counters(trace);
    let mut ordinals: Vec<u32> = by_device.keys().chain(counters.keys()).copied().collect();
    ordinals.sort_unstable();
    ordinals.dedup();
    ordinals
        .into_iter()
        .map(|ordinal| Device {
            ordinal,
            streams: by_device
                .remove(&ordinal)
                .map(|s| s.into_values().collect())
                .unwrap_or_default(),
            counters: counters.remove(&ordinal).unwrap_or_default(),
        })
        .collect()
}

/// Memory in use per device from the allocation and free records: device
/// memory first, then host memory, each only when it has records.
fn memory_counters(trace: &Trace) -> BTreeMap<u32, Vec<Counter>> {
    let mut changes: BTreeMap<(u32, bool), Vec<(u64, i64)>> = BTreeMap::new();
    for m in &trace.memory {
        let bytes = i64::try_from(m.bytes).unwrap_or(i64::MAX);
        let delta = match m.operation {
            MemoryOperation::Alloc => bytes,
            MemoryOperation::Free => -bytes,
            MemoryOperation::Unknown => continue,
        };
        let host = matches!(m.kind, MemoryKind::Pinned | MemoryKind::Pageable);
        changes
            .entry((m.device, host))
            .or_default()
            .push((m.timestamp_ns, delta));
    }
    let mut out: BTreeMap<u32, Vec<Counter>> = BTreeMap::new();
    for ((device, host), mut deltas) in changes {
        // Stable: changes at one time apply in file order.
        deltas.sort_by_key(|&(t, _)| t);
        let mut points: Vec<(u64, i64)> = Vec::new();
        let mut value = 0i64;
        for (t, d) in deltas {
            value = value.saturating_add(d);
            match points.last_mut() {
                Some(last) if last.0 == t => last.1 = value,
                _ => points.push((t, value)),
            }
        }
        out.entry(device)
            .or_default()
            .push(Counter { host, points });
    }
    out
}

/// The links from API calls to the GPU work they launched: a kernel or copy
/// flagged `FLAG_CORRELATED`, or a memset with a non-zero correlation, whose
/// correlation id is that of an API record of the trace (the rules of the
/// report's launch latency). Each link is one flow, with an id unique in the
/// export; an API call that launched several records (a graph) starts one
/// flow per record.
#[derive(Debug, Default)]
pub struct Links {
    by_correlation: crate::model::IdMap<Link>,
    /// Flows made.
    pub flows: u64,
}

#[derive(Debug, Default)]
struct Link {
    /// Linked GPU records with this correlation id.
    count: u32,
    /// The API record: (thread, index in the thread's records, start).
    api: Option<(u64, u32, u64)>,
    /// The first flow id; the link's flows are `base..base + count`.
    base: u64,
    /// Flow ids handed to GPU records so far.
    used: u32,
}

/// The flow of a GPU record: its id, and whether the call started before
/// the work did (the normal case, which ends the flow at the work).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    pub id: u64,
    pub call_first: bool,
}

/// The correlation id of a GPU record when it links to an API call.
pub fn gpu_correlation(trace: &Trace, record: Gpu) -> Option<u64> {
    match record {
        Gpu::Kernel(i) => {
            let k = &trace.kernels[i as usize];
            (k.flags & FLAG_CORRELATED != 0).then_some(k.correlation)
        }
        Gpu::Memcpy(i) => {
            let m = &trace.memcpys[i as usize];
            (u32::from(m.flags) & FLAG_CORRELATED != 0).then_some(m.correlation)
        }
        Gpu::Memset(i) => {
            let m = &trace.memsets[i as usize];
            (m.correlation != 0).then_some(m.correlation)
        }
    }
}

impl Links {
    /// The links of `trace`; flow ids start at `*next_flow`, which is moved
    /// past them. Ids are given in thread and record order, so the same
    /// trace always gets the same ids.
    pub fn new(trace: &Trace, next_flow: &mut u64) -> Self {
        let mut by_correlation: crate::model::IdMap<Link> = Default::default();
        let count = |c: Option<u64>, map: &mut crate::model::IdMap<Link>| {
            if let Some(c) = c {
                map.entry(c).or_default().count += 1;
            }
        };
        for i in 0..trace.kernels.len() {
            count(
                gpu_correlation(trace, Gpu::Kernel(i as u32)),
                &mut by_correlation,
            );
        }
        for i in 0..trace.memcpys.len() {
            count(
                gpu_correlation(trace, Gpu::Memcpy(i as u32)),
                &mut by_correlation,
            );
        }
        for i in 0..trace.memsets.len() {
            count(
                gpu_correlation(trace, Gpu::Memset(i as u32)),
                &mut by_correlation,
            );
        }
        let mut flows = 0;
        if !by_correlation.is_empty() {
            for (&tid, t) in &trace.threads {
                for (i, r) in t.records.iter().enumerate() {
                    if let Some(link) = by_correlation.get_mut(&r.correlation) {
                        // A correlation id given twice links to its first call.
                        if link.api.is_none() {
                            link.api = Some((tid, i as u32, r.start_ns));
                            link.base = *next_flow;
                            *next_flow += u64::from(link.count);
                            flows += u64::from(link.count);
                        }
                    }
                }
            }
        }
        by_correlation.retain(|_, l| l.api.is_some());
        Links {
            by_correlation,
            flows,
        }
    }

    /// The ids of the flows that API record `index` of thread `tid` starts
    /// (empty for most calls).
    pub fn api_flows(&self, tid: u64, index: usize, record: &ApiRecord) -> std::ops::Range<u64> {
        match self.by_correlation.get(&record.correlation) {
            Some(l)
                if l.api
                    .is_some_and(|(t, i, _)| t == tid && i as usize == index) =>
            {
                l.base..l.base + u64::from(l.count)
            }
            _ => 0..0,
        }
    }

    /// The flow that ends at GPU record `record` (starting at `start`), if it
    /// links to a call; each call hands out its ids in turn.
    pub fn gpu_flow(&mut self, trace: &Trace, record: Gpu, start: u64) -> Option<Flow> {
        let link = self
            .by_correlation
            .get_mut(&gpu_correlation(trace, record)?)?;
        let (_, _, api_start) = link.api?;
        if link.used >= link.count {
            return None;
        }
        let id = link.base + u64::from(link.used);
        link.used += 1;
        Some(Flow {
            id,
            call_first: api_start <= start,
        })
    }
}

/// A slice argument's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Uint(u64),
    Str(String),
}

/// The names of slice arguments; the Perfetto writer interns them by position.
pub const ARG_NAMES: [&str; 11] = [
    "result",
    "correlation",
    "grid",
    "block",
    "registers_per_thread",
    "static_shared_memory",
    "dynamic_shared_memory",
    "bytes",
    "src_kind",
    "dst_kind",
    "value",
];

/// An argument: its name's index in [`ARG_NAMES`], and its value.
pub type Arg = (usize, Value);

const RESULT: usize = 0;
const CORRELATION: usize = 1;
const GRID: usize = 2;
const BLOCK: usize = 3;
const REGISTERS: usize = 4;
const STATIC_SHARED: usize = 5;
const DYNAMIC_SHARED: usize = 6;
const BYTES: usize = 7;
const SRC_KIND: usize = 8;
const DST_KIND: usize = 9;
const VALUE: usize = 10;

/// An API call's arguments: its result code and correlation id.
pub fn api_args(r: &ApiRecord, out: &mut Vec<Arg>) {
    out.clear();
    out.push((RESULT, Value::Uint(u64::from(r.result))));
    out.push((CORRELATION, Value::Uint(r.correlation)));
}

/// A GPU record's arguments: for a kernel its grid, block, registers per
/// thread and static and dynamic shared memory (bytes per block); for a copy
/// its bytes and memory kinds; for a memset its bytes and value; then the
/// correlation id, when the record has one.
pub fn gpu_args(trace: &Trace, record: Gpu, out: &mut Vec<Arg>) {
    out.clear();
    let dim = |d: [i32; 3]| Value::Str(format!("({},{},{})", d[0], d[1], d[2]));
    match record {
        Gpu::Kernel(i) => {
            let k = &trace.kernels[i as usize];
            out.push((GRID, dim(k.grid)));
            out.push((BLOCK, dim(k.block)));
            out.push((REGISTERS, Value::Uint(k.registers_per_thread.into())));
            out.push((STATIC_SHARED, Value::Uint(k.static_shared_memory.into())));
            out.push((DYNAMIC_SHARED, Value::Uint(k.dynamic_shared_memory.into())));
        }
        Gpu::Memcpy(i) => {
            let m = &trace.memcpys[i as usize];
            out.push((BYTES, Value::Uint(m.bytes)));
            out.push((SRC_KIND, Value::Str(m.src_kind.name().into())));
            out.push((DST_KIND, Value::Str(m.dst_kind.name().into())));
        }
        Gpu::Memset(i) => {
            let m = &trace.memsets[i as usize];
            out.push((BYTES, Value::Uint(m.bytes)));
            out.push((VALUE, Value::Uint(m.value.into())));
        }
    }
    if let Some(c) = gpu_correlation(trace, record) {
        out.push((CORRELATION, Value::Uint(c)));
    }
}

/// A GPU record's slice name: the kernel's demangled name (see
/// [`KernelNames`]), `memcpy HtoD 4 KiB`, `memset 1 MiB`.
pub fn copy_or_set_name(trace: &Trace, record: Gpu) -> Option<String> {
    match record {
        Gpu::Kernel(_) => None,
        Gpu::Memcpy(i) => {
            let m = &trace.memcpys[i as usize];
            Some(format!(
                "memcpy {} {}",
                m.kind.name(),
                binary_bytes(m.bytes)
            ))
        }
        Gpu::Memset(i) => Some(format!(
            "memset {}",
            binary_bytes(trace.memsets[i as usize].bytes)
        )),
    }
}

/// Demangled kernel names, each demangled once.
#[derive(Debug, Default)]
pub struct KernelNames(HashMap<u32, String>);

impl KernelNames {
    pub fn get(&mut self, trace: &Trace, id: u32) -> &str {
        self.0
            .entry(id)
            .or_insert_with(|| trace.kernel_display_name(id))
    }
}

/// A byte count in binary units: `512 B`, `4 KiB`, `3.9 KiB`, `1.5 MiB`
/// (a whole number when exact, else one decimal rounded half up).
pub fn binary_bytes(bytes: u64) -> String {
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut unit = 0;
    let mut div: u128 = 1024;
    while unit + 1 < units.len() && u128::from(bytes) >= div * 1024 {
        unit += 1;
        div *= 1024;
    }
    let b = u128::from(bytes);
    if b % div == 0 {
        format!("{} {}", b / div, units[unit])
    } else {
        let tenths = (b * 10 + div / 2) / div;
        format!("{}.{} {}", tenths / 10, tenths % 10, units[unit])
    }
}

/// The traced process's name: its command line (shell-quoted), else its
/// executable, else `process PID`.
pub fn process_name(trace: &Trace) -> String {
    let h = &trace.header;
    if !h.command_line.is_empty() {
        crate::output::shell_join(&h.command_line)
    } else if !h.executable.is_empty() {
        h.executable.clone()
    } else {
        format!("process {}", h.pid)
    }
}

/// The name of a GPU device's track: `GPU 0`, with the device's name when
/// the trace describes it (`GPU 0: NVIDIA H100 80GB HBM3`).
pub fn device_name(trace: &Trace, ordinal: u32) -> String {
    match trace.devices.get(&ordinal) {
        Some(d) if !d.name.is_empty() => format!("GPU {ordinal}: {}", d.name),
        _ => format!("GPU {ordinal}"),
    }
}

/// The name of a stream's track: `GPU 0 stream 7` (`stream none` for a
/// record without one).
pub fn stream_name(ordinal: u32, stream: u32) -> String {
    if stream == ID_NONE {
        format!("GPU {ordinal} stream none")
    } else {
        format!("GPU {ordinal} stream {stream}")
    }
}

/// The name of a memory counter: `GPU 0 memory in use`, `GPU 0 host memory in use`.
pub fn counter_name(ordinal: u32, host: bool) -> String {
    if host {
        format!("GPU {ordinal} host memory in use")
    } else {
        format!("GPU {ordinal} memory in use")
    }
}

/// A thread's API records as spans, for [`Nest`].
pub fn api_spans(records: &[ApiRecord]) -> Vec<(u64, u64)> {
    records.iter().map(|r| (r.start_ns, r.end_ns)).collect()
}

/// An NVTX track of the timeline: its name and its slices (range name, start, end).
pub struct NvtxTrack {
    pub name: String,
    pub slices: Vec<(String, u64, u64)>,
}

/// The NVTX tracks of `trace`: one per thread that began ranges (`NVTX: NAME (TID)`), holding
/// them, then one per device that ran work launched inside ranges (`NVTX projected: GPU ...`),
/// holding each range's span over that work.
pub fn nvtx_tracks(trace: &Trace) -> Vec<NvtxTrack> {
    let ranges = crate::nvtx::ranges(trace).ranges;
    let mut by_thread: BTreeMap<u64, Vec<(String, u64, u64)>> = BTreeMap::new();
    let mut by_device: BTreeMap<u32, Vec<(String, u64, u64)>> = BTreeMap::new();
    for r in ranges {
        if let Some((device, start, end)) = r.gpu_span {
            by_device
                .entry(device)
                .or_default()
                .push((r.name.clone(), start, end));
        }
        by_thread
            .entry(r.tid)
            .or_default()
            .push((r.name, r.start_ns, r.end_ns));
    }
    let threads = by_thread.into_iter().map(|(tid, slices)| NvtxTrack {
        name: match trace.threads.get(&tid).and_then(|t| t.name.clone()) {
            Some(n) => format!("NVTX: {n} ({tid})"),
            None => format!("NVTX: thread {tid}"),
        },
        slices,
    });
    let devices = by_device.into_iter().map(|(device, slices)| NvtxTrack {
        name: format!("NVTX projected: {}", device_name(trace, device)),
        slices,
    });
    threads.chain(devices).collect()
}
