//! The variable-length values of a trace, bincode-encoded: the file header's body
//! ([`ProcessHeader`]), thread identities, the end record, device descriptions and notices;
//! and the file header around its body.

use crate::crc::crc32;
use serde::{Deserialize, Serialize};

/// First bytes of every trace file.
pub const MAGIC: [u8; 8] = *b"RTRACE\0\x1a";
/// Major format version: readers refuse files with a newer major version. (3.0: a thread's
/// API records as its ring held them, times in ticks, with the clock samples that convert them
/// (chunk kind 34, [`crate::ticks`]), where 2.x writers wrote kind 2 in ns: a 2.x reader would
/// skip them, so it refuses the file instead; 3.0 readers read 2.x and 1.x files.)
pub const FORMAT_MAJOR: u16 = 3;
/// Minor format version: additions that older readers can skip. (2.0: ring regions, chunk
/// `seq` as a ring position, and [`ProcessHeader::session`] in the file header's body. 2.1: GPU
/// buffer regions and their layout, kernel name addresses and untimed work (chunk kinds 30 to
/// 33); runtime API records, [`crate::RUNTIME_FUNCTION`] and [`crate::IN_RUNTIME`] in an API
/// record's function; [`ProcessHeader::rank_env`] after the session, written only when some
/// rank variable was set, which 2.1 readers before it leave unread.)
pub const FORMAT_MINOR: u16 = 0;
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
    /// The token of the `rtrace record` run the process belongs to (`RTRACE_SESSION`), by
    /// which `rtrace record` knows the traces it made; empty when none was given. Encoded
    /// after the other fields ([`encode_header_body`]): readers of format 1.0 leave it
    /// unread, and a 1.0 file reads with it empty.
    #[serde(skip)]
    pub session: String,
    /// The launcher's rank variables ([`crate::env::RANK_VARS`]) set when tracing started,
    /// as (name, value), in that list's order; empty when none was set. Encoded after the
    /// session, only when not empty: older readers leave it unread, and a file without it
    /// reads with it empty.
    #[serde(skip)]
    pub rank_env: Vec<(String, String)>,
}

impl ProcessHeader {
    /// Whether the trace is a GPU metrics sampler's ([`crate::gpu_metrics::GPU_SAMPLER`]), not
    /// a traced process's.
    pub fn is_gpu_sampler(&self) -> bool {
        self.writer_version
            .starts_with(crate::gpu_metrics::GPU_SAMPLER)
    }

    /// The first of the launcher's rank variables ([`crate::env::RANK_VARS`], in that order)
    /// the process had, with its value.
    pub fn rank(&self) -> Option<(&str, &str)> {
        crate::env::RANK_VARS.iter().find_map(|&name| {
            let (n, v) = self.rank_env.iter().find(|(n, _)| n == name)?;
            Some((n.as_str(), v.as_str()))
        })
    }
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

/// A [`ThreadInfo`] with borrowed text: the same fields in the same order, so it encodes to
/// the same bytes ([`encode_value_into`] writes it without allocating).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ThreadInfoRef<'a> {
    pub tid: u64,
    pub name: &'a str,
}

/// A [`ProcessEnd`] with borrowed text: the same fields in the same order, so it encodes to
/// the same bytes (librtrace.so writes its end record without allocating, perhaps from a
/// signal handler).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ProcessEndRef<'a> {
    pub end: ClockAnchor,
    pub reason: &'a str,
    pub records: u64,
    pub dropped: u64,
    pub unwrapped_lookups: u64,
    pub threads: u64,
}

/// The start of every notice about capture control (what gates recording, which kernels are
/// kept, what was left out, settings that could not be read): `capture: ...`.
pub const CAPTURE_NOTICE: &str = "capture";
/// The driver call capture control records even while it is not recording (GPU activity
/// starts after it). A reader credits it to no external id pushed while recording was paused
/// ([`crate::NvtxKind::ExternalPushPaused`]): a block wholly outside the capture stays out of
/// the summaries even when a library initialised the driver inside it.
pub const RECORDED_WHILE_PAUSED: &str = "cuInit";

/// The start of every notice about PC sampling: `PC sampling on for context N: ...` for each
/// context sampled ([`PC_SAMPLING_ON`]), `PC sampling off: WHY`, and `PC sampling: ...` for
/// samples lost or stall reasons the chip does not have.
pub const PC_SAMPLING_NOTICE: &str = "PC sampling";

/// The start of the notice that a context is sampled (`PC sampling on for context N: ...`).
pub const PC_SAMPLING_ON: &str = "PC sampling on";

/// The start of the notice that the trace file reached the process's file size limit
/// (`RLIMIT_FSIZE`) and nothing more is written: a reader takes it as the trace's end where no
/// end record follows.
pub const SIZE_LIMIT_NOTICE: &str = "the trace file reached the process's file size limit";

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

/// Encodes a serde value into `buf`, as [`encode_value`] does, without allocating; the
/// number of bytes written, or why it does not fit.
pub fn encode_value_into<T: Serialize>(v: &T, buf: &mut [u8]) -> Result<usize, String> {
    bincode::serde::encode_into_slice(v, buf, bincode_config()).map_err(|e| e.to_string())
}

/// Decodes a serde value written by [`encode_value`].
///
/// bincode allocates the length a string claims before reading it, so the
/// decoder gets a byte limit of at least 16 times `b.len()` (64 KiB, 1, 16 or
/// 256 MiB): a corrupt length fails to decode instead of asking for up to
/// 2^64 bytes (which aborts the process).
pub fn decode_value<T: for<'de> Deserialize<'de>>(b: &[u8]) -> Result<T, String> {
    decode_prefix(b).map(|(v, _)| v)
}

/// Decodes a value from the start of `b` as [`decode_value`] does; the value and the bytes
/// it took.
fn decode_prefix<T: for<'de> Deserialize<'de>>(b: &[u8]) -> Result<(T, usize), String> {
    fn decode<T: for<'de> Deserialize<'de>, const LIMIT: usize>(
        b: &[u8],
    ) -> Result<(T, usize), String> {
        let config = bincode::config::standard().with_limit::<LIMIT>();
        bincode::serde::decode_from_slice(b, config).map_err(|e| e.to_string())
    }
    match b.len() {
        0..=4096 => decode::<T, { 64 << 10 }>(b),
        4097..=65536 => decode::<T, { 1 << 20 }>(b),
        65537..=1048576 => decode::<T, { 16 << 20 }>(b),
        _ => decode::<T, { 256 << 20 }>(b),
    }
}

/// The file header's body for `h`: its fields, then [`ProcessHeader::session`] (format 1.1),
/// then [`ProcessHeader::rank_env`] when it is not empty (a body without it reads the same
/// as before).
pub fn encode_header_body(h: &ProcessHeader) -> Vec<u8> {
    let mut body = encode_value(h);
    body.extend_from_slice(&encode_value(&h.session));
    if !h.rank_env.is_empty() {
        body.extend_from_slice(&encode_value(&h.rank_env));
    }
    body
}

/// The [`ProcessHeader`] of a file header's body ([`encode_header_body`]); a body without the
/// session (format 1.0) leaves it empty, one without the rank variables leaves them empty.
pub fn decode_header_body(b: &[u8]) -> Result<ProcessHeader, String> {
    let (mut header, mut used): (ProcessHeader, usize) = decode_prefix(b)?;
    if used < b.len() {
        let (session, n) = decode_prefix(&b[used..]).map_err(|e| format!("session: {e}"))?;
        header.session = session;
        used += n;
    }
    if used < b.len() {
        header.rank_env = decode_value(&b[used..]).map_err(|e| format!("rank variables: {e}"))?;
    }
    Ok(header)
}

/// The encoded file header for `h`.
pub fn encode_file_header(h: &ProcessHeader) -> Vec<u8> {
    let body = encode_header_body(h);
    let mut out = Vec::with_capacity(body.len() + 20);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_MAJOR.to_le_bytes());
    out.extend_from_slice(&FORMAT_MINOR.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(&crc32(&body).to_le_bytes());
    out
}
