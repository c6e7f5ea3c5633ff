//! Memory allocations and frees, and host synchronizations.

use super::work::MemoryKind;
use crate::codec::{record, u8_enum};

/// A memory record's or sync record's `stream` (or `event`) when it names none: CUPTI's
/// `CUPTI_INVALID_STREAM_ID` / `CUPTI_SYNCHRONIZATION_INVALID_VALUE`.
pub const ID_NONE: u32 = u32::MAX;

u8_enum! {
    /// What a memory record is: an allocation or a release.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum MemoryOperation {
        #[default]
        Unknown = 0 => "unknown",
        Alloc = 1 => "alloc",
        Free = 2 => "free",
    }
}

u8_enum! {
    /// The memory pool a stream-ordered allocation came from.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum MemoryPoolType {
        /// Not a pool allocation.
        #[default]
        None = 0 => "none",
        /// A pool of this process.
        Local = 1 => "local",
        /// A pool imported from another process.
        Imported = 2 => "imported",
    }
}

record! {
    /// One memory allocation or release (`cuMemAlloc*`, `cuMemAllocHost*`, `cuMemAllocManaged`,
    /// `cuMemAllocAsync`, `cuMemFree*`, ...).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct MemoryRecord: 96 bytes {
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
        _: [u8; 3],
    }
}

u8_enum! {
    /// What a synchronization record waited for (CUPTI's numbering).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum SyncKind {
        #[default]
        Unknown = 0 => "unknown",
        /// `cuEventSynchronize` (CUPTI reports `cuEventQuery` so too).
        EventSynchronize = 1 => "event synchronize",
        /// `cuStreamWaitEvent`: a stream waits for an event; the host does not.
        StreamWaitEvent = 2 => "stream wait event",
        /// `cuStreamSynchronize` (CUPTI reports `cuStreamQuery` so too).
        StreamSynchronize = 3 => "stream synchronize",
        /// `cuCtxSynchronize`.
        ContextSynchronize = 4 => "context synchronize",
    }
}

record! {
    /// One synchronization call: the host waited from `start_ns` to `end_ns` (host clock).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct SyncRecord: 48 bytes {
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
        _: [u8; 2],
    }
}

impl SyncRecord {
    /// How long the host waited: `end_ns - start_ns` (0 if the end is before the start).
    pub fn wait_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}
