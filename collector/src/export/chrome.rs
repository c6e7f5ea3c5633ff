//! Chrome's JSON trace event format (`{"traceEvents":[...]}`), which
//! chrome://tracing, Perfetto and Speedscope read.
//!
//! Slices are complete events (`ph: X`), flows `ph: s` / `ph: f` pairs,
//! memory counters `ph: C`, and process and thread names metadata (`ph: M`).
//! GPU streams are shown as threads of their process with synthetic thread
//! ids from [`SYNTHETIC_TID_BASE`] up, named `GPU 0 stream 7`. Times are in
//! µs with three decimals (whole ns).

use super::layout::{self, Gpu, KernelNames, Links, Nest, Step, Value, ARG_NAMES};
use super::Stats;
use crate::model::Trace;
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
        }
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

    /// Ends the output (`],"displayTimeUnit":"ns"}`) and returns it, with
    /// what was written.
    pub fn finish(mut self) -> io::Result<(W, Stats)> {
        self.buf.push_str("\n],\"displayTimeUnit\":\"ns\"}\n");
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

    /// A complete event; `name` is JSON already (a quoted string).
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
                Value::Str(s) => string(&mut self.buf, s),
            }
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

    /// Writes the events of `trace`.
    pub fn write_trace(&mut self, trace: &Trace) -> io::Result<()> {
        self.stats.traces += 1;
        let pid = trace.header.pid;
        self.name("process_name", pid, 0, &layout::process_name(trace));
        for t in trace.threads.values() {
            if let Some(name) = &t.name {
                self.name("thread_name", pid, t.tid, name);
            }
        }
        let mut next_tid = SYNTHETIC_TID_BASE;
        let mut links = Links::new(trace, &mut self.next_flow);
        self.stats.flows += links.flows;
        let mut args = Vec::new();
        let mut functions: HashMap<u32, String> = HashMap::new();

        for t in trace.threads.values() {
            let spans = layout::api_spans(&t.records);
            let mut tids = vec![t.tid];
            let mut nest = Nest::new(&spans);
            for step in nest.by_ref() {
                let Step::Begin { index, lane, end } = step else {
                    continue;
                };
                let tid = self.lane_tid(&mut tids, lane, &mut next_tid, pid, || match &t.name {
                    Some(n) => n.clone(),
                    None => format!("thread {}", t.tid),
                });
                let r = &t.records[index as usize];
                let name = functions.entry(r.function).or_insert_with(|| {
                    let mut s = String::new();
                    string(&mut s, &trace.function_name(r.function));
                    s
                });
                layout::api_args(r, &mut args);
                self.complete("api", name, pid, tid, r.start_ns, end, &args);
                for id in links.api_flows(t.tid, index as usize, r) {
                    self.flow("s", id, pid, tid, r.start_ns);
                }
                self.stats.slices += 1;
                self.flush_if_full()?;
            }
            self.stats.clipped += nest.clipped;
        }

        // NVTX ranges on their threads, and projected onto the GPU work they launched.
        for track in layout::nvtx_tracks(trace) {
            let spans: Vec<(u64, u64)> = track.slices.iter().map(|s| (s.1, s.2)).collect();
            let mut tids = Vec::new();
            let mut nest = Nest::new(&spans);
            for step in nest.by_ref() {
                let Step::Begin { index, lane, end } = step else {
                    continue;
                };
                let tid = self.lane_tid(&mut tids, lane, &mut next_tid, pid, || track.name.clone());
                let slice = &track.slices[index as usize];
                let mut name = String::new();
                string(&mut name, &slice.0);
                self.complete("nvtx", &name, pid, tid, slice.1, end, &[]);
                self.stats.slices += 1;
                self.flush_if_full()?;
            }
            self.stats.clipped += nest.clipped;
        }

        let mut kernels = KernelNames::default();
        let mut kernel_json: HashMap<u32, String> = HashMap::new();
        for device in layout::devices(trace) {
            for stream in &device.streams {
                let stream_name = layout::stream_name(device.ordinal, stream.id);
                let mut tids = Vec::new();
                let mut nest = Nest::new(&stream.spans);
                for step in nest.by_ref() {
                    let Step::Begin { index, lane, end } = step else {
                        continue;
                    };
                    let tid =
                        self.lane_tid(&mut tids, lane, &mut next_tid, pid, || stream_name.clone());
                    let record = stream.records[index as usize];
                    let (start, _) = stream.spans[index as usize];
                    let mut copy_name = String::new();
                    let (cat, name) = match record {
                        Gpu::Kernel(i) => {
                            let id = trace.kernels[i as usize].name;
                            let name = kernel_json.entry(id).or_insert_with(|| {
                                let mut s = String::new();
                                string(&mut s, kernels.get(trace, id));
                                s
                            });
                            ("kernel", name.as_str())
                        }
                        Gpu::Memcpy(_) | Gpu::Memset(_) => {
                            let name = layout::copy_or_set_name(trace, record).unwrap_or_default();
                            string(&mut copy_name, &name);
                            let cat = if matches!(record, Gpu::Memcpy(_)) {
                                "memcpy"
                            } else {
                                "memset"
                            };
                            (cat, copy_name.as_str())
                        }
                    };
                    layout::gpu_args(trace, record, &mut args);
                    self.complete(cat, name, pid, tid, start, end, &args);
                    if let Some(flow) = links.gpu_flow(trace, record, start) {
                        self.flow("f", flow.id, pid, tid, start);
                    }
                    self.stats.slices += 1;
                    self.flush_if_full()?;
                }
                self.stats.clipped += nest.clipped;
            }
            for counter in &device.counters {
                let mut name = String::new();
                string(
                    &mut name,
                    &layout::counter_name(device.ordinal, counter.host),
                );
                for &(ts, value) in &counter.points {
                    self.event("C");
                    let _ = write!(self.buf, ",\"name\":{name},\"pid\":{pid},\"ts\":");
                    micros(&mut self.buf, ts);
                    let _ = write!(self.buf, ",\"args\":{{\"bytes\":{value}}}}}");
                    self.stats.counter_values += 1;
                    self.flush_if_full()?;
                }
            }
        }
        self.flush_if_full()
    }

    /// The thread id of `lane` of a track whose lanes so far are `tids`: a
    /// new lane gets the next synthetic id, named by `name`.
    fn lane_tid(
        &mut self,
        tids: &mut Vec<u64>,
        lane: u32,
        next_tid: &mut u64,
        pid: u32,
        name: impl FnOnce() -> String,
    ) -> u64 {
        let lane = lane as usize;
        if lane < tids.len() {
            return tids[lane];
        }
        let tid = *next_tid;
        *next_tid += 1;
        self.name("thread_name", pid, tid, &name());
        self.stats.tracks += 1;
        tids.push(tid);
        tid
    }
}

/// Appends `ns` as µs with three decimals: `1234.567`.
fn micros(out: &mut String, ns: u64) {
    let _ = write!(out, "{}.{:03}", ns / 1000, ns % 1000);
}

/// Appends `s` as a JSON string.
pub fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
