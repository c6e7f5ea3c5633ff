//! What an export writes through ([`Emitter`], implemented by both formats' writers), on
//! which tracks and lanes ([`Track`], [`On`]), and what it counts as it writes ([`Stats`]).

use super::layout::{Device, Flow, Gpu};
use crate::model::Trace;
use crate::read::first::CounterKey;
use rtrace_format::ApiRecord;
use std::io;

/// What an export wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Bytes of output.
    pub bytes: u64,
    /// Traces (processes) written.
    pub traces: u64,
    /// Slices: API calls, kernels, copies, memsets.
    pub slices: u64,
    /// Flows from API calls to GPU work.
    pub flows: u64,
    /// Counter values (memory in use).
    pub counter_values: u64,
    /// Slices whose end was clipped because too many overlapped on one track
    /// (more than [`super::MAX_LANES`]).
    pub clipped: u64,
    /// NVTX ranges (or their GPU spans) not drawn because more than [`super::MAX_LANES`] overlapped
    /// on one track.
    pub nvtx_unplaced: u64,
    /// The most NVTX ranges and GPU spans held at once to lay them out (open ranges, and
    /// spans waiting until no earlier one can come), in any one trace.
    pub nvtx_held: u64,
    /// Perfetto: packets written.
    pub packets: u64,
    /// Perfetto: track descriptors; Chrome: synthetic threads (GPU streams
    /// and extra lanes).
    pub tracks: u64,
    /// Chrome: events written.
    pub events: u64,
}

impl Stats {
    /// Adds what a merge counts itself (`merge::write`): clipped slices, NVTX ranges not
    /// placed and held, flows.
    pub fn add_merged(&mut self, other: &Stats) {
        self.clipped += other.clipped;
        self.nvtx_unplaced += other.nvtx_unplaced;
        self.nvtx_held = self.nvtx_held.max(other.nvtx_held);
        self.flows += other.flows;
    }
}

/// A track of the timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Track {
    /// A thread's API calls.
    Thread(u64),
    /// A (device, context, stream)'s GPU work.
    Stream(u32, u32, u32),
    /// The NVTX track of this index.
    Nvtx(usize),
}

impl Track {
    /// A word made of its fields, which tracks mostly differ in (for hashing).
    #[inline]
    pub fn word(self) -> u64 {
        match self {
            Track::Thread(tid) => tid,
            Track::Stream(d, c, s) => {
                (u64::from(d) << 48 ^ u64::from(c) << 24 ^ u64::from(s)).rotate_left(1) | 1
            }
            Track::Nvtx(i) => (i as u64).rotate_right(2),
        }
    }
}

/// Hashed as one word ([`Track::word`]; the merge looks a record's track up once per
/// record), not field by field.
impl std::hash::Hash for Track {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.word());
    }
}

/// A lane of a track, as a writer is told it: the track; its slot, a number the track keeps
/// in the trace being written (the merge numbers thread and stream tracks 0, 1, ... as it
/// first meets them; an NVTX track's is its index), so that a writer finds what it keeps of
/// a track in a list and not a map; and the lane (0: the track itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct On {
    pub track: Track,
    pub slot: u32,
    pub lane: u32,
}

impl On {
    /// `lane` of NVTX track `track`.
    pub fn nvtx(track: usize, lane: u32) -> On {
        On {
            track: Track::Nvtx(track),
            slot: track as u32,
            lane,
        }
    }
}

/// What a writer does with a trace's tracks, slices, flows and counters.
pub trait Emitter {
    fn stats(&mut self) -> &mut Stats;
    /// Starts a trace: its process and threads, and `devices` with their
    /// streams and counters.
    fn begin_trace(&mut self, trace: &Trace, devices: &[Device]) -> io::Result<()>;
    /// NVTX track `track` is named `name` (before its first slice).
    fn nvtx_track(&mut self, track: usize, name: &str) -> io::Result<()>;
    /// API call `r`, on lane `on` of its thread's track, ending at `end`;
    /// it starts the flows `flows`.
    fn api(
        &mut self,
        trace: &Trace,
        on: On,
        r: &ApiRecord,
        end: u64,
        flows: std::ops::Range<u64>,
    ) -> io::Result<()>;
    /// GPU record `g`, on lane `on` of its stream's track, ending at `end`.
    fn gpu(
        &mut self,
        trace: &Trace,
        on: On,
        g: Gpu,
        end: u64,
        flow: Option<Flow>,
    ) -> io::Result<()>;
    /// A slice of an NVTX track begins on lane `on` ([`On::nvtx`]; its end comes through
    /// [`Emitter::end`], or never for a range that never ended).
    fn nvtx(&mut self, on: On, name: &str, start: u64) -> io::Result<()>;
    /// A slice of lane `on` ends (the innermost open there).
    fn end(&mut self, on: On, end: u64) -> io::Result<()>;
    /// Memory counter `counter` holds `value` bytes from `ts` on.
    fn counter(&mut self, counter: CounterKey, ts: u64, value: i64) -> io::Result<()>;
    /// GPU metric `metric` of device `device` (its name in [`crate::gpu_metrics::timeline::shown_name`]
    /// form) over time: each sample's value from its start, the last one until its end. A
    /// writer without counter tracks of its own for them ignores them.
    fn gpu_metric(
        &mut self,
        _device: u32,
        _metric: &str,
        _points: &[(u64, f64)],
    ) -> io::Result<()> {
        Ok(())
    }
    /// Ends the trace (NVTX slices still open stay so).
    fn end_trace(&mut self, trace: &Trace) -> io::Result<()>;
}
