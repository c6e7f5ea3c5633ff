//! The first read of a trace file, through the format crate's [`TraceReader`]: its header,
//! names, resources and other small chunks kept in a [`Trace`], its records handed to a
//! [`RecordSink`] a chunk at a time ([`KeepAll`] keeps them too: [`load_trace`]). A file
//! whose header cannot be read is an error ([`LoadError`]); damage after the header (a
//! truncated or corrupt chunk) ends the read, and the chunks before it are kept, with the
//! damage described in [`Trace::damage`]. A record that ends before it starts is set aside
//! and counted, with its offset, in [`Trace::damaged`] (the rereads of `index.rs` set it aside
//! again, uncounted).

use super::inputs::{each_input, open_trace_file, LoadError};
use super::records::{Kind, Records};
use crate::model::{DamagedRecord, Trace};
use rtrace_format::ring::FLAG_SALVAGED;
use rtrace_format::{
    Chunk, ChunkKind, DeviceInfo, Notice, ProcessEnd, ProcessHeader, ThreadInfo, TraceReader,
    CHUNK_HEADER_LEN,
};
use std::collections::HashMap;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

/// Where [`Trace::read_with`] hands the records (API, GPU, NVTX, memory, synchronization) it
/// does not keep itself, a chunk's worth at a time. The chunk's thread (for API records and
/// NVTX events) is in the trace's threads already.
pub trait RecordSink {
    fn records(&mut self, trace: &mut Trace, chunk: &Chunk, records: Records);
}

/// The [`RecordSink`] of [`Trace::read`]: every record kept in the [`Trace`].
pub struct KeepAll;

impl RecordSink for KeepAll {
    fn records(&mut self, trace: &mut Trace, chunk: &Chunk, records: Records) {
        match records {
            Records::Api(v) => trace.thread_mut(chunk.header.thread).records.extend(v),
            Records::Nvtx(v) => trace.thread_mut(chunk.header.thread).nvtx.extend(v),
            Records::Kernels(v) => trace.kernels.extend(v),
            Records::Memcpys(v) => trace.memcpys.extend(v),
            Records::PeerCopies(v) => {
                trace.memcpys.extend(v.iter().map(|p| p.copy));
                trace.peer_copies.extend(v);
            }
            Records::Memsets(v) => trace.memsets.extend(v),
            Records::Memory(v) => trace.memory.extend(v),
            Records::Syncs(v) => trace.syncs.extend(v),
        }
    }
}

impl Trace {
    /// Reads a trace from `input`; `path` names it in messages.
    ///
    /// Fails only when the file header cannot be read; later damage is
    /// recorded in [`Trace::damage`].
    pub fn read<R: Read>(path: &Path, input: R) -> Result<Trace, LoadError> {
        let mut trace = Trace::read_with(path, input, &mut KeepAll)?;
        // A runtime call's record is written when it returns, after the driver calls it
        // made: each thread's records are put back in order of start (a stable sort of
        // records already in order but for those).
        for t in trace.threads.values_mut() {
            if t.records
                .iter()
                .any(|r| rtrace_format::runtime_cbid(r.function).is_some())
            {
                t.records.sort_by_key(|r| r.start_ns);
            }
        }
        Ok(trace)
    }

    /// [`Trace::read`], handing the records to `sink` instead of keeping them ([`KeepAll`]
    /// keeps them): what `rtrace report` folds as it reads ([`crate::report`]).
    pub fn read_with<R: Read>(
        path: &Path,
        input: R,
        sink: &mut dyn RecordSink,
    ) -> Result<Trace, LoadError> {
        let mut reader = TraceReader::new(input).map_err(|error| LoadError::Header {
            path: path.to_path_buf(),
            error,
        })?;
        let trace = Trace::begin(path, &reader);
        Ok(trace.read_chunks(sink, &mut || next_decoded(&mut reader)))
    }

    /// [`Trace::read_with`] with the reading and checking of chunks on a thread of their own
    /// and their decoding on another, a few chunks ahead of `sink` (which gets the same chunks
    /// in the same order).
    pub fn read_ahead<R: Read + Send>(
        path: &Path,
        input: R,
        sink: &mut dyn RecordSink,
    ) -> Result<Trace, LoadError> {
        let mut reader = TraceReader::new(input).map_err(|error| LoadError::Header {
            path: path.to_path_buf(),
            error,
        })?;
        let trace = Trace::begin(path, &reader);
        let (send_read, receive_read) = std::sync::mpsc::sync_channel::<Step>(AHEAD);
        let (send, receive) = std::sync::mpsc::sync_channel::<Step>(AHEAD);
        Ok(std::thread::scope(|s| {
            s.spawn(move || loop {
                let step = next_read(&mut reader);
                if let Step::Chunk(c, _) = &step {
                    // Counted here, not by a reader wrapping `input`: the payloads are read
                    // into their vectors without zeroing them first, as a wrapper without
                    // `read_buf` (not stable) would (a tenth of this thread's time).
                    if c.header.flags & FLAG_SALVAGED == 0 {
                        crate::progress::advance((CHUNK_HEADER_LEN + c.payload.len()) as u64);
                    }
                }
                let last = !matches!(step, Step::Chunk(..));
                // The decoder stops taking only when it has the last one.
                if send_read.send(step).is_err() || last {
                    break;
                }
            });
            s.spawn(move || {
                for step in receive_read {
                    let step = match step {
                        Step::Chunk(chunk, _) => {
                            let decoded = decode_chunk(&chunk);
                            Step::Chunk(chunk, decoded)
                        }
                        other => other,
                    };
                    let last = !matches!(step, Step::Chunk(..));
                    // The consumer stops taking only when it has the last one.
                    if send.send(step).is_err() || last {
                        break;
                    }
                }
            });
            let mut next = || receive.recv().unwrap_or(Step::End { write_error: None });
            trace.read_chunks(sink, &mut next)
        }))
    }

    /// An empty trace of the file `reader` has read the header of.
    fn begin<R: Read>(path: &Path, reader: &TraceReader<R>) -> Trace {
        Trace {
            path: path.to_path_buf(),
            format_version: reader.version(),
            header: reader.header().clone(),
            ..Default::default()
        }
    }

    /// Takes the chunks `next` gives, until the end or the damage.
    fn read_chunks(mut self, sink: &mut dyn RecordSink, next: &mut dyn FnMut() -> Step) -> Trace {
        let trace = &mut self;
        let mut api_read = 0u64;
        loop {
            match next() {
                Step::Chunk(chunk, decoded) => {
                    trace.chunks += 1;
                    trace.dropped = trace.dropped.saturating_add(chunk.header.dropped);
                    let thread = chunk.header.thread;
                    if chunk.header.dropped > 0 && thread != 0 {
                        let t = trace.thread_mut(thread);
                        t.dropped = t.dropped.saturating_add(chunk.header.dropped);
                    }
                    if let Some((kind, decoded)) = decoded {
                        match decoded {
                            Ok((records, damaged)) => {
                                damaged.into_iter().for_each(|d| trace.damaged.add(d));
                                if let Records::Api(v) = &records {
                                    name_runtime_calls(trace, v);
                                    api_read += v.len() as u64;
                                    if chunk.header.flags & FLAG_SALVAGED != 0 {
                                        trace.salvaged += v.len() as u64;
                                    }
                                } else if chunk.header.flags & FLAG_SALVAGED != 0 {
                                    trace.salvaged_gpu += records.count() as u64;
                                }
                                if matches!(kind, Kind::Api | Kind::Nvtx) {
                                    trace.thread_mut(thread);
                                }
                                sink.records(trace, &chunk, records);
                            }
                            Err(why) => {
                                let bad = format!("chunk at byte {}: {why}", chunk.offset);
                                trace.bad_chunks.push(bad);
                            }
                        }
                    } else {
                        read_other(trace, &chunk);
                    }
                }
                Step::End { write_error } => {
                    trace.write_error = write_error;
                    break;
                }
                Step::Failed { error, write_error } => {
                    trace.write_error = write_error;
                    let records = api_read;
                    trace.damage = Some(format!(
                        "{error}; reported the {} {} ({records} {}) before it",
                        trace.chunks,
                        plural(trace.chunks, "chunk", "chunks"),
                        plural(records, "record", "records"),
                    ));
                    break;
                }
            }
        }
        self.name_threads_from_nvtx();
        self
    }
}

/// Chunks read ahead of the sink by [`Trace::read_ahead`].
const AHEAD: usize = 4;

/// What the reader gives next: a chunk (decoded, when it holds records), the end, or damage.
enum Step {
    Chunk(Chunk, Option<(Kind, Result<Decoded, String>)>),
    End {
        write_error: Option<u64>,
    },
    Failed {
        error: rtrace_format::ReadError,
        write_error: Option<u64>,
    },
}

/// The next chunk of `reader`, its records decoded.
fn next_decoded<R: Read>(reader: &mut TraceReader<R>) -> Step {
    match next_read(reader) {
        Step::Chunk(chunk, _) => {
            let decoded = decode_chunk(&chunk);
            Step::Chunk(chunk, decoded)
        }
        other => other,
    }
}

/// A chunk's records, those that end before they start set aside, and those.
type Decoded = (Records, Vec<DamagedRecord>);

/// The records of `chunk` decoded, if it is a chunk of records, with those that end before
/// they start set aside (on the decoding thread of [`Trace::read_ahead`]).
fn decode_chunk(chunk: &Chunk) -> Option<(Kind, Result<Decoded, String>)> {
    let decoded = |k| {
        let mut records = Records::decode(k, chunk)?;
        let size = records.record_size() as u64;
        let first = chunk.offset + CHUNK_HEADER_LEN as u64;
        let mut damaged = Vec::new();
        records.set_aside_damaged(|i, kind, start_ns, end_ns| {
            damaged.push(DamagedRecord {
                offset: first + i as u64 * size,
                kind,
                start_ns,
                end_ns,
            })
        });
        Ok((records, damaged))
    };
    Kind::of(chunk.header.kind).map(|k| (k, decoded(k)))
}

/// The next chunk of `reader`, not decoded yet.
fn next_read<R: Read>(reader: &mut TraceReader<R>) -> Step {
    match reader.next_chunk() {
        Ok(Some(chunk)) => Step::Chunk(chunk, None),
        Ok(None) => Step::End {
            write_error: reader.write_error(),
        },
        Err(error) => Step::Failed {
            error,
            write_error: reader.write_error(),
        },
    }
}

/// Names the runtime API calls among `records` in `trace.functions`: their names are not in
/// the trace's function-name table but in the format crate's ([`rtrace_format::runtime_api_name`]);
/// and the driver calls made inside them ([`rtrace_format::IN_RUNTIME`]) as their function.
fn name_runtime_calls(trace: &mut Trace, records: &[rtrace_format::ApiRecord]) {
    for r in records {
        if rtrace_format::in_runtime(r.function) && !trace.functions.contains_key(&r.function) {
            let base = rtrace_format::base_function(r.function);
            let name = trace.function_name(base).into_owned();
            trace.functions.insert(r.function, name);
        } else if let Some(cbid) = rtrace_format::runtime_cbid(r.function) {
            trace.functions.entry(r.function).or_insert_with(|| {
                rtrace_format::runtime_api_name(cbid)
                    .map_or_else(|| format!("cuda#{cbid}"), str::to_string)
            });
        }
    }
}

/// Keeps in `trace` what a chunk that holds no records ([`Kind::of`]) says.
fn read_other(trace: &mut Trace, chunk: &Chunk) {
    let thread = chunk.header.thread;
    let bad = |why: String| format!("chunk at byte {}: {why}", chunk.offset);
    match chunk.header.kind {
        ChunkKind::FunctionNames => match chunk.function_names() {
            Ok(names) => trace
                .functions
                .extend(names.into_iter().map(|n| (n.id, n.name))),
            Err(why) => trace.bad_chunks.push(bad(why)),
        },
        ChunkKind::ThreadInfo => match chunk.value::<ThreadInfo>() {
            Ok(info) => {
                let tid = if info.tid != 0 { info.tid } else { thread };
                trace.thread_mut(tid).name = Some(info.name);
            }
            Err(why) => trace.bad_chunks.push(bad(format!("thread info: {why}"))),
        },
        ChunkKind::ProcessEnd => match chunk.value::<ProcessEnd>() {
            Ok(end) => trace.end = Some(end),
            Err(why) => trace.bad_chunks.push(bad(format!("process end: {why}"))),
        },
        ChunkKind::Notice => match chunk.value::<Notice>() {
            Ok(notice) => trace.notices.push(notice),
            Err(why) => trace.bad_chunks.push(bad(format!("notice: {why}"))),
        },
        ChunkKind::KernelNames => match chunk.function_names() {
            Ok(names) => trace
                .kernel_names
                .extend(names.into_iter().map(|n| (n.id, n.name))),
            Err(why) => trace.bad_chunks.push(bad(format!("kernel names: {why}"))),
        },
        ChunkKind::Contexts => match chunk.context_records() {
            Ok(records) => trace.contexts.extend(records),
            Err(why) => trace.bad_chunks.push(bad(why)),
        },
        ChunkKind::Streams => match chunk.stream_records() {
            Ok(records) => trace.streams.extend(records),
            Err(why) => trace.bad_chunks.push(bad(why)),
        },
        ChunkKind::Modules => match chunk.module_records() {
            Ok(records) => {
                for m in records {
                    if u32::from(m.flags) & rtrace_format::FLAG_UNLOADED != 0 {
                        trace.module_unloads.push(m);
                    } else {
                        trace.modules.push(m);
                    }
                }
            }
            Err(why) => trace.bad_chunks.push(bad(why)),
        },
        ChunkKind::NvtxStrings => match chunk.function_names() {
            Ok(names) => trace
                .nvtx_strings
                .extend(names.into_iter().map(|n| (n.id, n.name))),
            Err(why) => trace.bad_chunks.push(bad(why)),
        },
        ChunkKind::ModuleImage => match rtrace_format::ModuleImage::decode(&chunk.payload) {
            Ok(mut image) => {
                if let Some(bytes) = image.bytes.take() {
                    trace.images.insert(image.hash, bytes);
                }
                trace.module_images.push(image);
            }
            Err(why) => trace.bad_chunks.push(bad(why)),
        },
        ChunkKind::Functions => match chunk.function_records() {
            Ok(records) => trace.gpu_functions.extend(records),
            Err(why) => trace.bad_chunks.push(bad(why)),
        },
        ChunkKind::DeviceInfo => match chunk.value::<DeviceInfo>() {
            Ok(device) => {
                trace.devices.insert(device.ordinal, device);
            }
            Err(why) => trace.bad_chunks.push(bad(format!("device info: {why}"))),
        },
        ChunkKind::PcSamplingConfig => match chunk.value() {
            Ok(config) => trace.pc_configs.push(config),
            Err(why) => trace
                .bad_chunks
                .push(bad(format!("PC sampling set-up: {why}"))),
        },
        ChunkKind::PcSamples => match chunk.value() {
            Ok(batch) => trace.pc_batches.push(batch),
            Err(why) => trace.bad_chunks.push(bad(format!("PC samples: {why}"))),
        },
        ChunkKind::ProfilerSetup => match chunk.value() {
            Ok(setup) => trace.profiler_setups.push(setup),
            Err(why) => trace
                .bad_chunks
                .push(bad(format!("kernel profiling set-up: {why}"))),
        },
        ChunkKind::KernelProfile => match chunk.value() {
            Ok(profile) => trace.kernel_profiles.push(profile),
            Err(why) => trace.bad_chunks.push(bad(format!("kernel profile: {why}"))),
        },
        ChunkKind::SourceCounterSetup => match chunk.value() {
            Ok(setup) => trace.source_counter_setups.push(setup),
            Err(why) => trace
                .bad_chunks
                .push(bad(format!("source counters set-up: {why}"))),
        },
        ChunkKind::SourceCounters => match chunk.value() {
            Ok(launch) => trace.source_counters.push(launch),
            Err(why) => trace
                .bad_chunks
                .push(bad(format!("source counters: {why}"))),
        },
        ChunkKind::GpuMetricsSetup => match chunk.value() {
            Ok(setup) => trace.gpu_metric_setups.push(setup),
            Err(why) => trace
                .bad_chunks
                .push(bad(format!("GPU metrics set-up: {why}"))),
        },
        ChunkKind::GpuMetricSamples => match chunk.value() {
            Ok(samples) => trace.gpu_metric_samples.push(samples),
            Err(why) => trace
                .bad_chunks
                .push(bad(format!("GPU metric samples: {why}"))),
        },
        ChunkKind::UntimedWork => match chunk.untimed_work() {
            Ok(work) => trace.untimed.extend(work),
            Err(why) => trace.bad_chunks.push(bad(why)),
        },
        ChunkKind::Unknown(_) => trace.unknown_chunks += 1,
        // The chunks of records go to the sink.
        ChunkKind::ApiRecords
        | ChunkKind::ApiRecordsInTicks
        | ChunkKind::Kernels
        | ChunkKind::Memcpys
        | ChunkKind::PeerCopies
        | ChunkKind::Memsets
        | ChunkKind::NvtxEvents
        | ChunkKind::Memory
        | ChunkKind::Sync
        // A thread's ring, CUPTI's buffers: the reader gives what no chunk held as chunks of
        // their own, with what the layout and the names' addresses tell.
        | ChunkKind::RingRegion
        | ChunkKind::GpuBufferRegion
        | ChunkKind::GpuBufferLayout
        | ChunkKind::KernelNameAddresses => {}
    }
}

fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// Loads the trace file at `path`.
pub fn load_trace(path: &Path) -> Result<Trace, LoadError> {
    let file = open_trace_file(path)?;
    Trace::read(
        path,
        crate::progress::Counting(BufReader::with_capacity(1 << 16, file)),
    )
}

/// Reads the trace at `path` through `sink` (the records it takes are not kept).
pub fn read_light(path: &Path, sink: &mut dyn RecordSink) -> Result<Trace, LoadError> {
    let file = std::fs::File::open(path).map_err(|error| LoadError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    Trace::read_ahead(path, BufReader::with_capacity(1 << 16, file), sink)
}

/// Which kernel name ids of the file at `path` the regex keeps (by the names the whole
/// file gives them, later entries winning, as [`Trace::read`] reads them).
pub fn kernel_names_kept(path: &Path, re: &regex::Regex) -> Result<HashMap<u32, bool>, LoadError> {
    struct Skip;
    impl RecordSink for Skip {
        fn records(&mut self, _: &mut Trace, _: &Chunk, _: Records) {}
    }
    let t = read_light(path, &mut Skip)?;
    Ok(t.kernel_names
        .keys()
        .map(|&id| {
            let keep = re.is_match(&t.kernel_display_name(id)) || re.is_match(&t.kernel_name(id));
            (id, keep)
        })
        .collect())
}

/// Traces loaded from the command line's inputs, with the warnings met on the way.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The traces, in input order (a directory's files sorted by name).
    pub traces: Vec<Trace>,
    /// Files skipped, one line each (`PATH: why; skipped`).
    pub skipped: Vec<String>,
}

/// Loads every input: a file is one trace; a directory contributes each
/// `*.bin` file directly in it, sorted by name, skipping files in it that are
/// not rtrace traces. A path given twice is loaded once.
pub fn load_inputs(paths: &[PathBuf]) -> Result<Loaded, LoadError> {
    let mut loaded = Loaded::default();
    let mut traces = Vec::new();
    each_input(
        paths,
        load_trace,
        |_, t| traces.push(t),
        &mut loaded.skipped,
    )?;
    loaded.traces = traces;
    // Traces from several hosts: on the clock of the first-started process's host.
    align(&mut loaded.traces);
    Ok(loaded)
}

/// Puts every trace on the clock of the reference boot ([`crate::clocks::shifts`]); sets each
/// shifted trace's [`Trace::clock_shift`].
fn align(traces: &mut [Trace]) {
    let headers: Vec<&ProcessHeader> = traces.iter().map(|t| &t.header).collect();
    let shifts = crate::clocks::shifts(&headers);
    for (t, s) in traces.iter_mut().zip(shifts) {
        if let Some(s) = s {
            t.shift_times(s.ns);
            t.clock_shift = Some(s);
        }
    }
}
