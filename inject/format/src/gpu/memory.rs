//! Memory allocations and frees, and host synchronizations.

use super::{Le, LeMut, MemoryKind};

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
