//! What both export formats show, worked out once per trace: slices laid out
//! on properly nested lanes, the GPU tracks of each device, the links from API
//! calls to the GPU work they launched, and the memory counters.

pub use crate::read::links::Flow;
pub use crate::read::records::{Gpu, Place};

use crate::model::Trace;
use crate::read::first::CounterKey;
use rtrace_format::{ApiRecord, ID_NONE};
use std::collections::{BTreeSet, HashMap};

/// Lanes a track may grow to before overlapping slices are clipped (see [`Lanes`]).
pub const MAX_LANES: usize = 32;

/// One step of drawing slices on a track: a slice begins or ends on one of
/// the track's lanes (lane 0 is the track itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Slice `index` begins at its start; `end` is where it will end (its own
    /// end, or the end it was clipped to).
    Begin { index: u32, lane: u32, end: u64 },
    /// Slice `index` ends at `end`.
    End { index: u32, lane: u32, end: u64 },
}

/// The lanes of one track, filled as slices come in start order (then longest
/// first): each slice goes to the first lane where it either nests inside the
/// slice open last or starts after it ends, as begin/end (and complete) events
/// require. Calls on one thread always fit lane 0 (they nest); GPU work that
/// overlaps on one stream takes further lanes. A slice that fits none of
/// [`MAX_LANES`] lanes goes to the last one, its end clipped to that of the
/// slice it would overlap ([`Lanes::clipped`]).
///
/// Only the open slices are held (at most a few per lane), so a track of any
/// length is laid out in constant memory. The steps come in an order valid for
/// each lane: ends and begins alternate as the nesting requires, with ties (a
/// slice ending where the next begins) ending first.
#[derive(Debug, Default)]
pub struct Lanes {
    /// Per lane, the open slices: (end, index), innermost last.
    open: Vec<Vec<(u64, u32)>>,
    /// Slices whose end was clipped for want of a lane.
    pub clipped: u64,
}

impl Lanes {
    /// Places slice `index` spanning `start..end` (an end before its start
    /// counts as the start), handing `step` the ends it passes and then its begin (the first
    /// error `step` gives stops it). Slices must come in start order, longest first among
    /// equal starts.
    #[inline]
    pub fn place<E>(
        &mut self,
        index: u32,
        start: u64,
        end: u64,
        mut step: impl FnMut(Step) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut end = end.max(start);
        let mut chosen = None;
        for (li, lane) in self.open.iter_mut().enumerate() {
            while let Some(&(e, i)) = lane.last() {
                if e > start {
                    break;
                }
                lane.pop();
                step(Step::End {
                    index: i,
                    lane: li as u32,
                    end: e,
                })?;
            }
            if lane.last().is_none_or(|&(e, _)| e >= end) {
                chosen = Some(li);
                break;
            }
        }
        let lane = match chosen {
            Some(li) => li,
            None if self.open.len() < MAX_LANES => {
                self.open.push(Vec::new());
                self.open.len() - 1
            }
            None => {
                let li = self.open.len() - 1;
                // The top ends after `start` (else it was popped) and before `end`.
                end = self.open[li].last().map_or(end, |&(e, _)| e);
                self.clipped += 1;
                li
            }
        };
        self.open[lane].push((end, index));
        step(Step::Begin {
            index,
            lane: lane as u32,
            end,
        })
    }

    /// Ends every open slice: lane by lane, innermost first.
    pub fn drain<E>(&mut self, mut step: impl FnMut(Step) -> Result<(), E>) -> Result<(), E> {
        for (li, lane) in self.open.iter_mut().enumerate() {
            while let Some((end, index)) = lane.pop() {
                step(Step::End {
                    index,
                    lane: li as u32,
                    end,
                })?;
            }
        }
        Ok(())
    }
}

/// [`Lanes`] over slices held in memory, in any order: sorts them by start
/// (then longest first, then index) and yields the steps (for the tests of [`Lanes`]).
#[cfg(test)]
#[derive(Debug)]
pub struct Nest {
    spans: Vec<(u64, u64)>,
    order: Vec<u32>,
    next: usize,
    lanes: Lanes,
    pending: std::collections::VecDeque<Step>,
    drained: bool,
}

#[cfg(test)]
impl Nest {
    /// `spans`: (start, end) of each slice.
    pub fn new(spans: &[(u64, u64)]) -> Self {
        let mut order: Vec<u32> = (0..spans.len() as u32).collect();
        order.sort_by_key(|&i| {
            let (s, e) = spans[i as usize];
            (s, std::cmp::Reverse(e.max(s)), i)
        });
        Nest {
            spans: spans.to_vec(),
            order,
            next: 0,
            lanes: Lanes::default(),
            pending: std::collections::VecDeque::new(),
            drained: false,
        }
    }

    /// Slices whose end was clipped for want of a lane.
    pub fn clipped(&self) -> u64 {
        self.lanes.clipped
    }
}

#[cfg(test)]
impl Iterator for Nest {
    type Item = Step;

    fn next(&mut self) -> Option<Step> {
        loop {
            if let Some(step) = self.pending.pop_front() {
                return Some(step);
            }
            if self.next < self.order.len() {
                let index = self.order[self.next];
                self.next += 1;
                let (start, end) = self.spans[index as usize];
                let pending = &mut self.pending;
                let _ = self.lanes.place(index, start, end, |s| {
                    pending.push_back(s);
                    Ok::<(), ()>(())
                });
                continue;
            }
            if self.drained {
                return None;
            }
            self.drained = true;
            let pending = &mut self.pending;
            let _ = self.lanes.drain(|s| {
                pending.push_back(s);
                Ok::<(), ()>(())
            });
        }
    }
}

/// A memory counter of one device: bytes in use, changed by allocations and
/// frees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counter {
    /// `false`: memory on the device (device, array, managed, static and
    /// unknown kinds); `true`: host memory (pinned and pageable).
    pub host: bool,
}

/// One device of a trace: its contexts that ran work (ascending) and its
/// memory counters.
#[derive(Clone, Debug, Default)]
pub struct Device {
    pub ordinal: u32,
    pub contexts: Vec<Context>,
    pub counters: Vec<Counter>,
}

/// One context of a device: its id and the streams that ran work in it
/// (ascending).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Context {
    pub id: u32,
    pub streams: Vec<u32>,
}

/// The devices of a trace that ran GPU work (on the places `streams`) or
/// have memory counters (`counters`: device, host), ascending; device
/// memory's counter first, then host memory's.
pub fn devices(streams: &BTreeSet<Place>, counters: &BTreeSet<CounterKey>) -> Vec<Device> {
    let mut ordinals: Vec<u32> = streams
        .iter()
        .map(|&(d, _, _)| d)
        .chain(counters.iter().map(|&(d, _)| d))
        .collect();
    ordinals.sort_unstable();
    ordinals.dedup();
    ordinals
        .into_iter()
        .map(|ordinal| Device {
            ordinal,
            contexts: contexts_of(streams, ordinal),
            counters: counters
                .range((ordinal, false)..=(ordinal, true))
                .map(|&(_, host)| Counter { host })
                .collect(),
        })
        .collect()
}

/// The contexts of device `ordinal` in `streams`, each with its streams.
fn contexts_of(streams: &BTreeSet<Place>, ordinal: u32) -> Vec<Context> {
    let mut out: Vec<Context> = Vec::new();
    for &(_, c, s) in streams.range((ordinal, 0, 0)..=(ordinal, u32::MAX, u32::MAX)) {
        match out.last_mut() {
            Some(last) if last.id == c => last.streams.push(s),
            _ => out.push(Context {
                id: c,
                streams: vec![s],
            }),
        }
    }
    out
}

/// A slice argument's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    Uint(u64),
    /// A launch dimension, shown as `(x,y,z)` ([`Value::write_str`]).
    Dim([i32; 3]),
    /// A name fixed at build time (a memory kind).
    Name(&'static str),
}

impl Value {
    /// A string value as shown, written into `out` (cleared first); `None` for a number.
    pub fn write_str<'a>(&'a self, out: &'a mut String) -> Option<&'a str> {
        match self {
            Value::Uint(_) => None,
            Value::Dim(d) => {
                out.clear();
                for (i, &v) in d.iter().enumerate() {
                    out.push(if i == 0 { '(' } else { ',' });
                    push_decimal(out, v);
                }
                out.push(')');
                Some(out.as_str())
            }
            Value::Name(n) => Some(n),
        }
    }
}

/// Appends `v` in decimal, as `{v}` would (without going through a formatter: a kernel's
/// grid and block are six numbers per record).
fn push_decimal(out: &mut String, v: i32) {
    let mut digits = [0u8; 10];
    let mut n = v.unsigned_abs();
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push('-');
    }
    out.extend(digits[i..].iter().map(|&d| char::from(d)));
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

/// Where a slice's arguments go ([`api_args`], [`gpu_args`]), one at a time, in order: a
/// list of them ([`Arg`]s, for Chrome's JSON), or a writer that encodes each as it comes
/// (Perfetto's).
pub trait Args {
    fn arg(&mut self, name: usize, value: Value);
}

impl Args for Vec<Arg> {
    #[inline]
    fn arg(&mut self, name: usize, value: Value) {
        self.push((name, value));
    }
}

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
#[inline]
pub fn api_args(r: &ApiRecord, out: &mut impl Args) {
    out.arg(RESULT, Value::Uint(u64::from(r.result)));
    out.arg(CORRELATION, Value::Uint(r.correlation));
}

/// A GPU record's arguments: for a kernel its grid, block, registers per
/// thread and static and dynamic shared memory (bytes per block); for a copy
/// its bytes and memory kinds; for a memset its bytes and value; then the
/// correlation id, when the record has one.
#[inline]
pub fn gpu_args(record: Gpu, out: &mut impl Args) {
    match record {
        Gpu::Kernel(k) => {
            out.arg(GRID, Value::Dim(k.grid));
            out.arg(BLOCK, Value::Dim(k.block));
            out.arg(REGISTERS, Value::Uint(k.registers_per_thread.into()));
            out.arg(STATIC_SHARED, Value::Uint(k.static_shared_memory.into()));
            out.arg(DYNAMIC_SHARED, Value::Uint(k.dynamic_shared_memory.into()));
        }
        Gpu::Memcpy(m) => {
            out.arg(BYTES, Value::Uint(m.bytes));
            out.arg(SRC_KIND, Value::Name(m.src_kind.name()));
            out.arg(DST_KIND, Value::Name(m.dst_kind.name()));
        }
        Gpu::Memset(m) => {
            out.arg(BYTES, Value::Uint(m.bytes));
            out.arg(VALUE, Value::Uint(m.value.into()));
        }
    }
    if let Some(c) = record.correlation() {
        out.arg(CORRELATION, Value::Uint(c));
    }
}

/// The metric values of a trace's profiled kernel launches, by correlation id: their kernel
/// slices' arguments `metrics.<metric name>` (values CUPTI could not evaluate left out).
#[derive(Clone, Debug, Default)]
pub struct MetricArgs(HashMap<u64, Vec<(String, f64)>>);

impl MetricArgs {
    /// The values of `trace`'s kernel profiles, named by their set-up's metrics.
    pub fn of(trace: &Trace) -> MetricArgs {
        let mut by_correlation = HashMap::new();
        for p in trace.kernel_profiles.iter().filter(|p| p.correlation != 0) {
            let Some(setup) = trace
                .profiler_setups
                .iter()
                .rev()
                .find(|s| s.context == p.context)
            else {
                continue;
            };
            let values: Vec<(String, f64)> = setup
                .metrics
                .iter()
                .zip(&p.values)
                .filter(|(_, v)| v.is_finite())
                .map(|(n, v)| (format!("metrics.{n}"), *v))
                .collect();
            by_correlation.insert(p.correlation, values);
        }
        MetricArgs(by_correlation)
    }

    /// The arguments of GPU record `g`'s slice: those of its profiled launch, for a
    /// correlated kernel.
    pub fn of_record(&self, g: Gpu) -> &[(String, f64)] {
        match g {
            Gpu::Kernel(k) if k.flags & rtrace_format::FLAG_CORRELATED != 0 => {
                self.0.get(&k.correlation).map_or(&[][..], Vec::as_slice)
            }
            _ => &[],
        }
    }
}

/// A copy's or memset's slice name: `memcpy HtoD 4 KiB`, `memset 1 MiB`
/// (kernels are named by [`KernelNames`]).
pub fn copy_or_set_name(record: Gpu) -> Option<String> {
    match record {
        Gpu::Kernel(_) => None,
        Gpu::Memcpy(m) => Some(format!(
            "memcpy {} {}",
            m.kind.name(),
            binary_bytes(m.bytes)
        )),
        Gpu::Memset(m) => Some(format!("memset {}", binary_bytes(m.bytes))),
    }
}

/// What a copy's or memset's slice name ([`copy_or_set_name`]) depends on: the copy's kind
/// (`u32::MAX` for a memset) and the bytes; `None` for a kernel.
pub fn copy_or_set_key(record: Gpu) -> Option<(u32, u64)> {
    match record {
        Gpu::Kernel(_) => None,
        Gpu::Memcpy(m) => Some((u32::from(m.kind as u8), m.bytes)),
        Gpu::Memset(m) => Some((u32::MAX, m.bytes)),
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
        crate::text::shell_join(&h.command_line)
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

/// The name of a context's track: `GPU 0 context 1`.
pub fn context_name(ordinal: u32, context: u32) -> String {
    format!("GPU {ordinal} {}", id_name("context", context))
}

/// The name of a stream's track: `GPU 0 stream 7`.
pub fn stream_name(ordinal: u32, stream: u32) -> String {
    format!("GPU {ordinal} {}", id_name("stream", stream))
}

/// `stream 7`, or `stream none` for a record without one.
pub fn id_name(what: &str, id: u32) -> String {
    if id == ID_NONE {
        format!("{what} none")
    } else {
        format!("{what} {id}")
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
