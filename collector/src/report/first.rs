//! The report's first read of a file ([`first_read`], its sink [`FirstPass`]): its kept records folded, their chunks
//! indexed, the synchronizations linked to no call folded, NVTX events noted (streamed later).
//! The API records may be kept, indexed and folded on a thread of their own
//! ([`FirstPass::api_to`], [`fold_api`]): their fold shares nothing with the GPU records' and
//! gets them in the same order.

use super::fold::TraceFold;
use super::passes::linked_calls;
use super::referenced::{self, Referenced};
use crate::filter::{Filter, RecordFilter};
use crate::gpu_summary::{linked, SyncFold};
use crate::model::Trace;
use crate::read::first::hold_names;
use crate::read::index::ChunkRef;
use crate::read::inputs::StreamError;
use crate::read::records::{Kind, Records};
use crate::read::trace::{kernel_names_kept, read_light, RecordSink};
use rtrace_format::{ApiRecord, Chunk, MemcpyRecord, FLAG_CORRELATED};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender};

/// A chunk's API records, and its index entry (no record noted in it yet).
pub(super) type ApiChunk = (ChunkRef, Vec<ApiRecord>);

/// The first pass's sink: folds the kept records, indexes their chunks, notes whether there
/// are NVTX ranges, marks or external ids (streamed later, not held).
pub(super) struct FirstPass<'a> {
    pub(super) keep: &'a RecordFilter<'a>,
    pub(super) fold: TraceFold,
    pub(super) index: Vec<ChunkRef>,
    pub(super) nvtx: bool,
    /// The synchronizations linked to no call (those linked to one wait for the join).
    pub(super) syncs: SyncFold,
    /// Where the API records go to be kept, indexed and folded ([`fold_api`]); `None`: here.
    pub(super) api_to: Option<SyncSender<ApiChunk>>,
    /// The correlation ids the kept GPU and synchronization records look up.
    pub(super) referenced: Referenced,
}

/// Folds the API records sent by a [`FirstPass`] (in the order sent) that `keep` keeps into a
/// fold of their own, until the sender is gone; with the index entries of their chunks, in the
/// order sent (one that kept no record has no earliest start).
pub(super) fn fold_api(
    chunks: Receiver<ApiChunk>,
    keep: &RecordFilter,
) -> (TraceFold, Vec<ChunkRef>) {
    let mut fold = TraceFold::default();
    let mut index = Vec::new();
    for (c, records) in chunks {
        index.push(api_chunk(&mut fold, keep, c, records));
    }
    (fold, index)
}

/// Folds the records of API chunk `c` that `keep` keeps into `fold`; its index entry, the
/// kept records noted in it.
fn api_chunk(
    fold: &mut TraceFold,
    keep: &RecordFilter,
    mut c: ChunkRef,
    records: Vec<ApiRecord>,
) -> ChunkRef {
    let thread = c.thread;
    let kept = records
        .into_iter()
        .filter_map(|r| keep.api(r))
        .inspect(|r| {
            c.id(r.correlation);
            c.min_start = c.min_start.min(r.start_ns);
        });
    fold.api_chunk(thread, kept);
    c
}

impl RecordSink for FirstPass<'_> {
    fn records(&mut self, trace: &mut Trace, chunk: &Chunk, records: Records) {
        match records {
            Records::Nvtx(v) => {
                self.nvtx |= hold_names(trace.thread_mut(chunk.header.thread), v);
            }
            Records::Api(v) => {
                // Its place in the index, which the folding thread's entry takes at the end
                // ([`api_entries`]); here, the entry itself.
                let c = ChunkRef::new(chunk, Kind::Api, 0);
                self.index.push(c);
                let (c, v) = match &self.api_to {
                    Some(to) => match to.send((c, v)) {
                        Ok(()) => return,
                        // The folding thread is gone (it cannot be, but for a panic, which
                        // ends the read): folded here.
                        Err(e) => {
                            self.api_to = None;
                            e.0
                        }
                    },
                    None => (c, v),
                };
                let c = api_chunk(&mut self.fold, self.keep, c, v);
                if let Some(last) = self.index.last_mut() {
                    *last = c;
                }
            }
            Records::Kernels(v) => {
                let mut c = ChunkRef::new(chunk, Kind::Kernels, self.fold.counts.kernels);
                for k in v.into_iter().filter_map(|k| self.keep.kernel(k)) {
                    if k.flags & FLAG_CORRELATED != 0 {
                        c.id(k.correlation);
                        self.referenced.note(k.correlation);
                    }
                    c.min_start = c.min_start.min(k.start_ns);
                    self.fold.kernel(&k);
                }
                if c.min_start != u64::MAX {
                    self.index.push(c);
                }
            }
            Records::Memcpys(v) => self.copies(chunk, Kind::Memcpys, v.into_iter()),
            Records::PeerCopies(v) => {
                self.copies(chunk, Kind::PeerCopies, v.into_iter().map(|p| p.copy))
            }
            Records::Memsets(v) => {
                let mut c = ChunkRef::new(chunk, Kind::Memsets, self.fold.counts.memsets);
                for s in v.into_iter().filter_map(|s| self.keep.memset(s)) {
                    if s.correlation != 0 {
                        c.id(s.correlation);
                        self.referenced.note(s.correlation);
                    }
                    c.min_start = c.min_start.min(s.start_ns);
                    self.fold.memset(&s);
                }
                if c.min_start != u64::MAX {
                    self.index.push(c);
                }
            }
            Records::Memory(v) => {
                let mut c = ChunkRef::new(chunk, Kind::Memory, self.fold.counts.memory);
                for m in v.into_iter().filter_map(|m| self.keep.memory(m)) {
                    c.min_start = c.min_start.min(m.timestamp_ns);
                    self.fold.counts.memory += 1;
                }
                if c.min_start != u64::MAX {
                    self.index.push(c);
                }
            }
            Records::Syncs(v) => {
                let mut c = ChunkRef::new(chunk, Kind::Syncs, self.fold.counts.syncs);
                for y in v.into_iter().filter_map(|y| self.keep.sync(y)) {
                    self.fold.counts.syncs += 1;
                    if linked(y.flags) {
                        c.id(y.correlation);
                        self.referenced.note(y.correlation);
                    } else {
                        self.syncs.add(y.kind.name(), &y);
                    }
                }
                if c.min_id <= c.max_id {
                    self.index.push(c);
                }
            }
        }
    }
}

impl FirstPass<'_> {
    fn copies(&mut self, chunk: &Chunk, kind: Kind, records: impl Iterator<Item = MemcpyRecord>) {
        let mut c = ChunkRef::new(chunk, kind, self.fold.counts.memcpys);
        for m in records.filter_map(|m| self.keep.memcpy(m)) {
            if u32::from(m.flags) & FLAG_CORRELATED != 0 {
                c.id(m.correlation);
                self.referenced.note(m.correlation);
            }
            c.min_start = c.min_start.min(m.start_ns);
            self.fold.memcpy(&m);
        }
        if c.min_start != u64::MAX {
            self.index.push(c);
        }
    }
}

/// What the first read of one file gives ([`first_read`]).
pub(super) struct FirstRead<'a> {
    /// The trace, without its API and GPU records but for those its streams and modules link
    /// to; shifted onto the reference clock, filtered.
    pub(super) t: Trace,
    pub(super) path: PathBuf,
    pub(super) keep: RecordFilter<'a>,
    pub(super) index: Vec<ChunkRef>,
    pub(super) fold: TraceFold,
    /// The synchronizations linked to no call.
    pub(super) syncs: SyncFold,
    /// Its NVTX ranges projected, and their chunks (for the selection passes); `None` without
    /// NVTX events.
    pub(super) nvtx: Option<(crate::nvtx::Projected, Vec<ChunkRef>)>,
    /// The correlation ids its kept GPU and synchronization records look up.
    pub(super) referenced: referenced::Referenced,
}

/// The first read of the file at `path` (shifted by `shift` onto the reference clock; `base`
/// the reference start the filter's times count from, `(from, to)` its window; `pages` the
/// most pages of the bitmap of the ids looked up, [`How::referenced_pages`]; `sampled`: a GPU
/// metrics sampler's trace is among the inputs, so the NVTX ranges are kept): its kept
/// records folded and their chunks indexed, its NVTX ranges projected, the API calls that
/// created its streams and loaded or unloaded its modules found. Reads only this file.
pub(super) fn first_read<'a>(
    path: &Path,
    shift: Option<crate::clocks::Shift>,
    filter: &'a Filter,
    base: u64,
    (from, to): (u64, u64),
    (pages, sampled): (usize, bool),
) -> Result<FirstRead<'a>, StreamError> {
    let names = match &filter.kernel {
        Some(re) => Some(kernel_names_kept(path, re)?),
        None => None,
    };
    let keep = RecordFilter::new(shift.as_ref().map_or(0, |s| s.ns), from, to, filter, names);
    // The API records folded on a thread of their own, a few chunks behind.
    let (api_to, api_chunks) = std::sync::mpsc::sync_channel(4);
    let mut first = FirstPass {
        keep: &keep,
        fold: TraceFold::default(),
        index: Vec::new(),
        nvtx: false,
        syncs: SyncFold::default(),
        api_to: Some(api_to),
        referenced: referenced::Referenced::at_most(pages),
    };
    let (t, api) = std::thread::scope(|s| {
        let keep = &keep;
        let api = s.spawn(move || fold_api(api_chunks, keep));
        let t = read_light(path, &mut first);
        // Ends the folding thread's input.
        first.api_to = None;
        (t, api.join())
    });
    let mut t = t?;
    let (mut fold, mut index, nvtx, syncs) = (first.fold, first.index, first.nvtx, first.syncs);
    let referenced = first.referenced;
    match api {
        Ok((api, entries)) => {
            fold.take_api(api);
            api_entries(&mut index, entries);
        }
        Err(panic) => std::panic::resume_unwind(panic),
    }
    if let Some(s) = shift {
        t.shift_times(s.ns);
        t.clock_shift = Some(s);
    }
    filter.apply(&mut t, base);
    let nvtx = if nvtx {
        // NVTX ranges are built and projected onto the GPU work of the calls inside them
        // as the events and records stream by again, in time order.
        // With kernel profiles, the ranges themselves too: those open around each
        // profiled launch.
        let mode = if t.kernel_profiles.is_empty() && t.gpu_metric_samples.is_empty() && !sampled {
            crate::nvtx::Mode::Summary
        } else {
            crate::nvtx::Mode::Collect
        };
        Some(crate::nvtx::project(path, &t, &keep, mode)?)
    } else {
        None
    };
    // The API calls that created streams, loaded or unloaded modules.
    linked_calls(&mut t, path, &keep, &index)?;
    Ok(FirstRead {
        t,
        path: path.to_path_buf(),
        keep,
        index,
        fold,
        syncs,
        nvtx,
        referenced,
    })
}

/// Puts the API chunks' index entries made by the folding thread (`entries`, in the order the
/// chunks were sent) in their places in `index`, which holds an entry for each API chunk in
/// file order (those sent, then any folded on the reading thread); drops those with no record
/// kept.
fn api_entries(index: &mut Vec<ChunkRef>, entries: Vec<ChunkRef>) {
    let mut entries = entries.into_iter();
    for c in index.iter_mut().filter(|c| c.kind == Kind::Api) {
        match entries.next() {
            Some(e) => *c = e,
            None => break,
        }
    }
    index.retain(|c| c.kind != Kind::Api || c.min_start != u64::MAX);
}
