//! A k-way merge in time order, knowing nothing of what it merges (in the spirit of samply's
//! `EventSorter`): items with a sort key ([`Sorted`]) come from a [`Source`] a batch at a
//! time, batches in order of their earliest time; before a batch is read, every item already
//! read that sorts before its time is handed on, least key first. Memory is bounded by the
//! batches that overlap in time, not by the number of items.

use super::inputs::StreamError;
use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::BinaryHeap;
use std::io;
use std::path::Path;

/// An item of the merge: its key orders the items; the key's time (its first part) is what
/// a source's batches are ordered by.
pub trait Sorted {
    type Key: Ord + Copy;
    fn key(&self) -> Self::Key;
    /// The time of `key`: no item with a key of an earlier time comes after a batch whose
    /// earliest time is later. Keys order items by time first.
    fn time(key: &Self::Key) -> u64;
    /// The time of the item's key, made without the rest of the key where that is cheaper.
    #[inline]
    fn time_of(&self) -> u64 {
        Self::time(&self.key())
    }
}

/// Sorts `items` by key: by time, the rest of the key looked at only where times tie. A
/// batch whose times strictly increase (most come so) is sorted already: so are its keys.
fn sort<T: Sorted>(items: &mut [T]) {
    if items.windows(2).all(|w| w[0].time_of() < w[1].time_of()) {
        return;
    }
    items.sort_unstable_by(|a, b| {
        a.time_of()
            .cmp(&b.time_of())
            .then_with(|| a.key().cmp(&b.key()))
    });
}

/// Where items come from, a batch at a time, batches in order of their earliest time.
pub trait Source<T> {
    /// The earliest time among the items still to read; `None` when all were read.
    fn next_start(&self) -> Option<u64>;
    /// Reads the next batch into `out`.
    fn read(&mut self, out: &mut Vec<T>) -> Result<(), StreamError>;
    /// True when every batch comes sorted by key already (the merge sorts them otherwise).
    fn sorted(&self) -> bool {
        false
    }
}

/// Why a merge stopped: a source could not be read, or what the items were handed to failed.
#[derive(Debug)]
pub enum Failure {
    Read(StreamError),
    Write(io::Error),
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure::Write(e)
    }
}

/// A failure to read as the stream error it is.
pub fn read_error(path: &Path, e: Failure) -> StreamError {
    match e {
        Failure::Read(e) => e,
        Failure::Write(e) => StreamError::Changed {
            path: path.to_path_buf(),
            why: e.to_string(),
        },
    }
}

/// Hands `src`'s items to `emit` in key order: each batch is sorted (batches come mostly
/// sorted already), and the batches read are merged through a heap of their first items not
/// yet handed on. Each item is handed on where it lies in its batch (not moved out).
pub fn merge<T: Sorted>(
    src: &mut dyn Source<T>,
    mut emit: impl FnMut(&T) -> io::Result<()>,
) -> Result<(), Failure> {
    // Batches being merged, each with the place of its first item not yet handed on; freed
    // slots.
    let mut runs: Vec<(Vec<T>, usize)> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut heap: BinaryHeap<Reverse<(T::Key, usize)>> = BinaryHeap::new();
    loop {
        let next = src.next_start();
        // The least item's run stays at the top of the heap with its next item's key (one
        // sift down), or leaves it when that was its last.
        while let Some(mut top) = heap.peek_mut() {
            let Reverse((key, run)) = *top;
            if next.is_some_and(|n| T::time(&key) >= n) {
                break;
            }
            let (items, at) = &mut runs[run];
            let this = *at;
            *at += 1;
            let last = match items.get(*at) {
                Some(r) => {
                    *top = Reverse((r.key(), run));
                    false
                }
                None => {
                    PeekMut::pop(top);
                    true
                }
            };
            emit(&runs[run].0[this])?;
            if last {
                runs[run] = (Vec::new(), 0);
                free.push(run);
            }
        }
        if next.is_none() {
            return Ok(());
        }
        let mut batch = Vec::new();
        src.read(&mut batch).map_err(Failure::Read)?;
        if batch.is_empty() {
            continue;
        }
        if !src.sorted() {
            sort(&mut batch);
        }
        let key = batch[0].key();
        let run = match free.pop() {
            Some(r) => {
                runs[r] = (batch, 0);
                r
            }
            None => {
                runs.push((batch, 0));
                runs.len() - 1
            }
        };
        heap.push(Reverse((key, run)));
    }
}

/// Batches read ahead by [`ahead`], with the earliest time of those after each.
type AheadBatch<T> = (Result<Vec<T>, StreamError>, Option<u64>);

/// Batches of a source read on a thread of their own, up to [`AHEAD`] ahead of the merge:
/// what [`ahead`] hands on.
pub struct Ahead<T> {
    next: Option<u64>,
    batches: std::sync::mpsc::Receiver<AheadBatch<T>>,
}

/// Batches read ahead of the merge by [`ahead`].
const AHEAD: usize = 2;

/// Runs `then` over `src`, whose batches are read (checked, decoded) and sorted on a thread
/// of their own, up to [`AHEAD`] ahead: the same batches in the same order, while `then`
/// merges and writes the ones before. The thread stops at the first failed read (handed on as the
/// batch it could not read) or when `then` returns.
pub fn ahead<T: Sorted + Send, S: Source<T> + Send, R>(
    src: &mut S,
    then: impl FnOnce(&mut Ahead<T>) -> R,
) -> R {
    let next = src.next_start();
    let (send, batches) = std::sync::mpsc::sync_channel::<AheadBatch<T>>(AHEAD);
    std::thread::scope(|s| {
        s.spawn(move || {
            while src.next_start().is_some() {
                let mut batch = Vec::new();
                let read = src.read(&mut batch).map(|()| {
                    sort(&mut batch);
                    batch
                });
                let failed = read.is_err();
                // The receiver is gone once `then` returned.
                if send.send((read, src.next_start())).is_err() || failed {
                    break;
                }
            }
        });
        let mut source = Ahead { next, batches };
        then(&mut source)
    })
}

impl<T> Source<T> for Ahead<T> {
    fn next_start(&self) -> Option<u64> {
        self.next
    }
    fn sorted(&self) -> bool {
        true
    }
    fn read(&mut self, out: &mut Vec<T>) -> Result<(), StreamError> {
        let Ok((batch, next)) = self.batches.recv() else {
            self.next = None;
            return Ok(());
        };
        self.next = next;
        let batch = batch?;
        if out.is_empty() {
            *out = batch;
        } else {
            out.extend(batch);
        }
        Ok(())
    }
}

/// Items held in memory, as one batch.
pub struct InMemory<T>(Option<Vec<T>>);

impl<T> InMemory<T> {
    pub fn new(items: Vec<T>) -> Self {
        InMemory(Some(items))
    }
}

impl<T> Source<T> for InMemory<T> {
    fn next_start(&self) -> Option<u64> {
        self.0.as_ref().map(|_| 0)
    }
    fn read(&mut self, out: &mut Vec<T>) -> Result<(), StreamError> {
        out.extend(self.0.take().unwrap_or_default());
        Ok(())
    }
}

/// Several sources read as one, a batch of the one with the earliest time at a time; each
/// source's items tagged with its number by `tag`.
pub struct Sources<S, T> {
    sources: Vec<(usize, S)>,
    tag: fn(&mut T, usize),
}

impl<S: Source<T>, T> Sources<S, T> {
    /// `sources`, each with its number.
    pub fn new(sources: Vec<(usize, S)>, tag: fn(&mut T, usize)) -> Self {
        Sources { sources, tag }
    }

    fn next(&self) -> Option<usize> {
        (0..self.sources.len())
            .filter_map(|i| self.sources[i].1.next_start().map(|s| (s, i)))
            .min()
            .map(|(_, i)| i)
    }
}

impl<S: Source<T>, T> Source<T> for Sources<S, T> {
    fn next_start(&self) -> Option<u64> {
        self.next().and_then(|i| self.sources[i].1.next_start())
    }
    fn read(&mut self, out: &mut Vec<T>) -> Result<(), StreamError> {
        let Some(i) = self.next() else {
            return Ok(());
        };
        let (n, src) = &mut self.sources[i];
        let from = out.len();
        src.read(out)?;
        for item in &mut out[from..] {
            (self.tag)(item, *n);
        }
        Ok(())
    }
}
