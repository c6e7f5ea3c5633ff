//! Chrome's JSON trace event format (`{"traceEvents":[...]}`), which
//! chrome://tracing, Perfetto and Speedscope read.
//!
//! Slices are complete events (`ph: X`), flows `ph: s` / `ph: f` pairs,
//! memory counters `ph: C`, and process and thread names metadata (`ph: M`).
//! GPU streams are shown as threads of their process with synthetic thread
//! ids from [`SYNTHETIC_TID_BASE`] up, named `GPU 0 context 1 stream 7`. Times are in
//! µs with three decimals (whole ns).
//!
//! The fields follow PyTorch's profiler (Kineto) where Holistic Trace Analysis reads them:
//! categories `cuda_driver`, `cuda_runtime`, `kernel`, `gpu_memcpy`, `gpu_memset`; GPU
//! slices' arguments `device`, `context` and `stream`; copies and memsets named from
//! `Memcpy` and `Memset`; and, when the output holds one process that recorded its rank,
//! `"distributedInfo": {"rank": R}` after the events.

use super::emitter::{Emitter, On, Stats, Track};
use super::layout::{self, Device, Flow, Gpu, KernelNames, Value, ARG_NAMES};
use crate::model::Trace;
use crate::read::first::CounterKey;
use crate::text::push_json_string as string;
use rtrace_format::{runtime_cbid, ApiRecord};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Write};

/// The first thread id given to GPU streams (and to the extra lanes of
/// threads whose calls overlap): above any Linux thread id (at most 2²²).
pub const SYNTHETIC_TID_BASE: u64 = 1 << 30;

/// Events are gathered in a buffer and written once it holds this much.
const FLUSH_BYTES: usize = 1 << 20;

/// Writes traces as one Chrome JSON trace, event by event.
pub struct ChromeWriter<W: Write> {
    out: W,
    buf: String,
    events: u64,
    next_flow: u64,
    stats: Stats,
    /// The trace being written.
    t: TraceState,
    /// Argument buffer, reused.
    args: Vec<layout::Arg>,
    /// A string argument's text, reused.
    scratch: String,
    /// The rank of the only trace written, while only one with a rank has been.
    rank: Option<u64>,
}

impl<W: Write> ChromeWriter<W> {
    /// Starts the output: writes `{"traceEvents":[`.
    pub fn new(out: W) -> Self {
        ChromeWriter {
            out,
            buf: String::from("{\"traceEvents\":["),
            events: 0,
            next_flow: 1,
            stats: Stats::default(),
            t: TraceState::default(),
            args: Vec::new(),
            scratch: String::new(),
            rank: None,
        }
    }

    /// Where the next trace's flow ids start; the caller moves it past them.
    pub fn next_flow(&mut self) -> &mut u64 {
        &mut self.next_flow
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.write_all(self.buf.as_bytes())?;
        self.stats.bytes += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// Starts an event: the separator, then `{"ph":"PH"`.
    fn event(&mut self, ph: &str) {
        self.buf
            .push_str(if self.events == 0 { "\n" } else { ",\n" });
        self.events += 1;
        self.buf.push_str("{\"ph\":\"");
        self.buf.push_str(ph);
        self.buf.push('"');
    }

    fn flush_if_full(&mut self) -> io::Result<()> {
        if self.buf.len() >= FLUSH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Ends the output (`],"displayTimeUnit":"ns"}`, with `"distributedInfo": {"rank": R}`
    /// before the `}` when one trace was written and it recorded its rank R) and returns it,
    /// with what was written.
    pub fn finish(mut self) -> io::Result<(W, Stats)> {
        self.buf.push_str("\n],\"displayTimeUnit\":\"ns\"");
        if let (1, Some(rank)) = (self.stats.traces, self.rank) {
            // Holistic Trace Analysis finds a file's rank with the pattern `"rank":\s+(\d+)`:
            // the space is needed.
            let _ = write!(self.buf, ",\"distributedInfo\": {{\"rank\": {rank}}}");
        }
        self.buf.push_str("}\n");
        self.flush()?;
        self.out.flush()?;
        self.stats.events = self.events;
        Ok((self.out, self.stats))
    }

    /// A metadata event naming process `pid` or its thread `tid`.
    fn name(&mut self, what: &str, pid: u32, tid: u64, name: &str) {
        self.event("M");
        let _ = write!(
            self.buf,
            ",\"name\":\"{what}\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":"
        );
        string(&mut self.buf, name);
        self.buf.push_str("}}");
    }

    /// A complete event; `name` is JSON already (a quoted string). Its arguments: `args`,
    /// then a GPU record's `device`, `context` and `stream` (`place`), then `metrics`.
    #[allow(clippy::too_many_arguments)]
    fn complete(
        &mut self,
        cat: &str,
        name: &str,
        pid: u32,
        tid: u64,
        start: u64,
        end: u64,
        args: &[layout::Arg],
        place: Option<(u32, u32, u32)>,
        metrics: &[(String, f64)],
    ) {
        self.event("X");
        let _ = write!(
            self.buf,
            ",\"cat\":\"{cat}\",\"name\":{name},\"pid\":{pid},\"tid\":{tid},\"ts\":"
        );
        micros(&mut self.buf, start);
        self.buf.push_str(",\"dur\":");
        micros(&mut self.buf, end.saturating_sub(start));
        self.buf.push_str(",\"args\":{");
        for (i, (key, value)) in args.iter().enumerate() {
            if i > 0 {
                self.buf.push(',');
            }
            let _ = write!(self.buf, "\"{}\":", ARG_NAMES[*key]);
            match value {
                Value::Uint(v) => {
                    let _ = write!(self.buf, "{v}");
                }
                _ => {
                    if let Some(s) = value.write_str(&mut self.scratch) {
                        string(&mut self.buf, s);
                    }
                }
            }
        }
        if let Some((device, context, stream)) = place {
            if !args.is_empty() {
                self.buf.push(',');
            }
            let _ = write!(
                self.buf,
                "\"device\":{device},\"context\":{context},\"stream\":{stream}"
            );
        }
        for (i, (key, value)) in metrics.iter().enumerate() {
            if i > 0 || !args.is_empty() || place.is_some() {
                self.buf.push(',');
            }
            string(&mut self.buf, key);
            let _ = write!(self.buf, ":{value}");
        }
        self.buf.push_str("}}");
    }

    /// A flow event: `s` (start) or `f` (finish, bound to the enclosing slice).
    fn flow(&mut self, ph: &str, id: u64, pid: u32, tid: u64, ts: u64) {
        self.event(ph);
        if ph == "f" {
            self.buf.push_str(",\"bp\":\"e\"");
        }
        let _ = write!(
            self.buf,
            ",\"cat\":\"flow\",\"name\":\"launch\",\"id\":{id},\"pid\":{pid},\"tid\":{tid},\"ts\":"
        );
        micros(&mut self.buf, ts);
        self.buf.push('}');
    }

    /// The thread id of `lane` of `track`: lane 0 of a thread is the thread;
    /// any other lane, and each stream and NVTX track, gets the next synthetic
    /// id, named when first used.
    fn lane_tid(&mut self, track: Track, lane: u32) -> u64 {
        let Some((name, tids)) = self.t.tracks.get(&track) else {
            return 0;
        };
        if let Some(&tid) = tids.get(lane as usize) {
            return tid;
        }
        let name = name.clone();
        let tid = self.t.next_tid;
        self.t.next_tid += 1;
        let pid = self.t.pid;
        self.name("thread_name", pid, tid, &name);
        self.stats.tracks += 1;
        if let Some((_, tids)) = self.t.tracks.get_mut(&track) {
            tids.push(tid);
        }
        tid
    }
}

/// The tracks and names of the trace being written.
#[derive(Default)]
struct TraceState {
    pid: u32,
    next_tid: u64,
    /// Each thread, stream and NVTX track: its lanes' name and thread ids (a thread's first
    /// lane is the thread).
    tracks: HashMap<Track, (String, Vec<u64>)>,
    /// Function id → its name as JSON.
    functions: HashMap<u32, String>,
    /// Per lane thread id, the NVTX slices begun there and not yet ended: (name as JSON,
    /// start), innermost last.
    nvtx_open: HashMap<u64, Vec<(String, u64)>>,
    /// Kernel name id → its demangled name as JSON.
    kernel_json: HashMap<u32, String>,
    kernels: KernelNames,
    /// Profiled launches' metric values.
    metrics: layout::MetricArgs,
}

impl<W: Write> Emitter for ChromeWriter<W> {
    fn stats(&mut self) -> &mut Stats {
        &mut self.stats
    }

    fn begin_trace(&mut self, trace: &Trace, devices: &[Device]) -> io::Result<()> {
        self.stats.traces += 1;
        self.rank = trace.header.rank().and_then(|(_, v)| v.parse().ok());
        let pid = trace.header.pid;
        self.t = TraceState {
            pid,
            next_tid: SYNTHETIC_TID_BASE,
            metrics: layout::MetricArgs::of(trace),
            ..Default::default()
        };
        self.name("process_name", pid, 0, &layout::process_name(trace));
        for t in trace.threads.values() {
            if let Some(name) = &t.name {
                self.name("thread_name", pid, t.tid, name);
            }
            let name = match &t.name {
                Some(n) => n.clone(),
                None => format!("thread {}", t.tid),
            };
            self.t
                .tracks
                .insert(Track::Thread(t.tid), (name, vec![t.tid]));
        }
        for device in devices {
            for context in &device.contexts {
                for &stream in &context.streams {
                    let name = format!(
                        "{} {}",
                        layout::context_name(device.ordinal, context.id),
                        layout::id_name("stream", stream)
                    );
                    let track = Track::Stream(device.ordinal, context.id, stream);
                    self.t.tracks.insert(track, (name, Vec::new()));
                }
            }
        }
        self.flush_if_full()
    }

    fn nvtx_track(&mut self, track: usize, name: &str) -> io::Result<()> {
        self.t
            .tracks
            .insert(Track::Nvtx(track), (name.to_string(), Vec::new()));
        Ok(())
    }

    fn api(
        &mut self,
        trace: &Trace,
        on: On,
        r: &ApiRecord,
        end: u64,
        flows: std::ops::Range<u64>,
    ) -> io::Result<()> {
        let lane_tid = self.lane_tid(on.track, on.lane);
        // The name cache is moved out while the event is written from it.
        let mut functions = std::mem::take(&mut self.t.functions);
        let name = functions.entry(r.function).or_insert_with(|| {
            let mut s = String::new();
            string(&mut s, &trace.function_name(r.function));
            s
        });
        let mut args = std::mem::take(&mut self.args);
        args.clear();
        layout::api_args(r, &mut args);
        let pid = self.t.pid;
        let cat = if runtime_cbid(r.function).is_some() {
            "cuda_runtime"
        } else {
            "cuda_driver"
        };
        self.complete(cat, name, pid, lane_tid, r.start_ns, end, &args, None, &[]);
        for id in flows {
            self.flow("s", id, pid, lane_tid, r.start_ns);
        }
        self.args = args;
        self.t.functions = functions;
        self.stats.slices += 1;
        self.flush_if_full()
    }

    fn gpu(
        &mut self,
        trace: &Trace,
        on: On,
        g: Gpu,
        end: u64,
        flow: Option<Flow>,
    ) -> io::Result<()> {
        let (device, context, stream) = g.place();
        let tid = self.lane_tid(on.track, on.lane);
        let mut kernel_json = std::mem::take(&mut self.t.kernel_json);
        let mut copy_name = String::new();
        let (cat, name) = match g {
            Gpu::Kernel(k) => {
                let kernels = &mut self.t.kernels;
                let json = kernel_json.entry(k.name).or_insert_with(|| {
                    let mut s = String::new();
                    string(&mut s, kernels.get(trace, k.name));
                    s
                });
                ("kernel", json.as_str())
            }
            Gpu::Memcpy(_) | Gpu::Memset(_) => {
                string(&mut copy_name, &kineto_copy_name(g));
                let cat = if matches!(g, Gpu::Memcpy(_)) {
                    "gpu_memcpy"
                } else {
                    "gpu_memset"
                };
                (cat, copy_name.as_str())
            }
        };
        let mut args = std::mem::take(&mut self.args);
        args.clear();
        layout::gpu_args(g, &mut args);
        let pid = self.t.pid;
        let start = g.span().0;
        let metrics = std::mem::take(&mut self.t.metrics);
        let place = Some((device, context, stream));
        self.complete(
            cat,
            name,
            pid,
            tid,
            start,
            end,
            &args,
            place,
            metrics.of_record(g),
        );
        self.t.metrics = metrics;
        self.t.kernel_json = kernel_json;
        self.args = args;
        if let Some(flow) = flow {
            self.flow("f", flow.id, pid, tid, start);
        }
        self.stats.slices += 1;
        self.flush_if_full()
    }

    /// Held until it ends, then written as a complete event.
    fn nvtx(&mut self, on: On, name: &str, start: u64) -> io::Result<()> {
        let tid = self.lane_tid(on.track, on.lane);
        let mut json = String::new();
        string(&mut json, name);
        self.t.nvtx_open.entry(tid).or_default().push((json, start));
        Ok(())
    }

    /// API and GPU slices are complete events already; an NVTX slice is written now.
    fn end(&mut self, on: On, end: u64) -> io::Result<()> {
        if !matches!(on.track, Track::Nvtx(_)) {
            return Ok(());
        }
        let tid = self.lane_tid(on.track, on.lane);
        let Some((json, start)) = self.t.nvtx_open.get_mut(&tid).and_then(Vec::pop) else {
            return Ok(());
        };
        let pid = self.t.pid;
        self.complete("nvtx", &json, pid, tid, start, end, &[], None, &[]);
        self.stats.slices += 1;
        self.flush_if_full()
    }

    fn counter(&mut self, counter: CounterKey, ts: u64, value: i64) -> io::Result<()> {
        let pid = self.t.pid;
        self.event("C");
        self.buf.push_str(",\"name\":");
        string(&mut self.buf, &layout::counter_name(counter.0, counter.1));
        let _ = write!(self.buf, ",\"pid\":{pid},\"ts\":");
        micros(&mut self.buf, ts);
        let _ = write!(self.buf, ",\"args\":{{\"bytes\":{value}}}}}");
        self.stats.counter_values += 1;
        self.flush_if_full()
    }

    /// A counter (`ph: C`) per GPU metric of a device, `{"value": v}` at each point.
    fn gpu_metric(&mut self, device: u32, metric: &str, points: &[(u64, f64)]) -> io::Result<()> {
        let pid = self.t.pid;
        let name = format!("GPU {device} {metric}");
        for &(ts, v) in points {
            self.event("C");
            self.buf.push_str(",\"name\":");
            string(&mut self.buf, &name);
            let _ = write!(self.buf, ",\"pid\":{pid},\"ts\":");
            micros(&mut self.buf, ts);
            let _ = write!(self.buf, ",\"args\":{{\"value\":{v}}}}}");
            self.stats.counter_values += 1;
            self.flush_if_full()?;
        }
        Ok(())
    }

    /// Writes the NVTX ranges that never ended as begin events alone (`ph: B`), which viewers
    /// show as not ended.
    fn end_trace(&mut self, _trace: &Trace) -> io::Result<()> {
        let pid = self.t.pid;
        let mut open: Vec<(u64, Vec<(String, u64)>)> =
            std::mem::take(&mut self.t.nvtx_open).into_iter().collect();
        open.sort_by_key(|o| o.0);
        for (tid, slices) in open {
            for (json, start) in slices {
                self.event("B");
                let _ = write!(
                    self.buf,
                    ",\"cat\":\"nvtx\",\"name\":{json},\"pid\":{pid},\"tid\":{tid},\"ts\":"
                );
                micros(&mut self.buf, start);
                self.buf.push('}');
                self.stats.slices += 1;
                self.flush_if_full()?;
            }
        }
        self.flush_if_full()
    }
}

/// A copy's or memset's slice name ([`layout::copy_or_set_name`]) with its first letter
/// capitalised, as PyTorch's profiler names them (`Memcpy HtoD 4 KiB`, `Memset 1 MiB`):
/// Holistic Trace Analysis tells memory operations from kernels by these names.
fn kineto_copy_name(record: Gpu) -> String {
    let mut name = layout::copy_or_set_name(record).unwrap_or_default();
    if let Some(first) = name.get_mut(0..1) {
        first.make_ascii_uppercase();
    }
    name
}

/// Appends `ns` as µs with three decimals: `1234.567`.
fn micros(out: &mut String, ns: u64) {
    let _ = write!(out, "{}.{:03}", ns / 1000, ns % 1000);
}
