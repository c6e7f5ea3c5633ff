//! The `nvtx_ranges` and `external_ids` rows of a trace with NVTX events, as the report
//! projects its ranges onto their GPU work ([`crate::nvtx::Projector`], docs/nvtx.md): a first
//! read notes the links from calls to their GPU work and indexes the chunks, then the chunks
//! are merged in time order and each record handed to the projector; the ranges over are
//! written every [`EVERY`] records, so that only the ranges still open or waiting for their
//! calls' GPU work are held.

use super::columns::TableFile;
use crate::filter::RecordFilter;
use crate::model::Trace;
use crate::nvtx::{project_rec, Mode, NvtxRange, Projected, Projector};
use crate::read::first::FirstRead;
use crate::read::index::FileSource;
use crate::read::inputs::StreamError;
use crate::read::merge::{merge, Failure};
use crate::read::trace::read_light;
use std::io;
use std::path::Path;

/// Records merged between two takings of the ranges over.
pub const EVERY: u64 = 4096;

/// Writes the ranges of the trace at `file` (`trace`: its first read, names kept) to `ranges`
/// as they are over, then its external ids to `external`.
pub fn write(
    file: &Path,
    trace: &Trace,
    keep: &RecordFilter,
    ranges: &mut TableFile,
    external: &mut TableFile,
) -> Result<(), Failure> {
    let mut first = FirstRead::new(keep);
    read_light(file, &mut first).map_err(|e| Failure::Read(StreamError::Load(e)))?;
    let mut p = Projector::new(trace, Some(keep.window_range()), Mode::Collect);
    let links = first.links;
    let mut src = FileSource::open(file, first.index, keep).map_err(Failure::Read)?;
    let mut n = 0u64;
    merge(&mut src, |rec| {
        project_rec(&mut p, &links, rec);
        n += 1;
        if n.is_multiple_of(EVERY) {
            for (id, r) in p.take_ranges(trace) {
                range(ranges, id, &r)?;
            }
        }
        Ok(())
    })?;
    p.close();
    for (id, r) in p.take_ranges(trace) {
        range(ranges, id, &r)?;
    }
    external_ids(external, &p.finish(trace))?;
    Ok(())
}

fn range(out: &mut TableFile, id: u64, r: &NvtxRange) -> io::Result<()> {
    let span = |s: Option<(u32, u64, u64)>| {
        (
            s.map(|s| i64::from(s.0)),
            s.map(|s| s.1 as i64),
            s.map(|s| s.2 as i64),
        )
    };
    let (d, s, e) = span(r.gpu_span);
    let (pd, ps, pe) = span(r.process_gpu_span);
    out.u64(id)
        .u64(r.tid)
        .u64(r.end_tid)
        .str(Some(&r.domain))
        .str(Some(&r.name))
        .int(i64::from(r.category))
        .opt_int(r.level.map(|l| l as i64))
        .u64(r.start_ns)
        .u64(r.end_ns)
        .u64(r.end_ns.saturating_sub(r.start_ns))
        .u64(r.gpu_records)
        .u64(r.gpu_ns)
        .opt_int(d)
        .opt_int(s)
        .opt_int(e)
        .u64(r.own_gpu_records)
        .u64(r.own_gpu_ns)
        .u64(r.process_gpu_records)
        .u64(r.process_gpu_ns)
        .opt_int(pd)
        .opt_int(ps)
        .opt_int(pe)
        .end()
}

fn external_ids(out: &mut TableFile, p: &Projected) -> io::Result<()> {
    let mut rows: Vec<_> = p.external.iter().collect();
    rows.sort_by_key(|x| (x.kind, x.id));
    for x in rows {
        out.int(i64::from(x.kind))
            .u64(x.id)
            .u64(x.calls)
            .u64(x.gpu_records)
            .u64(x.gpu_ns)
            .u64(x.process_calls)
            .u64(x.process_gpu_records)
            .u64(x.process_gpu_ns)
            .end()?;
    }
    Ok(())
}
