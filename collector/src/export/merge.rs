//! Writing one trace's records in time order through a writer ([`write`]): each record, as
//! the merge of its file's chunks ([`crate::read::merge`]) hands it on, goes to the lanes of
//! its track and gets its flows ([`LinkTable`]), as the writers ([`Emitter`]) show them;
//! memory counters are written once per distinct time; NVTX ranges are built as the records
//! come ([`crate::nvtx::Projector`]) and drawn on their tracks ([`NvtxTracks`]).

use super::layout::{self, Device, Lanes, Step};
use super::nvtx_tracks::NvtxTracks;
use super::Stats;
use crate::model::Trace;
use crate::read::first::{counter_change, CounterKey, Places};
use crate::read::links::{Flow, LinkTable};
use crate::read::merge::{merge, Failure, Source};
use crate::read::records::{Gpu, Rec};
use rtrace_format::ApiRecord;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;

// The unit tests reach the in-memory projection here, where it was.
#[cfg(test)]
pub(crate) use crate::nvtx::project_in_memory;

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
    src: &mut dyn Source<Rec>,
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
            crate::nvtx::project_rec(p, links, &rec);
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
