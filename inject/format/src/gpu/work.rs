//! GPU work: kernels, memory copies (peer-to-peer ones too) and memsets.

use super::{Le, LeMut};

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
