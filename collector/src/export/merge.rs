//! Writing one trace's records in time order through a writer ([`write`]): each record, as
//! the merge of its file's chunks ([`crate::read::merge`]) hands it on, goes to the lanes of
//! its track and gets its flows ([`LinkTable`]), as the writers ([`Emitter`]) show them;
//! memory counters are written once per distinct time; NVTX ranges are built as the records
//! come ([`crate::nvtx::Projector`]) and drawn on their tracks ([`NvtxTracks`]).

use super::emitter::{Emitter, On, Track};
use super::layout::{self, Lanes, Step};
use super::nvtx_tracks::NvtxTracks;
use crate::gpu_summary::fast_hash::FastMap;
use crate::model::Trace;
use crate::read::first::{counter_change, CounterKey, Places};
use crate::read::links::LinkTable;
use crate::read::merge::{merge, Failure, Source};
use crate::read::records::{Gpu, Rec};
use std::collections::BTreeMap;

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
    // Each thread's and stream's track: its slot, in order of first record; its lanes.
    let mut slots = Slots::default();
    let mut lanes: Vec<(Track, Lanes)> = Vec::new();
    let mut nvtx = NvtxTracks::default();
    // Counter → its value, and the point not yet written (time, value).
    let mut counters: BTreeMap<CounterKey, (i64, Option<(u64, i64)>)> = BTreeMap::new();
    merge(src, |rec| {
        if let Rec::Memory { m, .. } = rec {
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
            crate::nvtx::project_rec(p, links, rec);
            nvtx.take(trace, p, e, start)?;
        }
        let track = match rec {
            Rec::Nvtx { .. } => return Ok(()),
            Rec::Api { tid, .. } => Track::Thread(*tid),
            _ => {
                let (d, c, s) = rec.gpu().map_or((0, 0, 0), Gpu::place);
                Track::Stream(d, c, s)
            }
        };
        let slot = slots.of(track, || {
            lanes.push((track, Lanes::default()));
            lanes.len() as u32 - 1
        });
        let on = |lane| On { track, slot, lane };
        lanes[slot as usize]
            .1
            .place(0, start, end, |step| match step {
                Step::End { lane, end, .. } => e.end(on(lane), end),
                Step::Begin { lane, end, .. } => match rec {
                    Rec::Api { r, .. } => {
                        let flows = links.api_flows(r);
                        e.api(trace, on(lane), r, end, flows)
                    }
                    _ => match rec.gpu() {
                        Some(g) => {
                            let flow = links.gpu_flow(g);
                            e.gpu(trace, on(lane), g, end, flow)
                        }
                        None => Ok(()),
                    },
                },
            })
    })?;
    let mut open: Vec<(u32, (Track, Lanes))> = (0..).zip(lanes).collect();
    open.sort_by_key(|(_, (t, _))| *t);
    for (slot, (track, mut l)) in open {
        l.drain(|step| match step {
            Step::End { lane, end, .. } => e.end(On { track, slot, lane }, end),
            Step::Begin { .. } => Ok(()),
        })?;
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
    gpu_metrics(e, trace)?;
    e.end_trace(trace)?;
    Ok(())
}

/// The trace's GPU metric samples, evaluated ([`crate::gpu_metrics`]), as a counter per metric
/// and device; why they could not be evaluated goes to stderr.
fn gpu_metrics<E: Emitter>(e: &mut E, trace: &Trace) -> Result<(), Failure> {
    if trace.gpu_metric_samples.is_empty() {
        return Ok(());
    }
    let (timelines, errors) = crate::gpu_metrics::trace_timelines_with_cupti(trace);
    for why in errors {
        eprintln!(
            "rtrace: export: GPU metrics of process {}: {why}",
            trace.header.pid
        );
    }
    for (device, tl) in timelines {
        for (m, name) in tl.metrics.iter().enumerate() {
            let mut points: Vec<(u64, f64)> = tl
                .samples
                .iter()
                .filter(|s| s.values[m].is_finite())
                .map(|s| (s.start, s.values[m]))
                .collect();
            if let Some(last) = tl.samples.last().filter(|s| s.values[m].is_finite()) {
                points.push((last.end, last.values[m]));
            }
            e.gpu_metric(device, name, &points)?;
        }
    }
    Ok(())
}

/// The slots of thread and stream tracks ([`On::slot`]), numbered in order of first record:
/// looked up once per record, first in a small table of recent tracks indexed by their word
/// ([`Track::word`]), then in a map.
struct Slots {
    map: FastMap<Track, u32>,
    recent: [Option<(Track, u32)>; RECENT],
}

/// Entries of [`Slots::recent`] (a power of two).
const RECENT: usize = 64;

impl Default for Slots {
    fn default() -> Self {
        Slots {
            map: FastMap::default(),
            recent: [None; RECENT],
        }
    }
}

impl Slots {
    /// The slot of `track`; `new` makes it for a track not seen yet.
    #[inline]
    fn of(&mut self, track: Track, new: impl FnOnce() -> u32) -> u32 {
        let i = (track.word().wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize % RECENT;
        if let Some((t, slot)) = self.recent[i] {
            if t == track {
                return slot;
            }
        }
        let slot = *self.map.entry(track).or_insert_with(new);
        self.recent[i] = Some((track, slot));
        slot
    }
}
