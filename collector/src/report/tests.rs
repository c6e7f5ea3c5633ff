//! The streamed report agrees with the in-memory one, byte for byte, on traces built to be
//! awkward: many distinct durations (selection passes), GPU chunks out of time order, ids
//! over several lookup ranges, a repeated id, stray ids near 2^62 and 2^64, synchronizations linked to calls (or to none),
//! allocations and frees of two processes at equal times, NVTX ranges (nested, crossing
//! threads) and external ids projected onto GPU work, two files.

use super::launches::BLOCK;
use super::*;
use crate::export::ExportFormat;
use crate::output::{render_report_section, render_sections, Format, Section};
use rtrace_format::*;
use std::io::Write;

fn chunk(out: &mut Vec<u8>, kind: ChunkKind, thread: u64, payload: &[u8]) {
    out.extend_from_slice(&ChunkHeader::new(kind, thread, 0, 0, payload).encode());
    out.extend_from_slice(payload);
}

/// A trace of process `pid`: 3 threads of API records (ids interleaved, one repeated),
/// kernels, copies and memsets in chunks out of time order, syncs, a device.
fn awkward(pid: u32, seed: u64, truncate: bool) -> Vec<u8> {
    let mut x = seed;
    let mut rnd = move |m: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % m
    };
    let t0 = 1_000_000_000u64;
    let header = ProcessHeader {
        pid,
        start: ClockAnchor {
            monotonic_ns: t0,
            realtime_ns: 1_700_000_000_000_000_000,
        },
        boot_id: "b".into(),
        ..Default::default()
    };
    let mut f = encode_file_header(&header);
    let names = [
        (0u32, "cuLaunchKernel"),
        (1, "cuMemcpyAsync"),
        (2, "cuStreamQuery"),
    ];
    chunk(
        &mut f,
        ChunkKind::FunctionNames,
        0,
        &encode_function_names(names),
    );
    let kernels = [(0u32, "_Z4gemmv"), (1, "relu"), (2, "_Z3addPf")];
    chunk(
        &mut f,
        ChunkKind::KernelNames,
        0,
        &encode_function_names(kernels),
    );
    // Two GPUs of one host, which the even process numbers the other way round (as
    // CUDA_VISIBLE_DEVICES may): their work is also summed up per GPU across processes.
    for ordinal in 0..2u32 {
        let bus = 0x18 + (ordinal + pid) % 2;
        let device = DeviceInfo {
            ordinal,
            name: "GPU".into(),
            attributes: vec![
                (attr::PCI_DOMAIN_ID, 0),
                (attr::PCI_BUS_ID, bus as i32),
                (attr::PCI_DEVICE_ID, 0),
            ],
            ..Default::default()
        };
        chunk(&mut f, ChunkKind::DeviceInfo, 0, &encode_value(&device));
    }
    let mut api: Vec<Vec<u8>> = vec![Vec::new(); 3];
    let (mut gk, mut gm, mut gs, mut sy) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut mem = Vec::new();
    let mut now = t0;
    // NVTX: nested push/pop ranges per thread, start/end ranges crossing threads, external
    // ids pushed and popped, all just before the calls they hold.
    let mut nvtx: Vec<Vec<u8>> = vec![Vec::new(); 3];
    let mut depth = [0u64; 3];
    let ev = |kind, message, time_ns, value, category| {
        NvtxEvent {
            kind,
            message,
            time_ns,
            value,
            category,
            ..Default::default()
        }
        .to_bytes()
    };
    for id in 1..4_000u64 {
        let thread = (id % 3) as usize;
        let at = now.saturating_sub(1);
        match rnd(16) {
            0..=2 if depth[thread] < 4 => {
                let e = ev(NvtxKind::Push, 1 + rnd(3) as u32, at, depth[thread], 0);
                nvtx[thread].extend_from_slice(&e);
                depth[thread] += 1;
            }
            3 | 4 if depth[thread] > 0 => {
                depth[thread] -= 1;
                let e = ev(NvtxKind::Pop, 0, at, depth[thread], 0);
                nvtx[thread].extend_from_slice(&e);
            }
            _ => {}
        }
        if id % 300 == 0 {
            let e = ev(NvtxKind::Start, 2, at, id, 0);
            nvtx[thread].extend_from_slice(&e);
        }
        if id % 300 == 170 {
            let e = ev(NvtxKind::End, 0, at, id - 170, 0);
            nvtx[(thread + 1) % 3].extend_from_slice(&e);
        }
        if id % 90 == 1 {
            let e = ev(NvtxKind::ExternalPush, 0, at, id, 1 + rnd(2) as u32);
            nvtx[thread].extend_from_slice(&e);
        }
        if id % 90 == 46 {
            // The id pushed 45 calls ago on this thread (of the kind it was pushed as).
            for category in 1..3 {
                let e = ev(NvtxKind::ExternalPop, 0, at, id - 45, category);
                nvtx[thread].extend_from_slice(&e);
            }
        }
        let function = (rnd(3)) as u32;
        let dur = if function == 2 {
            40
        } else {
            500 + rnd(100_000)
        };
        // Id 7 appears twice (on another thread, later): the later one wins. The last two
        // calls have stray ids far above the others (as damaged records may), with their GPU
        // work: the join jumps to them instead of walking the ids between.
        let correlation = match id {
            2_000 => 7,
            3_998 => 1 << 62,
            3_999 => u64::MAX,
            _ => id,
        };
        let r = ApiRecord {
            function,
            result: u32::from(rnd(50) == 0),
            start_ns: now,
            end_ns: now + dur,
            correlation,
        };
        r.write_to(&mut api[thread]);
        now += 1_000 + rnd(3_000);
        // One in 37 records starts before its call (clocks that disagree).
        let start = if id % 37 == 0 {
            r.start_ns - 500
        } else {
            now + rnd(200_000)
        };
        let end = start + rnd(50_000);
        let stream = 13 + rnd(3) as u32;
        match function {
            0 => {
                let k = KernelRecord {
                    correlation,
                    start_ns: start,
                    end_ns: end,
                    name: rnd(4) as u32,
                    device: rnd(2) as u32,
                    stream,
                    grid: [1 + rnd(2) as i32, 1, 1],
                    block: [128, 1, 1],
                    flags: if rnd(10) == 0 { 0 } else { FLAG_CORRELATED },
                    ..Default::default()
                };
                gk.push(k.to_bytes().to_vec());
                if id % 5 == 0 {
                    // A graph: a copy on the other device first, then another kernel.
                    let m = MemcpyRecord {
                        correlation,
                        start_ns: start + 10,
                        end_ns: end + 10,
                        device: 1 - k.device,
                        stream,
                        flags: FLAG_CORRELATED as u8,
                        ..Default::default()
                    };
                    gm.push(m.to_bytes().to_vec());
                    let k2 = KernelRecord {
                        start_ns: start + 20,
                        end_ns: end + 20,
                        device: 1 - k.device,
                        ..k
                    };
                    gk.push(k2.to_bytes().to_vec());
                }
            }
            1 if rnd(4) == 0 => {
                let s = MemsetRecord {
                    correlation,
                    start_ns: start,
                    end_ns: end,
                    bytes: 64,
                    stream,
                    ..Default::default()
                };
                gs.push(s.to_bytes().to_vec());
            }
            1 => {
                let m = MemcpyRecord {
                    correlation,
                    start_ns: start,
                    end_ns: end,
                    bytes: 1 << rnd(20),
                    stream,
                    kind: if rnd(2) == 0 {
                        CopyKind::HtoD
                    } else {
                        CopyKind::DtoH
                    },
                    flags: FLAG_CORRELATED as u8,
                    ..Default::default()
                };
                gm.push(m.to_bytes().to_vec());
            }
            _ => {
                let s = SyncRecord {
                    correlation,
                    start_ns: now,
                    end_ns: now + 40 + rnd(9),
                    // Linked to cuStreamQuery: a stream query, or an event synchronize.
                    kind: if rnd(3) == 0 {
                        SyncKind::EventSynchronize
                    } else {
                        SyncKind::StreamSynchronize
                    },
                    stream,
                    flags: FLAG_CORRELATED as u8,
                    ..Default::default()
                };
                sy.push(s.to_bytes().to_vec());
            }
        }
        // Allocations and frees at times on a 20 µs grid (so both processes have some at
        // one time), at a few addresses: some reused while in use, some freed that were never
        // allocated; device and host memory on two devices.
        if id % 5 < 2 {
            let m = MemoryRecord {
                correlation,
                timestamp_ns: now / 20_000 * 20_000,
                address: 0x1000 * rnd(24),
                bytes: 4096 << rnd(6),
                device: rnd(2) as u32,
                operation: if id % 5 == 0 {
                    MemoryOperation::Alloc
                } else {
                    MemoryOperation::Free
                },
                kind: if rnd(4) == 0 {
                    MemoryKind::Pinned
                } else {
                    MemoryKind::Device
                },
                flags: FLAG_CORRELATED as u8,
                ..Default::default()
            };
            mem.push(m.to_bytes().to_vec());
        }
        // Synchronizations linked to no call, and to an id no call has.
        if id % 41 == 0 {
            let s = SyncRecord {
                correlation: if id % 82 == 0 { 0 } else { 1_000_000 + id },
                start_ns: now,
                end_ns: now + 1_000 + rnd(5_000),
                kind: SyncKind::ContextSynchronize,
                stream: ID_NONE,
                flags: if id % 82 == 0 {
                    0
                } else {
                    FLAG_CORRELATED as u8
                },
                ..Default::default()
            };
            sy.push(s.to_bytes().to_vec());
        }
        if id % 700 == 0 {
            for (t, a) in api.iter_mut().enumerate() {
                chunk(&mut f, ChunkKind::ApiRecords, 100 + t as u64, a);
                a.clear();
            }
        }
    }
    for (t, a) in api.iter().enumerate() {
        chunk(&mut f, ChunkKind::ApiRecords, 100 + t as u64, a);
    }
    chunk(
        &mut f,
        ChunkKind::NvtxStrings,
        0,
        &encode_function_names([(1, "step"), (2, "fwd"), (3, "bwd")]),
    );
    for (t, n) in nvtx.iter().enumerate() {
        chunk(&mut f, ChunkKind::NvtxEvents, 100 + t as u64, n);
    }
    // GPU chunks of 100 records, in reverse order, each shuffled a little.
    let put = |f: &mut Vec<u8>, kind, v: &mut Vec<Vec<u8>>| {
        let chunks: Vec<Vec<u8>> = v.chunks(100).map(|c| c.concat()).collect();
        for c in chunks.iter().rev() {
            chunk(f, kind, 0, c);
        }
    };
    put(&mut f, ChunkKind::Kernels, &mut gk);
    put(&mut f, ChunkKind::Memcpys, &mut gm);
    put(&mut f, ChunkKind::Memsets, &mut gs);
    put(&mut f, ChunkKind::Sync, &mut sy);
    put(&mut f, ChunkKind::Memory, &mut mem);
    if truncate {
        f.truncate(f.len() - 30);
    }
    f
}

/// The sync rows of the two awkward traces: (kind, count).
const SYNC_KINDS: [(&str, u64); 3] = [
    ("context synchronize", 194),
    ("stream query", 1761),
    ("event synchronize", 875),
];
/// Their memory rows: (kind, allocations, frees).
/// (1599 records each, less the truncated file's last chunk of 100.)
const MEMORY_ROWS: [(&str, u64, u64); 2] = [("device", 1178, 1164), ("pinned", 370, 386)];

fn check(files: &[PathBuf], filter: &Filter, id_range: u64) {
    let how = |launch_block| How {
        id_range,
        launch_block,
        ..How::default()
    };
    let steps = StepNames::default();
    let (streamed, sections) =
        report_inputs_with(files, filter, how(BLOCK), Jobs::ONE, &steps).unwrap();
    // Read on three threads at once, the launches kept in blocks of 64 bytes, the first four
    // in memory and the rest in the file (each trace's read back in three pieces at once):
    // the same report.
    let small_blocks = How {
        launches_held: 256,
        ..how(64)
    };
    let (parallel, in_parallel) =
        report_inputs_with(files, filter, small_blocks, Jobs::new(3), &steps).unwrap();
    // The launches not kept: the selection passes join again.
    let (joined, joined_again) =
        report_inputs_with(files, filter, how(0), Jobs::ONE, &steps).unwrap();
    // The ids looked up not ranked (as for ids too far apart): the join's keys are the ids.
    let by_ids = How {
        referenced_pages: 0,
        ..how(BLOCK)
    };
    let (keyed_by_ids, by_id) =
        report_inputs_with(files, filter, by_ids, Jobs::ONE, &steps).unwrap();
    let mut whole = crate::read::load_inputs(files).unwrap();
    crate::filter::apply_all(filter, &mut whole.traces).unwrap();
    for (format, section) in [(Format::Table, Section::Api), (Format::Json, Section::Api)]
        .into_iter()
        .chain(Section::CSV.map(|s| (Format::Csv, s)))
    {
        let a = render_sections(&streamed.traces, &sections, format, section);
        let b = render_report_section(&whole.traces, format, section);
        assert_eq!(a, b, "{format:?} {section:?} {filter}");
        let c = render_sections(&parallel.traces, &in_parallel, format, section);
        assert_eq!(a, c, "in parallel: {format:?} {section:?} {filter}");
        let d = render_sections(&joined.traces, &joined_again, format, section);
        assert_eq!(a, d, "joined again: {format:?} {section:?} {filter}");
        let e = render_sections(&keyed_by_ids.traces, &by_id, format, section);
        assert_eq!(a, e, "keyed by ids: {format:?} {section:?} {filter}");
        if std::env::var_os("RTRACE_SHOW").is_some() && format == Format::Table {
            eprintln!("{a}");
        }
    }
}

/// Two [`awkward`] traces written in a new directory named by `name` and this process (the
/// second one truncated): the directory and the files.
pub(super) fn awkward_files(name: &str) -> (PathBuf, Vec<PathBuf>) {
    let dir = std::env::temp_dir().join(format!("rtrace-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    for (i, truncate) in [(1u32, false), (2, true)] {
        let path = dir.join(format!("t{i}.bin"));
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(&awkward(40 + i, u64::from(i), truncate))
            .unwrap();
        files.push(path);
    }
    (dir, files)
}

#[test]
fn streamed_reports_are_the_in_memory_ones() {
    let (dir, files) = awkward_files("stream");
    for id_range in [1 << 22, 500, 37] {
        check(&files, &Filter::default(), id_range);
    }
    let (_, sections) = report_inputs_with(
        &files,
        &Filter::default(),
        How {
            id_range: 1 << 22,
            ..How::default()
        },
        Jobs::ONE,
        &StepNames::default(),
    )
    .unwrap();
    // Every path of the synchronization join is taken: linked to a query, to a synchronize
    // call, to an id no call has, to none.
    let kinds: Vec<(&str, u64)> = sections.sync.iter().map(|s| (s.kind, s.count)).collect();
    assert_eq!(kinds, SYNC_KINDS);
    let memory: Vec<(&str, u64, u64)> = sections
        .memory
        .iter()
        .map(|m| (m.kind.name(), m.allocations, m.frees))
        .collect();
    assert_eq!(memory, MEMORY_ROWS);
    let shared: Vec<(&str, &[(u32, u32)])> = sections
        .shared
        .iter()
        .map(|d| (d.pci_address.as_str(), &d.processes[..]))
        .collect();
    assert_eq!(
        shared,
        vec![
            ("00000000:18:00.0", &[(41, 1), (42, 0)][..]),
            ("00000000:19:00.0", &[(41, 0), (42, 1)][..]),
        ]
    );
    let filters = [
        Filter {
            from_ns: Some(1_000_000),
            to_ns: Some(6_000_000),
            ..Default::default()
        },
        Filter {
            devices: vec![1],
            streams: vec![13, 15],
            ..Default::default()
        },
        Filter {
            kernel: Some(crate::filter::parse_regex("gemm|add").unwrap()),
            pids: vec![42],
            ..Default::default()
        },
    ];
    for f in &filters {
        check(&files, f, 700);
    }
    // The export streams the same traces: the bytes it writes are those of the traces
    // exported from memory (NVTX ranges and their projections onto each device included).
    for path in &files {
        let whole = crate::read::load_trace(path).unwrap();
        for format in [ExportFormat::Perfetto, ExportFormat::Chrome] {
            let out = dir.join("out");
            crate::export::export_files(std::slice::from_ref(path), format, Some(&out)).unwrap();
            let (want, _) =
                crate::export::export_traces(std::slice::from_ref(&whole), format, Vec::new())
                    .unwrap();
            assert!(String::from_utf8_lossy(&want).contains("NVTX projected: GPU 1"));
            assert!(
                std::fs::read(&out).unwrap() == want,
                "{format:?} {}",
                path.display()
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A trace of process `pid` on host `host`: its GPUs (ordinal, PCI bus), kernels (device,
/// start, end) and memsets.
fn on_host(
    pid: u32,
    host: &str,
    gpus: &[(u32, i32)],
    kernels: &[(u32, u64, u64)],
    memsets: &[(u32, u64, u64)],
) -> Vec<u8> {
    let header = ProcessHeader {
        pid,
        hostname: host.into(),
        boot_id: format!("boot-{host}"),
        start: ClockAnchor {
            monotonic_ns: 100,
            realtime_ns: 1_700_000_000_000_000_000,
        },
        ..Default::default()
    };
    let mut f = encode_file_header(&header);
    for &(ordinal, bus) in gpus {
        let device = DeviceInfo {
            ordinal,
            name: "H200".into(),
            attributes: vec![
                (attr::PCI_DOMAIN_ID, 0),
                (attr::PCI_BUS_ID, bus),
                (attr::PCI_DEVICE_ID, 0),
            ],
            ..Default::default()
        };
        chunk(&mut f, ChunkKind::DeviceInfo, 0, &encode_value(&device));
    }
    chunk(
        &mut f,
        ChunkKind::KernelNames,
        0,
        &encode_function_names([(0, "k")]),
    );
    let k = kernels.iter().flat_map(|&(device, start_ns, end_ns)| {
        let k = KernelRecord {
            device,
            start_ns,
            end_ns,
            stream: 7,
            ..Default::default()
        };
        k.to_bytes()
    });
    chunk(&mut f, ChunkKind::Kernels, 0, &k.collect::<Vec<u8>>());
    let m = memsets.iter().flat_map(|&(device, start_ns, end_ns)| {
        let m = MemsetRecord {
            device,
            start_ns,
            end_ns,
            stream: 7,
            ..Default::default()
        };
        m.to_bytes()
    });
    chunk(&mut f, ChunkKind::Memsets, 0, &m.collect::<Vec<u8>>());
    f
}

/// A GPU that two processes of one host ran work on (under different ordinals) is busy over
/// the union of their work; a GPU of one process, and the same PCI address on another host,
/// are not in it.
#[test]
fn a_gpu_shared_by_processes_is_busy_over_all_their_work() {
    let dir = std::env::temp_dir().join(format!("rtrace-shared-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let traces = [
        on_host(
            1,
            "h1",
            &[(0, 0x18)],
            &[(0, 1_000, 2_000), (0, 5_000, 6_000)],
            &[],
        ),
        on_host(
            2,
            "h1",
            &[(0, 0x20), (1, 0x18)],
            &[(1, 1_500, 3_000), (0, 100, 200)],
            &[(1, 7_000, 7_500)],
        ),
        on_host(3, "h2", &[(0, 0x18)], &[(0, 0, 10_000)], &[]),
    ];
    let mut files = Vec::new();
    for (i, bytes) in traces.iter().enumerate() {
        let path = dir.join(format!("p{i}.bin"));
        std::fs::write(&path, bytes).unwrap();
        files.push(path);
    }
    let (_, sections) = report_inputs(
        &files,
        &Filter::default(),
        Jobs::default(),
        &StepNames::default(),
        Needs::ALL,
    )
    .unwrap();
    let want = vec![crate::gpu_summary::SharedDevice {
        hostname: "h1".into(),
        pci_address: "00000000:18:00.0".into(),
        name: "H200".into(),
        processes: vec![(1, 0), (2, 1)],
        utilisation: Utilisation {
            pid: 0,
            device: 0,
            stream: None,
            records: 4,
            start_ns: 1_000,
            end_ns: 7_500,
            span_ns: 6_500,
            busy_ns: 3_500,
            busy_percent: crate::gpu_summary::Hundredths(5_385),
            gaps: 2,
            idle_ns: 3_000,
        },
    }];
    assert_eq!(sections.shared, want);
    let whole = crate::read::load_inputs(&files).unwrap();
    assert_eq!(Sections::of(&whole.traces).shared, want);
    let csv = render_sections(&whole.traces, &sections, Format::Csv, Section::Shared);
    assert_eq!(
        csv,
        "hostname,pci_address,processes,records,start_ns,end_ns,span_ns,busy_ns,busy_percent,\
         gaps,idle_ns\nh1,00000000:18:00.0,1:0 2:1,4,1000,7500,6500,3500,53.85,2,3000\n"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
