//! `rtrace export` end to end: the command line, and the Perfetto output read
//! back with the trace schema Perfetto ships (the `perfetto` PyPI package's
//! `perfetto_trace_pb2`, see tests/perfetto_decode.py), compared with what the
//! trace holds: tracks, slices (names, timestamps, durations, arguments),
//! flows and counters.
//!
//! The schema tests run when `python3 -c "import
//! perfetto.protos.perfetto.trace.perfetto_trace_pb2"` works, with
//! `$RTRACE_PYTHON`, else the repository's `.venv/bin/python3`
//! (tools/setup-cuda.sh installs the package there), else `python3`; without
//! it they say so and pass.

mod common {
    pub mod export_fixture;
}

use common::export_fixture::*;
use rtrace_collector::demangle::demangle;
use rtrace_collector::export::binary_bytes;
use rtrace_collector::Trace;
use rtrace_format::{MemoryKind, MemoryOperation, FLAG_CORRELATED, ID_NONE};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

fn rtrace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rtrace"))
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rtrace-export-it-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A Python with Perfetto's trace schema, if there is one.
fn python_with_perfetto() -> Option<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("RTRACE_PYTHON") {
        candidates.push(p.into());
    }
    candidates.push(repo.join(".venv/bin/python3"));
    candidates.push("python3".into());
    candidates.into_iter().find(|python| {
        Command::new(python)
            .args([
                "-c",
                "import perfetto.protos.perfetto.trace.perfetto_trace_pb2",
            ])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// The lines tests/perfetto_decode.py prints for `file`.
fn decode(python: &Path, file: &Path) -> Vec<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/perfetto_decode.py");
    let out = Command::new(python).arg(script).arg(file).output().unwrap();
    assert!(
        out.status.success(),
        "perfetto_decode.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

fn gpu_track(device: u32, stream: u32) -> String {
    if stream == ID_NONE {
        format!("GPU {device} stream none")
    } else {
        format!("GPU {device} stream {stream}")
    }
}

/// What the decoded Perfetto trace must show for `t`, worked out from its
/// records (not from the exporter's own layout code), except the lane counts.
fn expected(t: &Trace) -> Vec<String> {
    let pid = t.header.pid;
    let mut lines = Vec::new();
    let quoted: Vec<String> = t
        .header
        .command_line
        .iter()
        .map(|a| {
            if a.chars()
                .all(|c| c.is_alphanumeric() || "_-./=:,+@%^".contains(c))
            {
                a.clone()
            } else {
                format!("'{a}'")
            }
        })
        .collect();
    lines.push(format!(
        "process {pid} {} | {}",
        quoted.join(" "),
        t.header.command_line.join(" ")
    ));
    let mut api: HashMap<u64, (u64, String, u64)> = HashMap::new();
    for (tid, th) in &t.threads {
        lines.push(format!(
            "thread {pid} {tid} {}",
            th.name.clone().unwrap_or_default()
        ));
        for r in &th.records {
            let function = t.function_name(r.function).into_owned();
            lines.push(format!(
                "slice thread {tid} | {function} | {} | {} | result={},correlation={}",
                r.start_ns,
                r.end_ns - r.start_ns,
                r.result,
                r.correlation
            ));
            api.entry(r.correlation)
                .or_insert((*tid, function, r.start_ns));
        }
    }
    let device_name = |d: u32| match t.devices.get(&d) {
        Some(info) => format!("GPU {d}: {}", info.name),
        None => format!("GPU {d}"),
    };
    let mut tracks: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    // Device → context → stream.
    let mut gpu = |device: u32,
                   (context, stream): (u32, u32),
                   name: String,
                   span: (u64, u64),
                   args: String,
                   corr: Option<u64>| {
        let track = gpu_track(device, stream);
        let entry = tracks.entry(device).or_default();
        let context_track = format!("GPU {device} context {context}");
        for line in [
            format!("track {context_track} | parent {}", device_name(device)),
            format!("track {track} | parent {context_track}"),
        ] {
            if !entry.contains(&line) {
                entry.push(line);
            }
        }
        let args = match corr {
            Some(c) => format!("{args},correlation={c}"),
            None => args,
        };
        let dur = span.1.saturating_sub(span.0);
        let slice = format!("slice {track} | {name} | {} | {dur} | {args}", span.0);
        let flow = corr
            .and_then(|c| api.get(&c))
            .map(|(tid, function, start)| {
                let kind = if *start <= span.0 { "ends" } else { "passes" };
                format!(
                    "flow thread {tid}|{function}|{start} -> {track}|{name}|{} {kind}",
                    span.0
                )
            });
        (slice, flow)
    };
    let mut gpu_lines = Vec::new();
    for k in &t.kernels {
        let args = format!(
            "grid=({},{},{}),block=({},{},{}),registers_per_thread={},static_shared_memory={},dynamic_shared_memory={}",
            k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1], k.block[2],
            k.registers_per_thread, k.static_shared_memory, k.dynamic_shared_memory
        );
        let corr = (k.flags & FLAG_CORRELATED != 0).then_some(k.correlation);
        let name = demangle(&t.kernel_name(k.name)).into_owned();
        gpu_lines.push(gpu(
            k.device,
            (k.context, k.stream),
            name,
            (k.start_ns, k.end_ns),
            args,
            corr,
        ));
    }
    for m in &t.memcpys {
        let args = format!(
            "bytes={},src_kind={},dst_kind={}",
            m.bytes,
            m.src_kind.name(),
            m.dst_kind.name()
        );
        let corr = (u32::from(m.flags) & FLAG_CORRELATED != 0).then_some(m.correlation);
        let name = format!("memcpy {} {}", m.kind.name(), binary_bytes(m.bytes));
        gpu_lines.push(gpu(
            m.device,
            (m.context, m.stream),
            name,
            (m.start_ns, m.end_ns),
            args,
            corr,
        ));
    }
    for m in &t.memsets {
        let args = format!("bytes={},value={}", m.bytes, m.value);
        let corr = (m.correlation != 0).then_some(m.correlation);
        let name = format!("memset {}", binary_bytes(m.bytes));
        gpu_lines.push(gpu(
            m.device,
            (m.context, m.stream),
            name,
            (m.start_ns, m.end_ns),
            args,
            corr,
        ));
    }
    for (slice, flow) in gpu_lines {
        lines.push(slice);
        lines.extend(flow);
    }
    // Memory in use per device (device memory) and its host memory.
    let mut changes: BTreeMap<(u32, bool), Vec<(u64, i64)>> = BTreeMap::new();
    for m in &t.memory {
        let delta = match m.operation {
            MemoryOperation::Alloc => m.bytes as i64,
            MemoryOperation::Free => -(m.bytes as i64),
            MemoryOperation::Unknown => continue,
        };
        let host = matches!(m.kind, MemoryKind::Pinned | MemoryKind::Pageable);
        changes
            .entry((m.device, host))
            .or_default()
            .push((m.timestamp_ns, delta));
    }
    for ((device, host), mut deltas) in changes {
        let name = if host {
            format!("GPU {device} host memory in use")
        } else {
            format!("GPU {device} memory in use")
        };
        tracks.entry(device).or_default().push(format!(
            "counter_track {name} | parent {} | unit UNIT_SIZE_BYTES",
            device_name(device)
        ));
        deltas.sort_by_key(|d| d.0);
        let mut value = 0;
        let mut points: Vec<(u64, i64)> = Vec::new();
        for (ts, d) in deltas {
            value += d;
            match points.last_mut() {
                Some(p) if p.0 == ts => p.1 = value,
                _ => points.push((ts, value)),
            }
        }
        lines.extend(
            points
                .iter()
                .map(|(ts, v)| format!("counter {name} {ts} {v}")),
        );
    }
    for (device, track_lines) in tracks {
        lines.push(format!(
            "track {} | parent process {pid}",
            device_name(device)
        ));
        lines.extend(track_lines);
    }
    lines
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn without_lanes(lines: &[String]) -> Vec<String> {
    sorted(
        lines
            .iter()
            .filter(|l| !l.starts_with("lanes "))
            .cloned()
            .collect(),
    )
}

#[test]
fn perfetto_output_read_with_perfettos_schema_matches_the_trace() {
    let Some(python) = python_with_perfetto() else {
        eprintln!("skipped: no python3 with perfetto_trace_pb2 (pip install perfetto; see tools/setup-cuda.sh)");
        return;
    };
    let dir = temp_dir("schema");
    let cases: [(&str, Vec<u8>); 2] = [
        ("sample.bin", sample().bytes),
        ("generated.bin", generated(555, 3, 300, 11).bytes),
    ];
    let mut all = Vec::new();
    for (name, bytes) in &cases {
        let input = dir.join(name);
        std::fs::write(&input, bytes).unwrap();
        let out = dir.join(format!("{name}.pftrace"));
        let status = rtrace()
            .args(["export", "--format", "perfetto", "--output"])
            .arg(&out)
            .arg(&input)
            .status()
            .unwrap();
        assert!(status.success());
        let t = rtrace_collector::load_trace(&input).unwrap();
        let got = decode(&python, &out);
        let want = expected(&t);
        assert_eq!(without_lanes(&got), sorted(want.clone()), "{name}");
        // Counts per track, as the lines above hold them.
        let count = |prefix: &str| got.iter().filter(|l| l.starts_with(prefix)).count();
        for (tid, th) in &t.threads {
            assert_eq!(count(&format!("slice thread {tid} |")), th.records.len());
        }
        assert_eq!(
            count("slice GPU "),
            t.kernels.len() + t.memcpys.len() + t.memsets.len()
        );
        if *name == "sample.bin" {
            // The two overlapping kernels of stream 7 take two lanes.
            let lanes: Vec<&String> = got.iter().filter(|l| l.starts_with("lanes ")).collect();
            assert_eq!(
                lanes,
                [
                    "lanes GPU 0: NVIDIA H100 80GB HBM3 1",
                    "lanes GPU 0 context 1 1",
                    "lanes GPU 0 stream 7 2",
                    "lanes GPU 0 stream 8 1",
                    "lanes GPU 1 1",
                    "lanes GPU 1 context 2 1",
                    "lanes GPU 1 stream 3 1"
                ]
            );
            assert_eq!(count("flow "), 5);
            assert_eq!(count("counter "), 4);
            assert!(got.contains(&format!(
                "slice GPU 0 stream 7 | {VECADD} | 3800 | 1200 | grid=(120,1,1),block=(256,1,1),registers_per_thread=32,static_shared_memory=1024,dynamic_shared_memory=0,correlation=5"
            )));
            assert!(got.contains(
                &"flow thread 12|cuLaunchKernel|3000 -> GPU 1 stream 3|fill|2900 passes"
                    .to_string()
            ));
        } else {
            assert!(count("flow ") > 200);
            assert!(got
                .iter()
                .any(|l| l.starts_with("lanes GPU 0 stream") && !l.ends_with(" 1")));
        }
        all.push(input);
    }
    // Both traces in one export: one sequence each, the same facts.
    let out = dir.join("both.pftrace");
    let status = rtrace()
        .args(["export", "--format=perfetto", "-o"])
        .arg(&out)
        .args(&all)
        .status()
        .unwrap();
    assert!(status.success());
    let got = decode(&python, &out);
    let mut want = Vec::new();
    for input in &all {
        want.extend(expected(&rtrace_collector::load_trace(input).unwrap()));
    }
    assert_eq!(without_lanes(&got), sorted(want));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn chrome_output_is_json_with_every_event() {
    let dir = temp_dir("chrome");
    let input = dir.join("g.bin");
    std::fs::write(&input, generated(556, 2, 400, 3).bytes).unwrap();
    let out = dir.join("g.json");
    let run = rtrace()
        .args(["export", "--format", "chrome", "-o"])
        .arg(&out)
        .arg(&input)
        .output()
        .unwrap();
    assert!(run.status.success());
    let stderr = String::from_utf8(run.stderr).unwrap();
    assert!(
        stderr.starts_with(&format!("rtrace: wrote {} (", out.display())),
        "{stderr}"
    );
    // Standard output gets the same bytes.
    let stdout = rtrace()
        .args(["export", "--format", "chrome"])
        .arg(&input)
        .output()
        .unwrap();
    assert!(stdout.status.success());
    assert!(stdout.stderr.is_empty());
    let json = std::fs::read(&out).unwrap();
    assert_eq!(stdout.stdout, json);
    let Some(python) = ["python3"]
        .into_iter()
        .find(|p| Command::new(p).arg("-V").output().is_ok())
    else {
        return;
    };
    let check = r#"
import json, sys, collections
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
ph = collections.Counter(e["ph"] for e in ev)
flows = collections.defaultdict(list)
for e in ev:
    if e["ph"] in "sf":
        flows[e["id"]].append(e["ph"])
assert all(sorted(v) == ["f", "s"] for v in flows.values()), "flows pair up"
print(ph["X"], ph["s"], ph["f"], ph["C"], len(flows))
"#;
    let run = Command::new(python)
        .args(["-c", check])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let t = rtrace_collector::load_trace(&input).unwrap();
    let slices = t.api_records() + t.gpu_records();
    let linked = t
        .kernels
        .iter()
        .filter(|k| k.flags & FLAG_CORRELATED != 0)
        .count()
        + t.memcpys.len();
    let counts = String::from_utf8(run.stdout).unwrap();
    let n: Vec<u64> = counts
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!(n[0], slices);
    assert_eq!(
        (n[1], n[2], n[4]),
        (linked as u64, linked as u64, linked as u64)
    );
    assert!(n[3] > 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn command_line_errors() {
    let dir = temp_dir("cli");
    let input = dir.join("t.bin");
    std::fs::write(&input, sample().bytes).unwrap();
    // An unknown format: clap's usage error, exit 2.
    let run = rtrace()
        .args(["export", "--format", "json"])
        .arg(&input)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8(run.stderr).unwrap();
    assert!(
        stderr.contains("invalid value 'json' for '--format <FORMAT>'")
            && stderr.contains("[possible values: perfetto, chrome, parquet]"),
        "{stderr}"
    );
    // A missing input: exit 2, and no output file.
    let out = dir.join("out.pftrace");
    let run = rtrace()
        .args(["export", "--format", "perfetto", "-o"])
        .arg(&out)
        .arg(&input)
        .arg(dir.join("missing.bin"))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(run.stderr).unwrap(),
        format!(
            "rtrace: {}: No such file or directory\n",
            dir.join("missing.bin").display()
        )
    );
    assert!(!out.exists());
    // Perfetto to standard output when it is not a terminal (a pipe here).
    let run = rtrace()
        .args(["export", "--format", "perfetto"])
        .arg(&input)
        .output()
        .unwrap();
    assert!(run.status.success());
    assert_eq!(run.stdout[0], 0x0a, "a Trace's first packet");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--output` never replaces a file silently, never one of the inputs, and names what is
/// wrong with a directory: each a usage error (exit 2) before anything is read or written.
#[test]
fn output_is_checked_before_the_export() {
    let dir = temp_dir("output");
    let input = dir.join("t.bin");
    std::fs::write(&input, sample().bytes).unwrap();
    let export = |out: &Path, extra: &[&str]| {
        let run = rtrace()
            .args(["export", "--format", "chrome"])
            .args(extra)
            .arg("-o")
            .arg(out)
            .arg(&input)
            .output()
            .unwrap();
        (run.status.code(), String::from_utf8(run.stderr).unwrap())
    };
    let taken = dir.join("taken.json");
    std::fs::write(&taken, b"earlier").unwrap();
    assert_eq!(
        export(&taken, &[]),
        (
            Some(2),
            format!(
                "rtrace: --output {}: exists; give another name, or --force-overwrite to replace it\n",
                taken.display()
            )
        )
    );
    assert_eq!(std::fs::read(&taken).unwrap(), b"earlier");
    let (code, _) = export(&taken, &["--force-overwrite"]);
    assert_eq!(code, Some(0));
    assert!(std::fs::read(&taken).unwrap().starts_with(b"{"));
    // One of the inputs, even with --force-overwrite (or through a link): refused.
    let link = dir.join("link.json");
    std::os::unix::fs::symlink(&input, &link).unwrap();
    for out in [&input, &link] {
        assert_eq!(
            export(out, &["--force-overwrite"]),
            (
                Some(2),
                format!(
                    "rtrace: --output {}: is one of the traces being exported\n",
                    out.display()
                )
            )
        );
    }
    assert_eq!(std::fs::read(&input).unwrap(), sample().bytes);
    for out in [dir.clone(), dir.join("sub/")] {
        if out.ends_with("sub") {
            std::fs::create_dir_all(&out).unwrap();
        }
        let (code, err) = export(&out, &[]);
        assert_eq!(code, Some(2), "{err}");
        assert!(
            err.ends_with(": is a directory; name a file, e.g. trace.pftrace\n"),
            "{err}"
        );
    }
    let (code, err) = export(&dir.join("no/such/t.json"), &[]);
    assert_eq!(code, Some(2));
    assert!(
        err.ends_with(&format!(
            "the directory {} does not exist\n",
            dir.join("no/such").display()
        )),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A profiled launch's metric values are arguments `metrics.<name>` of its kernel's slice, as
/// Perfetto's schema reads them (double values named by string); the unprofiled launches'
/// slices have none. (The Chrome form is the golden `profiles.chrome.json`.)
#[test]
fn perfetto_kernel_slices_carry_profiled_metrics() {
    let Some(python) = python_with_perfetto() else {
        eprintln!("skipped: no python3 with perfetto_trace_pb2 (pip install perfetto; see tools/setup-cuda.sh)");
        return;
    };
    let dir = temp_dir("profiles");
    let input = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/profiles.bin");
    let out = dir.join("profiles.pftrace");
    let status = rtrace()
        .args(["export", "--format", "perfetto", "--output"])
        .arg(&out)
        .arg(&input)
        .status()
        .unwrap();
    assert!(status.success());
    let lines = decode(&python, &out);
    let kernels: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("slice GPU"))
        .collect();
    assert_eq!(kernels.len(), 5, "{lines:#?}");
    let with = |needle: &str| kernels.iter().filter(|l| l.contains(needle)).count();
    assert_eq!(
        with("metrics.sm__throughput.avg.pct_of_peak_sustained_elapsed=30.0"),
        1,
        "{kernels:#?}"
    );
    assert_eq!(
        with("metrics.gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed=91.5"),
        1
    );
    assert_eq!(
        with("metrics.smsp__sass_inst_executed_op_shared_ld.sum=4096.0"),
        2
    );
    // The value CUPTI could not evaluate (NaN) is left out; launches 4 and 5 were not
    // profiled.
    assert_eq!(with("metrics.smsp__average_warps_issue_stalled_barrier"), 2);
    assert_eq!(with("metrics."), 3);
}
