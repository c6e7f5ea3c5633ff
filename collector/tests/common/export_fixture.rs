//! Trace files built in memory for the export tests (shared by the unit
//! tests in `src/export/tests.rs` and the integration tests here).
#![allow(dead_code)]

use rtrace_format::*;

/// Builds a trace file chunk by chunk.
pub struct Builder {
    pub bytes: Vec<u8>,
}

impl Builder {
    pub fn new(header: &ProcessHeader) -> Self {
        Builder {
            bytes: encode_file_header(header),
        }
    }
    pub fn chunk(mut self, kind: ChunkKind, thread: u64, payload: &[u8]) -> Self {
        let h = ChunkHeader::new(kind, thread, 0, 0, payload);
        self.bytes.extend_from_slice(&h.encode());
        self.bytes.extend_from_slice(payload);
        self
    }
    pub fn names(self, names: &[(u32, &str)]) -> Self {
        let payload = encode_function_names(names.iter().copied());
        self.chunk(ChunkKind::FunctionNames, 0, &payload)
    }
    pub fn kernel_names(self, names: &[(u32, &str)]) -> Self {
        let payload = encode_function_names(names.iter().copied());
        self.chunk(ChunkKind::KernelNames, 0, &payload)
    }
    pub fn thread(self, tid: u64, name: &str) -> Self {
        let info = ThreadInfo {
            tid,
            name: name.into(),
        };
        self.chunk(ChunkKind::ThreadInfo, tid, &encode_value(&info))
    }
    pub fn records(self, thread: u64, recs: &[ApiRecord]) -> Self {
        let mut payload = Vec::new();
        for r in recs {
            r.write_to(&mut payload);
        }
        self.chunk(ChunkKind::ApiRecords, thread, &payload)
    }
    pub fn kernels(self, recs: &[KernelRecord]) -> Self {
        let payload: Vec<u8> = recs.iter().flat_map(|r| r.to_bytes()).collect();
        self.chunk(ChunkKind::Kernels, 0, &payload)
    }
    pub fn memcpys(self, recs: &[MemcpyRecord]) -> Self {
        let payload: Vec<u8> = recs.iter().flat_map(|r| r.to_bytes()).collect();
        self.chunk(ChunkKind::Memcpys, 0, &payload)
    }
    pub fn memsets(self, recs: &[MemsetRecord]) -> Self {
        let payload: Vec<u8> = recs.iter().flat_map(|r| r.to_bytes()).collect();
        self.chunk(ChunkKind::Memsets, 0, &payload)
    }
    pub fn memory(self, recs: &[MemoryRecord]) -> Self {
        let payload: Vec<u8> = recs.iter().flat_map(|r| r.to_bytes()).collect();
        self.chunk(ChunkKind::Memory, 0, &payload)
    }
    pub fn device(self, ordinal: u32, name: &str) -> Self {
        let d = DeviceInfo {
            ordinal,
            name: name.into(),
            total_memory: 80 << 30,
            attributes: vec![],
        };
        self.chunk(ChunkKind::DeviceInfo, 0, &encode_value(&d))
    }
}

pub fn header(pid: u32, command_line: &[&str]) -> ProcessHeader {
    ProcessHeader {
        pid,
        ppid: 1,
        forked_from: None,
        command_line: command_line.iter().map(|s| s.to_string()).collect(),
        executable: "/opt/app".into(),
        hostname: "gpu1".into(),
        boot_id: "b00t".into(),
        writer_version: "0.1.0".into(),
        start: ClockAnchor {
            monotonic_ns: 1_000,
            realtime_ns: 1_714_566_896_789_000_000,
        },
        clock: "CLOCK_MONOTONIC".into(),
        session: String::new(),
        rank_env: Vec::new(),
    }
}

/// An API call from `start` to `end`.
pub fn call(function: u32, result: u32, span: (u64, u64), correlation: u64) -> ApiRecord {
    ApiRecord {
        function,
        result,
        start_ns: span.0,
        end_ns: span.1,
        correlation,
    }
}

/// A kernel on (device, stream), in the device's context, flagged correlated when `flagged`.
pub fn kernel(
    name: u32,
    at: (u32, u32),
    span: (u64, u64),
    corr: u64,
    flagged: bool,
) -> KernelRecord {
    KernelRecord {
        correlation: corr,
        start_ns: span.0,
        end_ns: span.1,
        name,
        device: at.0,
        // CUPTI numbers contexts from 1; one per device here.
        context: at.0 + 1,
        stream: at.1,
        grid: [120, 1, 1],
        block: [256, 1, 1],
        registers_per_thread: 32,
        static_shared_memory: 1024,
        dynamic_shared_memory: 0,
        flags: if flagged { FLAG_CORRELATED } else { 0 },
        ..Default::default()
    }
}

pub fn copy(
    kind: CopyKind,
    at: (u32, u32),
    span: (u64, u64),
    bytes: u64,
    corr: u64,
    kinds: (MemoryKind, MemoryKind),
) -> MemcpyRecord {
    MemcpyRecord {
        correlation: corr,
        start_ns: span.0,
        end_ns: span.1,
        bytes,
        device: at.0,
        // CUPTI numbers contexts from 1; one per device here.
        context: at.0 + 1,
        stream: at.1,
        kind,
        src_kind: kinds.0,
        dst_kind: kinds.1,
        flags: if corr != 0 { FLAG_CORRELATED as u8 } else { 0 },
        ..Default::default()
    }
}

pub fn memory(
    operation: MemoryOperation,
    kind: MemoryKind,
    device: u32,
    at: u64,
    bytes: u64,
    corr: u64,
) -> MemoryRecord {
    MemoryRecord {
        correlation: corr,
        timestamp_ns: at,
        address: 0x7f00_0000_0000 + bytes,
        bytes,
        device,
        stream: ID_NONE,
        operation,
        kind,
        flags: if corr != 0 { FLAG_CORRELATED as u8 } else { 0 },
        ..Default::default()
    }
}

pub const VECADD: &str = "vecadd(float const*, float const*, float*, int)";

/// One process (pid 1234, `./app --size '2 MB'`).
///
/// Thread 11 "app": cuInit 2000-2100 (corr 1), cuMemAlloc_v2 2200-2300 (2),
/// cuMemcpyHtoD_v2 2400-2500 (3), cuLaunchKernel 2600-2650 (4) and 2700-2750
/// (5), cuMemsetD8_v2 2800-2850 (6), cuMemFree_v2 6000-6100 (7).
/// Thread 12 "worker": cuLaunchKernel 3000-3050 (8), cuLaunchKernel
/// 3100-3300 (9) with a failed cuMemAlloc_v2 3150-3200 (10, result 2) in it.
///
/// Device 0 ("NVIDIA H100 80GB HBM3"), stream 7: HtoD 4096 B 2450-2900 (3),
/// vecadd 3000-4000 (4) and 3800-5000 (5; overlaps the first). Stream 8:
/// memset 1000 B 5000-5100 (6). Device 1, stream 3: fill 2900-3100 (8: starts
/// before its call), kernel#9 3400-3500 (not flagged), DtoH 1536 B 3600-3700
/// (42: no such call).
///
/// Memory on device 0: device-static 1 MiB at 1500 (no call), device 4096 at
/// 2250 (2), pinned 8192 at 3160 (10), free of the 4096 at 6050 (7), and a
/// record of unknown operation.
pub fn sample() -> Builder {
    Builder::new(&header(1234, &["./app", "--size", "2 MB"]))
        .names(&[
            (0, "cuInit"),
            (1, "cuLaunchKernel"),
            (2, "cuMemcpyHtoD_v2"),
            (3, "cuMemsetD8_v2"),
            (4, "cuMemAlloc_v2"),
            (5, "cuMemFree_v2"),
        ])
        .kernel_names(&[(0, "_Z6vecaddPKfS0_Pfi"), (1, "fill")])
        .device(0, "NVIDIA H100 80GB HBM3")
        .thread(11, "app")
        .records(
            11,
            &[
                call(0, 0, (2_000, 2_100), 1),
                call(4, 0, (2_200, 2_300), 2),
                call(2, 0, (2_400, 2_500), 3),
                call(1, 0, (2_600, 2_650), 4),
            ],
        )
        .thread(12, "worker")
        .records(
            12,
            &[
                call(1, 0, (3_000, 3_050), 8),
                call(4, 2, (3_150, 3_200), 10),
                call(1, 0, (3_100, 3_300), 9),
            ],
        )
        .records(
            11,
            &[
                call(1, 0, (2_700, 2_750), 5),
                call(3, 0, (2_800, 2_850), 6),
                call(5, 0, (6_000, 6_100), 7),
            ],
        )
        .kernels(&[
            kernel(0, (0, 7), (3_000, 4_000), 4, true),
            kernel(0, (0, 7), (3_800, 5_000), 5, true),
            kernel(1, (1, 3), (2_900, 3_100), 8, true),
            kernel(9, (1, 3), (3_400, 3_500), 9, false),
        ])
        .memcpys(&[
            copy(
                CopyKind::HtoD,
                (0, 7),
                (2_450, 2_900),
                4096,
                3,
                (MemoryKind::Pinned, MemoryKind::Device),
            ),
            copy(
                CopyKind::DtoH,
                (1, 3),
                (3_600, 3_700),
                1536,
                42,
                (MemoryKind::Device, MemoryKind::Pageable),
            ),
        ])
        .memsets(&[MemsetRecord {
            correlation: 6,
            start_ns: 5_000,
            end_ns: 5_100,
            bytes: 1000,
            device: 0,
            context: 1,
            stream: 8,
            value: 0,
            ..Default::default()
        }])
        .memory(&[
            memory(
                MemoryOperation::Alloc,
                MemoryKind::DeviceStatic,
                0,
                1_500,
                1 << 20,
                0,
            ),
            memory(
                MemoryOperation::Alloc,
                MemoryKind::Device,
                0,
                2_250,
                4096,
                2,
            ),
            memory(
                MemoryOperation::Alloc,
                MemoryKind::Pinned,
                0,
                3_160,
                8192,
                10,
            ),
            memory(MemoryOperation::Free, MemoryKind::Device, 0, 6_050, 4096, 7),
            memory(
                MemoryOperation::Unknown,
                MemoryKind::Device,
                0,
                6_060,
                4096,
                0,
            ),
        ])
}

/// A small pseudo-random generator (xorshift), so that generated traces are
/// the same on every run.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A generated trace of `pid`: `threads` threads of `calls` calls each
/// (every 4th a launch, every 16th holding a nested call); each launch runs
/// a kernel on one of 2 devices × 3 streams, sometimes overlapping the one
/// before on its stream; every 8th call also copies; memory alloc/free
/// pairs on both devices.
pub fn generated(pid: u32, threads: u64, calls: u64, seed: u64) -> Builder {
    let mut rng = Rng(seed | 1);
    let mut b = Builder::new(&header(pid, &["python3", "train.py"]))
        .names(&[
            (0, "cuLaunchKernel"),
            (1, "cuMemcpyAsync"),
            (2, "cuStreamSynchronize"),
            (3, "cuCtxGetCurrent"),
            (4, "cuMemAlloc_v2"),
        ])
        .kernel_names(&[
            (0, "_Z6vecaddPKfS0_Pfi"),
            (1, "_ZN5torch4gemmIfEEvPT_i"),
            (2, "relu_kernel"),
        ]);
    let mut kernels = Vec::new();
    let mut copies = Vec::new();
    let mut memory_records = Vec::new();
    let mut corr = 0u64;
    let mut stream_end = [[0u64; 3]; 2];
    for t in 0..threads {
        let tid = 1000 + t;
        b = b.thread(tid, &format!("worker-{t}"));
        let mut recs = Vec::with_capacity(calls as usize);
        // A day after boot, as real CLOCK_MONOTONIC times are: 8-byte varints.
        let mut at = 86_400_000_000_000 + rng.below(1000);
        for i in 0..calls {
            corr += 1;
            let dur = 200 + rng.below(3_000);
            let start = at;
            let end = start + dur;
            let function = match i % 4 {
                0 => 0,
                1 if i % 8 == 1 => 1,
                1 => 4,
                2 => 2,
                _ => 3,
            };
            recs.push(call(
                function as u32,
                (i % 97 == 5) as u32,
                (start, end),
                corr,
            ));
            if i % 16 == 3 && dur > 100 {
                corr += 1;
                recs.push(call(3, 0, (start + 10, start + 50), corr));
            }
            let device = rng.below(2) as usize;
            let stream = rng.below(3) as usize;
            if function == 0 {
                // Mostly after the previous kernel on the stream; 1 in 8 overlaps it.
                let prev = stream_end[device][stream];
                let mut s = (start + 1_000 + rng.below(5_000)).max(prev);
                if rng.below(8) == 0 && prev > 300 {
                    s = prev - 300;
                }
                let e = s + 500 + rng.below(20_000);
                stream_end[device][stream] = stream_end[device][stream].max(e);
                let flagged = rng.below(16) != 0;
                kernels.push(kernel(
                    rng.below(3) as u32,
                    (device as u32, 7 + stream as u32),
                    (s, e),
                    corr,
                    flagged,
                ));
                if i % 64 == 0 {
                    // A graph launch: two more kernels with the call's correlation id.
                    for _ in 0..2 {
                        let s = stream_end[device][stream];
                        let e = s + 500 + rng.below(5_000);
                        stream_end[device][stream] = e;
                        kernels.push(kernel(
                            2,
                            (device as u32, 7 + stream as u32),
                            (s, e),
                            corr,
                            flagged,
                        ));
                    }
                }
            } else if function == 1 {
                let s = (start + 500).max(stream_end[device][stream]);
                let e = s + 100 + rng.below(4_000);
                stream_end[device][stream] = e;
                copies.push(copy(
                    if rng.below(2) == 0 {
                        CopyKind::HtoD
                    } else {
                        CopyKind::DtoH
                    },
                    (device as u32, 7 + stream as u32),
                    (s, e),
                    1 + rng.below(1 << 24),
                    corr,
                    (MemoryKind::Pinned, MemoryKind::Device),
                ));
            } else if function == 4 {
                let bytes = 256 * (1 + rng.below(4096));
                let kind = if rng.below(4) == 0 {
                    MemoryKind::Pinned
                } else {
                    MemoryKind::Device
                };
                memory_records.push(memory(
                    MemoryOperation::Alloc,
                    kind,
                    device as u32,
                    start + 5,
                    bytes,
                    corr,
                ));
                memory_records.push(memory(
                    MemoryOperation::Free,
                    kind,
                    device as u32,
                    start + 5 + rng.below(1_000_000),
                    bytes,
                    0,
                ));
            }
            at = end + rng.below(2_000);
        }
        // Records in chunks of 4096, as the tracer writes them.
        for chunk in recs.chunks(4096) {
            b = b.records(tid, chunk);
        }
    }
    for chunk in kernels.chunks(4096) {
        b = b.kernels(chunk);
    }
    for chunk in copies.chunks(4096) {
        b = b.memcpys(chunk);
    }
    for chunk in memory_records.chunks(4096) {
        b = b.memory(chunk);
    }
    b.device(1, "NVIDIA H200")
}
