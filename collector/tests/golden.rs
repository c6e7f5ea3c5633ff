//! Golden tests: the real `rtrace` binary over the committed trace fixtures
//! of `tests/fixtures/`, its stdout, stderr and exit status compared exactly
//! with the expected files next to them.
//!
//! `RTRACE_BLESS=1 cargo test -p rtrace-collector --test golden` (or
//! `tools/make-fixtures`) rewrites the fixtures from their generator
//! (`tests/common/fixtures.rs`) and the expected files from what the binary
//! prints; review the diff before committing it. See tests/fixtures/README.md.

mod common {
    pub mod fixtures;
}

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One command line, run in the fixtures directory.
struct Run {
    args: &'static [&'static str],
    /// The file holding the expected stdout; `None`: stdout must be empty.
    stdout: Option<&'static str>,
}

const fn run(args: &'static [&'static str], stdout: &'static str) -> Run {
    Run {
        args,
        stdout: Some(stdout),
    }
}

/// Every run, in the order `exit_and_stderr.txt` lists them.
const RUNS: &[Run] = &[
    run(
        &["report", "--format", "table", "api_threads.bin"],
        "api_threads.table.txt",
    ),
    run(
        &["report", "--format", "csv", "api_threads.bin"],
        "api_threads.csv",
    ),
    run(
        &["report", "--format", "json", "api_threads.bin"],
        "api_threads.json",
    ),
    run(&["report", "--format", "table", "gpu.bin"], "gpu.table.txt"),
    run(&["report", "--format", "csv", "gpu.bin"], "gpu.csv"),
    run(
        &[
            "report",
            "--format",
            "csv",
            "--section",
            "kernels",
            "gpu.bin",
        ],
        "gpu.kernels.csv",
    ),
    run(
        &[
            "report",
            "--format",
            "csv",
            "--section",
            "memcpy",
            "gpu.bin",
        ],
        "gpu.memcpy.csv",
    ),
    run(
        &[
            "report",
            "--format",
            "csv",
            "--section",
            "memset",
            "gpu.bin",
        ],
        "gpu.memset.csv",
    ),
    run(
        &[
            "report",
            "--format",
            "csv",
            "--section",
            "utilisation",
            "gpu.bin",
        ],
        "gpu.utilisation.csv",
    ),
    run(
        &[
            "report",
            "--format",
            "csv",
            "--section",
            "latency",
            "gpu.bin",
        ],
        "gpu.latency.csv",
    ),
    run(
        &[
            "report",
            "--format",
            "csv",
            "--section",
            "memory",
            "gpu.bin",
        ],
        "gpu.memory.csv",
    ),
    run(
        &["report", "--format", "csv", "--section", "sync", "gpu.bin"],
        "gpu.sync.csv",
    ),
    run(&["report", "--format", "json", "gpu.bin"], "gpu.json"),
    // Chosen sections, in every format; kernel names whole (stdout is not a terminal).
    run(
        &["report", "--section", "kernels,memset", "gpu.bin"],
        "gpu.sections.table.txt",
    ),
    run(
        &[
            "report",
            "--format",
            "json",
            "--section",
            "api",
            "--section",
            "memcpy",
            "gpu.bin",
        ],
        "gpu.sections.json",
    ),
    run(
        &[
            "report",
            "--format",
            "csv",
            "--section",
            "nvtx_sum",
            "nvtx.bin",
        ],
        "nvtx.nvtx.csv",
    ),
    run(
        &[
            "report",
            "--format",
            "csv",
            "--section",
            "cuda_kern_exec_sum",
            "gpu.bin",
        ],
        "gpu.kern_exec.csv",
    ),
    run(
        &["export", "--format", "chrome", "gpu.bin"],
        "gpu.chrome.json",
    ),
    run(
        &["report", "--format", "table", "truncated.bin"],
        "truncated.table.txt",
    ),
    run(
        &["report", "--format", "csv", "truncated.bin"],
        "truncated.csv",
    ),
    run(
        &["report", "--format", "json", "truncated.bin"],
        "truncated.json",
    ),
    run(
        &["report", "--format", "table", "corrupt.bin"],
        "corrupt.table.txt",
    ),
    run(&["report", "--format", "csv", "corrupt.bin"], "corrupt.csv"),
    run(
        &["report", "--format", "json", "corrupt.bin"],
        "corrupt.json",
    ),
    run(
        &["report", "--format", "table", "forked_child.bin"],
        "forked_child.table.txt",
    ),
    run(
        &["report", "--format", "csv", "forked_child.bin"],
        "forked_child.csv",
    ),
    run(
        &["report", "--format", "json", "forked_child.bin"],
        "forked_child.json",
    ),
    run(
        &[
            "report",
            "--format",
            "table",
            "api_threads.bin",
            "forked_child.bin",
        ],
        "parent_and_child.table.txt",
    ),
    run(
        &[
            "report",
            "--format",
            "json",
            "api_threads.bin",
            "forked_child.bin",
        ],
        "parent_and_child.json",
    ),
    // The directory: every fixture, in name order, API statistics merged.
    run(&["report", "--format", "csv", "."], "all.csv"),
    // NVTX ranges, external ids and a module image.
    run(
        &["report", "--format", "table", "nvtx.bin"],
        "nvtx.table.txt",
    ),
    run(&["report", "--format", "json", "nvtx.bin"], "nvtx.json"),
    run(
        &["export", "--format", "chrome", "nvtx.bin"],
        "nvtx.chrome.json",
    ),
    // Kernel profiles: the part, its CSV section, and the metric args of the export.
    run(
        &["report", "--format", "table", "profiles.bin"],
        "profiles.table.txt",
    ),
    run(
        &[
            "report",
            "--format",
            "csv",
            "--section",
            "profiles",
            "profiles.bin",
        ],
        "profiles.csv",
    ),
    run(
        &["report", "--format", "json", "profiles.bin"],
        "profiles.json",
    ),
    run(
        &["export", "--format", "chrome", "profiles.bin"],
        "profiles.chrome.json",
    ),
    // A window keeps the NVTX ranges that begin in it, whole.
    run(
        &[
            "report", "--format", "table", "--from", "1.05ms", "--to", "1.6ms", "nvtx.bin",
        ],
        "nvtx.window.table.txt",
    ),
    // Filters: a kernel-name regex on one device, a time window, processes.
    run(
        &[
            "report",
            "--format",
            "csv",
            "--section",
            "kernels",
            "--kernel",
            "vecadd",
            "--device",
            "0",
            "gpu.bin",
        ],
        "gpu.filtered-kernels.csv",
    ),
    run(
        &[
            "report", "--format", "json", "--from", "1ms", "--to", "2.5ms", "gpu.bin",
        ],
        "gpu.window.json",
    ),
    run(
        &[
            "export", "--format", "chrome", "--stream", "13", "--pid", "4200", "gpu.bin",
        ],
        "gpu.stream.chrome.json",
    ),
    // A narrower table: names cut to fit 80 columns.
    run(
        &["report", "--format", "table", "--width", "80", "gpu.bin"],
        "gpu.narrow.table.txt",
    ),
    Run {
        args: &["report", "--width", "20", "gpu.bin"],
        stdout: None,
    },
    // CSV prints one table, and has none for some sections: usage errors.
    Run {
        args: &[
            "report",
            "--format",
            "csv",
            "--section",
            "api,kernels",
            "gpu.bin",
        ],
        stdout: None,
    },
    Run {
        args: &[
            "report",
            "--format",
            "csv",
            "--section",
            "resources",
            "gpu.bin",
        ],
        stdout: None,
    },
    Run {
        args: &["report", "--pid", "1", "gpu.bin"],
        stdout: None,
    },
    Run {
        args: &["export", "--format", "chrome", "--pid", "1", "gpu.bin"],
        stdout: None,
    },
    Run {
        args: &["report", "--kernel", "(", "gpu.bin"],
        stdout: None,
    },
    // A window that holds no time is a usage error, not an empty report.
    Run {
        args: &["report", "--from", "2ms", "--to", "1ms", "gpu.bin"],
        stdout: None,
    },
    Run {
        args: &[
            "export", "--format", "chrome", "--from", "1ms", "--to", "1ms", "gpu.bin",
        ],
        stdout: None,
    },
    Run {
        args: &["report", "missing.bin"],
        stdout: None,
    },
    Run {
        args: &["report", "--format", "json", "--section", "gpu", "gpu.bin"],
        stdout: None,
    },
];

/// The file listing every run's exit status and stderr.
const STATUS_FILE: &str = "exit_and_stderr.txt";

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn blessing() -> bool {
    std::env::var_os("RTRACE_BLESS").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Where `actual` first differs from `expected`, in words.
fn difference(expected: &[u8], actual: &[u8]) -> String {
    let (e, a) = (
        String::from_utf8_lossy(expected),
        String::from_utf8_lossy(actual),
    );
    let (el, al): (Vec<&str>, Vec<&str>) = (e.split('\n').collect(), a.split('\n').collect());
    for i in 0..el.len().max(al.len()) {
        let (x, y) = (el.get(i), al.get(i));
        if x != y {
            return format!(
                "first difference at line {}:\n  expected: {}\n  actual:   {}",
                i + 1,
                x.map_or("(end of file)".into(), |l| format!("{l:?}")),
                y.map_or("(end of file)".into(), |l| format!("{l:?}")),
            );
        }
    }
    format!(
        "{} bytes expected, {} bytes read",
        expected.len(),
        actual.len()
    )
}

/// Compares `actual` with the file `name`, or writes it when blessing.
fn check(dir: &Path, name: &str, actual: &[u8], bless: bool, failures: &mut Vec<String>) {
    let path = dir.join(name);
    let expected = std::fs::read(&path).ok();
    if expected.as_deref() == Some(actual) {
        return;
    }
    if bless {
        std::fs::write(&path, actual).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        eprintln!("blessed {}", path.display());
        return;
    }
    failures.push(match expected {
        None => format!("{name}: missing"),
        Some(expected) => format!("{name}: {}", difference(&expected, actual)),
    });
}

fn command_line(args: &[&str]) -> String {
    let mut s = String::from("rtrace");
    for a in args {
        s.push(' ');
        s.push_str(a);
    }
    s
}

#[test]
fn fixtures_and_reports_match_the_expected_files() {
    let dir = fixtures_dir();
    let bless = blessing();
    let mut failures = Vec::new();

    // The committed traces are what the generator makes: a change to the
    // generator (or the format crate's encoders) shows up here first.
    for (name, bytes) in common::fixtures::all() {
        assert!(
            bytes.len() <= 8 << 10,
            "{name}: {} bytes; fixtures stay small",
            bytes.len()
        );
        check(&dir, name, &bytes, bless, &mut failures);
    }
    if !failures.is_empty() {
        panic!(
            "the committed fixtures differ from what tests/common/fixtures.rs makes \
             (regenerate them with tools/make-fixtures):\n{}",
            failures.join("\n")
        );
    }

    let mut status = String::new();
    for run in RUNS {
        let out = Command::new(env!("CARGO_BIN_EXE_rtrace"))
            .args(run.args)
            .current_dir(&dir)
            .env_clear()
            .output()
            .expect("running rtrace");
        let line = command_line(run.args);
        match run.stdout {
            Some(file) => {
                writeln!(status, "$ {line} > {file}").unwrap();
                check(&dir, file, &out.stdout, bless, &mut failures);
            }
            None => {
                writeln!(status, "$ {line}").unwrap();
                if !out.stdout.is_empty() {
                    failures.push(format!(
                        "{line}: unexpected stdout: {}",
                        String::from_utf8_lossy(&out.stdout)
                    ));
                }
            }
        }
        match out.status.code() {
            Some(code) => writeln!(status, "exit status {code}").unwrap(),
            None => writeln!(status, "killed: {}", out.status).unwrap(),
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        for l in stderr.lines() {
            writeln!(status, "stderr: {l}").unwrap();
        }
        if !stderr.is_empty() && !stderr.ends_with('\n') {
            writeln!(status, "(no newline at the end of stderr)").unwrap();
        }
        status.push('\n');
    }
    check(&dir, STATUS_FILE, status.as_bytes(), bless, &mut failures);
    assert!(
        failures.is_empty(),
        "rtrace's output differs from the expected files in {} \
         (if the change is intended, rewrite them with \
         RTRACE_BLESS=1 cargo test -p rtrace-collector --test golden, and review the diff):\n{}",
        dir.display(),
        failures.join("\n")
    );
}

/// Every file in the fixtures directory is a fixture, an expected output,
/// the README or the .gitignore: a stale expected file (a run that was
/// removed) is noticed.
#[test]
fn no_stray_files_in_the_fixtures_directory() {
    let mut known: Vec<String> = common::fixtures::all()
        .into_iter()
        .map(|(name, _)| name.to_string())
        .collect();
    known.extend(RUNS.iter().filter_map(|r| r.stdout.map(String::from)));
    known.push(STATUS_FILE.into());
    known.push("README.md".into());
    known.push(".gitignore".into()); // un-ignores the *.bin fixtures
    let Ok(entries) = std::fs::read_dir(fixtures_dir()) else {
        return; // not made yet: the other test says so
    };
    let mut stray: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !known.contains(name))
        .collect();
    stray.sort();
    assert!(
        stray.is_empty(),
        "files in tests/fixtures/ that no golden test uses: {stray:?}"
    );
}
