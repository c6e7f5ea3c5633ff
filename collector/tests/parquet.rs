//! `rtrace export --format parquet` end to end, on a multi-rank job built here (five ranks of
//! a training loop: per step an NVTX `step` range around a GEMM, a copy, a memset and an NCCL
//! all-reduce; rank 2 slowed; rank 3 on another host whose clock is 5 s ahead; rank 4's file
//! truncated; a `.bin` file that is not a trace): the dataset's files and rows (read back with
//! the `parquet` crate, peer copies' ends included), the report's filters, the command line's
//! refusals and exit codes, and docs/parquet.md's DuckDB queries run on the dataset
//! (tests/parquet_check.py) with their results checked against `rtrace report --format json`
//! exactly.
//!
//! The DuckDB part runs with a Python that imports `duckdb` (`$RTRACE_PYTHON`, else the
//! repository's `.venv/bin/python3`, where tools/setup-cuda.sh installs it, else `python3`);
//! without one it says so and passes, unless `RTRACE_REQUIRE_DUCKDB` is set: .ci/run installs
//! duckdb and sets it, so CI never skips it.

mod common {
    pub mod fixtures;
}

use common::fixtures::*;
use parquet::file::reader::{FileReader, SerializedFileReader};
use rtrace_format::*;
use std::path::{Path, PathBuf};
use std::process::Command;

const STEPS: u64 = 5;
const PERIOD: u64 = 1_000_000;
/// How much longer rank 2's GEMM (and so its step) takes.
const SLOW: u64 = 250_000;
/// Rank 3's host: its monotonic clock reads this much more than the others' at one instant.
const AHEAD: u64 = 5_000_000_000;
const NCCL: &str = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";

fn rtrace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rtrace"))
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rtrace-parquet-it-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn pid(rank: u64) -> u32 {
    7000 + rank as u32
}

/// The NCCL kernel's duration on `rank`.
fn nccl_ns(rank: u64) -> u64 {
    100_000 + 10_000 * rank
}

/// The trace of `rank`: `STEPS` steps of a period each; times on its host's clock.
fn rank(rank: u64) -> Vec<u8> {
    let clock = if rank == 3 { AHEAD } else { 0 };
    let pid = pid(rank);
    let tid = u64::from(pid);
    let mut h = header(pid, 1, &["python3", "train.py"], 0);
    h.start.monotonic_ns += clock;
    if rank == 3 {
        h.hostname = "node08".into();
        h.boot_id = "9b2e6c44-0d1f-4e55-8a0b-6f3c2d1e0a99".into();
    }
    let t = |at: u64| T0 + clock + at;
    let (mut calls, mut kernels, mut copies, mut memsets, mut nvtx) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for s in 0..STEPS {
        let b = PERIOD + s * PERIOD;
        let c = 1 + 4 * s;
        let gemm_ns = 200_000 + if rank == 2 { SLOW } else { 0 };
        let gemm_end = b + 20_000 + gemm_ns;
        let nccl_start = gemm_end + 50_000;
        let step_end = nccl_start + nccl_ns(rank) + 20_000;
        for (f, span, id) in [
            (7, (10_000, 15_000), c),
            (6, (16_000, 18_000), c + 1),
            (12, (18_500, 19_500), c + 2),
            (7, (20_000, 25_000), c + 3),
        ] {
            let mut r = call(f, 0, (b + span.0, b + span.1), id);
            r.start_ns += clock;
            r.end_ns += clock;
            calls.push(r);
        }
        let kernel = |name, stream, (start, end), correlation| KernelRecord {
            correlation,
            start_ns: t(start),
            end_ns: t(end),
            name,
            device: 0,
            context: 1,
            stream,
            grid: [132, 1, 1],
            block: [256, 1, 1],
            registers_per_thread: 64,
            flags: FLAG_CORRELATED,
            ..Default::default()
        };
        kernels.push(kernel(0, 13, (b + 20_000, gemm_end), c));
        kernels.push(kernel(
            1,
            15,
            (nccl_start, nccl_start + nccl_ns(rank)),
            c + 3,
        ));
        // The copy overlaps the GEMM (another stream); the memset follows it.
        copies.push(MemcpyRecord {
            correlation: c + 1,
            start_ns: t(b + 30_000),
            end_ns: t(b + 80_000),
            bytes: 1 << 20,
            device: 0,
            context: 1,
            stream: 14,
            kind: CopyKind::HtoD,
            src_kind: MemoryKind::Pinned,
            dst_kind: MemoryKind::Device,
            flags: FLAG_CORRELATED as u8,
            ..Default::default()
        });
        memsets.push(MemsetRecord {
            correlation: c + 2,
            start_ns: t(gemm_end + 10_000),
            end_ns: t(gemm_end + 20_000),
            bytes: 4096,
            device: 0,
            context: 1,
            stream: 14,
            ..Default::default()
        });
        for (kind, at) in [(NvtxKind::Push, b), (NvtxKind::Pop, step_end)] {
            nvtx.extend(
                NvtxEvent {
                    kind,
                    message: if kind == NvtxKind::Push { 1 } else { 0 },
                    time_ns: t(at),
                    ..Default::default()
                }
                .to_bytes(),
            );
        }
    }
    let last = PERIOD * (STEPS + 1);
    let mut end = end(last, "exit", calls.len() as u64, 0, 1);
    end.end.monotonic_ns += clock;
    Builder::new(&h)
        .names(FUNCTIONS)
        .kernel_names(&[(0, "_Z4gemmPKfS0_Pfi"), (1, NCCL)])
        .chunk(
            ChunkKind::NvtxStrings,
            0,
            0,
            &encode_function_names([(1, "step")]),
        )
        .thread(tid, "python3")
        .device(&h100(0))
        .records(tid, 0, &calls)
        .chunk(ChunkKind::NvtxEvents, tid, 0, &nvtx)
        .kernels(&kernels)
        .memcpys(&copies)
        .memsets(&memsets)
        .end(&end)
        .bytes
}

/// A directory of the job's traces: ranks 0-3 whole, rank 4 cut inside its kernels' chunk,
/// and `junk.bin`, not a trace.
fn job(name: &str) -> (PathBuf, PathBuf) {
    let dir = temp_dir(name);
    let traces = dir.join("run");
    std::fs::create_dir_all(&traces).unwrap();
    for r in 0..5 {
        let mut bytes = rank(r);
        if r == 4 {
            let cut = bytes.len() * 3 / 4;
            bytes.truncate(cut);
        }
        std::fs::write(traces.join(format!("rank{r}.bin")), bytes).unwrap();
    }
    std::fs::write(traces.join("junk.bin"), b"not a trace at all").unwrap();
    (dir, traces)
}

fn export(traces: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    rtrace()
        .args(["export", "--format", "parquet", "-o"])
        .arg(out)
        .args(extra)
        .arg(traces)
        .output()
        .unwrap()
}

/// The rows of the table's file for `rank` (part 0).
fn rows(dataset: &Path, table: &str, host: &str, rank: u64) -> i64 {
    let path = dataset
        .join(table)
        .join(format!("host={host}"))
        .join(format!("pid={}", pid(rank)))
        .join("part-0.parquet");
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let reader = SerializedFileReader::new(file).unwrap();
    let meta = reader.metadata().file_metadata();
    let kv: Vec<(String, String)> = meta
        .key_value_metadata()
        .unwrap()
        .iter()
        .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
        .collect();
    assert!(kv.contains(&("rtrace.schema_version".into(), "1.0".into())));
    assert!(kv.contains(&("rtrace.table".into(), table.into())));
    meta.num_rows()
}

fn host(rank: u64) -> &'static str {
    if rank == 3 {
        "node08"
    } else {
        "node07"
    }
}

#[test]
fn exports_every_rank_and_reports_the_damaged_one() {
    let (dir, traces) = job("ranks");
    let out = dir.join("train.parquet");
    let run = export(&traces, &out, &[]);
    let stderr = String::from_utf8(run.stderr).unwrap();
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning: "))
        .collect();
    assert_eq!(warnings.len(), 2, "{stderr}");
    assert!(warnings[0].contains("junk.bin") && warnings[0].ends_with("; skipped"));
    let rank4 = traces.join("rank4.bin");
    let prefix = format!("warning: {}: truncated: ", rank4.display());
    assert!(
        warnings[1].starts_with(&prefix) && warnings[1].contains(" at byte "),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "rtrace: {}: shifted -5.000000000 s onto the clock of host node07",
            traces.join("rank3.bin").display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("rtrace: wrote {} (", out.display()))
            && stderr.contains("): 5 processes, "),
        "{stderr}"
    );
    assert!(out.join("_schema.json").is_file() && out.join("README.md").is_file());
    let schema = std::fs::read_to_string(out.join("_schema.json")).unwrap();
    assert!(schema.starts_with("{\"format\":\"rtrace-parquet\",\"schema_version\":\"1.0\""));
    for r in 0..4 {
        let h = host(r);
        assert_eq!(rows(&out, "api_calls", h, r), 4 * STEPS as i64);
        assert_eq!(rows(&out, "kernels", h, r), 2 * STEPS as i64);
        assert_eq!(rows(&out, "copies", h, r), STEPS as i64);
        assert_eq!(rows(&out, "memsets", h, r), STEPS as i64);
        assert_eq!(rows(&out, "nvtx_ranges", h, r), STEPS as i64);
        assert_eq!(rows(&out, "processes", h, r), 1);
        assert_eq!(rows(&out, "threads", h, r), 1);
        assert_eq!(rows(&out, "devices", h, r), 1);
        assert_eq!(rows(&out, "syncs", h, r), 0);
        assert_eq!(rows(&out, "pc_samples", h, r), 0);
        assert_eq!(rows(&out, "kernel_metrics", h, r), 0);
    }
    // Rank 4: what precedes the damage (its calls and NVTX events; its kernels' chunk cut).
    assert_eq!(rows(&out, "api_calls", "node07", 4), 4 * STEPS as i64);
    assert_eq!(rows(&out, "kernels", "node07", 4), 0);
    assert_eq!(rows(&out, "processes", "node07", 4), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn refuses_a_taken_directory_unless_forced_and_only_over_a_dataset() {
    let (dir, traces) = job("refuse");
    let out = dir.join("ds");
    let code = |run: std::process::Output| {
        (
            run.status.code(),
            String::from_utf8(run.stderr)
                .unwrap()
                .trim_end()
                .to_string(),
        )
    };
    // An empty directory is taken as it is.
    std::fs::create_dir_all(&out).unwrap();
    assert_eq!(export(&traces, &out, &[]).status.code(), Some(0));
    let (status, stderr) = code(export(&traces, &out, &[]));
    assert_eq!(status, Some(2));
    assert_eq!(
        stderr,
        format!(
            "rtrace: {}: exists and is not empty; give --force-overwrite to replace an earlier \
             dataset",
            out.display()
        )
    );
    assert_eq!(
        export(&traces, &out, &["--force-overwrite"]).status.code(),
        Some(0)
    );
    // Not a dataset: never replaced.
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("keep.txt"), b"mine").unwrap();
    let (status, stderr) = code(export(&traces, &other, &["--force-overwrite"]));
    assert_eq!(status, Some(2));
    assert_eq!(
        stderr,
        format!(
            "rtrace: {}: is not an rtrace Parquet dataset (no _schema.json); not replacing it",
            other.display()
        )
    );
    assert_eq!(std::fs::read(other.join("keep.txt")).unwrap(), b"mine");
    // No directory named, an unknown option, --force-overwrite with a timeline format.
    let (status, stderr) = code(
        rtrace()
            .args(["export", "--format", "parquet"])
            .arg(&traces)
            .output()
            .unwrap(),
    );
    assert_eq!(status, Some(2));
    assert_eq!(
        stderr,
        "rtrace: --format parquet writes a directory: name it with --output DIR"
    );
    let (status, stderr) = code(export(&traces, &dir.join("new"), &["--rows-per-group"]));
    assert_eq!(status, Some(2));
    assert!(
        stderr.starts_with("error: unexpected argument '--rows-per-group' found"),
        "{stderr}"
    );
    assert!(!dir.join("new").exists());
    // No temporary directory is left beside the dataset.
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Python that imports duckdb, if there is one.
fn python_with_duckdb() -> Option<PathBuf> {
    python_with("import duckdb")
}

/// The first Python (`$RTRACE_PYTHON`, the repository's `.venv/bin/python3`, `python3`) that
/// runs `code` (imports).
fn python_with(code: &str) -> Option<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("RTRACE_PYTHON") {
        candidates.push(p.into());
    }
    candidates.push(repo.join(".venv/bin/python3"));
    candidates.push("python3".into());
    candidates.into_iter().find(|python| {
        Command::new(python)
            .args(["-c", code])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

fn report_json(traces: &Path, extra: &[&str], to: &Path) {
    let run = rtrace()
        .args(["report", "--format", "json"])
        .args(extra)
        .arg(traces)
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    std::fs::write(to, run.stdout).unwrap();
}

/// Exports `traces` to `dir`/NAME.parquet and runs tests/parquet_check.py on it against the
/// report of `traces` (and, per pid of `nccl`, the report of its NCCL kernels); its output.
fn check_queries(python: &Path, dir: &Path, name: &str, traces: &Path, nccl: &[u32]) -> String {
    let out = dir.join(format!("{name}.parquet"));
    let run = export(traces, &out, &[]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report = dir.join(format!("{name}.json"));
    report_json(traces, &[], &report);
    let mut args = vec![
        out.display().to_string(),
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../docs/parquet.md")
            .display()
            .to_string(),
        report.display().to_string(),
    ];
    for p in nccl {
        let json = dir.join(format!("{name}-nccl-{p}.json"));
        let p = p.to_string();
        report_json(traces, &["--pid", &p, "--kernel", "(?i)nccl"], &json);
        args.push(format!("{p}={}", json.display()));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/parquet_check.py");
    let run = Command::new(python)
        .arg(script)
        .args(&args)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stdout = String::from_utf8(run.stdout).unwrap();
    let bad: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("check ") && !l.ends_with(": ok"))
        .collect();
    assert!(bad.is_empty(), "{name}: {bad:#?}\n{stdout}");
    stdout
}

fn require_python() -> Option<PathBuf> {
    let python = python_with_duckdb();
    if python.is_none() {
        assert!(
            std::env::var_os("RTRACE_REQUIRE_DUCKDB").is_none(),
            "RTRACE_REQUIRE_DUCKDB is set (as .ci/run sets it) and no Python imports duckdb"
        );
        eprintln!(
            "skipped: no Python with duckdb (tools/setup-cuda.sh test installs it into .venv)"
        );
    }
    python
}

/// The committed fixtures (one process each: GPU work of every kind on two devices, NVTX
/// ranges on two threads with external ids, profiled kernels): the same numbers as the report.
#[test]
fn duckdb_queries_of_the_docs_match_the_report_on_the_fixtures() {
    let Some(python) = require_python() else {
        return;
    };
    let dir = temp_dir("fixtures");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    for name in ["gpu", "nvtx", "profiles", "api_threads"] {
        let stdout = check_queries(
            &python,
            &dir,
            name,
            &fixtures.join(format!("{name}.bin")),
            &[],
        );
        assert!(
            stdout.contains("check gpu_idle_per_rank keys: ok"),
            "{stdout}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn duckdb_queries_of_the_docs_match_the_report() {
    let Some(python) = require_python() else {
        return;
    };
    let (dir, traces) = job("duckdb");
    let pids: Vec<u32> = (0..5).map(pid).collect();
    let stdout = check_queries(&python, &dir, "train", &traces, &pids);
    let checks = stdout.lines().filter(|l| l.starts_with("check ")).count();
    // 2 kernels' rows and their number, 4 ranks' devices x 7 columns plus the keys (rank 4
    // has no GPU records before its damage), 3 for the slowest step, 1 NVTX name and the
    // names, 5 ranks' NCCL plus the pids.
    assert_eq!(checks, 3 + 1 + 4 * 7 + 3 + 2 + 1 + 5, "{stdout}");
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("row ")).collect();
    // NCCL time per rank, exactly as built (rank 4 lost its kernels to the damage).
    for r in 0..4 {
        let line = format!(
            "row nccl_time_per_rank host={} pid={} kernels={STEPS} nccl_ns={}",
            host(r),
            pid(r),
            STEPS * nccl_ns(r)
        );
        assert!(rows.contains(&line.as_str()), "{line}\n{stdout}");
    }
    // Every step's slowest rank is rank 2, SLOW plus its slower NCCL behind rank 0.
    for s in 0..STEPS {
        let line = format!(
            "row slowest_rank_per_step domain=(default) name=step step={s} ranks=5 \
             slowest_host=node07 slowest_pid={} slowest_ns={} fastest_ns={} lag_ns={}",
            pid(2),
            290_000 + SLOW + nccl_ns(2),
            290_000 + nccl_ns(0),
            SLOW + nccl_ns(2) - nccl_ns(0)
        );
        assert!(rows.contains(&line.as_str()), "{line}\n{stdout}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// docs/parquet.md's Dask code, run as written on the job's dataset by tests/engines_check.py:
/// exactly the rows of the DuckDB queries (which the test above checks against the report). It
/// runs with a Python that imports duckdb and dask.dataframe; without one it says so and
/// passes, unless `RTRACE_REQUIRE_DASK` is set: .ci/run sets it, tools/setup-cuda.sh installs
/// Dask. (The Spark code is checked the same way by tools/bench/engines_check.sh, not in CI:
/// Spark needs Java.)
#[test]
fn dask_code_of_the_docs_gives_the_duckdb_rows() {
    let Some(python) = python_with("import duckdb, dask.dataframe") else {
        assert!(
            std::env::var_os("RTRACE_REQUIRE_DASK").is_none(),
            "RTRACE_REQUIRE_DASK is set (as .ci/run sets it) and no Python imports duckdb and dask"
        );
        eprintln!(
            "skipped: no Python with duckdb and dask (tools/setup-cuda.sh test installs them)"
        );
        return;
    };
    let (dir, traces) = job("dask");
    let out = dir.join("train.parquet");
    let run = export(&traces, &out, &[]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = Command::new(python)
        .arg(manifest.join("tests/engines_check.py"))
        .arg(&out)
        .arg(manifest.join("../docs/parquet.md"))
        .arg("dask")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // Each query's row count and rows: 2 kernels; 4 ranks' devices (rank 4 has no GPU records
    // before its damage); 5 steps; 4 ranks' NCCL kernels.
    assert!(stdout.ends_with("19 passed, 0 failed\n"), "{stdout}");
    assert!(
        stdout.contains("check dask nccl_time_per_rank row 3: ok\n"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `copies` rows of the fixture gpu.bin (one process, two devices), read back: kind,
/// device, and a peer-to-peer copy's source and destination (device, context).
#[test]
fn peer_copies_keep_both_ends() {
    use arrow_array::{Array, Int64Array, StringArray};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let dir = temp_dir("peer");
    let out = dir.join("ds");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gpu.bin");
    assert_eq!(export(&fixture, &out, &[]).status.code(), Some(0));
    let file = std::fs::File::open(out.join("copies/host=node07/pid=4200/part-0.parquet")).unwrap();
    let mut rows = Vec::new();
    for batch in ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap()
    {
        let batch = batch.unwrap();
        let text = |name: &str| {
            let c = batch.column_by_name(name).unwrap();
            let c = c.as_any().downcast_ref::<StringArray>().unwrap();
            (0..c.len())
                .map(|i| c.value(i).to_string())
                .collect::<Vec<_>>()
        };
        let int = |name: &str| {
            let c = batch.column_by_name(name).unwrap();
            let c = c.as_any().downcast_ref::<Int64Array>().unwrap();
            (0..c.len())
                .map(|i| (!c.is_null(i)).then(|| c.value(i)))
                .collect::<Vec<_>>()
        };
        let (kind, device) = (text("kind"), int("device"));
        let ends = ["src_device", "src_context", "dst_device", "dst_context"].map(int);
        for i in 0..batch.num_rows() {
            let e: Vec<Option<i64>> = ends.iter().map(|c| c[i]).collect();
            rows.push((kind[i].clone(), device[i].unwrap(), e));
        }
    }
    let none = vec![None; 4];
    assert_eq!(
        rows,
        vec![
            ("HtoD".to_string(), 0, none.clone()),
            (
                "PtoP".to_string(),
                0,
                vec![Some(0), Some(1), Some(1), Some(2)]
            ),
            ("DtoH".to_string(), 0, none.clone()),
            ("DtoD".to_string(), 1, none),
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--pid` keeps one rank's partitions; the other ranks' folders are not written.
#[test]
fn the_report_filters_apply() {
    let (dir, traces) = job("filter");
    let out = dir.join("ds");
    let run = export(&traces, &out, &["--pid", "7001"]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let pids: Vec<String> = std::fs::read_dir(out.join("kernels/host=node07"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(pids, vec!["pid=7001".to_string()]);
    assert!(!out.join("kernels/host=node08").exists());
    assert_eq!(rows(&out, "kernels", "node07", 1), 2 * STEPS as i64);
    let _ = std::fs::remove_dir_all(&dir);
}
