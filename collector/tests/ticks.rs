//! Format 3.0's API records in ticks (chunk kind 34) read as the records they stand for: each
//! committed fixture (format 2.1, API records in ns) rewritten as librtrace.so now writes them
//! (kind 34: the records with their times as ticks, then the clock samples that convert them)
//! gives the same report (table, JSON, every CSV section) and the same exports, but for the
//! format version the report names.

mod common {
    pub mod fixtures;
}

use common::fixtures::in_ticks;
use rtrace_format::ticks::write_trailer;
use rtrace_format::ApiRecord;
use std::path::Path;
use std::process::Command;

fn rtrace(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rtrace"))
        .args(args)
        .current_dir(dir)
        .env_clear()
        .output()
        .expect("running rtrace");
    let text = |b: Vec<u8>| {
        String::from_utf8_lossy(&b)
            .replace("\"format_version\":\"3.0\"", "\"format_version\":\"2.1\"")
            .replace("(format 3.0)", "(format 2.1)")
    };
    (out.status.code(), text(out.stdout), text(out.stderr))
}

/// The undamaged fixtures that hold calls, each with its calls rewritten in ticks (the damaged
/// ones are left out: their reports name byte offsets, which the longer chunks move, and
/// tracefile.py stops at a bad chunk).
fn whole_fixtures_in_ticks() -> Vec<(&'static str, Vec<u8>, Vec<u8>)> {
    common::fixtures::all()
        .into_iter()
        .filter(|(name, _)| !matches!(*name, "corrupt.bin" | "truncated.bin"))
        .filter_map(|(name, bytes)| in_ticks(&bytes).map(|converted| (name, bytes, converted)))
        .collect()
}

#[test]
fn api_records_in_ticks_read_as_the_same_records_in_ns() {
    let base = std::env::temp_dir().join(format!("rtrace-ticks-{}", std::process::id()));
    let (old, new) = (base.join("2.1"), base.join("3.0"));
    std::fs::create_dir_all(&old).unwrap();
    std::fs::create_dir_all(&new).unwrap();
    let mut compared = 0;
    for (name, bytes, converted) in whole_fixtures_in_ticks() {
        std::fs::write(old.join(name), &bytes).unwrap();
        std::fs::write(new.join(name), &converted).unwrap();
        let mut runs: Vec<Vec<&str>> = vec![
            vec!["report", name],
            vec!["report", "--format", "json", name],
            vec!["export", "--format", "perfetto", "-o", "-", name],
            vec!["export", "--format", "chrome", "-o", "-", name],
        ];
        let sections = [
            "api",
            "kernels",
            "memcpy",
            "kern-exec",
            "latency",
            "sync",
            "utilisation",
            "nvtx",
        ];
        for s in sections {
            runs.push(vec!["report", "--format", "csv", "--section", s, name]);
        }
        for args in runs {
            let got = rtrace(&new, &args);
            assert_eq!(rtrace(&old, &args), got, "rtrace {args:?}");
            compared += usize::from(got.0 == Some(0));
        }
    }
    std::fs::remove_dir_all(&base).unwrap();
    assert!(compared >= 4 * 12, "only {compared} runs succeeded");
}

/// What the GPU checks' own reader (`tests/gpu/tracefile.py`, written from docs/format.md, not
/// from this crate) makes of `trace`: one line a call, `name result start end thread correlation`.
fn python_calls(trace: &Path) -> String {
    tracefile_py(
        "for r in tracefile.read(sys.argv[1], runtime=True): print(*r)",
        trace,
    )
}

/// What Python `code` prints with `tracefile` (tests/gpu/tracefile.py) and `sys` imported and
/// `file` as its argument.
fn tracefile_py(code: &str, file: &Path) -> String {
    let gpu = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/gpu");
    let out = Command::new("python3")
        .args(["-c", &format!("import sys, tracefile\n{code}")])
        .arg(file)
        .env("PYTHONPATH", &gpu)
        .output()
        .expect("running python3");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tracefile.py on {file:?}: {err}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_gpu_checks_reader_reads_calls_in_ticks_as_in_ns() {
    let base = std::env::temp_dir().join(format!("rtrace-ticks-py-{}", std::process::id()));
    std::fs::create_dir_all(&base).unwrap();
    let mut calls = 0;
    for (name, bytes, converted) in whole_fixtures_in_ticks() {
        let (old, new) = (base.join("old.bin"), base.join("new.bin"));
        std::fs::write(&old, &bytes).unwrap();
        std::fs::write(&new, &converted).unwrap();
        let want = python_calls(&old);
        assert_eq!(want, python_calls(&new), "{name}");
        calls += want.lines().count();
    }
    std::fs::remove_dir_all(&base).unwrap();
    assert_eq!(calls, 52, "the calls of the whole fixtures");
}

/// tracefile.py's conversion of ticks against this crate's (`decode_api_ticks`), on samples
/// like a time-stamp counter's (2.4 ticks a ns, uneven) and times before, between and after
/// them, where the rounding of the slopes shows.
#[test]
fn the_gpu_checks_reader_converts_ticks_as_the_format_crate_does() {
    let samples: Vec<(u64, u64)> = vec![
        (9_000_000_123, 3_750_000_051),
        (9_240_001_777, 3_850_000_743),
        (9_480_003_001, 3_950_001_234),
        (9_720_000_011, 4_049_999_998),
    ];
    let mut payload = Vec::new();
    let mut t = 8_700_000_000u64;
    for i in 0..400u32 {
        let r = ApiRecord {
            function: i % 7,
            result: i % 3,
            start_ns: t,
            end_ns: t + 777_777 + u64::from(i),
            correlation: u64::from(i) * 5,
        };
        r.write_to(&mut payload);
        t += 3_000_017;
    }
    write_trailer(&mut payload, samples.iter().copied(), true);
    let want: String = rtrace_format::ticks::decode_api_ticks(&payload)
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "({}, {}, {}, {}, {})\n",
                r.function, r.result, r.start_ns, r.end_ns, r.correlation
            )
        })
        .collect();
    let file = std::env::temp_dir().join(format!("rtrace-ticks-py-{}.bin", std::process::id()));
    std::fs::write(&file, &payload).unwrap();
    let got = tracefile_py(
        "for r in tracefile.ticks_calls(open(sys.argv[1], 'rb').read()): print(r)",
        &file,
    );
    std::fs::remove_file(&file).unwrap();
    assert_eq!(got, want);
}
