//! GPU work: kernels, memory copies (peer-to-peer ones too) and memsets.

use crate::codec::{record, u8_enum};

record! {
    /// One kernel execution.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct KernelRecord: 112 bytes {
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
}

u8_enum! {
    /// Direction of a copy.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum CopyKind {
        #[default]
        Unknown = 0 => "unknown",
        HtoD = 1 => "HtoD",
        DtoH = 2 => "DtoH",
        HtoA = 3 => "HtoA",
        AtoH = 4 => "AtoH",
        AtoA = 5 => "AtoA",
        AtoD = 6 => "AtoD",
        DtoA = 7 => "DtoA",
        DtoD = 8 => "DtoD",
        HtoH = 9 => "HtoH",
        PtoP = 10 => "PtoP",
    }
}

u8_enum! {
    /// Kind of memory a copy reads or writes.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum MemoryKind {
        #[default]
        Unknown = 0 => "unknown",
        Pageable = 1 => "pageable",
        Pinned = 2 => "pinned",
        Device = 3 => "device",
        Array = 4 => "array",
        Managed = 5 => "managed",
        DeviceStatic = 6 => "device-static",
        ManagedStatic = 7 => "managed-static",
    }
}

record! {
    /// One memory copy.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct MemcpyRecord: 64 bytes {
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
}

record! {
    /// A peer-to-peer copy (between the memory of two devices, or two contexts): a
    /// [`MemcpyRecord`] (kind [`CopyKind::PtoP`]) with where the bytes came from and went to.
    /// Its own chunk kind ([`crate::ChunkKind::PeerCopies`]), so that memcpy records keep their
    /// size.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct PeerCopyRecord: 80 bytes {
        /// The copy; `device`, `context` and `stream` are where it ran.
        pub copy: MemcpyRecord,
        /// The device and context that own the memory copied from.
        pub src_device: u32,
        pub src_context: u32,
        /// The device and context that own the memory copied to.
        pub dst_device: u32,
        pub dst_context: u32,
    }
}

record! {
    /// One memset.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct MemsetRecord: 64 bytes {
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
}
