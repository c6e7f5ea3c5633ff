//! The passes that feed a [`Projector`] a trace's records in time order: streamed from its
//! file (a first read that notes the links and indexes the chunks, then a merge of the chunks
//! by time: [`project`], [`nvtx_pass`]) or from a trace held in memory
//! ([`project_in_memory`], [`nvtx_in_memory`]).

use super::projector::Projector;
use super::stats::Mode;
use super::stats::Projected;
use crate::filter::RecordFilter;
use crate::model::Trace;
use crate::read::first::FirstRead;
use crate::read::index::{ChunkRef, FileSource};
use crate::read::inputs::StreamError;
use crate::read::links::LinkTable;
use crate::read::merge::{merge, read_error, Failure, Source};
use crate::read::records::{self, Kind, Rec};
use crate::read::trace::read_light;
use std::path::Path;

/// Hands `rec` to `p`, with what `links` knows of its correlation id.
pub(crate) fn project_rec(p: &mut Projector, links: &LinkTable, rec: &Rec) {
    match rec {
        Rec::Nvtx { tid, e, .. } => p.nvtx(*tid, e),
        Rec::Memory { .. } => {}
        Rec::Api { tid, index, r } => {
            let (calls, n) = links.counts(r.correlation);
            p.api(
                *tid,
                (*index, r.start_ns, r.function),
                r.correlation,
                (calls, n),
            );
        }
        _ => {
            if let Some(g) = rec.gpu() {
                if let Some(c) = g.correlation() {
                    let (device, _, _) = g.place();
                    let (start, end) = g.span();
                    p.gpu(c, links.counts(c).0 > 0, rec.place(), (device, start, end));
                }
            }
        }
    }
}

/// The NVTX summaries and external-id rows of `trace`, read from `path` without its API and
/// GPU records or NVTX events (as `trace` is held): a first read notes the links and indexes
/// the chunks, a second merges them by time into a [`Projector`]. Also gives the
/// trace's NVTX chunks, for [`nvtx_pass`]. `mode` is [`Mode::Summary`], or
/// [`Mode::Collect`] for the ranges themselves too.
pub fn project(
    path: &Path,
    trace: &Trace,
    keep: &RecordFilter,
    mode: Mode,
) -> Result<(Projected, Vec<ChunkRef>), StreamError> {
    let mut first = FirstRead::new(keep);
    read_light(path, &mut first)?;
    let window = Some(keep.window_range());
    let mut p = Projector::new(trace, window, mode);
    let links = first.links;
    let nvtx: Vec<ChunkRef> = first
        .index
        .iter()
        .filter(|c| c.kind == Kind::Nvtx)
        .copied()
        .collect();
    let mut src = FileSource::open(path, first.index, keep)?;
    merge(&mut src, |rec| {
        project_rec(&mut p, &links, rec);
        Ok(())
    })
    .map_err(|e| read_error(path, e))?;
    Ok((p.finish(trace), nvtx))
}

/// A selection pass over the NVTX ranges of `trace` ([`super::NvtxStats`]): reads its
/// NVTX chunks `chunks` again, giving each range's (domain id, message id) and duration to
/// `f`.
pub fn nvtx_pass(
    path: &Path,
    trace: &Trace,
    keep: &RecordFilter,
    chunks: &[ChunkRef],
    f: impl FnMut((u32, u32), u64),
) -> Result<(), StreamError> {
    let window = Some(keep.window_range());
    let mut src = FileSource::open(path, chunks.to_vec(), keep)?;
    durations(trace, window, &mut src, f).map_err(|e| read_error(path, e))
}

/// Builds the ranges of `trace` from the NVTX events of `src`, giving `f` each one's
/// (domain id, message id) and duration as it ends.
fn durations(
    trace: &Trace,
    window: Option<(u64, u64)>,
    src: &mut dyn Source<Rec>,
    mut f: impl FnMut((u32, u32), u64),
) -> Result<(), Failure> {
    let mut p = Projector::new(trace, window, Mode::Durations);
    merge(src, |rec| {
        if let Rec::Nvtx { tid, e, .. } = &rec {
            p.nvtx(*tid, e);
            p.durations.drain(..).for_each(|(k, v)| f(k, v));
        }
        Ok(())
    })
}

/// Feeds `p` the records and NVTX events of `trace`, held in memory, in time order.
pub fn project_in_memory(p: &mut Projector, trace: &Trace) {
    let links = LinkTable::of(trace, &mut 0);
    let mut src = records::in_memory(trace);
    let _ = merge(&mut src, |rec| {
        project_rec(p, &links, rec);
        Ok(())
    });
}

/// A selection pass over the NVTX ranges of `trace`, held in memory ([`nvtx_pass`]).
pub fn nvtx_in_memory(trace: &Trace, f: impl FnMut((u32, u32), u64)) {
    // An in-memory source neither fails nor writes.
    let _ = durations(trace, None, &mut records::nvtx_in_memory(trace), f);
}
