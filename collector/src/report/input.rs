//! One input as the report reads it ([`Input`]: its file, what the filter keeps of its
//! records, its chunk index, its keys among the folds), and the GPU records of its indexed
//! chunks as the passes see them ([`gpu_records`]).

use super::fold::KeyMap;
use super::referenced::{KeyCursor, Keys};
use crate::filter::RecordFilter;
use crate::gpu_summary::latency;
use crate::read::index::ChunkRef;
use crate::read::records::Records;
use rtrace_format::FLAG_CORRELATED;
use std::path::PathBuf;

/// One input as the report reads it.
pub(super) struct Input<'a> {
    pub(super) path: PathBuf,
    pub(super) keep: RecordFilter<'a>,
    pub(super) index: Vec<ChunkRef>,
    pub(super) keys: KeyMap,
    /// The join's keys of the correlation ids its kept GPU and synchronization records look
    /// up.
    pub(super) join_keys: Keys,
}

/// A kept GPU record whose correlation id some API record may have: what its look-up needs.
#[derive(Clone, Copy, Debug)]
pub(super) struct Lookup {
    pub(super) work: latency::Work,
    /// Its index among its kind's records.
    pub(super) index: u64,
    pub(super) id: u64,
    /// The join's key of the id ([`Keys`]).
    pub(super) key: u64,
    pub(super) start: u64,
    pub(super) end: u64,
}

/// The kept records of indexed GPU chunk `c` that look up a call (correlated, their id's key
/// noted in `keys`), each kept record also given to `each(work, device, stream, start, end)`,
/// looked up or not.
pub(super) fn lookups(
    input: &Input,
    c: &ChunkRef,
    records: Records,
    keys: &mut KeyCursor,
    each: &mut dyn FnMut(latency::Work, u32, u32, u64, u64),
) -> Vec<Lookup> {
    let mut found = Vec::with_capacity(records.count());
    gpu_records(
        input,
        c,
        records,
        &mut |work, index, id, device, stream, start, end| {
            each(work, device, stream, start, end);
            if let Some((id, key)) = id.and_then(|id| Some((id, keys.key(id)?))) {
                found.push(Lookup {
                    work,
                    index,
                    id,
                    key,
                    start,
                    end,
                });
            }
        },
    );
    found
}

/// Calls `f(work, index, correlation id if correlated, device, stream, start, end)` for each
/// kept record of an indexed GPU chunk.
#[allow(clippy::type_complexity)]
pub(super) fn gpu_records(
    input: &Input,
    c: &ChunkRef,
    records: Records,
    f: &mut dyn FnMut(latency::Work, u64, Option<u64>, u32, u32, u64, u64),
) {
    use latency::Work;
    let mut i = c.first;
    match records {
        Records::Kernels(v) => {
            for k in v.into_iter().filter_map(|k| input.keep.kernel(k)) {
                let id = (k.flags & FLAG_CORRELATED != 0).then_some(k.correlation);
                f(
                    Work::Kernel(k.name),
                    i,
                    id,
                    k.device,
                    k.stream,
                    k.start_ns,
                    k.end_ns,
                );
                i += 1;
            }
        }
        Records::Memcpys(v) => {
            for m in v.into_iter().filter_map(|m| input.keep.memcpy(m)) {
                let id = (u32::from(m.flags) & FLAG_CORRELATED != 0).then_some(m.correlation);
                f(
                    Work::Memcpy(m.kind),
                    i,
                    id,
                    m.device,
                    m.stream,
                    m.start_ns,
                    m.end_ns,
                );
                i += 1;
            }
        }
        Records::Memsets(v) => {
            for s in v.into_iter().filter_map(|s| input.keep.memset(s)) {
                let id = (s.correlation != 0).then_some(s.correlation);
                f(
                    Work::Memset,
                    i,
                    id,
                    s.device,
                    s.stream,
                    s.start_ns,
                    s.end_ns,
                );
                i += 1;
            }
        }
        _ => {}
    }
}
