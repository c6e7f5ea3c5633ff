//! GPU activity records: kernels, memory copies (peer-to-peer ones with their source and
//! destination) and memsets, with start and end on the trace's host clock (`CLOCK_MONOTONIC`
//! ns); memory allocations and frees; host synchronizations; and the resources the work ran
//! in: contexts, streams, modules and functions. Fixed-size, little-endian, one array per
//! chunk.

use crate::payload::{fixed_records, Chunk};

/// Record flag: the work belongs to a CUDA graph (`graph_id`, `graph_node_id` are set).
pub const FLAG_IN_GRAPH: u32 = 1;
/// Record flag: `correlation` links the record to an API record of the trace.
pub const FLAG_CORRELATED: u32 = 2;
/// Kernel record flag: the launch was profiled by kernel replay. CUPTI gives such a record no
/// times; the library sets `start_ns` to when profiling the launch began and `end_ns` to
/// `start_ns` plus the launch's `gpu__time_duration.sum` when that metric was collected (else
/// `end_ns == start_ns`).
pub const FLAG_PROFILED: u32 = 8;
/// Module record flag: the record is the module's unload (its `timestamp_ns` is when the
/// unload started; `correlation` names the unloading call), not its load.
pub const FLAG_UNLOADED: u32 = 4;

mod image;
mod memory;
mod nvtx;
mod resources;
#[cfg(test)]
mod tests;
mod work;

pub use image::*;
pub use memory::*;
pub use nvtx::*;
pub use resources::*;
pub use work::*;

impl Chunk {
    /// The records of a [`crate::ChunkKind::Kernels`] chunk.
    pub fn kernel_records(&self) -> Result<Vec<KernelRecord>, String> {
        fixed_records::<_, { KernelRecord::SIZE }>(self, "kernel", KernelRecord::from_bytes)
    }

    /// The records of a [`crate::ChunkKind::Memcpys`] chunk.
    pub fn memcpy_records(&self) -> Result<Vec<MemcpyRecord>, String> {
        fixed_records::<_, { MemcpyRecord::SIZE }>(self, "memcpy", MemcpyRecord::from_bytes)
    }

    /// The records of a [`crate::ChunkKind::Memsets`] chunk.
    pub fn memset_records(&self) -> Result<Vec<MemsetRecord>, String> {
        fixed_records::<_, { MemsetRecord::SIZE }>(self, "memset", MemsetRecord::from_bytes)
    }

    /// The records of a [`crate::ChunkKind::Memory`] chunk.
    pub fn memory_records(&self) -> Result<Vec<MemoryRecord>, String> {
        fixed_records::<_, { MemoryRecord::SIZE }>(self, "memory", MemoryRecord::from_bytes)
    }

    /// The records of a [`crate::ChunkKind::Sync`] chunk.
    pub fn sync_records(&self) -> Result<Vec<SyncRecord>, String> {
        fixed_records::<_, { SyncRecord::SIZE }>(self, "sync", SyncRecord::from_bytes)
    }

    /// The records of a [`crate::ChunkKind::PeerCopies`] chunk.
    pub fn peer_copy_records(&self) -> Result<Vec<PeerCopyRecord>, String> {
        fixed_records::<_, { PeerCopyRecord::SIZE }>(self, "peer copy", PeerCopyRecord::from_bytes)
    }

    /// The records of a [`crate::ChunkKind::Contexts`] chunk.
    pub fn context_records(&self) -> Result<Vec<ContextRecord>, String> {
        fixed_records::<_, { ContextRecord::SIZE }>(self, "context", ContextRecord::from_bytes)
    }

    /// The records of a [`crate::ChunkKind::Streams`] chunk.
    pub fn stream_records(&self) -> Result<Vec<StreamRecord>, String> {
        fixed_records::<_, { StreamRecord::SIZE }>(self, "stream", StreamRecord::from_bytes)
    }

    /// The records of a [`crate::ChunkKind::Modules`] chunk.
    pub fn module_records(&self) -> Result<Vec<ModuleRecord>, String> {
        fixed_records::<_, { ModuleRecord::SIZE }>(self, "module", ModuleRecord::from_bytes)
    }

    /// The records of a [`crate::ChunkKind::Functions`] chunk.
    pub fn function_records(&self) -> Result<Vec<FunctionRecord>, String> {
        fixed_records::<_, { FunctionRecord::SIZE }>(self, "function", FunctionRecord::from_bytes)
    }

    /// The events of a [`crate::ChunkKind::NvtxEvents`] chunk.
    pub fn nvtx_events(&self) -> Result<Vec<NvtxEvent>, String> {
        fixed_records::<_, { NvtxEvent::SIZE }>(self, "NVTX event", NvtxEvent::from_bytes)
    }
}
