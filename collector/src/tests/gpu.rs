//! GPU activity: the model, the summaries and their rendering, over traces
//! built in memory.

use super::{header, read, Builder};
use crate::gpu_summary::*;
use crate::output::{render_report_section, RenderOptions, Section};
use crate::{render_report, Format};
use rtrace_format::*;

impl Builder {
    fn kernel_names(self, names: &[(u32, &str)]) -> Self {
        let payload = encode_function_names(names.iter().copied());
        self.chunk(ChunkKind::KernelNames, 0, 0, &payload)
    }
    fn kernels(self, recs: &[KernelRecord]) -> Self {
        let payload: Vec<u8> = recs.iter().flat_map(|r| r.to_bytes()).collect();
        self.chunk(ChunkKind::Kernels, 0, 0, &payload)
    }
    fn memcpys(self, recs: &[MemcpyRecord]) -> Self {
        let payload: Vec<u8> = recs.iter().flat_map(|r| r.to_bytes()).collect();
        self.chunk(ChunkKind::Memcpys, 0, 0, &payload)
    }
    fn memsets(self, recs: &[MemsetRecord]) -> Self {
        let payload: Vec<u8> = recs.iter().flat_map(|r| r.to_bytes()).collect();
        self.chunk(ChunkKind::Memsets, 0, 0, &payload)
    }
}

fn call(function: u32, start_ns: u64, correlation: u64) -> ApiRecord {
    ApiRecord {
        function,
        result: 0,
        start_ns,
        end_ns: start_ns + 50,
        correlation,
    }
}

/// A kernel on `device`/`stream` from `start` to `end`; correlated when `corr` is not 0.
fn kernel(
    name: u32,
    at: (u32, u32),
    span: (u64, u64),
    corr: u64,
    gx: i32,
    bx: i32,
) -> KernelRecord {
    KernelRecord {
        correlation: corr,
        start_ns: span.0,
        end_ns: span.1,
        name,
        device: at.0,
        stream: at.1,
        grid: [gx, 1, 1],
        block: [bx, 1, 1],
        flags: if corr != 0 { FLAG_CORRELATED } else { 0 },
        ..Default::default()
    }
}

fn copy(kind: CopyKind, at: (u32, u32), span: (u64, u64), bytes: u64, corr: u64) -> MemcpyRecord {
    MemcpyRecord {
        correlation: corr,
        start_ns: span.0,
        end_ns: span.1,
        bytes,
        device: at.0,
        stream: at.1,
        kind,
        src_kind: MemoryKind::Pinned,
        dst_kind: MemoryKind::Device,
        flags: if corr != 0 { FLAG_CORRELATED as u8 } else { 0 },
        ..Default::default()
    }
}

const VECADD: &str = "vecadd(float const*, float const*, float*, int)";

/// One process (pid 1234).
///
/// Device 0, stream 7: HtoD 1500-2500, vecadd 3000-4000 and 3800-5000 (they
/// overlap), memset 6000-6100, DtoH 6100-6300 (touching). Stream 8: fill
/// 4500-5500. Device 1, stream 3: kernel#5 3000-3100, vecadd 3200-3300 (another
/// grid, launched without correlation), HtoD 3300-3500 (correlation 42 has no
/// API record).
fn gpu_sample() -> Builder {
    Builder::new(&header(1234))
        .names(&[
            (0, "cuLaunchKernel"),
            (1, "cuMemcpyHtoD_v2"),
            (2, "cuMemsetD8_v2"),
            (3, "cuMemcpyDtoH_v2"),
        ])
        .kernel_names(&[(0, "_Z6vecaddPKfS0_Pfi"), (1, "_Z4fillPfi")])
        .records(
            11,
            0,
            &[
                call(1, 1_000, 1),
                call(0, 2_000, 2),
                call(0, 2_100, 3),
                call(0, 2_200, 4),
                call(2, 2_300, 5),
                call(3, 2_400, 6),
            ],
        )
        .records(12, 0, &[call(0, 2_500, 7)])
        .kernels(&[
            kernel(0, (0, 7), (3_000, 4_000), 2, 120, 256),
            kernel(0, (0, 7), (3_800, 5_000), 3, 120, 256),
            kernel(1, (0, 8), (4_500, 5_500), 4, 1, 32),
            kernel(5, (1, 3), (3_000, 3_100), 7, 2, 64),
            // Flag unset: its correlation (2) is not used.
            KernelRecord {
                flags: 0,
                ..kernel(0, (1, 3), (3_200, 3_300), 2, 60, 256)
            },
        ])
        .memcpys(&[
            copy(CopyKind::HtoD, (0, 7), (1_500, 2_500), 4_000, 1),
            copy(CopyKind::DtoH, (0, 7), (6_100, 6_300), 4_000, 6),
            copy(CopyKind::HtoD, (1, 3), (3_300, 3_500), 1_000, 42),
        ])
        .memsets(&[MemsetRecord {
            correlation: 5,
            start_ns: 6_000,
            end_ns: 6_100,
            bytes: 1_000,
            device: 0,
            stream: 7,
            value: 0,
            ..Default::default()
        }])
}

#[test]
fn model_holds_gpu_records_and_kernel_names() {
    let t = read(&gpu_sample().bytes);
    assert_eq!(t.chunks, 7);
    assert_eq!(t.kernels.len(), 5);
    assert_eq!(t.memcpys.len(), 3);
    assert_eq!(t.memsets.len(), 1);
    assert_eq!(t.gpu_records(), 9);
    assert_eq!(t.api_records(), 7);
    assert_eq!(t.kernels[2], kernel(1, (0, 8), (4_500, 5_500), 4, 1, 32));
    assert_eq!(t.memcpys[1].kind, CopyKind::DtoH);
    assert_eq!(t.memcpys[1].dst_kind, MemoryKind::Device);
    assert_eq!(t.memsets[0].bytes, 1_000);
    assert_eq!(t.kernel_name(0), "_Z6vecaddPKfS0_Pfi");
    assert_eq!(t.kernel_name(5), "kernel#5");
    assert_eq!(t.kernel_display_name(0), VECADD);
    assert_eq!(t.kernel_display_name(1), "fill(float*, int)");
    assert_eq!(t.kernel_display_name(5), "kernel#5");
    assert!(t.bad_chunks.is_empty());
    assert_eq!(t.unknown_chunks, 0);
}

#[test]
fn malformed_gpu_chunks_are_skipped_and_damage_counts_api_records() {
    let bytes = gpu_sample()
        .chunk(ChunkKind::Kernels, 0, 0, &[0; 5])
        .chunk(ChunkKind::Memcpys, 0, 0, &[0; 65])
        .chunk(ChunkKind::Memsets, 0, 0, &[0; 63])
        .chunk(ChunkKind::KernelNames, 0, 0, &[1, 0, 0, 0, 9])
        .memsets(&[MemsetRecord::default()])
        .bytes;
    let t = read(&bytes);
    assert_eq!(t.chunks, 12);
    assert_eq!(t.memsets.len(), 2);
    let whys: Vec<&str> = t
        .bad_chunks
        .iter()
        .map(|b| b.split_once(": ").unwrap().1)
        .collect();
    assert_eq!(
        whys,
        vec![
            "kernel chunk of 5 bytes is not a multiple of 112",
            "memcpy chunk of 65 bytes is not a multiple of 64",
            "memset chunk of 63 bytes is not a multiple of 64",
            "kernel names: malformed function-name table",
        ]
    );

    // Cut inside the last (memset) chunk: GPU records before it are kept; the
    // message counts API records, as before.
    let full = gpu_sample().bytes;
    let at = super::last_chunk_offset(&full);
    let t = read(&full[..at + CHUNK_HEADER_LEN + 10]);
    assert_eq!(t.kernels.len(), 5);
    assert_eq!(t.memsets.len(), 0);
    assert_eq!(
        t.damage.as_deref(),
        Some(&*format!(
            "truncated: the file ends inside the chunk at byte {at}; \
             reported the 6 chunks (7 records) before it"
        ))
    );
}

fn ks(name: &str, v: [u64; 7], share: u64, grid_block: &str) -> KernelSummary {
    KernelSummary {
        name: name.into(),
        count: v[0],
        total_ns: v[1],
        mean_ns: v[2],
        median_ns: v[3],
        min_ns: v[4],
        max_ns: v[5],
        stddev_ns: v[6],
        share_percent: Hundredths(share),
        grid_block: grid_block.into(),
    }
}

#[test]
fn kernel_summary_is_exact() {
    let t = read(&gpu_sample().bytes);
    assert_eq!(
        kernel_summary(&[t]),
        vec![
            // 1000, 1200, 100: mean 766.7, sample variance 343333.3, stddev 585.9.
            ks(
                VECADD,
                [3, 2_300, 766, 1_000, 100, 1_200, 585],
                6_765,
                "various"
            ),
            ks(
                "fill(float*, int)",
                [1, 1_000, 1_000, 1_000, 1_000, 1_000, 0],
                2_941,
                "(1,1,1)x(32,1,1)"
            ),
            ks(
                "kernel#5",
                [1, 100, 100, 100, 100, 100, 0],
                294,
                "(2,1,1)x(64,1,1)"
            ),
        ]
    );
}

/// Sizes: mean, median, min, max, stddev.
fn sizes(v: [u64; 5]) -> crate::gpu_summary::SizeStats {
    crate::gpu_summary::SizeStats {
        mean_bytes: v[0],
        median_bytes: v[1],
        min_bytes: v[2],
        max_bytes: v[3],
        stddev_bytes: v[4],
    }
}

/// count, bytes, total, mean, median, min, max, stddev, share (hundredths).
fn ms(kind: CopyKind, v: [u64; 9], size: [u64; 5], bandwidth: Option<u64>) -> MemcpySummary {
    MemcpySummary {
        kind,
        count: v[0],
        bytes: v[1],
        total_ns: v[2],
        mean_ns: v[3],
        median_ns: v[4],
        min_ns: v[5],
        max_ns: v[6],
        stddev_ns: v[7],
        share_percent: Hundredths(v[8]),
        size: sizes(size),
        bandwidth_gbps: bandwidth.map(Hundredths),
    }
}

#[test]
fn memcpy_and_memset_summaries_are_exact() {
    let t = read(&gpu_sample().bytes);
    let traces = [t];
    assert_eq!(
        memcpy_summary(&traces),
        vec![
            // 5000 bytes in 1200 ns: 4.1666 GB/s. Median of 200, 1000: their mean; sample
            // stddev √320000 = 565.7; 1200 of the 1500 ns of copies and memsets. Sizes 4000
            // and 1000: stddev √4500000 = 2121.3.
            ms(
                CopyKind::HtoD,
                [2, 5_000, 1_200, 600, 600, 200, 1_000, 565, 8_000],
                [2_500, 2_500, 1_000, 4_000, 2_121],
                Some(417)
            ),
            ms(
                CopyKind::DtoH,
                [1, 4_000, 200, 200, 200, 200, 200, 0, 1_333],
                [4_000, 4_000, 4_000, 4_000, 0],
                Some(2_000)
            ),
        ]
    );
    assert_eq!(
        memset_summary(&traces),
        Some(MemsetSummary {
            count: 1,
            bytes: 1_000,
            total_ns: 100,
            mean_ns: 100,
            median_ns: 100,
            min_ns: 100,
            max_ns: 100,
            stddev_ns: 0,
            share_percent: Hundredths(667),
            size: sizes([1_000, 1_000, 1_000, 1_000, 0]),
        })
    );
    assert_eq!(memset_summary(&[read(&super::sample().bytes)]), None);
}

fn util(device: u32, stream: Option<u32>, v: [u64; 7], percent: u64) -> Utilisation {
    Utilisation {
        pid: 1234,
        device,
        stream,
        records: v[0],
        start_ns: v[1],
        end_ns: v[2],
        span_ns: v[3],
        busy_ns: v[4],
        gaps: v[5],
        idle_ns: v[6],
        busy_percent: Hundredths(percent),
    }
}

#[test]
fn utilisation_is_the_union_of_intervals() {
    let t = read(&gpu_sample().bytes);
    assert_eq!(
        utilisation(&[t]),
        vec![
            // Device 0: 1500-2500, 3000-5500 (both streams), 6000-6300.
            util(0, None, [6, 1_500, 6_300, 4_800, 3_800, 2, 1_000], 7_917),
            // Stream 7: 1500-2500, 3000-5000 (overlap), 6000-6300 (touching).
            util(0, Some(7), [5, 1_500, 6_300, 4_800, 3_300, 2, 1_500], 6_875),
            util(0, Some(8), [1, 4_500, 5_500, 1_000, 1_000, 0, 0], 10_000),
            // 3000-3100, then 3200-3300 touching 3300-3500.
            util(1, None, [3, 3_000, 3_500, 500, 400, 1, 100], 8_000),
            util(1, Some(3), [3, 3_000, 3_500, 500, 400, 1, 100], 8_000),
        ]
    );
}

fn lat(
    activity: Activity,
    name: &str,
    function: &str,
    corr: u64,
    api: u64,
    gpu: u64,
) -> LaunchLatency {
    LaunchLatency {
        pid: 1234,
        activity,
        name: name.into(),
        function: function.into(),
        correlation: corr,
        api_start_ns: api,
        gpu_start_ns: gpu,
        latency_ns: gpu as i64 - api as i64,
    }
}

#[test]
fn launch_latency_matches_correlated_records() {
    let t = read(&gpu_sample().bytes);
    let all = launch_latency(std::slice::from_ref(&t), LATENCY_ROWS);
    // The unflagged kernel and the copy with an unknown correlation are not matched.
    assert_eq!(all.correlated, 7);
    use Activity::*;
    assert_eq!(
        all.slowest,
        vec![
            // Equal latencies keep file order: kernels, then copies, then memsets.
            lat(Memcpy, "memcpy DtoH", "cuMemcpyDtoH_v2", 6, 2_400, 6_100),
            lat(Memset, "memset", "cuMemsetD8_v2", 5, 2_300, 6_000),
            lat(
                Kernel,
                "fill(float*, int)",
                "cuLaunchKernel",
                4,
                2_200,
                4_500
            ),
            lat(Kernel, VECADD, "cuLaunchKernel", 3, 2_100, 3_800),
            lat(Kernel, VECADD, "cuLaunchKernel", 2, 2_000, 3_000),
            lat(Kernel, "kernel#5", "cuLaunchKernel", 7, 2_500, 3_000),
            lat(Memcpy, "memcpy HtoD", "cuMemcpyHtoD_v2", 1, 1_000, 1_500),
        ]
    );
    let top = launch_latency(std::slice::from_ref(&t), 2);
    assert_eq!(top.correlated, 7);
    assert_eq!(top.slowest, all.slowest[..2]);
}

/// A second process: the same kernel under another id, a zero-length copy, a
/// kernel that starts before its call (clocks that disagree).
fn second_process() -> Builder {
    Builder::new(&header(99))
        .names(&[(4, "cuLaunchKernel_ptsz")])
        .kernel_names(&[(3, "_Z6vecaddPKfS0_Pfi")])
        .records(5, 0, &[call(4, 10_000, 1)])
        .kernels(&[kernel(3, (0, 1), (9_950, 10_950), 1, 60, 256)])
        .memcpys(&[copy(CopyKind::DtoD, (0, 1), (20_000, 20_000), 64, 0)])
}

#[test]
fn summaries_merge_processes_by_name() {
    let traces = [read(&gpu_sample().bytes), read(&second_process().bytes)];
    let k = kernel_summary(&traces);
    // vecadd: 1000, 1200, 100 and 1000 ns (sample variance 2910000 / 12, stddev 492.4).
    // Total kernel time 4400 ns.
    assert_eq!(
        k[0],
        ks(
            VECADD,
            [4, 3_300, 825, 1_000, 100, 1_200, 492],
            7_500,
            "various"
        )
    );
    assert_eq!(k[1].share_percent, Hundredths(2_273));
    assert_eq!(k[2].share_percent, Hundredths(227));
    let m = memcpy_summary(&traces);
    assert_eq!(m.len(), 3);
    assert_eq!(
        m[2],
        ms(
            CopyKind::DtoD,
            [1, 64, 0, 0, 0, 0, 0, 0, 0],
            [64, 64, 64, 64, 0],
            None
        ),
        "no bandwidth without time"
    );
    // Processes are not merged: pid 99 gets its own device 0.
    let u = utilisation(&traces);
    assert_eq!(u.len(), 7);
    assert_eq!(
        u[5],
        Utilisation {
            pid: 99,
            device: 0,
            stream: None,
            records: 2,
            start_ns: 9_950,
            end_ns: 20_000,
            span_ns: 10_050,
            busy_ns: 1_000,
            busy_percent: Hundredths(995),
            gaps: 1,
            idle_ns: 9_050,
        }
    );
    let l = launch_latency(&traces, LATENCY_ROWS);
    assert_eq!(l.correlated, 8);
    let last = l.slowest.last().unwrap();
    assert_eq!((last.pid, last.latency_ns), (99, -50));
    assert_eq!(last.function, "cuLaunchKernel_ptsz");
}

#[test]
fn zero_length_work_only() {
    let t = read(
        &Builder::new(&header(3))
            .memsets(&[MemsetRecord {
                start_ns: 5,
                end_ns: 5,
                ..Default::default()
            }])
            .bytes,
    );
    let u = utilisation(std::slice::from_ref(&t));
    assert_eq!(u.len(), 2);
    assert_eq!(
        (u[0].span_ns, u[0].busy_ns, u[0].busy_percent, u[0].gaps),
        (0, 0, Hundredths(0), 0)
    );
    // Ends before their start cannot be placed: set aside, counted with their offsets.
    let b = Builder::new(&header(3));
    let kernel_at = (b.bytes.len() + CHUNK_HEADER_LEN) as u64;
    let b = b.kernels(&[kernel(0, (0, 0), (100, 50), 0, 1, 1)]);
    let copy_at = (b.bytes.len() + CHUNK_HEADER_LEN) as u64;
    let odd = read(
        &b.memcpys(&[copy(CopyKind::Unknown, (0, 0), (100, 40), 8, 0)])
            .bytes,
    );
    let damaged: Vec<(u64, &str, u64, u64)> = odd
        .damaged
        .listed
        .iter()
        .map(|r| (r.offset, r.kind, r.start_ns, r.end_ns))
        .collect();
    assert_eq!(
        (odd.damaged.count, odd.damaged.api, damaged),
        (
            2,
            0,
            vec![(kernel_at, "kernel", 100, 50), (copy_at, "memcpy", 100, 40)]
        )
    );
    let traces = [odd];
    assert_eq!(
        (kernel_summary(&traces).len(), memcpy_summary(&traces).len()),
        (0, 0)
    );
    assert_eq!(utilisation(&traces).len(), 0);
    let out = render_report(&traces, Format::Table);
    let line = format!(
        "  damaged records    2 records end before they start, set aside as damaged: the \
         kernel at byte {kernel_at} (start 100 ns, end 50 ns), the memcpy at byte {copy_at} \
         (start 100 ns, end 40 ns)"
    );
    assert!(out.lines().any(|l| l == line), "{out}");
}

#[test]
fn csv_sections_are_exact() {
    let traces = [read(&gpu_sample().bytes)];
    let csv = |section| render_report_section(&traces, Format::Csv, section);
    assert_eq!(csv(Section::Api), render_report(&traces, Format::Csv));
    assert_eq!(
        csv(Section::Kernels),
        "name,count,total_ns,mean_ns,median_ns,min_ns,max_ns,stddev_ns,share_percent,grid_block\n\
         \"vecadd(float const*, float const*, float*, int)\",3,2300,766,1000,100,1200,585,67.65,various\n\
         \"fill(float*, int)\",1,1000,1000,1000,1000,1000,0,29.41,\"(1,1,1)x(32,1,1)\"\n\
         kernel#5,1,100,100,100,100,100,0,2.94,\"(2,1,1)x(64,1,1)\"\n"
    );
    assert_eq!(
        csv(Section::Memcpy),
        "kind,count,bytes,total_ns,mean_ns,median_ns,min_ns,max_ns,stddev_ns,share_percent,\
         bandwidth_gbps,mean_bytes,median_bytes,min_bytes,max_bytes,stddev_bytes\n\
         HtoD,2,5000,1200,600,600,200,1000,565,80.00,4.17,2500,2500,1000,4000,2121\n\
         DtoH,1,4000,200,200,200,200,200,0,13.33,20.00,4000,4000,4000,4000,0\n"
    );
    assert_eq!(
        csv(Section::Memset),
        "count,bytes,total_ns,mean_ns,median_ns,min_ns,max_ns,stddev_ns,share_percent,\
         mean_bytes,median_bytes,min_bytes,max_bytes,stddev_bytes\n\
         1,1000,100,100,100,100,100,0,6.67,1000,1000,1000,1000,0\n"
    );
    assert_eq!(
        csv(Section::Utilisation),
        "pid,device,stream,records,start_ns,end_ns,span_ns,busy_ns,busy_percent,gaps,idle_ns\n\
         1234,0,,6,1500,6300,4800,3800,79.17,2,1000\n\
         1234,0,7,5,1500,6300,4800,3300,68.75,2,1500\n\
         1234,0,8,1,4500,5500,1000,1000,100.00,0,0\n\
         1234,1,,3,3000,3500,500,400,80.00,1,100\n\
         1234,1,3,3,3000,3500,500,400,80.00,1,100\n"
    );
    assert_eq!(
        csv(Section::Latency),
        "pid,activity,name,function,correlation,api_start_ns,gpu_start_ns,latency_ns\n\
         1234,memcpy,memcpy DtoH,cuMemcpyDtoH_v2,6,2400,6100,3700\n\
         1234,memset,memset,cuMemsetD8_v2,5,2300,6000,3700\n\
         1234,kernel,\"fill(float*, int)\",cuLaunchKernel,4,2200,4500,2300\n\
         1234,kernel,\"vecadd(float const*, float const*, float*, int)\",cuLaunchKernel,3,2100,3800,1700\n\
         1234,kernel,\"vecadd(float const*, float const*, float*, int)\",cuLaunchKernel,2,2000,3000,1000\n\
         1234,kernel,kernel#5,cuLaunchKernel,7,2500,3000,500\n\
         1234,memcpy,memcpy HtoD,cuMemcpyHtoD_v2,1,1000,1500,500\n"
    );
    // Each launch: the call (50 ns each), the queue from its end to the kernel's start, the
    // kernel; vecadd: calls at 2000 and 2100, kernels 3000-4000 and 3800-5000: totals 2000
    // and 2900 (sample stddev 900/√2 = 636.4), queues 950 and 1650 (494.9), kernels 1000 and
    // 1200 (141.4). The fifth kernel is not correlated.
    assert_eq!(
        csv(Section::KernExec),
        "kernel,function,count,queued,total_mean_ns,total_median_ns,total_min_ns,total_max_ns,\
         total_stddev_ns,api_mean_ns,api_median_ns,api_min_ns,api_max_ns,api_stddev_ns,\
         queue_mean_ns,queue_median_ns,queue_min_ns,queue_max_ns,queue_stddev_ns,\
         kernel_mean_ns,kernel_median_ns,kernel_min_ns,kernel_max_ns,kernel_stddev_ns\n\
         \"vecadd(float const*, float const*, float*, int)\",cuLaunchKernel,2,2,\
         2450,2450,2000,2900,636,50,50,50,50,0,1300,1300,950,1650,494,1100,1100,1000,1200,141\n\
         \"fill(float*, int)\",cuLaunchKernel,1,1,\
         3300,3300,3300,3300,0,50,50,50,50,0,2250,2250,2250,2250,0,1000,1000,1000,1000,0\n\
         kernel#5,cuLaunchKernel,1,1,\
         600,600,600,600,0,50,50,50,50,0,450,450,450,450,0,100,100,100,100,0\n"
    );
    assert_eq!(
        kern_exec_summary(&traces)[0].queue,
        PartStats {
            count: 2,
            total_ns: 2_600,
            mean_ns: 1_300,
            median_ns: 1_300,
            min_ns: 950,
            max_ns: 1_650,
            stddev_ns: 494
        }
    );
    // Without GPU records: the headers alone.
    let none = [read(&super::sample().bytes)];
    assert_eq!(
        render_report_section(&none, Format::Csv, Section::Memset),
        "count,bytes,total_ns,mean_ns,median_ns,min_ns,max_ns,stddev_ns,share_percent,\
         mean_bytes,median_bytes,min_bytes,max_bytes,stddev_bytes\n"
    );
}

#[test]
fn json_gpu_keys_are_exact() {
    let traces = [read(&gpu_sample().bytes)];
    let json = render_report(&traces, Format::Json);
    assert!(
        json.contains(
            "\"api_records\":7,\"kernel_records\":5,\"memcpy_records\":3,\"memset_records\":1,"
        ),
        "{json}"
    );
    let gpu = &json[json.find("\"kernels\":").unwrap()..];
    let expected = concat!(
        "\"kernels\":[\n",
        "  {\"name\":\"vecadd(float const*, float const*, float*, int)\",\"count\":3,",
        "\"total_ns\":2300,\"mean_ns\":766,\"median_ns\":1000,\"min_ns\":100,\"max_ns\":1200,",
        "\"stddev_ns\":585,\"share_percent\":67.65,\"grid_block\":\"various\"},\n",
        "  {\"name\":\"fill(float*, int)\",\"count\":1,\"total_ns\":1000,\"mean_ns\":1000,",
        "\"median_ns\":1000,\"min_ns\":1000,\"max_ns\":1000,\"stddev_ns\":0,",
        "\"share_percent\":29.41,\"grid_block\":\"(1,1,1)x(32,1,1)\"},\n",
        "  {\"name\":\"kernel#5\",\"count\":1,\"total_ns\":100,\"mean_ns\":100,\"median_ns\":100,",
        "\"min_ns\":100,\"max_ns\":100,\"stddev_ns\":0,\"share_percent\":2.94,",
        "\"grid_block\":\"(2,1,1)x(64,1,1)\"}\n",
        "],\n",
        "\"memcpy\":[\n",
        "  {\"kind\":\"HtoD\",\"count\":2,\"bytes\":5000,\"total_ns\":1200,\"mean_ns\":600,",
        "\"median_ns\":600,\"min_ns\":200,\"max_ns\":1000,\"stddev_ns\":565,\"share_percent\":80.00,",
        "\"bandwidth_gbps\":4.17,\"mean_bytes\":2500,\"median_bytes\":2500,\"min_bytes\":1000,",
        "\"max_bytes\":4000,\"stddev_bytes\":2121},\n",
        "  {\"kind\":\"DtoH\",\"count\":1,\"bytes\":4000,\"total_ns\":200,\"mean_ns\":200,",
        "\"median_ns\":200,\"min_ns\":200,\"max_ns\":200,\"stddev_ns\":0,\"share_percent\":13.33,",
        "\"bandwidth_gbps\":20.00,\"mean_bytes\":4000,\"median_bytes\":4000,\"min_bytes\":4000,",
        "\"max_bytes\":4000,\"stddev_bytes\":0}\n",
        "],\n",
        "\"memset\":[\n",
        "  {\"count\":1,\"bytes\":1000,\"total_ns\":100,\"mean_ns\":100,\"median_ns\":100,",
        "\"min_ns\":100,\"max_ns\":100,\"stddev_ns\":0,\"share_percent\":6.67,\"mean_bytes\":1000,",
        "\"median_bytes\":1000,\"min_bytes\":1000,\"max_bytes\":1000,\"stddev_bytes\":0}\n",
        "],\n",
        "\"utilisation\":[\n",
        "  {\"pid\":1234,\"device\":0,\"stream\":null,\"records\":6,\"start_ns\":1500,",
        "\"end_ns\":6300,\"span_ns\":4800,\"busy_ns\":3800,\"busy_percent\":79.17,\"gaps\":2,",
        "\"idle_ns\":1000},\n",
        "  {\"pid\":1234,\"device\":0,\"stream\":7,\"records\":5,\"start_ns\":1500,",
        "\"end_ns\":6300,\"span_ns\":4800,\"busy_ns\":3300,\"busy_percent\":68.75,\"gaps\":2,",
        "\"idle_ns\":1500},\n",
        "  {\"pid\":1234,\"device\":0,\"stream\":8,\"records\":1,\"start_ns\":4500,",
        "\"end_ns\":5500,\"span_ns\":1000,\"busy_ns\":1000,\"busy_percent\":100.00,\"gaps\":0,",
        "\"idle_ns\":0},\n",
        "  {\"pid\":1234,\"device\":1,\"stream\":null,\"records\":3,\"start_ns\":3000,",
        "\"end_ns\":3500,\"span_ns\":500,\"busy_ns\":400,\"busy_percent\":80.00,\"gaps\":1,",
        "\"idle_ns\":100},\n",
        "  {\"pid\":1234,\"device\":1,\"stream\":3,\"records\":3,\"start_ns\":3000,",
        "\"end_ns\":3500,\"span_ns\":500,\"busy_ns\":400,\"busy_percent\":80.00,\"gaps\":1,",
        "\"idle_ns\":100}\n",
        "],\n",
        "\"shared_devices\":[],\n",
        "\"latency\":[\n",
        "  {\"pid\":1234,\"activity\":\"memcpy\",\"name\":\"memcpy DtoH\",",
        "\"function\":\"cuMemcpyDtoH_v2\",\"correlation\":6,\"api_start_ns\":2400,",
        "\"gpu_start_ns\":6100,\"latency_ns\":3700},\n",
        "  {\"pid\":1234,\"activity\":\"memset\",\"name\":\"memset\",",
        "\"function\":\"cuMemsetD8_v2\",\"correlation\":5,\"api_start_ns\":2300,",
        "\"gpu_start_ns\":6000,\"latency_ns\":3700},\n",
        "  {\"pid\":1234,\"activity\":\"kernel\",\"name\":\"fill(float*, int)\",",
        "\"function\":\"cuLaunchKernel\",\"correlation\":4,\"api_start_ns\":2200,",
        "\"gpu_start_ns\":4500,\"latency_ns\":2300},\n",
        "  {\"pid\":1234,\"activity\":\"kernel\",",
        "\"name\":\"vecadd(float const*, float const*, float*, int)\",",
        "\"function\":\"cuLaunchKernel\",\"correlation\":3,\"api_start_ns\":2100,",
        "\"gpu_start_ns\":3800,\"latency_ns\":1700},\n",
        "  {\"pid\":1234,\"activity\":\"kernel\",",
        "\"name\":\"vecadd(float const*, float const*, float*, int)\",",
        "\"function\":\"cuLaunchKernel\",\"correlation\":2,\"api_start_ns\":2000,",
        "\"gpu_start_ns\":3000,\"latency_ns\":1000},\n",
        "  {\"pid\":1234,\"activity\":\"kernel\",\"name\":\"kernel#5\",",
        "\"function\":\"cuLaunchKernel\",\"correlation\":7,\"api_start_ns\":2500,",
        "\"gpu_start_ns\":3000,\"latency_ns\":500},\n",
        "  {\"pid\":1234,\"activity\":\"memcpy\",\"name\":\"memcpy HtoD\",",
        "\"function\":\"cuMemcpyHtoD_v2\",\"correlation\":1,\"api_start_ns\":1000,",
        "\"gpu_start_ns\":1500,\"latency_ns\":500}\n",
        "],\n",
        "\"kern_exec\":[\n",
        "  {\"kernel\":\"vecadd(float const*, float const*, float*, int)\",",
        "\"function\":\"cuLaunchKernel\",\"count\":2,\"queued\":2,\"total_mean_ns\":2450,",
        "\"total_median_ns\":2450,\"total_min_ns\":2000,\"total_max_ns\":2900,",
        "\"total_stddev_ns\":636,\"api_mean_ns\":50,\"api_median_ns\":50,\"api_min_ns\":50,",
        "\"api_max_ns\":50,\"api_stddev_ns\":0,\"queue_mean_ns\":1300,\"queue_median_ns\":1300,",
        "\"queue_min_ns\":950,\"queue_max_ns\":1650,\"queue_stddev_ns\":494,",
        "\"kernel_mean_ns\":1100,\"kernel_median_ns\":1100,\"kernel_min_ns\":1000,",
        "\"kernel_max_ns\":1200,\"kernel_stddev_ns\":141},\n",
        "  {\"kernel\":\"fill(float*, int)\",\"function\":\"cuLaunchKernel\",\"count\":1,",
        "\"queued\":1,\"total_mean_ns\":3300,\"total_median_ns\":3300,\"total_min_ns\":3300,",
        "\"total_max_ns\":3300,\"total_stddev_ns\":0,\"api_mean_ns\":50,\"api_median_ns\":50,",
        "\"api_min_ns\":50,\"api_max_ns\":50,\"api_stddev_ns\":0,\"queue_mean_ns\":2250,",
        "\"queue_median_ns\":2250,\"queue_min_ns\":2250,\"queue_max_ns\":2250,",
        "\"queue_stddev_ns\":0,\"kernel_mean_ns\":1000,\"kernel_median_ns\":1000,",
        "\"kernel_min_ns\":1000,\"kernel_max_ns\":1000,\"kernel_stddev_ns\":0},\n",
        "  {\"kernel\":\"kernel#5\",\"function\":\"cuLaunchKernel\",\"count\":1,\"queued\":1,",
        "\"total_mean_ns\":600,\"total_median_ns\":600,\"total_min_ns\":600,\"total_max_ns\":600,",
        "\"total_stddev_ns\":0,\"api_mean_ns\":50,\"api_median_ns\":50,\"api_min_ns\":50,",
        "\"api_max_ns\":50,\"api_stddev_ns\":0,\"queue_mean_ns\":450,\"queue_median_ns\":450,",
        "\"queue_min_ns\":450,\"queue_max_ns\":450,\"queue_stddev_ns\":0,",
        "\"kernel_mean_ns\":100,\"kernel_median_ns\":100,\"kernel_min_ns\":100,",
        "\"kernel_max_ns\":100,\"kernel_stddev_ns\":0}\n",
        "],\n",
        "\"occupancy\":[],\n",
        "\"nvtx\":{\"ranges\":[],\"open\":0,\"marks\":0},\n\"external\":[]}\n"
    );
    assert_eq!(gpu, expected);
}

#[test]
fn table_has_gpu_sections_after_the_api_summary() {
    let traces = [read(&gpu_sample().bytes)];
    let out = render_report(&traces, Format::Table);
    assert!(
        out.contains(
            "  API records        7\n  GPU records        5 kernels, 3 copies, 1 memset\n"
        ),
        "{out}"
    );
    let gpu = &out[out.find("\nGPU kernel summary").unwrap() + 1..];
    assert!(out.find("API summary").unwrap() < out.find("GPU kernel summary").unwrap());
    let expected = "\
GPU kernel summary: 3 kernels, 5 launches, 3.4 µs of kernel time
kernel                                   count   total    mean  median     min     max  stddev   share      grid x block
vecadd(float const*, float const*, flo…      3  2.3 µs  766 ns  1.0 µs  100 ns  1.2 µs  585 ns  67.65%           various
fill(float*, int)                            1  1.0 µs  1.0 µs  1.0 µs  1.0 µs  1.0 µs    0 ns  29.41%  (1,1,1)x(32,1,1)
kernel#5                                     1  100 ns  100 ns  100 ns  100 ns  100 ns    0 ns   2.94%  (2,1,1)x(64,1,1)

Memory copies: 3 copies, 9.0 kB copied in 1.4 µs
kind  count   bytes   total    mean  median     min     max  stddev   share   bandwidth
HtoD      2  5.0 kB  1.2 µs  600 ns  600 ns  200 ns  1.0 µs  565 ns  80.00%   4.17 GB/s
DtoH      1  4.0 kB  200 ns  200 ns  200 ns  200 ns  200 ns    0 ns  13.33%  20.00 GB/s

Memsets: 1 memset, 1.0 kB set in 100 ns
count   total    mean  median     min     max  stddev  share
    1  100 ns  100 ns  100 ns  100 ns  100 ns    0 ns  6.67%

Memory operation sizes
kind    count   total    mean  median     min     max  stddev
HtoD        2  5.0 kB  2.5 kB  2.5 kB  1.0 kB  4.0 kB  2.1 kB
DtoH        1  4.0 kB  4.0 kB  4.0 kB  4.0 kB  4.0 kB     0 B
memset      1  1.0 kB  1.0 kB  1.0 kB  1.0 kB  1.0 kB     0 B

GPU utilisation: busy time (kernels, copies, memsets) from the first start to the last end
process  device  stream  records    busy    span   busy %  gaps    idle
1234          0     all        6  3.8 µs  4.8 µs   79.17%     2  1.0 µs
1234          0       7        5  3.3 µs  4.8 µs   68.75%     2  1.5 µs
1234          0       8        1  1.0 µs  1.0 µs  100.00%     0    0 ns
1234          1     all        3  400 ns  500 ns   80.00%     1  100 ns
1234          1       3        3  400 ns  500 ns   80.00%     1  100 ns

Slowest launch-to-start: the 7 largest of 7 GPU records matched with an API call
name                                             API function     process  correlation  latency
memcpy DtoH                                      cuMemcpyDtoH_v2     1234            6   3.7 µs
memset                                           cuMemsetD8_v2       1234            5   3.7 µs
fill(float*, int)                                cuLaunchKernel      1234            4   2.3 µs
vecadd(float const*, float const*, float*, int)  cuLaunchKernel      1234            3   1.7 µs
vecadd(float const*, float const*, float*, int)  cuLaunchKernel      1234            2   1.0 µs
kernel#5                                         cuLaunchKernel      1234            7   500 ns
memcpy HtoD                                      cuMemcpyHtoD_v2     1234            1   500 ns

Kernel launch and execution: 4 launches matched with their calls (total: from the call's start to the kernel's end)
kernel                        API function    count  queued  API mean  queue mean  kernel mean  total mean  total median
vecadd(float const*, float …  cuLaunchKernel      2       2     50 ns      1.3 µs       1.1 µs      2.5 µs        2.5 µs
fill(float*, int)             cuLaunchKernel      1       1     50 ns      2.3 µs       1.0 µs      3.3 µs        3.3 µs
kernel#5                      cuLaunchKernel      1       1     50 ns      450 ns       100 ns      600 ns        600 ns
";
    assert_eq!(gpu, expected, "\n{gpu}");
    // The kernel table is as wide as allowed: names are cut to fit.
    for line in out.lines() {
        assert!(line.chars().count() <= 120, "{line:?}");
    }
    assert_eq!(gpu.lines().nth(2).unwrap().chars().count(), 120);
}

#[test]
fn table_without_gpu_records_says_why_instead_of_gpu_sections() {
    let out = render_report(&[read(&super::sample().bytes)], Format::Table);
    assert!(!out.contains("GPU kernel summary"), "{out}");
    assert!(
        out.contains("\nGPU work of process 1234: none\n  GPU activity not recorded ("),
        "{out}"
    );
    // Only copies: the other sections say so.
    let t = read(
        &Builder::new(&header(8))
            .memcpys(&[copy(CopyKind::HtoD, (0, 0), (0, 10), 10, 0)])
            .bytes,
    );
    let out = render_report(&[t], Format::Table);
    for line in [
        "GPU kernel summary: no kernels were recorded\n",
        "Memsets: none were recorded\n",
        "Slowest launch-to-start: no GPU record is matched with an API call\n",
    ] {
        assert!(out.contains(line), "missing {line:?} in\n{out}");
    }
}

#[test]
fn long_kernel_names_are_cut_to_fit() {
    let long = format!("_Z{}{}v", 300, "k".repeat(300));
    let t = read(
        &Builder::new(&header(1))
            .kernel_names(&[(0, &long)])
            .kernels(&[kernel(0, (0, 0), (0, 1_234_567), 0, 1, 1)])
            .bytes,
    );
    let out = render_report(&[t], Format::Table);
    let row = out
        .lines()
        .find(|l| l.starts_with("kkkk"))
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(row.chars().count(), 120, "{row}");
    assert!(row.contains("… "), "{row}");
    assert!(row.ends_with("(1,1,1)x(1,1,1)"), "{row}");
}

#[test]
fn device_info_is_kept_by_ordinal() {
    let info = DeviceInfo {
        ordinal: 1,
        name: "NVIDIA H200".into(),
        total_memory: 150_000_000_000,
        attributes: vec![(16, 132)],
    };
    let t = read(
        &Builder::new(&header(2))
            .chunk(ChunkKind::DeviceInfo, 0, 0, &encode_value(&info))
            .chunk(ChunkKind::DeviceInfo, 0, 0, &[0xff])
            .bytes,
    );
    assert_eq!(t.devices.len(), 1);
    assert_eq!(t.devices[&1], info);
    assert_eq!(t.bad_chunks.len(), 1);
    assert!(
        t.bad_chunks[0].contains(": device info: "),
        "{:?}",
        t.bad_chunks
    );
    assert_eq!(t.unknown_chunks, 0);
}

#[test]
fn sections_are_chosen_in_every_format_and_csv_takes_one() {
    use crate::cli::{run, Cli, Command};
    use clap::Parser;
    let parse = |args: &[&str]| Cli::try_parse_from(args).unwrap();
    let cli = parse(&[
        "rtrace",
        "report",
        "--section",
        "utilization,cuda_gpu_kern_sum",
        "--section",
        "nvtx_sum,cuda_api_sum",
        "t",
    ]);
    match &cli.command {
        Command::Report(r) => assert_eq!(
            r.section,
            vec![
                Section::Utilisation,
                Section::Kernels,
                Section::Nvtx,
                Section::Api
            ]
        ),
        other => panic!("{other:?}"),
    }
    // Refused before any input is read (the file exists, so the refusal is the options').
    let file = std::env::temp_dir().join(format!("rtrace-sections-{}.bin", std::process::id()));
    std::fs::write(&file, gpu_sample().bytes).unwrap();
    let path = file.to_str().unwrap();
    for args in [
        ["--format", "csv", "--section", "api,kernels"],
        ["--format", "csv", "--section", "resources"],
    ] {
        let mut all = vec!["rtrace", "report"];
        all.extend(args);
        all.push(path);
        assert_eq!(run(parse(&all)), 2, "{args:?}");
    }
    assert_eq!(
        run(parse(&["rtrace", "report", "--section", "kernels", path])),
        0
    );
    std::fs::remove_file(&file).unwrap();
    assert!(Cli::try_parse_from(["rtrace", "report", "--section", "gpu", "t"]).is_err());
    // Only the chosen sections, in the table's order, the first without a blank line.
    let traces = [read(&gpu_sample().bytes)];
    let options = |format, sections: Vec<Section>| RenderOptions {
        format,
        sections,
        ..RenderOptions::default()
    };
    let s = crate::report::Sections::of(&traces);
    let table = crate::output::render(
        &traces,
        &s,
        &options(Format::Table, vec![Section::Memset, Section::Api]),
    );
    assert!(
        table.starts_with("API summary: 4 functions, 7 calls, 1 process\n"),
        "{table}"
    );
    assert!(
        table.contains("\n\nMemsets: 1 memset, 1.0 kB set in 100 ns\n"),
        "{table}"
    );
    assert!(!table.contains("Process 1234") && !table.contains("GPU kernel summary"));
    let json = crate::output::render(&traces, &s, &options(Format::Json, vec![Section::Memset]));
    assert_eq!(
        json,
        "{\n\"memset\":[\n  {\"count\":1,\"bytes\":1000,\"total_ns\":100,\"mean_ns\":100,\
         \"median_ns\":100,\"min_ns\":100,\"max_ns\":100,\"stddev_ns\":0,\"share_percent\":6.67,\
         \"mean_bytes\":1000,\"median_bytes\":1000,\"min_bytes\":1000,\"max_bytes\":1000,\
         \"stddev_bytes\":0}\n]}\n"
    );
}

impl Builder {
    fn resource_chunk(self, kind: ChunkKind, payload: Vec<u8>) -> Self {
        self.chunk(kind, 0, 0, &payload)
    }
}

/// One process (pid 77) on an H200: its primary context 1 (NULL stream 7), a stream created
/// by `cuStreamCreateWithPriority` (call 1), a module of two functions loaded by
/// `cuModuleLoadData` (call 2), a peer copy by `cuMemcpyPeerAsync` (call 3).
fn resource_sample() -> Builder {
    let device = DeviceInfo {
        ordinal: 0,
        name: "NVIDIA H200".into(),
        total_memory: 150_000_000_000,
        attributes: vec![
            (75, 9),
            (76, 0),
            (16, 132),
            (13, 1_980_000),
            (36, 3_201_000),
        ],
    };
    let context = ContextRecord {
        context: 1,
        device: 0,
        null_stream: 7,
        compute_api: 1,
        ..Default::default()
    };
    let streams = [
        StreamRecord {
            context: 1,
            stream: 7,
            flag: StreamFlag::Null,
            ..Default::default()
        },
        StreamRecord {
            correlation: 1,
            source_correlation: 11,
            context: 1,
            stream: 13,
            priority: -5,
            flag: StreamFlag::NonBlocking,
            flags: FLAG_CORRELATED as u8,
        },
    ];
    let module = ModuleRecord {
        correlation: 2,
        timestamp_ns: 2_010,
        cubin_size: 6_584,
        module: 23,
        context: 1,
        flags: FLAG_CORRELATED as u8,
    };
    let unload = ModuleRecord {
        correlation: 4,
        timestamp_ns: 4_010,
        flags: (FLAG_CORRELATED | FLAG_UNLOADED) as u8,
        ..module
    };
    let function = |function, function_index, name| FunctionRecord {
        function,
        context: 1,
        module: 23,
        function_index,
        name,
    };
    let peer = PeerCopyRecord {
        copy: MemcpyRecord {
            kind: CopyKind::PtoP,
            src_kind: MemoryKind::Device,
            dst_kind: MemoryKind::Device,
            flags: FLAG_CORRELATED as u8,
            ..copy(CopyKind::PtoP, (0, 13), (3_100, 3_600), 1 << 20, 3)
        },
        src_device: 0,
        src_context: 1,
        dst_device: 1,
        dst_context: 2,
    };
    let bytes = |recs: Vec<Vec<u8>>| recs.concat();
    Builder::new(&header(77))
        .names(&[
            (0, "cuStreamCreateWithPriority"),
            (1, "cuModuleLoadData"),
            (2, "cuMemcpyPeerAsync"),
            (3, "cuModuleUnload"),
        ])
        .records(
            5,
            0,
            &[
                call(0, 1_000, 1),
                call(1, 2_000, 2),
                call(2, 3_000, 3),
                call(3, 4_000, 4),
            ],
        )
        .kernel_names(&[(0, "_Z4stepPfi"), (1, "gemm")])
        .chunk(ChunkKind::DeviceInfo, 0, 0, &encode_value(&device))
        .resource_chunk(ChunkKind::Contexts, context.to_bytes().to_vec())
        .resource_chunk(
            ChunkKind::Streams,
            bytes(streams.iter().map(|s| s.to_bytes().to_vec()).collect()),
        )
        .resource_chunk(
            ChunkKind::Modules,
            [module.to_bytes(), unload.to_bytes()].concat(),
        )
        .resource_chunk(
            ChunkKind::Functions,
            bytes(vec![
                function(1, 12, 0).to_bytes().to_vec(),
                function(2, 11, 1).to_bytes().to_vec(),
            ]),
        )
        .resource_chunk(ChunkKind::PeerCopies, peer.to_bytes().to_vec())
        .chunk(
            ChunkKind::ModuleImage,
            0,
            0,
            &ModuleImage {
                module: 23,
                context: 1,
                hash: image_hash(b"cubin"),
                crc: 7,
                size: 5,
                bytes: Some(b"cubin".to_vec()),
                in_run: false,
            }
            .encode(),
        )
}

#[test]
fn resources_are_loaded_and_summarised() {
    let t = read(&resource_sample().bytes);
    assert_eq!((t.unknown_chunks, t.bad_chunks.len()), (0, 0));
    assert_eq!(t.resource_records(), 7);
    assert_eq!(t.module_images.len(), 1);
    assert_eq!(t.images[&image_hash(b"cubin")], b"cubin".to_vec());
    assert_eq!(t.modules.len(), 1);
    assert_eq!(t.module_unloads.len(), 1);
    // A peer copy is a copy too.
    assert_eq!(t.peer_copies.len(), 1);
    assert_eq!(t.memcpys, vec![t.peer_copies[0].copy]);
    assert_eq!(
        memcpy_summary(std::slice::from_ref(&t))[0].kind,
        CopyKind::PtoP
    );
    let r = resources(std::slice::from_ref(&t));
    assert_eq!(
        r.contexts,
        vec![ContextRow {
            pid: 77,
            context: 1,
            device: 0,
            null_stream: 7,
            streams: 2,
            modules: 1,
            functions: 2,
            ..Default::default()
        }]
    );
    assert_eq!(r.streams[0].created_by, None);
    assert_eq!(
        (r.streams[1].created_by.as_deref(), r.streams[1].correlation),
        (Some("cuStreamCreateWithPriority"), Some(1))
    );
    assert_eq!(r.functions[0].name, "step(float*, int)");

    let json = render_report(std::slice::from_ref(&t), Format::Json);
    let at = json.find("\"resources\"").unwrap();
    let end = json.find("\"kernels\"").unwrap();
    let expected = concat!(
        "\"resources\":{\n",
        "\"devices\":[\n",
        "  {\"pid\":77,\"device\":0,\"name\":\"NVIDIA H200\",\"compute_capability\":\"9.0\",",
        "\"multiprocessors\":132,\"total_memory\":150000000000,\"clock_khz\":1980000,",
        "\"memory_clock_khz\":3201000}\n",
        "],\n",
        "\"contexts\":[\n",
        "  {\"pid\":77,\"context\":1,\"device\":0,\"null_stream\":7,\"parent_context\":0,",
        "\"green\":false,\"multiprocessors\":0,\"streams\":2,\"modules\":1,\"functions\":2}\n",
        "],\n",
        "\"streams\":[\n",
        "  {\"pid\":77,\"context\":1,\"stream\":7,\"flag\":\"null\",\"priority\":0,",
        "\"created_by\":null,\"correlation\":null},\n",
        "  {\"pid\":77,\"context\":1,\"stream\":13,\"flag\":\"non-blocking\",\"priority\":-5,",
        "\"created_by\":\"cuStreamCreateWithPriority\",\"correlation\":1}\n",
        "],\n",
        "\"modules\":[\n",
        "  {\"pid\":77,\"context\":1,\"module\":23,\"cubin_size\":6584,\"timestamp_ns\":2010,",
        "\"functions\":2,\"loaded_by\":\"cuModuleLoadData\",\"correlation\":2,",
        "\"unloaded_ns\":4010,\"unloaded_by\":\"cuModuleUnload\",\"unload_correlation\":4,",
        "\"image_hash\":\"af19191281455da0\",\"cubin_crc\":7,\"image_stored\":true,",
        "\"image_functions\":[]}\n",
        "],\n",
        "\"functions\":[\n",
        "  {\"pid\":77,\"context\":1,\"module\":23,\"function\":1,\"index\":12,",
        "\"name\":\"step(float*, int)\"},\n",
        "  {\"pid\":77,\"context\":1,\"module\":23,\"function\":2,\"index\":11,\"name\":\"gemm\"}\n",
        "]},\n",
    );
    assert_eq!(&json[at..end], expected);

    let table = render_report(std::slice::from_ref(&t), Format::Table);
    assert!(
        table.contains(
            "  GPU records        0 kernels, 1 copy, 0 memsets\n  \
             resource records   1 context, 2 streams, 1 module, 1 module unload, 2 functions\n"
        ),
        "{table}"
    );
    let at = table.find("Resources:").unwrap();
    let end = table.find("GPU kernel summary").unwrap();
    let expected = "\
Resources: 1 device, 1 context, 2 streams, 1 module, 2 functions
Devices
name         process  device  compute capability  SMs    memory     clock  memory clock
NVIDIA H200  77            0                 9.0  132  150.0 GB  1980 MHz      3201 MHz
Contexts
process  context  device  NULL stream  streams  modules  functions  kind
77             1       0            7        2        1          2  regular
Streams (flag: default, non-blocking, null; priority: lower is higher)
process  context  stream  flag          priority  created by
77             1       7  null                 0  -
77             1      13  non-blocking        -5  cuStreamCreateWithPriority
Modules
process  context  module    size  functions  loaded by         unloaded by
77             1      23  6.6 kB          2  cuModuleLoadData  cuModuleUnload
Functions
function           process  context  module  index
step(float*, int)       77        1      23     12
gemm                    77        1      23     11

";
    assert_eq!(&table[at..end], expected, "\n{}", &table[at..end]);
    // Without devices or resource records there is no such section (and JSON's is empty).
    let plain = render_report(&[read(&gpu_sample().bytes)], Format::Table);
    assert!(!plain.contains("Resources"), "{plain}");
}

/// Filters keep exactly the records asked for: the window is relative to the process start
/// (1_000 ns here); devices, streams and kernel names apply to GPU records only.
#[test]
fn filters_keep_the_window_devices_streams_and_kernels_asked_for() {
    use crate::filter::{apply_all, parse_regex, Filter};
    let starts = |t: &crate::model::Trace| -> (Vec<u64>, Vec<u64>, Vec<u64>, Vec<u64>) {
        let mut api: Vec<u64> = t
            .threads
            .values()
            .flat_map(|th| th.records.iter().map(|r| r.start_ns))
            .collect();
        api.sort_unstable();
        (
            api,
            t.kernels.iter().map(|k| k.start_ns).collect(),
            t.memcpys.iter().map(|c| c.start_ns).collect(),
            t.memsets.iter().map(|m| m.start_ns).collect(),
        )
    };
    let filtered = |f: Filter| {
        let mut traces = vec![read(&gpu_sample().bytes)];
        apply_all(&f, &mut traces).unwrap();
        starts(&traces[0])
    };
    // [1_200, 2_100) after the start: records starting at 2_200 ..= 3_099.
    assert_eq!(
        filtered(Filter {
            from_ns: Some(1_200),
            to_ns: Some(2_100),
            ..Default::default()
        }),
        (
            vec![2_200, 2_300, 2_400, 2_500],
            vec![3_000, 3_000],
            vec![],
            vec![]
        )
    );
    // Device 1: its kernels and copy; API records all stay.
    let (api, kernels, copies, sets) = filtered(Filter {
        devices: vec![1],
        ..Default::default()
    });
    assert_eq!(api.len(), 7);
    assert_eq!(
        (kernels, copies, sets),
        (vec![3_000, 3_200], vec![3_300], vec![])
    );
    // Stream 7 (device 0).
    let (_, kernels, copies, sets) = filtered(Filter {
        streams: vec![7],
        ..Default::default()
    });
    assert_eq!(
        (kernels, copies, sets),
        (vec![3_000, 3_800], vec![1_500, 6_100], vec![6_000])
    );
    // Kernels by demangled name (fill(float*, int)) or mangled name; copies stay.
    for re in ["^fill\\(", "_Z4fill"] {
        let (_, kernels, copies, _) = filtered(Filter {
            kernel: Some(parse_regex(re).unwrap()),
            ..Default::default()
        });
        assert_eq!((kernels, copies.len()), (vec![4_500], 3), "{re}");
    }
    // Processes: another pid is an error naming the inputs' processes.
    let mut traces = vec![read(&gpu_sample().bytes)];
    let err = apply_all(
        &Filter {
            pids: vec![99],
            ..Default::default()
        },
        &mut traces,
    )
    .unwrap_err();
    assert_eq!(
        err,
        "no trace of process 99 among the inputs (their processes: 1234)"
    );
}

/// The slowest launches are the largest latencies; of equal ones, the first in file order,
/// however many there are.
#[test]
fn launch_latency_keeps_the_first_of_equal_latencies() {
    let calls: Vec<ApiRecord> = (1..=15).map(|c| call(0, c * 1_000, c)).collect();
    // Latency 500 for all but the 12th (700).
    let kernels: Vec<KernelRecord> = (1..=15u64)
        .map(|c| {
            let lat = if c == 12 { 700 } else { 500 };
            kernel(0, (0, 7), (c * 1_000 + lat, c * 1_000 + lat + 10), c, 1, 1)
        })
        .collect();
    let t = read(
        &Builder::new(&header(5))
            .names(&[(0, "cuLaunchKernel")])
            .kernel_names(&[(0, "k")])
            .records(1, 0, &calls)
            .kernels(&kernels)
            .bytes,
    );
    let l = launch_latency(std::slice::from_ref(&t), 4);
    assert_eq!(l.correlated, 15);
    let got: Vec<(u64, i64)> = l
        .slowest
        .iter()
        .map(|r| (r.correlation, r.latency_ns))
        .collect();
    assert_eq!(got, vec![(12, 700), (1, 500), (2, 500), (3, 500)]);
}

/// An NVTX event of `kind` with string `message` at `time_ns` and `value` (a push or pop's
/// level), encoded.
fn nvtx_event(kind: NvtxKind, message: u32, time_ns: u64, value: u64) -> [u8; NvtxEvent::SIZE] {
    NvtxEvent {
        kind,
        message,
        time_ns,
        value,
        ..Default::default()
    }
    .to_bytes()
}

/// NVTX ranges get the GPU work launched by their thread's calls inside them (nested ranges
/// included), in the summary and the report.
#[test]
fn nvtx_ranges_are_projected_onto_the_gpu_work_they_launched() {
    let ev = nvtx_event;
    let events = [
        ev(NvtxKind::Push, 1, 1_900, 0), // "step": calls 2..4
        ev(NvtxKind::Push, 2, 2_050, 1), // "fwd": calls 3, 4
        ev(NvtxKind::Pop, 0, 2_250, 1),
        ev(NvtxKind::Pop, 0, 2_450, 0),
        ev(NvtxKind::Push, 2, 2_450, 0), // "fwd" again: no call
        ev(NvtxKind::Pop, 0, 2_460, 0),
    ]
    .concat();
    let t = read(
        &gpu_sample()
            .chunk(
                ChunkKind::NvtxStrings,
                0,
                0,
                &encode_function_names([(1, "step"), (2, "fwd")]),
            )
            .chunk(ChunkKind::NvtxEvents, 11, 0, &events)
            .bytes,
    );
    let r = crate::nvtx::ranges(&t);
    let got: Vec<(&str, u64, u64, u64, u64)> = r
        .ranges
        .iter()
        .map(|x| {
            (
                x.name.as_str(),
                x.gpu_records,
                x.gpu_ns,
                x.own_gpu_records,
                x.own_gpu_ns,
            )
        })
        .collect();
    // Calls 2 (kernel 1000), 3 (kernel 1200), 4 (kernel 1000 and a 1000-byte copy of 200):
    // all in "step"; 3 and 4 in "fwd"; nothing in the second "fwd". Call 5 (a memset) at
    // 2_300 is in "step" too.
    assert_eq!(
        got,
        vec![
            // Its own: calls 2 and 5, outside "fwd".
            (
                "step",
                5,
                1_000 + 1_200 + 1_000 + 200 + 100,
                3,
                1_000 + 200 + 100
            ),
            ("fwd", 2, 1_200 + 1_000, 2, 1_200 + 1_000),
            ("fwd", 0, 0, 0, 0),
        ]
    );
    let (rows, open, marks) = crate::nvtx::nvtx_summary(std::slice::from_ref(&t));
    assert_eq!((open, marks), (0, 0));
    assert_eq!(
        rows.iter()
            .map(|r| (
                r.name.as_str(),
                r.count,
                r.total_ns,
                r.gpu_records,
                r.gpu_ns
            ))
            .collect::<Vec<_>>(),
        vec![("step", 1, 550, 5, 3_500), ("fwd", 2, 210, 2, 2_200)]
    );
    let table = render_report(std::slice::from_ref(&t), Format::Table);
    assert!(
        table.contains(
            "\nNVTX ranges: 3 ranges, 2 names, 0 open, 0 marks\n\
             GPU work, time and own time: the process view (launches of other threads with no \
             range of the domain open count too; docs/nvtx.md); thread: its own thread's \
             launches only\n\
             range  domain     count   total    mean  median     min     max  stddev   share  GPU work  GPU time  own time  thread work  thread time\n\
             step   (default)      1  550 ns  550 ns  550 ns  550 ns  550 ns    0 ns  72.37%         5    3.5 µs    1.3 µs            5       3.5 µs\n\
             fwd    (default)      2  210 ns  105 ns  105 ns   10 ns  200 ns  134 ns  27.63%         2    2.2 µs    2.2 µs            2       2.2 µs\n"
        ),
        "{table}"
    );
}

/// A trace written before pops followed their pushes' recording, under capture control: a
/// pop whose push was made while paused (its level deeper than any open) ends nothing, and a
/// push whose pop was made while paused ends with the pop of the range around it. So does the
/// time window's filter, which keeps a pop with its own push.
#[test]
fn pops_end_the_push_of_their_own_level() {
    use crate::filter::{apply_all, Filter};
    let ev = nvtx_event;
    use NvtxKind::{Pop, Push};
    let main = [
        ev(Push, 1, 1_900, 0), // "step": calls 2..5
        ev(Push, 2, 2_050, 1), // "fwd": calls 3, 4
        ev(Pop, 0, 2_150, 2),  // a range pushed while paused: ends nothing
        ev(Pop, 0, 2_250, 1),
        ev(Pop, 0, 2_450, 0),
    ]
    .concat();
    let other = [
        ev(Push, 3, 2_300, 0), // "outer": call 7
        ev(Push, 4, 2_350, 1), // "inner": popped while paused, ends with "outer"
        ev(Pop, 0, 2_600, 0),
    ]
    .concat();
    let bytes = gpu_sample()
        .chunk(
            ChunkKind::NvtxStrings,
            0,
            0,
            &encode_function_names([(1, "step"), (2, "fwd"), (3, "outer"), (4, "inner")]),
        )
        .chunk(ChunkKind::NvtxEvents, 11, 0, &main)
        .chunk(ChunkKind::NvtxEvents, 12, 0, &other)
        .bytes;
    let ranges = |t: &crate::model::Trace| -> Vec<(String, u64, u64, u64)> {
        let r = crate::nvtx::ranges(t);
        let mut v: Vec<_> = (r.ranges.iter())
            .map(|x| (x.name.clone(), x.start_ns, x.end_ns, x.gpu_records))
            .collect();
        v.sort();
        v
    };
    let t = read(&bytes);
    let s = String::from;
    assert_eq!(
        ranges(&t),
        vec![
            (s("fwd"), 2_050, 2_250, 2),
            (s("inner"), 2_350, 2_600, 1),
            (s("outer"), 2_300, 2_600, 1),
            (s("step"), 1_900, 2_450, 5),
        ]
    );
    let (_, open, _) = crate::nvtx::nvtx_summary(std::slice::from_ref(&t));
    assert_eq!(open, 0);
    // From 1_000 ns after the start (2_000): "fwd" and its own pop stay, "step" and its pop go.
    let mut traces = vec![read(&bytes)];
    let window = Filter {
        from_ns: Some(1_000),
        ..Default::default()
    };
    apply_all(&window, &mut traces).unwrap();
    let kept: Vec<(NvtxKind, u64, u64)> = traces[0].threads[&11]
        .nvtx
        .iter()
        .map(|e| (e.kind, e.time_ns, e.value))
        .collect();
    assert_eq!(kept, vec![(Push, 2_050, 1), (Pop, 2_250, 1)]);
}

/// Many ranges, each launching a kernel that runs after the range ended: the projector holds
/// only the few still open or waiting for their work, and the median of more distinct
/// durations than are counted exactly is still exact (found by passes over the events).
#[test]
fn nvtx_ranges_are_summarised_as_they_end() {
    const N: u64 = 20_000;
    let (mut events, mut calls, mut kernels, mut durations) = (vec![], vec![], vec![], vec![]);
    let mut at = 1_000;
    for i in 0..N {
        let d = 1_000 + (i * 7_919) % 5_003; // 5_003 distinct durations
        let ev = |kind, time_ns| NvtxEvent {
            kind,
            message: 1,
            time_ns,
            ..Default::default()
        };
        events.extend(ev(NvtxKind::Push, at).to_bytes());
        events.extend(ev(NvtxKind::Pop, at + d).to_bytes());
        calls.push(call(0, at + 10, i + 1));
        // Its kernel runs once the next range began, 100 ns long.
        kernels.push(kernel(
            0,
            (0, 7),
            (at + d + 250, at + d + 350),
            i + 1,
            1,
            32,
        ));
        durations.push(d);
        at += d + 200;
    }
    let t = read(
        &Builder::new(&header(1234))
            .names(&[(0, "cuLaunchKernel")])
            .kernel_names(&[(0, "_Z4stepPfi")])
            .chunk(
                ChunkKind::NvtxStrings,
                0,
                0,
                &encode_function_names([(1, "it")]),
            )
            .chunk(ChunkKind::NvtxEvents, 11, 0, &events)
            .records(11, 0, &calls)
            .kernels(&kernels)
            .bytes,
    );
    let mut p = crate::nvtx::Projector::new(&t, None, crate::nvtx::Mode::Summary);
    crate::nvtx::project_in_memory(&mut p, &t);
    assert_eq!(p.held(), 2);
    durations.sort_unstable();
    let (rows, open, marks) = crate::nvtx::nvtx_summary(std::slice::from_ref(&t));
    assert_eq!((rows.len(), open, marks), (1, 0, 0));
    let total: u64 = durations.iter().sum();
    let r = &rows[0];
    assert_eq!(
        (
            r.count,
            r.total_ns,
            r.mean_ns,
            r.median_ns,
            r.min_ns,
            r.max_ns
        ),
        (
            N,
            total,
            total / N,
            durations[(N as usize - 1) / 2],
            durations[0],
            durations[N as usize - 1]
        )
    );
    assert_eq!(
        (r.gpu_records, r.gpu_ns, r.own_gpu_ns),
        (N, N * 100, N * 100)
    );
}

/// An external id's push or pop (`kind`) of id `value` of kind `category`, encoded.
fn external_event(
    kind: NvtxKind,
    category: u32,
    time_ns: u64,
    value: u64,
) -> [u8; NvtxEvent::SIZE] {
    NvtxEvent {
        kind,
        category,
        time_ns,
        value,
        ..Default::default()
    }
    .to_bytes()
}

/// External correlation ids: every call made while an id is the innermost of its kind on its
/// thread is linked to it, and through the call its GPU work.
#[test]
fn external_ids_get_the_calls_and_gpu_work_made_under_them() {
    let ev = external_event;
    let events = [
        ev(NvtxKind::ExternalPush, 2, 1_950, 42),
        ev(NvtxKind::ExternalPush, 2, 2_150, 43),
        ev(NvtxKind::ExternalPop, 2, 2_250, 43),
        ev(NvtxKind::ExternalPush, 9, 2_350, 7),
        ev(NvtxKind::ExternalPop, 2, 2_450, 42),
        ev(NvtxKind::ExternalPop, 9, 2_460, 7),
    ]
    .concat();
    let t = read(
        &gpu_sample()
            .chunk(ChunkKind::NvtxEvents, 11, 0, &events)
            .bytes,
    );
    let rows = crate::nvtx::external_summary(std::slice::from_ref(&t));
    let got: Vec<(u32, u64, u64, u64, u64)> = rows
        .iter()
        .map(|r| (r.kind, r.id, r.calls, r.gpu_records, r.gpu_ns))
        .collect();
    // 42: calls 2 (kernel 1000), 3 (kernel 1200), 5 (memset 100), 6 (copy 200); 43: call 4
    // (kernel 1000); 7 (another kind): call 6.
    assert_eq!(
        got,
        vec![
            (2, 42, 4, 4, 2_500),
            (2, 43, 1, 1, 1_000),
            (9, 7, 1, 1, 200)
        ]
    );
    let table = render_report(std::slice::from_ref(&t), Format::Table);
    assert!(
        table.contains(
            "\nExternal correlation: 3 ids (rtrace_push_external_correlation), by GPU time\n\
             calls, GPU work and time: the process view (calls of other threads with no id of \
             the kind pushed count too; docs/nvtx.md); thread: its own thread's calls only\n\
             id  kind  process  calls  GPU work  GPU time  thread calls  thread work  thread time\n\
             42     2     1234      4         4    2.5 µs             4            4       2.5 µs\n\
             43     2     1234      1         1    1.0 µs             1            1       1.0 µs\n\
             7      9     1234      1         1    200 ns             1            1       200 ns\n"
        ),
        "{table}"
    );
    let json = render_report(std::slice::from_ref(&t), Format::Json);
    assert!(json.ends_with(
        "\"external\":[\n  {\"pid\":1234,\"kind\":2,\"id\":42,\"calls\":4,\"gpu_records\":4,\
         \"gpu_ns\":2500,\"process_calls\":4,\"process_gpu_records\":4,\"process_gpu_ns\":2500},\n  \
         {\"pid\":1234,\"kind\":2,\"id\":43,\"calls\":1,\"gpu_records\":1,\"gpu_ns\":1000,\
         \"process_calls\":1,\"process_gpu_records\":1,\"process_gpu_ns\":1000},\n  \
         {\"pid\":1234,\"kind\":9,\"id\":7,\"calls\":1,\"gpu_records\":1,\"gpu_ns\":200,\
         \"process_calls\":1,\"process_gpu_records\":1,\"process_gpu_ns\":200}\n]}\n"
    ));
}

/// Pushes made while capture control was not recording: one whose block lay wholly outside
/// the capture gets no row, even with a `cuInit` (recorded while paused) inside it; one still
/// on the stack when recording began is credited with the calls recorded under it but that
/// `cuInit`; a push made while recording is credited with every call, `cuInit` too.
#[test]
fn external_ids_pushed_while_paused_are_reported_only_for_calls_recorded_under_them() {
    let ev = external_event;
    let events = [
        ev(NvtxKind::ExternalPushPaused, 2, 100, 40),
        ev(NvtxKind::ExternalPop, 2, 200, 40),
        ev(NvtxKind::ExternalPushPaused, 2, 1_950, 42),
        ev(NvtxKind::ExternalPush, 2, 2_150, 43),
        ev(NvtxKind::ExternalPop, 2, 2_290, 43),
        ev(NvtxKind::ExternalPop, 2, 2_450, 42),
        ev(NvtxKind::ExternalPush, 2, 2_500, 44),
        ev(NvtxKind::ExternalPop, 2, 2_700, 44),
    ]
    .concat();
    let t = read(
        &Builder::new(&header(1234))
            .names(&[(0, "cuLaunchKernel"), (9, "cuInit")])
            .kernel_names(&[(0, "k")])
            .chunk(ChunkKind::NvtxEvents, 11, 0, &events)
            .records(
                11,
                0,
                &[
                    call(9, 150, 0),
                    // Made inside a runtime call (cudaFree(0)'s): the same function.
                    call(9 | rtrace_format::IN_RUNTIME, 1_960, 0),
                    call(0, 2_000, 2),
                    call(0, 2_200, 4),
                    call(9, 2_550, 0),
                ],
            )
            .kernels(&[
                kernel(0, (0, 7), (3_000, 3_100), 2, 1, 32),
                kernel(0, (0, 7), (3_200, 3_400), 4, 1, 32),
            ])
            .bytes,
    );
    let rows = crate::nvtx::external_summary(std::slice::from_ref(&t));
    let got: Vec<(u32, u64, u64, u64, u64, u64)> = rows
        .iter()
        .map(|r| {
            (
                r.kind,
                r.id,
                r.calls,
                r.gpu_records,
                r.gpu_ns,
                r.process_gpu_records,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (2, 43, 1, 1, 200, 1),
            (2, 42, 1, 1, 100, 1),
            (2, 44, 1, 0, 0, 0)
        ]
    );
}

/// The process view (docs/nvtx.md, "Which thread's work"): a main thread with `step` ⊃
/// `backward` and an external id waits while a thread with no range launches the backward
/// pass; a loader thread with a range and an id of its own keeps its work; a thread with a
/// range only in another domain has its launch credited to the main thread's ranges.
#[test]
fn other_threads_launches_are_credited_to_open_ranges_in_the_process_view() {
    let ev = |kind, message, domain, category, time_ns, value| {
        NvtxEvent {
            kind,
            message,
            domain,
            category,
            time_ns,
            value,
            ..Default::default()
        }
        .to_bytes()
    };
    use NvtxKind::{ExternalPop, ExternalPush, Pop, Push};
    let main = [
        ev(Push, 1, 0, 0, 1_000, 0), // step
        ev(ExternalPush, 0, 0, 2, 1_050, 42),
        ev(Push, 2, 0, 0, 2_000, 1), // backward: the main thread waits
        ev(Pop, 0, 0, 0, 3_500, 1),
        ev(ExternalPop, 0, 0, 2, 3_900, 42),
        ev(Pop, 0, 0, 0, 4_000, 0),
    ]
    .concat();
    let loader = [
        ev(Push, 3, 0, 0, 2_050, 0), // io
        ev(ExternalPush, 0, 0, 2, 2_060, 7),
        ev(ExternalPop, 0, 0, 2, 2_190, 7),
        ev(Pop, 0, 0, 0, 2_200, 0),
    ]
    .concat();
    let nccl = [ev(Push, 4, 5, 0, 2_400, 0), ev(Pop, 0, 5, 0, 2_500, 0)].concat();
    let t = read(
        &Builder::new(&header(1234))
            .names(&[(0, "cuLaunchKernel")])
            .kernel_names(&[(0, "k")])
            .chunk(
                ChunkKind::NvtxStrings,
                0,
                0,
                &encode_function_names([(1, "step"), (2, "backward"), (3, "io"), (4, "nccl")]),
            )
            .chunk(ChunkKind::NvtxEvents, 11, 0, &main)
            .chunk(ChunkKind::NvtxEvents, 13, 0, &loader)
            .chunk(ChunkKind::NvtxEvents, 14, 0, &nccl)
            .records(11, 0, &[call(0, 1_100, 1), call(0, 3_600, 4)])
            // The autograd thread: no range, no id; its last launch is after everything.
            .records(
                12,
                0,
                &[call(0, 2_100, 2), call(0, 2_300, 3), call(0, 4_500, 8)],
            )
            .records(13, 0, &[call(0, 2_150, 5)])
            .records(14, 0, &[call(0, 2_450, 6)])
            .kernels(&[
                kernel(0, (0, 7), (1_500, 1_600), 1, 1, 32),
                kernel(0, (0, 7), (2_200, 2_500), 2, 1, 32),
                kernel(0, (0, 7), (2_600, 3_000), 3, 1, 32),
                kernel(0, (0, 7), (3_700, 3_750), 4, 1, 32),
                kernel(0, (0, 8), (2_400, 2_600), 5, 1, 32),
                kernel(0, (1, 3), (3_100, 3_200), 6, 1, 32),
                kernel(0, (0, 7), (4_600, 4_700), 8, 1, 32),
            ])
            .bytes,
    );
    let r = crate::nvtx::ranges(&t);
    let got: Vec<_> = r
        .ranges
        .iter()
        .map(|x| {
            (
                x.name.as_str(),
                (x.gpu_records, x.gpu_ns, x.own_gpu_records, x.own_gpu_ns),
                (
                    x.process_gpu_records,
                    x.process_gpu_ns,
                    x.process_own_gpu_records,
                    x.process_own_gpu_ns,
                ),
                x.process_gpu_span,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            // Its thread's calls 1 and 4 (100 + 50); the process view adds the autograd
            // thread's 2 and 3 (300 + 400) and the NCCL-like thread's 6 (100, on GPU 1), all
            // while `backward` was its innermost range.
            (
                "step",
                (2, 150, 2, 150),
                (5, 950, 2, 150),
                Some((0, 1_500, 3_750))
            ),
            (
                "backward",
                (0, 0, 0, 0),
                (3, 800, 3, 800),
                Some((0, 2_200, 3_200))
            ),
            // Its own call 5 (200); the autograd thread's call 2 came while it was open.
            (
                "io",
                (1, 200, 1, 200),
                (2, 500, 2, 500),
                Some((0, 2_200, 2_600))
            ),
            // Another domain: nothing of the others' launched while it was open.
            (
                "nccl",
                (1, 100, 1, 100),
                (1, 100, 1, 100),
                Some((1, 3_100, 3_200))
            ),
        ]
    );
    let rows = crate::nvtx::external_summary(std::slice::from_ref(&t));
    let got: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r.id,
                (r.calls, r.gpu_records, r.gpu_ns),
                (r.process_calls, r.process_gpu_records, r.process_gpu_ns),
            )
        })
        .collect();
    // 42: its thread's calls 1 and 4, with the calls 2, 3 and 6 of threads with no id; 7:
    // its thread's call 5, with call 2. Call 5 is not 42's: its thread had 7 pushed.
    assert_eq!(
        got,
        vec![
            (42, (2, 2, 150), (5, 5, 950)),
            (7, (1, 1, 200), (2, 2, 500))
        ]
    );
    let json = render_report(std::slice::from_ref(&t), Format::Json);
    assert!(
        json.contains(
            "{\"domain\":\"(default)\",\"name\":\"backward\",\"count\":1,\"total_ns\":1500,\
             \"mean_ns\":1500,\"median_ns\":1500,\"min_ns\":1500,\"max_ns\":1500,\
             \"stddev_ns\":0,\"share_percent\":31.58,\"gpu_records\":0,\"gpu_ns\":0,\"own_gpu_records\":0,\"own_gpu_ns\":0,\
             \"process_gpu_records\":3,\"process_gpu_ns\":800,\"process_own_gpu_records\":3,\
             \"process_own_gpu_ns\":800}"
        ),
        "{json}"
    );
}

/// The process view as the ranges stream by: a thread pushes and pops 20,000 ranges and
/// launches nothing while another thread, with no range, launches a kernel inside each; the
/// projector holds one range at a time (each is over, its kernel in, when the next begins),
/// and each range gets exactly the one kernel launched while it was open.
#[test]
fn other_threads_launches_are_summarised_as_ranges_end() {
    const N: u64 = 20_000;
    let (mut events, mut calls, mut kernels) = (vec![], vec![], vec![]);
    for i in 0..N {
        let at = 1_000 + i * 1_000;
        let ev = |kind, time_ns| NvtxEvent {
            kind,
            message: 1,
            time_ns,
            ..Default::default()
        };
        events.extend(ev(NvtxKind::Push, at).to_bytes());
        events.extend(ev(NvtxKind::Pop, at + 500).to_bytes());
        calls.push(call(0, at + 10, i + 1));
        // Its kernel runs once the range ended, 100 ns long.
        kernels.push(kernel(0, (0, 7), (at + 600, at + 700), i + 1, 1, 32));
    }
    let t = read(
        &Builder::new(&header(1234))
            .names(&[(0, "cuLaunchKernel")])
            .kernel_names(&[(0, "k")])
            .chunk(
                ChunkKind::NvtxStrings,
                0,
                0,
                &encode_function_names([(1, "wait")]),
            )
            .chunk(ChunkKind::NvtxEvents, 11, 0, &events)
            .records(12, 0, &calls)
            .kernels(&kernels)
            .bytes,
    );
    let mut p = crate::nvtx::Projector::new(&t, None, crate::nvtx::Mode::Summary);
    crate::nvtx::project_in_memory(&mut p, &t);
    assert_eq!(p.held(), 1);
    let (rows, open, _) = crate::nvtx::nvtx_summary(std::slice::from_ref(&t));
    assert_eq!((rows.len(), open), (1, 0));
    let r = &rows[0];
    assert_eq!(
        (r.count, r.gpu_records, r.gpu_ns, r.own_gpu_ns),
        (N, 0, 0, 0)
    );
    assert_eq!(
        (
            r.process_gpu_records,
            r.process_gpu_ns,
            r.process_own_gpu_records,
            r.process_own_gpu_ns
        ),
        (N, N * 100, N, N * 100)
    );
}
