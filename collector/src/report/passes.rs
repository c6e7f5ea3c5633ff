//! The passes over a streamed trace's indexed chunks after its first read: the calls behind
//! its streams and modules ([`linked_calls`]), the selection passes of exact medians
//! ([`select_streamed`]), and the GPU pass ([`gpu_pass`]: utilisation, launch latency, and
//! the synchronizations linked to calls, joined by correlation id in windows of ids: `join`,
//! `windows`).

use super::fold::{self, Merged};
use super::input::{gpu_records, lookups, Input};
use super::join;
use super::launches::Launches;
use super::windows::{api_chunks, for_each_window, keyed};
use crate::gpu_summary::exec::{launch_parts, KernExecFold, LaunchParts};
use crate::gpu_summary::fast_hash::FastSet;
use crate::gpu_summary::{latency, linked, union, SyncFold, Utilisation};
use crate::model::Trace;
use crate::read::index::{decode, ChunkRef, Rereader};
use crate::read::inputs::StreamError;
use crate::read::records::{Kind, Records};
use std::sync::mpsc::sync_channel;

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
    pub(super) nccl: &'a FastSet<u32>,
    pub(super) collectives: &'a mut Vec<(u64, u64)>,
    /// The kernel launches matched, for the selection passes of their medians.
    pub(super) launches: &'a mut Launches<'l>,
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
    let mut collectives = Vec::new();
    let nccl = join.nccl;
    let mut file = Rereader::open(&input.path)?;
    // The id ranges joined, ascending.
    let mut joined: Vec<(u64, u64)> = Vec::new();
    // On the reader's thread: utilisation, fed each chunk's records once (a chunk reaching
    // several windows is read for each), and the records each window looks up.
    let mut prepare = |gi: usize, records: Records| {
        let first_visit = !devices.was_fed(gi);
        let mut cursor = keys.cursor();
        let found = lookups(
            input,
            &gpu[gi],
            records,
            &mut cursor,
            &mut |work, dev, stream, start, end| {
                if first_visit {
                    feed(
                        &mut devices,
                        (nccl, &mut collectives),
                        work,
                        (dev, stream),
                        (start, end),
                    );
                }
            },
        );
        if first_visit {
            devices.fed(gi);
        }
        found
    };
    // The kernel launches matched, folded on a thread of their own a chunk at a time.
    let (launched, launches) = sync_channel::<Vec<(u32, u32, LaunchParts)>>(4);
    let (trace, ti) = (join.trace, join.ti);
    let (top, syncs) = (&mut *join.top, &mut *join.syncs);
    let (kern_exec, kept) = (&mut *join.kern_exec, &mut *join.launches);
    std::thread::scope(|s| {
        s.spawn(move || {
            for (name, function, parts) in launches.into_iter().flatten() {
                let row = kern_exec.add(trace, ti, name, function, parts);
                kept.add(row, parts);
            }
        });
        let joined_all = for_each_window(
            input,
            &chunks,
            &gpu,
            id_range,
            &mut file,
            &mut prepare,
            &mut |table, lo, hi, ahead, file| {
                while let Some(read) = ahead.next_chunk() {
                    let (_, found) = read?;
                    let mut matched = Vec::new();
                    for l in found {
                        let Some(s) = table.get(l.key) else {
                            continue;
                        };
                        top.matched(ti, l.work, l.index, l.id, l.start, s.start, s.function);
                        if let latency::Work::Kernel(name) = l.work {
                            let parts = launch_parts(s.start, s.end, l.start, l.end);
                            matched.push((name, s.function, parts));
                        }
                    }
                    // The folding thread is gone only by a panic, which the scope passes on.
                    let _ = launched.send(matched);
                }
                let mut cursor = keys.cursor();
                for c in sync.iter().filter(|c| c.reaches(lo, hi)) {
                    sync_records(file, input, c, trace, syncs, |id| {
                        let key = cursor.key(id)?;
                        table.holds(key).then(|| table.get(key))
                    })?;
                }
                joined.push((lo, hi));
                Ok(())
            },
        );
        // Ends the folding thread's input, whatever the join gave.
        drop(launched);
        joined_all
    })?;
    join.collectives.append(&mut collectives);
    // Synchronizations whose ids no range joined: linked to no call the trace holds.
    let mut cursor = keys.cursor();
    for c in sync.iter().filter(|c| !covers(&joined, c.min_id, c.max_id)) {
        sync_records(
            &mut file,
            input,
            c,
            join.trace,
            join.syncs,
            |id| match cursor.key(id) {
                Some(key) => (!covers(&joined, key, key)).then_some(None),
                None => Some(None),
            },
        )?;
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
                let collectives = (join.nccl, &mut *join.collectives);
                feed(&mut devices, collectives, work, (dev, stream), (start, end));
            },
        );
        devices.fed(gi);
    }
    Ok(devices.rows(join.trace.header.pid))
}

/// Feeds one GPU record to the utilisation unions, and a collective (NCCL) kernel's interval
/// to the trace's collectives: `(its kernel name ids, where their intervals go)`.
fn feed(
    devices: &mut union::Devices,
    (nccl, collectives): (&FastSet<u32>, &mut Vec<(u64, u64)>),
    work: latency::Work,
    (device, stream): (u32, u32),
    (start, end): (u64, u64),
) {
    devices.add(device, stream, start, end);
    if let latency::Work::Kernel(name) = work {
        if nccl.contains(&name) {
            collectives.push((start, end));
        }
    }
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
        &kernels,
        id_range,
        &mut file,
        &mut |ki, records| {
            let mut cursor = keys.cursor();
            lookups(
                input,
                &kernels[ki],
                records,
                &mut cursor,
                &mut |_, _, _, _, _| {},
            )
        },
        &mut |table, _, _, ahead, _| {
            while let Some(read) = ahead.next_chunk() {
                let (_, found) = read?;
                for l in found {
                    if let (latency::Work::Kernel(name), Some(s)) = (l.work, table.get(l.key)) {
                        fold.select(
                            ti,
                            name,
                            s.function,
                            launch_parts(s.start, s.end, l.start, l.end),
                        );
                    }
                }
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
    trace: &Trace,
    syncs: &mut SyncFold,
    mut slot: impl FnMut(u64) -> Option<Option<join::Slot>>,
) -> Result<(), StreamError> {
    let chunk = file.chunk_of(c)?;
    if let Records::Syncs(v) = decode(c, &chunk, &input.path)? {
        for y in v.into_iter().filter_map(|y| input.keep.sync(y)) {
            if !linked(y.flags) {
                continue;
            }
            if let Some(s) = slot(y.correlation) {
                let function = s.and_then(|s| trace.functions.get(&s.function));
                let kind = crate::gpu_summary::sync_kind(y.kind, function.map(String::as_str));
                syncs.add(kind, &y);
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
