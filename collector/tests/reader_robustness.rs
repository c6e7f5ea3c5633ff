//! Reader robustness: valid traces (the golden fixtures, built by
//! `tests/common/fixtures.rs`) damaged in about 30,000 deterministic ways (a
//! small xorshift generator with fixed seeds), each read with [`Trace::read`]
//! (or [`load_trace`] / [`load_inputs`] from files) and then, for a share of
//! them, reported in every format and CSV section and exported in both
//! formats. The damage: truncation at every offset, a bit flip at every
//! offset, random insertions / deletions / overwrites / copies, chunk
//! length fields set to huge or slightly wrong values, chunk kinds changed
//! to unknown ones, chunks duplicated / removed / swapped, checksummed
//! garbage payloads (so that the decoders and summaries see it), odd device
//! attributes and kernel launch configurations, and length claims of up to
//! 2^64 bytes. Checked for every case:
//!
//! - nothing panics (a failing case is named with its seed and mutations, so
//!   it can be replayed);
//! - nothing allocates out of proportion to the input: a counting global
//!   allocator records the largest single allocation made while a file is
//!   read (a 71-byte file claiming a 256 MiB chunk must not make a 256 MiB
//!   buffer) and while it is reported and exported; requests over 1 GiB are
//!   refused, which aborts the test binary with a message;
//! - everything before the damage is still reported: the trace read from a
//!   file damaged at byte D holds exactly (truncations, bit flips, length
//!   fields) or at least (other mutations) what the undamaged chunks before
//!   D hold, and the file is marked damaged exactly when it should be.

mod common {
    pub mod fixtures;
}

use clap::ValueEnum;
use rtrace_collector::export::{export_traces, ExportFormat};
use rtrace_collector::{
    load_inputs, load_trace, render_report, render_report_section, Format, Section, Trace,
};
use rtrace_format::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------
// Allocation accounting

/// Wraps the system allocator, recording per thread the largest single
/// allocation (or reallocation) requested. Requests above [`REFUSED`] are
/// refused (the process then aborts, after saying why): a reader must never
/// get there, and a refusal is clearer than swapping.
struct Counting;

/// Requests larger than this are refused.
const REFUSED: usize = 1 << 30;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) -> bool {
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
    if size > REFUSED {
        // No allocation here: format the size by hand.
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut n = size;
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(b"\nreader_robustness: refused an allocation of ");
        let _ = err.write_all(&digits[at..]);
        let _ = err.write_all(b" bytes (the case being tested asks for absurd memory)\n");
        return false;
    }
    true
}

// SAFETY: every call is forwarded to the system allocator unchanged, or
// refused with a null pointer, which GlobalAlloc allows.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !note(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !note(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !note(new_size) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f`; returns its result and the largest single allocation it made.
fn measured<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let outer = LARGEST.with(|l| l.replace(0));
    let r = f();
    let largest = LARGEST.with(|l| l.replace(outer.max(l.get())));
    (r, largest)
}

/// The most that reading `len` bytes may allocate at once: the collector's
/// 64 KiB read buffer, a name table's capped preallocation (65536 entries),
/// and a few times the input.
fn allocation_bound(len: usize) -> usize {
    (4 << 20) + 16 * len
}

/// The most that reporting or exporting one small damaged trace may
/// allocate at once (the exports buffer their output a megabyte at a time).
const REPORT_ALLOCATION_BOUND: usize = 16 << 20;

// ---------------------------------------------------------------------------
// Deterministic randomness

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        // splitmix64 of the seed, so that nearby seeds start far apart.
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    /// A value a boundary check might get wrong.
    fn interesting_u64(&mut self) -> u64 {
        const V: &[u64] = &[
            0,
            1,
            2,
            0x7f,
            0x80,
            0xff,
            0x7fff,
            0xffff,
            0x7fff_ffff,
            0x8000_0000,
            0xffff_ffff,
            0x1_0000_0000,
            i64::MAX as u64,
            i64::MIN as u64,
            u64::MAX,
            u64::MAX - 1,
            u64::MAX / 2 + 1,
            86_400_000_000_000,
        ];
        match self.below(4) {
            0 => self.next(),
            _ => V[self.below(V.len())],
        }
    }
}

// ---------------------------------------------------------------------------
// Traces taken apart and put back together

const PATH: &str = "m.bin";

/// A chunk as it is in the file: its header fields (kept even when they
/// disagree with the payload) and payload.
#[derive(Clone)]
struct RawChunk {
    header: ChunkHeader,
    payload: Vec<u8>,
}

impl RawChunk {
    fn fix(&mut self) {
        self.header.payload_len = self.payload.len() as u32;
        self.header.crc = self.header.checksum(&self.payload);
    }
}

/// A valid trace (possibly damaged at its end) and what reading it gives.
struct Base {
    name: &'static str,
    bytes: Vec<u8>,
    header_end: usize,
    /// The chunks the reader accepts, with their end offsets.
    chunks: Vec<RawChunk>,
    ends: Vec<usize>,
    /// The bytes after the last accepted chunk (damage, or nothing).
    tail: Vec<u8>,
    /// `prefixes[k]`: the trace read from the header and the first k chunks.
    prefixes: Vec<Trace>,
    /// The trace read from the whole file.
    full: Trace,
}

fn read(bytes: &[u8]) -> Result<Trace, String> {
    Trace::read(Path::new(PATH), bytes).map_err(|e| e.to_string())
}

impl Base {
    fn new(name: &'static str, bytes: Vec<u8>) -> Base {
        let mut reader = TraceReader::new(&bytes[..]).unwrap();
        let header_end = reader.offset() as usize;
        let mut chunks = Vec::new();
        let mut ends = Vec::new();
        while let Ok(Some(c)) = reader.next_chunk() {
            ends.push(reader.offset() as usize);
            chunks.push(RawChunk {
                header: c.header,
                payload: c.payload,
            });
        }
        let good_end = ends.last().copied().unwrap_or(header_end);
        let tail = bytes[good_end..].to_vec();
        let mut prefixes = vec![read(&bytes[..header_end]).unwrap()];
        for &end in &ends {
            prefixes.push(read(&bytes[..end]).unwrap());
        }
        let full = read(&bytes).unwrap();
        Base {
            name,
            bytes,
            header_end,
            chunks,
            ends,
            tail,
            prefixes,
            full,
        }
    }

    fn good_end(&self) -> usize {
        self.ends.last().copied().unwrap_or(self.header_end)
    }

    /// The number of accepted chunks that end at or before `offset`.
    fn chunks_before(&self, offset: usize) -> usize {
        self.ends.iter().take_while(|&&e| e <= offset).count()
    }

    fn join(&self, chunks: &[RawChunk], tail: &[u8]) -> Vec<u8> {
        let mut out = self.bytes[..self.header_end].to_vec();
        for c in chunks {
            out.extend_from_slice(&c.header.encode());
            out.extend_from_slice(&c.payload);
        }
        out.extend_from_slice(tail);
        out
    }
}

fn bases() -> Vec<Base> {
    let mut bases: Vec<Base> = common::fixtures::all()
        .into_iter()
        .map(|(name, bytes)| Base::new(name, bytes))
        .collect();
    // What librtrace.so writes since format 3.0: the calls in ticks (chunk kind 34), with the
    // clock samples that convert them.
    for (name, bytes) in [
        ("api_threads-3.0.bin", common::fixtures::api_threads()),
        ("nvtx-3.0.bin", common::fixtures::nvtx()),
    ] {
        bases.push(Base::new(name, common::fixtures::in_ticks(&bytes).unwrap()));
    }
    bases
}

// ---------------------------------------------------------------------------
// Checks

/// Ok when `t` holds everything `prefix` holds, in the same order (and
/// possibly more after it). Damage and path are not compared.
fn extends(prefix: &Trace, t: &Trace) -> Result<(), String> {
    fn vec_prefix<T: PartialEq + std::fmt::Debug>(
        what: &str,
        p: &[T],
        t: &[T],
    ) -> Result<(), String> {
        if t.len() < p.len() || t[..p.len()] != *p {
            return Err(format!(
                "{what}: {} expected first, got {}",
                p.len(),
                t.len()
            ));
        }
        Ok(())
    }
    if prefix.header != t.header {
        return Err("header differs".into());
    }
    if prefix.format_version != t.format_version {
        return Err("format version differs".into());
    }
    if t.chunks < prefix.chunks {
        return Err(format!(
            "{} chunks, expected at least {}",
            t.chunks, prefix.chunks
        ));
    }
    for (tid, p) in &prefix.threads {
        let Some(th) = t.threads.get(tid) else {
            return Err(format!("thread {tid} missing"));
        };
        vec_prefix(&format!("thread {tid} records"), &p.records, &th.records)?;
        if p.name.is_some() && p.name != th.name {
            return Err(format!(
                "thread {tid} name {:?}, expected {:?}",
                th.name, p.name
            ));
        }
        if th.dropped < p.dropped {
            return Err(format!("thread {tid} dropped"));
        }
    }
    for (id, name) in &prefix.functions {
        if t.functions.get(id) != Some(name) {
            return Err(format!("function {id} ({name}) missing"));
        }
    }
    for (id, name) in &prefix.kernel_names {
        if t.kernel_names.get(id) != Some(name) {
            return Err(format!("kernel name {id} ({name}) missing"));
        }
    }
    for (ordinal, d) in &prefix.devices {
        if t.devices.get(ordinal) != Some(d) {
            return Err(format!("device {ordinal} missing"));
        }
    }
    vec_prefix("kernels", &prefix.kernels, &t.kernels)?;
    vec_prefix("memcpys", &prefix.memcpys, &t.memcpys)?;
    vec_prefix("peer copies", &prefix.peer_copies, &t.peer_copies)?;
    vec_prefix("memsets", &prefix.memsets, &t.memsets)?;
    vec_prefix("memory", &prefix.memory, &t.memory)?;
    vec_prefix("syncs", &prefix.syncs, &t.syncs)?;
    vec_prefix("contexts", &prefix.contexts, &t.contexts)?;
    vec_prefix("streams", &prefix.streams, &t.streams)?;
    vec_prefix("modules", &prefix.modules, &t.modules)?;
    vec_prefix("functions", &prefix.gpu_functions, &t.gpu_functions)?;
    vec_prefix("notices", &prefix.notices, &t.notices)?;
    vec_prefix("bad chunks", &prefix.bad_chunks, &t.bad_chunks)?;
    if prefix.end.is_some() && t.end != prefix.end {
        return Err("end record differs".into());
    }
    if t.dropped < prefix.dropped || t.unknown_chunks < prefix.unknown_chunks {
        return Err("dropped or unknown-chunk counts went down".into());
    }
    Ok(())
}

/// Ok when `t` holds exactly what `expected` holds (damage aside).
fn same(expected: &Trace, t: &Trace) -> Result<(), String> {
    extends(expected, t)?;
    extends(t, expected).map_err(|e| format!("more than expected: {e}"))?;
    if (t.chunks, t.dropped, t.unknown_chunks)
        != (expected.chunks, expected.dropped, expected.unknown_chunks)
    {
        return Err("counts differ".into());
    }
    Ok(())
}

/// Reports `traces` in every format and section, and exports them in both
/// formats; returns the bytes produced (so that nothing is optimised away).
fn exercise(traces: &[Trace]) -> usize {
    let mut n = 0;
    for format in [Format::Table, Format::Json] {
        n += render_report(traces, format).len();
    }
    for section in Section::value_variants() {
        n += render_report_section(traces, Format::Csv, *section).len();
    }
    for format in [ExportFormat::Perfetto, ExportFormat::Chrome] {
        let (_, stats) = export_traces(traces, format, std::io::sink()).unwrap();
        n += stats.bytes as usize;
    }
    n
}

/// What a case expects of the trace read from the mutated bytes.
enum Expect {
    /// Only that nothing panics or allocates absurdly (the damage may be in
    /// the file header).
    Anything,
    /// The file header is intact: reading succeeds and holds at least
    /// `prefixes[k]`.
    AtLeast(usize),
    /// Reading succeeds and holds exactly `prefixes[k]`; damaged or not.
    Exactly(usize, bool),
    /// Reading fails (the file header is damaged), or succeeds with exactly
    /// the trace of the whole base file (a harmless change in the header).
    FailsOrWhole,
}

struct Stats {
    cases: usize,
    read_ok: usize,
    exercised: usize,
    largest: usize,
    largest_report: usize,
}

impl Stats {
    fn new() -> Self {
        Stats {
            cases: 0,
            read_ok: 0,
            exercised: 0,
            largest: 0,
            largest_report: 0,
        }
    }
}

/// Reads `bytes`, checks what `expect` says, and reports and exports the
/// result when `report` is set.
fn case(
    base: &Base,
    what: &dyn Fn() -> String,
    bytes: &[u8],
    expect: Expect,
    report: bool,
    stats: &mut Stats,
) {
    stats.cases += 1;
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let (result, largest) = measured(|| read(bytes));
        stats.largest = stats.largest.max(largest);
        if largest > allocation_bound(bytes.len()) {
            return Err(format!(
                "reading {} bytes allocated {largest} bytes at once",
                bytes.len()
            ));
        }
        let check = match (&expect, &result) {
            (Expect::Anything, _) => Ok(()),
            (Expect::AtLeast(k), Ok(t)) => extends(&base.prefixes[*k], t),
            (Expect::Exactly(k, damaged), Ok(t)) => same(&base.prefixes[*k], t).and_then(|()| {
                if t.damage.is_some() == *damaged {
                    Ok(())
                } else {
                    Err(format!(
                        "damage {:?}, expected damaged: {damaged}",
                        t.damage
                    ))
                }
            }),
            (Expect::FailsOrWhole, Ok(t)) => {
                // A version field changed to one this reader reads.
                let mut t = t.clone();
                t.format_version = base.full.format_version;
                same(&base.full, &t)
            }
            (Expect::FailsOrWhole, Err(_)) => Ok(()),
            (_, Err(e)) => Err(format!("reading failed: {e}")),
        };
        check?;
        if let Ok(t) = &result {
            stats.read_ok += 1;
            if report {
                stats.exercised += 1;
                let (_, largest) = measured(|| exercise(std::slice::from_ref(t)));
                stats.largest_report = stats.largest_report.max(largest);
                if largest > REPORT_ALLOCATION_BOUND {
                    return Err(format!(
                        "the report or export allocated {largest} bytes at once"
                    ));
                }
            }
        }
        Ok(())
    }));
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(why)) => panic!("{} / {}: {why}", base.name, what()),
        Err(_) => panic!("{} / {}: panicked (message above)", base.name, what()),
    }
}

// ---------------------------------------------------------------------------
// The tests

/// Every fixture cut at every offset: the chunks before the cut are
/// reported, exactly, damaged unless the cut falls between chunks.
#[test]
fn truncation_at_every_offset() {
    let mut stats = Stats::new();
    for base in bases() {
        for n in 0..=base.bytes.len() {
            let bytes = &base.bytes[..n];
            let expect = if n < base.header_end {
                Expect::Anything
            } else if n <= base.good_end() {
                let k = base.chunks_before(n);
                let at_boundary = n == base.header_end || base.ends[..k].last() == Some(&n);
                Expect::Exactly(k, !at_boundary)
            } else {
                Expect::Exactly(base.chunks.len(), true)
            };
            if n < base.header_end {
                // The header is damaged: reading fails.
                assert!(read(bytes).is_err(), "{}: cut at {n}", base.name);
            }
            let report = n % 7 == 0 || n >= base.good_end();
            case(
                &base,
                &|| format!("cut at {n}"),
                bytes,
                expect,
                report,
                &mut stats,
            );
        }
    }
    eprintln!(
        "truncations: {} cases, {} read, {} reported, largest allocation {} bytes (reading), {} (reporting)",
        stats.cases, stats.read_ok, stats.exercised, stats.largest, stats.largest_report
    );
}

/// A bit flipped at every offset of every fixture (all 8 bits of the
/// smallest): the CRC catches it; the chunks before it are reported exactly.
#[test]
fn bit_flips_at_every_offset() {
    let mut stats = Stats::new();
    let mut rng = Rng::new(1);
    for base in bases() {
        let all_bits = base.name == "forked_child.bin";
        for at in 0..base.bytes.len() {
            let bits: Vec<u8> = if all_bits {
                (0..8).collect()
            } else {
                vec![rng.below(8) as u8]
            };
            for bit in bits {
                let mut bytes = base.bytes.clone();
                bytes[at] ^= 1 << bit;
                let expect = if at < base.header_end {
                    Expect::FailsOrWhole
                } else if at < base.good_end() {
                    Expect::Exactly(base.chunks_before(at), true)
                } else {
                    // In the damage already there: it may even repair it.
                    Expect::AtLeast(base.chunks.len())
                };
                let report = at % 5 == 0;
                case(
                    &base,
                    &|| format!("bit {bit} of byte {at} flipped"),
                    &bytes,
                    expect,
                    report,
                    &mut stats,
                );
            }
        }
    }
    eprintln!(
        "bit flips: {} cases, {} read, {} reported, largest allocation {} bytes (reading), {} (reporting)",
        stats.cases, stats.read_ok, stats.exercised, stats.largest, stats.largest_report
    );
}

/// Random byte-level mutations (1 to 4 of: bit flips, random bytes,
/// insertions, deletions, duplicated ranges, truncations), 3000 seeds:
/// what precedes the first changed byte is reported.
#[test]
fn random_byte_mutations() {
    let bases = bases();
    let mut stats = Stats::new();
    for seed in 0..3000u64 {
        let mut rng = Rng::new(seed);
        let base = &bases[rng.below(bases.len())];
        let mut bytes = base.bytes.clone();
        let mut steps = Vec::new();
        for _ in 0..1 + rng.below(4) {
            let len = bytes.len();
            let at = rng.below(len + 1);
            match rng.below(6) {
                0 if at < len => {
                    let bit = rng.below(8);
                    bytes[at] ^= 1 << bit;
                    steps.push(format!("flip bit {bit} at {at}"));
                }
                1 if at < len => {
                    let n = (1 + rng.below(8)).min(len - at);
                    let new = rng.bytes(n);
                    bytes[at..at + n].copy_from_slice(&new);
                    steps.push(format!("overwrite {n} at {at}"));
                }
                2 => {
                    let n = 1 + rng.below(16);
                    let new = rng.bytes(n);
                    bytes.splice(at..at, new);
                    steps.push(format!("insert {n} at {at}"));
                }
                3 if at < len => {
                    let n = (1 + rng.below(64)).min(len - at);
                    bytes.drain(at..at + n);
                    steps.push(format!("delete {n} at {at}"));
                }
                4 if at < len => {
                    let n = (1 + rng.below(200)).min(len - at);
                    let copy = bytes[at..at + n].to_vec();
                    let to = rng.below(len + 1);
                    bytes.splice(to..to, copy);
                    steps.push(format!("copy {n} from {at} to {to}"));
                }
                _ => {
                    bytes.truncate(at);
                    steps.push(format!("truncate at {at}"));
                }
            }
        }
        let first_change = bytes
            .iter()
            .zip(&base.bytes)
            .position(|(a, b)| a != b)
            .unwrap_or(bytes.len().min(base.bytes.len()));
        let expect = if bytes == base.bytes {
            Expect::Exactly(base.chunks.len(), base.full.damage.is_some())
        } else if first_change < base.header_end {
            Expect::Anything
        } else {
            Expect::AtLeast(base.chunks_before(first_change).min(base.chunks.len()))
        };
        let what = || format!("seed {seed}: {}", steps.join(", "));
        case(base, &what, &bytes, expect, seed % 3 == 0, &mut stats);
    }
    eprintln!(
        "random mutations: {} cases, {} read, {} reported, largest allocation {} bytes (reading), {} (reporting)",
        stats.cases, stats.read_ok, stats.exercised, stats.largest, stats.largest_report
    );
}

/// Chunk-level damage: length fields set to huge (or slightly wrong)
/// values, kinds changed to unknown ones (checksum fixed: skipped and
/// counted), chunks duplicated, removed or swapped.
#[test]
fn chunk_structure_mutations() {
    let mut stats = Stats::new();
    for base in bases() {
        let n = base.chunks.len();
        let damaged = base.full.damage.is_some();
        for k in 0..n {
            let bytes_len = base.bytes.len() as u32;
            for len in [
                MAX_CHUNK_PAYLOAD,
                MAX_CHUNK_PAYLOAD + 1,
                MAX_CHUNK_PAYLOAD - 1,
                u32::MAX,
                1 << 30,
                bytes_len,
                bytes_len * 1000,
                base.chunks[k].header.payload_len + 1,
                base.chunks[k].header.payload_len.saturating_sub(1),
            ] {
                if len == base.chunks[k].header.payload_len {
                    continue;
                }
                let mut chunks = base.chunks.clone();
                chunks[k].header.payload_len = len;
                let bytes = base.join(&chunks, &base.tail);
                case(
                    &base,
                    &|| format!("chunk {k} claims {len} bytes"),
                    &bytes,
                    Expect::Exactly(k, true),
                    k + 1 == n,
                    &mut stats,
                );
            }
            for kind in [0u16, 200, 999, 0x7fff, 0xffff] {
                let mut chunks = base.chunks.clone();
                chunks[k].header.kind = ChunkKind::from_u16(kind);
                chunks[k].fix();
                let bytes = base.join(&chunks, &base.tail);
                let what = || format!("chunk {k} of kind {kind}");
                case(
                    &base,
                    &what,
                    &bytes,
                    Expect::AtLeast(k),
                    kind == 999,
                    &mut stats,
                );
                let t = read(&bytes).unwrap();
                assert_eq!(t.chunks, n as u64, "{} / {}", base.name, what());
                let was_unknown = matches!(base.chunks[k].header.kind, ChunkKind::Unknown(_));
                let unknown = base.full.unknown_chunks + u64::from(!was_unknown);
                assert_eq!(t.unknown_chunks, unknown, "{} / {}", base.name, what());
                assert_eq!(t.damage.is_some(), damaged, "{} / {}", base.name, what());
            }
            // Duplicated: read twice (a duplicated record chunk counts twice).
            let mut chunks = base.chunks.clone();
            chunks.insert(k + 1, chunks[k].clone());
            let bytes = base.join(&chunks, &base.tail);
            case(
                &base,
                &|| format!("chunk {k} duplicated"),
                &bytes,
                Expect::AtLeast(k + 1),
                true,
                &mut stats,
            );
            let t = read(&bytes).unwrap();
            assert_eq!(
                t.chunks,
                n as u64 + 1,
                "{}: chunk {k} duplicated",
                base.name
            );
            assert_eq!(t.damage.is_some(), damaged);
            // Removed.
            let mut chunks = base.chunks.clone();
            chunks.remove(k);
            let bytes = base.join(&chunks, &base.tail);
            case(
                &base,
                &|| format!("chunk {k} removed"),
                &bytes,
                Expect::AtLeast(k),
                true,
                &mut stats,
            );
            assert_eq!(read(&bytes).unwrap().chunks, n as u64 - 1);
            // Swapped with the next.
            if k + 1 < n {
                let mut chunks = base.chunks.clone();
                chunks.swap(k, k + 1);
                let bytes = base.join(&chunks, &base.tail);
                case(
                    &base,
                    &|| format!("chunks {k} and {} swapped", k + 1),
                    &bytes,
                    Expect::AtLeast(k),
                    true,
                    &mut stats,
                );
                assert_eq!(read(&bytes).unwrap().chunks, n as u64);
            }
            // Chunk magic broken.
            let mut bytes = base.join(&base.chunks, &base.tail);
            let start = if k == 0 {
                base.header_end
            } else {
                base.ends[k - 1]
            };
            bytes[start] = b'X';
            case(
                &base,
                &|| format!("chunk {k} magic broken"),
                &bytes,
                Expect::Exactly(k, true),
                false,
                &mut stats,
            );
        }
    }
    eprintln!(
        "chunk structure: {} cases, {} read, {} reported, largest allocation {} bytes (reading), {} (reporting)",
        stats.cases, stats.read_ok, stats.exercised, stats.largest, stats.largest_report
    );
}

/// Payloads changed with their checksums fixed, so that the decoders, the
/// summaries and the exports see garbage: random bytes, interesting values
/// (0, MAX, ...) over record fields, other lengths, other kinds. The file
/// reads to its end (a bad payload is skipped, not fatal) and every report
/// and export works.
#[test]
fn checksummed_garbage_payloads() {
    let bases = bases();
    let mut stats = Stats::new();
    for seed in 0..1500u64 {
        let mut rng = Rng::new(1_000_000 + seed);
        let base = &bases[rng.below(bases.len())];
        let mut chunks = base.chunks.clone();
        let mut steps = Vec::new();
        for _ in 0..1 + rng.below(3) {
            let k = rng.below(chunks.len());
            let c = &mut chunks[k];
            let len = c.payload.len();
            match rng.below(6) {
                0 if len > 0 => {
                    for _ in 0..1 + rng.below(4) {
                        let at = rng.below(len);
                        c.payload[at] ^= 1 << rng.below(8);
                    }
                    steps.push(format!("chunk {k}: bits flipped"));
                }
                1 | 2 if len >= 4 => {
                    // Interesting values over aligned fields.
                    for _ in 0..1 + rng.below(6) {
                        let v = rng.interesting_u64();
                        if rng.chance(2) && len >= 8 {
                            let at = rng.below(len / 8) * 8;
                            c.payload[at..at + 8].copy_from_slice(&v.to_le_bytes());
                        } else {
                            let at = rng.below(len / 4) * 4;
                            c.payload[at..at + 4].copy_from_slice(&(v as u32).to_le_bytes());
                        }
                    }
                    steps.push(format!("chunk {k}: interesting values"));
                }
                3 => {
                    let n = rng.below(300);
                    c.payload = rng.bytes(n);
                    steps.push(format!("chunk {k}: {n} random bytes"));
                }
                4 => {
                    let n = rng.below(len + 40);
                    c.payload.resize(n, 0);
                    steps.push(format!("chunk {k}: resized to {n}"));
                }
                _ => {
                    let kind = 1 + rng.below(17) as u16;
                    c.header.kind = ChunkKind::from_u16(kind);
                    steps.push(format!("chunk {k}: kind {kind}"));
                }
            }
            c.fix();
        }
        let bytes = base.join(&chunks, &base.tail);
        let what = || format!("seed {seed}: {}", steps.join(", "));
        case(base, &what, &bytes, Expect::Anything, true, &mut stats);
        let t = read(&bytes).unwrap_or_else(|e| panic!("{} / {}: {e}", base.name, what()));
        assert_eq!(t.chunks, base.full.chunks, "{} / {}", base.name, what());
        assert_eq!(
            t.damage.is_some(),
            base.full.damage.is_some(),
            "{} / {}",
            base.name,
            what()
        );
        if seed % 50 == 0 {
            // Merged with the undamaged traces, as a directory would be.
            let mut all: Vec<Trace> = bases.iter().map(|b| b.full.clone()).collect();
            all.push(t);
            exercise(&all);
        }
    }
    eprintln!(
        "checksummed garbage: {} cases, {} read, {} reported, largest allocation {} bytes (reading), {} (reporting)",
        stats.cases, stats.read_ok, stats.exercised, stats.largest, stats.largest_report
    );
}

/// Device descriptions with odd attribute values (0, negative, 1, INT_MAX,
/// a warp larger than an SM's threads, ...), one attribute at a time and a
/// few at once, under the kernels of `gpu.bin`: the occupancy section (the
/// only user of the attributes' arithmetic) reports and exports them all.
#[test]
fn odd_device_attributes() {
    let bases = bases();
    let base = bases.iter().find(|b| b.name == "gpu.bin").unwrap();
    let k = base
        .chunks
        .iter()
        .position(|c| c.header.kind == ChunkKind::DeviceInfo)
        .unwrap();
    let device: DeviceInfo = decode_value(&base.chunks[k].payload).unwrap();
    const ODD: &[i32] = &[
        i32::MIN,
        -1,
        0,
        1,
        2,
        3,
        7,
        31,
        32,
        33,
        64,
        1000,
        65535,
        65536,
        i32::MAX - 1,
        i32::MAX,
    ];
    let mut stats = Stats::new();
    let mut variants: Vec<(String, DeviceInfo)> = Vec::new();
    for i in 0..device.attributes.len() {
        for &v in ODD {
            let mut d = device.clone();
            d.attributes[i].1 = v;
            variants.push((format!("attribute {} = {v}", d.attributes[i].0), d));
        }
    }
    let mut rng = Rng::new(3);
    for n in 0..100 {
        let mut d = device.clone();
        for _ in 0..2 + rng.below(4) {
            let i = rng.below(d.attributes.len());
            d.attributes[i].1 = ODD[rng.below(ODD.len())];
        }
        variants.push((format!("mixed attributes {n}: {:?}", d.attributes), d));
    }
    for (what, d) in variants {
        let mut chunks = base.chunks.clone();
        chunks[k].payload = encode_value(&d);
        chunks[k].fix();
        let bytes = base.join(&chunks, &base.tail);
        case(
            base,
            &|| what.clone(),
            &bytes,
            Expect::AtLeast(k),
            true,
            &mut stats,
        );
    }
    eprintln!(
        "odd device attributes: {} cases, largest allocation {} bytes (reporting)",
        stats.cases, stats.largest_report
    );
}

/// Kernel records with odd launch configurations (dimensions, registers and
/// shared memory at 0, negative, INT_MAX, UINT_MAX, ...), on the H100 of
/// `gpu.bin`: the kernel summary and the occupancy section report them all.
#[test]
fn odd_kernel_launches() {
    let bases = bases();
    let base = bases.iter().find(|b| b.name == "gpu.bin").unwrap();
    let k = base
        .chunks
        .iter()
        .position(|c| c.header.kind == ChunkKind::Kernels)
        .unwrap();
    let kernels: Vec<KernelRecord> = base.chunks[k]
        .payload
        .chunks_exact(KernelRecord::SIZE)
        .map(|b| KernelRecord::from_bytes(b.try_into().unwrap()))
        .collect();
    const ODD: &[u32] = &[
        0,
        1,
        31,
        32,
        33,
        255,
        256,
        1024,
        1025,
        65535,
        65536,
        232_448,
        0x7fff_ffff,
        0x8000_0000,
        0xffff_fffe,
        0xffff_ffff,
    ];
    /// Sets field `f` (0-2 grid, 3-5 block, 6 registers, 7 static and 8
    /// dynamic shared memory, 9 start/end swapped) of `r` to `v`.
    fn set(r: &mut KernelRecord, f: usize, v: u32) {
        match f {
            0..=2 => r.grid[f] = v as i32,
            3..=5 => r.block[f - 3] = v as i32,
            6 => r.registers_per_thread = v,
            7 => r.static_shared_memory = v,
            8 => r.dynamic_shared_memory = v,
            _ => std::mem::swap(&mut r.start_ns, &mut r.end_ns),
        }
    }
    let mut variants: Vec<(String, Vec<KernelRecord>)> = Vec::new();
    for f in 0..9 {
        for &v in ODD {
            let mut rs = kernels.clone();
            set(&mut rs[0], f, v);
            variants.push((format!("kernel field {f} = {v}"), rs));
        }
    }
    // Whole dimensions: products past i64::MAX and u64::MAX.
    for &v in ODD {
        for dims in [[v, v, v], [v, v, 2], [v, v, 1]] {
            let dims = dims.map(|d| d as i32);
            let mut rs = kernels.clone();
            rs[0].grid = dims;
            rs[1].block = dims;
            variants.push((format!("grid and block {dims:?}"), rs));
        }
    }
    let mut rng = Rng::new(4);
    for n in 0..100 {
        let mut rs = kernels.clone();
        for _ in 0..2 + rng.below(6) {
            let i = rng.below(rs.len());
            set(&mut rs[i], rng.below(10), ODD[rng.below(ODD.len())]);
        }
        variants.push((format!("mixed launches {n}: {rs:?}"), rs));
    }
    let mut stats = Stats::new();
    for (what, rs) in variants {
        let mut chunks = base.chunks.clone();
        chunks[k].payload = rs.iter().flat_map(|r| r.to_bytes()).collect();
        chunks[k].fix();
        let bytes = base.join(&chunks, &base.tail);
        case(
            base,
            &|| what.clone(),
            &bytes,
            Expect::AtLeast(k),
            true,
            &mut stats,
        );
    }
    eprintln!(
        "odd kernel launches: {} cases, largest allocation {} bytes (reporting)",
        stats.cases, stats.largest_report
    );
}

/// Small files whose length fields claim far more than they hold: none may
/// make a buffer of the claimed size before reading it.
#[test]
fn length_claims_do_not_allocate() {
    let bases = bases();
    let base = &bases[0];
    let header = encode_file_header(&ProcessHeader::default());
    let mut stats = Stats::new();

    // A chunk header claiming the largest payload a reader accepts, and no payload.
    let mut bytes = header.clone();
    let claim = ChunkHeader {
        kind: ChunkKind::ApiRecords,
        flags: 0,
        payload_len: MAX_CHUNK_PAYLOAD,
        crc: 0,
        thread: 1,
        seq: 0,
        dropped: 0,
    };
    bytes.extend_from_slice(&claim.encode());
    let (t, largest) = measured(|| read(&bytes));
    let t = t.unwrap();
    assert!(
        largest <= allocation_bound(bytes.len()),
        "a {}-byte file claiming a {MAX_CHUNK_PAYLOAD}-byte chunk allocated {largest} bytes",
        bytes.len()
    );
    assert!(
        t.damage.as_deref().unwrap().starts_with("truncated"),
        "{:?}",
        t.damage
    );

    // A file header claiming the largest body a reader accepts.
    let mut bytes = header[..12].to_vec();
    bytes.extend_from_slice(&MAX_HEADER_BODY.to_le_bytes());
    bytes.extend_from_slice(&[0; 24]);
    let (t, largest) = measured(|| read(&bytes));
    assert!(t.is_err());
    assert!(
        largest <= allocation_bound(bytes.len()),
        "a {}-byte file claiming a {MAX_HEADER_BODY}-byte header allocated {largest} bytes",
        bytes.len()
    );

    // Checksummed values whose strings or lists claim huge lengths (bincode
    // varints: 0xfd then a u64).
    let huge = |n: u64| {
        let mut v = vec![0xfd];
        v.extend_from_slice(&n.to_le_bytes());
        v
    };
    for n in [1u64 << 20, 1 << 28, 1 << 40, 1 << 62, u64::MAX] {
        let entries = n.min(u64::from(u32::MAX)) as u32;
        let payloads = [
            // ThreadInfo { tid: 5, name: <n bytes> }
            (ChunkKind::ThreadInfo, [vec![5], huge(n)].concat()),
            // Notice { time_ns: 1, message: <n bytes> }
            (ChunkKind::Notice, [vec![1], huge(n)].concat()),
            // DeviceInfo { ordinal: 0, name: <n bytes>, .. }
            (ChunkKind::DeviceInfo, [vec![0], huge(n)].concat()),
            // DeviceInfo { ordinal: 0, name: "", total_memory: 1, attributes: <n pairs> }
            (ChunkKind::DeviceInfo, [vec![0, 0, 1], huge(n)].concat()),
            // ProcessEnd { end: (1, 1), reason: <n bytes>, .. }
            (ChunkKind::ProcessEnd, [vec![1, 1], huge(n)].concat()),
            // A name table of n entries (u32 at most).
            (ChunkKind::FunctionNames, entries.to_le_bytes().to_vec()),
        ];
        for (kind, payload) in payloads {
            let mut chunks = base.chunks.clone();
            let mut c = RawChunk {
                header: ChunkHeader::new(kind, 0, 0, 0, &payload),
                payload,
            };
            c.fix();
            chunks.insert(1, c);
            let bytes = base.join(&chunks, &base.tail);
            let what = || format!("a {kind:?} chunk claiming {n}");
            case(base, &what, &bytes, Expect::AtLeast(1), false, &mut stats);
            let t = read(&bytes).unwrap();
            assert_eq!(t.bad_chunks.len(), 1, "{}: {:?}", what(), t.bad_chunks);
            assert_eq!(t.chunks, base.full.chunks + 1, "{}", what());
        }
        // A file header whose executable name claims n bytes, checksum fixed.
        let mut body = encode_value(&ProcessHeader::default());
        // pid, ppid, forked_from (None), command_line (empty): 4 bytes, then the executable.
        body.truncate(4);
        body.extend_from_slice(&huge(n));
        let mut bytes = header[..12].to_vec();
        bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&body);
        bytes.extend_from_slice(&crc32(&body).to_le_bytes());
        let (t, largest) = measured(|| read(&bytes));
        let e = t.unwrap_err();
        assert!(e.contains("file header"), "{e}");
        assert!(
            largest <= allocation_bound(bytes.len()),
            "a file header claiming a {n}-byte string allocated {largest} bytes"
        );
    }
    eprintln!("length claims: largest allocation {} bytes", stats.largest);
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rtrace-robustness-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The same through the file API: load_trace, load_inputs over a directory
/// of damaged files, and export_files to a file.
#[test]
fn damaged_files_on_disk() {
    let bases = bases();
    let dir = temp_dir("files");
    let mut files = Vec::new();
    for seed in 0..60u64 {
        let mut rng = Rng::new(2_000_000 + seed);
        let base = &bases[rng.below(bases.len())];
        let mut bytes = base.bytes.clone();
        match seed % 4 {
            0 => bytes.truncate(base.header_end + rng.below(bytes.len() - base.header_end)),
            1 => {
                let at = base.header_end + rng.below(bytes.len() - base.header_end);
                bytes[at] ^= 0x40;
            }
            2 => {
                let at = base.header_end + rng.below(bytes.len() - base.header_end);
                let claim = MAX_CHUNK_PAYLOAD.to_le_bytes();
                let end = (at + 4).min(bytes.len());
                bytes[at..end].copy_from_slice(&claim[..end - at]);
            }
            _ => {
                let at = base.header_end + rng.below(bytes.len() - base.header_end);
                bytes.drain(at..bytes.len().min(at + 100));
            }
        }
        let path = dir.join(format!("{seed:03}-{}", base.name));
        std::fs::write(&path, &bytes).unwrap();
        let (loaded, largest) = measured(|| load_trace(&path));
        assert!(
            largest <= allocation_bound(bytes.len()),
            "{}: load_trace allocated {largest} bytes at once",
            path.display()
        );
        if let Ok(t) = loaded {
            files.push(path);
            assert!(t.header.pid != 0);
        }
    }
    // Files that are not traces are skipped in a directory.
    std::fs::write(dir.join("zz-empty.bin"), b"").unwrap();
    std::fs::write(dir.join("zz-text.bin"), b"not a trace at all").unwrap();
    let loaded = load_inputs(std::slice::from_ref(&dir)).unwrap();
    assert_eq!(loaded.traces.len(), files.len());
    assert_eq!(loaded.skipped.len(), 2);
    exercise(&loaded.traces);
    for format in [ExportFormat::Perfetto, ExportFormat::Chrome] {
        let out = dir.join("export.out");
        let outcome = rtrace_collector::export::export_files(&files, format, Some(&out)).unwrap();
        assert!(!outcome.warnings.is_empty());
        assert!(std::fs::metadata(&out).unwrap().len() > 0);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
