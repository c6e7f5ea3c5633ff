//! A single-producer single-consumer ring of [`Entry`]s: one per traced thread, kept in a
//! [`Region`] of the trace file itself (a shared mapping: see `rtrace_format::ring` for the
//! layout), so that what a thread recorded is in the file however the process ends.
//!
//! The owning thread pushes with one atomic load and one store (it re-reads the consumer's
//! `tail` only when its own limit says the ring is full); when the ring is full it counts the
//! loss and returns (it never blocks). The consumer (the worker, or the thread doing the final
//! flush under the consumer lock) copies entries out ([`Ring::drain`]) and, once the chunk
//! holding them is written, lets the producer reuse their slots ([`Ring::release`]): until
//! then a reader of the file finds them in the ring. The slots the file backs grow with use
//! (from [`FIRST_SLOTS`] to the ring's capacity, on the producer's cold path).
//!
//! Why `unsafe` here, outside the FFI and system-call modules: the slots and the live page are
//! memory the kernel mapped, written by one thread and read by another without a lock
//! (published by the release/acquire pair on `head` and `tail`); a safe ring would need a lock
//! or an atomic per field, on the hot path. And [`RingRef`], a thread's handle on its ring, is
//! a raw pointer holding one strong reference, so the hot path reaches the ring with one plain
//! load: an `Arc` in a `Cell` cannot be borrowed, and a thread-local with a destructor costs a
//! check on every access.

pub use rtrace_format::ring::{RingEntry as Entry, RingNvtx as NvtxEntry};

pub use crate::region::{Region, Waker, WhenFull, FIRST_SLOTS};

use rtrace_format::ring::{live, REGION_CLOSED, REGION_IN_USE};
use rtrace_format::ApiRecord;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// A value alone on its cache line(s) (128 bytes: adjacent-line prefetch pairs lines).
#[repr(align(128))]
struct Line<T>(T);

/// The producer's side: only the owning thread touches it.
struct Producer {
    /// The position the producer may not reach (from `tail` and the slots backed, as last
    /// read).
    limit: Cell<u64>,
    /// `tail` when a wait for room last ran out: no more waiting until the consumer moves it
    /// (a stalled consumer makes losses, not a crawl).
    gave_up_at: Cell<u64>,
}

/// One thread's ring, over a region.
pub struct Ring {
    producer: Line<Producer>,
    /// The position up to which the consumer copied entries out (they may still await their
    /// write: `tail` in the live page follows once they are in the file).
    drained: Line<AtomicU64>,
    /// The live page's loss count as [`Ring::take_dropped`] last took it.
    dropped_taken: Line<AtomicU64>,
    region: &'static Region,
    base: u64,
    mask: u64,
    closed: AtomicBool,
    full: WhenFull,
    pub tid: u64,
    pub name: String,
    pub announced: AtomicBool,
}

// SAFETY: see the module doc: one producer (the owning thread) and one consumer (under the
// consumer lock) share the region through atomics and the head/tail protocol.
unsafe impl Sync for Ring {}
unsafe impl Send for Ring {}

/// A (ticks, ns) pair: a raw timestamp and `CLOCK_MONOTONIC` read together.
pub type ClockPair = (u64, u64);

impl Ring {
    /// A ring for thread `tid` over `region` (free: no ring uses it), its positions from
    /// `base` (a multiple of 2^`POSITION_BITS`, distinct for every ring of the process);
    /// `start` and `latest` are clock pairs a reader converts its timestamps with; `full` what
    /// a producer that may wait does when the ring is full.
    pub fn on(
        region: &'static Region,
        base: u64,
        (tid, name): (u64, String),
        (start, latest): (ClockPair, ClockPair),
        full: WhenFull,
    ) -> Ring {
        let f = |at| region.field(at);
        f(live::HEAD).store(base, Ordering::Relaxed);
        f(live::TAIL).store(base, Ordering::Relaxed);
        f(live::DROPPED).store(0, Ordering::Relaxed);
        f(live::TID).store(tid, Ordering::Relaxed);
        f(live::BASE).store(base, Ordering::Relaxed);
        f(live::CAL0_TICKS).store(start.0, Ordering::Relaxed);
        f(live::CAL0_NS).store(start.1, Ordering::Relaxed);
        let bytes = name.as_bytes();
        for i in 0..live::NAME_LEN / 8 {
            let mut word = [0u8; 8];
            for (j, b) in word.iter_mut().enumerate() {
                *b = bytes.get(i * 8 + j).copied().unwrap_or(0);
            }
            f(live::NAME + i * 8).store(u64::from_le_bytes(word), Ordering::Relaxed);
        }
        f(live::STATE).store(REGION_IN_USE, Ordering::Release);
        let ring = Ring {
            producer: Line(Producer {
                limit: Cell::new(base),
                gave_up_at: Cell::new(u64::MAX),
            }),
            drained: Line(AtomicU64::new(base)),
            dropped_taken: Line(AtomicU64::new(0)),
            region,
            base,
            mask: region.capacity() - 1,
            closed: AtomicBool::new(false),
            full,
            tid,
            name,
            announced: AtomicBool::new(false),
        };
        ring.set_calibration(latest);
        ring
    }

    /// A ring of `capacity` slots (rounded up to a power of two) in anonymous memory.
    #[cfg(test)]
    pub fn new(capacity: usize, tid: u64, name: String) -> Ring {
        let cap = capacity.max(2).next_power_of_two() as u64;
        let region = Region::anonymous(cap)
            .unwrap_or_else(|_| crate::sys::die(b"rtrace: no memory for a ring\n"));
        let base = 1 << rtrace_format::ring::POSITION_BITS;
        Ring::on(region, base, (tid, name), ((0, 0), (0, 0)), WhenFull::DROP)
    }

    pub fn region(&self) -> &'static Region {
        self.region
    }

    pub fn capacity(&self) -> usize {
        self.region.capacity() as usize
    }

    #[inline(always)]
    fn head(&self) -> &AtomicU64 {
        self.region.field(live::HEAD)
    }

    #[inline(always)]
    fn tail(&self) -> &AtomicU64 {
        self.region.field(live::TAIL)
    }

    /// Appends `entry`; false (and the loss counted) when the ring is full. Producer only;
    /// never waits (for entries made inside a driver call, whose locks the consumer may need).
    #[inline(always)]
    pub fn push(&self, entry: Entry) -> bool {
        self.push_with(entry, false)
    }

    /// Appends `entry`; when the ring is full, wakes the consumer and waits for room as the
    /// ring's [`WhenFull`] says, then counts the loss. Producer only, holding no lock the
    /// consumer may take.
    #[inline(always)]
    pub fn push_waiting(&self, entry: Entry) -> bool {
        self.push_with(entry, true)
    }

    #[inline(always)]
    fn push_with(&self, entry: Entry, may_wait: bool) -> bool {
        let head = self.head();
        let h = head.load(Ordering::Relaxed);
        if h >= self.producer.0.limit.get()
            && !self.make_room(h)
            && !(may_wait && self.wait_for_room(h))
        {
            self.region
                .field(live::DROPPED)
                .fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let bytes = entry.encode().to_bytes();
        // SAFETY: slot `h & mask` is backed (below the limit) and not readable by the consumer
        // until `head` passes it; only this thread writes it.
        unsafe {
            let slot = self
                .region
                .slots()
                .add((h & self.mask) as usize * ApiRecord::SIZE);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), slot, ApiRecord::SIZE);
        }
        head.store(h + 1, Ordering::Release);
        true
    }

    /// The producer reached its limit at position `h`: reads the consumer's tail again, and
    /// backs more slots with the file when the ring has not grown to its capacity yet.
    #[cold]
    fn make_room(&self, h: u64) -> bool {
        let cap = self.region.capacity();
        let tail = self.tail().load(Ordering::Acquire);
        loop {
            let allocated = self.region.field(live::ALLOCATED).load(Ordering::Acquire);
            let limit = if allocated >= cap {
                tail + cap
            } else {
                (tail + cap).min(self.base + allocated)
            };
            if h < limit {
                self.producer.0.limit.set(limit);
                return true;
            }
            if allocated >= cap || h - tail >= cap || !self.region.grow(allocated) {
                return false;
            }
        }
    }

    /// The position up to which entries were copied out. Consumer only.
    pub fn drained(&self) -> u64 {
        self.drained.0.load(Ordering::Relaxed)
    }

    /// The ring is full at position `h`: wakes the consumer and yields until it made room, for
    /// at most the ring's wait. Cold path.
    #[cold]
    fn wait_for_room(&self, h: u64) -> bool {
        let WhenFull {
            waker: Some(waker),
            wait,
        } = self.full
        else {
            return false;
        };
        let tail = self.tail().load(Ordering::Acquire);
        if wait.is_zero() || tail == self.producer.0.gave_up_at.get() || !waker.wake() {
            return false;
        }
        let deadline = std::time::Instant::now() + wait;
        for round in 0u32.. {
            // Yield a few times, then sleep: threads that spin would starve the worker of the
            // cores it needs to make room.
            if round < 4 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
            if self.make_room(h) {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                break;
            }
        }
        self.producer.0.gave_up_at.set(tail);
        false
    }

    /// Entries waiting to be copied out.
    pub fn len(&self) -> usize {
        let h = self.head().load(Ordering::Acquire);
        h.wrapping_sub(self.drained.0.load(Ordering::Relaxed)) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether every entry is in a written chunk.
    pub fn is_written(&self) -> bool {
        self.tail().load(Ordering::Acquire) == self.head().load(Ordering::Acquire)
    }

    /// Copies the waiting entries out: calls appended to `out` as the ring holds them (times
    /// in raw ticks), other entries handed to `other` in order. Returns how many calls, the
    /// position after the last entry (to [`Ring::release`] once they are written) and the
    /// earliest timestamp of the calls (`u64::MAX`: none). Consumer only.
    pub fn drain(&self, out: &mut Vec<u8>, other: &mut dyn FnMut(Entry)) -> (usize, u64, u64) {
        const SIZE: usize = ApiRecord::SIZE;
        let h = self.head().load(Ordering::Acquire);
        let t = self.drained.0.load(Ordering::Relaxed);
        let waiting = h.wrapping_sub(t) as usize;
        out.reserve(waiting * SIZE);
        let start = out.len();
        // The waiting slots as at most two runs: from `t`'s slot, then from slot 0.
        let (from, cap) = ((t & self.mask) as usize, self.mask as usize + 1);
        // (At most a ring's worth waits: the producer never gets further ahead of the tail.)
        let first = waiting.min(cap - from);
        let second = (waiting - first).min(from);
        // SAFETY: positions `t..h` are published (`head` acquired) and the producer does not
        // reuse their slots before `release`: the two runs are slots of the mapping (`from +
        // first <= cap`, `second <= from`) no one writes meanwhile.
        let runs = unsafe {
            let slots = self.region.slots().cast::<[u8; SIZE]>();
            [
                std::slice::from_raw_parts(slots.add(from), first),
                std::slice::from_raw_parts(slots, second),
            ]
        };
        // SAFETY: `start` is within the allocation (`reserve` made room after it).
        let first_free = unsafe { out.as_mut_ptr().add(start) }.cast::<[u8; SIZE]>();
        let mut calls = Calls {
            to: first_free,
            earliest: u64::MAX,
        };
        for run in runs {
            // SAFETY: `reserve` made room for every waiting entry after `start`.
            unsafe { calls.copy(run, other) };
        }
        // SAFETY: both pointers are in the room reserved, `to` past the calls copied.
        let written = unsafe { calls.to.offset_from(first_free) } as usize;
        // SAFETY: the `written` records after `start` were written above.
        unsafe { out.set_len(start + written * SIZE) };
        self.drained.0.store(h, Ordering::Relaxed);
        (written, h, calls.earliest)
    }

    /// The entries before position `to` are in the file: their slots may be reused.
    pub fn release(&self, to: u64) {
        self.tail().store(to, Ordering::Release);
    }

    /// Takes the count of entries lost since the last call. The live page keeps the total
    /// (a reader subtracts what the chunks of this ring counted). Consumer only.
    /// Whether every loss counted in the ring has been taken by [`Ring::take_dropped`].
    pub fn drops_taken(&self) -> bool {
        self.region.field(live::DROPPED).load(Ordering::Acquire)
            == self.dropped_taken.0.load(Ordering::Relaxed)
    }

    pub fn take_dropped(&self) -> u64 {
        let total = self.region.field(live::DROPPED).load(Ordering::Relaxed);
        let before = self.dropped_taken.0.swap(total, Ordering::Relaxed);
        total - before
    }

    /// Writes the latest clock pair where a reader finds it (a sequence count around it).
    pub fn set_calibration(&self, (ticks, ns): ClockPair) {
        let f = |at| self.region.field(at);
        let seq = f(live::CAL_SEQ).load(Ordering::Relaxed);
        f(live::CAL_SEQ).store(seq | 1, Ordering::Relaxed);
        f(live::CAL1_TICKS).store(ticks, Ordering::Relaxed);
        f(live::CAL1_NS).store(ns, Ordering::Relaxed);
        f(live::CAL_SEQ).store((seq | 1) + 1, Ordering::Release);
    }

    /// Its thread has exited: the consumer drains it and gives its region back.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.region
            .field(live::STATE)
            .store(REGION_CLOSED, Ordering::Release);
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

/// Where [`Ring::drain`] copies calls to next, and the earliest timestamp it copied.
struct Calls {
    to: *mut [u8; ApiRecord::SIZE],
    earliest: u64,
}

impl Calls {
    /// Copies the calls of `run` as they are, each after those copied before (no growth
    /// check), and hands the other entries to `other` (out of line: links and NVTX events are
    /// few).
    ///
    /// # Safety
    /// `to` has room for `run.len()` slots.
    #[inline(always)]
    unsafe fn copy(&mut self, run: &[[u8; ApiRecord::SIZE]], other: &mut dyn FnMut(Entry)) {
        let (mut to, mut earliest) = (self.to, self.earliest);
        for bytes in run {
            // `function` is the low half of the first word (read whole: one load).
            let word = ApiRecord::first_word_of(bytes);
            if Entry::is_call(word as u32) {
                let (start, end) = ApiRecord::times_of(bytes);
                earliest = earliest.min(start.min(end));
                // SAFETY: the caller's room holds this slot.
                unsafe {
                    to.write_unaligned(*bytes);
                    to = to.add(1);
                }
            } else {
                hand_over(bytes, other);
            }
        }
        (self.to, self.earliest) = (to, earliest);
    }
}

/// A ring entry other than a call, decoded and handed to `other`.
#[inline(never)]
fn hand_over(bytes: &[u8; ApiRecord::SIZE], other: &mut dyn FnMut(Entry)) {
    other(Entry::decode(ApiRecord::from_bytes(bytes)));
}

/// A thread's handle on its own ring, kept in its thread-local state: one strong reference to
/// the ring (or none), behind a `Cell` so the hot path reads it with one plain load. No `Drop`:
/// a thread-local with a destructor costs a check on every access; the thread's exit guard
/// closes and releases it instead, and a forked child [`forget`](RingRef::forget)s it.
pub struct RingRef(Cell<*const Ring>);

impl RingRef {
    pub const fn none() -> RingRef {
        RingRef(Cell::new(std::ptr::null()))
    }

    /// Holds `ring`, releasing the ring held before, if any.
    pub fn hold(&self, ring: Arc<Ring>) {
        self.release_ptr(self.0.replace(Arc::into_raw(ring)));
    }

    fn release_ptr(&self, p: *const Ring) {
        if !p.is_null() {
            // SAFETY: `p` came from `Arc::into_raw` in `hold`, and its strong reference was
            // released by no one else (each RingRef gives up its pointer when releasing it).
            drop(unsafe { Arc::from_raw(p) });
        }
    }

    pub fn is_some(&self) -> bool {
        !self.0.get().is_null()
    }

    /// Whether both hold the same ring.
    pub fn same(&self, other: &RingRef) -> bool {
        self.0.get() == other.0.get()
    }

    /// Releases the ring held, if any.
    pub fn release(&self) {
        self.release_ptr(self.0.replace(std::ptr::null()));
    }

    /// Closes the ring held (its thread has exited: the worker drains it and lets it go), and
    /// releases it.
    pub fn close(&self) {
        let p = self.0.get();
        if !p.is_null() {
            // SAFETY: this handle holds a strong reference to the ring.
            unsafe { (*p).close() };
        }
        self.release();
    }

    /// Lets go of the ring without touching it (in a forked child: the parent's). Leaks
    /// one reference; no allocation, no atomic operation.
    pub fn forget(&self) {
        self.0.set(std::ptr::null());
    }

    /// Appends `entry` to the ring held; false when none is held, or it is full. Producer
    /// (the owning thread) only.
    #[inline(always)]
    pub fn push(&self, entry: Entry) -> bool {
        let p = self.0.get();
        if p.is_null() {
            return false;
        }
        // SAFETY: this handle holds a strong reference to the ring, so it is alive.
        unsafe { &*p }.push(entry)
    }

    /// As [`RingRef::push`], waiting for room as [`Ring::push_waiting`] does.
    #[inline(always)]
    pub fn push_waiting(&self, entry: Entry) -> bool {
        let p = self.0.get();
        if p.is_null() {
            return false;
        }
        // SAFETY: this handle holds a strong reference to the ring, so it is alive.
        unsafe { &*p }.push_waiting(entry)
    }
}

#[cfg(test)]
mod tests;
