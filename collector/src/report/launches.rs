//! The kernel launches the GPU pass matched with their calls, kept for the selection passes
//! of the kernel launch and execution times' exact medians ([`Launches`]), so that those
//! passes read them back instead of joining the trace's kernels with its calls again.
//!
//! Each launch is a few bytes (its row in the trace's fold of launch times,
//! [`crate::gpu_summary::exec::KernExecFold`], and its four parts, each in as few of 1, 2, 4
//! or 8 bytes as hold it: [`put_launch`]), gathered a megabyte at a time ([`BLOCK`]). The
//! report's first blocks stay in memory, up to [`HELD`] bytes for all its traces together;
//! the blocks past them go to one temporary file with no name ([`LaunchStore`],
//! [`crate::spool::unnamed_file`]), whose blocks each trace remembers: what the report holds in
//! memory is bounded whatever the launches (at most [`HELD`] bytes of them, and a few words per
//! megabyte written); the launches take 5 to 43 bytes each (14 on the 10M-record synthetic
//! trace, whose 2.9 million launches stay in memory), and the file is gone once the report is.
//! Where the file cannot be made or written, the selection passes join again
//! (`passes::kern_exec_pass`).

use crate::gpu_summary::exec::LaunchParts;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Bytes of launches gathered before they are kept as a block.
pub(super) const BLOCK: usize = 1 << 20;

/// Bytes of launch blocks a report holds in memory before it writes them to its file.
/// Writing them costs the kernel's copy into the page cache and another out of it: 7% of
/// `rtrace report`'s CPU on the 10M-record synthetic trace (docs/benchmarks.md, session 24).
pub(super) const HELD: usize = 64 << 20;

/// Where every trace's launch blocks are kept: the first in memory, up to a number of bytes
/// for all of them, the rest in a file (made when the first such block is written), with its
/// length; `Err` where it could not be made. A block that could not be written is not counted
/// (the next is written where it would have been), and the blocks kept before it are still
/// read back.
pub(super) struct LaunchStore {
    file: Mutex<Result<Option<(File, u64)>, ()>>,
    /// Bytes of launches a block holds; 0: none are kept (the selection passes join again).
    block: usize,
    /// Bytes of blocks that may still be held in memory.
    room: AtomicUsize,
}

impl LaunchStore {
    /// Launches kept in blocks of `block` bytes (0: not kept), the first `held` bytes of them
    /// in memory.
    pub(super) fn new(block: usize, held: usize) -> LaunchStore {
        LaunchStore {
            file: Mutex::new(Ok(None)),
            block,
            room: AtomicUsize::new(held),
        }
    }

    /// Takes room for a block of `len` bytes in memory, if there is as much left.
    fn hold(&self, len: usize) -> bool {
        self.room
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |room| {
                room.checked_sub(len)
            })
            .is_ok()
    }

    /// Appends `bytes` to the file; where they are, `None` if they could not be written.
    fn append(&self, bytes: &[u8]) -> Option<u64> {
        let mut state = self.file.lock().ok()?;
        if let Ok(None) = *state {
            *state = crate::spool::unnamed_file(&std::env::temp_dir())
                .map(|f| Some((f, 0)))
                .map_err(|_| ());
        }
        let Ok(Some((file, len))) = &mut *state else {
            return None;
        };
        let at = *len;
        file.write_all_at(bytes, at).ok()?;
        *len += bytes.len() as u64;
        Some(at)
    }

    /// Reads `len` bytes at `at` of the file into `buf`.
    fn read(&self, at: u64, buf: &mut [u8]) -> Option<()> {
        let state = self.file.lock().ok()?;
        let Ok(Some((file, _))) = &*state else {
            return None;
        };
        file.read_exact_at(buf, at).ok()
    }
}

/// One block of a trace's launches.
enum Block {
    Held(Vec<u8>),
    /// (offset, length) in the store's file.
    Written(u64, usize),
}

/// One trace's launches matched so far.
pub(super) struct Launches<'f> {
    to: &'f LaunchStore,
    buf: Vec<u8>,
    /// The blocks kept.
    blocks: Vec<Block>,
    /// Whether every launch was kept.
    whole: bool,
}

impl<'f> Launches<'f> {
    pub(super) fn new(to: &'f LaunchStore) -> Launches<'f> {
        Launches {
            to,
            buf: Vec::new(),
            blocks: Vec::new(),
            whole: to.block > 0,
        }
    }

    /// A launch of the fold's row `row` (its kernel name and launching function), with its
    /// four parts.
    #[inline]
    pub(super) fn add(&mut self, row: usize, parts: LaunchParts) {
        if !self.whole {
            return;
        }
        put_launch(row, parts, &mut self.buf);
        if self.buf.len() >= self.to.block {
            self.write();
        }
    }

    fn write(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        if self.to.hold(self.buf.len()) {
            // A launch is at most 43 bytes, and the last part written takes 8 bytes before
            // it is cut to its size: the next block fits without growing.
            let next = Vec::with_capacity(self.to.block + 64);
            self.blocks
                .push(Block::Held(std::mem::replace(&mut self.buf, next)));
            return;
        }
        match self.to.append(&self.buf) {
            Some(at) => self.blocks.push(Block::Written(at, self.buf.len())),
            None => self.whole = false,
        }
        self.buf.clear();
    }

    /// The launches, to be read back; `None` where some could not be written.
    pub(super) fn finish(mut self) -> Option<Kept<'f>> {
        self.write();
        self.whole.then_some(Kept {
            from: self.to,
            blocks: self.blocks,
        })
    }
}

/// One trace's launches, kept, to be read back as often as the selection passes need them.
pub(super) struct Kept<'f> {
    from: &'f LaunchStore,
    blocks: Vec<Block>,
}

impl Kept<'_> {
    /// How many blocks (of about a megabyte) hold the launches.
    pub(super) fn blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Calls `f(row, parts)` for each launch of blocks `blocks`, in the order they were
    /// added; `None` where the file could not be read back or a block does not hold what
    /// was kept.
    pub(super) fn each_in(
        &self,
        blocks: std::ops::Range<usize>,
        f: &mut dyn FnMut(usize, LaunchParts),
    ) -> Option<()> {
        let mut buf = Vec::new();
        for block in self.blocks.get(blocks)? {
            let bytes = match block {
                Block::Held(bytes) => &bytes[..],
                Block::Written(at, len) => {
                    buf.resize(*len, 0);
                    self.from.read(*at, &mut buf)?;
                    &buf[..]
                }
            };
            each_launch(bytes, f)?;
        }
        Some(())
    }
}

/// Calls `f(row, parts)` for each launch of a block, in order; `None` where it does not hold
/// whole launches.
fn each_launch(mut b: &[u8], f: &mut dyn FnMut(usize, LaunchParts)) -> Option<()> {
    while !b.is_empty() {
        let (row, parts) = take_launch(&mut b)?;
        f(row, parts);
    }
    Some(())
}

/// Appends a launch: its row and whether it has a queue as LEB128 (`row << 1 | queued`), a
/// byte of its parts' sizes (two bits each, api first: 1, 2, 4 or 8 bytes), and its parts
/// (the queue only where there is one), little-endian, each in its size.
#[inline]
fn put_launch(row: usize, (api, queue, kernel, total): LaunchParts, out: &mut Vec<u8>) {
    let parts = [api, queue.unwrap_or(0), kernel, total];
    let sizes =
        parts.map(|v| u8::from(v > 0xFF) + u8::from(v > 0xFFFF) + u8::from(v > 0xFFFF_FFFF));
    varint((row as u64) << 1 | u64::from(queue.is_some()), out);
    out.push(sizes[0] | sizes[1] << 2 | sizes[2] << 4 | sizes[3] << 6);
    for (i, (v, size)) in parts.into_iter().zip(sizes).enumerate() {
        if i == 1 && queue.is_none() {
            continue;
        }
        // All eight bytes, then cut to the part's size: one store, not a copy of a length
        // known only here.
        let len = out.len();
        out.extend_from_slice(&v.to_le_bytes());
        out.truncate(len + (1 << size));
    }
}

/// Takes a launch ([`put_launch`]) off the front of `b`.
#[inline]
fn take_launch(b: &mut &[u8]) -> Option<(usize, LaunchParts)> {
    let key = read_varint(b)?;
    let row = usize::try_from(key >> 1).ok()?;
    let (&sizes, rest) = b.split_first()?;
    *b = rest;
    let api = take_sized(b, sizes)?;
    let queue = match key & 1 {
        0 => None,
        _ => Some(take_sized(b, sizes >> 2)?),
    };
    let kernel = take_sized(b, sizes >> 4)?;
    let total = take_sized(b, sizes >> 6)?;
    Some((row, (api, queue, kernel, total)))
}

/// Takes a little-endian value of 1, 2, 4 or 8 bytes (`1 << (size & 3)`) off the front of
/// `b`.
#[inline]
fn take_sized(b: &mut &[u8], size: u8) -> Option<u64> {
    const MASKS: [u64; 4] = [0xFF, 0xFFFF, 0xFFFF_FFFF, u64::MAX];
    let size = usize::from(size & 3);
    let len = 1 << size;
    let v = match b.first_chunk::<8>() {
        // Eight bytes read at once, those past the value masked off.
        Some(word) => u64::from_le_bytes(*word) & MASKS[size],
        None => {
            let mut word = [0u8; 8];
            word[..len].copy_from_slice(b.get(..len)?);
            u64::from_le_bytes(word)
        }
    };
    *b = &b[len..];
    Some(v)
}

/// Appends `v` as LEB128.
#[inline]
fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Takes a LEB128 value off the front of `b`.
#[inline]
fn read_varint(b: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let (&byte, rest) = b.split_first()?;
        *b = rest;
        if shift > 63 {
            return None;
        }
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_read_back_as_written() {
        // Every block in the file; the first two in memory and the rest in the file; all in
        // memory.
        for held in [0, 2 * BLOCK + 100, HELD] {
            read_back(LaunchStore::new(BLOCK, held), held);
        }
        // None kept: the passes join again.
        let none = LaunchStore::new(0, HELD);
        let mut c = Launches::new(&none);
        c.add(1, (2_500, Some(6_000), 1_500, 10_000));
        assert!(c.finish().is_none());
    }

    fn read_back(store: LaunchStore, held: usize) {
        let given: Vec<(usize, LaunchParts)> = vec![
            (1, (2_500, Some(6_000), 1_500, 10_000)),
            (u32::MAX as usize, (u64::MAX, None, 0, u64::MAX)),
            (0, (0, Some(u64::MAX), u64::MAX, 1 << 40)),
            (300, (127, Some(128), 16_383, 16_384)),
        ];
        // Two traces' launches in one store, the first's over several blocks.
        let (mut a, mut b) = (Launches::new(&store), Launches::new(&store));
        let many = BLOCK / 8;
        for i in 0..many {
            let (r, p) = given[i % given.len()];
            a.add(r, p);
            if i % 1000 == 0 {
                b.add(r + 1, p);
            }
        }
        let (a, b) = (a.finish().expect("kept"), b.finish().expect("kept"));
        let in_memory = |w: &Kept| {
            w.blocks
                .iter()
                .filter(|b| matches!(b, Block::Held(_)))
                .count()
        };
        // 2.3 MB of launches (17.25 bytes each on average): two full blocks and a third.
        assert_eq!(a.blocks(), 3, "held {held}");
        let (a_held, b_held) = (in_memory(&a), in_memory(&b));
        match held {
            0 => assert_eq!((a_held, b_held), (0, 0)),
            HELD => assert_eq!((a_held, b_held), (3, 1)),
            // The first trace's two full blocks filled the room: its third and the second
            // trace's went to the file.
            _ => assert_eq!((a_held, b_held), (2, 0)),
        }
        // Read twice: as many passes as a median needs.
        for _ in 0..2 {
            let mut got = Vec::new();
            // In two pieces, as two threads read them.
            let half = a.blocks() / 2;
            for piece in [0..half, half..a.blocks()] {
                a.each_in(piece, &mut |r, p| got.push((r, p)))
                    .expect("read back");
            }
            assert_eq!(got.len(), many);
            assert!(got.iter().enumerate().all(|(i, g)| *g == given[i % 4]));
            let mut got = Vec::new();
            b.each_in(0..b.blocks(), &mut |r, p| got.push((r, p)))
                .expect("read back");
            let want: Vec<_> = (0..many)
                .step_by(1000)
                .map(|i| {
                    let (r, p) = given[i % 4];
                    (r + 1, p)
                })
                .collect();
            assert_eq!(got, want);
        }
    }
}
