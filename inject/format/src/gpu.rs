//! GPU activity records: kernels, memory copies (peer-to-peer ones with their source and
//! destination) and memsets, with start and end on the trace's host clock (`CLOCK_MONOTONIC`
//! ns); memory allocations and frees; host synchronizations; and the resources the work ran
//! in: contexts, streams, modules and functions. Fixed-size, little-endian, one array per
//! chunk.

use crate::Chunk;

/// Reads little-endian integers at fixed offsets of a record.
struct Le<'a>(&'a [u8]);

impl Le<'_> {
    fn u8(&self, at: usize) -> u8 {
        self.0[at]
    }
    fn u32(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.0[at..at + 4].try_into().unwrap())
    }
    fn u16(&self, at: usize) -> u16 {
        u16::from_le_bytes(self.0[at..at + 2].try_into().unwrap())
    }
    fn i32(&self, at: usize) -> i32 {
        i32::from_le_bytes(self.0[at..at + 4].try_into().unwrap())
    }
    fn u64(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.0[at..at + 8].try_into().unwrap())
    }
}

/// Writes little-endian integers at fixed offsets of a record.
struct LeMut<'a>(&'a mut [u8]);

impl LeMut<'_> {
    fn u8(&mut self, at: usize, v: u8) {
        self.0[at] = v;
    }
    fn u32(&mut self, at: usize, v: u32) {
        self.0[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    fn u16(&mut self, at: usize, v: u16) {
        self.0[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }
    fn i32(&mut self, at: usize, v: i32) {
        self.0[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, at: usize, v: u64) {
        self.0[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
}

/// Record flag: the work belongs to a CUDA graph (`graph_id`, `graph_node_id` are set).
pub const FLAG_IN_GRAPH: u32 = 1;
/// Record flag: `correlation` links the record to an API record of the trace.
pub const FLAG_CORRELATED: u32 = 2;

/// One kernel execution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelRecord {
    /// rtrace correlation id of the API record that launched it (0 if unknown).
    pub correlation: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Graph node id, for work launched as part of a CUDA graph.
    pub graph_node_id: u64,
    /// The correlation id of the GPU-activity source (CUPTI's).
    pub source_correlation: u32,
    /// Index into the trace's kernel-name table.
    pub name: u32,
    pub device: u32,
    /// Context and stream ids of the activity source (not driver handles).
    pub context: u32,
    pub stream: u32,
    pub graph_id: u32,
    pub grid: [i32; 3],
    pub block: [i32; 3],
    /// Cluster dimensions; 0 when the launch set none.
    pub cluster: [u32; 3],
    pub dynamic_shared_memory: u32,
    pub static_shared_memory: u32,
    pub registers_per_thread: u32,
    pub local_memory_per_thread: u32,
    /// `FLAG_*` bits.
    pub flags: u32,
}

impl KernelRecord {
    pub const SIZE: usize = 112;

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        let mut w = LeMut(&mut b);
        w.u64(0, self.correlation);
        w.u64(8, self.start_ns);
        w.u64(16, self.end_ns);
        w.u64(24, self.graph_node_id);
        w.u32(32, self.source_correlation);
        w.u32(36, self.name);
        w.u32(40, self.device);
        w.u32(44, self.context);
        w.u32(48, self.stream);
        w.u32(52, self.graph_id);
        for i in 0..3 {
            w.i32(56 + 4 * i, self.grid[i]);
            w.i32(68 + 4 * i, self.block[i]);
            w.u32(80 + 4 * i, self.cluster[i]);
        }
        w.u32(92, self.dynamic_shared_memory);
        w.u32(96, self.static_shared_memory);
        w.u32(100, self.registers_per_thread);
        w.u32(104, self.local_memory_per_thread);
        w.u32(108, self.flags);
        b
    }

    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let r = Le(b);
        let tri = |at: usize| [r.i32(at), r.i32(at + 4), r.i32(at + 8)];
        KernelRecord {
            correlation: r.u64(0),
            start_ns: r.u64(8),
            end_ns: r.u64(16),
            graph_node_id: r.u64(24),
            source_correlation: r.u32(32),
            name: r.u32(36),
            device: r.u32(40),
            context: r.u32(44),
            stream: r.u32(48),
            graph_id: r.u32(52),
            grid: tri(56),
            block: tri(68),
            cluster: [r.u32(80), r.u32(84), r.u32(88)],
            dynamic_shared_memory: r.u32(92),
            static_shared_memory: r.u32(96),
            registers_per_thread: r.u32(100),
            local_memory_per_thread: r.u32(104),
            flags: r.u32(108),
        }
    }
}

/// Direction of a copy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum CopyKind {
    #[default]
    Unknown = 0,
    HtoD = 1,
    DtoH = 2,
    HtoA = 3,
    AtoH = 4,
    AtoA = 5,
    AtoD = 6,
    DtoA = 7,
    DtoD = 8,
    HtoH = 9,
    PtoP = 10,
}

impl CopyKind {
    pub fn from_u8(v: u8) -> Self {
        use CopyKind::*;
        match v {
            1 => HtoD,
            2 => DtoH,
            3 => HtoA,
            4 => AtoH,
            5 => AtoA,
            6 => AtoD,
            7 => DtoA,
            8 => DtoD,
            9 => HtoH,
            10 => PtoP,
            _ => Unknown,
        }
    }

    pub fn name(self) -> &'static str {
        use CopyKind::*;
        match self {
            Unknown => "unknown",
            HtoD => "HtoD",
            DtoH => "DtoH",
            HtoA => "HtoA",
            AtoH => "AtoH",
            AtoA => "AtoA",
            AtoD => "AtoD",
            DtoA => "DtoA",
            DtoD => "DtoD",
            HtoH => "HtoH",
            PtoP => "PtoP",
        }
    }
}

/// Kind of memory a copy reads or writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum MemoryKind {
    #[default]
    Unknown = 0,
    Pageable = 1,
    Pinned = 2,
    Device = 3,
    Array = 4,
    Managed = 5,
    DeviceStatic = 6,
    ManagedStatic = 7,
}

impl MemoryKind {
    pub fn from_u8(v: u8) -> Self {
        use MemoryKind::*;
        match v {
            1 => Pageable,
            2 => Pinned,
            3 => Device,
            4 => Array,
            5 => Managed,
            6 => DeviceStatic,
            7 => ManagedStatic,
            _ => Unknown,
        }
    }

    pub fn name(self) -> &'static str {
        use MemoryKind::*;
        match self {
            Unknown => "unknown",
            Pageable => "pageable",
            Pinned => "pinned",
            Device => "device",
            Array => "array",
            Managed => "managed",
            DeviceStatic => "device-static",
            ManagedStatic => "managed-static",
        }
    }
}

/// One memory copy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemcpyRecord {
    pub correlation: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub bytes: u64,
    pub source_correlation: u32,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub kind: CopyKind,
    pub src_kind: MemoryKind,
    pub dst_kind: MemoryKind,
    /// `FLAG_*` bits (low 8).
    pub flags: u8,
    pub graph_id: u32,
    pub graph_node_id: u64,
}

impl MemcpyRecord {
    pub const SIZE: usize = 64;

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        let mut w = LeMut(&mut b);
        w.u64(0, self.correlation);
        w.u64(8, self.start_ns);
        w.u64(16, self.end_ns);
        w.u64(24, self.bytes);
        w.u32(32, self.source_correlation);
        w.u32(36, self.device);
        w.u32(40, self.context);
        w.u32(44, self.stream);
        w.u8(48, self.kind as u8);
        w.u8(49, self.src_kind as u8);
        w.u8(50, self.dst_kind as u8);
        w.u8(51, self.flags);
        w.u32(52, self.graph_id);
        w.u64(56, self.graph_node_id);
        b
    }

    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let r = Le(b);
        MemcpyRecord {
            correlation: r.u64(0),
            start_ns: r.u64(8),
            end_ns: r.u64(16),
            bytes: r.u64(24),
            source_correlation: r.u32(32),
            device: r.u32(36),
            context: r.u32(40),
            stream: r.u32(44),
            kind: CopyKind::from_u8(r.u8(48)),
            src_kind: MemoryKind::from_u8(r.u8(49)),
            dst_kind: MemoryKind::from_u8(r.u8(50)),
            flags: r.u8(51),
            graph_id: r.u32(52),
            graph_node_id: r.u64(56),
        }
    }
}

/// A peer-to-peer copy (between the memory of two devices, or two contexts): a
/// [`MemcpyRecord`] (kind [`CopyKind::PtoP`]) with where the bytes came from and went to.
/// Its own chunk kind ([`crate::ChunkKind::PeerCopies`]), so that memcpy records keep their
/// size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerCopyRecord {
    /// The copy; `device`, `context` and `stream` are where it ran.
    pub copy: MemcpyRecord,
    /// The device and context that own the memory copied from.
    pub src_device: u32,
    pub src_context: u32,
    /// The device and context that own the memory copied to.
    pub dst_device: u32,
    pub dst_context: u32,
}

impl PeerCopyRecord {
    pub const SIZE: usize = 80;

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[..MemcpyRecord::SIZE].copy_from_slice(&self.copy.to_bytes());
        let mut w = LeMut(&mut b);
        w.u32(64, self.src_device);
        w.u32(68, self.src_context);
        w.u32(72, self.dst_device);
        w.u32(76, self.dst_context);
        b
    }

    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let r = Le(b);
        PeerCopyRecord {
            copy: MemcpyRecord::from_bytes(b[..MemcpyRecord::SIZE].try_into().unwrap()),
            src_device: r.u32(64),
            src_context: r.u32(68),
            dst_device: r.u32(72),
            dst_context: r.u32(76),
        }
    }
}

/// One memset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemsetRecord {
    pub correlation: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub bytes: u64,
    pub source_correlation: u32,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub value: u32,
    pub graph_id: u32,
    pub graph_node_id: u64,
}

impl MemsetRecord {
    pub const SIZE: usize = 64;

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        let mut w = LeMut(&mut b);
        w.u64(0, self.correlation);
        w.u64(8, self.start_ns);
        w.u64(16, self.end_ns);
        w.u64(24, self.bytes);
        w.u32(32, self.source_correlation);
        w.u32(36, self.device);
        w.u32(40, self.context);
        w.u32(44, self.stream);
        w.u32(48, self.value);
        w.u32(52, self.graph_id);
        w.u64(56, self.graph_node_id);
        b
    }

    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let r = Le(b);
        MemsetRecord {
            correlation: r.u64(0),
            start_ns: r.u64(8),
            end_ns: r.u64(16),
            bytes: r.u64(24),
            source_correlation: r.u32(32),
            device: r.u32(36),
            context: r.u32(40),
            stream: r.u32(44),
            value: r.u32(48),
            graph_id: r.u32(52),
            graph_node_id: r.u64(56),
        }
    }
}

/// A memory record's or sync record's `stream` (or `event`) when it names none: CUPTI's
/// `CUPTI_INVALID_STREAM_ID` / `CUPTI_SYNCHRONIZATION_INVALID_VALUE`.
pub const ID_NONE: u32 = u32::MAX;

/// What a memory record is: an allocation or a release.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum MemoryOperation {
    #[default]
    Unknown = 0,
    Alloc = 1,
    Free = 2,
}

impl MemoryOperation {
    pub fn from_u8(v: u8) -> Self {
        match v {
            1 => MemoryOperation::Alloc,
            2 => MemoryOperation::Free,
            _ => MemoryOperation::Unknown,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            MemoryOperation::Unknown => "unknown",
            MemoryOperation::Alloc => "alloc",
            MemoryOperation::Free => "free",
        }
    }
}

/// The memory pool a stream-ordered allocation came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum MemoryPoolType {
    /// Not a pool allocation.
    #[default]
    None = 0,
    /// A pool of this process.
    Local = 1,
    /// A pool imported from another process.
    Imported = 2,
}

impl MemoryPoolType {
    pub fn from_u8(v: u8) -> Self {
        match v {
            1 => MemoryPoolType::Local,
            2 => MemoryPoolType::Imported,
            _ => MemoryPoolType::None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            MemoryPoolType::None => "none",
            MemoryPoolType::Local => "local",
            MemoryPoolType::Imported => "imported",
        }
    }
}

/// One memory allocation or release (`cuMemAlloc*`, `cuMemAllocHost*`, `cuMemAllocManaged`,
/// `cuMemAllocAsync`, `cuMemFree*`, ...).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryRecord {
    /// rtrace correlation id of the API record that made it (valid with `FLAG_CORRELATED`).
    pub correlation: u64,
    /// When the allocation or release happened (host clock), ns.
    pub timestamp_ns: u64,
    /// The allocation's address (device or host virtual address).
    pub address: u64,
    /// The allocation's size; a release carries the size of what it releases.
    pub bytes: u64,
    /// Program counter of the operation (0 when the source does not say).
    pub pc: u64,
    /// Pool allocations: the pool's base address (else 0).
    pub pool_address: u64,
    /// Pool allocations: the pool's size for a local pool, the exporting process id for an
    /// imported one (else 0).
    pub pool_size: u64,
    /// Local pool allocations: the bytes of the pool in use (else 0).
    pub pool_utilized: u64,
    /// Local pool allocations: the pool's release threshold, bytes (else 0).
    pub pool_release_threshold: u64,
    /// The correlation id of the GPU-activity source (CUPTI's).
    pub source_correlation: u32,
    pub device: u32,
    /// Context and stream ids of the activity source; `stream` is [`ID_NONE`] except for
    /// stream-ordered (async) operations.
    pub context: u32,
    pub stream: u32,
    pub operation: MemoryOperation,
    /// What kind of memory: device, pinned (page-locked host), managed, ...
    pub kind: MemoryKind,
    pub pool_type: MemoryPoolType,
    /// `FLAG_*` bits (low 8).
    pub flags: u8,
    /// Made through a stream-ordered API (`cuMemAllocAsync`, `cuMemFreeAsync`, ...).
    pub is_async: bool,
}

impl MemoryRecord {
    pub const SIZE: usize = 96;

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        let mut w = LeMut(&mut b);
        w.u64(0, self.correlation);
        w.u64(8, self.timestamp_ns);
        w.u64(16, self.address);
        w.u64(24, self.bytes);
        w.u64(32, self.pc);
        w.u64(40, self.pool_address);
        w.u64(48, self.pool_size);
        w.u64(56, self.pool_utilized);
        w.u64(64, self.pool_release_threshold);
        w.u32(72, self.source_correlation);
        w.u32(76, self.device);
        w.u32(80, self.context);
        w.u32(84, self.stream);
        w.u8(88, self.operation as u8);
        w.u8(89, self.kind as u8);
        w.u8(90, self.pool_type as u8);
        w.u8(91, self.flags);
        w.u8(92, u8::from(self.is_async));
        b
    }

    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let r = Le(b);
        MemoryRecord {
            correlation: r.u64(0),
            timestamp_ns: r.u64(8),
            address: r.u64(16),
            bytes: r.u64(24),
            pc: r.u64(32),
            pool_address: r.u64(40),
            pool_size: r.u64(48),
            pool_utilized: r.u64(56),
            pool_release_threshold: r.u64(64),
            source_correlation: r.u32(72),
            device: r.u32(76),
            context: r.u32(80),
            stream: r.u32(84),
            operation: MemoryOperation::from_u8(r.u8(88)),
            kind: MemoryKind::from_u8(r.u8(89)),
            pool_type: MemoryPoolType::from_u8(r.u8(90)),
            flags: r.u8(91),
            is_async: r.u8(92) != 0,
        }
    }
}

/// What a synchronization record waited for (CUPTI's numbering).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum SyncKind {
    #[default]
    Unknown = 0,
    /// `cuEventSynchronize` (CUPTI reports `cuEventQuery` so too).
    EventSynchronize = 1,
    /// `cuStreamWaitEvent`: a stream waits for an event; the host does not.
    StreamWaitEvent = 2,
    /// `cuStreamSynchronize` (CUPTI reports `cuStreamQuery` so too).
    StreamSynchronize = 3,
    /// `cuCtxSynchronize`.
    ContextSynchronize = 4,
}

impl SyncKind {
    pub fn from_u8(v: u8) -> Self {
        use SyncKind::*;
        match v {
            1 => EventSynchronize,
            2 => StreamWaitEvent,
            3 => StreamSynchronize,
            4 => ContextSynchronize,
            _ => Unknown,
        }
    }

    pub fn name(self) -> &'static str {
        use SyncKind::*;
        match self {
            Unknown => "unknown",
            EventSynchronize => "event synchronize",
            StreamWaitEvent => "stream wait event",
            StreamSynchronize => "stream synchronize",
            ContextSynchronize => "context synchronize",
        }
    }
}

/// One synchronization call: the host waited from `start_ns` to `end_ns` (host clock).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncRecord {
    /// rtrace correlation id of the API record that synchronized (valid with `FLAG_CORRELATED`).
    pub correlation: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The correlation id of the GPU-activity source (CUPTI's).
    pub source_correlation: u32,
    /// The context synchronized, or the one the stream or event belongs to.
    pub context: u32,
    /// The stream synchronized or made to wait; [`ID_NONE`] for event and context syncs.
    pub stream: u32,
    /// The event waited for; [`ID_NONE`] for stream and context syncs.
    pub event: u32,
    /// The call's `CUresult`.
    pub result: u32,
    pub kind: SyncKind,
    /// `FLAG_*` bits (low 8).
    pub flags: u8,
}

impl SyncRecord {
    pub const SIZE: usize = 48;

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        let mut w = LeMut(&mut b);
        w.u64(0, self.correlation);
        w.u64(8, self.start_ns);
        w.u64(16, self.end_ns);
        w.u32(24, self.source_correlation);
        w.u32(28, self.context);
        w.u32(32, self.stream);
        w.u32(36, self.event);
        w.u32(40, self.result);
        w.u8(44, self.kind as u8);
        w.u8(45, self.flags);
        b
    }

    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let r = Le(b);
        SyncRecord {
            correlation: r.u64(0),
            start_ns: r.u64(8),
            end_ns: r.u64(16),
            source_correlation: r.u32(24),
            context: r.u32(28),
            stream: r.u32(32),
            event: r.u32(36),
            result: r.u32(40),
            kind: SyncKind::from_u8(r.u8(44)),
            flags: r.u8(45),
        }
    }

    /// How long the host waited: `end_ns - start_ns` (0 if the end is before the start).
    pub fn wait_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// One context (CUPTI's `CUpti_ActivityContext3`), written when it is created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContextRecord {
    /// The context's id (the `context` of the other records).
    pub context: u32,
    /// The device it was created on (the `ordinal` of a [`crate::DeviceInfo`]).
    pub device: u32,
    /// The id of its NULL (legacy default) stream.
    pub null_stream: u32,
    /// The context it was made from (green contexts); 0 for none.
    pub parent_context: u32,
    /// The compute API (CUPTI's numbering): 0 unknown, 1 CUDA, 2 CUDA under MPS.
    pub compute_api: u16,
    /// Green contexts: the multiprocessors given to it (0 otherwise).
    pub num_multiprocessors: u16,
    /// CUDA-in-graphics mode (CUPTI's numbering): 0 none, 1 CIG, 2 CIG fallback.
    pub cig_mode: u8,
    pub is_green: bool,
}

impl ContextRecord {
    pub const SIZE: usize = 24;

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        let mut w = LeMut(&mut b);
        w.u32(0, self.context);
        w.u32(4, self.device);
        w.u32(8, self.null_stream);
        w.u32(12, self.parent_context);
        w.u16(16, self.compute_api);
        w.u16(18, self.num_multiprocessors);
        w.u8(20, self.cig_mode);
        w.u8(21, u8::from(self.is_green));
        b
    }

    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let r = Le(b);
        ContextRecord {
            context: r.u32(0),
            device: r.u32(4),
            null_stream: r.u32(8),
            parent_context: r.u32(12),
            compute_api: r.u16(16),
            num_multiprocessors: r.u16(18),
            cig_mode: r.u8(20),
            is_green: r.u8(21) != 0,
        }
    }
}

/// How a stream was created (CUPTI's `CUpti_ActivityStreamFlag` numbering).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum StreamFlag {
    #[default]
    Unknown = 0,
    /// `CU_STREAM_DEFAULT`: synchronizes with the NULL stream.
    Default = 1,
    /// `CU_STREAM_NON_BLOCKING`.
    NonBlocking = 2,
    /// A context's NULL (legacy default) stream.
    Null = 3,
}

impl StreamFlag {
    pub fn from_u8(v: u8) -> Self {
        match v {
            1 => StreamFlag::Default,
            2 => StreamFlag::NonBlocking,
            3 => StreamFlag::Null,
            _ => StreamFlag::Unknown,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            StreamFlag::Unknown => "unknown",
            StreamFlag::Default => "default",
            StreamFlag::NonBlocking => "non-blocking",
            StreamFlag::Null => "null",
        }
    }
}

/// One stream (CUPTI's `CUpti_ActivityStream`), written when it is created: those the
/// program creates, and those the driver creates with a context (its NULL stream among them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamRecord {
    /// rtrace correlation id of the API record that created it (valid with
    /// `FLAG_CORRELATED`): `cuStreamCreate*`, or the call that created its context.
    pub correlation: u64,
    /// The correlation id of the GPU-activity source (CUPTI's).
    pub source_correlation: u32,
    pub context: u32,
    /// The stream's id (the `stream` of the other records).
    pub stream: u32,
    /// Its priority, clamped to the device's range (lower is higher: -5 .. 0 on Hopper).
    pub priority: i32,
    pub flag: StreamFlag,
    /// `FLAG_*` bits (low 8).
    pub flags: u8,
}

impl StreamRecord {
    pub const SIZE: usize = 32;

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        let mut w = LeMut(&mut b);
        w.u64(0, self.correlation);
        w.u32(8, self.source_correlation);
        w.u32(12, self.context);
        w.u32(16, self.stream);
        w.i32(20, self.priority);
        w.u8(24, self.flag as u8);
        w.u8(25, self.flags);
        b
    }

    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let r = Le(b);
        StreamRecord {
            correlation: r.u64(0),
            source_correlation: r.u32(8),
            context: r.u32(12),
            stream: r.u32(16),
            priority: r.i32(20),
            flag: StreamFlag::from_u8(r.u8(24)),
            flags: r.u8(25),
        }
    }
}

/// One module as it is loaded (CUPTI's module resource callback; `CUpti_ActivityModule`'s
/// fields).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModuleRecord {
    /// rtrace correlation id of the API record that loaded it (valid with
    /// `FLAG_CORRELATED`): `cuModuleLoad*`, `cuLibraryLoad*`, ...
    pub correlation: u64,
    /// When it was loaded (host clock), ns.
    pub timestamp_ns: u64,
    /// Size of its image (cubin) in bytes.
    pub cubin_size: u64,
    /// The module's id (the `module` of function records).
    pub module: u32,
    /// The context it was loaded into.
    pub context: u32,
    /// `FLAG_*` bits (low 8).
    pub flags: u8,
}

impl ModuleRecord {
    pub const SIZE: usize = 40;

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        let mut w = LeMut(&mut b);
        w.u64(0, self.correlation);
        w.u64(8, self.timestamp_ns);
        w.u64(16, self.cubin_size);
        w.u32(24, self.module);
        w.u32(28, self.context);
        w.u8(32, self.flags);
        b
    }

    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let r = Le(b);
        ModuleRecord {
            correlation: r.u64(0),
            timestamp_ns: r.u64(8),
            cubin_size: r.u64(16),
            module: r.u32(24),
            context: r.u32(28),
            flags: r.u8(32),
        }
    }
}

/// One function (kernel) of a loaded module (CUPTI's `CUpti_ActivityFunction`), written as
/// its module loads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FunctionRecord {
    /// The function's id (unique in the process).
    pub function: u32,
    pub context: u32,
    /// The module it belongs to (a [`ModuleRecord`]'s `module`).
    pub module: u32,
    /// Its symbol index in the module.
    pub function_index: u32,
    /// Index into the trace's kernel-name table (shared with kernel records).
    pub name: u32,
}

impl FunctionRecord {
    pub const SIZE: usize = 24;

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        let mut w = LeMut(&mut b);
        w.u32(0, self.function);
        w.u32(4, self.context);
        w.u32(8, self.module);
        w.u32(12, self.function_index);
        w.u32(16, self.name);
        b
    }

    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let r = Le(b);
        FunctionRecord {
            function: r.u32(0),
            context: r.u32(4),
            module: r.u32(8),
            function_index: r.u32(12),
            name: r.u32(16),
        }
    }
}

fn records<T, const N: usize>(
    chunk: &Chunk,
    what: &str,
    decode: impl Fn(&[u8; N]) -> T,
) -> Result<Vec<T>, String> {
    if !chunk.payload.len().is_multiple_of(N) {
        return Err(format!(
            "{what} chunk of {} bytes is not a multiple of {N}",
            chunk.payload.len()
        ));
    }
    Ok(chunk
        .payload
        .chunks_exact(N)
        .map(|b| decode(b.try_into().unwrap()))
        .collect())
}

impl Chunk {
    /// The records of a [`crate::ChunkKind::Kernels`] chunk.
    pub fn kernel_records(&self) -> Result<Vec<KernelRecord>, String> {
        records::<_, { KernelRecord::SIZE }>(self, "kernel", KernelRecord::from_bytes)
    }

    /// The records of a [`crate::ChunkKind::Memcpys`] chunk.
    pub fn memcpy_records(&self) -> Result<Vec<MemcpyRecord>, String> {
        records::<_, { MemcpyRecord::SIZE }>(self, "memcpy", MemcpyRecord::from_bytes)
    }

    /// The records of a [`crate::ChunkKind::Memsets`] chunk.
    pub fn memset_records(&self) -> Result<Vec<MemsetRecord>, String> {
        records::<_, { MemsetRecord::SIZE }>(self, "memset", MemsetRecord::from_bytes)
    }

    /// The records of a [`crate::ChunkKind::Memory`] chunk.
    pub fn memory_records(&self) -> Result<Vec<MemoryRecord>, String> {
        records::<_, { MemoryRecord::SIZE }>(self, "memory", MemoryRecord::from_bytes)
    }

    /// The records of a [`crate::ChunkKind::Sync`] chunk.
    pub fn sync_records(&self) -> Result<Vec<SyncRecord>, String> {
        records::<_, { SyncRecord::SIZE }>(self, "sync", SyncRecord::from_bytes)
    }

    /// The records of a [`crate::ChunkKind::PeerCopies`] chunk.
    pub fn peer_copy_records(&self) -> Result<Vec<PeerCopyRecord>, String> {
        records::<_, { PeerCopyRecord::SIZE }>(self, "peer copy", PeerCopyRecord::from_bytes)
    }

    /// The records of a [`crate::ChunkKind::Contexts`] chunk.
    pub fn context_records(&self) -> Result<Vec<ContextRecord>, String> {
        records::<_, { ContextRecord::SIZE }>(self, "context", ContextRecord::from_bytes)
    }

    /// The records of a [`crate::ChunkKind::Streams`] chunk.
    pub fn stream_records(&self) -> Result<Vec<StreamRecord>, String> {
        records::<_, { StreamRecord::SIZE }>(self, "stream", StreamRecord::from_bytes)
    }

    /// The records of a [`crate::ChunkKind::Modules`] chunk.
    pub fn module_records(&self) -> Result<Vec<ModuleRecord>, String> {
        records::<_, { ModuleRecord::SIZE }>(self, "module", ModuleRecord::from_bytes)
    }

    /// The records of a [`crate::ChunkKind::Functions`] chunk.
    pub fn function_records(&self) -> Result<Vec<FunctionRecord>, String> {
        records::<_, { FunctionRecord::SIZE }>(self, "function", FunctionRecord::from_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_record_round_trips_every_field() {
        let k = KernelRecord {
            correlation: 1,
            start_ns: 2,
            end_ns: 3,
            graph_node_id: 4,
            source_correlation: 5,
            name: 6,
            device: 7,
            context: 8,
            stream: 9,
            graph_id: 10,
            grid: [11, 12, 13],
            block: [14, 15, 16],
            cluster: [17, 18, 19],
            dynamic_shared_memory: 20,
            static_shared_memory: 21,
            registers_per_thread: 22,
            local_memory_per_thread: 23,
            flags: 24,
        };
        assert_eq!(KernelRecord::from_bytes(&k.to_bytes()), k);
    }

    #[test]
    fn copy_and_set_records_round_trip() {
        let m = MemcpyRecord {
            correlation: 1,
            start_ns: 2,
            end_ns: 3,
            bytes: 4,
            source_correlation: 5,
            device: 6,
            context: 7,
            stream: 8,
            kind: CopyKind::PtoP,
            src_kind: MemoryKind::Pinned,
            dst_kind: MemoryKind::Managed,
            flags: 1,
            graph_id: 9,
            graph_node_id: 10,
        };
        assert_eq!(MemcpyRecord::from_bytes(&m.to_bytes()), m);
        let s = MemsetRecord {
            correlation: 1,
            start_ns: 2,
            end_ns: 3,
            bytes: 4,
            source_correlation: 5,
            device: 6,
            context: 7,
            stream: 8,
            value: 9,
            graph_id: 10,
            graph_node_id: 11,
        };
        assert_eq!(MemsetRecord::from_bytes(&s.to_bytes()), s);
        for v in 0..=10 {
            assert_eq!(CopyKind::from_u8(v) as u8, v);
        }
        for v in 0..=7 {
            assert_eq!(MemoryKind::from_u8(v) as u8, v);
        }
    }

    #[test]
    fn memory_record_round_trips_every_field() {
        let m = MemoryRecord {
            correlation: 1,
            timestamp_ns: 2,
            address: 0x7fa8_5c80_0000,
            bytes: 4,
            pc: 5,
            pool_address: 6,
            pool_size: 7,
            pool_utilized: 8,
            pool_release_threshold: 9,
            source_correlation: 10,
            device: 11,
            context: 12,
            stream: ID_NONE,
            operation: MemoryOperation::Free,
            kind: MemoryKind::Managed,
            pool_type: MemoryPoolType::Imported,
            flags: FLAG_CORRELATED as u8,
            is_async: true,
        };
        let b = m.to_bytes();
        assert_eq!(MemoryRecord::from_bytes(&b), m);
        // Fixed offsets: the format is the bytes, not the struct.
        assert_eq!(b[16..24], 0x7fa8_5c80_0000u64.to_le_bytes());
        assert_eq!(b[84..92], [0xff, 0xff, 0xff, 0xff, 2, 5, 2, 2]);
        assert_eq!(b[92..], [1, 0, 0, 0]);
        let default = MemoryRecord::default();
        assert_eq!(MemoryRecord::from_bytes(&default.to_bytes()), default);
        for v in 0..=2 {
            assert_eq!(MemoryOperation::from_u8(v) as u8, v);
            assert_eq!(MemoryPoolType::from_u8(v) as u8, v);
        }
        assert_eq!(MemoryOperation::from_u8(3), MemoryOperation::Unknown);
        assert_eq!(MemoryPoolType::from_u8(9), MemoryPoolType::None);
        assert_eq!(MemoryOperation::Alloc.name(), "alloc");
        assert_eq!(MemoryPoolType::Local.name(), "local");
    }

    #[test]
    fn sync_record_round_trips_every_field() {
        let s = SyncRecord {
            correlation: 1,
            start_ns: 200,
            end_ns: 350,
            source_correlation: 4,
            context: 5,
            stream: 6,
            event: ID_NONE,
            result: 600,
            kind: SyncKind::StreamWaitEvent,
            flags: FLAG_CORRELATED as u8,
        };
        let b = s.to_bytes();
        assert_eq!(SyncRecord::from_bytes(&b), s);
        assert_eq!(b[40..], [0x58, 2, 0, 0, 2, 2, 0, 0]);
        assert_eq!(s.wait_ns(), 150);
        assert_eq!(SyncRecord { end_ns: 100, ..s }.wait_ns(), 0);
        for v in 0..=4 {
            assert_eq!(SyncKind::from_u8(v) as u8, v);
        }
        assert_eq!(SyncKind::from_u8(5), SyncKind::Unknown);
        assert_eq!(SyncKind::ContextSynchronize.name(), "context synchronize");
        for (kind, v) in [(crate::ChunkKind::Memory, 11), (crate::ChunkKind::Sync, 12)] {
            assert_eq!(kind.to_u16(), v);
            assert_eq!(crate::ChunkKind::from_u16(v), kind);
        }
    }

    #[test]
    fn resource_records_round_trip_at_fixed_offsets() {
        let c = ContextRecord {
            context: 1,
            device: 2,
            null_stream: 3,
            parent_context: 4,
            compute_api: 1,
            num_multiprocessors: 66,
            cig_mode: 2,
            is_green: true,
        };
        let b = c.to_bytes();
        assert_eq!(ContextRecord::from_bytes(&b), c);
        assert_eq!(b[16..], [1, 0, 66, 0, 2, 1, 0, 0]);
        let s = StreamRecord {
            correlation: 7,
            source_correlation: 8,
            context: 1,
            stream: 13,
            priority: -5,
            flag: StreamFlag::NonBlocking,
            flags: FLAG_CORRELATED as u8,
        };
        let b = s.to_bytes();
        assert_eq!(StreamRecord::from_bytes(&b), s);
        assert_eq!(b[16..28], [13, 0, 0, 0, 0xfb, 0xff, 0xff, 0xff, 2, 2, 0, 0]);
        let m = ModuleRecord {
            correlation: 1,
            timestamp_ns: 2,
            cubin_size: 6584,
            module: 23,
            context: 1,
            flags: FLAG_CORRELATED as u8,
        };
        let b = m.to_bytes();
        assert_eq!(ModuleRecord::from_bytes(&b), m);
        assert_eq!(b[24..33], [23, 0, 0, 0, 1, 0, 0, 0, 2]);
        let f = FunctionRecord {
            function: 1,
            context: 2,
            module: 23,
            function_index: 12,
            name: 5,
        };
        let b = f.to_bytes();
        assert_eq!(FunctionRecord::from_bytes(&b), f);
        assert_eq!(b[8..], [23, 0, 0, 0, 12, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0]);
        for v in 0..=3 {
            assert_eq!(StreamFlag::from_u8(v) as u8, v);
        }
        assert_eq!(StreamFlag::from_u8(4), StreamFlag::Unknown);
        assert_eq!(StreamFlag::NonBlocking.name(), "non-blocking");
        for (kind, v) in [
            (crate::ChunkKind::Contexts, 13),
            (crate::ChunkKind::Streams, 14),
            (crate::ChunkKind::Modules, 15),
            (crate::ChunkKind::Functions, 16),
            (crate::ChunkKind::PeerCopies, 17),
        ] {
            assert_eq!(kind.to_u16(), v);
            assert_eq!(crate::ChunkKind::from_u16(v), kind);
        }
    }

    #[test]
    fn peer_copy_record_is_a_memcpy_record_and_its_ends() {
        let p = PeerCopyRecord {
            copy: MemcpyRecord {
                correlation: 1,
                start_ns: 2,
                end_ns: 3,
                bytes: 4,
                kind: CopyKind::PtoP,
                src_kind: MemoryKind::Device,
                dst_kind: MemoryKind::Device,
                device: 1,
                ..Default::default()
            },
            src_device: 1,
            src_context: 2,
            dst_device: 0,
            dst_context: 1,
        };
        let b = p.to_bytes();
        assert_eq!(PeerCopyRecord::from_bytes(&b), p);
        assert_eq!(b[..64], p.copy.to_bytes());
        assert_eq!(b[64..], [1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]);
    }
}
