//! The ranks section over four processes of one job, exact: three named by `RANK` (given out
//! of order), one by its pid; step ranges (and a range that is not a step), collectives whose
//! wait differs by rank, a kernel that is neither. Streamed on one thread, on four, and in
//! memory: the same section, the same CSV.

use super::*;
use crate::output::{render_report_section, render_sections, Format, Section};
use ranks::{RankRow, StepRow};
use rtrace_format::*;

fn chunk(out: &mut Vec<u8>, kind: ChunkKind, thread: u64, payload: &[u8]) {
    out.extend_from_slice(&ChunkHeader::new(kind, thread, 0, 0, payload).encode());
    out.extend_from_slice(payload);
}

const T0: u64 = 1_000_000;
const B: u64 = T0 + 100_000;

/// A rank's trace: `steps` (durations of its two `train_step` ranges, a `fwd` range inside the
/// first), `nccl` (durations of its collectives, started at B + 10 µs and B + 20 µs), a
/// compute kernel over B..B + 5 µs.
fn rank_trace(pid: u32, rank: Option<&str>, steps: &[u64], nccl: &[u64]) -> Vec<u8> {
    let header = ProcessHeader {
        pid,
        hostname: "node".into(),
        boot_id: "boot".into(),
        start: ClockAnchor {
            monotonic_ns: T0,
            realtime_ns: 1_700_000_000_000_000_000,
        },
        rank_env: rank.map_or_else(Vec::new, |r| vec![("RANK".into(), r.into())]),
        ..Default::default()
    };
    let mut f = encode_file_header(&header);
    chunk(
        &mut f,
        ChunkKind::KernelNames,
        0,
        &encode_function_names([
            (0, "compute"),
            (1, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
        ]),
    );
    chunk(
        &mut f,
        ChunkKind::NvtxStrings,
        0,
        &encode_function_names([(1, "train_step"), (2, "fwd")]),
    );
    let mut events = Vec::new();
    let mut now = T0 + 1_000;
    let mut ev = |kind, message, time_ns, value| {
        let e = NvtxEvent {
            kind,
            message,
            time_ns,
            value,
            ..Default::default()
        };
        events.extend_from_slice(&e.to_bytes());
    };
    for (i, &d) in steps.iter().enumerate() {
        ev(NvtxKind::Push, 1, now, 0);
        if i == 0 {
            ev(NvtxKind::Push, 2, now + 10, 1);
            ev(NvtxKind::Pop, 0, now + 20, 1);
        }
        ev(NvtxKind::Pop, 0, now + d, 0);
        now += d + 100;
    }
    if !events.is_empty() {
        chunk(&mut f, ChunkKind::NvtxEvents, 1, &events);
    }
    let kernel = |name, start_ns, end_ns| KernelRecord {
        name,
        start_ns,
        end_ns,
        device: 0,
        stream: 7,
        ..Default::default()
    };
    let mut k = kernel(0, B, B + 5_000).to_bytes().to_vec();
    for (i, &d) in nccl.iter().enumerate() {
        let start = B + 10_000 * (i as u64 + 1);
        k.extend_from_slice(&kernel(1, start, start + d).to_bytes());
    }
    chunk(&mut f, ChunkKind::Kernels, 0, &k);
    f
}

fn row(rank: &str, pid: u32, gpu: (u64, u64), steps: (u64, u64, u64)) -> RankRow {
    RankRow {
        rank: rank.into(),
        rank_var: "RANK".into(),
        pid,
        hostname: "node".into(),
        gpu_busy_ns: gpu.0,
        gpu_idle_ns: gpu.1,
        steps: steps.0,
        steps_slowest: steps.1,
        step_ns: steps.2,
        ..Default::default()
    }
}

#[test]
fn ranks_are_compared_exactly_however_they_are_read() {
    let dir = std::env::temp_dir().join(format!("rtrace-ranks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let traces = [
        rank_trace(11, Some("2"), &[1_500, 6_000], &[400, 600]),
        rank_trace(12, Some("0"), &[1_000, 3_000], &[500, 800]),
        rank_trace(13, Some("1"), &[2_000, 2_000], &[300, 900]),
        rank_trace(14, None, &[], &[]),
    ];
    let mut files = Vec::new();
    for (i, bytes) in traces.iter().enumerate() {
        let path = dir.join(format!("r{i}.bin"));
        std::fs::write(&path, bytes).unwrap();
        files.push(path);
    }
    let steps = StepNames::default();
    let (_, one) =
        report_inputs(&files, &Filter::default(), Jobs::ONE, &steps, Needs::ALL).unwrap();
    // Collectives: k-th by start; the shortest of each is the rank that arrived last.
    // First: 500, 300, 400 (shortest 300); second: 800, 900, 600 (shortest 600).
    let collective = |r: RankRow, ns: u64, wait: u64, percent: u64| RankRow {
        collectives: 2,
        collective_ns: ns,
        collectives_matched: 2,
        collective_matched_ns: ns,
        collective_wait_ns: wait,
        wait_percent: crate::gpu_summary::Hundredths(percent),
        ..r
    };
    let want_ranks = vec![
        // Busy: 5 µs of compute and the collectives; idle: the rest of B..the last end.
        collective(
            row("0", 12, (6_300, 14_500), (2, 0, 4_000)),
            1_300,
            400,
            3077,
        ),
        collective(
            row("1", 13, (6_200, 14_700), (2, 1, 4_000)),
            1_200,
            300,
            2500,
        ),
        collective(
            row("2", 11, (6_000, 14_600), (2, 1, 7_500)),
            1_000,
            100,
            1000,
        ),
        RankRow {
            rank: "pid 14".into(),
            pid: 14,
            hostname: "node".into(),
            gpu_busy_ns: 5_000,
            ..Default::default()
        },
    ];
    let step = |occurrence, fast: (&str, u64), median, slow: (&str, u64)| StepRow {
        name: "train_step".into(),
        occurrence,
        ranks: 3,
        fastest_rank: fast.0.into(),
        fastest_ns: fast.1,
        median_ns: median,
        slowest_rank: slow.0.into(),
        slowest_ns: slow.1,
        lag_ns: slow.1 - median,
        spread_ns: slow.1 - fast.1,
    };
    let want_steps = vec![
        step(1, ("0", 1_000), 1_500, ("1", 2_000)),
        step(2, ("1", 2_000), 3_000, ("2", 6_000)),
    ];
    assert_eq!(one.ranks.ranks, want_ranks);
    assert_eq!(one.ranks.steps, want_steps);
    let (four_traces, four) =
        report_inputs(&files, &Filter::default(), Jobs::new(4), &steps, Needs::ALL).unwrap();
    assert_eq!(four.ranks, one.ranks);
    let whole = crate::read::load_inputs(&files).unwrap();
    for section in [Section::Ranks, Section::Steps] {
        let streamed = render_sections(&four_traces.traces, &four, Format::Csv, section);
        let in_memory = render_report_section(&whole.traces, Format::Csv, section);
        assert_eq!(streamed, in_memory);
    }
    assert_eq!(
        render_sections(&four_traces.traces, &four, Format::Csv, Section::Ranks),
        "rank,rank_var,pid,hostname,gpu_busy_ns,gpu_idle_ns,steps,steps_slowest,step_ns,\
         collectives,collective_ns,collectives_matched,collective_matched_ns,\
         collective_wait_ns,wait_percent\n\
         0,RANK,12,node,6300,14500,2,0,4000,2,1300,2,1300,400,30.77\n\
         1,RANK,13,node,6200,14700,2,1,4000,2,1200,2,1200,300,25.00\n\
         2,RANK,11,node,6000,14600,2,1,7500,2,1000,2,1000,100,10.00\n\
         pid 14,,14,node,5000,0,0,0,0,0,0,0,0,0,0.00\n"
    );
    assert_eq!(
        render_sections(&four_traces.traces, &four, Format::Csv, Section::Steps),
        "step,occurrence,ranks,fastest_rank,fastest_ns,median_ns,slowest_rank,slowest_ns,\
         lag_ns,spread_ns\n\
         train_step,1,3,0,1000,1500,1,2000,500,1000\n\
         train_step,2,3,1,2000,3000,2,6000,3000,4000\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A rank's file truncated inside its last chunk: reported with the chunk's offset, its chunks
/// before the damage and every other rank analysed, read one at a time or all at once.
#[test]
fn a_truncated_rank_is_reported_and_the_others_analysed() {
    let dir = std::env::temp_dir().join(format!("rtrace-ranks-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut traces = [
        rank_trace(11, Some("0"), &[1_000, 3_000], &[500, 800]),
        rank_trace(12, Some("1"), &[2_000, 2_000], &[300, 900]),
        rank_trace(13, Some("2"), &[1_500, 6_000], &[400, 600]),
    ];
    // Rank 1's kernel chunk (its last: 3 records) loses its last 10 bytes.
    let whole = traces[1].len();
    let at = whole - CHUNK_HEADER_LEN - 3 * KernelRecord::SIZE;
    traces[1].truncate(whole - 10);
    let mut files = Vec::new();
    for (i, bytes) in traces.iter().enumerate() {
        let path = dir.join(format!("r{i}.bin"));
        std::fs::write(&path, bytes).unwrap();
        files.push(path);
    }
    let steps = StepNames::default();
    let (one_traces, one) =
        report_inputs(&files, &Filter::default(), Jobs::ONE, &steps, Needs::ALL).unwrap();
    let (all_traces, all) =
        report_inputs(&files, &Filter::default(), Jobs::new(3), &steps, Needs::ALL).unwrap();
    for traces in [&one_traces.traces, &all_traces.traces] {
        let damage: Vec<Option<String>> = traces.iter().map(|t| t.damage.clone()).collect();
        assert_eq!(
            damage,
            [
                None,
                Some(format!(
                    "truncated: the file ends inside the chunk at byte {at}; reported the 3 \
                     chunks (0 records) before it"
                )),
                None
            ]
        );
    }
    assert_eq!(one.ranks, all.ranks);
    // The damaged rank keeps its steps (before the damage), loses its GPU work.
    let rows: Vec<(&str, u64, u64, u64)> = all
        .ranks
        .ranks
        .iter()
        .map(|r| (r.rank.as_str(), r.gpu_busy_ns, r.collectives, r.steps))
        .collect();
    assert_eq!(
        rows,
        [("0", 6_300, 2, 2), ("1", 0, 0, 2), ("2", 6_000, 2, 2)]
    );
    let lags: Vec<(u64, &str, u64)> = all
        .ranks
        .steps
        .iter()
        .map(|s| (s.occurrence, s.slowest_rank.as_str(), s.lag_ns))
        .collect();
    assert_eq!(lags, [(1, "1", 500), (2, "2", 3_000)]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_gpu_metrics_samplers_trace_is_no_rank() {
    let rank = |pid, name: &str, sampler| ranks::RankInput {
        pid,
        rank: Some(("RANK".into(), name.into())),
        gpu_busy_ns: 10,
        sampler,
        ..Default::default()
    };
    let sampler = ranks::RankInput {
        pid: 9,
        sampler: true,
        ..Default::default()
    };
    let s = ranks::section(vec![rank(1, "0", false), sampler, rank(2, "1", false)]);
    let pids: Vec<u32> = s.ranks.iter().map(|r| r.pid).collect();
    assert_eq!(pids, vec![1, 2]);
    // A program and its sampler alone are no job of ranks.
    let one = ranks::section(vec![rank(1, "0", false), rank(9, "1", true)]);
    assert!(one.ranks.is_empty());
}
