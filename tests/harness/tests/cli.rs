//! `rtrace record` and `rtrace report` on real traces.

use rtrace_tests::*;
use std::process::Command;

fn record(dir: &std::path::Path, program: &str, args: &[&str]) -> std::process::Output {
    let b = build();
    Command::new(rtrace_bin())
        .arg("record")
        .arg("--output")
        .arg(dir.join("rec-%p.bin"))
        .arg("--")
        .arg(b.bin.join(program))
        .args(args)
        .env("LD_LIBRARY_PATH", &b.lib)
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap()
}

#[test]
fn record_runs_the_program_and_returns_its_status() {
    let dir = fresh_dir("record");
    let out = record(&dir, "direct", &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("direct ok"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rtrace: trace written to"), "{err}");
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(files.len(), 1);

    let out = record(&dir, "exits", &["_exit"]);
    assert_eq!(out.status.code(), Some(4));
    let out = record(&dir, "exits", &["sigterm"]);
    assert_eq!(out.status.code(), Some(128 + 15));
    let out = record(&dir, "no-such-program", &[]);
    assert_eq!(out.status.code(), Some(127));
}

#[test]
fn report_of_a_truncated_trace_keeps_what_was_read() {
    let r = run(Spec::traced("threads"));
    let path = &r.trace_files()[0];
    let bytes = std::fs::read(path).unwrap();
    let cut = r.dir.join("cut.bin");
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    let out = Command::new(rtrace_bin())
        .arg("report")
        .arg(&cut)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("truncated"), "{err}");
    let t = rtrace_collector::load_trace(&cut).unwrap();
    assert!(t.damage.is_some());
    assert!(t.end.is_none());

    let junk = r.dir.join("junk.bin");
    std::fs::write(&junk, b"not a trace at all").unwrap();
    let out = Command::new(rtrace_bin())
        .arg("report")
        .arg(&junk)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an rtrace trace"));
}

/// `rtrace record`'s capture options reach the program's librtrace.so, and it records NVTX
/// (NVTX_INJECTION64_PATH points at librtrace.so).
#[test]
fn record_passes_capture_control_and_nvtx_on() {
    let b = build();
    let dir = fresh_dir("record-capture");
    let out = Command::new(rtrace_bin())
        .arg("record")
        .arg("--output")
        .arg(dir.join("rec-%p.bin"))
        .args([
            "--capture-range",
            "cudaProfilerApi",
            "--gpu-activity=kernel",
        ])
        .args(["--kernel-regex", "fill", "--kernel-count", "5"])
        .arg("--")
        .arg(b.bin.join("capture"))
        .env("LD_LIBRARY_PATH", &b.lib)
        .env_remove("LD_PRELOAD")
        .env_remove("NVTX_INJECTION64_PATH")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let loaded = rtrace_collector::load_inputs(std::slice::from_ref(&dir)).unwrap();
    let t = &loaded.traces[0];
    let calls: Vec<&str> = records(t)
        .iter()
        .map(|(_, a)| t.functions[&a.function].as_str())
        .collect();
    assert_eq!(
        calls,
        vec![
            "cuInit",
            "cuProfilerStart",
            "cuMemsetD32_v2",
            "cuLaunchKernel",
            "cuCtxSynchronize",
            "cuProfilerStop"
        ]
    );
    assert_eq!(t.kernels.len(), 1);
    let pushes = t
        .threads
        .values()
        .flat_map(|th| &th.nvtx)
        .filter(|e| e.kind == rtrace_format::NvtxKind::Push)
        .count();
    assert_eq!(pushes, 1);
    let notices: Vec<&str> = t.notices.iter().map(|n| n.message.as_str()).collect();
    assert!(
        notices.contains(
            &"capture: recording only between cuProfilerStart and cuProfilerStop; kernels \
              matching /fill/, 5 of them"
        ),
        "{notices:?}"
    );
    // A bad option value is a usage error.
    let out = Command::new(rtrace_bin())
        .args(["record", "--delay", "soon", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// A signal another process sends to `rtrace record` reaches the program, which handles it,
/// and rtrace exits with the program's status: none of them ends rtrace first (a batch
/// system's SIGUSR1 before its time limit, `timeout -s ALRM`).
#[test]
fn signals_sent_to_record_reach_the_program() {
    use std::io::BufRead;
    let dir = fresh_dir("record-signals");
    for (sig, name) in [
        (libc::SIGUSR1, "USR1"),
        (libc::SIGUSR2, "USR2"),
        (libc::SIGALRM, "ALRM"),
    ] {
        let script = format!(
            "trap 'echo got {name}; exit 7' {name}; echo ready; while :; do sleep 0.02; done"
        );
        let mut child = Command::new(rtrace_bin())
            .args(["record", "--"])
            .args(["sh", "-c", &script])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .env_remove("LD_PRELOAD")
            .current_dir(&dir)
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n");
        // SAFETY: kill has no memory-safety preconditions; the child is not reaped yet.
        assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
        line.clear();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, format!("got {name}\n"));
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(7), "SIG{name}");
    }
}

/// A traced process the program leaves running is waited for, as nsys does: its trace is
/// summarised whole, once it ended; a signal sent to rtrace meanwhile goes on to it and stops
/// the wait.
#[test]
fn record_waits_for_traced_processes_the_program_left_running() {
    let b = build();
    let dir = fresh_dir("record-outliving");
    let killme = b.bin.join("killme");
    let record = |limit: &str| {
        Command::new(rtrace_bin())
            .arg("record")
            .arg("--output")
            .arg(dir.join("t-%p.bin"))
            .args(["--", "sh", "-c"])
            .arg(format!(
                "{} {limit} >/dev/null & sleep 0.5; exit 3",
                killme.display()
            ))
            .env("LD_LIBRARY_PATH", &b.lib)
            .env_remove("LD_PRELOAD")
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    // killme ends by itself after one to two seconds, with status 5.
    let out = record("2").wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("rtrace: waiting for the traced processes the program left running (pid "),
        "{err}"
    );
    assert!(err.contains("rtrace: trace written to "), "{err}");
    assert!(!err.contains("damaged"), "{err}");
    assert!(!err.contains("still being written"), "{err}");
    // Sent to rtrace while it waits: passed on to killme, which ends by it.
    let mut child = record("60");
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("waiting for the traced processes") {
        let mut line = String::new();
        assert_ne!(
            std::io::BufRead::read_line(&mut stderr, &mut line).unwrap(),
            0,
            "{seen}"
        );
        seen.push_str(&line);
    }
    // SAFETY: kill has no memory-safety preconditions; the child is not reaped yet.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(3), "{rest}");
    assert!(rest.contains("rtrace: trace written to "), "{rest}");
}

/// A standard descriptor closed when `rtrace record` starts is closed in the program too, as
/// without rtrace (Rust's runtime opens /dev/null on it in rtrace itself): a write to a closed
/// standard output fails the same way.
#[test]
fn closed_standard_output_stays_closed_in_the_program() {
    let dir = fresh_dir("record-closed-stdout");
    let program = "echo hi; echo rc=$? >&2";
    let run = |traced: bool| {
        let inner = if traced {
            format!(
                "{} record -o {} -- sh -c '{program}' >&-",
                rtrace_bin().display(),
                dir.join("t-%p.bin").display()
            )
        } else {
            format!("sh -c '{program}' >&-")
        };
        let out = Command::new("sh")
            .args(["-c", &inner])
            .env_remove("LD_PRELOAD")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        // rtrace's own lines aside.
        let program_err: Vec<&str> = err.lines().filter(|l| !l.starts_with("rtrace:")).collect();
        (out.status.code(), program_err.join("\n"))
    };
    let plain = run(false);
    assert!(
        plain.1.ends_with("rc=1") || plain.1.ends_with("rc=2"),
        "{plain:?}"
    );
    assert_eq!(run(true), plain);
}
