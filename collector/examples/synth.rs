//! Writes a synthetic rtrace trace of a given size, shaped like a launch-bound program's:
//! several threads, each making launch iterations of three driver calls (`cuCtxGetDevice_v2`,
//! `cuLaunchKernel`, and every fourth iteration `cuMemcpyHtoDAsync_v2`), each launch giving a
//! kernel record and each copy a memcpy record on the thread's stream, linked by correlation
//! id. As with the driver, a launch blocks while its stream already holds `QUEUE` launches
//! that have not finished (the GPU work is slower than the launches). Chunks are sized as librtrace.so writes them (64K API records, 16K GPU records).
//! With `SYNTH_NVTX=1`, each iteration is also an NVTX push/pop range (`iteration`, nested in
//! a `step` range per 100 iterations), in NVTX chunks of 16K events per thread. With
//! `SYNTH_NVTX=2`, each thread's ranges are also nested in one `run` range over the whole
//! thread (its last step ended first). With `SYNTH_SYNC=1`, every fourth iteration also
//! allocates 1 MiB (`cuMemAlloc_v2`, freeing the thread's previous one with `cuMemFree_v2`)
//! and waits for its stream (`cuStreamSynchronize`), with their memory and synchronization
//! records, as a program that allocates and synchronizes in its loop does.
//! With `SYNTH_RANK=R`, the process is rank R of a job: its header records `RANK=R` and
//! `LOCAL_RANK=R % 8` as librtrace.so does, and every sixteenth iteration's kernel is a
//! collective (`ncclDevKernel_AllReduce_Sum_f32_RING_LL`) lasting 20 µs plus 1 µs times
//! `(R * 7) % 5` (ranks arrive at different times: the wait differs); with `SYNTH_SLOW=1`
//! also, each iteration of rank R takes `R % 4` µs longer on the host (steps differ).
//! Used by tools/bench/collector_scale.sh and tools/bench/ranks_scale.sh.
//!
//!     cargo run --release -p rtrace-collector --example synth -- OUT RECORDS [THREADS] [PID]
//!
//! RECORDS counts API and GPU records together (the file has at least that many).
use rtrace_format::*;
use std::io::{BufWriter, Write};

const API_CHUNK: usize = 65_536;
const GPU_CHUNK: usize = 16_384;
const NVTX_CHUNK: usize = 16_384;
/// Launches a stream holds before the next one blocks.
const QUEUE: usize = 1024;

struct Thread {
    tid: u64,
    now: u64,
    gpu_free: u64,
    iteration: u64,
    api: Vec<u8>,
    api_count: usize,
    seq: u64,
    nvtx: Vec<u8>,
    nvtx_count: usize,
    /// Ends of the thread's last `QUEUE` kernels, oldest first.
    queued: std::collections::VecDeque<u64>,
}

impl Thread {
    /// Adds an NVTX push (`message` 1, 2 or 3) or pop at the thread's time.
    fn nvtx(&mut self, out: &mut impl Write, kind: NvtxKind, message: u32, level: u64) {
        let e = NvtxEvent {
            kind,
            message,
            time_ns: self.now,
            value: level,
            ..Default::default()
        };
        self.nvtx.extend_from_slice(&e.to_bytes());
        self.nvtx_count += 1;
        self.now += 10;
        if self.nvtx_count == NVTX_CHUNK {
            chunk(out, ChunkKind::NvtxEvents, self.tid, 0, &self.nvtx);
            self.nvtx.clear();
            self.nvtx_count = 0;
        }
    }
}

fn chunk(out: &mut impl Write, kind: ChunkKind, thread: u64, seq: u64, payload: &[u8]) {
    let h = ChunkHeader::new(kind, thread, seq, 0, payload);
    out.write_all(&h.encode()).expect("write");
    out.write_all(payload).expect("write");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: synth OUT RECORDS [THREADS=8] [PID=4242]");
        std::process::exit(2);
    }
    let records: u64 = args[1].parse().expect("RECORDS: a number");
    let threads: u64 = args
        .get(2)
        .map_or(8, |s| s.parse().expect("THREADS: a number"));
    let pid: u32 = args
        .get(3)
        .map_or(4242, |s| s.parse().expect("PID: a number"));
    let file = std::fs::File::create(&args[0]).expect("create OUT");
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let t0 = 1_000_000_000_000u64;
    let rank: Option<u64> = std::env::var("SYNTH_RANK")
        .ok()
        .map(|v| v.parse().expect("SYNTH_RANK: a number"));
    let slow = std::env::var("SYNTH_SLOW").is_ok_and(|v| v == "1");
    // Extra host time per iteration, ns.
    let lag = match (rank, slow) {
        (Some(r), true) => (r % 4) * 1_000,
        _ => 0,
    };
    let header = ProcessHeader {
        pid,
        ppid: 1,
        command_line: vec!["synth".into(), records.to_string()],
        executable: "/usr/bin/synth".into(),
        hostname: "synth-host".into(),
        boot_id: "00000000-0000-0000-0000-000000000000".into(),
        writer_version: "synth".into(),
        start: ClockAnchor {
            monotonic_ns: t0,
            realtime_ns: 1_700_000_000_000_000_000,
        },
        clock: "CLOCK_MONOTONIC".into(),
        rank_env: rank.map_or_else(Vec::new, |r| {
            vec![
                ("RANK".into(), r.to_string()),
                ("LOCAL_RANK".into(), (r % 8).to_string()),
            ]
        }),
        ..Default::default()
    };
    out.write_all(&encode_file_header(&header)).expect("write");
    let names = [
        (0u32, "cuCtxGetDevice_v2"),
        (1, "cuLaunchKernel"),
        (2, "cuMemcpyHtoDAsync_v2"),
        (3, "cuStreamSynchronize"),
        (4, "cuMemAlloc_v2"),
        (5, "cuMemFree_v2"),
    ];
    chunk(
        &mut out,
        ChunkKind::FunctionNames,
        0,
        0,
        &encode_function_names(names),
    );
    let kernels = [
        (0u32, "_Z9vectorAddPKfS0_Pfi"),
        (1, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"),
        (2, "gemm_bf16_128x128"),
        (3, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
    ];
    chunk(
        &mut out,
        ChunkKind::KernelNames,
        0,
        0,
        &encode_function_names(kernels),
    );
    let mode = std::env::var("SYNTH_NVTX").unwrap_or_default();
    let (nvtx, outer) = (mode == "1" || mode == "2", mode == "2");
    let sync = std::env::var("SYNTH_SYNC").is_ok_and(|v| v == "1");
    // Nesting level of `step`.
    let level = u64::from(outer);
    if nvtx {
        chunk(
            &mut out,
            ChunkKind::NvtxStrings,
            0,
            0,
            &encode_function_names([(1, "step"), (2, "iteration"), (3, "run")]),
        );
    }
    let mut ts: Vec<Thread> = (0..threads)
        .map(|i| Thread {
            tid: u64::from(pid) * 100 + i,
            now: t0 + i * 137,
            gpu_free: t0,
            iteration: 0,
            api: Vec::with_capacity(API_CHUNK * ApiRecord::SIZE),
            api_count: 0,
            seq: 0,
            nvtx: Vec::new(),
            nvtx_count: 0,
            queued: std::collections::VecDeque::with_capacity(QUEUE),
        })
        .collect();
    for t in &ts {
        let info = ThreadInfo {
            tid: t.tid,
            name: format!("worker-{}", t.tid % 100),
        };
        chunk(
            &mut out,
            ChunkKind::ThreadInfo,
            t.tid,
            0,
            &encode_value(&info),
        );
    }
    if outer {
        for t in &mut ts {
            t.nvtx(&mut out, NvtxKind::Push, 3, 0);
        }
    }
    let (mut kbuf, mut mbuf) = (Vec::new(), Vec::new());
    let (mut kn, mut mn) = (0usize, 0usize);
    let (mut abuf, mut sbuf) = (Vec::new(), Vec::new());
    let (mut an, mut sn) = (0usize, 0usize);
    // Each thread's allocation in use, by thread index.
    let mut allocated: Vec<Option<u64>> = vec![None; threads as usize];
    let mut written = 0u64;
    let mut correlation = 1u64;
    let mut total_api = 0u64;
    let mut i = 0usize;
    while written < records {
        let ti = i % threads as usize;
        let t = &mut ts[ti];
        i += 1;
        let stream = 13 + (t.tid % 100) as u32;
        if nvtx {
            if t.iteration.is_multiple_of(100) {
                t.nvtx(&mut out, NvtxKind::Push, 1, level);
            }
            t.nvtx(&mut out, NvtxKind::Push, 2, level + 1);
        }
        let mut api =
            |t: &mut Thread, function: u32, dur: u64, out: &mut BufWriter<std::fs::File>| {
                let rec = ApiRecord {
                    function,
                    result: 0,
                    start_ns: t.now,
                    end_ns: t.now + dur,
                    correlation,
                };
                correlation += 1;
                t.now += dur + 40;
                rec.write_to(&mut t.api);
                t.api_count += 1;
                if t.api_count == API_CHUNK {
                    chunk(out, ChunkKind::ApiRecords, t.tid, t.seq, &t.api);
                    t.seq += 1;
                    t.api.clear();
                    t.api_count = 0;
                }
                rec
            };
        api(t, 0, 25, &mut out);
        // A full queue: the launch returns when its oldest kernel ends.
        let mut dur = 2_500 + (t.iteration % 7) * 100;
        if t.queued.len() == QUEUE {
            let oldest = t.queued.pop_front().unwrap_or(0);
            dur = dur.max(oldest.saturating_sub(t.now));
        }
        let launch = api(t, 1, dur, &mut out);
        let start = (launch.start_ns + 6_000).max(t.gpu_free);
        let kernel = (t.iteration % 3) as u32;
        let (kernel, took) = match rank {
            Some(r) if t.iteration % 16 == 15 => (3, 20_000 + (r * 7) % 5 * 1_000),
            _ => (kernel, 1_500 + u64::from(kernel) * 20_000),
        };
        let k = KernelRecord {
            correlation: launch.correlation,
            start_ns: start,
            end_ns: start + took,
            source_correlation: launch.correlation as u32,
            name: kernel,
            device: (t.tid % 2) as u32,
            context: 1,
            stream,
            grid: [128, 1, 1],
            block: [256, 1, 1],
            registers_per_thread: 32,
            flags: FLAG_CORRELATED,
            ..Default::default()
        };
        t.gpu_free = k.end_ns;
        t.queued.push_back(k.end_ns);
        kbuf.extend_from_slice(&k.to_bytes());
        kn += 1;
        written += 3;
        if t.iteration.is_multiple_of(4) {
            let copy = api(t, 2, 3_000, &mut out);
            let start = (copy.start_ns + 2_000).max(t.gpu_free);
            let m = MemcpyRecord {
                correlation: copy.correlation,
                start_ns: start,
                end_ns: start + 4_000,
                bytes: 1 << 20,
                source_correlation: copy.correlation as u32,
                device: k.device,
                context: 1,
                stream,
                kind: CopyKind::HtoD,
                src_kind: MemoryKind::Pinned,
                dst_kind: MemoryKind::Device,
                flags: FLAG_CORRELATED as u8,
                ..Default::default()
            };
            t.gpu_free = m.end_ns;
            mbuf.extend_from_slice(&m.to_bytes());
            mn += 1;
            written += 2;
            if sync {
                let memory = |call: &ApiRecord, operation, address| MemoryRecord {
                    correlation: call.correlation,
                    timestamp_ns: call.start_ns + 100,
                    address,
                    bytes: 1 << 20,
                    source_correlation: call.correlation as u32,
                    device: k.device,
                    context: 1,
                    stream: ID_NONE,
                    operation,
                    kind: MemoryKind::Device,
                    flags: FLAG_CORRELATED as u8,
                    ..Default::default()
                };
                if let Some(address) = allocated[ti].take() {
                    let free = api(t, 5, 900, &mut out);
                    abuf.extend_from_slice(
                        &memory(&free, MemoryOperation::Free, address).to_bytes(),
                    );
                    an += 1;
                    written += 2;
                }
                let alloc = api(t, 4, 1_200, &mut out);
                let address = 0x7f00_0000_0000 + (alloc.correlation << 20);
                abuf.extend_from_slice(&memory(&alloc, MemoryOperation::Alloc, address).to_bytes());
                allocated[ti] = Some(address);
                an += 1;
                // The wait lasts until the stream's work is done.
                let wait = t.gpu_free.saturating_sub(t.now).max(500);
                let call = api(t, 3, wait, &mut out);
                let s = SyncRecord {
                    correlation: call.correlation,
                    start_ns: call.start_ns + 50,
                    end_ns: call.end_ns - 50,
                    source_correlation: call.correlation as u32,
                    context: 1,
                    stream,
                    event: ID_NONE,
                    kind: SyncKind::StreamSynchronize,
                    flags: FLAG_CORRELATED as u8,
                    ..Default::default()
                };
                sbuf.extend_from_slice(&s.to_bytes());
                sn += 1;
                written += 4;
            }
        }
        if nvtx {
            t.nvtx(&mut out, NvtxKind::Pop, 0, level + 1);
            if t.iteration % 100 == 99 {
                t.nvtx(&mut out, NvtxKind::Pop, 0, level);
            }
        }
        t.iteration += 1;
        t.now += 200 + lag;
        if kn == GPU_CHUNK {
            chunk(&mut out, ChunkKind::Kernels, 0, 0, &kbuf);
            kbuf.clear();
            kn = 0;
        }
        if mn == GPU_CHUNK {
            chunk(&mut out, ChunkKind::Memcpys, 0, 0, &mbuf);
            mbuf.clear();
            mn = 0;
        }
        if an == GPU_CHUNK {
            chunk(&mut out, ChunkKind::Memory, 0, 0, &abuf);
            abuf.clear();
            an = 0;
        }
        if sn == GPU_CHUNK {
            chunk(&mut out, ChunkKind::Sync, 0, 0, &sbuf);
            sbuf.clear();
            sn = 0;
        }
    }
    for t in &mut ts {
        if outer {
            if !t.iteration.is_multiple_of(100) {
                t.nvtx(&mut out, NvtxKind::Pop, 0, level);
            }
            t.nvtx(&mut out, NvtxKind::Pop, 0, 0);
        }
        total_api += t.seq * API_CHUNK as u64 + t.api_count as u64;
        if t.api_count > 0 {
            chunk(&mut out, ChunkKind::ApiRecords, t.tid, t.seq, &t.api);
        }
        if t.nvtx_count > 0 {
            chunk(&mut out, ChunkKind::NvtxEvents, t.tid, 0, &t.nvtx);
        }
    }
    if kn > 0 {
        chunk(&mut out, ChunkKind::Kernels, 0, 0, &kbuf);
    }
    if mn > 0 {
        chunk(&mut out, ChunkKind::Memcpys, 0, 0, &mbuf);
    }
    if an > 0 {
        chunk(&mut out, ChunkKind::Memory, 0, 0, &abuf);
    }
    if sn > 0 {
        chunk(&mut out, ChunkKind::Sync, 0, 0, &sbuf);
    }
    let end = ProcessEnd {
        end: ClockAnchor {
            monotonic_ns: ts.iter().map(|t| t.now).max().unwrap_or(t0),
            realtime_ns: 1_700_000_001_000_000_000,
        },
        reason: "exit".into(),
        records: total_api,
        threads,
        ..Default::default()
    };
    chunk(&mut out, ChunkKind::ProcessEnd, 0, 0, &encode_value(&end));
    out.flush().expect("write");
    println!("{written} records ({total_api} API) in {}", args[0]);
}
