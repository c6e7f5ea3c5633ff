//! Writes one of the adversarial traces the collector must read in time proportional to its
//! records (docs/benchmarks.md, "Collector scale"):
//!
//! - `open-nvtx N`: one thread pushes N NVTX ranges and pops none, with a call between pushes;
//! - `nested-nvtx N`: the same, every range popped at the end (innermost first);
//! - `waiting-nvtx N`: `nested-nvtx` with the calls made by a second thread with no range (the
//!   process view credits each to every range open: range i holds N - i kernels);
//! - `fifo-nvtx N`: N start/end ranges started, then ended in the order they started, a call
//!   after each start and each end (ranges that end out of nesting order);
//! - `sparse-ids N`: N launches, each with its kernel record, correlation ids 2^23 apart;
//! - `extreme N`: N launches with their kernels, the last four records with extreme times
//!   (start = u64::MAX, start near u64::MAX, end before start, start 0).
//!
//!     cargo run --release -p rtrace-collector --example adversarial -- OUT KIND N
use rtrace_format::*;
use std::io::{BufWriter, Write};

const CHUNK: usize = 16_384;

struct Out {
    w: BufWriter<std::fs::File>,
    seq: std::collections::HashMap<u64, u64>,
}

impl Out {
    fn chunk(&mut self, kind: ChunkKind, thread: u64, payload: &[u8]) {
        let seq = self.seq.entry(thread).or_insert(0);
        let h = ChunkHeader::new(kind, thread, *seq, 0, payload);
        *seq += 1;
        self.w.write_all(&h.encode()).expect("write");
        self.w.write_all(payload).expect("write");
    }

    /// Writes `records` in chunks of `CHUNK`.
    fn records(&mut self, kind: ChunkKind, thread: u64, records: &[Vec<u8>]) {
        for c in records.chunks(CHUNK) {
            self.chunk(kind, thread, &c.concat());
        }
    }
}

const TID: u64 = 777;
const T0: u64 = 1_000_000_000_000;

fn launch(start: u64, end: u64, correlation: u64) -> Vec<u8> {
    ApiRecord {
        function: 1,
        result: 0,
        start_ns: start,
        end_ns: end,
        correlation,
    }
    .to_bytes()
    .to_vec()
}

fn kernel(start: u64, end: u64, correlation: u64) -> Vec<u8> {
    KernelRecord {
        correlation,
        start_ns: start,
        end_ns: end,
        name: 0,
        device: 0,
        context: 1,
        stream: 13,
        grid: [1, 1, 1],
        block: [32, 1, 1],
        flags: FLAG_CORRELATED,
        ..Default::default()
    }
    .to_bytes()
    .to_vec()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 3 {
        eprintln!(
            "usage: adversarial OUT open-nvtx|nested-nvtx|waiting-nvtx|fifo-nvtx|sparse-ids|extreme N"
        );
        std::process::exit(2);
    }
    let n: u64 = args[2].parse().expect("N: a number");
    let file = std::fs::File::create(&args[0]).expect("create OUT");
    let mut out = Out {
        w: BufWriter::with_capacity(1 << 20, file),
        seq: Default::default(),
    };
    let header = ProcessHeader {
        pid: 4343,
        ppid: 1,
        command_line: vec!["adversarial".into(), args[1].clone(), n.to_string()],
        executable: "/usr/bin/adversarial".into(),
        hostname: "adversarial-host".into(),
        boot_id: "00000000-0000-0000-0000-000000000000".into(),
        writer_version: "adversarial".into(),
        start: ClockAnchor {
            monotonic_ns: T0,
            realtime_ns: 1_700_000_000_000_000_000,
        },
        clock: "CLOCK_MONOTONIC".into(),
        ..Default::default()
    };
    out.w
        .write_all(&encode_file_header(&header))
        .expect("write");
    out.chunk(
        ChunkKind::FunctionNames,
        0,
        &encode_function_names([(1u32, "cuLaunchKernel")]),
    );
    out.chunk(
        ChunkKind::KernelNames,
        0,
        &encode_function_names([(0u32, "k")]),
    );
    let (mut api, mut gpu, mut nvtx) = (Vec::new(), Vec::new(), Vec::new());
    match args[1].as_str() {
        "open-nvtx" | "nested-nvtx" | "waiting-nvtx" => {
            out.chunk(
                ChunkKind::NvtxStrings,
                0,
                &encode_function_names([(1u32, "open")]),
            );
            for i in 0..n {
                let t = T0 + i * 1_000;
                let e = NvtxEvent {
                    kind: NvtxKind::Push,
                    message: 1,
                    time_ns: t,
                    value: i,
                    ..Default::default()
                };
                nvtx.push(e.to_bytes().to_vec());
                api.push(launch(t + 100, t + 500, i + 1));
                gpu.push(kernel(t + 600, t + 900, i + 1));
            }
            if args[1] != "open-nvtx" {
                for i in 0..n {
                    let e = NvtxEvent {
                        kind: NvtxKind::Pop,
                        time_ns: T0 + n * 1_000 + i,
                        ..Default::default()
                    };
                    nvtx.push(e.to_bytes().to_vec());
                }
            }
        }
        "fifo-nvtx" => {
            out.chunk(
                ChunkKind::NvtxStrings,
                0,
                &encode_function_names([(1u32, "fifo")]),
            );
            for i in 0..2 * n {
                let t = T0 + i * 1_000;
                let e = NvtxEvent {
                    kind: if i < n {
                        NvtxKind::Start
                    } else {
                        NvtxKind::End
                    },
                    message: if i < n { 1 } else { 0 },
                    time_ns: t,
                    value: i % n,
                    ..Default::default()
                };
                nvtx.push(e.to_bytes().to_vec());
                api.push(launch(t + 100, t + 500, i + 1));
                gpu.push(kernel(t + 600, t + 900, i + 1));
            }
        }
        "sparse-ids" => {
            for i in 0..n {
                let t = T0 + i * 1_000;
                let id = 1 + (i << 23);
                api.push(launch(t, t + 400, id));
                gpu.push(kernel(t + 500, t + 900, id));
            }
        }
        "extreme" => {
            for i in 0..n {
                let t = T0 + i * 1_000;
                api.push(launch(t, t + 400, i + 1));
                gpu.push(kernel(t + 500, t + 900, i + 1));
            }
            let odd = [
                (u64::MAX, u64::MAX),
                (u64::MAX - 10, u64::MAX - 5),
                (T0 + 50, T0 + 10),
                (0, 5),
            ];
            for (k, (s, e)) in odd.into_iter().enumerate() {
                let id = n + 1 + k as u64;
                api.push(launch(s, e, id));
                gpu.push(kernel(s, e, id));
            }
        }
        other => panic!("unknown kind {other}"),
    }
    // The calls of `waiting-nvtx` are another thread's.
    let waiting = args[1] == "waiting-nvtx";
    out.records(ChunkKind::ApiRecords, TID + waiting as u64, &api);
    out.records(ChunkKind::Kernels, 0, &gpu);
    out.records(ChunkKind::NvtxEvents, TID, &nvtx);
    let end = ProcessEnd {
        end: ClockAnchor {
            monotonic_ns: T0 + n * 3_000,
            realtime_ns: 1_700_000_001_000_000_000,
        },
        reason: "exit".into(),
        records: api.len() as u64,
        threads: 1 + waiting as u64,
        ..Default::default()
    };
    out.chunk(ChunkKind::ProcessEnd, 0, &encode_value(&end));
    out.w.flush().expect("write");
    println!(
        "{} API, {} GPU, {} NVTX records in {}",
        api.len(),
        gpu.len(),
        nvtx.len(),
        args[0]
    );
}
