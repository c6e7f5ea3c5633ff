//! The correlation-id join of a streamed trace, window by window ([`for_each_window`]): a
//! window's table filled from the API chunks that reach it (`join`) on one thread, the chunks
//! whose records look it up read, checked, decoded and prepared for their lookups on another
//! ([`Ahead`]), and the lookups made on the calling thread.

use super::input::Input;
use super::join;
use super::referenced::Keys;
use crate::read::index::{decode, ChunkRef, Rereader};
use crate::read::inputs::StreamError;
use crate::read::records::{Kind, Records};
use std::collections::HashMap;
use std::sync::mpsc::{channel, sync_channel, Receiver};

/// Decoded chunks the reader of [`Ahead`] may hold ready beyond the one being looked up (a
/// GPU chunk decoded is a few MiB at most).
const AHEAD: usize = 4;

/// The API chunks of a trace in file order, each with its rank ([`join::Slot::rank`]), and
/// the span of their keys: the join's keys of the ids they hold ([`keyed`]).
pub(super) struct ApiChunks {
    api: Vec<ChunkRef>,
    ranks: HashMap<u64, u32>,
    id_lo: u64,
    id_hi: u64,
}

pub(super) fn api_chunks(index: &[ChunkRef], keys: &Keys) -> ApiChunks {
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
pub(super) fn keyed(index: &[ChunkRef], keys: &Keys, kind: impl Fn(Kind) -> bool) -> Vec<ChunkRef> {
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

/// What the reader of [`Ahead`] hands on: a chunk's index and what was prepared of its
/// records, or the end of a window.
enum Read<T> {
    Chunk(usize, Result<T, StreamError>),
    End,
}

/// The chunks of a list (`ahead` of [`for_each_window`]) that reach the window being visited,
/// in the list's order, each read, checked, decoded and prepared on a thread of its own a few
/// chunks ahead of the lookups.
pub(super) struct Ahead<'r, T> {
    from: &'r Receiver<Read<T>>,
    /// This window's chunks are all given.
    ended: bool,
}

impl<T> Ahead<'_, T> {
    /// The next chunk of this window: its index in the list, and what was prepared of its
    /// records; `None` once the window's chunks are all given.
    pub(super) fn next_chunk(&mut self) -> Option<Result<(usize, T), StreamError>> {
        if self.ended {
            return None;
        }
        match self.from.recv() {
            Ok(Read::Chunk(i, records)) => Some(records.map(|r| (i, r))),
            Ok(Read::End) | Err(_) => {
                self.ended = true;
                None
            }
        }
    }
}

/// What [`for_each_window`] calls for each window: `(table, lo, hi, ahead, file)`.
pub(super) type Visit<'v, T> = dyn FnMut(&join::IdTable, u64, u64, &mut Ahead<T>, &mut Rereader) -> Result<(), StreamError>
    + 'v;

/// What the reader of [`for_each_window`] makes of each chunk of `ahead` it decodes, on its
/// own thread: `(index in the list, records)`, called in the order `visit` is given them.
pub(super) type Prepare<'p, T> = dyn FnMut(usize, Records) -> T + Send + 'p;

/// The correlation-id join, window by window: each window starts past the last one's end and
/// reaches as far as its limit of API records allows (`join`); once the API chunks that reach
/// it are in the table, `visit(table, lo, hi, ahead, file)` looks up the records with those
/// ids: those of the chunks of `ahead` that reach the window, which `ahead` gives in order,
/// each as `prepare` made it (what `visit` leaves of them is skipped), and any it reads from
/// `file`.
///
/// Three threads: while `visit` looks up the records of one window (on this thread), the next
/// window's table is filled on another from a file of its own (it starts past the end of the
/// one before, known once that one is filled), and the chunks of `ahead` are read, decoded
/// and prepared on a third, from a third file, once their window's bounds are known (dense
/// keys: as its filling starts; else once it is filled). The windows and what `visit` sees
/// are those of filling one table after the other and reading each chunk as it is looked up.
pub(super) fn for_each_window<T: Send>(
    input: &Input,
    chunks: &ApiChunks,
    ahead: &[ChunkRef],
    id_range: u64,
    file: &mut Rereader,
    prepare: &mut Prepare<T>,
    visit: &mut Visit<T>,
) -> Result<(), StreamError> {
    if chunks.id_lo > chunks.id_hi {
        return Ok(());
    }
    let most = usize::try_from(id_range).unwrap_or(usize::MAX);
    let (filled_tx, filled_rx) = sync_channel(1);
    let (empty_tx, empty_rx) = sync_channel::<join::IdTable>(2);
    let (bounds_tx, bounds_rx) = channel::<(u64, u64)>();
    let (read_tx, read_rx) = sync_channel::<Read<T>>(AHEAD);
    let mut fill_file = Rereader::open(&input.path)?;
    let mut ahead_file = Rereader::open(&input.path)?;
    std::thread::scope(|s| {
        s.spawn(move || {
            let dense = input.join_keys.dense();
            let mut next = Some(chunks.id_lo);
            let mut table = join::IdTable::new(most);
            while let Some(lo) = next.take() {
                table.window(lo, dense);
                // Dense keys: the window is its `most` keys from `lo` on, whatever its records.
                if dense {
                    let _ = bounds_tx.send((lo, table.hi()));
                }
                if let Err(e) = fill(input, chunks, &mut fill_file, &mut table, lo) {
                    let _ = filled_tx.send(Err(e));
                    return;
                }
                let hi = table.hi();
                if !dense {
                    let _ = bounds_tx.send((lo, hi));
                }
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
        s.spawn(move || {
            for (lo, hi) in bounds_rx {
                for (i, c) in ahead.iter().enumerate().filter(|(_, c)| c.reaches(lo, hi)) {
                    let records = ahead_file
                        .chunk_of(c)
                        .and_then(|chunk| decode(c, &chunk, &input.path))
                        .map(|records| prepare(i, records));
                    let failed = records.is_err();
                    if read_tx.send(Read::Chunk(i, records)).is_err() || failed {
                        return;
                    }
                }
                if read_tx.send(Read::End).is_err() {
                    return;
                }
            }
        });
        // The second table, for the first window the filler fills while this one visits.
        let _ = empty_tx.send(join::IdTable::new(most));
        let mut ahead = Ahead {
            from: &read_rx,
            ended: false,
        };
        let mut result = Ok(());
        for filled in filled_rx.iter() {
            match filled {
                Ok((table, lo, hi)) => {
                    ahead.ended = false;
                    if result.is_ok() {
                        result = visit(&table, lo, hi, &mut ahead, file);
                    }
                    if result.is_err() {
                        break;
                    }
                    // The window's chunks `visit` did not take.
                    while ahead.next_chunk().is_some() {}
                    let _ = empty_tx.send(table);
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        // Ends the filler and the reader if they still wait (their channels gone).
        drop(filled_rx);
        drop(read_rx);
        drop(empty_tx);
        result
    })
}

/// Fills `table`, its window from `lo` on begun, with the kept records of the API chunks that
/// reach it.
fn fill(
    input: &Input,
    chunks: &ApiChunks,
    file: &mut Rereader,
    table: &mut join::IdTable,
    lo: u64,
) -> Result<(), StreamError> {
    let mut keys = input.join_keys.cursor();
    for c in &chunks.api {
        if !c.reaches(lo, table.hi()) {
            continue;
        }
        let rank = chunks.ranks.get(&c.offset).copied().unwrap_or(0);
        let chunk = file.chunk_of(c)?;
        // Only the records some GPU or synchronization record looks up are decoded.
        let picked = chunk.pick_api_records(
            |id| keys.key(id),
            |key, r| {
                // A damaged record (ending before it starts) was counted on the first read.
                if r.end_ns < r.start_ns {
                    return;
                }
                if let Some(r) = input.keep.api(r) {
                    let slot = join::Slot {
                        start: r.start_ns,
                        end: r.end_ns,
                        function: r.function,
                        rank,
                    };
                    table.note(key, slot);
                }
            },
        );
        picked.map_err(|why| StreamError::Changed {
            path: input.path.to_path_buf(),
            why,
        })?;
    }
    Ok(())
}
