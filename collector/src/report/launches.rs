//! The kernel launches the GPU pass matched with their calls, kept for the selection passes
//! of the kernel launch and execution times' exact medians ([`Launches`]), so that those
//! passes read them back instead of joining the trace's kernels with its calls again.
//!
//! Each launch is a few bytes (its row in the trace's fold of launch times,
//! [`crate::gpu_summary::exec::KernExecFold`], and its four parts, as variable-length
//! integers), gathered a megabyte at a time and written to one temporary file
//! with no name for the whole report ([`LaunchFile`], [`crate::spool::unnamed_file`]), whose
//! blocks each trace remembers: what the report holds in memory does not grow with the
//! launches (a few words per megabyte); the file (5 to 40 bytes a launch, 14 on the
//! 10M-record synthetic trace) is gone once the report is. Where the file cannot be made or
//! written, the selection passes join again (`passes::kern_exec_pass`).

use crate::gpu_summary::exec::LaunchParts;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

/// Bytes of launches gathered before they are written.
pub(super) const BLOCK: usize = 1 << 20;

/// The file every trace's launches go to (made when the first block is written), and its
/// length; `Err` where it could not be made. A block that could not be written is not counted
/// (the next is written where it would have been), and the blocks written before it are still
/// read back.
pub(super) struct LaunchFile {
    file: Mutex<Result<Option<(File, u64)>, ()>>,
    /// Bytes of launches a block holds; 0: none are kept (the selection passes join again).
    block: usize,
}

impl LaunchFile {
    /// Launches kept in blocks of `block` bytes (0: not kept).
    pub(super) fn new(block: usize) -> LaunchFile {
        LaunchFile {
            file: Mutex::new(Ok(None)),
            block,
        }
    }

    /// Appends `bytes`; where they are, `None` if they could not be written.
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

    /// Reads `len` bytes at `at` into `buf`.
    fn read(&self, at: u64, buf: &mut [u8]) -> Option<()> {
        let state = self.file.lock().ok()?;
        let Ok(Some((file, _))) = &*state else {
            return None;
        };
        file.read_exact_at(buf, at).ok()
    }
}

/// One trace's launches matched so far.
pub(super) struct Launches<'f> {
    to: &'f LaunchFile,
    buf: Vec<u8>,
    /// (offset, length) of the blocks written.
    blocks: Vec<(u64, usize)>,
    /// Whether every launch was written.
    whole: bool,
}

impl<'f> Launches<'f> {
    pub(super) fn new(to: &'f LaunchFile) -> Launches<'f> {
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
        let (api, queue, kernel, total) = parts;
        let b = &mut self.buf;
        varint((row as u64) << 1 | u64::from(queue.is_some()), b);
        varint(api, b);
        if let Some(q) = queue {
            varint(q, b);
        }
        varint(kernel, b);
        varint(total, b);
        if self.buf.len() >= self.to.block {
            self.write();
        }
    }

    fn write(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        match self.to.append(&self.buf) {
            Some(at) => self.blocks.push((at, self.buf.len())),
            None => self.whole = false,
        }
        self.buf.clear();
    }

    /// The launches, to be read back; `None` where some could not be written.
    pub(super) fn finish(mut self) -> Option<Written<'f>> {
        self.write();
        self.whole.then_some(Written {
            from: self.to,
            blocks: self.blocks,
        })
    }
}

/// One trace's launches, written, to be read back as often as the selection passes need them.
pub(super) struct Written<'f> {
    from: &'f LaunchFile,
    blocks: Vec<(u64, usize)>,
}

impl Written<'_> {
    /// How many blocks (of about a megabyte) hold the launches.
    pub(super) fn blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Calls `f(row, parts)` for each launch of blocks `blocks`, in the order they were
    /// added; `None` where the file could not be read back or does not hold what
    /// was written.
    pub(super) fn each_in(
        &self,
        blocks: std::ops::Range<usize>,
        f: &mut dyn FnMut(usize, LaunchParts),
    ) -> Option<()> {
        let mut buf = Vec::new();
        for &(at, len) in self.blocks.get(blocks)? {
            buf.resize(len, 0);
            self.from.read(at, &mut buf)?;
            let mut b = &buf[..];
            while !b.is_empty() {
                let key = read_varint(&mut b)?;
                let row = usize::try_from(key >> 1).ok()?;
                let api = read_varint(&mut b)?;
                let queue = if key & 1 != 0 {
                    Some(read_varint(&mut b)?)
                } else {
                    None
                };
                let kernel = read_varint(&mut b)?;
                let total = read_varint(&mut b)?;
                f(row, (api, queue, kernel, total));
            }
        }
        Some(())
    }
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
        let file = LaunchFile::new(BLOCK);
        let given: Vec<(usize, LaunchParts)> = vec![
            (1, (2_500, Some(6_000), 1_500, 10_000)),
            (u32::MAX as usize, (u64::MAX, None, 0, u64::MAX)),
            (0, (0, Some(u64::MAX), u64::MAX, 1 << 40)),
            (300, (127, Some(128), 16_383, 16_384)),
        ];
        // Two traces' launches in one file, the first's over several blocks.
        let (mut a, mut b) = (Launches::new(&file), Launches::new(&file));
        let many = BLOCK / 8;
        for i in 0..many {
            let (r, p) = given[i % given.len()];
            a.add(r, p);
            if i % 1000 == 0 {
                b.add(r + 1, p);
            }
        }
        let (a, b) = (a.finish().expect("written"), b.finish().expect("written"));
        assert!(a.blocks.len() > 1);
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
        // None kept: the passes join again.
        let none = LaunchFile::new(0);
        let mut c = Launches::new(&none);
        c.add(1, given[0].1);
        assert!(c.finish().is_none());
    }
}
