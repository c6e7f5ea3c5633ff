//! The chunk: its kinds, and the fixed-size header in front of its payload.

use crate::codec::{record, u16_enum};
use crate::crc;

/// First bytes of every chunk ("CHNK").
pub const CHUNK_MAGIC: u32 = u32::from_le_bytes(*b"CHNK");
/// Size of an encoded [`ChunkHeader`].
pub const CHUNK_HEADER_LEN: usize = 40;
/// A chunk whose payload is partly live memory (a thread's ring, [`crate::ring`]): its
/// checksum covers the header's fields and the first [`LIVE_CHECKED_LEN`] bytes of the payload.
pub const FLAG_LIVE: u16 = 1;
/// The bytes of a [`FLAG_LIVE`] chunk's payload its checksum covers (the ring's descriptor).
pub const LIVE_CHECKED_LEN: usize = 32;
/// Largest payload a reader accepts for one chunk (guards against corrupt lengths).
pub const MAX_CHUNK_PAYLOAD: u32 = 256 << 20;

u16_enum! {
    /// Kinds of chunk. Readers skip kinds they do not know.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum ChunkKind {
        /// Function id → name table ([`FunctionName`](crate::FunctionName) entries).
        FunctionNames = 1,
        /// An array of [`ApiRecord`](crate::ApiRecord)s made by one thread.
        ApiRecords = 2,
        /// A thread's identity ([`ThreadInfo`](crate::ThreadInfo)).
        ThreadInfo = 3,
        /// Written once when the process finishes tracing ([`ProcessEnd`](crate::ProcessEnd)).
        ProcessEnd = 4,
        /// Something the tracer wants the reader to know ([`Notice`](crate::Notice)).
        Notice = 5,
        /// An array of [`KernelRecord`](crate::KernelRecord)s.
        Kernels = 6,
        /// An array of [`MemcpyRecord`](crate::MemcpyRecord)s.
        Memcpys = 7,
        /// An array of [`MemsetRecord`](crate::MemsetRecord)s.
        Memsets = 8,
        /// Kernel name id → name (mangled) entries, same layout as [`ChunkKind::FunctionNames`](crate::ChunkKind::FunctionNames).
        KernelNames = 9,
        /// A device's identity and attributes ([`DeviceInfo`](crate::DeviceInfo)).
        DeviceInfo = 10,
        /// An array of [`MemoryRecord`](crate::MemoryRecord)s (allocations and frees).
        Memory = 11,
        /// An array of [`SyncRecord`](crate::SyncRecord)s (host synchronizations).
        Sync = 12,
        /// An array of [`ContextRecord`](crate::ContextRecord)s.
        Contexts = 13,
        /// An array of [`StreamRecord`](crate::StreamRecord)s.
        Streams = 14,
        /// An array of [`ModuleRecord`](crate::ModuleRecord)s.
        Modules = 15,
        /// An array of [`FunctionRecord`](crate::FunctionRecord)s (names in the kernel-name table).
        Functions = 16,
        /// An array of [`PeerCopyRecord`](crate::PeerCopyRecord)s (peer-to-peer copies).
        PeerCopies = 17,
        /// NVTX string id → text (messages, names, registered strings), same layout as
        /// [`ChunkKind::FunctionNames`](crate::ChunkKind::FunctionNames).
        NvtxStrings = 18,
        /// An array of [`NvtxEvent`](crate::NvtxEvent)s made by one thread (the chunk's `thread`).
        NvtxEvents = 19,
        /// One loaded module's code image ([`ModuleImage`](crate::ModuleImage)): its content hash, CUPTI's CRC, and
        /// the image itself (compressed) in the chunk that stores it, when images are stored.
        ModuleImage = 20,
        /// How PC sampling was set up on one context ([`PcSamplingConfig`](crate::PcSamplingConfig), bincode).
        PcSamplingConfig = 21,
        /// One read of a context's PC samples ([`PcSampleBatch`](crate::PcSampleBatch), bincode).
        PcSamples = 22,
        /// Kernel profiling set up on a context ([`ProfilerSetup`](crate::ProfilerSetup), bincode).
        ProfilerSetup = 23,
        /// One profiled launch's metrics and counter data ([`KernelProfile`](crate::KernelProfile), bincode).
        KernelProfile = 24,
        /// A thread's ring as pages of the file ([`crate::ring`]): a descriptor, then live
        /// memory the library writes in place (flag [`crate::ring::FLAG_LIVE`]).
        RingRegion = 25,
        /// A CUPTI activity buffer as pages of the file ([`crate::gpu_region`]): a
        /// descriptor, then live memory CUPTI and the library write in place (flag
        /// [`crate::ring::FLAG_LIVE`]).
        GpuBufferRegion = 30,
        /// How to read the records of the GPU buffer regions
        /// ([`GpuBufferLayout`](crate::gpu_region::GpuBufferLayout), bincode).
        GpuBufferLayout = 31,
        /// Kernel names' addresses in the traced process, for the records of GPU buffer
        /// regions (16-byte entries: address, name id).
        KernelNameAddresses = 32,
        /// GPU work launched but never timed ([`UntimedWork`](crate::gpu_region::UntimedWork)s,
        /// rebuilt from GPU buffer regions).
        UntimedWork = 33,
        /// [`ApiRecord`](crate::ApiRecord)s made by one thread as its ring held them, times in
        /// raw ticks, then the clock samples that convert them ([`crate::ticks`]; format 3.0).
        ApiRecordsInTicks = 34,
        /// Source counters set up on one context
        /// ([`SourceCounterSetup`](crate::SourceCounterSetup), bincode).
        SourceCounterSetup = 40,
        /// One chosen launch's source counters per instruction
        /// ([`SourceCounterLaunch`](crate::SourceCounterLaunch), bincode).
        SourceCounters = 41,
        /// GPU metrics sampling set up on a device ([`GpuMetricsSetup`](crate::GpuMetricsSetup), bincode).
        GpuMetricsSetup = 45,
        /// One decode of a device's GPU metric samples: counter data and sample times
        /// ([`GpuMetricSamples`](crate::GpuMetricSamples), bincode).
        GpuMetricSamples = 46,
    }
    /// A kind this reader does not know; carried so it can be counted.
    Unknown(u16)
}

/// The fixed-size header in front of every chunk's payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkHeader {
    pub kind: ChunkKind,
    pub flags: u16,
    pub payload_len: u32,
    pub crc: u32,
    /// OS thread id (gettid) of the thread whose records these are; 0 for process-wide chunks.
    pub thread: u64,
    /// Sequence number of this chunk among the thread's chunks, from 0.
    pub seq: u64,
    /// Records this thread lost (buffer full) since its previous chunk.
    pub dropped: u64,
}

impl ChunkHeader {
    /// A header for `payload`, with its checksum computed.
    pub fn new(kind: ChunkKind, thread: u64, seq: u64, dropped: u64, payload: &[u8]) -> Self {
        let mut h = ChunkHeader {
            kind,
            flags: 0,
            payload_len: payload.len() as u32,
            crc: 0,
            thread,
            seq,
            dropped,
        };
        h.crc = h.checksum(payload);
        h
    }

    /// The checksum of this header's fields (except length and crc) and `payload` (of a
    /// chunk flagged [`FLAG_LIVE`], of its descriptor only).
    pub fn checksum(&self, payload: &[u8]) -> u32 {
        let payload = if self.flags & FLAG_LIVE != 0 {
            &payload[..payload.len().min(LIVE_CHECKED_LEN)]
        } else {
            payload
        };
        let fixed = ChecksummedFields {
            kind: self.kind,
            flags: self.flags,
            thread: self.thread,
            seq: self.seq,
            dropped: self.dropped,
        };
        let c = crc::crc32_update(0, &fixed.to_bytes());
        crc::crc32_update(c, payload)
    }

    pub fn encode(&self) -> [u8; CHUNK_HEADER_LEN] {
        ChunkHeaderBytes {
            magic: CHUNK_MAGIC,
            kind: self.kind,
            flags: self.flags,
            payload_len: self.payload_len,
            crc: self.crc,
            thread: self.thread,
            seq: self.seq,
            dropped: self.dropped,
        }
        .to_bytes()
    }

    /// Decodes a header; `None` if the chunk magic is wrong.
    pub fn decode(b: &[u8; CHUNK_HEADER_LEN]) -> Option<Self> {
        let h = ChunkHeaderBytes::from_bytes(b);
        if h.magic != CHUNK_MAGIC {
            return None;
        }
        Some(ChunkHeader {
            kind: h.kind,
            flags: h.flags,
            payload_len: h.payload_len,
            crc: h.crc,
            thread: h.thread,
            seq: h.seq,
            dropped: h.dropped,
        })
    }
}

record! {
    /// A [`ChunkHeader`] as it is written: [`CHUNK_MAGIC`] in front.
    struct ChunkHeaderBytes: 40 bytes {
        pub magic: u32,
        pub kind: ChunkKind,
        pub flags: u16,
        pub payload_len: u32,
        pub crc: u32,
        pub thread: u64,
        pub seq: u64,
        pub dropped: u64,
    }
}

record! {
    /// The fields of a [`ChunkHeader`] its checksum covers, in the order it covers them.
    struct ChecksummedFields: 28 bytes {
        pub kind: ChunkKind,
        pub flags: u16,
        pub thread: u64,
        pub seq: u64,
        pub dropped: u64,
    }
}
