//! A single-producer single-consumer ring of API records: one per traced thread.
//!
//! The owning thread pushes with one atomic load and one store (it re-reads the
//! consumer's `tail` only when its own copy says the ring is full); when the ring
//! is full it counts the loss and returns (it never blocks). The consumer (the
//! worker, or the thread doing the final flush under the consumer lock) copies
//! records out and advances `tail`. The producer's and the consumer's positions
//! live on cache lines of their own, so a drain does not slow the next pushes.

use rtrace_format::ApiRecord;
use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A value alone on its cache line(s) (128 bytes: adjacent-line prefetch pairs lines).
#[repr(align(128))]
struct Line<T>(T);

/// The producer's side: only the owning thread touches it.
struct Producer {
    /// Next slot the producer writes (only the producer stores it).
    head: AtomicU64,
    /// The consumer's `tail` as the producer last read it (a lower bound of it).
    tail_seen: Cell<u64>,
}

/// `ApiRecord::function` of a link record: `correlation` is rtrace's id of the call in
/// progress and `result` the GPU-activity source's (CUPTI's) id for it. Links travel in the
/// thread's ring and never reach the file as API records.
pub const LINK: u32 = u32::MAX;

/// `ApiRecord::function` of an NVTX event is `NVTX | kind` (`rtrace_format::NvtxKind`, below
/// 0x100), or [`NVTX_ATTRIBUTES`] for the colour and payload of the event just before:
/// `result` the message's string id (the colour), `start_ns` the time in ticks (the
/// payload), `end_ns` the value (payload type << 8 | colour type), `correlation` domain << 32
/// | category. NVTX events travel in the thread's ring and reach the file as NvtxEvents chunks.
pub const NVTX: u32 = 0xFFFF_FE00;
pub const NVTX_ATTRIBUTES: u32 = NVTX | 0xFF;

/// Whether `function` tags an NVTX event or its attributes.
pub fn is_nvtx(function: u32) -> bool {
    function & 0xFFFF_FF00 == NVTX
}

pub struct Ring {
    producer: Line<Producer>,
    /// Next slot the consumer reads (only the consumer stores it).
    tail: Line<AtomicU64>,
    /// Records lost since the consumer last took the count.
    dropped: AtomicU64,
    /// Set when the owning thread has exited: drain, then free.
    closed: AtomicBool,
    /// OS thread id of the producer.
    pub tid: u64,
    /// The producer's thread name, sent with its first chunk.
    pub name: String,
    /// Chunks written for this ring so far (consumer only).
    pub seq: AtomicU64,
    /// Whether its ThreadInfo chunk was written (consumer only).
    pub announced: AtomicBool,
    mask: u64,
    slots: Box<[UnsafeCell<ApiRecord>]>,
}

// SAFETY: slots are written only by the single producer before it publishes
// them with a release store of `head`, and read only by the single consumer
// after an acquire load of `head`; a slot is not rewritten until the consumer
// has released it by a release store of `tail`, which the producer reads with
// acquire ordering. `tail_seen` is touched by the producer alone.
unsafe impl Sync for Ring {}
// SAFETY: see `Sync`; the ring owns its slots.
unsafe impl Send for Ring {}

impl Ring {
    /// A ring of `capacity` records (rounded up to a power of two).
    pub fn new(capacity: usize, tid: u64, name: String) -> Ring {
        let cap = capacity.max(2).next_power_of_two();
        let slots = (0..cap)
            .map(|_| UnsafeCell::new(ApiRecord::default()))
            .collect();
        Ring {
            producer: Line(Producer {
                head: AtomicU64::new(0),
                tail_seen: Cell::new(0),
            }),
            tail: Line(AtomicU64::new(0)),
            dropped: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            tid,
            name,
            seq: AtomicU64::new(0),
            announced: AtomicBool::new(false),
            mask: cap as u64 - 1,
            slots,
        }
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Appends `rec`; returns false (and counts a loss) when full.
    /// Producer only.
    #[inline(always)]
    pub fn push(&self, rec: ApiRecord) -> bool {
        let p = &self.producer.0;
        let h = p.head.load(Ordering::Relaxed);
        if h.wrapping_sub(p.tail_seen.get()) > self.mask {
            let t = self.tail.0.load(Ordering::Acquire);
            p.tail_seen.set(t);
            if h.wrapping_sub(t) > self.mask {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return false;
            }
        }
        let slot = &self.slots[(h & self.mask) as usize];
        // SAFETY: slot `h` is not visible to the consumer until `head` passes it,
        // and the consumer has released it (tail > h - capacity).
        unsafe { *slot.get() = rec };
        p.head.store(h.wrapping_add(1), Ordering::Release);
        true
    }

    /// Records waiting to be drained.
    pub fn len(&self) -> usize {
        let h = self.producer.0.head.load(Ordering::Acquire);
        h.wrapping_sub(self.tail.0.load(Ordering::Relaxed)) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends every waiting API record, encoded, to `out` and frees their slots; returns
    /// how many it appended. Timestamps go through `to_ns` (raw ticks → ns). Link records
    /// ([`LINK`]) are handed to `on_link` instead. Consumer only.
    #[cfg(test)]
    pub fn drain_into(
        &self,
        out: &mut Vec<u8>,
        to_ns: impl Fn(u64) -> u64,
        on_link: impl FnMut(&ApiRecord),
    ) -> usize {
        self.drain_all(out, to_ns, on_link, |_| {})
    }

    /// [`Ring::drain_into`], handing NVTX events ([`NVTX`]) to `on_nvtx`, in order, with raw
    /// timestamps.
    pub fn drain_all(
        &self,
        out: &mut Vec<u8>,
        to_ns: impl Fn(u64) -> u64,
        mut on_link: impl FnMut(&ApiRecord),
        mut on_nvtx: impl FnMut(&ApiRecord),
    ) -> usize {
        let h = self.producer.0.head.load(Ordering::Acquire);
        let t = self.tail.0.load(Ordering::Relaxed);
        let n = h.wrapping_sub(t);
        let mut written = 0;
        for i in 0..n {
            let slot = &self.slots[(t.wrapping_add(i) & self.mask) as usize];
            // SAFETY: slots t..h were published by the producer's release store of head.
            let mut rec = unsafe { *slot.get() };
            if rec.function == LINK {
                on_link(&rec);
                continue;
            }
            if is_nvtx(rec.function) {
                on_nvtx(&rec);
                continue;
            }
            rec.start_ns = to_ns(rec.start_ns);
            rec.end_ns = to_ns(rec.end_ns);
            out.extend_from_slice(&rec.to_bytes());
            written += 1;
        }
        self.tail.0.store(h, Ordering::Release);
        written
    }

    /// Takes the count of records lost since the last call.
    pub fn take_dropped(&self) -> u64 {
        self.dropped.swap(0, Ordering::Relaxed)
    }

    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: u64) -> ApiRecord {
        ApiRecord {
            function: i as u32,
            result: 0,
            start_ns: i,
            end_ns: i + 1,
            correlation: i,
        }
    }

    #[test]
    fn full_ring_counts_losses_and_drains_in_order() {
        let r = Ring::new(4, 1, String::new());
        assert_eq!(r.capacity(), 4);
        for i in 0..6 {
            assert_eq!(r.push(rec(i)), i < 4);
        }
        assert_eq!(r.len(), 4);
        assert_eq!(r.take_dropped(), 2);
        assert_eq!(r.take_dropped(), 0);
        let mut out = Vec::new();
        assert_eq!(r.drain_into(&mut out, |t| t, |_| {}), 4);
        let got: Vec<u32> = out
            .chunks_exact(ApiRecord::SIZE)
            .map(|b| ApiRecord::from_bytes(b.try_into().unwrap()).function)
            .collect();
        assert_eq!(got, vec![0, 1, 2, 3]);
        assert!(r.push(rec(9)));
        out.clear();
        assert_eq!(r.drain_into(&mut out, |t| t * 10, |_| {}), 1);
        let back = ApiRecord::from_bytes(out[..32].try_into().unwrap());
        assert_eq!((back.start_ns, back.end_ns), (90, 100));
    }

    #[test]
    fn links_are_handed_over_not_written() {
        let r = Ring::new(8, 1, String::new());
        r.push(rec(1));
        r.push(ApiRecord {
            function: LINK,
            result: 77,
            correlation: 5,
            ..Default::default()
        });
        r.push(rec(2));
        let mut out = Vec::new();
        let mut links = Vec::new();
        assert_eq!(
            r.drain_into(&mut out, |t| t, |l| links.push((l.correlation, l.result))),
            2
        );
        assert_eq!(out.len(), 2 * ApiRecord::SIZE);
        assert_eq!(links, vec![(5, 77)]);
    }

    #[test]
    fn concurrent_producer_and_consumer_lose_nothing_but_counted() {
        let r = std::sync::Arc::new(Ring::new(1024, 1, String::new()));
        let p = r.clone();
        let total = 200_000u64;
        let prod = std::thread::spawn(move || {
            for i in 0..total {
                p.push(rec(i));
            }
        });
        let mut seen = Vec::new();
        let mut out = Vec::new();
        loop {
            out.clear();
            r.drain_into(&mut out, |t| t, |_| {});
            seen.extend(
                out.chunks_exact(32)
                    .map(|b| ApiRecord::from_bytes(b.try_into().unwrap()).start_ns),
            );
            if prod.is_finished() && r.is_empty() {
                break;
            }
        }
        prod.join().unwrap();
        let dropped = r.take_dropped();
        assert_eq!(seen.len() as u64 + dropped, total);
        assert!(seen.windows(2).all(|w| w[0] < w[1]));
    }
}
