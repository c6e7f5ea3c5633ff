//! The Perfetto trace format: a `Trace` protobuf message, written as a
//! stream of `TracePacket`s using the track-event model
//! (`protos/perfetto/trace/track_event/`).
//!
//! Each input trace's track descriptors are one packet sequence ([`tracks`]); each lane of
//! a track that holds events is a sequence of its own ([`lane`]), whose packets take their
//! track from the sequence's defaults and their timestamp as the time since the lane's last
//! event (an incremental clock of the sequence, which a clock snapshot ties to
//! `CLOCK_MONOTONIC`), and on which the names and string arguments its events use are
//! interned ([`names`]). The output's first packet makes `CLOCK_MONOTONIC` the trace's
//! clock, so timestamps are the trace file's own.

use super::emitter::{Emitter, On, Stats};
use super::layout::{self, Device, Flow, Gpu};
use crate::model::Trace;
use crate::read::first::CounterKey;
use rtrace_format::ApiRecord;
use std::io::{self, Write};

mod counter;
mod field;
mod lane;
mod names;
mod packets;
mod tracks;

use names::{Names, Strings};
use packets::{Annotations, Packets};
use tracks::Tracks;

/// Writes traces as one Perfetto trace, packet by packet.
pub struct PerfettoWriter<W: Write> {
    w: Packets<W>,
    next_flow: u64,
    /// The trace being written.
    t: Timeline,
}

/// The tracks, names and argument strings of the trace being written.
#[derive(Default)]
struct Timeline {
    tracks: Tracks,
    names: Names,
    strings: Strings,
    /// Profiled launches' metric values.
    metrics: layout::MetricArgs,
}

impl<W: Write> PerfettoWriter<W> {
    pub fn new(out: W) -> Self {
        PerfettoWriter {
            w: Packets::new(out),
            next_flow: 1,
            t: Timeline::default(),
        }
    }

    /// Where the next trace's flow ids start; the caller moves it past them.
    pub fn next_flow(&mut self) -> &mut u64 {
        &mut self.next_flow
    }

    /// Writes what is buffered and returns the output, with what was written.
    pub fn finish(self) -> io::Result<(W, Stats)> {
        self.w.finish()
    }
}

impl<W: Write> Emitter for PerfettoWriter<W> {
    fn stats(&mut self) -> &mut Stats {
        &mut self.w.stats
    }

    /// Starts `trace`: its tracks ([`Tracks::describe`]).
    fn begin_trace(&mut self, trace: &Trace, devices: &[Device]) -> io::Result<()> {
        self.w.stats.traces += 1;
        self.t = Timeline {
            tracks: Tracks::describe(trace, devices, &mut self.w),
            metrics: layout::MetricArgs::of(trace),
            ..Default::default()
        };
        self.w.flush_if_full()
    }

    /// NVTX ranges: a track per thread that began any (under the process), and per device
    /// the ranges' projections: each range's span over the GPU work it launched.
    fn nvtx_track(&mut self, track: usize, name: &str) -> io::Result<()> {
        self.t.tracks.nvtx(track, name, &mut self.w);
        self.w.flush_if_full()
    }

    fn api(
        &mut self,
        trace: &Trace,
        on: On,
        r: &ApiRecord,
        _end: u64,
        flows: std::ops::Range<u64>,
    ) -> io::Result<()> {
        let t = &mut self.t;
        let name = t.names.api(trace, r);
        let lane = t.tracks.lane(on, &mut self.w);
        let name = (&t.names.table, name);
        let args = |a: &mut Annotations| layout::api_args(r, a);
        let strings = &mut t.strings;
        self.w
            .begin(lane, r.start_ns, name, strings, args, &[], flows, None)
    }

    fn gpu(
        &mut self,
        trace: &Trace,
        on: On,
        g: Gpu,
        _end: u64,
        flow: Option<Flow>,
    ) -> io::Result<()> {
        let t = &mut self.t;
        let name = t.names.gpu(trace, g);
        let lane = t.tracks.lane(on, &mut self.w);
        let name = (&t.names.table, name);
        let metrics = t.metrics.of_record(g);
        let args = |a: &mut Annotations| layout::gpu_args(g, a);
        let strings = &mut t.strings;
        self.w
            .begin(lane, g.span().0, name, strings, args, metrics, 0..0, flow)
    }

    fn nvtx(&mut self, on: On, name: &str, start: u64) -> io::Result<()> {
        let t = &mut self.t;
        let name = t.names.table.number(name);
        let lane = t.tracks.lane(on, &mut self.w);
        let name = (&t.names.table, name);
        let strings = &mut t.strings;
        self.w
            .begin(lane, start, name, strings, |_| {}, &[], 0..0, None)
    }

    fn end(&mut self, on: On, end: u64) -> io::Result<()> {
        let lane = self.t.tracks.lane(on, &mut self.w);
        self.w.end(lane, end)
    }

    fn counter(&mut self, counter: CounterKey, ts: u64, value: i64) -> io::Result<()> {
        let lane = self.t.tracks.counter(counter);
        self.w
            .counter(lane, ts, |p| p.int64(field::COUNTER_VALUE, value))
    }

    /// A counter track ([`counter::gpu_metric_track`]) under the device's track (the
    /// process's when the device ran no recorded work), a lane of its own; one double counter
    /// value per point.
    fn gpu_metric(&mut self, device: u32, metric: &str, points: &[(u64, f64)]) -> io::Result<()> {
        let mut lane = self.t.tracks.gpu_metric(device, metric, &mut self.w);
        for &(ts, v) in points {
            self.w.counter(&mut lane, ts, |p| {
                p.fixed64(field::DOUBLE_COUNTER_VALUE, v.to_bits())
            })?;
        }
        Ok(())
    }

    fn end_trace(&mut self, _trace: &Trace) -> io::Result<()> {
        self.w.flush_if_full()
    }
}
