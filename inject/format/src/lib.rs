//! The `trace.bin` file format shared by `librtrace.so` (the writer) and the
//! `rtrace` collector (the reader).
//!
//! A trace file is a file header followed by self-delimiting chunks, appended
//! as the injected library's worker drains per-thread buffers. The buffers are
//! themselves chunks of the file ([`ring`]), so a process that ends at any point
//! leaves a file that holds every record it made: [`TraceReader`] rebuilds
//! those no chunk held.
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

mod codec;
mod crc;
mod cupti;
pub mod env;
mod output;
mod time;

mod api;
mod chunk;
mod payload;
mod reader;
mod values;

mod device;
mod gpu;
mod gpu_metrics;
pub mod gpu_region;
pub mod metric_sets;
mod pcsampling;
mod profiling;
pub mod ring;
mod runtime;
mod source_counters;
pub mod ticks;

pub use api::*;
pub use chunk::*;
pub use crc::crc32;
pub use cupti::{CUPTI_DIRS, CUPTI_SONAME, GPU_ACTIVITY_OFF, GPU_ACTIVITY_ON};
pub use device::*;
pub use gpu::*;
pub use gpu_metrics::*;
pub use output::*;
pub use payload::*;
pub use pcsampling::*;
pub use profiling::*;
pub use reader::*;
pub use runtime::*;
pub use source_counters::*;
pub use ticks::{ClockTrailer, TICKS_TSC};
pub use time::*;
pub use values::*;

#[cfg(test)]
mod tests;
