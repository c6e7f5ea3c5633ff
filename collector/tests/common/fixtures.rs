//! The committed trace fixtures of `tests/fixtures/`, built deterministically
//! with the format crate's encoders (shared by `tests/golden.rs`, which
//! checks the committed files against them and rewrites them with
//! `RTRACE_BLESS=1`, and `tests/reader_robustness.rs`, which mutates them).
//!
//! Every value is fixed: pids, thread ids, clock anchors (so the report's
//! UTC start time is stable), timestamps and correlation ids. Changing
//! anything here changes the committed `.bin` files: run
//! `tools/make-fixtures` and review the diff of the expected outputs.
#![allow(dead_code)]

use rtrace_format::*;
use std::collections::HashMap;

/// A monotonic clock a day after boot, as real traces have.
pub const T0: u64 = 86_400_000_000_000;
/// 2025-03-14T15:09:26.535Z.
pub const REALTIME0: u64 = 1_741_964_966_535_897_932;

/// Builds a trace file chunk by chunk, numbering each thread's chunks.
pub struct Builder {
    pub bytes: Vec<u8>,
    seq: HashMap<u64, u64>,
}

impl Builder {
    /// A trace of format 2.1, as 2.x writers made them (API records in kind-2 chunks, times
    /// in ns): the committed fixtures stay what they were, and show that 3.x readers read
    /// them as before. (The header's checksum covers its body only.)
    pub fn new(header: &ProcessHeader) -> Self {
        let mut bytes = encode_file_header(header);
        bytes[8..10].copy_from_slice(&2u16.to_le_bytes());
        bytes[10..12].copy_from_slice(&1u16.to_le_bytes());
        Builder {
            bytes,
            seq: HashMap::new(),
        }
    }

    /// A chunk with a correct checksum and the thread's next sequence number.
    pub fn chunk(mut self, kind: ChunkKind, thread: u64, dropped: u64, payload: &[u8]) -> Self {
        let seq = self.seq.entry(thread).or_insert(0);
        let h = ChunkHeader::new(kind, thread, *seq, dropped, payload);
        *seq += 1;
        self.bytes.extend_from_slice(&h.encode());
        self.bytes.extend_from_slice(payload);
        self
    }

    pub fn names(self, names: &[(u32, &str)]) -> Self {
        let payload = encode_function_names(names.iter().copied());
        self.chunk(ChunkKind::FunctionNames, 0, 0, &payload)
    }

    pub fn kernel_names(self, names: &[(u32, &str)]) -> Self {
        let payload = encode_function_names(names.iter().copied());
        self.chunk(ChunkKind::KernelNames, 0, 0, &payload)
    }

    pub fn thread(self, tid: u64, name: &str) -> Self {
        let info = ThreadInfo {
            tid,
            name: name.into(),
        };
        self.chunk(ChunkKind::ThreadInfo, tid, 0, &encode_value(&info))
    }

    pub fn records(self, thread: u64, dropped: u64, recs: &[ApiRecord]) -> Self {
        let payload: Vec<u8> = recs.iter().flat_map(|r| r.to_bytes()).collect();
        self.chunk(ChunkKind::ApiRecords, thread, dropped, &payload)
    }

    pub fn notice(self, time_ns: u64, message: &str) -> Self {
        let n = Notice {
            time_ns,
            message: message.into(),
        };
        self.chunk(ChunkKind::Notice, 0, 0, &encode_value(&n))
    }

    pub fn end(self, end: &ProcessEnd) -> Self {
        self.chunk(ChunkKind::ProcessEnd, 0, 0, &encode_value(end))
    }

    pub fn device(self, d: &DeviceInfo) -> Self {
        self.chunk(ChunkKind::DeviceInfo, 0, 0, &encode_value(d))
    }

    pub fn kernels(self, recs: &[KernelRecord]) -> Self {
        let payload: Vec<u8> = recs.iter().flat_map(|r| r.to_bytes()).collect();
        self.chunk(ChunkKind::Kernels, 0, 0, &payload)
    }

    pub fn memcpys(self, recs: &[MemcpyRecord]) -> Self {
        let payload: Vec<u8> = recs.iter().flat_map(|r| r.to_bytes()).collect();
        self.chunk(ChunkKind::Memcpys, 0, 0, &payload)
    }

    pub fn memsets(self, recs: &[MemsetRecord]) -> Self {
        let payload: Vec<u8> = recs.iter().flat_map(|r| r.to_bytes()).collect();
        self.chunk(ChunkKind::Memsets, 0, 0, &payload)
    }

    pub fn peer_copies(self, recs: &[PeerCopyRecord]) -> Self {
        let payload: Vec<u8> = recs.iter().flat_map(|r| r.to_bytes()).collect();
        self.chunk(ChunkKind::PeerCopies, 0, 0, &payload)
    }

    pub fn memory(self, recs: &[MemoryRecord]) -> Self {
        let payload: Vec<u8> = recs.iter().flat_map(|r| r.to_bytes()).collect();
        self.chunk(ChunkKind::Memory, 0, 0, &payload)
    }

    pub fn syncs(self, recs: &[SyncRecord]) -> Self {
        let payload: Vec<u8> = recs.iter().flat_map(|r| r.to_bytes()).collect();
        self.chunk(ChunkKind::Sync, 0, 0, &payload)
    }

    pub fn contexts(self, recs: &[ContextRecord]) -> Self {
        let payload: Vec<u8> = recs.iter().flat_map(|r| r.to_bytes()).collect();
        self.chunk(ChunkKind::Contexts, 0, 0, &payload)
    }

    pub fn streams(self, recs: &[StreamRecord]) -> Self {
        let payload: Vec<u8> = recs.iter().flat_map(|r| r.to_bytes()).collect();
        self.chunk(ChunkKind::Streams, 0, 0, &payload)
    }

    pub fn modules(self, recs: &[ModuleRecord]) -> Self {
        let payload: Vec<u8> = recs.iter().flat_map(|r| r.to_bytes()).collect();
        self.chunk(ChunkKind::Modules, 0, 0, &payload)
    }

    pub fn functions(self, recs: &[FunctionRecord]) -> Self {
        let payload: Vec<u8> = recs.iter().flat_map(|r| r.to_bytes()).collect();
        self.chunk(ChunkKind::Functions, 0, 0, &payload)
    }
}

pub fn header(pid: u32, ppid: u32, command_line: &[&str], start_offset_ns: u64) -> ProcessHeader {
    ProcessHeader {
        pid,
        ppid,
        forked_from: None,
        command_line: command_line.iter().map(|s| s.to_string()).collect(),
        executable: "/opt/app/bin/app".into(),
        hostname: "node07".into(),
        boot_id: "3f6c1f0e-8a4b-4d2e-9c71-5b0a2d9e4f13".into(),
        writer_version: "0.1.0".into(),
        start: ClockAnchor {
            monotonic_ns: T0 + start_offset_ns,
            realtime_ns: REALTIME0 + start_offset_ns,
        },
        clock: "CLOCK_MONOTONIC".into(),
        session: String::new(),
        rank_env: Vec::new(),
    }
}

/// An API call from `T0 + start` to `T0 + end`.
pub fn call(function: u32, result: u32, span: (u64, u64), correlation: u64) -> ApiRecord {
    ApiRecord {
        function,
        result,
        start_ns: T0 + span.0,
        end_ns: T0 + span.1,
        correlation,
    }
}

pub fn end(at: u64, reason: &str, records: u64, dropped: u64, threads: u64) -> ProcessEnd {
    ProcessEnd {
        end: ClockAnchor {
            monotonic_ns: T0 + at,
            realtime_ns: REALTIME0 + at,
        },
        reason: reason.into(),
        records,
        dropped,
        unwrapped_lookups: 1,
        threads,
    }
}

/// An H100 SXM as the simulated driver describes it.
pub fn h100(ordinal: u32) -> DeviceInfo {
    use rtrace_format::attr::*;
    DeviceInfo {
        ordinal,
        name: "NVIDIA H100 80GB HBM3".into(),
        total_memory: 85_045_870_592,
        attributes: vec![
            (MAX_THREADS_PER_BLOCK, 1024),
            (MAX_BLOCK_DIM_X, 1024),
            (MAX_BLOCK_DIM_Y, 1024),
            (MAX_BLOCK_DIM_Z, 64),
            (MAX_GRID_DIM_X, i32::MAX),
            (MAX_GRID_DIM_Y, 65535),
            (MAX_GRID_DIM_Z, 65535),
            (MAX_SHARED_MEMORY_PER_BLOCK, 49152),
            (TOTAL_CONSTANT_MEMORY, 65536),
            (WARP_SIZE, 32),
            (MAX_REGISTERS_PER_BLOCK, 65536),
            (CLOCK_RATE, 1_980_000),
            (MULTIPROCESSOR_COUNT, 132),
            (CONCURRENT_KERNELS, 1),
            (ECC_ENABLED, 1),
            (PCI_BUS_ID, 0x18 + ordinal as i32),
            (MEMORY_CLOCK_RATE, 2_619_000),
            (GLOBAL_MEMORY_BUS_WIDTH, 5120),
            (L2_CACHE_SIZE, 52_428_800),
            (MAX_THREADS_PER_MULTIPROCESSOR, 2048),
            (ASYNC_ENGINE_COUNT, 3),
            (COMPUTE_CAPABILITY_MAJOR, 9),
            (COMPUTE_CAPABILITY_MINOR, 0),
            (MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 233_472),
            (MAX_REGISTERS_PER_MULTIPROCESSOR, 65536),
            (MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232_448),
            (MAX_BLOCKS_PER_MULTIPROCESSOR, 32),
            (RESERVED_SHARED_MEMORY_PER_BLOCK, 1024),
        ],
    }
}

/// The driver functions the fixtures call, by id.
pub const FUNCTIONS: &[(u32, &str)] = &[
    (0, "cuInit"),
    (1, "cuDeviceGet"),
    (2, "cuCtxCreate_v2"),
    (3, "cuModuleLoad"),
    (4, "cuModuleGetFunction"),
    (5, "cuMemAlloc_v2"),
    (6, "cuMemcpyHtoD_v2"),
    (7, "cuLaunchKernel"),
    (8, "cuMemcpyDtoH_v2"),
    (9, "cuMemFree_v2"),
    (10, "cuCtxSynchronize"),
    (11, "cuStreamCreate"),
    (12, "cuMemsetD32Async"),
    (13, "cuStreamSynchronize"),
    (14, "cuEventQuery"),
    (15, "cuMemcpyPeerAsync"),
    (16, "cuMemAllocHost_v2"),
    (17, "cuCtxDestroy_v2"),
];

const CU_ERROR_INVALID_VALUE: u32 = 1;
const CU_ERROR_OUT_OF_MEMORY: u32 = 2;
const CU_ERROR_FILE_NOT_FOUND: u32 = 301;
const CU_ERROR_NOT_READY: u32 = 600;

/// API records only, on two threads, with errors, dropped records, a notice,
/// a function id without a name, and a chunk of an unknown (future) kind.
///
/// pid 4101: thread 4101 "app" initialises, loads a module (a failed first
/// try), allocates (one out of memory), copies, launches and frees; thread
/// 4107 "loader" loads and launches too and lost 5 records.
pub fn api_threads() -> Vec<u8> {
    Builder::new(&header(4101, 4100, &["./app", "--iterations", "3"], 0))
        .names(FUNCTIONS)
        .thread(4101, "app")
        .records(
            4101,
            0,
            &[
                call(0, 0, (10_000, 2_510_000), 1),
                call(1, 0, (2_520_000, 2_521_200), 2),
                call(2, 0, (2_530_000, 47_530_000), 3),
                call(3, CU_ERROR_FILE_NOT_FOUND, (47_600_000, 47_612_000), 4),
                call(3, 0, (47_620_000, 48_020_000), 5),
                call(4, 0, (48_030_000, 48_031_500), 6),
                call(5, 0, (48_100_000, 48_180_000), 7),
                call(5, CU_ERROR_OUT_OF_MEMORY, (48_200_000, 48_203_000), 8),
            ],
        )
        .notice(
            T0 + 48_300_000,
            "GPU activity is off: set RTRACE_GPU_ACTIVITY=1",
        )
        .thread(4107, "loader")
        .records(
            4107,
            5,
            &[
                call(3, 0, (48_400_000, 48_700_000), 9),
                call(4, 0, (48_710_000, 48_711_100), 10),
                call(7, 0, (48_720_000, 48_728_000), 11),
                call(42, CU_ERROR_INVALID_VALUE, (48_730_000, 48_730_400), 12),
            ],
        )
        .chunk(ChunkKind::Unknown(999), 0, 0, b"from a newer writer")
        .records(
            4101,
            0,
            &[
                call(6, 0, (48_800_000, 48_950_000), 13),
                call(7, 0, (48_960_000, 48_966_000), 14),
                call(7, 0, (48_970_000, 48_975_500), 15),
                call(7, 0, (48_980_000, 48_984_800), 16),
                call(10, 0, (48_990_000, 49_590_000), 17),
                call(8, 0, (49_600_000, 49_750_000), 18),
                call(9, 0, (49_760_000, 49_790_000), 19),
                call(17, 0, (49_800_000, 52_800_000), 20),
            ],
        )
        .end(&end(53_000_000, "exit", 20, 5, 2))
        .bytes
}

fn kernel(
    name: u32,
    stream: u32,
    span: (u64, u64),
    correlation: u64,
    grid: [i32; 3],
    block: [i32; 3],
    registers: u32,
) -> KernelRecord {
    KernelRecord {
        correlation,
        start_ns: T0 + span.0,
        end_ns: T0 + span.1,
        name,
        device: 0,
        context: 1,
        stream,
        grid,
        block,
        registers_per_thread: registers,
        static_shared_memory: 0,
        dynamic_shared_memory: 0,
        flags: if correlation != 0 { FLAG_CORRELATED } else { 0 },
        ..Default::default()
    }
}

fn copy(
    kind: CopyKind,
    (device, stream): (u32, u32),
    span: (u64, u64),
    bytes: u64,
    correlation: u64,
    kinds: (MemoryKind, MemoryKind),
) -> MemcpyRecord {
    MemcpyRecord {
        correlation,
        start_ns: T0 + span.0,
        end_ns: T0 + span.1,
        bytes,
        device,
        context: device + 1,
        stream,
        kind,
        src_kind: kinds.0,
        dst_kind: kinds.1,
        flags: if correlation != 0 {
            FLAG_CORRELATED as u8
        } else {
            0
        },
        ..Default::default()
    }
}

fn memory(
    operation: MemoryOperation,
    kind: MemoryKind,
    at: u64,
    address: u64,
    bytes: u64,
    correlation: u64,
) -> MemoryRecord {
    MemoryRecord {
        correlation,
        timestamp_ns: T0 + at,
        address,
        bytes,
        device: 0,
        context: 1,
        stream: ID_NONE,
        operation,
        kind,
        flags: if correlation != 0 {
            FLAG_CORRELATED as u8
        } else {
            0
        },
        ..Default::default()
    }
}

fn sync(
    kind: SyncKind,
    span: (u64, u64),
    stream: u32,
    result: u32,
    correlation: u64,
) -> SyncRecord {
    SyncRecord {
        correlation,
        start_ns: T0 + span.0,
        end_ns: T0 + span.1,
        context: 1,
        stream,
        event: if kind == SyncKind::EventSynchronize {
            3
        } else {
            ID_NONE
        },
        result,
        kind,
        flags: FLAG_CORRELATED as u8,
        ..Default::default()
    }
}

/// GPU activity on two devices: kernels (demangled C++ names, a plain name, a
/// name id without a name, an uncorrelated one, one in a graph), copies
/// (HtoD, DtoH, DtoD, a peer copy), a memset, allocations and frees, host
/// synchronizations (an event query counted as a query), the devices (0 an
/// H100 with its attributes, 1 described without), and the contexts,
/// streams, modules and functions.
pub fn gpu() -> Vec<u8> {
    const MODULE_BASE: u64 = 0x7f3a_2000_0000;
    Builder::new(&header(
        4200,
        4199,
        &["python3", "train.py", "--gpus", "2"],
        1_000_000_000,
    ))
    .names(FUNCTIONS)
    .device(&h100(0))
    .device(&DeviceInfo {
        ordinal: 1,
        name: "NVIDIA H100 80GB HBM3".into(),
        total_memory: 85_045_870_592,
        attributes: vec![],
    })
    .contexts(&[
        ContextRecord {
            context: 1,
            device: 0,
            null_stream: 7,
            compute_api: 1,
            ..Default::default()
        },
        ContextRecord {
            context: 2,
            device: 1,
            null_stream: 9,
            compute_api: 1,
            ..Default::default()
        },
    ])
    .thread(4200, "python3")
    .records(
        4200,
        0,
        &[
            call(0, 0, (1_000_010_000, 1_002_000_000), 1),
            call(2, 0, (1_002_010_000, 1_040_000_000), 2),
            call(11, 0, (1_040_010_000, 1_040_020_000), 3),
            call(3, 0, (1_040_030_000, 1_040_530_000), 4),
            call(4, 0, (1_040_540_000, 1_040_541_000), 5),
            call(5, 0, (1_040_600_000, 1_040_700_000), 6),
            call(16, 0, (1_040_710_000, 1_041_010_000), 7),
            call(6, 0, (1_041_020_000, 1_041_400_000), 8),
            call(7, 0, (1_041_410_000, 1_041_416_000), 9),
            call(7, 0, (1_041_420_000, 1_041_424_000), 10),
            call(7, 0, (1_041_430_000, 1_041_434_000), 11),
            call(12, 0, (1_041_440_000, 1_041_443_000), 12),
            call(14, CU_ERROR_NOT_READY, (1_041_450_000, 1_041_450_800), 13),
            call(15, 0, (1_041_460_000, 1_041_466_000), 14),
            call(13, 0, (1_041_470_000, 1_042_900_000), 15),
            call(8, 0, (1_042_910_000, 1_043_200_000), 16),
            call(10, 0, (1_043_210_000, 1_043_260_000), 17),
            call(9, 0, (1_043_270_000, 1_043_300_000), 18),
        ],
    )
    .streams(&[
        StreamRecord {
            correlation: 2,
            context: 1,
            stream: 7,
            flag: StreamFlag::Null,
            flags: FLAG_CORRELATED as u8,
            ..Default::default()
        },
        StreamRecord {
            correlation: 3,
            context: 1,
            stream: 13,
            priority: -2,
            flag: StreamFlag::NonBlocking,
            flags: FLAG_CORRELATED as u8,
            ..Default::default()
        },
    ])
    .modules(&[ModuleRecord {
        correlation: 4,
        timestamp_ns: T0 + 1_040_500_000,
        cubin_size: 182_272,
        module: 1,
        context: 1,
        flags: FLAG_CORRELATED as u8,
    }])
    .kernel_names(&[
        (0, "_Z6vecaddPKfS0_Pfi"),
        (1, "_ZN4gemm6kernelIfLi128EEEvPKT_S3_PS1_iii"),
        (2, "relu_kernel"),
    ])
    .functions(&[
        FunctionRecord {
            function: 1,
            context: 1,
            module: 1,
            function_index: 0,
            name: 0,
        },
        FunctionRecord {
            function: 2,
            context: 1,
            module: 1,
            function_index: 1,
            name: 1,
        },
        FunctionRecord {
            function: 3,
            context: 1,
            module: 1,
            function_index: 2,
            name: 2,
        },
    ])
    .memory(&[
        memory(
            MemoryOperation::Alloc,
            MemoryKind::DeviceStatic,
            1_040_520_000,
            MODULE_BASE,
            4096,
            0,
        ),
        memory(
            MemoryOperation::Alloc,
            MemoryKind::Device,
            1_040_650_000,
            0x7f3a_4000_0000,
            64 << 20,
            6,
        ),
        memory(
            MemoryOperation::Alloc,
            MemoryKind::Pinned,
            1_041_000_000,
            0x7f3b_0000_0000,
            8 << 20,
            7,
        ),
    ])
    .memcpys(&[copy(
        CopyKind::HtoD,
        (0, 13),
        (1_041_100_000, 1_041_390_000),
        8 << 20,
        8,
        (MemoryKind::Pinned, MemoryKind::Device),
    )])
    .kernels(&[
        kernel(
            0,
            13,
            (1_041_420_000, 1_041_650_000),
            9,
            [32768, 1, 1],
            [256, 1, 1],
            16,
        ),
        kernel(
            1,
            13,
            (1_041_650_500, 1_042_650_500),
            10,
            [132, 2, 1],
            [128, 1, 1],
            168,
        ),
        kernel(
            2,
            7,
            (1_041_440_000, 1_041_520_000),
            11,
            [65536, 1, 1],
            [1024, 1, 1],
            32,
        ),
        // Not linked to a call; run from a graph.
        KernelRecord {
            flags: FLAG_IN_GRAPH,
            graph_id: 5,
            graph_node_id: 17,
            ..kernel(
                2,
                7,
                (1_042_000_000, 1_042_060_000),
                0,
                [65536, 1, 1],
                [1024, 1, 1],
                32,
            )
        },
        // A name id the file has no name for.
        kernel(
            9,
            7,
            (1_042_100_000, 1_042_101_500),
            0,
            [1, 1, 1],
            [32, 1, 1],
            8,
        ),
    ])
    .memsets(&[MemsetRecord {
        correlation: 12,
        start_ns: T0 + 1_041_445_000,
        end_ns: T0 + 1_041_465_000,
        bytes: 1 << 20,
        device: 0,
        context: 1,
        stream: 13,
        value: 0,
        ..Default::default()
    }])
    .peer_copies(&[PeerCopyRecord {
        copy: copy(
            CopyKind::PtoP,
            (0, 13),
            (1_042_660_000, 1_042_860_000),
            16 << 20,
            14,
            (MemoryKind::Device, MemoryKind::Device),
        ),
        src_device: 0,
        src_context: 1,
        dst_device: 1,
        dst_context: 2,
    }])
    .memcpys(&[
        copy(
            CopyKind::DtoH,
            (0, 7),
            (1_042_920_000, 1_043_190_000),
            8 << 20,
            16,
            (MemoryKind::Device, MemoryKind::Pinned),
        ),
        copy(
            CopyKind::DtoD,
            (1, 9),
            (1_042_870_000, 1_042_880_000),
            1 << 20,
            0,
            (MemoryKind::Device, MemoryKind::Device),
        ),
    ])
    .syncs(&[
        sync(
            SyncKind::EventSynchronize,
            (1_041_450_000, 1_041_450_600),
            ID_NONE,
            CU_ERROR_NOT_READY,
            13,
        ),
        sync(
            SyncKind::StreamSynchronize,
            (1_041_470_500, 1_042_899_000),
            13,
            0,
            15,
        ),
        sync(
            SyncKind::ContextSynchronize,
            (1_043_211_000, 1_043_259_000),
            ID_NONE,
            0,
            17,
        ),
    ])
    .memory(&[memory(
        MemoryOperation::Free,
        MemoryKind::Device,
        1_043_290_000,
        0x7f3a_4000_0000,
        64 << 20,
        18,
    )])
    .end(&end(1_044_000_000, "exit", 18, 0, 1))
    .bytes
}

/// A process killed while its tracer was writing: no end record, and the
/// file ends inside the payload of its last chunk.
pub fn truncated() -> Vec<u8> {
    let mut bytes = Builder::new(&header(4300, 1, &["./solver", "input.dat"], 2_000_000_000))
        .names(FUNCTIONS)
        .thread(4300, "solver")
        .records(
            4300,
            0,
            &[
                call(0, 0, (2_000_020_000, 2_001_900_000), 1),
                call(2, 0, (2_001_910_000, 2_030_000_000), 2),
                call(5, 0, (2_030_010_000, 2_030_090_000), 3),
                call(6, 0, (2_030_100_000, 2_030_400_000), 4),
            ],
        )
        .records(
            4300,
            0,
            &[
                call(7, 0, (2_030_410_000, 2_030_416_000), 5),
                call(10, 0, (2_030_420_000, 2_031_000_000), 6),
                call(7, 0, (2_031_010_000, 2_031_015_000), 7),
            ],
        )
        .records(
            4300,
            0,
            &[
                call(10, 0, (2_031_020_000, 2_032_000_000), 8),
                call(8, 0, (2_032_010_000, 2_032_300_000), 9),
                call(9, 0, (2_032_310_000, 2_032_340_000), 10),
            ],
        )
        .bytes;
    // Cut 2 records and 7 bytes into the last chunk's 3 records.
    let keep = bytes.len() - ApiRecord::SIZE - 25;
    bytes.truncate(keep);
    bytes
}

/// Damage after the header: a chunk whose checksum is right but whose
/// payload cannot be decoded (skipped, reading goes on), then one whose
/// checksum is wrong (reading stops there; the end record after it is not
/// read).
pub fn corrupt() -> Vec<u8> {
    let b = Builder::new(&header(4400, 1, &["./app"], 3_000_000_000))
        .names(FUNCTIONS)
        .thread(4400, "app")
        .records(
            4400,
            0,
            &[
                call(0, 0, (3_000_010_000, 3_001_000_000), 1),
                call(5, 0, (3_001_010_000, 3_001_050_000), 2),
                call(5, CU_ERROR_OUT_OF_MEMORY, (3_001_060_000, 3_001_062_000), 3),
            ],
        );
    // 33 bytes: not a whole number of API records.
    let mut odd: Vec<u8> = call(9, 0, (3_001_070_000, 3_001_071_000), 4)
        .to_bytes()
        .to_vec();
    odd.push(0xee);
    let b = b
        .chunk(ChunkKind::ApiRecords, 4400, 0, &odd)
        // A thread-info payload that is not bincode of a ThreadInfo.
        .chunk(ChunkKind::ThreadInfo, 4401, 0, &[0x05, 0xff, 0xff])
        .records(4400, 0, &[call(7, 0, (3_001_080_000, 3_001_086_000), 5)]);
    let damaged_at = b.bytes.len();
    let mut bytes = b
        .records(
            4400,
            0,
            &[
                call(10, 0, (3_001_090_000, 3_001_900_000), 6),
                call(9, 0, (3_001_910_000, 3_001_950_000), 7),
            ],
        )
        .end(&end(3_002_000_000, "exit", 7, 0, 1))
        .bytes;
    // Flip one bit of the first record's start time.
    bytes[damaged_at + CHUNK_HEADER_LEN + 9] ^= 0x10;
    bytes
}

/// A child forked by the process of [`api_threads`] (pid 4101), traced on its
/// own: `forked_from` set, ended by `_exit`.
pub fn forked_child() -> Vec<u8> {
    let mut h = header(4102, 4101, &["./app", "--iterations", "3"], 49_000_000);
    h.forked_from = Some(4101);
    Builder::new(&h)
        .names(FUNCTIONS)
        .thread(4102, "app")
        .records(
            4102,
            0,
            &[
                call(1, 0, (49_010_000, 49_011_000), 1),
                call(2, 0, (49_020_000, 90_020_000), 2),
                call(5, 0, (90_030_000, 90_110_000), 3),
                call(7, 0, (90_120_000, 90_127_000), 4),
                call(9, 0, (90_130_000, 90_160_000), 5),
            ],
        )
        .end(&end(91_000_000, "_exit", 5, 0, 1))
        .bytes
}

/// pid 4500: NVTX ranges on two threads (nested push/pop ranges, a domain with a registered
/// string, a start/end range ended on the other thread, a mark, a named thread) around launches
/// whose kernels it holds, an external correlation id, and a module with its image.
pub fn nvtx() -> Vec<u8> {
    let ev = |kind, message, at: u64, value, domain| {
        NvtxEvent {
            kind,
            message,
            time_ns: T0 + at,
            value,
            domain,
            ..Default::default()
        }
        .to_bytes()
    };
    let ext = |kind, at: u64, id| {
        NvtxEvent {
            kind,
            time_ns: T0 + at,
            value: id,
            category: 2,
            ..Default::default()
        }
        .to_bytes()
    };
    let main = [
        ev(NvtxKind::DomainCreate, 5, 10_000, 0, 1),
        ev(NvtxKind::RegisterString, 6, 10_100, 0, 1),
        ev(NvtxKind::Push, 1, 1_000_000, 0, 0), // "train"
        ext(NvtxKind::ExternalPush, 1_050_000, 7),
        ev(NvtxKind::Push, 2, 1_100_000, 1, 0), // "step": the two launches
        ev(NvtxKind::Mark, 3, 1_150_000, 0, 0),
        ev(NvtxKind::Pop, 0, 1_400_000, 1, 0),
        ext(NvtxKind::ExternalPop, 1_450_000, 7),
        ev(NvtxKind::Push, 6, 1_500_000, 0, 1), // "registered step" in "app": the copy
        ev(NvtxKind::Pop, 0, 1_700_000, 0, 1),
        ev(NvtxKind::Start, 4, 1_800_000, 1, 0), // "async", ended on 4501
        ev(NvtxKind::Pop, 0, 2_000_000, 0, 0),
    ]
    .concat();
    let worker = [
        ev(NvtxKind::NameThread, 7, 1_810_000, 4501, 0),
        ev(NvtxKind::End, 0, 2_500_000, 1, 0),
    ]
    .concat();
    let image = ModuleImage {
        module: 1,
        context: 1,
        hash: image_hash(b"\x7fELF fixture image"),
        crc: 0x1234_5678,
        size: 18,
        bytes: Some(b"\x7fELF fixture image".to_vec()),
        in_run: false,
    };
    // Stored as it is, as format 2.1 wrote images (readers still read it; librtrace.so now
    // compresses them, which collector/tests/sass.rs covers).
    Builder::new(&header(4500, 1, &["python3", "train.py"], 0))
        .names(FUNCTIONS)
        .chunk(
            ChunkKind::NvtxStrings,
            0,
            0,
            &encode_function_names([
                (1, "train"),
                (2, "step"),
                (3, "checkpoint"),
                (4, "async"),
                (5, "app"),
                (6, "registered step"),
                (7, "loader"),
            ]),
        )
        .kernel_names(&[(0, "_Z4stepPfi")])
        .thread(4500, "python3")
        .records(
            4500,
            0,
            &[
                call(0, 0, (10_000, 900_000), 1),
                call(7, 0, (1_200_000, 1_210_000), 2),
                call(7, 0, (1_300_000, 1_310_000), 3),
                call(6, 0, (1_600_000, 1_650_000), 4),
            ],
        )
        .chunk(ChunkKind::NvtxEvents, 4500, 0, &main)
        .chunk(ChunkKind::NvtxEvents, 4501, 0, &worker)
        .kernels(&[
            kernel(
                0,
                13,
                (1_220_000, 1_240_000),
                2,
                [64, 1, 1],
                [256, 1, 1],
                32,
            ),
            kernel(
                0,
                13,
                (1_320_000, 1_350_000),
                3,
                [64, 1, 1],
                [256, 1, 1],
                32,
            ),
        ])
        .memcpys(&[copy(
            CopyKind::HtoD,
            (0, 13),
            (1_660_000, 1_700_000),
            1 << 20,
            4,
            (MemoryKind::Pinned, MemoryKind::Device),
        )])
        .modules(&[ModuleRecord {
            correlation: 1,
            timestamp_ns: T0 + 500_000,
            cubin_size: 18,
            module: 1,
            context: 1,
            flags: FLAG_CORRELATED as u8,
        }])
        .chunk(ChunkKind::ModuleImage, 0, 0, &image.encode_uncompressed())
        .end(&end(3_000_000, "exit", 4, 0, 1))
        .bytes
}

/// Every fixture: file name and bytes.
pub fn all() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("api_threads.bin", api_threads()),
        ("gpu.bin", gpu()),
        ("truncated.bin", truncated()),
        ("corrupt.bin", corrupt()),
        ("forked_child.bin", forked_child()),
        ("nvtx.bin", nvtx()),
        ("profiles.bin", profiles()),
    ]
}

/// The metrics of the `profiles.bin` set-up: Speed Of Light's throughputs and duration, the
/// hit rates and shared-memory wavefronts and conflicts, achieved occupancy, the warp
/// latency and two stall reasons, and a raw metric of no set.
pub const PROFILED_METRICS: &[&str] = &[
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__time_duration.sum",
    "l1tex__t_sector_hit_rate.pct",
    "lts__t_sector_hit_rate.pct",
    "dram__bytes_read.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__average_warp_latency_per_inst_issued.ratio",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    "smsp__sass_inst_executed_op_shared_ld.sum",
];

/// A process whose kernels were profiled: two launches of a memory-bound kernel with shared
/// load bank conflicts (its stores just under the threshold), low achieved occupancy and a
/// dominant stall; one launch of a latency-bound kernel (a value CUPTI could not evaluate);
/// an unprofiled launch; and a notice on a launch profiling refused.
pub fn profiles() -> Vec<u8> {
    let setup = ProfilerSetup {
        context: 1,
        device: 0,
        time_ns: T0 + 900_000,
        chip: "GH100".into(),
        metrics: PROFILED_METRICS.iter().map(|s| s.to_string()).collect(),
        passes: 4,
        replay: Replay::Kernel,
    };
    let profile = |correlation: u64, launch: u64, at: u64, name: &str, values: [f64; 15]| {
        let p = KernelProfile {
            context: 1,
            correlation,
            launch,
            start_ns: T0 + at,
            end_ns: T0 + at + 1_250_000,
            name: name.into(),
            range: format!("{launch}"),
            values: values.to_vec(),
            // No image: real ones come from the GPU machine; CUPTI refuses an empty one
            // (a few arbitrary bytes would be read past their end, with no set outcome).
            counter_data: Vec::new(),
        };
        encode_value(&p)
    };
    // "train" around every launch; "step" around the second.
    let nvtx: Vec<u8> = [
        (NvtxKind::Push, 1, 500_000),
        (NvtxKind::Push, 2, 2_900_000),
        (NvtxKind::Pop, 0, 4_350_000),
        (NvtxKind::Pop, 0, 8_500_000),
    ]
    .into_iter()
    .flat_map(|(kind, message, at)| {
        NvtxEvent {
            kind,
            message,
            time_ns: T0 + at,
            ..Default::default()
        }
        .to_bytes()
    })
    .collect();
    let conflicts = "_Z12bankConflictPfi";
    let stride = "_Z6stridePKfPfi";
    Builder::new(&header(4300, 4299, &["./profiled"], 0))
        .names(FUNCTIONS)
        .kernel_names(&[(1, conflicts), (2, stride)])
        .device(&h100(0))
        .thread(4300, "profiled")
        .chunk(
            ChunkKind::NvtxStrings,
            0,
            0,
            &encode_function_names([(1, "train"), (2, "step")]),
        )
        .chunk(ChunkKind::NvtxEvents, 4300, 0, &nvtx)
        .chunk(ChunkKind::ProfilerSetup, 0, 0, &encode_value(&setup))
        .records(
            4300,
            0,
            &[
                call(7, 0, (1_000_000, 2_300_000), 1),
                call(7, 0, (3_000_000, 4_300_000), 2),
                call(7, 0, (5_000_000, 6_300_000), 3),
                call(7, 0, (7_000_000, 7_010_000), 4),
                call(7, 0, (8_000_000, 8_010_000), 5),
            ],
        )
        .kernels(&[
            kernel(1, 7, (2_400_000, 2_420_000), 1, [64, 1, 1], [256, 1, 1], 32),
            kernel(1, 7, (4_400_000, 4_424_000), 2, [64, 1, 1], [256, 1, 1], 32),
            kernel(
                2,
                7,
                (6_400_000, 6_410_000),
                3,
                [128, 1, 1],
                [128, 1, 1],
                40,
            ),
            kernel(
                2,
                7,
                (7_100_000, 7_110_000),
                4,
                [128, 1, 1],
                [128, 1, 1],
                40,
            ),
            kernel(
                2,
                7,
                (8_100_000, 8_110_000),
                5,
                [128, 1, 1],
                [128, 1, 1],
                40,
            ),
        ])
        .chunk(
            ChunkKind::KernelProfile,
            0,
            0,
            &profile(
                1,
                0,
                1_020_000,
                conflicts,
                [
                    30.0,
                    92.5,
                    20_000.0,
                    20.0,
                    75.0,
                    1_048_576.0,
                    1000.0,
                    500.0,
                    1000.0,
                    99.0,
                    40.0,
                    20.0,
                    12.0,
                    2.0,
                    4096.0,
                ],
            ),
        )
        .chunk(
            ChunkKind::KernelProfile,
            0,
            0,
            &profile(
                2,
                1,
                3_020_000,
                conflicts,
                [
                    32.0,
                    91.5,
                    24_000.0,
                    22.0,
                    77.0,
                    1_048_576.0,
                    1000.0,
                    500.0,
                    1000.0,
                    99.0,
                    42.0,
                    22.0,
                    13.0,
                    2.0,
                    4096.0,
                ],
            ),
        )
        .chunk(
            ChunkKind::KernelProfile,
            0,
            0,
            &profile(
                3,
                2,
                5_020_000,
                stride,
                [
                    50.0,
                    55.0,
                    10_000.0,
                    60.0,
                    80.0,
                    524_288.0,
                    0.0,
                    0.0,
                    0.0,
                    0.0,
                    85.0,
                    10.0,
                    1.5,
                    f64::NAN,
                    0.0,
                ],
            ),
        )
        .notice(
            T0 + 7_005_000,
            "kernel profiling: launch 3 (_Z6stridePKfPfi) was not profiled: \
             cuptiRangeProfilerEnable failed: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES",
        )
        .end(&end(9_000_000, "exit", 5, 0, 1))
        .bytes
}

// ---------------------------------------------------------------------------
// Format 3.0: API records in ticks

/// Ticks at two a ns (so every ns comes back exact): the samples (ticks, ns) and the ticks of
/// a time in ns.
pub const TICK_SAMPLES: [(u64, u64); 3] = [(0, 0), (1 << 41, 1 << 40), (1 << 63, 1 << 62)];
pub fn ticks(ns: u64) -> u64 {
    ns * 2
}

/// `trace` with its kind-2 chunks as kind 34 (every other one with ticks that are ns, as
/// written without a time-stamp counter), its header saying 3.0; `None` when it has none to
/// rewrite or its chunks cannot be walked.
pub fn in_ticks(trace: &[u8]) -> Option<Vec<u8>> {
    let body = u32::from_le_bytes(trace[12..16].try_into().unwrap()) as usize;
    let mut at = 16 + body + 4;
    let mut out = trace[..at].to_vec();
    out[8..10].copy_from_slice(&3u16.to_le_bytes());
    out[10..12].copy_from_slice(&0u16.to_le_bytes());
    let mut rewritten = 0;
    while at < trace.len() {
        let h = ChunkHeader::decode(trace.get(at..at + CHUNK_HEADER_LEN)?.try_into().unwrap())?;
        let end = at + CHUNK_HEADER_LEN + h.payload_len as usize;
        let payload = trace.get(at + CHUNK_HEADER_LEN..end)?;
        let records = payload.chunks_exact(ApiRecord::SIZE);
        let fits = records
            .clone()
            .all(|b| ApiRecord::from_bytes(b.try_into().unwrap()).end_ns < 1 << 62);
        if h.kind == ChunkKind::ApiRecords && !payload.is_empty() && fits {
            let tsc = rewritten % 2 == 0;
            let mut p = Vec::new();
            for b in records {
                let mut r = ApiRecord::from_bytes(b.try_into().unwrap());
                if tsc {
                    (r.start_ns, r.end_ns) = (ticks(r.start_ns), ticks(r.end_ns));
                }
                r.write_to(&mut p);
            }
            let samples = if tsc { &TICK_SAMPLES[..] } else { &[] };
            rtrace_format::ticks::write_trailer(&mut p, samples.iter().copied(), tsc);
            let kind = ChunkKind::ApiRecordsInTicks;
            let h = ChunkHeader::new(kind, h.thread, h.seq, h.dropped, &p);
            out.extend_from_slice(&h.encode());
            out.extend_from_slice(&p);
            rewritten += 1;
        } else {
            out.extend_from_slice(&trace[at..end]);
        }
        at = end;
    }
    (rewritten > 0).then_some(out)
}
