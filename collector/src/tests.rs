//! Tests over small traces built in memory with the format crate.

mod gpu;

use crate::model::{Duration, Trace};
use crate::{api_summary, load_inputs, load_trace, render_report, Format, FunctionSummary};
use rtrace_format::*;
use std::path::{Path, PathBuf};

/// Builds a trace file chunk by chunk.
struct Builder {
    bytes: Vec<u8>,
}

impl Builder {
    fn new(header: &ProcessHeader) -> Self {
        Builder {
            bytes: encode_file_header(header),
        }
    }
    fn chunk(mut self, kind: ChunkKind, thread: u64, dropped: u64, payload: &[u8]) -> Self {
        let h = ChunkHeader::new(kind, thread, 0, dropped, payload);
        self.bytes.extend_from_slice(&h.encode());
        self.bytes.extend_from_slice(payload);
        self
    }
    fn names(self, names: &[(u32, &str)]) -> Self {
        let payload = encode_function_names(names.iter().copied());
        self.chunk(ChunkKind::FunctionNames, 0, 0, &payload)
    }
    fn records(self, thread: u64, dropped: u64, recs: &[ApiRecord]) -> Self {
        let mut payload = Vec::new();
        for r in recs {
            r.write_to(&mut payload);
        }
        self.chunk(ChunkKind::ApiRecords, thread, dropped, &payload)
    }
    fn thread(self, tid: u64, name: &str) -> Self {
        let info = ThreadInfo {
            tid,
            name: name.into(),
        };
        self.chunk(ChunkKind::ThreadInfo, tid, 0, &encode_value(&info))
    }
    fn end(self, end: &ProcessEnd) -> Self {
        self.chunk(ChunkKind::ProcessEnd, 0, 0, &encode_value(end))
    }
    fn notice(self, time_ns: u64, message: &str) -> Self {
        let n = Notice {
            time_ns,
            message: message.into(),
        };
        self.chunk(ChunkKind::Notice, 0, 0, &encode_value(&n))
    }
}

fn rec(function: u32, result: u32, start_ns: u64, dur: u64) -> ApiRecord {
    ApiRecord {
        function,
        result,
        start_ns,
        end_ns: start_ns + dur,
        correlation: start_ns,
    }
}

fn header(pid: u32) -> ProcessHeader {
    ProcessHeader {
        pid,
        ppid: 1,
        forked_from: None,
        command_line: vec!["./app".into(), "--size".into(), "2 MB".into()],
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

fn end(records: u64, dropped: u64) -> ProcessEnd {
    ProcessEnd {
        end: ClockAnchor {
            monotonic_ns: 2_501_000,
            realtime_ns: 0,
        },
        reason: "exit".into(),
        records,
        dropped,
        unwrapped_lookups: 2,
        threads: 2,
    }
}

/// cuInit: 1 call of 100 ns. cuMemAlloc_v2: 10, 40, 20, 30 ns, one error.
/// cuLaunchKernel: 5 and 100 ns on thread 11, 7 ns on thread 12.
fn sample() -> Builder {
    Builder::new(&header(1234))
        .names(&[(0, "cuInit"), (1, "cuMemAlloc_v2"), (2, "cuLaunchKernel")])
        .thread(11, "app")
        .records(
            11,
            0,
            &[
                rec(0, 0, 2_000, 100),
                rec(1, 0, 3_000, 10),
                rec(1, 2, 4_000, 40),
                rec(2, 0, 5_000, 5),
            ],
        )
        .thread(12, "worker")
        .records(12, 3, &[rec(1, 0, 6_000, 20), rec(2, 0, 7_000, 7)])
        .records(11, 0, &[rec(1, 0, 8_000, 30), rec(2, 0, 9_000, 100)])
        .notice(1_500, "hello from the tracer")
        .end(&end(8, 3))
}

fn read(bytes: &[u8]) -> Trace {
    Trace::read(Path::new("t.bin"), bytes).unwrap()
}

/// calls, errors, total, mean, median, min, max, stddev, share (hundredths of a percent).
fn row(function: &str, v: [u64; 9]) -> FunctionSummary {
    row_codes(function, v, &[])
}

fn row_codes(function: &str, v: [u64; 9], codes: &[(u32, u64)]) -> FunctionSummary {
    FunctionSummary {
        error_codes: codes.to_vec(),
        function: function.into(),
        calls: v[0],
        errors: v[1],
        total_ns: v[2],
        mean_ns: v[3],
        median_ns: v[4],
        min_ns: v[5],
        max_ns: v[6],
        stddev_ns: v[7],
        share_percent: crate::gpu_summary::Hundredths(v[8]),
    }
}

#[test]
fn model_holds_threads_names_end_and_notices() {
    let t = read(&sample().bytes);
    assert_eq!(t.header.pid, 1234);
    assert_eq!(t.format_version, (FORMAT_MAJOR, FORMAT_MINOR));
    assert_eq!(t.api_records(), 8);
    assert_eq!(t.dropped, 3);
    assert_eq!(t.threads.len(), 2);
    assert_eq!(t.threads[&11].name.as_deref(), Some("app"));
    assert_eq!(t.threads[&11].records.len(), 6);
    assert_eq!(t.threads[&12].dropped, 3);
    assert_eq!(t.notices.len(), 1);
    assert_eq!(t.end_reason(), "exit");
    assert_eq!(t.duration(), Duration::ToEnd(2_500_000));
    assert_eq!(t.chunks, 8);
    assert_eq!(t.damage, None);
    assert!(t.bad_chunks.is_empty());
}

/// Why records were lost and how the trace ended, in the system's words: a full buffer asks
/// for a larger one; a failed write says so, with its cause, and asks for nothing.
#[test]
fn lost_records_and_failed_writes_say_why() {
    let mut t = read(&sample().bytes);
    assert_eq!(
        t.lost_warning(true).unwrap(),
        "3 API records were lost (a thread's buffer was full); the summary misses them: try a \
         larger --buffer-records"
    );
    assert_eq!(
        t.lost_warning(false).unwrap(),
        "3 API records were lost (a thread's buffer was full); try a larger --buffer-records"
    );
    t.end = None;
    t.write_error = Some(libc::EBADF as u64);
    assert_eq!(
        t.lost_warning(true).unwrap(),
        "3 API records were lost (writing the trace failed: the buffers filled up with nothing \
         to empty them); the summary misses them"
    );
    assert_eq!(
        t.end_reason(),
        "no end record: writing the trace failed (bad file descriptor; what the buffers held \
         was kept)"
    );
    t.write_error = Some(libc::EFBIG as u64);
    assert_eq!(
        t.end_reason(),
        "no end record: writing the trace failed (file too large; what the buffers held was \
         kept)"
    );
    t.dropped = 0;
    assert_eq!(t.lost_warning(true), None);
}

#[test]
fn summary_values_are_exact() {
    let t = read(&sample().bytes);
    assert_eq!(
        api_summary(&[t]),
        vec![
            // 5, 7, 100: sample variance (3·10074 − 112²) / 6 = 2946, stddev 54.28;
            // 112 of 312 ns: 35.90%.
            row("cuLaunchKernel", [3, 0, 112, 37, 7, 5, 100, 54, 3590]),
            // cuInit and cuMemAlloc_v2 tie on total time: by name.
            row("cuInit", [1, 0, 100, 100, 100, 100, 100, 0, 3205]),
            // Even count: the median is the mean of the two middle ones (10 20 | 30 40);
            // sample variance 2000 / 12 = 166.7, stddev 12.9.
            row_codes(
                "cuMemAlloc_v2",
                [4, 1, 100, 25, 25, 10, 40, 12, 3205],
                &[(2, 1)]
            ),
        ]
    );
}

#[test]
fn summary_merges_files_by_name_not_id() {
    let a = read(&sample().bytes);
    // A second process whose table numbers the functions differently.
    let b = read(
        &Builder::new(&header(99))
            .names(&[(7, "cuInit"), (0, "cuCtxSynchronize")])
            .records(5, 0, &[rec(7, 1, 0, 300), rec(0, 0, 10, 1)])
            .records(6, 0, &[rec(3, 0, 20, 2)])
            .bytes,
    );
    let s = api_summary(&[a, b]);
    assert_eq!(
        s,
        vec![
            // 100, 300: median 200, sample stddev √20000 = 141.4; 400 of 615 ns.
            row_codes(
                "cuInit",
                [2, 1, 400, 200, 200, 100, 300, 141, 6504],
                &[(1, 1)]
            ),
            row("cuLaunchKernel", [3, 0, 112, 37, 7, 5, 100, 54, 1821]),
            row_codes(
                "cuMemAlloc_v2",
                [4, 1, 100, 25, 25, 10, 40, 12, 1626],
                &[(2, 1)]
            ),
            row("function#3", [1, 0, 2, 2, 2, 2, 2, 0, 33]),
            row("cuCtxSynchronize", [1, 0, 1, 1, 1, 1, 1, 0, 16]),
        ]
    );
}

#[test]
fn csv_is_exact() {
    let t = read(&sample().bytes);
    assert_eq!(
        render_report(&[t], Format::Csv),
        "function,calls,errors,total_ns,mean_ns,median_ns,min_ns,max_ns,stddev_ns,share_percent\n\
         cuLaunchKernel,3,0,112,37,7,5,100,54,35.90\n\
         cuInit,1,0,100,100,100,100,100,0,32.05\n\
         cuMemAlloc_v2,4,1,100,25,25,10,40,12,32.05\n"
    );
}

#[test]
fn json_is_exact() {
    let t = read(&sample().bytes);
    let expected = concat!(
        "{\"processes\":[\n",
        "  {\"file\":\"t.bin\",\"format_version\":\"3.0\",\"pid\":1234,\"ppid\":1,",
        "\"forked_from\":null,\"command_line\":[\"./app\",\"--size\",\"2 MB\"],",
        "\"executable\":\"/opt/app\",\"hostname\":\"gpu1\",\"boot_id\":\"b00t\",",
        "\"writer_version\":\"0.1.0\",\"start\":{\"monotonic_ns\":1000,",
        "\"realtime_ns\":1714566896789000000},\"clock\":\"CLOCK_MONOTONIC\",\"clock_shift_ns\":0,",
        "\"start_time\":\"2024-05-01T12:34:56.789Z\",\"duration_ns\":2500000,",
        "\"duration_complete\":true,\"end_reason\":\"exit\",\"threads\":2,",
        "\"api_records\":8,\"kernel_records\":0,\"memcpy_records\":0,\"memset_records\":0,",
        "\"dropped\":3,\"salvaged_records\":0,\"salvaged_gpu_records\":0,\"untimed_gpu_work\":{\"kernel\":0,\"memcpy\":0,\"memset\":0,\"kernel_names\":[]},\"write_error\":null,\"unwrapped_lookups\":2,\"unknown_chunks\":0,",
        "\"notices\":[{\"time_ns\":1500,\"message\":\"hello from the tracer\"}],",
        "\"damaged_records\":{\"count\":0,\"listed\":[]},\"damage\":null}\n",
        "],\n",
        "\"api\":[\n",
        "  {\"function\":\"cuLaunchKernel\",\"calls\":3,\"errors\":0,\"total_ns\":112,",
        "\"mean_ns\":37,\"median_ns\":7,\"min_ns\":5,\"max_ns\":100,\"stddev_ns\":54,",
        "\"share_percent\":35.90,\"error_codes\":{}},\n",
        "  {\"function\":\"cuInit\",\"calls\":1,\"errors\":0,\"total_ns\":100,",
        "\"mean_ns\":100,\"median_ns\":100,\"min_ns\":100,\"max_ns\":100,\"stddev_ns\":0,",
        "\"share_percent\":32.05,\"error_codes\":{}},\n",
        "  {\"function\":\"cuMemAlloc_v2\",\"calls\":4,\"errors\":1,\"total_ns\":100,",
        "\"mean_ns\":25,\"median_ns\":25,\"min_ns\":10,\"max_ns\":40,\"stddev_ns\":12,",
        "\"share_percent\":32.05,\"error_codes\":{\"2\":1}}\n",
        "],\n",
        "\"resources\":{\n\"devices\":[],\n\"contexts\":[],\n\"streams\":[],\n\"modules\":[],\n",
        "\"functions\":[]},\n",
        "\"kernels\":[],\n",
        "\"memcpy\":[],\n",
        "\"memset\":[],\n",
        "\"utilisation\":[],\n",
        "\"shared_devices\":[],\n",
        "\"latency\":[],\n",
        "\"kern_exec\":[],\n",
        "\"occupancy\":[],\n",
        "\"nvtx\":{\"ranges\":[],\"open\":0,\"marks\":0},\n\"external\":[]}\n"
    );
    assert_eq!(render_report(&[t], Format::Json), expected);
}

#[test]
fn empty_json_and_csv() {
    let t = read(&Builder::new(&header(5)).bytes);
    assert_eq!(
        render_report(std::slice::from_ref(&t), Format::Csv),
        "function,calls,errors,total_ns,mean_ns,median_ns,min_ns,max_ns,stddev_ns,share_percent\n"
    );
    let json = render_report(&[t], Format::Json);
    assert!(
        json.ends_with(
            "\"api\":[],\n\"resources\":{\n\"devices\":[],\n\"contexts\":[],\n\"streams\":[],\n\
             \"modules\":[],\n\"functions\":[]},\n\"kernels\":[],\n\"memcpy\":[],\n\"memset\":[],\n\
             \"utilisation\":[],\n\"shared_devices\":[],\n\"latency\":[],\n\"kern_exec\":[],\n\"occupancy\":[],\n\"nvtx\":{\"ranges\":[],\"open\":0,\"marks\":0},\n\"external\":[]}\n"
        ),
        "{json}"
    );
    assert!(json.contains("\"end_reason\":null"), "{json}");
    assert!(json.contains("\"duration_ns\":null"), "{json}");
}

#[test]
fn table_shows_process_and_aligned_summary() {
    let t = read(&sample().bytes);
    let out = render_report(&[t], Format::Table);
    let expected_summary = "\
API summary: 3 functions, 8 calls, 1 process
function        calls  errors   total    mean  median     min     max  stddev   share
cuLaunchKernel      3       0  112 ns   37 ns    7 ns    5 ns  100 ns   54 ns  35.90%
cuInit              1       0  100 ns  100 ns  100 ns  100 ns  100 ns    0 ns  32.05%
cuMemAlloc_v2       4       1  100 ns   25 ns   25 ns   10 ns   40 ns   12 ns  32.05%
";
    assert!(out.contains(expected_summary), "{out}");
    assert!(
        out.ends_with(
            "\nGPU work of process 1234: none\n  GPU activity not recorded (not asked for, or \
             CUPTI never started: no successful cuInit, no GPU, or a forked child); `rtrace \
             record` records it by default, LD_PRELOAD needs RTRACE_GPU_ACTIVITY=1\n"
        ),
        "{out}"
    );
    for line in [
        "Process 1234 (t.bin)\n",
        "  command line       ./app --size '2 MB'\n",
        "  start time         2024-05-01T12:34:56.789Z\n",
        "  duration           2.5 ms\n",
        "  tracing ended      exit\n",
        "  threads            2\n",
        "  API records        8\n",
        "  dropped records    3\n",
        "  unwrapped lookups  2\n",
        "    at +500 ns: hello from the tracer\n",
        "  warning: 3 API records were lost",
    ] {
        assert!(out.contains(line), "missing {line:?} in\n{out}");
    }
}

#[test]
fn table_fits_120_columns_and_truncates_names() {
    let long = "cuSomeExtremelyLongFunctionName".repeat(6);
    let t = read(
        &Builder::new(&header(1))
            .names(&[(0, &long), (1, "cuInit")])
            .records(1, 0, &[rec(0, 0, 0, 1_234_567), rec(1, 0, 0, 12_345)])
            .bytes,
    );
    let out = render_report(&[t], Format::Table);
    let table: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("function"))
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(table.len(), 3, "{out}");
    for line in &table {
        assert_eq!(line.chars().count(), 120, "{line:?}");
    }
    assert!(table[1].starts_with("cuSomeExtremely"));
    assert!(table[1].contains("… "), "{}", table[1]);
    assert!(table[1].ends_with("1.2 ms    0 ns  99.01%"), "{}", table[1]);
    assert!(
        table[2].ends_with("12.3 µs    0 ns   0.99%"),
        "{}",
        table[2]
    );
    assert!(out.contains(
        "tracing ended      no end record: the process was killed, crashed or replaced itself (exec), or is still running"
    ));
    assert!(out.contains("duration           at least"));
}

#[test]
fn unknown_and_malformed_chunks_are_skipped() {
    let bytes = sample()
        .chunk(ChunkKind::Unknown(77), 0, 0, b"future stuff")
        .chunk(ChunkKind::ApiRecords, 11, 0, &[1, 2, 3])
        .records(11, 0, &[rec(0, 0, 10_000, 1)])
        .bytes;
    let t = read(&bytes);
    assert_eq!(t.unknown_chunks, 1);
    assert_eq!(t.api_records(), 9);
    assert_eq!(t.bad_chunks.len(), 1);
    assert!(
        t.bad_chunks[0].ends_with("API record chunk of 3 bytes is not a multiple of 32"),
        "{:?}",
        t.bad_chunks
    );
    assert_eq!(t.damage, None);
}

/// Byte offset of the last chunk of `bytes` that starts with CHNK.
fn last_chunk_offset(bytes: &[u8]) -> usize {
    bytes.windows(4).rposition(|w| w == b"CHNK").unwrap()
}

#[test]
fn truncated_file_reports_what_came_before() {
    // Header, names, then two record chunks; cut inside the second.
    let full = Builder::new(&header(7))
        .names(&[(0, "cuInit")])
        .records(1, 0, &[rec(0, 0, 0, 5), rec(0, 0, 10, 5)])
        .records(1, 0, &[rec(0, 0, 20, 5), rec(0, 0, 30, 5)])
        .bytes;
    let at = last_chunk_offset(&full);
    let t = read(&full[..at + CHUNK_HEADER_LEN + 40]);
    assert_eq!(t.api_records(), 2);
    assert_eq!(
        t.damage.as_deref(),
        Some(&*format!(
            "truncated: the file ends inside the chunk at byte {at}; \
             reported the 2 chunks (2 records) before it"
        ))
    );
    assert_eq!(api_summary(std::slice::from_ref(&t))[0].calls, 2);
    let out = render_report(&[t], Format::Table);
    assert!(out.contains("  damaged file       truncated:"), "{out}");

    // Cut inside a chunk header: one chunk, one record... singular words.
    let one = Builder::new(&header(7))
        .records(1, 0, &[rec(0, 0, 0, 5)])
        .records(1, 0, &[rec(0, 0, 0, 5)])
        .bytes;
    let at = last_chunk_offset(&one);
    let t = read(&one[..at + 3]);
    assert_eq!(
        t.damage.as_deref(),
        Some(&*format!(
            "truncated: the file ends inside the chunk header at byte {at}; \
             reported the 1 chunk (1 record) before it"
        ))
    );
}

#[test]
fn corrupt_checksum_stops_reading_there() {
    let mut bytes = sample().bytes;
    let at = last_chunk_offset(&bytes);
    let n = bytes.len();
    bytes[n - 1] ^= 0x55; // inside the ProcessEnd payload
    let t = read(&bytes);
    assert_eq!(t.api_records(), 8);
    assert!(t.end.is_none());
    assert_eq!(
        t.damage.as_deref(),
        Some(&*format!(
            "corrupt at byte {at}: chunk checksum mismatch; \
             reported the 7 chunks (8 records) before it"
        ))
    );
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rtrace-collector-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn unreadable_inputs_are_errors_with_clear_messages() {
    let dir = temp_dir("errors");
    let not = dir.join("notes.bin");
    std::fs::write(&not, b"hello, I am not a trace").unwrap();
    let e = load_trace(&not).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{}: not an rtrace trace (bad magic bytes)", not.display())
    );

    let newer = dir.join("newer.bin");
    let mut bytes = sample().bytes;
    bytes[8..10].copy_from_slice(&(FORMAT_MAJOR + 1).to_le_bytes());
    std::fs::write(&newer, &bytes).unwrap();
    let e = load_trace(&newer).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: written in trace format {}.{FORMAT_MINOR}, newer than this rtrace reads \
             ({}.x): use a newer rtrace",
            newer.display(),
            FORMAT_MAJOR + 1,
            FORMAT_MAJOR
        )
    );

    let missing = dir.join("missing.bin");
    let e = load_inputs(std::slice::from_ref(&missing)).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{}: No such file or directory", missing.display())
    );

    let empty = dir.join("empty.bin");
    std::fs::write(&empty, b"").unwrap();
    assert!(load_trace(&empty).unwrap_err().is_not_a_trace());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn directories_give_their_traces_in_name_order() {
    let dir = temp_dir("dir");
    std::fs::write(dir.join("b.bin"), Builder::new(&header(2)).bytes).unwrap();
    std::fs::write(dir.join("a.bin"), Builder::new(&header(1)).bytes).unwrap();
    std::fs::write(dir.join("c.bin"), b"not a trace").unwrap();
    std::fs::write(dir.join("d.txt"), Builder::new(&header(4)).bytes).unwrap();
    let loaded = load_inputs(&[dir.clone(), dir.join("a.bin")]).unwrap();
    let pids: Vec<u32> = loaded.traces.iter().map(|t| t.header.pid).collect();
    assert_eq!(pids, vec![1, 2]);
    assert_eq!(loaded.skipped.len(), 1);
    assert!(loaded.skipped[0].ends_with("c.bin: not an rtrace trace (bad magic bytes); skipped"));

    let empty = dir.join("empty");
    std::fs::create_dir(&empty).unwrap();
    let e = load_inputs(std::slice::from_ref(&empty)).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: no rtrace traces (*.bin) in this directory",
            empty.display()
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Traces from two hosts: the second host's times are put on the first-started process's
/// clock by the two boots' realtime anchors, and the report says so.
#[test]
fn traces_from_two_hosts_share_one_clock() {
    let dir = temp_dir("hosts");
    // Host gpu1: monotonic 1_000 at realtime R. Host gpu2 (another boot) starts 2 µs of
    // realtime later, at its monotonic 50_000.
    let r = header(1).start.realtime_ns;
    let other = ProcessHeader {
        hostname: "gpu2".into(),
        boot_id: "other".into(),
        start: ClockAnchor {
            monotonic_ns: 50_000,
            realtime_ns: r + 2_000,
        },
        ..header(2)
    };
    std::fs::write(
        dir.join("a.bin"),
        Builder::new(&header(1))
            .names(&[(0, "cuInit")])
            .records(1, 0, &[rec(0, 0, 1_500, 100)])
            .bytes,
    )
    .unwrap();
    std::fs::write(
        dir.join("b.bin"),
        Builder::new(&other)
            .names(&[(0, "cuInit")])
            .records(2, 0, &[rec(0, 0, 50_500, 100)])
            .bytes,
    )
    .unwrap();
    let loaded = load_inputs(std::slice::from_ref(&dir)).unwrap();
    let (a, b) = (&loaded.traces[0], &loaded.traces[1]);
    assert_eq!(a.clock_shift, None);
    // gpu2's monotonic t is gpu1's t - 47_000 (50_000 there is 3_000 here).
    assert_eq!(b.clock_shift.as_ref().map(|s| s.ns), Some(-47_000));
    assert_eq!(b.header.start.monotonic_ns, 3_000);
    assert_eq!(b.threads[&2].records[0].start_ns, 3_500);
    assert_eq!(a.threads[&1].records[0].start_ns, 1_500);
    let table = render_report(&loaded.traces, Format::Table);
    assert!(
        table.contains(
            "  clock              shifted -0.000047000 s onto the clock of host gpu1 (boot id \
             b00t), from the hosts' realtime clocks\n"
        ),
        "{table}"
    );
    assert!(render_report(&loaded.traces, Format::Json).contains("\"clock_shift_ns\":-47000,"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// API records are looked up by correlation id through runs of consecutive ids, or, when an id
/// is repeated, through a map of the ids asked for (the last in thread and file order wins).
#[test]
fn api_records_are_found_by_correlation_id() {
    let r = |function, start_ns, correlation| ApiRecord {
        function,
        result: 0,
        start_ns,
        end_ns: start_ns + 1,
        correlation,
    };
    // Thread 1: ids 10, 11, 12, 20; thread 2: ids 13, 14.
    let t = read(
        &Builder::new(&header(1))
            .records(
                1,
                0,
                &[r(0, 100, 10), r(1, 110, 11), r(2, 120, 12), r(3, 130, 20)],
            )
            .records(2, 0, &[r(4, 140, 13), r(5, 150, 14)])
            .bytes,
    );
    let api = t.api_records_for([]);
    assert!(matches!(api, crate::model::ApiLookup::Runs { .. }));
    let got: Vec<Option<(u64, u32)>> = [9, 10, 12, 13, 14, 15, 19, 20, 21]
        .iter()
        .map(|&c| api.get(c).map(|a| (a.start_ns, a.function)))
        .collect();
    assert_eq!(
        got,
        vec![
            None,
            Some((100, 0)),
            Some((120, 2)),
            Some((140, 4)),
            Some((150, 5)),
            None,
            None,
            Some((130, 3)),
            None
        ]
    );
    // Id 11 twice: a map of the ids asked for; the later record (thread 2) wins.
    let t = read(
        &Builder::new(&header(1))
            .records(1, 0, &[r(0, 100, 10), r(1, 110, 11)])
            .records(2, 0, &[r(4, 140, 11)])
            .bytes,
    );
    let api = t.api_records_for([11, 12]);
    assert!(matches!(api, crate::model::ApiLookup::Map(_)));
    assert_eq!(
        api.get(11).map(|a| (a.start_ns, a.function)),
        Some((140, 4))
    );
    assert_eq!(api.get(10), None);
    assert_eq!(api.get(12), None);
}
