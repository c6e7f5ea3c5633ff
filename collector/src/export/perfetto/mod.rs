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

use super::emitter::{Emitter, Stats, Track};
use super::layout::{self, Device, Flow, Gpu, KernelNames, Value, ARG_NAMES, MAX_LANES};
use super::proto::Proto;
use crate::gpu_summary::dist::FastMap;
use crate::model::Trace;
use crate::read::first::CounterKey;
use rtrace_format::ApiRecord;
use std::collections::HashMap;
use std::io::{self, Write};

mod counter;
mod field;

use field::{
    CLOCK_MONOTONIC, MERGE_BY_TRACK_NAME, ORDERING_EXPLICIT, SEQ_INCREMENTAL_STATE_CLEARED,
    SEQ_NEEDS_INCREMENTAL_STATE, TYPE_SLICE_BEGIN, TYPE_SLICE_END, UNIT_SIZE_BYTES,
};

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
    /// The trace being written.
    seq: Sequence,
    /// Argument buffer, reused.
    args: Vec<layout::Arg>,
    /// String arguments' text.
    arg_text: layout::ArgText,
}

/// The tracks and interned names of the trace being written (one packet
/// sequence).
#[derive(Default)]
struct Sequence {
    seq: u64,
    process: u64,
    /// Each thread, stream and NVTX track: its lanes' name and uuids.
    tracks: FastMap<Track, Lanes>,
    /// (device, host) → counter track uuid.
    counters: FastMap<(u32, bool), u64>,
    /// Device ordinal → its track's uuid.
    devices: FastMap<u32, u64>,
    names: Names,
    /// Profiled launches' metric values.
    metrics: layout::MetricArgs,
}

/// The lanes of a track (lane 0 first).
struct Lanes {
    name: String,
    uuids: Vec<u64>,
    under: Under,
}

/// Where a track's further lanes go.
#[derive(Clone, Copy)]
enum Under {
    /// Child tracks of lane 0.
    Track,
    /// Siblings of lane 0 under the context's track, ranked from `rank` up.
    Context { uuid: u64, rank: u64 },
}

/// A slice's name: interned on the sequence.
#[derive(Default)]
struct Names {
    iids: HashMap<String, u64>,
    functions: FastMap<u32, u64>,
    kernels: FastMap<u32, u64>,
    /// Copies and memsets by what their name depends on ([`layout::copy_or_set_key`]).
    copies: FastMap<(u32, u64), u64>,
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
            seq: Sequence::default(),
            args: Vec::new(),
            arg_text: layout::ArgText::default(),
        }
    }

    /// Where the next trace's flow ids start; the caller moves it past them.
    pub fn next_flow(&mut self) -> &mut u64 {
        &mut self.next_flow
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

    /// The track of `lane` of `track`, described when first used: further
    /// lanes of a thread or NVTX track are its child tracks; those of a
    /// stream are siblings under the context, merged by name.
    fn track(&mut self, track: Track, lane: u32) -> u64 {
        let Some(t) = self.seq.tracks.get(&track) else {
            return 0;
        };
        if let Some(&u) = t.uuids.get(lane as usize) {
            return u;
        }
        let (name, under, first) = (t.name.clone(), t.under, t.uuids.first().copied());
        let uuid = self.uuid();
        match under {
            Under::Track => {
                let seq = self.seq.seq;
                self.descriptor(seq, |p| {
                    p.varint(field::UUID, uuid);
                    p.varint(field::PARENT_UUID, first.unwrap_or(0));
                    p.string(field::TRACK_NAME, &name);
                });
            }
            Under::Context {
                uuid: context,
                rank,
            } => {
                self.stream_descriptor(uuid, context, &name, rank + u64::from(lane));
            }
        }
        if let Some(t) = self.seq.tracks.get_mut(&track) {
            t.uuids.push(uuid);
        }
        uuid
    }

    fn stream_descriptor(&mut self, uuid: u64, context_uuid: u64, name: &str, rank: u64) {
        let seq = self.seq.seq;
        self.descriptor(seq, |p| {
            p.varint(field::UUID, uuid);
            p.varint(field::PARENT_UUID, context_uuid);
            p.string(field::TRACK_NAME, name);
            p.varint(field::SIBLING_ORDER_RANK, rank);
            p.varint(field::SIBLING_MERGE_BEHAVIOR, MERGE_BY_TRACK_NAME);
        });
    }
}

impl<W: Write> Emitter for PerfettoWriter<W> {
    fn stats(&mut self) -> &mut Stats {
        &mut self.stats
    }

    /// Starts `trace`'s packet sequence: its first packet (state cleared,
    /// clock, argument names), then the descriptors of its process, threads,
    /// devices, streams (first lanes) and memory counters.
    fn begin_trace(&mut self, trace: &Trace, devices: &[Device]) -> io::Result<()> {
        self.sequences += 1;
        let seq = u64::from(self.sequences);
        self.stats.traces += 1;
        self.seq = Sequence {
            seq,
            metrics: layout::MetricArgs::of(trace),
            ..Default::default()
        };

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
        self.seq.process = process;
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
        for t in trace.threads.values() {
            let uuid = self.uuid();
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
            let name = match &t.name {
                Some(n) => n.clone(),
                None => format!("thread {}", t.tid),
            };
            let lanes = Lanes {
                name,
                uuids: vec![uuid],
                under: Under::Track,
            };
            self.seq.tracks.insert(Track::Thread(t.tid), lanes);
        }

        // GPU work: a track per device, in it one per context (then the device's memory
        // counters), in that one per stream. A context's streams are ranked MAX_LANES
        // apart, for their further lanes.
        for device in devices {
            let device_uuid = self.uuid();
            self.seq.devices.insert(device.ordinal, device_uuid);
            let device_name = layout::device_name(trace, device.ordinal);
            self.descriptor(seq, |p| {
                p.varint(field::UUID, device_uuid);
                p.varint(field::PARENT_UUID, process);
                p.string(field::TRACK_NAME, &device_name);
                p.varint(field::CHILD_ORDERING, ORDERING_EXPLICIT);
            });
            let mut rank = 0u64;
            for context in &device.contexts {
                let context_uuid = self.uuid();
                let context_name = layout::context_name(device.ordinal, context.id);
                self.descriptor(seq, |p| {
                    p.varint(field::UUID, context_uuid);
                    p.varint(field::PARENT_UUID, device_uuid);
                    p.string(field::TRACK_NAME, &context_name);
                    p.varint(field::SIBLING_ORDER_RANK, rank);
                    p.varint(field::CHILD_ORDERING, ORDERING_EXPLICIT);
                });
                rank += 1;
                let mut stream_rank = 0u64;
                for &stream in &context.streams {
                    let uuid = self.uuid();
                    let name = layout::stream_name(device.ordinal, stream);
                    self.stream_descriptor(uuid, context_uuid, &name, stream_rank);
                    let lanes = Lanes {
                        name,
                        uuids: vec![uuid],
                        under: Under::Context {
                            uuid: context_uuid,
                            rank: stream_rank,
                        },
                    };
                    let track = Track::Stream(device.ordinal, context.id, stream);
                    self.seq.tracks.insert(track, lanes);
                    stream_rank += MAX_LANES as u64;
                }
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
                self.seq
                    .counters
                    .insert((device.ordinal, counter.host), uuid);
                rank += 1;
            }
        }
        self.flush_if_full()
    }

    /// NVTX ranges: a track per thread that began any (under the process), and per device
    /// the ranges' projections: each range's span over the GPU work it launched.
    fn nvtx_track(&mut self, track: usize, name: &str) -> io::Result<()> {
        let uuid = self.uuid();
        let (seq, process) = (self.seq.seq, self.seq.process);
        self.descriptor(seq, |p| {
            p.varint(field::UUID, uuid);
            p.varint(field::PARENT_UUID, process);
            p.string(field::TRACK_NAME, name);
        });
        let lanes = Lanes {
            name: name.to_string(),
            uuids: vec![uuid],
            under: Under::Track,
        };
        self.seq.tracks.insert(Track::Nvtx(track), lanes);
        self.flush_if_full()
    }

    fn api(
        &mut self,
        trace: &Trace,
        tid: u64,
        lane: u32,
        r: &ApiRecord,
        _end: u64,
        flows: std::ops::Range<u64>,
    ) -> io::Result<()> {
        let track = self.track(Track::Thread(tid), lane);
        let names = &mut self.seq.names;
        let name = intern(&mut names.functions, r.function, &mut names.iids, || {
            trace.function_name(r.function).into_owned()
        });
        let mut args = std::mem::take(&mut self.args);
        layout::api_args(r, &mut args);
        let result = self.begin(track, r.start_ns, name, &args, &[], flows, None);
        self.args = args;
        result
    }

    fn gpu(
        &mut self,
        trace: &Trace,
        lane: u32,
        g: Gpu,
        _end: u64,
        flow: Option<Flow>,
    ) -> io::Result<()> {
        let (device, context, stream) = g.place();
        let track = self.track(Track::Stream(device, context, stream), lane);
        let names = &mut self.seq.names;
        let iid = match g {
            Gpu::Kernel(k) => {
                let demangled = &mut names.demangled;
                intern(&mut names.kernels, k.name, &mut names.iids, || {
                    demangled.get(trace, k.name).to_string()
                })
            }
            _ => {
                let key = layout::copy_or_set_key(g).unwrap_or_default();
                match names.copies.get(&key) {
                    Some(&iid) => (iid, None),
                    None => {
                        let name = layout::copy_or_set_name(g).unwrap_or_default();
                        let (iid, new) = intern_name(&mut names.iids, name);
                        names.copies.insert(key, iid);
                        (iid, new)
                    }
                }
            }
        };
        let mut args = std::mem::take(&mut self.args);
        layout::gpu_args(g, &mut args);
        let metrics = std::mem::take(&mut self.seq.metrics);
        let result = self.begin(
            track,
            g.span().0,
            iid,
            &args,
            metrics.of_record(g),
            0..0,
            flow,
        );
        self.seq.metrics = metrics;
        self.args = args;
        result
    }

    fn nvtx(&mut self, track: usize, lane: u32, name: &str, start: u64) -> io::Result<()> {
        let uuid = self.track(Track::Nvtx(track), lane);
        let iid = intern_name(&mut self.seq.names.iids, name.to_string());
        self.begin(uuid, start, iid, &[], &[], 0..0, None)
    }

    fn end(&mut self, track: Track, lane: u32, end: u64) -> io::Result<()> {
        let uuid = self.track(track, lane);
        self.slice_end(uuid, end)
    }

    fn counter(&mut self, counter: CounterKey, ts: u64, value: i64) -> io::Result<()> {
        let uuid = self.seq.counters.get(&counter).copied().unwrap_or(0);
        self.counter_value(uuid, ts, |p| p.int64(field::COUNTER_VALUE, value))
    }

    /// A counter track (`gpu_metric::track`) under the device's track (the process's when the
    /// device ran no recorded work); one double counter value per point.
    fn gpu_metric(&mut self, device: u32, metric: &str, points: &[(u64, f64)]) -> io::Result<()> {
        let seq = self.seq.seq;
        let uuid = self.uuid();
        let parent = self.seq.devices.get(&device).copied();
        let parent = parent.unwrap_or(self.seq.process);
        self.descriptor(seq, |p| {
            counter::gpu_metric_track(p, uuid, parent, device, metric)
        });
        for &(ts, v) in points {
            self.counter_value(uuid, ts, |p| {
                p.fixed64(field::DOUBLE_COUNTER_VALUE, v.to_bits())
            })?;
        }
        Ok(())
    }

    fn end_trace(&mut self, _trace: &Trace) -> io::Result<()> {
        self.flush_if_full()
    }
}

impl<W: Write> PerfettoWriter<W> {
    /// A counter event on track `uuid` at `ts`, its value written by `value`.
    fn counter_value(
        &mut self,
        uuid: u64,
        ts: u64,
        value: impl FnOnce(&mut Proto),
    ) -> io::Result<()> {
        counter::value_packet(&mut self.p, self.seq.seq, uuid, ts, value);
        self.stats.packets += 1;
        self.stats.counter_values += 1;
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

    /// A slice's begin event. `name` is the name's iid and, when it was
    /// interned just now, the name. `flows` start here; `flow` ends here
    /// (or passes through, when the work started before the call).
    #[allow(clippy::too_many_arguments)]
    fn begin(
        &mut self,
        track: u64,
        ts: u64,
        name: (u64, Option<String>),
        args: &[layout::Arg],
        metrics: &[(String, f64)],
        flows: std::ops::Range<u64>,
        flow: Option<Flow>,
    ) -> io::Result<()> {
        let (iid, new_name) = name;
        let seq = self.seq.seq;
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
                _ => {
                    if let Some(s) = self.arg_text.of(value) {
                        self.p.string(field::STRING_VALUE, s);
                    }
                }
            }
            self.p.end(a);
        }
        for (name, value) in metrics {
            let a = self.p.begin(field::DEBUG_ANNOTATIONS);
            self.p.string(field::ANNOTATION_NAME, name);
            self.p.fixed64(field::DOUBLE_VALUE, value.to_bits());
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

    fn slice_end(&mut self, track: u64, ts: u64) -> io::Result<()> {
        let seq = self.seq.seq;
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
    by_id: &mut FastMap<u32, u64>,
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
