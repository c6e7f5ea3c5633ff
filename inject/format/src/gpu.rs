//! GPU activity records: kernels, memory copies and memsets, with start and end on the
//! trace's host clock (`CLOCK_MONOTONIC` ns). Fixed-size, little-endian, one array per chunk.

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
}
