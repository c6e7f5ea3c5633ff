//! AFL++ target: bytes → `Trace::read` → every report format and section →
//! both exports; then the same bytes as a file → the streamed report
//! (`report::report_inputs`, which seeks back to chunks) in every format and
//! section → both streamed exports (`export_filtered`), as `rtrace report` and
//! `rtrace export` read files. A panic, an abort or an allocation over
//! [`LIMIT`] is a finding.
//!
//! The first input byte chooses a mode: with bit 0 set, the rest has its
//! file-header and chunk checksums recomputed before it is read, so that
//! mutations get past the CRCs into the payload decoders, the summaries and
//! the exports; otherwise the rest is read as it is (the reader's own
//! framing, length and checksum checks). With bit 1 set, the streamed report
//! and export also filter (a time window, a device, streams, a kernel regex).

use rtrace_collector::export::{export_filtered, export_traces, ExportFormat};
use rtrace_collector::filter::Filter;
use rtrace_collector::output::render_sections;
use rtrace_collector::{render_report, render_report_section, Format, Section, Trace};
use rtrace_format::{crc32, ChunkHeader, CHUNK_HEADER_LEN, MAGIC};
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;

/// The largest single allocation allowed: reading, reporting or exporting
/// a fuzz input (at most a few hundred KiB) never needs more.
const LIMIT: usize = 64 << 20;

struct Guarded;

// SAFETY: forwards to the system allocator; aborts (does not unwind) on an
// absurd request.
unsafe impl GlobalAlloc for Guarded {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        check(new_size);
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn check(size: usize) {
    if size > LIMIT {
        std::process::abort();
    }
}

#[global_allocator]
static ALLOCATOR: Guarded = Guarded;

/// `bytes` with the file header's and every whole chunk's checksum made right.
fn fix_checksums(bytes: &[u8]) -> Vec<u8> {
    let mut b = bytes.to_vec();
    if b.len() < 16 || b[..8] != MAGIC {
        return b;
    }
    let len = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
    let Some(crc_at) = 16usize.checked_add(len).filter(|&e| e + 4 <= b.len()) else {
        return b;
    };
    let crc = crc32(&b[16..crc_at]);
    b[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
    let mut at = crc_at + 4;
    while at + CHUNK_HEADER_LEN <= b.len() {
        let raw: &[u8; CHUNK_HEADER_LEN] = b[at..at + CHUNK_HEADER_LEN].try_into().unwrap();
        let Some(mut h) = ChunkHeader::decode(raw) else {
            break;
        };
        let start = at + CHUNK_HEADER_LEN;
        let end = start + h.payload_len as usize;
        if end > b.len() {
            break;
        }
        h.crc = h.checksum(&b[start..end]);
        b[at..start].copy_from_slice(&h.encode());
        at = end;
    }
    b
}

/// The trace bytes an input stands for (checksums recomputed when its mode
/// byte says so), and whether the streamed passes filter.
fn trace_bytes(data: &[u8]) -> Option<(Vec<u8>, bool)> {
    let (&mode, rest) = data.split_first()?;
    let bytes = if mode & 1 == 1 {
        fix_checksums(rest)
    } else {
        rest.to_vec()
    };
    Some((bytes, mode & 2 == 2))
}

fn run(data: &[u8]) {
    let Some((bytes, filtered)) = trace_bytes(data) else {
        return;
    };
    streamed(&bytes, filtered);
    let Ok(trace) = Trace::read(Path::new("fuzz.bin"), &bytes[..]) else {
        return;
    };
    let traces = [trace];
    let mut n = 0;
    for format in [Format::Table, Format::Json] {
        n += render_report(&traces, format).len();
    }
    for section in Section::ALL {
        n += render_report_section(&traces, Format::Csv, section).len();
    }
    for format in [ExportFormat::Perfetto, ExportFormat::Chrome] {
        let (_, stats) = export_traces(&traces, format, std::io::sink()).unwrap();
        n += stats.bytes as usize;
    }
    std::hint::black_box(n);
}

/// `bytes` written to a file, read as `rtrace report` and `rtrace export` read
/// files (streamed, with re-reads by offset), with `filtered`'s filter or none.
fn streamed(bytes: &[u8], filtered: bool) {
    let dir = std::env::temp_dir().join(format!("rtrace-fuzz-{}", std::process::id()));
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let path = dir.join("in.bin");
    if std::fs::write(&path, bytes).is_err() {
        return;
    }
    let filter = if filtered {
        Filter {
            from_ns: Some(1_000),
            to_ns: Some(50_000_000),
            devices: vec![0],
            streams: vec![7, 13],
            kernel: rtrace_collector::filter::parse_regex("a|_Z").ok(),
            ..Default::default()
        }
    } else {
        Filter::default()
    };
    let files = [path];
    let mut n = 0;
    if let Ok((loaded, sections)) = rtrace_collector::report::report_inputs(&files, &filter) {
        for format in [Format::Table, Format::Json] {
            n += render_sections(&loaded.traces, &sections, format, Section::Api).len();
        }
        for section in Section::ALL {
            n += render_sections(&loaded.traces, &sections, Format::Csv, section).len();
        }
    }
    for format in [ExportFormat::Perfetto, ExportFormat::Chrome] {
        if let Ok(outcome) = export_filtered(&files, format, Some(&dir.join("out")), &filter) {
            n += outcome.stats.bytes as usize;
        }
    }
    std::hint::black_box(n);
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    // Outside AFL, `RTRACE_FUZZ_WRITE=FILE read_report < input` writes the trace
    // the input stands for to FILE and stops: replay.sh hands it to two builds
    // of `rtrace` to compare what they print.
    if let Some(path) = std::env::var_os("RTRACE_FUZZ_WRITE") {
        let mut data = Vec::new();
        if std::io::Read::read_to_end(&mut std::io::stdin(), &mut data).is_ok() {
            let bytes = trace_bytes(&data).map(|(b, _)| b).unwrap_or_default();
            std::process::exit(i32::from(std::fs::write(path, bytes).is_err()));
        }
        std::process::exit(1);
    }
    afl::fuzz!(|data: &[u8]| {
        run(data);
    });
}
