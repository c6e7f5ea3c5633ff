//! The passes over a streamed trace's indexed chunks after its first read: the calls behind
//! its streams and modules ([`linked_calls`]), the selection passes of exact medians
//! ([`select_streamed`]), and the GPU pass ([`gpu_pass`]: utilisation, launch latency, and
//! the synchronizations linked to calls, joined by correlation id in windows of ids: `join`).

use super::fold::{self, Merged};
use super::input::{gpu_records, Input};
use super::join;
use super::launches::Launches;
use super::referenced::Keys;
use crate::gpu_summary::exec::{launch_parts, KernExecFold};
use crate::gpu_summary::{latency, linked, union, SyncFold, Utilisation};
use crate::model::Trace;
use crate::read::index::{decode, ChunkRef, Rereader};
use crate::read::inputs::StreamError;
use crate::read::records::{Kind, Records};
use std::collections::HashMap;

/// Puts into `t` the kept API records whose correlation ids its linked streams and modules
/// name (what [`Trace::api_records_for`] is asked for about them).
pub(super) fn linked_calls(
    t: &mut Trace,
    path: &std::path::Path,
    keep: &crate::filter::RecordFilter,
    index: &[ChunkRef],
) -> Result<(), StreamError> {
    let wanted: std::collections::HashSet<u64> = t
        .streams
        .iter()
        .filter(|s| linked(s.flags))
        .map(|s| s.correlation)
        .chain(
            t.modules
                .iter()
                .chain(&t.module_unloads)
                .filter(|m| linked(m.flags))
                .map(|m| m.correlation),
        )
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let (lo, hi) = (
        wanted.iter().min().copied().unwrap_or(0),
        wanted.iter().max().copied().unwrap_or(0),
    );
    let mut file = Rereader::open(path)?;
    for c in index
        .iter()
        .filter(|c| c.kind == Kind::Api && c.reaches(lo, hi))
    {
        let chunk = file.chunk_of(c)?;
        if let Records::Api(records) = decode(c, &chunk, path)? {
            let found = records
                .into_iter()
                .filter_map(|r| keep.api(r))
                .filter(|r| wanted.contains(&r.correlation));
            if let Some(th) = t.threads.get_mut(&c.thread) {
                th.records.extend(found);
            }
        }
    }
    Ok(())
}

/// A selection pass over the streamed trace's records of the kinds `p` names.
pub(super) fn select_streamed(
    merged: &mut Merged,
    p: fold::Pending,
    input: &Input,
    index: &[ChunkRef],
) -> Result<(), StreamError> {
    let wanted = |k: Kind| match k {
        Kind::Api => p.api,
        Kind::Kernels => p.kernels,
        Kind::Memcpys | Kind::PeerCopies => p.memcpys,
        Kind::Memsets => p.memsets,
        Kind::Nvtx | Kind::Memory | Kind::Syncs => false,
    };
    let mut file = Rereader::open(&input.path)?;
    for c in index.iter().filter(|c| wanted(c.kind)) {
        let chunk = file.chunk_of(c)?;
        match decode(c, &chunk, &input.path)? {
            Records::Api(v) => {
                for r in v.into_iter().filter_map(|r| input.keep.api(r)) {
                    if let Some(&row) = input.keys.api.get(&r.function) {
                        merged.api_select(row, &r);
                    }
                }
            }
            Records::Kernels(v) => {
                for k in v.into_iter().filter_map(|k| input.keep.kernel(k)) {
                    if let Some(&row) = input.keys.kernels.get(&k.name) {
                        merged.kernel_select(row, &k);
                    }
                }
            }
            Records::Memcpys(v) => {
                for m in v.into_iter().filter_map(|m| input.keep.memcpy(m)) {
                    merged.memcpy_select(&m);
                }
            }
            Records::Memsets(v) => {
                for s in v.into_iter().filter_map(|s| input.keep.memset(s)) {
                    merged.memset_select(&s);
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// What the join of [`gpu_pass`] adds its matches to.
pub(super) struct Join<'a, 'l> {
    pub(super) top: &'a mut latency::Top,
    pub(super) syncs: &'a mut SyncFold,
    pub(super) kern_exec: &'a mut KernExecFold,
    /// The trace's index among the report's, and the trace (its function names).
    pub(super) ti: usize,
    pub(super) trace: &'a Trace,
    /// The trace's collective (NCCL) kernel name ids, and where their (start, end) go.
    pub(super) nccl: &'a crate::gpu_summary::dist::FastSet<u32>,
    pub(super) collectives: &'a mut Vec<(u64, u64)>,
    /// The kernel launches matched, for the selection passes of their medians.
    pub(super) launches: &'a mut Launches<'l>,
}

/// The API chunks of a trace in file order, each with its rank ([`join::Slot::rank`]), and
/// the span of their keys: the join's keys of the ids they hold ([`keyed`]).
struct ApiChunks {
    api: Vec<ChunkRef>,
    ranks: HashMap<u64, u32>,
    id_lo: u64,
    id_hi: u64,
}

fn api_chunks(index: &[ChunkRef], keys: &Keys) -> ApiChunks {
    let mut api = keyed(index, keys, |k| k == Kind::Api);
    // A repeated id: the last in thread, then file order, wins (as `api_records_for`).
    api.sort_by_key(|c| (c.thread, c.offset));
    let ranks: HashMap<u64, u32> = api
        .iter()
        .enumerate()
        .map(|(i, c)| (c.offset, u32::try_from(i).unwrap_or(u32::MAX - 1)))
        .collect();
    api.sort_by_key(|c| c.offset);
    ApiChunks {
        id_lo: api.iter().map(|c| c.min_id).min().unwrap_or(u64::MAX),
        id_hi: api.iter().map(|c| c.max_id).max().unwrap_or(0),
        api,
        ranks,
    }
}

/// The chunks of `index` of the kinds `kind` takes, their id ranges turned into the ranges of
/// the join's keys of the ids looked up among them (none: a range that reaches nothing).
fn keyed(index: &[ChunkRef], keys: &Keys, kind: impl Fn(Kind) -> bool) -> Vec<ChunkRef> {
    index
        .iter()
        .filter(|c| kind(c.kind))
        .map(|c| {
            let (min_id, max_id) = keys.range(c.min_id, c.max_id);
            ChunkRef {
                min_id,
                max_id,
                ..*c
            }
        })
        .collect()
}

/// What [`for_each_window`] calls for each window: `(table, lo, hi, file)`.
type Visit<'v> = dyn FnMut(&join::IdTable, u64, u64, &mut Rereader) -> Result<(), StreamError> + 'v;

/// The correlation-id join, window by window: each window starts past the last one's end and
/// reaches as far as its limit of API records allows (`join`); once the API chunks that reach
/// it are in the table, `visit(table, lo, hi, file)` looks up the records with those ids.
///
/// Two tables: while `visit` looks up the records of one window (on this thread), the next
/// window's table is filled on another thread from a file of its own (it starts past the end
/// of the one before, known once that one is filled). The windows and what `visit` sees are
/// those of filling one table after the other.
fn for_each_window(
    input: &Input,
    chunks: &ApiChunks,
    id_range: u64,
    file: &mut Rereader,
    visit: &mut Visit,
) -> Result<(), StreamError> {
    if chunks.id_lo > chunks.id_hi {
        return Ok(());
    }
    let most = usize::try_from(id_range).unwrap_or(usize::MAX);
    let (filled_tx, filled_rx) = std::sync::mpsc::sync_channel(1);
    let (empty_tx, empty_rx) = std::sync::mpsc::sync_channel::<join::IdTable>(2);
    let mut fill_file = Rereader::open(&input.path)?;
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut next = Some(chunks.id_lo);
            let mut table = join::IdTable::new(most);
            while let Some(lo) = next.take() {
                if let Err(e) = fill(input, chunks, &mut fill_file, &mut table, lo) {
                    let _ = filled_tx.send(Err(e));
                    return;
                }
                let hi = table.hi();
                if hi < chunks.id_hi {
                    next = Some(hi + 1);
                }
                if filled_tx.send(Ok((table, lo, hi))).is_err() {
                    return;
                }
                // The second table at first; then the one `visit` is done with.
                table = match empty_rx.try_recv() {
                    Ok(t) => t,
                    Err(std::sync::mpsc::TryRecvError::Empty) if next.is_some() => {
                        match empty_rx.recv() {
                            Ok(t) => t,
                            Err(_) => return,
                        }
                    }
                    Err(_) => return,
                };
            }
        });
        // The second table, for the first window the filler fills while this one visits.
        let _ = empty_tx.send(join::IdTable::new(most));
        let mut result = Ok(());
        for filled in filled_rx.iter() {
            match filled {
                Ok((table, lo, hi)) => {
                    if result.is_ok() {
                        result = visit(&table, lo, hi, file);
                    }
                    if result.is_err() {
                        break;
                    }
                    let _ = empty_tx.send(table);
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        // Ends the filler if it still waits (its channel gone).
        drop(filled_rx);
        drop(empty_tx);
        result
    })
}

/// Fills `table` with the window of ids from `lo` on: the kept records of the API chunks that
/// reach it.
fn fill(
    input: &Input,
    chunks: &ApiChunks,
    file: &mut Rereader,
    table: &mut join::IdTable,
    lo: u64,
) -> Result<(), StreamError> {
    table.window(lo, input.join_keys.dense());
    let mut keys = input.join_keys.cursor();
    for c in &chunks.api {
        if !c.reaches(lo, table.hi()) {
            continue;
        }
        let rank = chunks.ranks.get(&c.offset).copied().unwrap_or(0);
        let chunk = file.chunk_of(c)?;
        if let Records::Api(v) = decode(c, &chunk, &input.path)? {
            // Only the records some GPU or synchronization record looks up.
            for (key, r) in v
                .into_iter()
                .filter_map(|r| Some((keys.key(r.correlation)?, r)))
                .filter_map(|(key, r)| Some((key, input.keep.api(r)?)))
            {
                let slot = join::Slot {
                    start: r.start_ns,
                    end: r.end_ns,
                    function: r.function,
                    rank,
                };
                table.note(key, slot);
            }
        }
    }
    Ok(())
}

/// The GPU pass over a streamed trace: utilisation, launch latency, kernel launch and
/// execution times, and the synchronizations linked to calls (each one's kind depends on its
/// call).
pub(super) fn gpu_pass(
    join: &mut Join,
    input: &Input,
    index: &[ChunkRef],
    id_range: u64,
) -> Result<Vec<Utilisation>, StreamError> {
    let keys = &input.join_keys;
    let gpu = keyed(index, keys, Kind::gpu_work);
    let sync = keyed(index, keys, |k| k == Kind::Syncs);
    if gpu.is_empty() && sync.is_empty() {
        return Ok(Vec::new());
    }
    let chunks = api_chunks(index, keys);
    let mut devices = union::Devices::new(gpu.iter().map(|c| c.min_start));
    let mut file = Rereader::open(&input.path)?;
    // The id ranges joined, ascending.
    let mut joined: Vec<(u64, u64)> = Vec::new();
    for_each_window(
        input,
        &chunks,
        id_range,
        &mut file,
        &mut |table, lo, hi, file| {
            let mut cursor = keys.cursor();
            for (gi, c) in gpu.iter().enumerate() {
                if !c.reaches(lo, hi) {
                    continue;
                }
                let first_visit = !devices.was_fed(gi);
                let chunk = file.chunk_of(c)?;
                let records = decode(c, &chunk, &input.path)?;
                gpu_records(
                    input,
                    c,
                    records,
                    &mut |work, i, id, dev, stream, start, end| {
                        if first_visit {
                            devices.add(dev, stream, start, end);
                            if let latency::Work::Kernel(name) = work {
                                if join.nccl.contains(&name) {
                                    join.collectives.push((start, end));
                                }
                            }
                        }
                        let slot = |id| Some((id, table.get(cursor.key(id)?)?));
                        if let Some((id, s)) = id.and_then(slot) {
                            join.top
                                .matched(join.ti, work, i, id, start, s.start, s.function);
                            if let latency::Work::Kernel(name) = work {
                                let parts = launch_parts(s.start, s.end, start, end);
                                join.kern_exec
                                    .add(join.trace, join.ti, name, s.function, parts);
                                join.launches.add(name, s.function, parts);
                            }
                        }
                    },
                );
                if first_visit {
                    devices.fed(gi);
                }
            }
            for c in sync.iter().filter(|c| c.reaches(lo, hi)) {
                sync_records(file, input, c, join, |id| {
                    let key = cursor.key(id)?;
                    table.holds(key).then(|| table.get(key))
                })?;
            }
            joined.push((lo, hi));
            Ok(())
        },
    )?;
    // Synchronizations whose ids no range joined: linked to no call the trace holds.
    let mut cursor = keys.cursor();
    for c in sync.iter().filter(|c| !covers(&joined, c.min_id, c.max_id)) {
        sync_records(&mut file, input, c, join, |id| match cursor.key(id) {
            Some(key) => (!covers(&joined, key, key)).then_some(None),
            None => Some(None),
        })?;
    }
    // Chunks no id range reached: utilisation only.
    for (gi, c) in gpu.iter().enumerate() {
        if devices.was_fed(gi) {
            continue;
        }
        let chunk = file.chunk_of(c)?;
        let records = decode(c, &chunk, &input.path)?;
        gpu_records(
            input,
            c,
            records,
            &mut |work, _, _, dev, stream, start, end| {
                devices.add(dev, stream, start, end);
                if let latency::Work::Kernel(name) = work {
                    if join.nccl.contains(&name) {
                        join.collectives.push((start, end));
                    }
                }
            },
        );
        devices.fed(gi);
    }
    Ok(devices.rows(join.trace.header.pid))
}

/// A selection pass of the kernel launch and execution times of trace `ti`: the join again,
/// over its API and kernel chunks only.
pub(super) fn kern_exec_pass(
    fold: &mut KernExecFold,
    ti: usize,
    input: &Input,
    index: &[ChunkRef],
    id_range: u64,
) -> Result<(), StreamError> {
    let keys = &input.join_keys;
    let kernels = keyed(index, keys, |k| k == Kind::Kernels);
    if kernels.is_empty() {
        return Ok(());
    }
    let chunks = api_chunks(index, keys);
    let mut file = Rereader::open(&input.path)?;
    for_each_window(
        input,
        &chunks,
        id_range,
        &mut file,
        &mut |table, lo, hi, file| {
            let mut cursor = keys.cursor();
            for c in kernels.iter().filter(|c| c.reaches(lo, hi)) {
                let chunk = file.chunk_of(c)?;
                let records = decode(c, &chunk, &input.path)?;
                gpu_records(input, c, records, &mut |work, _, id, _, _, start, end| {
                    if let (latency::Work::Kernel(name), Some(s)) =
                        (work, id.and_then(|id| table.get(cursor.key(id)?)))
                    {
                        fold.select(
                            ti,
                            name,
                            s.function,
                            launch_parts(s.start, s.end, start, end),
                        );
                    }
                });
            }
            Ok(())
        },
    )
}

/// Whether the ascending, disjoint id ranges `ranges` hold every id of `lo..=hi`.
fn covers(ranges: &[(u64, u64)], lo: u64, hi: u64) -> bool {
    let mut need = lo;
    for &(a, b) in ranges {
        if a <= need && need <= b {
            if b >= hi {
                return true;
            }
            need = b.saturating_add(1);
        }
    }
    false
}

/// Folds the linked synchronizations of sync chunk `c` whose call `slot(id)` says (`None`: not
/// this time; `Some(None)`: linked to no call the trace holds).
fn sync_records(
    file: &mut Rereader,
    input: &Input,
    c: &ChunkRef,
    join: &mut Join,
    mut slot: impl FnMut(u64) -> Option<Option<join::Slot>>,
) -> Result<(), StreamError> {
    let chunk = file.chunk_of(c)?;
    if let Records::Syncs(v) = decode(c, &chunk, &input.path)? {
        for y in v.into_iter().filter_map(|y| input.keep.sync(y)) {
            if !linked(y.flags) {
                continue;
            }
            if let Some(s) = slot(y.correlation) {
                let function = s.and_then(|s| join.trace.functions.get(&s.function));
                let kind = crate::gpu_summary::sync_kind(y.kind, function.map(String::as_str));
                join.syncs.add(kind, &y);
            }
        }
    }
    Ok(())
}

/// What `t`'s profiled launches link to: their kept kernel records and launch calls, by
/// correlation id, and `nvtx`, the trace's NVTX ranges.
pub(super) fn profiled_links(
    t: &Trace,
    input: &Input,
    index: &[ChunkRef],
    nvtx: Vec<crate::nvtx::NvtxRange>,
) -> Result<crate::profiles::TraceLinks, StreamError> {
    let wanted = crate::profiles::wanted(t);
    let mut found = crate::profiles::TraceLinks::default();
    let (Some(&lo), Some(&hi)) = (wanted.iter().min(), wanted.iter().max()) else {
        return Ok(found);
    };
    found.nvtx = nvtx;
    let mut file = Rereader::open(&input.path)?;
    for c in index
        .iter()
        .filter(|c| matches!(c.kind, Kind::Kernels | Kind::Api) && c.reaches(lo, hi))
    {
        let chunk = file.chunk_of(c)?;
        match decode(c, &chunk, &input.path)? {
            Records::Kernels(records) => found.kernels.extend(
                records
                    .into_iter()
                    .filter_map(|k| input.keep.kernel(k))
                    .filter(|k| {
                        k.flags & rtrace_format::FLAG_CORRELATED != 0
                            && wanted.contains(&k.correlation)
                    })
                    .map(|k| (k.correlation, k)),
            ),
            Records::Api(records) => found.calls.extend(
                records
                    .into_iter()
                    .filter_map(|r| input.keep.api(r))
                    .filter(|r| wanted.contains(&r.correlation))
                    .map(|r| (r.correlation, (c.thread, r.start_ns))),
            ),
            _ => {}
        }
    }
    Ok(found)
}

/// `t`'s GPU work for the GPU metrics part: every kept kernel, copy and memset (device and
/// interval), and `nvtx`, its NVTX ranges' GPU spans.
pub(super) fn gpu_metric_work(
    _t: &Trace,
    input: &Input,
    index: &[ChunkRef],
    nvtx: Vec<(String, u32, u64, u64)>,
) -> Result<crate::gpu_metrics::Work, StreamError> {
    let mut w = crate::gpu_metrics::Work {
        nvtx,
        ..Default::default()
    };
    let mut file = Rereader::open(&input.path)?;
    for c in index
        .iter()
        .filter(|c| matches!(c.kind, Kind::Kernels | Kind::Memcpys | Kind::Memsets))
    {
        let chunk = file.chunk_of(c)?;
        match decode(c, &chunk, &input.path)? {
            Records::Kernels(records) => w.kernels.extend(
                records
                    .into_iter()
                    .filter_map(|k| input.keep.kernel(k))
                    .map(|k| (k.device, k.name, k.start_ns, k.end_ns)),
            ),
            Records::Memcpys(records) => w.other.extend(
                records
                    .into_iter()
                    .filter_map(|m| input.keep.memcpy(m))
                    .map(|m| (m.device, m.start_ns, m.end_ns)),
            ),
            Records::Memsets(records) => w.other.extend(
                records
                    .into_iter()
                    .filter_map(|m| input.keep.memset(m))
                    .map(|m| (m.device, m.start_ns, m.end_ns)),
            ),
            _ => {}
        }
    }
    Ok(w)
}
