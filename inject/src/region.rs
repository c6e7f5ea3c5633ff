//! The memory of a thread's ring ([`Region`]): a live page and slots, in pages of the trace
//! file mapped shared (or, where the file cannot hold them, anonymous memory), backed by disk
//! blocks as the ring grows; and what a producer whose ring is full does ([`WhenFull`]).
//!
//! Why `unsafe` here, outside the FFI and system-call modules: the live page's fields are
//! memory the kernel mapped, read and written as atomics by a producer and a consumer without
//! a lock; the slots are reached through raw pointers by [`crate::ring`].

use crate::trace_fd::TraceFd;
use rtrace_format::ring::{live, RING_PAGE};
use rtrace_format::ApiRecord;
use std::sync::atomic::{AtomicU64, Ordering};

/// Slots the file backs when a region is made (32 KiB); the ring grows by four times.
pub const FIRST_SLOTS: u64 = 1024;
/// The most slots a ring grows by at once (1 MiB).
const GROW_AT_MOST: u64 = 32768;

/// Memory for one ring at a time: a live page and `capacity` slots, in the trace file (a shared
/// mapping, backed by disk blocks as far as [`live::ALLOCATED`] says) or, where the file
/// cannot hold it, in anonymous memory. Made once and never unmapped; reused by a later thread
/// once its ring is drained.
pub struct Region {
    live: *mut u8,
    slots: *mut u8,
    capacity: u64,
    /// The trace file and the offset of slot 0 in it: where more slots get disk blocks.
    file: Option<(&'static TraceFd, u64)>,
    /// Why the file could not back more slots (an `errno`); 0: it could.
    grow_error: AtomicU64,
}

// SAFETY: the region's memory is shared by design: the producer and the consumer reach it
// through atomics (the live page) and the head/tail protocol (the slots).
unsafe impl Sync for Region {}
unsafe impl Send for Region {}

impl Region {
    /// A region over `live` (one [`RING_PAGE`]) followed by `capacity` slots, whose slot 0 is
    /// at `file`'s offset (None: anonymous memory, all of it usable). The memory must stay
    /// mapped for the life of the process.
    pub fn new(live: *mut u8, capacity: u64, file: Option<(&'static TraceFd, u64)>) -> Region {
        let r = Region {
            live,
            // SAFETY: the slots follow the live page in the same mapping.
            slots: unsafe { live.add(RING_PAGE) },
            capacity,
            file,
            grow_error: AtomicU64::new(0),
        };
        if file.is_none() {
            r.field(live::ALLOCATED).store(capacity, Ordering::Release);
        }
        r
    }

    /// A region in anonymous memory (no file): for tests, and where the file cannot hold one.
    pub fn anonymous(capacity: u64) -> std::io::Result<&'static Region> {
        let len = RING_PAGE + capacity as usize * ApiRecord::SIZE;
        let p = crate::sys::map_anonymous(len)?;
        Ok(Box::leak(Box::new(Region::new(p, capacity, None))))
    }

    /// The live page's field at byte `at` (a multiple of 8).
    #[inline(always)]
    pub(crate) fn field(&self, at: usize) -> &AtomicU64 {
        debug_assert!(at.is_multiple_of(8) && at < RING_PAGE);
        // SAFETY: the live page is mapped for the life of the process, page-aligned, and
        // every field is an aligned u64 only ever accessed atomically.
        unsafe { &*(self.live.add(at) as *const AtomicU64) }
    }

    /// Slot 0.
    pub(crate) fn slots(&self) -> *mut u8 {
        self.slots
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Why the file could not back more slots (an `errno`), if it could not.
    pub fn grow_error(&self) -> Option<u64> {
        Some(self.grow_error.load(Ordering::Relaxed)).filter(|&e| e != 0)
    }

    /// Says that the file backs the first `slots` slots (a region just made).
    pub fn set_allocated(&self, slots: u64) {
        self.field(live::ALLOCATED).store(slots, Ordering::Release);
    }

    /// Notes that writing the trace failed with `errno`, where a reader finds it.
    pub fn set_write_error(&self, errno: u64) {
        self.field(live::WRITE_ERROR)
            .store(errno, Ordering::Relaxed);
    }

    /// Gives the file's blocks to the slots after the `allocated` first ones (four times as
    /// many, up to the capacity). Producer only (cold path); false when the file has no room.
    #[cold]
    pub(crate) fn grow(&self, allocated: u64) -> bool {
        let Some((file, slots_at)) = self.file else {
            return false;
        };
        if self.grow_error.load(Ordering::Relaxed) != 0 {
            return false;
        }
        // Four times as many, but at most a megabyte more at once: the new pages are faulted in
        // by one call, on the producer's thread.
        let more = (allocated * 4)
            .min(allocated + GROW_AT_MOST)
            .clamp(FIRST_SLOTS, self.capacity);
        let size = ApiRecord::SIZE as u64;
        let allocated_more = file.get().and_then(|fd| {
            crate::sys::allocate(fd, slots_at + allocated * size, (more - allocated) * size)
        });
        match allocated_more {
            Ok(()) => {
                // SAFETY: slots `allocated..more` lie in this region's mapping.
                let first = unsafe { self.slots.add((allocated * size) as usize) };
                crate::sys::populate(first, ((more - allocated) * size) as usize);
                self.field(live::ALLOCATED).store(more, Ordering::Release);
                true
            }
            Err(e) => {
                let errno = e.raw_os_error().unwrap_or(libc::EIO) as u64;
                self.grow_error.store(errno, Ordering::Relaxed);
                false
            }
        }
    }
}

/// What drains a ring: woken by a producer that found its ring full.
pub trait Waker: Sync {
    /// Wakes the consumer; false when there is none to drain the ring (the trace has ended).
    fn wake(&self) -> bool;
}

/// What a producer does when its ring is full and it may wait ([`Ring::push_waiting`]): wakes
/// `waker` and waits up to `wait` for room before it counts the entry as lost.
#[derive(Clone, Copy)]
pub struct WhenFull {
    pub waker: Option<&'static dyn Waker>,
    pub wait: std::time::Duration,
}

impl WhenFull {
    /// Never waits.
    #[cfg(test)]
    pub const DROP: WhenFull = WhenFull {
        waker: None,
        wait: std::time::Duration::ZERO,
    };
}

/// One CUPTI activity buffer in pages of the trace file ([`rtrace_format::gpu_region`]): a live
/// page, then `len` bytes CUPTI writes its records into. Made once and never unmapped; lent to
/// CUPTI again once what it held is written.
pub struct GpuRegion {
    live: *mut u8,
    buffer: *mut u8,
    len: usize,
    /// The trace file and the offset of the buffer in it.
    fd: &'static TraceFd,
    at: u64,
    /// The process whose trace file it is (a forked child must not lend it to its CUPTI).
    owner: u32,
    /// How far the worker has looked at the records CUPTI wrote (for their kernel names).
    pub looked_at: std::sync::atomic::AtomicUsize,
}

// SAFETY: the region's memory is handed between CUPTI, the thread CUPTI completes buffers on
// and the worker, one at a time; the live page's fields are atomics.
unsafe impl Sync for GpuRegion {}
unsafe impl Send for GpuRegion {}

impl GpuRegion {
    /// A region over `live` (one page) followed by `len` bytes of buffer, pages of the trace
    /// file `fd` at offset `at` with their disk blocks; the memory must stay mapped for the life
    /// of the process.
    pub fn new(live: *mut u8, len: usize, fd: &'static TraceFd, at: u64) -> GpuRegion {
        GpuRegion {
            live,
            // SAFETY: the buffer follows the live page in the same mapping.
            buffer: unsafe { live.add(RING_PAGE) },
            len,
            fd,
            at,
            owner: std::process::id(),
            looked_at: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The 8 bytes at `at` (a multiple of 8) of the buffer, which CUPTI may be writing.
    pub fn word(&self, at: usize) -> Option<u64> {
        if !at.is_multiple_of(8) || at + 8 > self.len {
            return None;
        }
        // SAFETY: an aligned u64 inside the buffer, which is mapped for the life of the
        // process; read atomically, as CUPTI may be writing it.
        Some(unsafe { &*(self.buffer.add(at) as *const AtomicU64) }.load(Ordering::Acquire))
    }

    /// Whether it is this process's (not its parent's, inherited through `fork`).
    pub fn is_ours(&self) -> bool {
        self.owner == std::process::id()
    }

    fn field(&self, at: usize) -> &AtomicU64 {
        debug_assert!(at.is_multiple_of(8) && at < RING_PAGE);
        // SAFETY: the live page is mapped for the life of the process, page-aligned, and every
        // field is an aligned u64 only ever accessed atomically.
        unsafe { &*(self.live.add(at) as *const AtomicU64) }
    }

    /// The buffer's first byte and its length, for CUPTI.
    pub fn buffer(&self) -> (*mut u8, usize) {
        (self.buffer, self.len)
    }

    /// CUPTI holds the buffer.
    /// False when it cannot be: the trace ended and its blocks were given back.
    pub fn lent(&self) -> bool {
        use rtrace_format::gpu_region::{live, BUFFER_FREE, BUFFER_WITH_CUPTI};
        self.looked_at.store(0, Ordering::Relaxed);
        self.field(live::WRITTEN_AT).store(0, Ordering::Relaxed);
        self.field(live::STATE)
            .compare_exchange(
                BUFFER_FREE,
                BUFFER_WITH_CUPTI,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// CUPTI handed the buffer back with `valid` bytes of records, timed on the program's
    /// clock or not.
    pub fn delivered(&self, valid: usize, program_clock: bool) {
        use rtrace_format::gpu_region::{live, BUFFER_DELIVERED};
        self.field(live::VALID)
            .store(valid as u64, Ordering::Relaxed);
        self.field(live::PROGRAM_CLOCK)
            .store(u64::from(program_clock), Ordering::Relaxed);
        self.field(live::STATE)
            .store(BUFFER_DELIVERED, Ordering::Release);
    }

    /// The chunks of its records are written from file offset `at` on.
    pub fn written_from(&self, at: u64) {
        use rtrace_format::gpu_region::live;
        self.field(live::WRITTEN_AT).store(at, Ordering::Release);
    }

    /// Its records are written: the region holds nothing, and the bytes CUPTI delivered are
    /// zero again (its pages stay in memory and on disk: nothing is faulted in anew).
    pub fn clear(&self) {
        use rtrace_format::gpu_region::{live, BUFFER_FREE};
        self.field(live::STATE)
            .store(BUFFER_FREE, Ordering::Release);
        let valid = (self.field(live::VALID).load(Ordering::Relaxed) as usize).min(self.len);
        // SAFETY: the buffer is mapped, and no one else holds it now.
        unsafe { std::ptr::write_bytes(self.buffer, 0, valid) };
        self.field(live::VALID).store(0, Ordering::Relaxed);
    }

    /// The trace ends: a region that holds nothing gives its disk blocks back (it reads as
    /// zeros, as a free region does).
    pub fn give_back_blocks(&self) {
        use rtrace_format::gpu_region::{live, BUFFER_FREE, BUFFER_RETIRED};
        let retired = self.field(live::STATE).compare_exchange(
            BUFFER_FREE,
            BUFFER_RETIRED,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        if retired.is_ok() {
            if let Ok(fd) = self.fd.get() {
                let _ = crate::sys::punch_hole(fd, self.at, self.len as u64);
            }
        }
    }
}
