//! Format 3.0's API records in ticks (chunk kind 34) read as the records they stand for: each
//! committed fixture (format 2.1, API records in ns) rewritten as librtrace.so now writes them
//! (kind 34: the records with their times as ticks, then the clock samples that convert them)
//! gives the same report (table, JSON, every CSV section) and the same exports, but for the
//! format version the report names.

mod common {
    pub mod fixtures;
}

use rtrace_format::ticks::write_trailer;
use rtrace_format::{ApiRecord, ChunkHeader, ChunkKind, CHUNK_HEADER_LEN};
use std::path::Path;
use std::process::Command;

/// Ticks at two a ns (so every ns comes back exact): the samples (ticks, ns) and the ticks of
/// a time in ns.
const SAMPLES: [(u64, u64); 3] = [(0, 0), (1 << 41, 1 << 40), (1 << 63, 1 << 62)];
fn ticks(ns: u64) -> u64 {
    ns * 2
}

/// `trace` with its kind-2 chunks as kind 34 (every other one with ticks that are ns, as
/// written without a time-stamp counter), its header saying 3.0; `None` when it has none to
/// rewrite or its chunks cannot be walked.
fn in_ticks(trace: &[u8]) -> Option<Vec<u8>> {
    let body = u32::from_le_bytes(trace[12..16].try_into().unwrap()) as usize;
    let mut at = 16 + body + 4;
    let mut out = trace[..at].to_vec();
    out[8..10].copy_from_slice(&3u16.to_le_bytes());
    out[10..12].copy_from_slice(&0u16.to_le_bytes());
    let mut rewritten = 0;
    while at < trace.len() {
        let h = ChunkHeader::decode(trace.get(at..at + CHUNK_HEADER_LEN)?.try_into().unwrap())?;
        let end = at + CHUNK_HEADER_LEN + h.payload_len as usize;
        let payload = trace.get(at + CHUNK_HEADER_LEN..end)?;
        let records = payload.chunks_exact(ApiRecord::SIZE);
        let fits = records
            .clone()
            .all(|b| ApiRecord::from_bytes(b.try_into().unwrap()).end_ns < 1 << 62);
        if h.kind == ChunkKind::ApiRecords && !payload.is_empty() && fits {
            let tsc = rewritten % 2 == 0;
            let mut p = Vec::new();
            for b in records {
                let mut r = ApiRecord::from_bytes(b.try_into().unwrap());
                if tsc {
                    (r.start_ns, r.end_ns) = (ticks(r.start_ns), ticks(r.end_ns));
                }
                r.write_to(&mut p);
            }
            let samples = if tsc { &SAMPLES[..] } else { &[] };
            write_trailer(&mut p, samples.iter().copied(), tsc);
            let kind = ChunkKind::ApiRecordsInTicks;
            let h = ChunkHeader::new(kind, h.thread, h.seq, h.dropped, &p);
            out.extend_from_slice(&h.encode());
            out.extend_from_slice(&p);
            rewritten += 1;
        } else {
            out.extend_from_slice(&trace[at..end]);
        }
        at = end;
    }
    (rewritten > 0).then_some(out)
}

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

#[test]
fn api_records_in_ticks_read_as_the_same_records_in_ns() {
    let base = std::env::temp_dir().join(format!("rtrace-ticks-{}", std::process::id()));
    let (old, new) = (base.join("2.1"), base.join("3.0"));
    std::fs::create_dir_all(&old).unwrap();
    std::fs::create_dir_all(&new).unwrap();
    let mut compared = 0;
    for (name, bytes) in common::fixtures::all() {
        // The damaged fixtures' reports name byte offsets, which the longer chunks move.
        if matches!(name, "corrupt.bin" | "truncated.bin") {
            continue;
        }
        let Some(converted) = in_ticks(&bytes) else {
            continue;
        };
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
