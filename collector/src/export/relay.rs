//! Encoding a trace's timeline on a thread of its own ([`relayed`]): the merge and the layout
//! of its records (`merge.rs`) hand what they would tell the writer, in order, a few thousand
//! calls at a time, to a thread that tells the writer ([`Emitter`]): the output is the one the
//! writer would have written itself, and the two halves of the work share the cores.

use super::emitter::{Emitter, On, Stats};
use super::layout::{Device, Flow, Gpu};
use crate::model::Trace;
use crate::read::first::CounterKey;
use rtrace_format::{ApiRecord, KernelRecord, MemcpyRecord, MemsetRecord};
use std::io;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

/// Calls gathered before they are handed over.
const BATCH: usize = 4096;
/// Batches handed over and not yet encoded, at most (16 rather than 4: the merge and the
/// encoder each wait less for the other on two cores, 10% less wall time, about 1 MiB more).
const QUEUED: usize = 16;

/// Where a GPU record of a batch is: its kind's list, and its index there.
#[derive(Clone, Copy)]
enum GpuAt {
    Kernel(u32),
    Memcpy(u32),
    Memset(u32),
}

/// One call of [`Emitter`] (but `stats`, which the relay answers itself), its records in the
/// lists of its [`Batch`] (a call is a few words, a kernel record 112 bytes: only that is
/// copied).
enum Call {
    BeginTrace(Vec<Device>),
    NvtxTrack(usize, String),
    Api {
        on: On,
        r: u32,
        end: u64,
        flows: std::ops::Range<u64>,
    },
    Gpu {
        on: On,
        g: GpuAt,
        end: u64,
        flow: Option<Flow>,
    },
    Nvtx {
        on: On,
        name: String,
        start: u64,
    },
    End {
        on: On,
        end: u64,
    },
    Counter {
        counter: CounterKey,
        ts: u64,
        value: i64,
    },
    GpuMetric {
        device: u32,
        metric: String,
        points: Vec<(u64, f64)>,
    },
    EndTrace,
}

/// Calls handed over at once, and their records.
#[derive(Default)]
struct Batch {
    calls: Vec<Call>,
    api: Vec<ApiRecord>,
    kernels: Vec<KernelRecord>,
    memcpys: Vec<MemcpyRecord>,
    memsets: Vec<MemsetRecord>,
}

impl Batch {
    /// A batch with room for its calls, and for the records of half as many (a slice is two
    /// calls, its begin and its end), not grown record by record.
    fn with_room() -> Batch {
        Batch {
            calls: Vec::with_capacity(BATCH),
            api: Vec::with_capacity(BATCH / 2),
            kernels: Vec::with_capacity(BATCH / 2),
            ..Batch::default()
        }
    }

    fn clear(&mut self) {
        self.calls.clear();
        self.api.clear();
        self.kernels.clear();
        self.memcpys.clear();
        self.memsets.clear();
    }

    /// Tells `e` the calls, in order.
    fn tell<E: Emitter>(&self, e: &mut E, trace: &Trace) -> io::Result<()> {
        for call in &self.calls {
            match call {
                Call::BeginTrace(devices) => e.begin_trace(trace, devices)?,
                Call::NvtxTrack(track, name) => e.nvtx_track(*track, name)?,
                Call::Api { on, r, end, flows } => {
                    e.api(trace, *on, &self.api[*r as usize], *end, flows.clone())?
                }
                Call::Gpu { on, g, end, flow } => {
                    let g = match *g {
                        GpuAt::Kernel(i) => Gpu::Kernel(&self.kernels[i as usize]),
                        GpuAt::Memcpy(i) => Gpu::Memcpy(&self.memcpys[i as usize]),
                        GpuAt::Memset(i) => Gpu::Memset(&self.memsets[i as usize]),
                    };
                    e.gpu(trace, *on, g, *end, *flow)?
                }
                Call::Nvtx { on, name, start } => e.nvtx(*on, name, *start)?,
                Call::End { on, end } => e.end(*on, *end)?,
                Call::Counter { counter, ts, value } => e.counter(*counter, *ts, *value)?,
                Call::GpuMetric {
                    device,
                    metric,
                    points,
                } => e.gpu_metric(*device, metric, points)?,
                Call::EndTrace => e.end_trace(trace)?,
            }
        }
        Ok(())
    }
}

/// The [`Emitter`] the merge writes through: it gathers the calls and hands them to the
/// encoding thread. Its own [`Stats`] hold what the merge counts itself.
pub struct Relay {
    batch: Batch,
    send: SyncSender<Batch>,
    /// Batches told, handed back to be filled again.
    spare: Receiver<Batch>,
    stats: Stats,
}

impl Relay {
    fn push(&mut self, call: Call) -> io::Result<()> {
        self.batch.calls.push(call);
        if self.batch.calls.len() >= BATCH {
            self.hand_over()?;
        }
        Ok(())
    }

    /// Hands the calls gathered over; an error when the encoding thread stopped (its writer
    /// failed: [`relayed`] gives that error).
    fn hand_over(&mut self) -> io::Result<()> {
        if self.batch.calls.is_empty() {
            return Ok(());
        }
        let next = self.spare.try_recv().unwrap_or_else(|_| Batch::with_room());
        let full = std::mem::replace(&mut self.batch, next);
        self.send
            .send(full)
            .map_err(|_| io::Error::other("the export's encoding thread stopped"))
    }
}

impl Emitter for Relay {
    fn stats(&mut self) -> &mut Stats {
        &mut self.stats
    }

    fn begin_trace(&mut self, _: &Trace, devices: &[Device]) -> io::Result<()> {
        self.push(Call::BeginTrace(devices.to_vec()))
    }

    fn nvtx_track(&mut self, track: usize, name: &str) -> io::Result<()> {
        self.push(Call::NvtxTrack(track, name.to_string()))
    }

    fn api(
        &mut self,
        _: &Trace,
        on: On,
        r: &ApiRecord,
        end: u64,
        flows: std::ops::Range<u64>,
    ) -> io::Result<()> {
        let at = self.batch.api.len() as u32;
        self.batch.api.push(*r);
        self.push(Call::Api {
            on,
            r: at,
            end,
            flows,
        })
    }

    fn gpu(&mut self, _: &Trace, on: On, g: Gpu, end: u64, flow: Option<Flow>) -> io::Result<()> {
        let b = &mut self.batch;
        let g = match g {
            Gpu::Kernel(k) => {
                b.kernels.push(*k);
                GpuAt::Kernel(b.kernels.len() as u32 - 1)
            }
            Gpu::Memcpy(m) => {
                b.memcpys.push(*m);
                GpuAt::Memcpy(b.memcpys.len() as u32 - 1)
            }
            Gpu::Memset(s) => {
                b.memsets.push(*s);
                GpuAt::Memset(b.memsets.len() as u32 - 1)
            }
        };
        self.push(Call::Gpu { on, g, end, flow })
    }

    fn nvtx(&mut self, on: On, name: &str, start: u64) -> io::Result<()> {
        self.push(Call::Nvtx {
            on,
            name: name.to_string(),
            start,
        })
    }

    fn end(&mut self, on: On, end: u64) -> io::Result<()> {
        self.push(Call::End { on, end })
    }

    fn counter(&mut self, counter: CounterKey, ts: u64, value: i64) -> io::Result<()> {
        self.push(Call::Counter { counter, ts, value })
    }

    fn gpu_metric(&mut self, device: u32, metric: &str, points: &[(u64, f64)]) -> io::Result<()> {
        self.push(Call::GpuMetric {
            device,
            metric: metric.to_string(),
            points: points.to_vec(),
        })
    }

    fn end_trace(&mut self, _: &Trace) -> io::Result<()> {
        self.push(Call::EndTrace)?;
        self.hand_over()
    }
}

/// Runs `merge` with a [`Relay`] whose calls are told to `e`, for `trace`, on a thread of
/// their own, in order; returns what `merge` returned, then how telling `e` ended (its first
/// error stops it, and the merge's next hand-over fails too). What the merge counted in the
/// relay's stats is added to `e`'s ([`Stats::add_merged`]).
pub fn relayed<E: Emitter + Send, T>(
    e: &mut E,
    trace: &Trace,
    merge: impl FnOnce(&mut Relay) -> T,
) -> (T, io::Result<()>) {
    let (send, receive) = sync_channel::<Batch>(QUEUED);
    let (give_back, spare) = sync_channel::<Batch>(QUEUED + 1);
    let mut relay = Relay {
        batch: Batch::with_room(),
        send,
        spare,
        stats: Stats::default(),
    };
    std::thread::scope(|s| {
        let told = s.spawn(move || {
            for mut batch in receive {
                batch.tell(e, trace)?;
                batch.clear();
                // Handed back to be filled again (dropped if none is wanted).
                let _ = give_back.try_send(batch);
            }
            Ok::<_, io::Error>(e)
        });
        let result = merge(&mut relay);
        // Whatever is left, then the end of the calls.
        let handed = relay.hand_over();
        let merged = relay.stats;
        drop(relay);
        let told = told
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let told = match told {
            Ok(e) => {
                e.stats().add_merged(&merged);
                handed
            }
            Err(error) => Err(error),
        };
        (result, told)
    })
}
