//! The `trace.bin` file format shared by `librtrace.so` (the writer) and the
//! `rtrace` collector (the reader).
//!
//! A trace file is a file header followed by self-delimiting chunks, appended
//! as the injected library's worker drains per-thread buffers. A process that
//! is killed at any point leaves a file that is readable up to its last whole
//! chunk.
//!
//! ```text
//! file   := header chunk*
//! header := MAGIC(8) major:u16 minor:u16 body_len:u32 body[body_len] crc32(body):u32
//!           body = bincode(standard) of ProcessHeader
//! chunk  := CHUNK_MAGIC:u32 kind:u16 flags:u16 payload_len:u32 crc32:u32
//!           thread:u64 seq:u64 dropped:u64 payload[payload_len]
//!           crc32 (CRC-32C) covers kind, flags, thread, seq, dropped and the payload
//! ```
//!
//! All integers are little-endian. Unknown chunk kinds are skipped by readers
//! (their length is known); a file whose major version is newer than
//! [`FORMAT_MAJOR`] is refused.
//!
//! ```
//! use rtrace_format::*;
//! let header = ProcessHeader { pid: 7, command_line: vec!["./app".into()], ..Default::default() };
//! let mut file = encode_file_header(&header);
//! let rec = ApiRecord { function: 3, result: 0, start_ns: 10, end_ns: 25, correlation: 1 };
//! let mut payload = Vec::new();
//! rec.write_to(&mut payload);
//! file.extend_from_slice(&ChunkHeader::new(ChunkKind::ApiRecords, 42, 0, 0, &payload).encode());
//! file.extend_from_slice(&payload);
//!
//! let mut reader = TraceReader::new(&file[..]).unwrap();
//! assert_eq!(reader.header().pid, 7);
//! let chunk = reader.next_chunk().unwrap().unwrap();
//! assert_eq!(chunk.header.thread, 42);
//! assert_eq!(chunk.api_records().unwrap(), vec![rec]);
//! assert!(reader.next_chunk().unwrap().is_none());
//! ```
#![deny(unsafe_code)]

use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::{self, Read};

mod crc;
pub use crc::crc32;

/// First bytes of every trace file.
pub const MAGIC: [u8; 8] = *b"RTRACE\0\x1a";
/// Major format version: readers refuse files with a newer major version.
pub const FORMAT_MAJOR: u16 = 1;
/// Minor format version: additions that older readers can skip.
pub const FORMAT_MINOR: u16 = 0;
/// First bytes of every chunk ("CHNK").
pub const CHUNK_MAGIC: u32 = u32::from_le_bytes(*b"CHNK");
/// Size of an encoded [`ChunkHeader`].
pub const CHUNK_HEADER_LEN: usize = 40;
/// Largest payload a reader accepts for one chunk (guards against corrupt lengths).
pub const MAX_CHUNK_PAYLOAD: u32 = 256 << 20;
/// Largest file-header body a reader accepts.
pub const MAX_HEADER_BODY: u32 = 16 << 20;

/// A pair of clock readings taken back to back, used to align clocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockAnchor {
    /// `CLOCK_MONOTONIC`, ns: the clock every timestamp in the trace is on.
    pub monotonic_ns: u64,
    /// `CLOCK_REALTIME`, ns since the Unix epoch.
    pub realtime_ns: u64,
}

/// Describes the traced process; the body of the file header.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessHeader {
    pub pid: u32,
    pub ppid: u32,
    /// Set in a forked child: the pid of the traced parent it was forked from.
    pub forked_from: Option<u32>,
    pub command_line: Vec<String>,
    pub executable: String,
    pub hostname: String,
    /// `/proc/sys/kernel/random/boot_id`: processes with the same boot id share
    /// one monotonic clock.
    pub boot_id: String,
    /// Version of the librtrace.so that wrote the file.
    pub writer_version: String,
    /// Clocks read when tracing started.
    pub start: ClockAnchor,
    /// Names of the clock domains used by timestamps ("CLOCK_MONOTONIC").
    pub clock: String,
}

/// Kinds of chunk. Readers skip kinds they do not know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ChunkKind {
    /// Function id → name table ([`FunctionName`] entries).
    FunctionNames,
    /// An array of [`ApiRecord`]s made by one thread.
    ApiRecords,
    /// A thread's identity ([`ThreadInfo`]).
    ThreadInfo,
    /// Written once when the process finishes tracing ([`ProcessEnd`]).
    ProcessEnd,
    /// Something the tracer wants the reader to know ([`Notice`]).
    Notice,
    /// An array of [`KernelRecord`]s.
    Kernels,
    /// An array of [`MemcpyRecord`]s.
    Memcpys,
    /// An array of [`MemsetRecord`]s.
    Memsets,
    /// Kernel name id → name (mangled) entries, same layout as [`ChunkKind::FunctionNames`].
    KernelNames,
    /// A device's identity and attributes ([`DeviceInfo`]).
    DeviceInfo,
    /// An array of [`MemoryRecord`]s (allocations and frees).
    Memory,
    /// An array of [`SyncRecord`]s (host synchronizations).
    Sync,
    /// An array of [`ContextRecord`]s.
    Contexts,
    /// An array of [`StreamRecord`]s.
    Streams,
    /// An array of [`ModuleRecord`]s.
    Modules,
    /// An array of [`FunctionRecord`]s (names in the kernel-name table).
    Functions,
    /// An array of [`PeerCopyRecord`]s (peer-to-peer copies).
    PeerCopies,
    /// NVTX string id → text (messages, names, registered strings), same layout as
    /// [`ChunkKind::FunctionNames`].
    NvtxStrings,
    /// An array of [`NvtxEvent`]s made by one thread (the chunk's `thread`).
    NvtxEvents,
    /// One loaded module's code image ([`ModuleImage`]): its content hash, CUPTI's CRC, and
    /// the image itself the first time that content is seen.
    ModuleImage,
    /// How PC sampling was set up on one context ([`PcSamplingConfig`], bincode).
    PcSamplingConfig,
    /// One read of a context's PC samples ([`PcSampleBatch`], bincode).
    PcSamples,
    /// A kind this reader does not know; carried so it can be counted.
    Unknown(u16),
}

impl ChunkKind {
    pub fn to_u16(self) -> u16 {
        match self {
            ChunkKind::FunctionNames => 1,
            ChunkKind::ApiRecords => 2,
            ChunkKind::ThreadInfo => 3,
            ChunkKind::ProcessEnd => 4,
            ChunkKind::Notice => 5,
            ChunkKind::Kernels => 6,
            ChunkKind::Memcpys => 7,
            ChunkKind::Memsets => 8,
            ChunkKind::KernelNames => 9,
            ChunkKind::DeviceInfo => 10,
            ChunkKind::Memory => 11,
            ChunkKind::Sync => 12,
            ChunkKind::Contexts => 13,
            ChunkKind::Streams => 14,
            ChunkKind::Modules => 15,
            ChunkKind::Functions => 16,
            ChunkKind::PeerCopies => 17,
            ChunkKind::NvtxStrings => 18,
            ChunkKind::NvtxEvents => 19,
            ChunkKind::ModuleImage => 20,
            ChunkKind::PcSamplingConfig => 21,
            ChunkKind::PcSamples => 22,
            ChunkKind::Unknown(k) => k,
        }
    }
    pub fn from_u16(v: u16) -> Self {
        match v {
            1 => ChunkKind::FunctionNames,
            2 => ChunkKind::ApiRecords,
            3 => ChunkKind::ThreadInfo,
            4 => ChunkKind::ProcessEnd,
            5 => ChunkKind::Notice,
            6 => ChunkKind::Kernels,
            7 => ChunkKind::Memcpys,
            8 => ChunkKind::Memsets,
            9 => ChunkKind::KernelNames,
            10 => ChunkKind::DeviceInfo,
            11 => ChunkKind::Memory,
            12 => ChunkKind::Sync,
            13 => ChunkKind::Contexts,
            14 => ChunkKind::Streams,
            15 => ChunkKind::Modules,
            16 => ChunkKind::Functions,
            17 => ChunkKind::PeerCopies,
            18 => ChunkKind::NvtxStrings,
            19 => ChunkKind::NvtxEvents,
            20 => ChunkKind::ModuleImage,
            21 => ChunkKind::PcSamplingConfig,
            22 => ChunkKind::PcSamples,
            k => ChunkKind::Unknown(k),
        }
    }
}

/// The fixed-size header in front of every chunk's payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkHeader {
    pub kind: ChunkKind,
    pub flags: u16,
    pub payload_len: u32,
    pub crc: u32,
    /// OS thread id (gettid) of the thread whose records these are; 0 for process-wide chunks.
    pub thread: u64,
    /// Sequence number of this chunk among the thread's chunks, from 0.
    pub seq: u64,
    /// Records this thread lost (buffer full) since its previous chunk.
    pub dropped: u64,
}

impl ChunkHeader {
    /// A header for `payload`, with its checksum computed.
    pub fn new(kind: ChunkKind, thread: u64, seq: u64, dropped: u64, payload: &[u8]) -> Self {
        let mut h = ChunkHeader {
            kind,
            flags: 0,
            payload_len: payload.len() as u32,
            crc: 0,
            thread,
            seq,
            dropped,
        };
        h.crc = h.checksum(payload);
        h
    }

    /// The checksum of this header's fields (except length and crc) and `payload`.
    pub fn checksum(&self, payload: &[u8]) -> u32 {
        let mut fixed = [0u8; 28];
        fixed[0..2].copy_from_slice(&self.kind.to_u16().to_le_bytes());
        fixed[2..4].copy_from_slice(&self.flags.to_le_bytes());
        fixed[4..12].copy_from_slice(&self.thread.to_le_bytes());
        fixed[12..20].copy_from_slice(&self.seq.to_le_bytes());
        fixed[20..28].copy_from_slice(&self.dropped.to_le_bytes());
        let c = crc::crc32_update(0, &fixed);
        crc::crc32_update(c, payload)
    }

    pub fn encode(&self) -> [u8; CHUNK_HEADER_LEN] {
        let mut b = [0u8; CHUNK_HEADER_LEN];
        b[0..4].copy_from_slice(&CHUNK_MAGIC.to_le_bytes());
        b[4..6].copy_from_slice(&self.kind.to_u16().to_le_bytes());
        b[6..8].copy_from_slice(&self.flags.to_le_bytes());
        b[8..12].copy_from_slice(&self.payload_len.to_le_bytes());
        b[12..16].copy_from_slice(&self.crc.to_le_bytes());
        b[16..24].copy_from_slice(&self.thread.to_le_bytes());
        b[24..32].copy_from_slice(&self.seq.to_le_bytes());
        b[32..40].copy_from_slice(&self.dropped.to_le_bytes());
        b
    }

    /// Decodes a header; `None` if the chunk magic is wrong.
    pub fn decode(b: &[u8; CHUNK_HEADER_LEN]) -> Option<Self> {
        if u32::from_le_bytes(b[0..4].try_into().unwrap()) != CHUNK_MAGIC {
            return None;
        }
        Some(ChunkHeader {
            kind: ChunkKind::from_u16(u16::from_le_bytes(b[4..6].try_into().unwrap())),
            flags: u16::from_le_bytes(b[6..8].try_into().unwrap()),
            payload_len: u32::from_le_bytes(b[8..12].try_into().unwrap()),
            crc: u32::from_le_bytes(b[12..16].try_into().unwrap()),
            thread: u64::from_le_bytes(b[16..24].try_into().unwrap()),
            seq: u64::from_le_bytes(b[24..32].try_into().unwrap()),
            dropped: u64::from_le_bytes(b[32..40].try_into().unwrap()),
        })
    }
}

/// One driver API call, as the injected library records it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ApiRecord {
    /// Index into the trace's function-name table.
    pub function: u32,
    /// The call's return value (a `CUresult`), as the 32 bits the caller got.
    pub result: u32,
    /// Host `CLOCK_MONOTONIC` ns when the wrapper was entered.
    pub start_ns: u64,
    /// Host `CLOCK_MONOTONIC` ns when the real function returned.
    pub end_ns: u64,
    /// Process-unique id linking this call to the work it caused.
    pub correlation: u64,
}

impl ApiRecord {
    pub const SIZE: usize = 32;

    pub fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_bytes());
    }

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[0..4].copy_from_slice(&self.function.to_le_bytes());
        b[4..8].copy_from_slice(&self.result.to_le_bytes());
        b[8..16].copy_from_slice(&self.start_ns.to_le_bytes());
        b[16..24].copy_from_slice(&self.end_ns.to_le_bytes());
        b[24..32].copy_from_slice(&self.correlation.to_le_bytes());
        b
    }

    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        ApiRecord {
            function: u32::from_le_bytes(b[0..4].try_into().unwrap()),
            result: u32::from_le_bytes(b[4..8].try_into().unwrap()),
            start_ns: u64::from_le_bytes(b[8..16].try_into().unwrap()),
            end_ns: u64::from_le_bytes(b[16..24].try_into().unwrap()),
            correlation: u64::from_le_bytes(b[24..32].try_into().unwrap()),
        }
    }
}

/// One entry of the function-name table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionName {
    pub id: u32,
    pub name: String,
}

/// Encodes a function-name table payload: `count:u32 (id:u32 len:u16 bytes)*`.
pub fn encode_function_names<'a>(names: impl IntoIterator<Item = (u32, &'a str)>) -> Vec<u8> {
    let mut body = Vec::new();
    let mut count = 0u32;
    for (id, name) in names {
        let bytes = &name.as_bytes()[..name.len().min(u16::MAX as usize)];
        body.extend_from_slice(&id.to_le_bytes());
        body.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        body.extend_from_slice(bytes);
        count += 1;
    }
    let mut out = count.to_le_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

/// A thread's identity, sent once per thread before its first records.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadInfo {
    pub tid: u64,
    /// The thread's name (`/proc/self/task/<tid>/comm`) when it was first seen.
    pub name: String,
}

/// Written once, when tracing ends normally (exit, `_exit`, a fatal signal).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessEnd {
    pub end: ClockAnchor,
    /// How tracing ended: "exit", "_exit", "signal 15", ...
    pub reason: String,
    /// API records written to this file.
    pub records: u64,
    /// Records lost because a thread's buffer was full.
    pub dropped: u64,
    /// Driver entry points handed out by cuGetProcAddress/dlsym that rtrace could
    /// not wrap (their calls are not recorded).
    pub unwrapped_lookups: u64,
    /// Threads that recorded at least one call.
    pub threads: u64,
}

/// A GPU as the driver describes it, written once per device when GPU activity starts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// Device ordinal (what GPU records call `device`).
    pub ordinal: u32,
    pub name: String,
    /// `cuDeviceTotalMem`, bytes.
    pub total_memory: u64,
    /// `(CUdevice_attribute, value)` pairs, for every attribute rtrace reads (cuda.h numbering).
    pub attributes: Vec<(i32, i32)>,
}

/// Something the tracer tells the reader (tracing disabled, a failed setup step).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    pub time_ns: u64,
    pub message: String,
}

fn bincode_config() -> impl bincode::config::Config {
    bincode::config::standard()
}

/// Encodes a serde value as a chunk payload or header body.
pub fn encode_value<T: Serialize>(v: &T) -> Vec<u8> {
    bincode::serde::encode_to_vec(v, bincode_config()).expect("encoding to a Vec cannot fail")
}

/// Decodes a serde value written by [`encode_value`].
///
/// bincode allocates the length a string claims before reading it, so the
/// decoder gets a byte limit of at least 16 times `b.len()` (64 KiB, 1, 16 or
/// 256 MiB): a corrupt length fails to decode instead of asking for up to
/// 2^64 bytes (which aborts the process).
pub fn decode_value<T: for<'de> Deserialize<'de>>(b: &[u8]) -> Result<T, String> {
    fn decode<T: for<'de> Deserialize<'de>, const LIMIT: usize>(b: &[u8]) -> Result<T, String> {
        let config = bincode::config::standard().with_limit::<LIMIT>();
        bincode::serde::decode_from_slice(b, config)
            .map(|(v, _)| v)
            .map_err(|e| e.to_string())
    }
    match b.len() {
        0..=4096 => decode::<T, { 64 << 10 }>(b),
        4097..=65536 => decode::<T, { 1 << 20 }>(b),
        65537..=1048576 => decode::<T, { 16 << 20 }>(b),
        _ => decode::<T, { 256 << 20 }>(b),
    }
}

/// The encoded file header for `h`.
pub fn encode_file_header(h: &ProcessHeader) -> Vec<u8> {
    let body = encode_value(h);
    let mut out = Vec::with_capacity(body.len() + 20);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_MAJOR.to_le_bytes());
    out.extend_from_slice(&FORMAT_MINOR.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(&crc32(&body).to_le_bytes());
    out
}

/// Why a trace could not be read (further).
#[derive(Debug)]
pub enum ReadError {
    /// The first bytes are not rtrace's magic.
    NotATrace,
    /// The file was written by a newer rtrace with an incompatible format.
    NewerFormat { major: u16, minor: u16 },
    /// The file ends inside a header or chunk that starts at `offset`.
    Truncated { offset: u64, what: &'static str },
    /// The bytes at `offset` are not a valid header or chunk.
    Corrupt { offset: u64, why: String },
    /// An I/O error at `offset`.
    Io { offset: u64, error: io::Error },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::NotATrace => write!(f, "not an rtrace trace (bad magic bytes)"),
            ReadError::NewerFormat { major, minor } => write!(
                f,
                "written in trace format {major}.{minor}, newer than this rtrace reads \
                 ({FORMAT_MAJOR}.x): use a newer rtrace"
            ),
            ReadError::Truncated { offset, what } => {
                write!(
                    f,
                    "truncated: the file ends inside the {what} at byte {offset}"
                )
            }
            ReadError::Corrupt { offset, why } => write!(f, "corrupt at byte {offset}: {why}"),
            ReadError::Io { offset, error } => write!(f, "read error at byte {offset}: {error}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// A chunk read from a trace.
#[derive(Clone, Debug)]
pub struct Chunk {
    /// Byte offset of the chunk in its file.
    pub offset: u64,
    pub header: ChunkHeader,
    pub payload: Vec<u8>,
}

impl Chunk {
    /// The API records of an [`ChunkKind::ApiRecords`] chunk.
    pub fn api_records(&self) -> Result<Vec<ApiRecord>, String> {
        if !self.payload.len().is_multiple_of(ApiRecord::SIZE) {
            return Err(format!(
                "API record chunk of {} bytes is not a multiple of {}",
                self.payload.len(),
                ApiRecord::SIZE
            ));
        }
        Ok(self
            .payload
            .chunks_exact(ApiRecord::SIZE)
            .map(|b| ApiRecord::from_bytes(b.try_into().unwrap()))
            .collect())
    }

    /// The entries of a [`ChunkKind::FunctionNames`] chunk.
    pub fn function_names(&self) -> Result<Vec<FunctionName>, String> {
        let p = &self.payload;
        let bad = || "malformed function-name table".to_string();
        let count = u32::from_le_bytes(p.get(0..4).ok_or_else(bad)?.try_into().unwrap());
        let mut at = 4usize;
        let mut out = Vec::with_capacity(count.min(1 << 16) as usize);
        for _ in 0..count {
            let id = u32::from_le_bytes(p.get(at..at + 4).ok_or_else(bad)?.try_into().unwrap());
            let len =
                u16::from_le_bytes(p.get(at + 4..at + 6).ok_or_else(bad)?.try_into().unwrap());
            let name = p.get(at + 6..at + 6 + len as usize).ok_or_else(bad)?;
            out.push(FunctionName {
                id,
                name: String::from_utf8_lossy(name).into_owned(),
            });
            at += 6 + len as usize;
        }
        Ok(out)
    }

    /// Decodes a serde payload ([`ThreadInfo`], [`ProcessEnd`], [`Notice`]).
    pub fn value<T: for<'de> Deserialize<'de>>(&self) -> Result<T, String> {
        decode_value(&self.payload)
    }
}

/// Streams the header and chunks of one trace.
pub struct TraceReader<R: Read> {
    inner: R,
    offset: u64,
    header: ProcessHeader,
    version: (u16, u16),
    done: bool,
}

/// Reads `len` bytes, or fewer where the input ends, into a vector that
/// grows as they arrive (64 KiB, then doubling, never past `len`): a corrupt
/// length field makes the reader allocate about what the input holds, not
/// what the field claims.
fn read_bounded<R: Read>(r: &mut R, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    while buf.len() < len {
        let capacity = (buf.capacity() * 2).max(64 << 10).min(len);
        buf.reserve_exact(capacity - buf.len());
        let want = capacity - buf.len();
        if r.by_ref().take(want as u64).read_to_end(&mut buf)? < want {
            break;
        }
    }
    Ok(buf)
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl<R: Read> TraceReader<R> {
    /// Reads and checks the file header.
    pub fn new(mut inner: R) -> Result<Self, ReadError> {
        let io_err = |error| ReadError::Io { offset: 0, error };
        let mut fixed = [0u8; 16];
        let n = read_full(&mut inner, &mut fixed).map_err(io_err)?;
        if n < 8 || fixed[..8] != MAGIC {
            if n < 8 && fixed[..n] == MAGIC[..n] && n > 0 {
                return Err(ReadError::Truncated {
                    offset: 0,
                    what: "file header",
                });
            }
            return Err(ReadError::NotATrace);
        }
        if n < 16 {
            return Err(ReadError::Truncated {
                offset: 0,
                what: "file header",
            });
        }
        let major = u16::from_le_bytes([fixed[8], fixed[9]]);
        let minor = u16::from_le_bytes([fixed[10], fixed[11]]);
        if major > FORMAT_MAJOR {
            return Err(ReadError::NewerFormat { major, minor });
        }
        let len = u32::from_le_bytes(fixed[12..16].try_into().unwrap());
        if len > MAX_HEADER_BODY {
            return Err(ReadError::Corrupt {
                offset: 12,
                why: format!("file header claims {len} bytes"),
            });
        }
        let mut body = read_bounded(&mut inner, len as usize + 4).map_err(io_err)?;
        if body.len() < len as usize + 4 {
            return Err(ReadError::Truncated {
                offset: 0,
                what: "file header",
            });
        }
        let crc = u32::from_le_bytes(body[len as usize..].try_into().unwrap());
        body.truncate(len as usize);
        if crc32(&body) != crc {
            return Err(ReadError::Corrupt {
                offset: 16,
                why: "file header checksum mismatch".into(),
            });
        }
        let header: ProcessHeader = decode_value(&body).map_err(|why| ReadError::Corrupt {
            offset: 16,
            why: format!("file header: {why}"),
        })?;
        Ok(TraceReader {
            inner,
            offset: 16 + len as u64 + 4,
            header,
            version: (major, minor),
            done: false,
        })
    }

    pub fn header(&self) -> &ProcessHeader {
        &self.header
    }

    /// The (major, minor) format version of the file.
    pub fn version(&self) -> (u16, u16) {
        self.version
    }

    /// Bytes consumed so far: the offset where the next chunk starts.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next whole, checksummed chunk; `Ok(None)` at a clean end of file.
    /// After an error, the reader returns `Ok(None)`.
    pub fn next_chunk(&mut self) -> Result<Option<Chunk>, ReadError> {
        if self.done {
            return Ok(None);
        }
        let r = self.read_chunk();
        if !matches!(r, Ok(Some(_))) {
            self.done = true;
        }
        r
    }

    fn read_chunk(&mut self) -> Result<Option<Chunk>, ReadError> {
        let start = self.offset;
        let mut hb = [0u8; CHUNK_HEADER_LEN];
        let n = read_full(&mut self.inner, &mut hb).map_err(|error| ReadError::Io {
            offset: start,
            error,
        })?;
        if n == 0 {
            return Ok(None);
        }
        if n < CHUNK_HEADER_LEN {
            return Err(ReadError::Truncated {
                offset: start,
                what: "chunk header",
            });
        }
        let header = ChunkHeader::decode(&hb).ok_or_else(|| ReadError::Corrupt {
            offset: start,
            why: "no chunk starts here (bad chunk magic)".into(),
        })?;
        if header.payload_len > MAX_CHUNK_PAYLOAD {
            return Err(ReadError::Corrupt {
                offset: start,
                why: format!("chunk claims {} bytes", header.payload_len),
            });
        }
        let payload =
            read_bounded(&mut self.inner, header.payload_len as usize).map_err(|error| {
                ReadError::Io {
                    offset: start,
                    error,
                }
            })?;
        if payload.len() < header.payload_len as usize {
            return Err(ReadError::Truncated {
                offset: start,
                what: "chunk",
            });
        }
        if header.checksum(&payload) != header.crc {
            return Err(ReadError::Corrupt {
                offset: start,
                why: "chunk checksum mismatch".into(),
            });
        }
        self.offset = start + CHUNK_HEADER_LEN as u64 + payload.len() as u64;
        Ok(Some(Chunk {
            offset: start,
            header,
            payload,
        }))
    }
}

mod device;
pub use device::*;
mod gpu;
pub use gpu::*;
mod pcsampling;
pub use pcsampling::*;

#[cfg(test)]
mod tests;

/// Parses a time offset: a number with an optional unit (`s`, `ms`, `us`, `ns`; none means
/// seconds), e.g. `2`, `1.5s`, `250ms`, `30us`, `1500ns`.
pub fn parse_time(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, scale) = [
        ("ns", 1u64),
        ("us", 1_000),
        ("µs", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
    ]
    .iter()
    .find_map(|&(unit, scale)| t.strip_suffix(unit).map(|n| (n.trim(), scale)))
    .unwrap_or((t, 1_000_000_000));
    let bad = || format!("'{s}' is not a time (e.g. 2, 1.5s, 250ms, 30us, 1500ns)");
    if num.is_empty() || num.starts_with(['-', '+']) {
        return Err(bad());
    }
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if !int.chars().all(|c| c.is_ascii_digit()) || !frac.chars().all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let int: u128 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| bad())?
    };
    // Digits below a nanosecond are cut off.
    let digits = scale.to_string().len() - 1;
    let frac_ns: u128 = if frac.is_empty() {
        0
    } else {
        let kept = &frac[..frac.len().min(digits)];
        let pad = digits - kept.len();
        if kept.is_empty() {
            0
        } else {
            kept.parse::<u128>().map_err(|_| bad())? * 10u128.pow(pad as u32)
        }
    };
    let ns = int * u128::from(scale) + frac_ns;
    u64::try_from(ns).map_err(|_| format!("'{s}' is too large"))
}
