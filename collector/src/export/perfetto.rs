//! The Perfetto trace format: a `Trace` protobuf message, written as a
//! stream of `TracePacket`s using the track-event model
//! (`protos/perfetto/trace/track_event/`).
//!
//! Each input trace is one packet sequence (its own trusted packet sequence
//! id), whose first packet clears the incremental state, sets the default
//! timestamp clock to `BUILTIN_CLOCK_MONOTONIC` and interns the argument
//! names; event names are interned as they first appear. The first sequence
//! also makes `CLOCK_MONOTONIC` the trace's clock (a clock snapshot naming it
//! the primary trace clock), so timestamps are the trace file's own.

use super::layout::{self, Gpu, KernelNames, Links, Nest, Step, Value, ARG_NAMES};
use super::proto::Proto;
use super::Stats;
use crate::model::Trace;
use std::collections::HashMap;
use std::io::{self, Write};

/// Field numbers of the messages written (from Perfetto's .proto files).
mod field {
    /// `Trace`.
    pub const TRACE_PACKET: u32 = 1;
    /// `TracePacket`.
    pub const CLOCK_SNAPSHOT: u32 = 6;
    pub const TIMESTAMP: u32 = 8;
    pub const TRUSTED_PACKET_SEQUENCE_ID: u32 = 10;
    pub const TRACK_EVENT: u32 = 11;
    pub const INTERNED_DATA: u32 = 12;
    pub const SEQUENCE_FLAGS: u32 = 13;
    pub const TRACE_PACKET_DEFAULTS: u32 = 59;
    pub const TRACK_DESCRIPTOR: u32 = 60;
    pub const FIRST_PACKET_ON_SEQUENCE: u32 = 87;
    /// `ClockSnapshot`.
    pub const PRIMARY_TRACE_CLOCK: u32 = 2;
    /// `TracePacketDefaults`.
    pub const TIMESTAMP_CLOCK_ID: u32 = 58;
    /// `InternedData`.
    pub const EVENT_NAMES: u32 = 2;
    pub const DEBUG_ANNOTATION_NAMES: u32 = 3;
    /// `EventName`, `DebugAnnotationName`.
    pub const IID: u32 = 1;
    pub const NAME: u32 = 2;
    /// `TrackDescriptor`.
    pub const UUID: u32 = 1;
    pub const TRACK_NAME: u32 = 2;
    pub const PROCESS: u32 = 3;
    pub const THREAD: u32 = 4;
    pub const PARENT_UUID: u32 = 5;
    pub const COUNTER: u32 = 8;
    pub const CHILD_ORDERING: u32 = 11;
    pub const SIBLING_ORDER_RANK: u32 = 12;
    pub const SIBLING_MERGE_BEHAVIOR: u32 = 15;
    /// `ProcessDescriptor`.
    pub const PROCESS_PID: u32 = 1;
    pub const CMDLINE: u32 = 2;
    pub const PROCESS_NAME: u32 = 6;
    /// `ThreadDescriptor`.
    pub const THREAD_PID: u32 = 1;
    pub const TID: u32 = 2;
    pub const THREAD_NAME: u32 = 5;
    /// `CounterDescriptor`.
    pub const UNIT: u32 = 3;
    /// `TrackEvent`.
    pub const DEBUG_ANNOTATIONS: u32 = 4;
    pub const TYPE: u32 = 9;
    pub const NAME_IID: u32 = 10;
    pub const TRACK_UUID: u32 = 11;
    pub const COUNTER_VALUE: u32 = 30;
    pub const FLOW_IDS: u32 = 47;
    pub const TERMINATING_FLOW_IDS: u32 = 48;
    /// `DebugAnnotation`.
    pub const ANNOTATION_NAME_IID: u32 = 1;
    pub const UINT_VALUE: u32 = 3;
    pub const STRING_VALUE: u32 = 6;
}

/// `BuiltinClock.BUILTIN_CLOCK_MONOTONIC`.
const CLOCK_MONOTONIC: u64 = 3;
/// `TracePacket.SequenceFlags`.
const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
/// `TrackEvent.Type`.
const TYPE_SLICE_BEGIN: u64 = 1;
const TYPE_SLICE_END: u64 = 2;
const TYPE_COUNTER: u64 = 4;
/// `TrackDescriptor.ChildTracksOrdering.EXPLICIT`.
const ORDERING_EXPLICIT: u64 = 3;
/// `TrackDescriptor.SiblingMergeBehavior.SIBLING_MERGE_BEHAVIOR_BY_TRACK_NAME`.
const MERGE_BY_TRACK_NAME: u64 = 1;
/// `CounterDescriptor.Unit.UNIT_SIZE_BYTES`.
const UNIT_SIZE_BYTES: u64 = 3;

/// Packets are gathered in a buffer and written once it holds this much.
const FLUSH_BYTES: usize = 1 << 20;

/// Writes traces as one Perfetto trace, packet by packet.
pub struct PerfettoWriter<W: Write> {
    out: W,
    p: Proto,
    next_uuid: u64,
    next_flow: u64,
    sequences: u32,
    stats: Stats,
}

/// A slice's name: interned on the sequence.
struct Names {
    iids: HashMap<String, u64>,
    functions: HashMap<u32, u64>,
    kernels: HashMap<u32, u64>,
    demangled: KernelNames,
}

impl<W: Write> PerfettoWriter<W> {
    pub fn new(out: W) -> Self {
        PerfettoWriter {
            out,
            p: Proto::default(),
            next_uuid: 1,
            next_flow: 1,
            sequences: 0,
            stats: Stats::default(),
        }
    }

    fn uuid(&mut self) -> u64 {
        let u = self.next_uuid;
        self.next_uuid += 1;
        u
    }

    fn flush_if_full(&mut self) -> io::Result<()> {
        if self.p.buf.len() >= FLUSH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.write_all(&self.p.buf)?;
        self.stats.bytes += self.p.buf.len() as u64;
        self.p.buf.clear();
        Ok(())
    }

    /// Writes what is buffered and returns the output, with what was written.
    pub fn finish(mut self) -> io::Result<(W, Stats)> {
        self.flush()?;
        self.out.flush()?;
        Ok((self.out, self.stats))
    }

    /// Writes `trace` as the next packet sequence.
    pub fn write_trace(&mut self, trace: &Trace) -> io::Result<()> {
        self.sequences += 1;
        let seq = u64::from(self.sequences);
        self.stats.traces += 1;

        // The sequence's first packet: state cleared, clock, argument names.
        let packet = self.p.begin(field::TRACE_PACKET);
        self.p.varint(field::TRUSTED_PACKET_SEQUENCE_ID, seq);
        self.p
            .varint(field::SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
        self.p.varint(field::FIRST_PACKET_ON_SEQUENCE, 1);
        let defaults = self.p.begin(field::TRACE_PACKET_DEFAULTS);
        self.p.varint(field::TIMESTAMP_CLOCK_ID, CLOCK_MONOTONIC);
        self.p.end(defaults);
        let interned = self.p.begin(field::INTERNED_DATA);
        for (i, name) in ARG_NAMES.iter().enumerate() {
            let n = self.p.begin(field::DEBUG_ANNOTATION_NAMES);
            self.p.varint(field::IID, i as u64 + 1);
            self.p.string(field::NAME, name);
            self.p.end(n);
        }
        self.p.end(interned);
        if seq == 1 {
            let clock = self.p.begin(field::CLOCK_SNAPSHOT);
            self.p.varint(field::PRIMARY_TRACE_CLOCK, CLOCK_MONOTONIC);
            self.p.end(clock);
        }
        self.p.end(packet);
        self.stats.packets += 1;

        // The process and its threads.
        let h = &trace.header;
        let process = self.uuid();
        self.descriptor(seq, |p| {
            p.varint(field::UUID, process);
            let d = p.begin(field::PROCESS);
            p.int64(field::PROCESS_PID, i64::from(h.pid as i32));
            for arg in &h.command_line {
                p.string(field::CMDLINE, arg);
            }
            p.string(field::PROCESS_NAME, &layout::process_name(trace));
            p.end(d);
        });
        let mut thread_uuids = Vec::with_capacity(trace.threads.len());
        for t in trace.threads.values() {
            let uuid = self.uuid();
            thread_uuids.push(uuid);
            self.descriptor(seq, |p| {
                p.varint(field::UUID, uuid);
                p.varint(field::PARENT_UUID, process);
                let d = p.begin(field::THREAD);
                p.int64(field::THREAD_PID, i64::from(h.pid as i32));
                p.int64(field::TID, t.tid as i64);
                if let Some(name) = &t.name {
                    p.string(field::THREAD_NAME, name);
                }
                p.end(d);
            });
        }

        let mut names = Names {
            iids: HashMap::new(),
            functions: HashMap::new(),
            kernels: HashMap::new(),
            demangled: KernelNames::default(),
        };
        let mut links = Links::new(trace, &mut self.next_flow);
        self.stats.flows += links.flows;
        let mut args = Vec::new();

        // API calls, one slice each, on their thread's track.
        for (t, &thread_uuid) in trace.threads.values().zip(&thread_uuids) {
            let spans = layout::api_spans(&t.records);
            let mut lanes = vec![thread_uuid];
            let mut nest = Nest::new(&spans);
            for step in nest.by_ref() {
                match step {
                    Step::Begin { index, lane, .. } => {
                        let track = self.lane(seq, &mut lanes, lane, |p| {
                            let name = match &t.name {
                                Some(n) => n.clone(),
                                None => format!("thread {}", t.tid),
                            };
                            p.string(field::TRACK_NAME, &name);
                        });
                        let r = &t.records[index as usize];
                        let name =
                            intern(&mut names.functions, r.function, &mut names.iids, || {
                                trace.function_name(r.function).into_owned()
                            });
                        layout::api_args(r, &mut args);
                        let flows = links.api_flows(t.tid, index as usize, r);
                        self.begin(seq, track, r.start_ns, name, &args, flows, None)?;
                    }
                    Step::End { lane, end, .. } => {
                        let track = lanes[lane as usize];
                        self.end(seq, track, end)?;
                    }
                }
            }
            self.stats.clipped += nest.clipped;
        }

        // NVTX ranges: a track per thread that began any (under the process), and per device
        // the ranges' projections: each range's span over the GPU work it launched.
        for track in layout::nvtx_tracks(trace) {
            let uuid = self.uuid();
            let name = track.name;
            self.descriptor(seq, |p| {
                p.varint(field::UUID, uuid);
                p.varint(field::PARENT_UUID, process);
                p.string(field::TRACK_NAME, &name);
            });
            let spans: Vec<(u64, u64)> = track.slices.iter().map(|s| (s.1, s.2)).collect();
            let mut lanes = vec![uuid];
            let mut nest = Nest::new(&spans);
            for step in nest.by_ref() {
                match step {
                    Step::Begin { index, lane, .. } => {
                        let track_uuid = self.lane(seq, &mut lanes, lane, |p| {
                            p.string(field::TRACK_NAME, &name);
                        });
                        let slice = &track.slices[index as usize];
                        let iid = intern_name(&mut names.iids, slice.0.clone());
                        self.begin(seq, track_uuid, slice.1, iid, &[], 0..0, None)?;
                    }
                    Step::End { lane, end, .. } => {
                        let track_uuid = lanes[lane as usize];
                        self.end(seq, track_uuid, end)?;
                    }
                }
            }
            self.stats.clipped += nest.clipped;
        }

        // GPU work: a track per device, in it one per stream (and counters).
        for device in layout::devices(trace) {
            let device_uuid = self.uuid();
            let device_name = layout::device_name(trace, device.ordinal);
            self.descriptor(seq, |p| {
                p.varint(field::UUID, device_uuid);
                p.varint(field::PARENT_UUID, process);
                p.string(field::TRACK_NAME, &device_name);
                p.varint(field::CHILD_ORDERING, ORDERING_EXPLICIT);
            });
            let mut rank = 0u64;
            for stream in &device.streams {
                let name = layout::stream_name(device.ordinal, stream.id);
                let mut lanes = Vec::new();
                let mut nest = Nest::new(&stream.spans);
                for step in nest.by_ref() {
                    match step {
                        Step::Begin { index, lane, .. } => {
                            let lane_rank = rank + u64::from(lane);
                            let track = self.lane_at(seq, &mut lanes, lane, |p| {
                                p.varint(field::PARENT_UUID, device_uuid);
                                p.string(field::TRACK_NAME, &name);
                                p.varint(field::SIBLING_ORDER_RANK, lane_rank);
                                p.varint(field::SIBLING_MERGE_BEHAVIOR, MERGE_BY_TRACK_NAME);
                            });
                            let record = stream.records[index as usize];
                            let (start, _) = stream.spans[index as usize];
                            let iid = match record {
                                Gpu::Kernel(i) => {
                                    let id = trace.kernels[i as usize].name;
                                    let demangled = &mut names.demangled;
                                    intern(&mut names.kernels, id, &mut names.iids, || {
                                        demangled.get(trace, id).to_string()
                                    })
                                }
                                _ => {
                                    let name =
                                        layout::copy_or_set_name(trace, record).unwrap_or_default();
                                    intern_name(&mut names.iids, name)
                                }
                            };
                            layout::gpu_args(trace, record, &mut args);
                            let flow = links.gpu_flow(trace, record, start);
                            self.begin(seq, track, start, iid, &args, 0..0, flow)?;
                        }
                        Step::End { lane, end, .. } => {
                            let track = lanes[lane as usize];
                            self.end(seq, track, end)?;
                        }
                    }
                }
                self.stats.clipped += nest.clipped;
                rank += lanes.len() as u64;
            }
            for counter in &device.counters {
                let uuid = self.uuid();
                let name = layout::counter_name(device.ordinal, counter.host);
                self.descriptor(seq, |p| {
                    p.varint(field::UUID, uuid);
                    p.varint(field::PARENT_UUID, device_uuid);
                    p.string(field::TRACK_NAME, &name);
                    p.varint(field::SIBLING_ORDER_RANK, rank);
                    let c = p.begin(field::COUNTER);
                    p.varint(field::UNIT, UNIT_SIZE_BYTES);
                    p.end(c);
                });
                rank += 1;
                for &(ts, value) in &counter.points {
                    let packet = self.p.begin(field::TRACE_PACKET);
                    self.p.varint(field::TIMESTAMP, ts);
                    self.p.varint(field::TRUSTED_PACKET_SEQUENCE_ID, seq);
                    self.p
                        .varint(field::SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
                    let e = self.p.begin(field::TRACK_EVENT);
                    self.p.varint(field::TYPE, TYPE_COUNTER);
                    self.p.varint(field::TRACK_UUID, uuid);
                    self.p.int64(field::COUNTER_VALUE, value);
                    self.p.end(e);
                    self.p.end(packet);
                    self.stats.packets += 1;
                    self.stats.counter_values += 1;
                    self.flush_if_full()?;
                }
            }
        }
        self.flush_if_full()
    }

    /// A packet holding a track descriptor that `fill` writes.
    fn descriptor(&mut self, seq: u64, fill: impl FnOnce(&mut Proto)) {
        let packet = self.p.begin(field::TRACE_PACKET);
        self.p.varint(field::TRUSTED_PACKET_SEQUENCE_ID, seq);
        let d = self.p.begin(field::TRACK_DESCRIPTOR);
        fill(&mut self.p);
        self.p.end(d);
        self.p.end(packet);
        self.stats.packets += 1;
        self.stats.tracks += 1;
    }

    /// The track of `lane` of a thread, whose lane 0 is `lanes[0]`: further
    /// lanes are child tracks of the thread's, described (with `fill`
    /// naming them) when first used.
    fn lane(
        &mut self,
        seq: u64,
        lanes: &mut Vec<u64>,
        lane: u32,
        fill: impl FnOnce(&mut Proto),
    ) -> u64 {
        let parent = lanes[0];
        self.lane_at(seq, lanes, lane, |p| {
            p.varint(field::PARENT_UUID, parent);
            fill(p);
        })
    }

    /// The track of `lane` in `lanes`, described (by `fill`, after the uuid)
    /// when first used. Lanes are first used in order.
    fn lane_at(
        &mut self,
        seq: u64,
        lanes: &mut Vec<u64>,
        lane: u32,
        fill: impl FnOnce(&mut Proto),
    ) -> u64 {
        let lane = lane as usize;
        if lane < lanes.len() {
            return lanes[lane];
        }
        debug_assert_eq!(lane, lanes.len());
        let uuid = self.uuid();
        self.descriptor(seq, |p| {
            p.varint(field::UUID, uuid);
            fill(p);
        });
        lanes.push(uuid);
        uuid
    }

    /// A slice's begin event. `name` is the name's iid and, when it was
    /// interned just now, the name. `flows` start here; `flow` ends here
    /// (or passes through, when the work started before the call).
    #[allow(clippy::too_many_arguments)]
    fn begin(
        &mut self,
        seq: u64,
        track: u64,
        ts: u64,
        name: (u64, Option<String>),
        args: &[layout::Arg],
        flows: std::ops::Range<u64>,
        flow: Option<layout::Flow>,
    ) -> io::Result<()> {
        let (iid, new_name) = name;
        let packet = self.p.begin(field::TRACE_PACKET);
        self.p.varint(field::TIMESTAMP, ts);
        self.p.varint(field::TRUSTED_PACKET_SEQUENCE_ID, seq);
        self.p
            .varint(field::SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
        if let Some(new_name) = new_name {
            let interned = self.p.begin(field::INTERNED_DATA);
            let n = self.p.begin(field::EVENT_NAMES);
            self.p.varint(field::IID, iid);
            self.p.string(field::NAME, &new_name);
            self.p.end(n);
            self.p.end(interned);
        }
        let e = self.p.begin(field::TRACK_EVENT);
        self.p.varint(field::TYPE, TYPE_SLICE_BEGIN);
        self.p.varint(field::TRACK_UUID, track);
        self.p.varint(field::NAME_IID, iid);
        for (name, value) in args {
            let a = self.p.begin(field::DEBUG_ANNOTATIONS);
            self.p.varint(field::ANNOTATION_NAME_IID, *name as u64 + 1);
            match value {
                Value::Uint(v) => self.p.varint(field::UINT_VALUE, *v),
                Value::Str(s) => self.p.string(field::STRING_VALUE, s),
            }
            self.p.end(a);
        }
        for id in flows {
            self.p.fixed64(field::FLOW_IDS, id);
        }
        if let Some(flow) = flow {
            let f = if flow.call_first {
                field::TERMINATING_FLOW_IDS
            } else {
                field::FLOW_IDS
            };
            self.p.fixed64(f, flow.id);
        }
        self.p.end(e);
        self.p.end(packet);
        self.stats.packets += 1;
        self.stats.slices += 1;
        self.flush_if_full()
    }

    fn end(&mut self, seq: u64, track: u64, ts: u64) -> io::Result<()> {
        let packet = self.p.begin(field::TRACE_PACKET);
        self.p.varint(field::TIMESTAMP, ts);
        self.p.varint(field::TRUSTED_PACKET_SEQUENCE_ID, seq);
        self.p
            .varint(field::SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
        let e = self.p.begin(field::TRACK_EVENT);
        self.p.varint(field::TYPE, TYPE_SLICE_END);
        self.p.varint(field::TRACK_UUID, track);
        self.p.end(e);
        self.p.end(packet);
        self.stats.packets += 1;
        self.flush_if_full()
    }
}

/// The iid of the name of `id` (a function or kernel id), interning the name
/// `make` gives on first use: returns (iid, the name when new).
fn intern(
    by_id: &mut HashMap<u32, u64>,
    id: u32,
    iids: &mut HashMap<String, u64>,
    make: impl FnOnce() -> String,
) -> (u64, Option<String>) {
    if let Some(&iid) = by_id.get(&id) {
        return (iid, None);
    }
    let (iid, new) = intern_name(iids, make());
    by_id.insert(id, iid);
    (iid, new)
}

/// The iid of `name`, interning it on first use: returns (iid, the name when new).
fn intern_name(iids: &mut HashMap<String, u64>, name: String) -> (u64, Option<String>) {
    if let Some(&iid) = iids.get(&name) {
        return (iid, None);
    }
    let iid = iids.len() as u64 + 1;
    iids.insert(name.clone(), iid);
    (iid, Some(name))
}
