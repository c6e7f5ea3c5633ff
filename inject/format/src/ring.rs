//! A thread's buffer as it lies in the trace file: a *ring region* chunk.
//!
//! The library keeps each thread's ring in pages of the trace file itself (mapped shared), so
//! what a thread recorded is in the file however the process ends (`abort`, a fatal signal,
//! `exec`, SIGKILL): the kernel keeps the pages. The worker copies entries out into ordinary
//! chunks as before; a reader rebuilds, from each region, the entries no chunk holds
//! ([`Salvage`]).
//!
//! ```text
//! ring region chunk := chunk header (kind RingRegion, flags FLAG_LIVE)
//!                      payload = RingDescriptor (checksummed) zero pad
//!                                live page (RING_PAGE bytes, written in place)
//!                                capacity slots of 32 bytes (an ApiRecord's size each)
//! ```
//!
//! The descriptor is written once; the chunk's checksum covers it and the header's fields
//! only ([`ChunkHeader::checksum`]). The live page holds the ring's positions and the
//! thread it serves now (a region is reused by a later thread once drained): every field a
//! little-endian u64 at the offset [`live`] names. Positions count entries from the ring's
//! `base` (a multiple of 2^[`POSITION_BITS`], distinct for every thread a process's regions
//! serve), so the slot of position `p` is `p % capacity`. The chunks the worker makes from a
//! ring carry in `seq` the position after their last entry: a reader knows which entries
//! reached a chunk even when the process died before it could say so in the live page.

use crate::api::ApiRecord;
use crate::chunk::{ChunkHeader, ChunkKind, CHUNK_HEADER_LEN, LIVE_CHECKED_LEN};
use crate::gpu::{NvtxEvent, NvtxKind};
use crate::payload::Chunk;
use crate::values::{encode_value, ThreadInfo};

pub use crate::chunk::FLAG_LIVE;

/// A chunk a reader rebuilt from a ring region (entries no chunk of the file holds): `seq`
/// is the position of its first entry.
pub const FLAG_SALVAGED: u16 = 2;

/// The live page's size, and the alignment of the live page and slots in the file.
pub const RING_PAGE: usize = 4096;
/// Ring positions of one thread lie in `base .. base + 2^POSITION_BITS`.
pub const POSITION_BITS: u32 = 40;
/// The layout this module describes (the descriptor's `layout`).
pub const RING_LAYOUT: u32 = 1;

crate::codec::record! {
    /// The fixed part of a ring region, at the start of its payload.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct RingDescriptor: 32 bytes {
        /// [`RING_LAYOUT`].
        pub layout: u32,
        /// Bytes per slot ([`ApiRecord::SIZE`]).
        pub slot_size: u32,
        /// Slots in the ring (a power of two).
        pub capacity: u64,
        /// Offset of the live page in the payload.
        pub live_at: u32,
        /// 1: timestamps are time-stamp-counter ticks (converted with the live page's pairs);
        /// 0: `CLOCK_MONOTONIC` ns.
        pub tsc: u32,
        _: [u8; 8],
    }
}

const _: () = assert!(RingDescriptor::SIZE == LIVE_CHECKED_LEN);

/// Offsets of the live page's fields (each a little-endian u64).
pub mod live {
    /// Position after the last entry written (the producer's; alone on its cache lines).
    pub const HEAD: usize = 0;
    /// Position up to which entries are in chunks of the file (the consumer's).
    pub const TAIL: usize = 128;
    /// Entries lost (ring full) since the thread's first position; a reader subtracts what
    /// the thread's chunks (of this base) counted.
    pub const DROPPED: usize = 136;
    /// Slots backed by the file so far (from slot 0; the ring grows to `capacity`).
    pub const ALLOCATED: usize = 144;
    /// [`super::REGION_FREE`], [`super::REGION_IN_USE`] or [`super::REGION_CLOSED`].
    pub const STATE: usize = 152;
    /// The thread's OS id.
    pub const TID: usize = 160;
    /// The thread's first position.
    pub const BASE: usize = 168;
    /// A (ticks, ns) pair read when the process's trace began.
    pub const CAL0_TICKS: usize = 176;
    pub const CAL0_NS: usize = 184;
    /// The latest (ticks, ns) pair, written by the consumer; `CAL_SEQ` is odd while it writes.
    pub const CAL_SEQ: usize = 192;
    pub const CAL1_TICKS: usize = 200;
    pub const CAL1_NS: usize = 208;
    /// The `errno` of a failed write of the trace (28: the disk is full); 0: none.
    pub const WRITE_ERROR: usize = 216;
    /// The thread's name, NUL-padded.
    pub const NAME: usize = 256;
    pub const NAME_LEN: usize = 64;
}

pub const REGION_FREE: u64 = 0;
pub const REGION_IN_USE: u64 = 1;
pub const REGION_CLOSED: u64 = 2;

/// What a thread's ring carries, in order, one [`ApiRecord`]-sized slot each.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RingEntry {
    /// A recorded driver call; timestamps are raw ticks.
    Call(ApiRecord),
    /// The call in progress `call` (rtrace's correlation id) is `source` for the GPU-activity
    /// source (CUPTI's correlation id); `symbol`: the address of the kernel's name CUPTI gave
    /// for a launch (0: none). Links never reach the file as API records.
    Link { call: u64, source: u32, symbol: u64 },
    /// An NVTX event (reaches the file in an NvtxEvents chunk).
    Nvtx(RingNvtx),
    /// The colour and payload of the NVTX event just before.
    NvtxAttributes {
        color: u32,
        color_type: u8,
        payload: u64,
        payload_type: u8,
    },
}

/// An NVTX event as it travels in a ring.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RingNvtx {
    pub kind: NvtxKind,
    /// The message's string id.
    pub message: u32,
    /// When, in raw ticks (stamped by [`RingEntry::stamped`]).
    pub time: u64,
    pub value: u64,
    pub domain: u32,
    pub category: u32,
}

/// The slot encoding: a slot's `function` tells the entry. Calls have the driver's function
/// ids (far below these tags); a link is [`LINK`] (`correlation` the call, `result` the
/// source's id, `start_ns` the kernel name's address); an NVTX event is `NVTX | kind` (kind below 0x100; `result` the message,
/// `start_ns` the time, `end_ns` the value, `correlation` domain << 32 | category); its
/// attributes are [`NVTX_ATTRIBUTES`] (`result` the colour, `start_ns` the payload, `end_ns`
/// payload type << 8 | colour type).
const LINK: u32 = u32::MAX;
const NVTX: u32 = 0xFFFF_FE00;
const NVTX_ATTRIBUTES: u32 = NVTX | 0xFF;

impl RingEntry {
    /// Whether a slot whose `function` is `function` holds a call (its bytes are then an
    /// [`ApiRecord`]'s, times in raw ticks).
    #[inline(always)]
    pub fn is_call(function: u32) -> bool {
        function < NVTX
    }

    /// The entry with its time set to `ticks` (NVTX events; others unchanged).
    #[inline(always)]
    pub fn stamped(self, ticks: u64) -> RingEntry {
        match self {
            RingEntry::Nvtx(mut e) => {
                e.time = ticks;
                RingEntry::Nvtx(e)
            }
            other => other,
        }
    }

    /// The entry as one slot.
    #[inline(always)]
    pub fn encode(self) -> ApiRecord {
        match self {
            RingEntry::Call(rec) => rec,
            RingEntry::Link {
                call,
                source,
                symbol,
            } => ApiRecord {
                function: LINK,
                result: source,
                start_ns: symbol,
                end_ns: 0,
                correlation: call,
            },
            RingEntry::Nvtx(e) => ApiRecord {
                function: NVTX | u32::from(e.kind.to_u16()),
                result: e.message,
                start_ns: e.time,
                end_ns: e.value,
                correlation: (u64::from(e.domain) << 32) | u64::from(e.category),
            },
            RingEntry::NvtxAttributes {
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

    /// The entry a slot holds.
    #[inline(always)]
    pub fn decode(rec: ApiRecord) -> RingEntry {
        if rec.function < NVTX {
            return RingEntry::Call(rec);
        }
        if rec.function == LINK {
            return RingEntry::Link {
                call: rec.correlation,
                source: rec.result,
                symbol: rec.start_ns,
            };
        }
        if rec.function == NVTX_ATTRIBUTES {
            return RingEntry::NvtxAttributes {
                color: rec.result,
                color_type: rec.end_ns as u8,
                payload: rec.start_ns,
                payload_type: (rec.end_ns >> 8) as u8,
            };
        }
        RingEntry::Nvtx(RingNvtx {
            kind: NvtxKind::from_u16((rec.function & 0xFF) as u16),
            message: rec.result,
            time: rec.start_ns,
            value: rec.end_ns,
            domain: (rec.correlation >> 32) as u32,
            category: rec.correlation as u32,
        })
    }

    /// Appends an NVTX entry to `out` as an [`NvtxEvent`] (its attributes complete the event
    /// just before). Calls and links append nothing.
    pub fn append_nvtx(self, out: &mut Vec<u8>, to_ns: impl Fn(u64) -> u64) {
        const SIZE: usize = NvtxEvent::SIZE;
        match self {
            RingEntry::NvtxAttributes {
                color,
                color_type,
                payload,
                payload_type,
            } => {
                let Some(at) = out.len().checked_sub(SIZE) else {
                    return;
                };
                let Ok(bytes) = <&[u8; SIZE]>::try_from(&out[at..]) else {
                    return;
                };
                let mut last = NvtxEvent::from_bytes(bytes);
                last.color = color;
                last.payload = payload;
                last.payload_type = payload_type;
                last.color_type = color_type;
                out[at..].copy_from_slice(&last.to_bytes());
            }
            RingEntry::Nvtx(n) => {
                let ev = NvtxEvent {
                    kind: n.kind,
                    message: n.message,
                    time_ns: to_ns(n.time),
                    value: n.value,
                    domain: n.domain,
                    category: n.category,
                    ..Default::default()
                };
                out.extend_from_slice(&ev.to_bytes());
            }
            RingEntry::Call(_) | RingEntry::Link { .. } => {}
        }
    }
}

/// Where a ring region's parts lie, for a region whose chunk header starts at file offset
/// `at`: the payload's length and the live page's offset in it (the live page starts on a
/// [`RING_PAGE`] boundary of the file).
pub fn region_layout(at: u64, capacity: u64) -> (u32, u32) {
    let live_at = live_page_offset(at, RingDescriptor::SIZE);
    let len = live_at as u64 + RING_PAGE as u64 + capacity * ApiRecord::SIZE as u64;
    (len as u32, live_at)
}

/// The offset in its payload of the live page of a region whose chunk header starts at file
/// offset `at` and whose descriptor is `descriptor` bytes: the first [`RING_PAGE`] boundary
/// of the file after the descriptor.
pub fn live_page_offset(at: u64, descriptor: usize) -> u32 {
    let payload_start = at + CHUNK_HEADER_LEN as u64;
    let page = RING_PAGE as u64;
    let live = (payload_start + descriptor as u64).div_ceil(page) * page;
    (live - payload_start) as u32
}

/// A ring region as a reader finds it: the thread it serves and the entries no chunk of the
/// file may hold yet (from its tail to its head).
#[derive(Clone, Debug)]
struct Region {
    offset: u64,
    tid: u64,
    name: String,
    tail: u64,
    dropped: u64,
    write_error: u64,
    /// Entries from `tail`, as slots.
    slots: Vec<ApiRecord>,
    /// (CUPTI correlation id, call, kernel name's address) of every link entry in the ring.
    links: Vec<(u32, u64, u64)>,
    /// The latest start of a call the file's chunks hold for this thread: rebuilt calls,
    /// converted by a line that may differ from the writer's by a few ns, start no earlier.
    not_before: u64,
    convert: TickConverter,
}

/// Ticks to ns from the live page's pairs: the line through them, extended past the latest.
#[derive(Clone, Copy, Debug)]
struct TickConverter {
    tsc: bool,
    t0: u64,
    n0: u64,
    t1: u64,
    n1: u64,
}

impl TickConverter {
    fn ns(&self, t: u64) -> u64 {
        if !self.tsc {
            return t;
        }
        let (dt, dn) = (self.t1.wrapping_sub(self.t0), self.n1.wrapping_sub(self.n0));
        let per_tick = if dt == 0 || dn == 0 {
            1.0
        } else {
            dn as f64 / dt as f64
        };
        let d = (t.wrapping_sub(self.t1) as i64 as f64 * per_tick).round() as i64;
        self.n1.saturating_add_signed(d)
    }
}

fn field(page: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(page[at..at + 8].try_into().unwrap())
}

/// Reads a ring region chunk's live state. `None` for a region that serves no thread or
/// whose descriptor this reader does not know.
fn parse_region(offset: u64, payload: &[u8], from: Option<u64>) -> Option<Region> {
    let d = RingDescriptor::from_bytes(payload.get(..RingDescriptor::SIZE)?.try_into().ok()?);
    if d.layout != RING_LAYOUT || d.slot_size as usize != ApiRecord::SIZE {
        return None;
    }
    let cap = d.capacity;
    if cap == 0 || !cap.is_power_of_two() {
        return None;
    }
    let live = d.live_at as usize;
    let page = payload.get(live..live + RING_PAGE)?;
    let state = field(page, live::STATE);
    if state == REGION_FREE {
        return None;
    }
    let slots_at = live + RING_PAGE;
    let head = field(page, live::HEAD);
    let base = field(page, live::BASE);
    let tail = field(page, live::TAIL).max(from.unwrap_or(0)).max(base);
    // A torn or foreign page: more waiting than the ring holds, or positions of no thread.
    if head < tail || head - tail > cap || head - base >= 1 << POSITION_BITS {
        return None;
    }
    let allocated = field(page, live::ALLOCATED).min(cap);
    // Every link the ring still holds, drained or not: GPU records rebuilt from CUPTI's
    // buffers find their calls through them.
    let mut links = Vec::new();
    for i in 0..allocated as usize {
        let at = slots_at + i * ApiRecord::SIZE;
        if let Some(b) = payload.get(at..at + ApiRecord::SIZE) {
            if let RingEntry::Link {
                call,
                source,
                symbol,
            } = RingEntry::decode(ApiRecord::from_bytes(b.try_into().unwrap()))
            {
                links.push((source, call, symbol));
            }
        }
    }
    let mut slots = Vec::with_capacity((head - tail) as usize);
    for p in tail..head {
        let i = (p & (cap - 1)) as usize;
        if i as u64 >= allocated {
            break;
        }
        let at = slots_at + i * ApiRecord::SIZE;
        let Some(b) = payload.get(at..at + ApiRecord::SIZE) else {
            break;
        };
        slots.push(ApiRecord::from_bytes(b.try_into().unwrap()));
    }
    let name = &page[live::NAME..live::NAME + live::NAME_LEN];
    let name_len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Some(Region {
        offset,
        tid: field(page, live::TID),
        name: String::from_utf8_lossy(&name[..name_len]).into_owned(),
        tail,
        dropped: field(page, live::DROPPED),
        write_error: field(page, live::WRITE_ERROR),
        slots,
        links,
        not_before: 0,
        convert: TickConverter {
            tsc: d.tsc != 0,
            t0: field(page, live::CAL0_TICKS),
            n0: field(page, live::CAL0_NS),
            t1: field(page, live::CAL1_TICKS),
            n1: field(page, live::CAL1_NS),
        },
    })
}

/// A chunk rebuilt from a region (flags [`FLAG_SALVAGED`], `seq` its first position).
fn salvaged_chunk(
    region: &Region,
    kind: ChunkKind,
    from: u64,
    dropped: u64,
    payload: Vec<u8>,
) -> Chunk {
    let mut header = ChunkHeader::new(kind, region.tid, from, dropped, &payload);
    header.flags = FLAG_SALVAGED;
    header.crc = header.checksum(&payload);
    Chunk {
        offset: region.offset,
        header,
        payload,
    }
}

/// The API records and NVTX events of `region`'s entries, as chunks (API records first; a
/// chunk only when it holds something, the API chunk also when entries were lost).
fn region_chunks(region: &Region) -> Vec<Chunk> {
    let mut calls = Vec::new();
    let mut nvtx = Vec::new();
    let to_ns = |t| region.convert.ns(t);
    for &slot in &region.slots {
        match RingEntry::decode(slot) {
            RingEntry::Call(mut rec) => {
                rec.start_ns = to_ns(rec.start_ns).max(region.not_before);
                rec.end_ns = to_ns(rec.end_ns).max(rec.start_ns);
                rec.write_to(&mut calls);
            }
            e => e.append_nvtx(&mut nvtx, to_ns),
        }
    }
    let mut out = Vec::new();
    if !calls.is_empty() || region.dropped > 0 {
        out.push(salvaged_chunk(
            region,
            ChunkKind::ApiRecords,
            region.tail,
            region.dropped,
            calls,
        ));
    }
    if !nvtx.is_empty() {
        out.push(salvaged_chunk(
            region,
            ChunkKind::NvtxEvents,
            region.tail,
            0,
            nvtx,
        ));
    }
    out
}

/// Rebuilds, from ring region chunk `ring` read again, the salvaged chunk of kind `kind`
/// whose first position was `from` (as a reader's first pass gave it).
pub fn rebuild_salvaged(ring: &Chunk, kind: ChunkKind, from: u64) -> Option<Chunk> {
    let region = parse_region(ring.offset, &ring.payload, Some(from))?;
    region_chunks(&region)
        .into_iter()
        .find(|c| c.header.kind == kind)
}

/// What the chunks of one thread's ring held.
#[derive(Clone, Copy, Default)]
struct Reached {
    position: u64,
    dropped: u64,
    latest_start: u64,
}

/// What a reader collects on its way through a file to rebuild, at its end, the entries of
/// its ring regions that no chunk holds: the regions' waiting entries, and for every thread's
/// positions the furthest a chunk reached.
#[derive(Default)]
pub struct Salvage {
    regions: Vec<Region>,
    /// (thread, position >> POSITION_BITS) → what the thread's chunks held: the furthest
    /// position, the losses counted, and the latest start of a call.
    reached: std::collections::HashMap<(u64, u64), Reached>,
    announced: std::collections::HashSet<u64>,
}

impl Salvage {
    /// Notes a chunk read from the file.
    pub fn note(&mut self, chunk: &Chunk) {
        let h = &chunk.header;
        match h.kind {
            ChunkKind::RingRegion => {
                if let Some(r) = parse_region(chunk.offset, &chunk.payload, None) {
                    self.regions.push(r);
                }
            }
            ChunkKind::ApiRecords | ChunkKind::ApiRecordsInTicks | ChunkKind::NvtxEvents
                if h.seq >> POSITION_BITS != 0 =>
            {
                let e = self
                    .reached
                    .entry((h.thread, h.seq >> POSITION_BITS))
                    .or_default();
                e.position = e.position.max(h.seq);
                e.dropped = e.dropped.saturating_add(h.dropped);
                // A chunk's calls are in order: its last one starts latest.
                let n = chunk.payload.len();
                let start = match h.kind {
                    ChunkKind::ApiRecords if n >= ApiRecord::SIZE => {
                        let last = &chunk.payload[n - ApiRecord::SIZE..];
                        Some(u64::from_le_bytes(last[8..16].try_into().unwrap()))
                    }
                    ChunkKind::ApiRecordsInTicks => crate::ticks::last_api_start(&chunk.payload),
                    _ => None,
                };
                if let Some(start) = start {
                    e.latest_start = e.latest_start.max(start);
                }
            }
            ChunkKind::ThreadInfo => {
                self.announced.insert(h.thread);
            }
            _ => {}
        }
    }

    /// (CUPTI correlation id, rtrace's, kernel name's address) of the link entries the rings
    /// hold.
    pub fn links(&self) -> impl Iterator<Item = (u32, u64, u64)> + '_ {
        self.regions.iter().flat_map(|r| r.links.iter().copied())
    }

    /// The `errno` of a failed write any region reports (28: the disk was full).
    pub fn write_error(&self) -> Option<u64> {
        self.regions.iter().map(|r| r.write_error).find(|&e| e != 0)
    }

    /// The chunks rebuilt from the regions, in file order: each thread's name (if no chunk
    /// gave it), then its entries past the furthest position a chunk reached.
    pub fn finish(mut self) -> Vec<Chunk> {
        let mut out = Vec::new();
        for mut region in std::mem::take(&mut self.regions) {
            let key = (region.tid, region.tail >> POSITION_BITS);
            let reached = self.reached.get(&key).copied().unwrap_or_default();
            region.dropped = region.dropped.saturating_sub(reached.dropped);
            region.not_before = reached.latest_start;
            let skip = reached.position.saturating_sub(region.tail) as usize;
            if skip > 0 {
                region.slots.drain(..skip.min(region.slots.len()));
                region.tail = reached.position;
            }
            let chunks = region_chunks(&region);
            if chunks.is_empty() {
                continue;
            }
            if self.announced.insert(region.tid) {
                let payload = encode_value(&ThreadInfo {
                    tid: region.tid,
                    name: region.name.clone(),
                });
                out.push(salvaged_chunk(
                    &region,
                    ChunkKind::ThreadInfo,
                    region.tail,
                    0,
                    payload,
                ));
            }
            out.extend(chunks);
        }
        out
    }
}
