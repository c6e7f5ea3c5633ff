//! Traces read from a pipe (standard input as `-`, or a process substitution's
//! `/dev/fd/N`) give what the same files give: rtrace copies such an input into an
//! unlinked temporary file first, as the report and the export read a trace more than once.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// `rtrace ARGS`, with `stdin` written to its standard input.
fn rtrace(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rtrace"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        // A command that fails early closes its end: that is its answer, not a test failure.
        let _ = input.write_all(&bytes);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_report_from_standard_input_is_the_files_report() {
    let path = fixture("gpu.bin");
    let bytes = std::fs::read(&path).unwrap();
    for format in ["table", "json"] {
        let piped = rtrace(&["report", "--format", format, "-"], &bytes);
        let file = rtrace(&["report", "--format", format, path.to_str().unwrap()], b"");
        assert_eq!(piped.status.code(), Some(0), "{}", text(&piped.stderr));
        let copy = "/proc/self/fd/3";
        // The same report, but for the name of the file read.
        assert_eq!(
            text(&piped.stdout),
            text(&file.stdout).replace(path.to_str().unwrap(), copy),
            "{format}"
        );
        assert_eq!(
            text(&piped.stderr),
            format!(
                "rtrace: standard input: copied into a temporary file in {} (3.8 kB), read as \
                 {copy}\n",
                std::env::temp_dir().display()
            )
        );
    }
}

#[test]
fn an_export_from_standard_input_is_the_files_export() {
    let path = fixture("nvtx.bin");
    let bytes = std::fs::read(&path).unwrap();
    let piped = rtrace(&["export", "--format", "chrome", "-"], &bytes);
    let file = rtrace(
        &["export", "--format", "chrome", path.to_str().unwrap()],
        b"",
    );
    assert_eq!(piped.status.code(), Some(0), "{}", text(&piped.stderr));
    assert!(!piped.stdout.is_empty());
    assert_eq!(piped.stdout, file.stdout);
}

#[test]
fn a_damaged_trace_from_standard_input_is_reported_up_to_the_damage() {
    let bytes = std::fs::read(fixture("gpu.bin")).unwrap();
    let cut = &bytes[..bytes.len() - 100];
    let out = rtrace(&["report", "--format", "json", "-"], cut);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "warning: /proc/self/fd/3: truncated: the file ends inside the chunk at byte"
        ),
        "{stderr}"
    );
    // Nothing at all on standard input is an empty trace, said as such.
    let out = rtrace(&["report", "-"], b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).ends_with("rtrace: /proc/self/fd/3: empty file, not an rtrace trace\n"),
        "{}",
        text(&out.stderr)
    );
}

/// `rtrace ARGS` with `envs` set, `stdin` written to its standard input.
fn rtrace_with(args: &[&str], envs: &[(&str, &Path)], stdin: &[u8]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rtrace"));
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&bytes);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

#[test]
fn standard_input_past_the_spool_limit_is_one_clear_error_and_leaves_nothing() {
    let bytes = std::fs::read(fixture("gpu.bin")).unwrap();
    let tmp = std::env::temp_dir().join(format!("rtrace-pipes-limit-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let limit = Path::new("2K");
    let envs = [("TMPDIR", tmp.as_path()), ("RTRACE_SPOOL_LIMIT", limit)];
    let out = rtrace_with(&["report", "-"], &envs, &bytes);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "rtrace: standard input: larger than the limit of 2K for a copied input; raise it with \
         RTRACE_SPOOL_LIMIT (e.g. RTRACE_SPOOL_LIMIT=4K) or give the trace as a file\n"
    );
    assert_eq!(out.stdout, b"");
    // Raised: the same input is read, and the directory is left as it was.
    let limit = Path::new("4K");
    let envs = [("TMPDIR", tmp.as_path()), ("RTRACE_SPOOL_LIMIT", limit)];
    let out = rtrace_with(&["report", "-"], &envs, &bytes);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
    std::fs::remove_dir_all(&tmp).unwrap();
}
