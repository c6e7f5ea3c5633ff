//! A single-producer single-consumer ring of [`Entry`]s: one per traced thread.
//!
//! The owning thread pushes with one atomic load and one store (it re-reads the
//! consumer's `tail` only when its own copy says the ring is full); when the ring
//! is full it counts the loss and returns (it never blocks). The consumer (the
//! worker, or the thread doing the final flush under the consumer lock) copies
//! entries out and advances `tail`. The producer's and the consumer's positions
//! live on cache lines of their own, so a drain does not slow the next pushes.
//! An entry is a call, a link or an NVTX event ([`Entry`]); how it is laid out in a
//! slot is this module's business alone.
//!
//! Why `unsafe` here, outside the FFI and system-call modules: the slots are written by
//! one thread and read by another without a lock (`UnsafeCell` slots, published by the
//! release/acquire pair on `head` and `tail`); a safe ring would need a lock or an atomic
//! per field, on the hot path. And [`RingRef`], a thread's handle on its ring, is a raw
//! pointer holding one strong reference, so the hot path reaches the ring with one plain
//! load: an `Arc` in a `Cell` cannot be borrowed, and a thread-local with a destructor costs
//! a check on every access.

use rtrace_format::{ApiRecord, NvtxKind};
use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

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

/// What a thread's ring carries, in order. Only the ring knows how an entry is laid out in
/// its slots (one [`ApiRecord`] each, so a push stays one slot write).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Entry {
    /// A recorded driver call; timestamps are raw ticks ([`crate::clock::ticks`]).
    Call(ApiRecord),
    /// The call in progress `call` (rtrace's correlation id) is `source` for the GPU-activity
    /// source (CUPTI's correlation id). Links never reach the file as API records.
    Link { call: u64, source: u32 },
    /// An NVTX event (reaches the file in an NvtxEvents chunk).
    Nvtx(NvtxEntry),
    /// The colour and payload of the NVTX event just before.
    NvtxAttributes {
        color: u32,
        color_type: u8,
        payload: u64,
        payload_type: u8,
    },
}

/// An NVTX event as it travels in the ring.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NvtxEntry {
    pub kind: NvtxKind,
    /// The message's string id.
    pub message: u32,
    /// When, in raw ticks (stamped by [`Entry::stamped`]).
    pub time: u64,
    pub value: u64,
    pub domain: u32,
    pub category: u32,
}

/// The slot encoding: a slot's `function` tells the entry. Calls have the driver's function
/// ids (far below these tags); a link is [`LINK`] (`correlation` the call, `result` the
/// source's id); an NVTX event is `NVTX | kind` (kind below 0x100; `result` the message,
/// `start_ns` the time, `end_ns` the value, `correlation` domain << 32 | category); its
/// attributes are [`NVTX_ATTRIBUTES`] (`result` the colour, `start_ns` the payload, `end_ns`
/// payload type << 8 | colour type).
const LINK: u32 = u32::MAX;
const NVTX: u32 = 0xFFFF_FE00;
const NVTX_ATTRIBUTES: u32 = NVTX | 0xFF;

impl Entry {
    /// The entry with its time set to `ticks` (NVTX events; others unchanged).
    #[inline(always)]
    pub fn stamped(self, ticks: u64) -> Entry {
        match self {
            Entry::Nvtx(mut e) => {
                e.time = ticks;
                Entry::Nvtx(e)
            }
            other => other,
        }
    }

    #[inline(always)]
    fn encode(self) -> ApiRecord {
        match self {
            Entry::Call(rec) => rec,
            Entry::Link { call, source } => ApiRecord {
                function: LINK,
                result: source,
                start_ns: 0,
                end_ns: 0,
                correlation: call,
            },
            Entry::Nvtx(e) => ApiRecord {
                function: NVTX | u32::from(e.kind.to_u16()),
                result: e.message,
                start_ns: e.time,
                end_ns: e.value,
                correlation: (u64::from(e.domain) << 32) | u64::from(e.category),
            },
            Entry::NvtxAttributes {
                color,
                color_type,
                payload,
                payload_type,
            } => ApiRecord {
                function: NVTX_ATTRIBUTES,
                result: color,
                start_ns: payload,
                end_ns: (u64::from(payload_type) << 8) | u64::from(color_type),
                correlation: 0,
            },
        }
    }

    #[inline(always)]
    fn decode(rec: ApiRecord) -> Entry {
        if rec.function == LINK {
            return Entry::Link {
                call: rec.correlation,
                source: rec.result,
            };
        }
        if rec.function == NVTX_ATTRIBUTES {
            return Entry::NvtxAttributes {
                color: rec.result,
                color_type: rec.end_ns as u8,
                payload: rec.start_ns,
                payload_type: (rec.end_ns >> 8) as u8,
            };
        }
        if rec.function & 0xFFFF_FF00 == NVTX {
            return Entry::Nvtx(NvtxEntry {
                kind: NvtxKind::from_u16((rec.function & 0xFF) as u16),
                message: rec.result,
                time: rec.start_ns,
                value: rec.end_ns,
                domain: (rec.correlation >> 32) as u32,
                category: rec.correlation as u32,
            });
        }
        Entry::Call(rec)
    }
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

    /// Appends `entry`; returns false (and counts a loss) when full.
    /// Producer only.
    #[inline(always)]
    pub fn push(&self, entry: Entry) -> bool {
        let rec = entry.encode();
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

    /// Appends every waiting call, encoded as an API record, to `out` and frees their slots;
    /// returns how many it appended. Timestamps go through `to_ns` (raw ticks → ns). Every
    /// other entry (links, NVTX events) is handed to `other` instead, in order, with raw
    /// timestamps. Consumer only.
    pub fn drain(
        &self,
        out: &mut Vec<u8>,
        to_ns: impl Fn(u64) -> u64,
        mut other: impl FnMut(Entry),
    ) -> usize {
        let h = self.producer.0.head.load(Ordering::Acquire);
        let t = self.tail.0.load(Ordering::Relaxed);
        let n = h.wrapping_sub(t);
        let mut written = 0;
        for i in 0..n {
            let slot = &self.slots[(t.wrapping_add(i) & self.mask) as usize];
            // SAFETY: slots t..h were published by the producer's release store of head.
            let rec = unsafe { *slot.get() };
            match Entry::decode(rec) {
                Entry::Call(mut rec) => {
                    rec.start_ns = to_ns(rec.start_ns);
                    rec.end_ns = to_ns(rec.end_ns);
                    out.extend_from_slice(&rec.to_bytes());
                    written += 1;
                }
                e => other(e),
            }
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
            assert_eq!(r.push(Entry::Call(rec(i))), i < 4);
        }
        assert_eq!(r.len(), 4);
        assert_eq!(r.take_dropped(), 2);
        assert_eq!(r.take_dropped(), 0);
        let mut out = Vec::new();
        assert_eq!(r.drain(&mut out, |t| t, |_| {}), 4);
        let got: Vec<u32> = out
            .chunks_exact(ApiRecord::SIZE)
            .map(|b| ApiRecord::from_bytes(b.try_into().unwrap()).function)
            .collect();
        assert_eq!(got, vec![0, 1, 2, 3]);
        assert!(r.push(Entry::Call(rec(9))));
        out.clear();
        assert_eq!(r.drain(&mut out, |t| t * 10, |_| {}), 1);
        let back = ApiRecord::from_bytes(out[..32].try_into().unwrap());
        assert_eq!((back.start_ns, back.end_ns), (90, 100));
    }

    #[test]
    fn links_are_handed_over_not_written() {
        let r = Ring::new(8, 1, String::new());
        r.push(Entry::Call(rec(1)));
        r.push(Entry::Link {
            call: 5,
            source: 77,
        });
        r.push(Entry::Call(rec(2)));
        let mut out = Vec::new();
        let mut links = Vec::new();
        assert_eq!(
            r.drain(
                &mut out,
                |t| t,
                |e| if let Entry::Link { call, source } = e {
                    links.push((call, source))
                }
            ),
            2
        );
        assert_eq!(out.len(), 2 * ApiRecord::SIZE);
        assert_eq!(links, vec![(5, 77)]);
    }

    #[test]
    fn entries_round_trip_through_a_slot() {
        let entries = [
            Entry::Call(rec(3)),
            Entry::Link { call: 9, source: 4 },
            Entry::Nvtx(NvtxEntry {
                kind: NvtxKind::Push,
                message: 7,
                time: 11,
                value: 2,
                domain: 5,
                category: 6,
            }),
            Entry::NvtxAttributes {
                color: 0xff00ff,
                color_type: 1,
                payload: 42,
                payload_type: 3,
            },
        ];
        for e in entries {
            assert_eq!(Entry::decode(e.encode()), e);
        }
    }

    #[test]
    fn a_ring_ref_holds_and_closes() {
        let ring = Arc::new(Ring::new(4, 1, String::new()));
        let r = RingRef::none();
        assert!(!r.push(Entry::Call(rec(1))));
        r.hold(ring.clone());
        assert!(r.push(Entry::Call(rec(1))));
        assert_eq!(Arc::strong_count(&ring), 2);
        r.close();
        assert!(ring.is_closed() && !r.is_some());
        assert_eq!(Arc::strong_count(&ring), 1);
    }

    #[test]
    fn concurrent_producer_and_consumer_lose_nothing_but_counted() {
        let r = std::sync::Arc::new(Ring::new(1024, 1, String::new()));
        let p = r.clone();
        let total = 200_000u64;
        let prod = std::thread::spawn(move || {
            for i in 0..total {
                p.push(Entry::Call(rec(i)));
            }
        });
        let mut seen = Vec::new();
        let mut out = Vec::new();
        loop {
            out.clear();
            r.drain(&mut out, |t| t, |_| {});
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
