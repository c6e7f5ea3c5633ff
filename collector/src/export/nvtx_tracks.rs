//! NVTX tracks laid out as the stream comes, holding only what is open: a track per thread
//! that began ranges (`NVTX: NAME (TID)`), and per device the spans of the ranges' GPU work
//! in the process view, other threads' launches credited to them included (`NVTX projected:
//! GPU ...`; docs/nvtx.md).
//!
//! - A thread's range begins on its track when its push or start comes, before its end is
//!   known: a push goes on the lane of the range of its domain it was pushed inside, when
//!   that one is the lane's innermost (it ends first, as pops go); any other range on the
//!   first lane with nothing open. Every lane then nests as begin/end events require.
//! - A span of GPU work is drawn once no work still to come can start it earlier
//!   ([`crate::nvtx::Projector::floor`]), in order of start (then longest first, thread,
//!   name), on the first lane where it nests. A range not yet over, whose span can still end
//!   later, takes a lane with nothing open, and keeps it until it is over.
//! - A track grows at most [`MAX_LANES`] lanes; a range or span that finds none is not drawn
//!   ([`NvtxTracks::unplaced`]).
//! - A range that never ended stays open on its thread's track (Perfetto shows it as not
//!   ended); its span ends where its GPU work ended.

use super::emitter::{Emitter, On};
use super::layout::{device_name, MAX_LANES};
use crate::model::Trace;
use crate::nvtx::{LiveSpan, Projector, Shown};
use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::collections::{BinaryHeap, HashMap};
use std::io;
use std::rc::Rc;

/// Records handed to the projector between two layouts of the spans that can be drawn (more
/// while more ranges than that are held).
const SPAN_EVERY: u32 = 4096;

/// Spans that may wait for the end of a range not yet over before it is drawn without.
const HOLD: usize = 1 << 14;

/// A span waiting to be drawn: start, end (longest first; `u64::MAX` for a span not yet
/// over), thread, name, range id, device, end so far.
type Waiting = Reverse<(u64, Reverse<u64>, u64, Rc<str>, u64, u32, u64)>;

/// The NVTX tracks of one trace being written.
#[derive(Default)]
pub struct NvtxTracks {
    names: HashMap<u32, Rc<str>>,
    /// Track index of each thread's and device's track; the next index.
    threads: HashMap<u64, usize>,
    devices: HashMap<u32, usize>,
    tracks: usize,
    /// Per thread track, its lanes: each the ranges open on it, innermost last.
    lanes: HashMap<usize, Vec<Vec<u32>>>,
    /// Where each range drawn and not ended is: (track, lane).
    drawn: HashMap<u32, (usize, u32)>,
    /// Per device track, its lanes of spans.
    spans: HashMap<usize, SpanLanes>,
    /// Spans taken before their range was over, by (range id, device).
    live: HashMap<(u64, u32), Live>,
    waiting: BinaryHeap<Waiting>,
    since: u32,
    /// Ranges and spans not drawn for want of a lane.
    pub unplaced: u64,
    /// The most ranges and spans held at once (open, or waiting to be drawn).
    pub most: u64,
}

/// Where a span taken before its range was over is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Live {
    /// Waiting to be drawn, its end so far this.
    Waiting(u64),
    /// Drawn, its end still to come.
    Drawn,
    /// Not drawn for want of a lane.
    Unplaced,
    /// Its range was over while it waited: waits again, with its end.
    Over,
}

/// The lane of a device's span track: each the spans open on it, innermost last, as
/// (end, not yet over, range id).
#[derive(Default)]
struct SpanLanes {
    lanes: Vec<Vec<(u64, bool, u64)>>,
}

impl NvtxTracks {
    /// Takes what `p` has to show after a record that starts at `time`.
    pub fn take<E: Emitter>(
        &mut self,
        trace: &Trace,
        p: &mut Projector,
        e: &mut E,
        time: u64,
    ) -> io::Result<()> {
        for s in std::mem::take(&mut p.shown) {
            self.shown(trace, s, e)?;
        }
        self.since += 1;
        // A layout looks at every range held and every call waiting for its work: at most
        // once per as many records, so that it costs a step per record however many are open.
        if self.since >= SPAN_EVERY.max(u32::try_from(p.layout_cost()).unwrap_or(u32::MAX)) {
            self.since = 0;
            let floor = p.floor(time);
            p.gpu_spans(floor, |s| self.live_span(trace, s));
            let held = self.waiting.len() + self.drawn.len() + self.live.len();
            self.most = self.most.max(held as u64);
            self.draw_spans(trace, floor, true, e)?;
        }
        Ok(())
    }

    /// Ends the stream: the ranges over at its end, every span drawn and ended.
    pub fn finish<E: Emitter>(
        &mut self,
        trace: &Trace,
        p: &mut Projector,
        e: &mut E,
    ) -> io::Result<()> {
        p.close();
        for s in std::mem::take(&mut p.shown) {
            self.shown(trace, s, e)?;
        }
        // Ranges never ended: their spans end where their work did.
        let mut never = Vec::new();
        p.gpu_spans(u64::MAX, |s| never.push(s));
        for s in never {
            self.over_span(trace, s.tid, s.id, s.message, s.span);
        }
        self.draw_spans(trace, u64::MAX, false, e)?;
        let mut tracks: Vec<(usize, SpanLanes)> =
            std::mem::take(&mut self.spans).into_iter().collect();
        tracks.sort_by_key(|t| t.0);
        for (track, lanes) in tracks {
            for (li, lane) in lanes.lanes.into_iter().enumerate() {
                for (end, _, _) in lane.into_iter().rev() {
                    e.end(On::nvtx(track, li as u32), end)?;
                }
            }
        }
        Ok(())
    }

    /// Numbers and names a new track.
    fn new_track<E: Emitter>(&mut self, name: &str, e: &mut E) -> io::Result<usize> {
        let t = self.tracks;
        self.tracks += 1;
        e.nvtx_track(t, name)?;
        Ok(t)
    }

    fn name(&mut self, trace: &Trace, message: u32) -> Rc<str> {
        self.names
            .entry(message)
            .or_insert_with(|| crate::nvtx::range_name(trace, message).into())
            .clone()
    }

    fn shown<E: Emitter>(&mut self, trace: &Trace, s: Shown, e: &mut E) -> io::Result<()> {
        match s {
            Shown::Begin {
                slot,
                tid,
                message,
                start,
                parent,
            } => {
                let track = match self.threads.get(&tid) {
                    Some(&t) => t,
                    None => {
                        let name = match trace.threads.get(&tid).and_then(|t| t.name.as_ref()) {
                            Some(n) => format!("NVTX: {n} ({tid})"),
                            None => format!("NVTX: thread {tid}"),
                        };
                        let t = self.new_track(&name, e)?;
                        self.threads.insert(tid, t);
                        t
                    }
                };
                let lanes = self.lanes.entry(track).or_default();
                let inside = parent
                    .and_then(|p| self.drawn.get(&p).map(|&(_, lane)| (p, lane)))
                    .filter(|&(p, lane)| lanes[lane as usize].last() == Some(&p))
                    .map(|(_, lane)| lane as usize);
                let lane = match inside.or_else(|| lanes.iter().position(Vec::is_empty)) {
                    Some(l) => l,
                    None if lanes.len() < MAX_LANES => {
                        lanes.push(Vec::new());
                        lanes.len() - 1
                    }
                    None => {
                        self.unplaced += 1;
                        return Ok(());
                    }
                };
                lanes[lane].push(slot);
                self.drawn.insert(slot, (track, lane as u32));
                let name = self.name(trace, message);
                e.nvtx(On::nvtx(track, lane as u32), &name, start)
            }
            Shown::End { slot, end } => {
                let Some((track, lane)) = self.drawn.remove(&slot) else {
                    return Ok(());
                };
                let Some(open) = self
                    .lanes
                    .get_mut(&track)
                    .and_then(|l| l.get_mut(lane as usize))
                else {
                    return Ok(());
                };
                if open.last() == Some(&slot) {
                    open.pop();
                    e.end(On::nvtx(track, lane), end)
                } else {
                    // Not innermost (placement rules out): left open rather than end another.
                    open.retain(|&s| s != slot);
                    Ok(())
                }
            }
            Shown::Over {
                id,
                tid,
                message,
                spans,
            } => {
                for span in spans {
                    self.over_span(trace, tid, id, message, span);
                }
                Ok(())
            }
        }
    }

    /// A span of a range not yet over that can no longer start earlier: waits to be drawn,
    /// if not drawn yet; if drawn, its end so far is noted (what may nest inside it).
    fn live_span(&mut self, trace: &Trace, s: LiveSpan) {
        let end = s.span.2.max(s.span.1);
        match self.live.entry((s.id, s.span.0)) {
            Entry::Vacant(v) => {
                v.insert(Live::Waiting(end));
                self.wait(trace, s.tid, s.id, s.message, s.span, true);
            }
            Entry::Occupied(mut o) => match o.get_mut() {
                Live::Waiting(e) => *e = end,
                Live::Drawn => {
                    if let Some(entry) = self.span_entry(s.id, s.span.0) {
                        entry.0 = end;
                    }
                }
                Live::Unplaced | Live::Over => {}
            },
        }
    }

    /// The lane entry of the span on `device` of range `id`, drawn before it was over (at
    /// the bottom of its lane: such a span takes a lane with nothing open).
    fn span_entry(&mut self, id: u64, device: u32) -> Option<&mut (u64, bool, u64)> {
        let track = self.devices.get(&device)?;
        let lanes = self.spans.get_mut(track)?;
        lanes
            .lanes
            .iter_mut()
            .filter_map(|lane| lane.first_mut())
            .find(|x| x.1 && x.2 == id)
    }

    fn wait(
        &mut self,
        trace: &Trace,
        tid: u64,
        id: u64,
        message: u32,
        span: (u32, u64, u64),
        live: bool,
    ) {
        let (device, start, end) = span;
        let order = if live { u64::MAX } else { end.max(start) };
        let name = self.name(trace, message);
        self.waiting.push(Reverse((
            start,
            Reverse(order),
            tid,
            name,
            id,
            device,
            end.max(start),
        )));
    }

    /// Range `id` of `tid` is over: its span `span` (device, start, end) ends where drawn
    /// already, else waits to be drawn with its end.
    fn over_span(&mut self, trace: &Trace, tid: u64, id: u64, message: u32, span: (u32, u64, u64)) {
        let key = (id, span.0);
        match self.live.get(&key).copied() {
            Some(Live::Drawn) => {
                self.live.remove(&key);
                if let Some(entry) = self.span_entry(id, span.0) {
                    *entry = (span.2.max(span.1), false, id);
                }
            }
            Some(Live::Unplaced) => {
                self.live.remove(&key);
            }
            Some(Live::Waiting(_)) => {
                self.live.insert(key, Live::Over);
                self.wait(trace, tid, id, message, span, false);
            }
            Some(Live::Over) | None => self.wait(trace, tid, id, message, span, false),
        }
    }

    /// Draws the spans waiting that start before `floor`. With `hold`, a span whose range is
    /// not over yet waits for its end (and holds the later ones back) while fewer than
    /// [`HOLD`] spans wait: the lanes nest more tightly with ends known.
    fn draw_spans<E: Emitter>(
        &mut self,
        trace: &Trace,
        floor: u64,
        hold: bool,
        e: &mut E,
    ) -> io::Result<()> {
        while let Some(Reverse((start, Reverse(order), _, name, id, device, mut end))) =
            self.waiting.peek().cloned()
        {
            if start >= floor {
                break;
            }
            let live = order == u64::MAX;
            if live {
                match self.live.get(&(id, device)) {
                    Some(Live::Waiting(_)) if hold && self.waiting.len() <= HOLD => break,
                    Some(&Live::Waiting(so_far)) => end = so_far,
                    Some(Live::Over) => {
                        // Drawn from its entry with the end.
                        self.live.remove(&(id, device));
                        self.waiting.pop();
                        continue;
                    }
                    _ => {
                        self.waiting.pop();
                        continue;
                    }
                }
            }
            self.waiting.pop();
            let track = match self.devices.get(&device) {
                Some(&t) => t,
                None => {
                    let name = format!("NVTX projected: {}", device_name(trace, device));
                    let t = self.new_track(&name, e)?;
                    self.devices.insert(device, t);
                    t
                }
            };
            let lanes = self.spans.entry(track).or_default();
            let mut chosen = None;
            for (li, lane) in lanes.lanes.iter_mut().enumerate() {
                while let Some(&(end_at, false, _)) = lane.last() {
                    if end_at > start {
                        break;
                    }
                    lane.pop();
                    e.end(On::nvtx(track, li as u32), end_at)?;
                }
                let fits = match lane.last() {
                    None => true,
                    Some(&(top_end, _, _)) => !live && top_end >= end,
                };
                if fits {
                    chosen = Some(li);
                    break;
                }
            }
            let lane = match chosen {
                Some(l) => l,
                None if lanes.lanes.len() < MAX_LANES => {
                    lanes.lanes.push(Vec::new());
                    lanes.lanes.len() - 1
                }
                None => {
                    self.unplaced += 1;
                    if live {
                        self.live.insert((id, device), Live::Unplaced);
                    }
                    continue;
                }
            };
            if live {
                self.live.insert((id, device), Live::Drawn);
            }
            lanes.lanes[lane].push((end, live, id));
            e.nvtx(On::nvtx(track, lane as u32), &name, start)?;
        }
        Ok(())
    }
}
