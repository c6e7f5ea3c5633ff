//! CUPTI's activity buffers as pages of the trace file, so that the GPU work a process launched
//! is in its trace however it ends.
//!
//! ```text
//! GPU buffer region chunk := chunk header (kind GpuBufferRegion, flags FLAG_LIVE)
//!                            GpuRegionDescriptor (32 bytes, under the checksum)
//!                            padding to a page boundary of the file
//!                            live page (4 KiB: state, valid bytes, where its records went)
//!                            buffer (`len` bytes that CUPTI writes its records into)
//! GPU buffer layout chunk := bincode of GpuBufferLayout (once, before the first region)
//! ```
//!
//! CUPTI writes each record into the buffer when the work is launched, with the top bit of its
//! kind set and no GPU times, and fills the times in (clearing the bit) only when it completes
//! the buffer (measured with CUPTI 13.0 on an H100, driver 580: `tests/gpu/cupti_filebuf_probe.sh`).
//! A reader ([`GpuSalvage`]) rebuilds, from the regions CUPTI still held or the library had not
//! written out when the process ended, the completed records as kernel, copy and memset chunks
//! and the rest as [`UntimedWork`]: launched, never timed. The library writes, in the
//! [`GpuBufferLayout`], where in CUPTI's records each field lies (its own conversion reads the
//! same), so this crate needs no CUPTI header.

use crate::chunk::{ChunkHeader, ChunkKind, LIVE_CHECKED_LEN};
use crate::gpu::{CopyKind, KernelRecord, MemcpyRecord, MemoryKind, MemsetRecord, FLAG_IN_GRAPH};
use crate::payload::Chunk;
use crate::ring::{FLAG_SALVAGED, RING_PAGE};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The layout this module describes (the descriptor's `layout`).
pub const GPU_REGION_LAYOUT: u32 = 1;
/// The bit CUPTI sets in the kind of a record it has not completed.
pub const INCOMPLETE: u32 = 1 << 31;

crate::codec::record! {
    /// The fixed part of a GPU buffer region, at the start of its payload.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct GpuRegionDescriptor: 32 bytes {
        /// [`GPU_REGION_LAYOUT`].
        pub layout: u32,
        /// Offset of the live page in the payload; the buffer follows it.
        pub live_at: u32,
        /// Bytes in the buffer.
        pub len: u64,
        _: [u8; 16],
    }
}

const _: () = assert!(GpuRegionDescriptor::SIZE == LIVE_CHECKED_LEN);

/// Offsets of the live page's fields (each a little-endian u64).
pub mod live {
    /// [`super::BUFFER_FREE`], [`super::BUFFER_WITH_CUPTI`], [`super::BUFFER_DELIVERED`] or
    /// [`super::BUFFER_RETIRED`].
    pub const STATE: usize = 0;
    /// Bytes of records CUPTI delivered (a delivered buffer).
    pub const VALID: usize = 8;
    /// The file offset from which the library writes the chunks of a delivered buffer's
    /// records (0: not yet): a GPU chunk at or after it means they were written.
    pub const WRITTEN_AT: usize = 16;
    /// 1: CUPTI timed the records on the program's clock, not rtrace's.
    pub const PROGRAM_CLOCK: usize = 24;
}

/// Holds nothing: its records are in the file's chunks (or it never held any).
pub const BUFFER_FREE: u64 = 0;
/// CUPTI is writing records into it.
pub const BUFFER_WITH_CUPTI: u64 = 1;
/// CUPTI handed it back; the library has not yet written its records out.
pub const BUFFER_DELIVERED: u64 = 2;
/// Held nothing when the trace ended; its disk blocks were given back (it reads as zeros).
pub const BUFFER_RETIRED: u64 = 3;

/// Where a GPU buffer region's parts lie, for a region whose chunk header is at file offset
/// `at`: the payload's length and the live page's offset in it.
pub fn gpu_region_layout(at: u64, len: u64) -> (u32, u32) {
    let live_at = crate::ring::live_page_offset(at, GpuRegionDescriptor::SIZE);
    (
        (u64::from(live_at) + RING_PAGE as u64 + len) as u32,
        live_at,
    )
}

/// Where the fields rtrace reads lie in CUPTI's kernel records (byte offsets).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelFields {
    pub start: u32,
    pub end: u32,
    pub correlation: u32,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub graph_id: u32,
    pub graph_node_id: u32,
    /// The kernel name's address in the traced process.
    pub name: u32,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub cluster: [u32; 3],
    pub dynamic_shared_memory: u32,
    pub static_shared_memory: u32,
    /// A u16.
    pub registers_per_thread: u32,
    pub local_memory_per_thread: u32,
}

/// Where the fields rtrace reads lie in CUPTI's memory-copy records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyFields {
    pub start: u32,
    pub end: u32,
    pub bytes: u32,
    pub correlation: u32,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    /// Bytes, in CUPTI's numbering (which rtrace's kinds use).
    pub copy_kind: u32,
    pub src_kind: u32,
    pub dst_kind: u32,
    pub graph_id: u32,
    pub graph_node_id: u32,
}

/// Where the fields rtrace reads lie in CUPTI's memset records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetFields {
    pub start: u32,
    pub end: u32,
    pub bytes: u32,
    pub correlation: u32,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub value: u32,
    pub graph_id: u32,
    pub graph_node_id: u32,
}

/// How to read the records in the trace's GPU buffer regions: the size of each kind's record
/// (CUPTI's own cursor measured it) and where the fields lie.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuBufferLayout {
    /// (CUPTI activity kind, bytes from one record to the next).
    pub strides: Vec<(u32, u32)>,
    /// The kinds that are kernel records.
    pub kernel_kinds: Vec<u32>,
    pub memcpy_kind: u32,
    pub memset_kind: u32,
    pub kernel: KernelFields,
    pub memcpy: CopyFields,
    pub memset: SetFields,
    /// Capture control chose which GPU work to keep: regions are not rebuilt (the choice is
    /// the library's, at conversion).
    pub filtered: bool,
}

#[inline]
fn u32_at(r: &[u8], at: u32) -> u32 {
    r.get(at as usize..at as usize + 4)
        .map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()))
}
#[inline]
fn u64_at(r: &[u8], at: u32) -> u64 {
    r.get(at as usize..at as usize + 8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()))
}
#[inline]
fn u8_at(r: &[u8], at: u32) -> u8 {
    r.get(at as usize).copied().unwrap_or(0)
}
fn graph_flags(graph_id: u32) -> u32 {
    if graph_id != 0 {
        FLAG_IN_GRAPH
    } else {
        0
    }
}

impl KernelFields {
    /// The kernel record `r` holds, with no correlation and name id 0; flags: in a graph or not.
    /// (`#[inline]`: the library's worker calls it with its layout a constant, so that the
    /// offsets fold into the loads.)
    #[inline]
    pub fn record(&self, r: &[u8]) -> KernelRecord {
        let graph_id = u32_at(r, self.graph_id);
        let i = |at: u32| u32_at(r, at) as i32;
        KernelRecord {
            correlation: 0,
            start_ns: u64_at(r, self.start),
            end_ns: u64_at(r, self.end),
            graph_node_id: u64_at(r, self.graph_node_id),
            source_correlation: u32_at(r, self.correlation),
            name: 0,
            device: u32_at(r, self.device),
            context: u32_at(r, self.context),
            stream: u32_at(r, self.stream),
            graph_id,
            grid: self.grid.map(i),
            block: self.block.map(i),
            cluster: self.cluster.map(|at| u32_at(r, at)),
            dynamic_shared_memory: u32_at(r, self.dynamic_shared_memory),
            static_shared_memory: u32_at(r, self.static_shared_memory),
            registers_per_thread: u32_at(r, self.registers_per_thread) & 0xFFFF,
            local_memory_per_thread: u32_at(r, self.local_memory_per_thread),
            flags: graph_flags(graph_id),
        }
    }

    /// The address of the kernel's name in the traced process.
    #[inline]
    pub fn name_address(&self, r: &[u8]) -> u64 {
        u64_at(r, self.name)
    }
}

impl CopyFields {
    /// The copy record `r` holds, with no correlation; flags: in a graph or not.
    #[inline]
    pub fn record(&self, r: &[u8]) -> MemcpyRecord {
        let graph_id = u32_at(r, self.graph_id);
        MemcpyRecord {
            correlation: 0,
            start_ns: u64_at(r, self.start),
            end_ns: u64_at(r, self.end),
            bytes: u64_at(r, self.bytes),
            source_correlation: u32_at(r, self.correlation),
            device: u32_at(r, self.device),
            context: u32_at(r, self.context),
            stream: u32_at(r, self.stream),
            kind: CopyKind::from_u8(u8_at(r, self.copy_kind)),
            src_kind: MemoryKind::from_u8(u8_at(r, self.src_kind)),
            dst_kind: MemoryKind::from_u8(u8_at(r, self.dst_kind)),
            flags: graph_flags(graph_id) as u8,
            graph_id,
            graph_node_id: u64_at(r, self.graph_node_id),
        }
    }
}

impl SetFields {
    /// The memset record `r` holds, with no correlation.
    #[inline]
    pub fn record(&self, r: &[u8]) -> MemsetRecord {
        MemsetRecord {
            correlation: 0,
            start_ns: u64_at(r, self.start),
            end_ns: u64_at(r, self.end),
            bytes: u64_at(r, self.bytes),
            source_correlation: u32_at(r, self.correlation),
            device: u32_at(r, self.device),
            context: u32_at(r, self.context),
            stream: u32_at(r, self.stream),
            value: u32_at(r, self.value),
            graph_id: u32_at(r, self.graph_id),
            graph_node_id: u64_at(r, self.graph_node_id),
        }
    }
}

/// Kernel names' addresses in the traced process ([`ChunkKind::KernelNameAddresses`]): each
/// (address, kernel name id), 16 bytes.
pub fn encode_name_addresses(entries: &[(u64, u32)], out: &mut Vec<u8>) {
    for &(address, id) in entries {
        out.extend_from_slice(&address.to_le_bytes());
        out.extend_from_slice(&u64::from(id).to_le_bytes());
    }
}

fn decode_name_addresses(payload: &[u8]) -> impl Iterator<Item = (u64, u32)> + '_ {
    payload.chunks_exact(16).map(|e| {
        (
            u64::from_le_bytes(e[..8].try_into().unwrap()),
            u64::from_le_bytes(e[8..].try_into().unwrap()) as u32,
        )
    })
}

crate::codec::u8_enum! {
    /// What an untimed record was.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub enum UntimedKind {
        #[default]
        Kernel = 0 => "kernel",
        Memcpy = 1 => "memcpy",
        Memset = 2 => "memset",
    }
}

crate::codec::record! {
    /// GPU work the process launched that CUPTI had not timed when the process ended
    /// ([`ChunkKind::UntimedWork`], rebuilt from a GPU buffer region).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct UntimedWork: 32 bytes {
        /// rtrace correlation id of the API call that launched it (0: not known).
        pub correlation: u64,
        /// Bytes (copies and memsets).
        pub bytes: u64,
        /// Kernel name id ([`UNNAMED`]: not known).
        pub name: u32,
        pub device: u32,
        pub stream: u32,
        pub kind: UntimedKind,
        _: [u8; 3],
    }
}

impl Chunk {
    /// The records of an [`ChunkKind::UntimedWork`] chunk.
    pub fn untimed_work(&self) -> Result<Vec<UntimedWork>, String> {
        crate::payload::fixed_records::<_, { UntimedWork::SIZE }>(
            self,
            "untimed GPU work",
            UntimedWork::from_bytes,
        )
    }
}

/// [`UntimedWork::name`] of a kernel whose name the trace does not hold.
pub const UNNAMED: u32 = u32::MAX;

/// A GPU buffer region as a reader finds it.
struct Region {
    offset: u64,
    written_at: u64,
    program_clock: bool,
    /// The bytes CUPTI may have written records into.
    records: Vec<u8>,
}

fn field(page: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(page[at..at + 8].try_into().unwrap())
}

fn parse_region(offset: u64, payload: &[u8]) -> Option<Region> {
    let d =
        GpuRegionDescriptor::from_bytes(payload.get(..GpuRegionDescriptor::SIZE)?.try_into().ok()?);
    if d.layout != GPU_REGION_LAYOUT {
        return None;
    }
    let live = d.live_at as usize;
    let page = payload.get(live..live + RING_PAGE)?;
    let state = field(page, live::STATE);
    if state != BUFFER_WITH_CUPTI && state != BUFFER_DELIVERED {
        return None;
    }
    let buffer = payload.get(live + RING_PAGE..)?;
    let len = if state == BUFFER_DELIVERED {
        (field(page, live::VALID) as usize).min(buffer.len())
    } else {
        buffer.len().min(d.len as usize)
    };
    Some(Region {
        offset,
        written_at: field(page, live::WRITTEN_AT),
        program_clock: field(page, live::PROGRAM_CLOCK) != 0,
        records: buffer[..len].to_vec(),
    })
}

/// What a reader collects on its way through a file to rebuild, at its end, the GPU records
/// of the buffers CUPTI held or the library had not written out.
#[derive(Default)]
pub struct GpuSalvage {
    layout: Option<GpuBufferLayout>,
    regions: Vec<Region>,
    /// Kernel name address → name id.
    names: HashMap<u64, u32>,
    /// CUPTI correlation id → (rtrace's, the kernel name's address at the launch), from the
    /// rings' link entries.
    links: HashMap<u32, (u64, u64)>,
    /// The offset of the last GPU record chunk read.
    last_gpu_chunk: Option<u64>,
}

impl GpuSalvage {
    /// Notes a chunk read from the file.
    pub fn note(&mut self, chunk: &Chunk) {
        match chunk.header.kind {
            ChunkKind::GpuBufferLayout => {
                if let Ok(l) = chunk.value::<GpuBufferLayout>() {
                    self.layout = Some(l);
                }
            }
            ChunkKind::GpuBufferRegion => {
                if let Some(r) = parse_region(chunk.offset, &chunk.payload) {
                    self.regions.push(r);
                }
            }
            ChunkKind::KernelNameAddresses => {
                self.names.extend(decode_name_addresses(&chunk.payload));
            }
            ChunkKind::Kernels | ChunkKind::Memcpys | ChunkKind::Memsets
                if chunk.header.flags & FLAG_SALVAGED == 0 =>
            {
                self.last_gpu_chunk = Some(chunk.offset);
            }
            _ => {}
        }
    }

    /// Notes the link of CUPTI's correlation id `source` to rtrace's `call`, which launched the
    /// kernel whose name is at `symbol` (0: not a launch, or not known).
    pub fn link(&mut self, source: u32, call: u64, symbol: u64) {
        self.links.insert(source, (call, symbol));
    }

    /// Whether any region needs rebuilding (the links are worth collecting).
    pub fn wanted(&self) -> bool {
        !self.regions.is_empty()
    }

    /// The chunks rebuilt from the regions: kernels, copies and memsets CUPTI completed, and the
    /// work it had not timed.
    pub fn finish(self) -> Vec<Chunk> {
        let Some(layout) = self.layout.as_ref().filter(|l| !l.filtered) else {
            return Vec::new();
        };
        let strides: HashMap<u32, usize> = layout
            .strides
            .iter()
            .map(|&(k, s)| (k, s as usize))
            .collect();
        let mut out = Rebuilt::default();
        let mut offset = 0;
        for region in &self.regions {
            let written = region.written_at != 0
                && self
                    .last_gpu_chunk
                    .is_some_and(|at| at >= region.written_at);
            if written {
                continue;
            }
            offset = region.offset;
            let mut at = 0usize;
            let r = &region.records;
            while at + 4 <= r.len() {
                let raw = u32_at(r, at as u32);
                let kind = raw & !INCOMPLETE;
                let Some(&stride) = strides.get(&kind).filter(|&&s| s >= 8) else {
                    break;
                };
                let Some(rec) = r.get(at..at + stride) else {
                    break;
                };
                // CUPTI clears the bit when it has filled the times in; times on the
                // program's clock are not rtrace's.
                let timed = raw & INCOMPLETE == 0 && !region.program_clock;
                self.rebuild(layout, kind, rec, timed, &mut out);
                at += stride;
            }
        }
        let mut chunks = Vec::new();
        for (kind, payload) in [
            (ChunkKind::Kernels, out.kernels),
            (ChunkKind::Memcpys, out.copies),
            (ChunkKind::Memsets, out.sets),
            (ChunkKind::UntimedWork, out.untimed),
        ] {
            if !payload.is_empty() {
                let mut header = ChunkHeader::new(kind, 0, 0, 0, &payload);
                header.flags = FLAG_SALVAGED;
                header.crc = header.checksum(&payload);
                chunks.push(Chunk {
                    offset,
                    header,
                    payload,
                });
            }
        }
        chunks
    }

    /// Appends the record `rec` of CUPTI kind `kind` to the rebuilt payloads: timed records as
    /// they are, the others (and kernels whose name the trace lacks) as untimed work.
    fn rebuild(
        &self,
        layout: &GpuBufferLayout,
        kind: u32,
        rec: &[u8],
        timed: bool,
        out: &mut Rebuilt,
    ) {
        let correlate = |flags: u32, source: u32| match self.links.get(&source) {
            Some(&(c, _)) => (c, flags | crate::gpu::FLAG_CORRELATED),
            None => (0, flags),
        };
        let lost = if layout.kernel_kinds.contains(&kind) {
            let mut k = layout.kernel.record(rec);
            (k.correlation, k.flags) = correlate(k.flags, k.source_correlation);
            // CUPTI names the kernel in the record (not always before it completes it), and
            // the launch's callback named it too.
            let launched = self.links.get(&k.source_correlation).map_or(0, |&(_, s)| s);
            let name = [layout.kernel.name_address(rec), launched]
                .iter()
                .find_map(|a| self.names.get(a).copied());
            match name {
                Some(name) if timed && k.start_ns != 0 && k.end_ns >= k.start_ns => {
                    k.name = name;
                    return out.kernels.extend_from_slice(&k.to_bytes());
                }
                _ => UntimedWork {
                    correlation: k.correlation,
                    name: name.unwrap_or(UNNAMED),
                    device: k.device,
                    stream: k.stream,
                    kind: UntimedKind::Kernel,
                    ..Default::default()
                },
            }
        } else if kind == layout.memcpy_kind {
            let mut c = layout.memcpy.record(rec);
            let (correlation, flags) = correlate(u32::from(c.flags), c.source_correlation);
            (c.correlation, c.flags) = (correlation, flags as u8);
            if timed && c.start_ns != 0 && c.end_ns >= c.start_ns {
                return out.copies.extend_from_slice(&c.to_bytes());
            }
            UntimedWork {
                correlation,
                bytes: c.bytes,
                name: UNNAMED,
                device: c.device,
                stream: c.stream,
                kind: UntimedKind::Memcpy,
            }
        } else if kind == layout.memset_kind {
            let mut s = layout.memset.record(rec);
            s.correlation = correlate(0, s.source_correlation).0;
            if timed && s.start_ns != 0 && s.end_ns >= s.start_ns {
                return out.sets.extend_from_slice(&s.to_bytes());
            }
            UntimedWork {
                correlation: s.correlation,
                bytes: s.bytes,
                name: UNNAMED,
                device: s.device,
                stream: s.stream,
                kind: UntimedKind::Memset,
            }
        } else {
            // Contexts, streams, functions and the rest: the trace names what it needs of
            // them from the records the library converted.
            return;
        };
        out.untimed.extend_from_slice(&lost.to_bytes());
    }
}

/// The payloads rebuilt from the regions.
#[derive(Default)]
struct Rebuilt {
    kernels: Vec<u8>,
    copies: Vec<u8>,
    sets: Vec<u8>,
    untimed: Vec<u8>,
}
