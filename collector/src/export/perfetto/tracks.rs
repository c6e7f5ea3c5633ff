//! The tracks of the trace being written ([`Tracks`]): its process, threads, devices,
//! contexts, streams and memory counters described when the trace begins, NVTX tracks and
//! further lanes when first used; each lane with its packet sequence ([`Lane`]), found by the
//! slot the writer is told ([`On`]).

use super::field;
use super::field::{
    CLOCK_MONOTONIC, MERGE_BY_TRACK_NAME, ORDERING_EXPLICIT, SEQ_INCREMENTAL_STATE_CLEARED,
    UNIT_SIZE_BYTES,
};
use super::lane::Lane;
use super::packets::Packets;
use crate::export::emitter::{On, Track};
use crate::export::layout::{self, Device, MAX_LANES};
use crate::gpu_summary::fast_hash::FastMap;
use crate::model::Trace;
use crate::read::first::CounterKey;
use std::io::Write;

/// The tracks of one trace, and their lanes.
#[derive(Default)]
pub struct Tracks {
    /// The sequence of the trace's track descriptors.
    seq: u32,
    process: u64,
    /// Thread and stream tracks described, until the slot they are told on is first used.
    described: FastMap<Track, Lanes>,
    /// Thread and stream tracks by slot.
    slots: Vec<Option<Lanes>>,
    /// NVTX tracks by index.
    nvtx: Vec<Lanes>,
    counters: FastMap<CounterKey, Lane>,
    /// Device ordinal → its track's uuid.
    devices: FastMap<u32, u64>,
}

/// The lanes of a track (lane 0 first).
struct Lanes {
    name: String,
    lanes: Vec<Lane>,
    under: Under,
}

/// Where a track's further lanes go.
#[derive(Clone, Copy)]
enum Under {
    /// Child tracks of lane 0.
    Track,
    /// Siblings of lane 0 under the context's track, ranked from `rank` up.
    Context { uuid: u64, rank: u64 },
    /// Nowhere: a track the trace did not describe, whose events all go to track uuid 0.
    None,
}

impl Tracks {
    /// Starts `trace`'s tracks: a sequence for its descriptors (the output's first also
    /// makes `CLOCK_MONOTONIC` the trace's clock), then the descriptors of its process,
    /// threads, devices, streams (first lanes) and memory counters.
    pub fn describe<W: Write>(trace: &Trace, devices: &[Device], w: &mut Packets<W>) -> Tracks {
        let first = w.next_seq == 1;
        let seq = w.sequence();
        let p = &mut w.p;
        let packet = p.begin(field::TRACE_PACKET);
        p.varint(field::TRUSTED_PACKET_SEQUENCE_ID, u64::from(seq));
        p.varint(field::SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
        p.varint(field::FIRST_PACKET_ON_SEQUENCE, 1);
        if first {
            let clock = p.begin(field::CLOCK_SNAPSHOT);
            p.varint(field::PRIMARY_TRACE_CLOCK, CLOCK_MONOTONIC);
            p.end(clock);
        }
        p.end(packet);
        w.stats.packets += 1;

        let mut t = Tracks {
            seq,
            process: w.uuid(),
            ..Default::default()
        };
        // The process and its threads.
        let h = &trace.header;
        let process = t.process;
        w.descriptor(seq, |p| {
            p.varint(field::UUID, process);
            let d = p.begin(field::PROCESS);
            p.int64(field::PROCESS_PID, i64::from(h.pid as i32));
            for arg in &h.command_line {
                p.string(field::CMDLINE, arg);
            }
            p.string(field::PROCESS_NAME, &layout::process_name(trace));
            p.end(d);
        });
        for th in trace.threads.values() {
            let uuid = w.uuid();
            w.descriptor(seq, |p| {
                p.varint(field::UUID, uuid);
                p.varint(field::PARENT_UUID, process);
                let d = p.begin(field::THREAD);
                p.int64(field::THREAD_PID, i64::from(h.pid as i32));
                p.int64(field::TID, th.tid as i64);
                if let Some(name) = &th.name {
                    p.string(field::THREAD_NAME, name);
                }
                p.end(d);
            });
            let name = match &th.name {
                Some(n) => n.clone(),
                None => format!("thread {}", th.tid),
            };
            t.add(Track::Thread(th.tid), name, uuid, Under::Track);
        }

        // GPU work: a track per device, in it one per context (then the device's memory
        // counters), in that one per stream. A context's streams are ranked MAX_LANES
        // apart, for their further lanes.
        for device in devices {
            let device_uuid = w.uuid();
            t.devices.insert(device.ordinal, device_uuid);
            let device_name = layout::device_name(trace, device.ordinal);
            w.descriptor(seq, |p| {
                p.varint(field::UUID, device_uuid);
                p.varint(field::PARENT_UUID, process);
                p.string(field::TRACK_NAME, &device_name);
                p.varint(field::CHILD_ORDERING, ORDERING_EXPLICIT);
            });
            let mut rank = 0u64;
            for context in &device.contexts {
                let context_uuid = w.uuid();
                let context_name = layout::context_name(device.ordinal, context.id);
                w.descriptor(seq, |p| {
                    p.varint(field::UUID, context_uuid);
                    p.varint(field::PARENT_UUID, device_uuid);
                    p.string(field::TRACK_NAME, &context_name);
                    p.varint(field::SIBLING_ORDER_RANK, rank);
                    p.varint(field::CHILD_ORDERING, ORDERING_EXPLICIT);
                });
                rank += 1;
                let mut stream_rank = 0u64;
                for &stream in &context.streams {
                    let uuid = w.uuid();
                    let name = layout::stream_name(device.ordinal, stream);
                    stream_descriptor(w, seq, uuid, context_uuid, &name, stream_rank);
                    let under = Under::Context {
                        uuid: context_uuid,
                        rank: stream_rank,
                    };
                    let track = Track::Stream(device.ordinal, context.id, stream);
                    t.add(track, name, uuid, under);
                    stream_rank += MAX_LANES as u64;
                }
            }
            for counter in &device.counters {
                let uuid = w.uuid();
                let name = layout::counter_name(device.ordinal, counter.host);
                w.descriptor(seq, |p| {
                    p.varint(field::UUID, uuid);
                    p.varint(field::PARENT_UUID, device_uuid);
                    p.string(field::TRACK_NAME, &name);
                    p.varint(field::SIBLING_ORDER_RANK, rank);
                    let c = p.begin(field::COUNTER);
                    p.varint(field::UNIT, UNIT_SIZE_BYTES);
                    p.end(c);
                });
                t.counters
                    .insert((device.ordinal, counter.host), Lane::new(uuid));
                rank += 1;
            }
        }
        t
    }

    fn add(&mut self, track: Track, name: String, uuid: u64, under: Under) {
        let lanes = vec![Lane::new(uuid)];
        self.described.insert(track, Lanes { name, lanes, under });
    }

    /// Describes NVTX track `track` (the next index), named `name`, under the process.
    pub fn nvtx<W: Write>(&mut self, track: usize, name: &str, w: &mut Packets<W>) {
        let uuid = w.uuid();
        let process = self.process;
        w.descriptor(self.seq, |p| {
            p.varint(field::UUID, uuid);
            p.varint(field::PARENT_UUID, process);
            p.string(field::TRACK_NAME, name);
        });
        debug_assert_eq!(track, self.nvtx.len());
        self.nvtx.push(Lanes {
            name: name.to_string(),
            lanes: vec![Lane::new(uuid)],
            under: Under::Track,
        });
    }

    /// The lane `on`, described when first used: further lanes of a thread or NVTX track are
    /// its child tracks; those of a stream are siblings under the context, merged by name.
    #[inline(always)]
    pub fn lane<W: Write>(&mut self, on: On, w: &mut Packets<W>) -> &mut Lane {
        // Most events: a thread's or stream's lane used before.
        let (slot, lane) = (on.slot as usize, on.lane as usize);
        let used = !matches!(on.track, Track::Nvtx(_))
            && self
                .slots
                .get(slot)
                .and_then(Option::as_ref)
                .is_some_and(|t| lane < t.lanes.len());
        if used {
            let t = self.slots[slot].as_mut().expect("a track used before");
            return &mut t.lanes[lane];
        }
        self.lane_slow(on, w)
    }

    /// [`Tracks::lane`] for an NVTX track's lane, or a lane or track not used before.
    #[inline(never)]
    fn lane_slow<W: Write>(&mut self, on: On, w: &mut Packets<W>) -> &mut Lane {
        let track = match on.track {
            Track::Nvtx(i) => {
                if i >= self.nvtx.len() {
                    self.nvtx.resize_with(i + 1, undescribed);
                }
                &mut self.nvtx[i]
            }
            _ => {
                let slot = on.slot as usize;
                if slot >= self.slots.len() {
                    self.slots.resize_with(slot + 1, || None);
                }
                let described = &mut self.described;
                self.slots[slot]
                    .get_or_insert_with(|| described.remove(&on.track).unwrap_or_else(undescribed))
            }
        };
        let lane = on.lane as usize;
        if lane >= track.lanes.len() {
            let uuid = match track.under {
                Under::None => return &mut track.lanes[0],
                _ => w.uuid(),
            };
            let name = &track.name;
            match track.under {
                Under::Track => {
                    let parent = track.lanes[0].uuid;
                    w.descriptor(self.seq, |p| {
                        p.varint(field::UUID, uuid);
                        p.varint(field::PARENT_UUID, parent);
                        p.string(field::TRACK_NAME, name);
                    });
                }
                Under::Context {
                    uuid: context,
                    rank,
                } => {
                    let rank = rank + on.lane as u64;
                    stream_descriptor(w, self.seq, uuid, context, name, rank);
                }
                Under::None => {}
            }
            track.lanes.push(Lane::new(uuid));
            return track.lanes.last_mut().expect("pushed");
        }
        &mut track.lanes[lane]
    }

    /// Describes the counter track of GPU metric `metric` of `device` (under the device's
    /// track, the process's when the device ran no recorded work) and gives its lane.
    pub fn gpu_metric<W: Write>(&self, device: u32, metric: &str, w: &mut Packets<W>) -> Lane {
        let uuid = w.uuid();
        let parent = self.devices.get(&device).copied().unwrap_or(self.process);
        w.descriptor(self.seq, |p| {
            super::counter::gpu_metric_track(p, uuid, parent, device, metric)
        });
        Lane::new(uuid)
    }

    /// The lane of memory counter `counter`.
    pub fn counter(&mut self, counter: CounterKey) -> &mut Lane {
        self.counters.entry(counter).or_insert_with(|| Lane::new(0))
    }
}

/// A track the trace did not describe: its events go to track uuid 0.
fn undescribed() -> Lanes {
    Lanes {
        name: String::new(),
        lanes: vec![Lane::new(0)],
        under: Under::None,
    }
}

fn stream_descriptor<W: Write>(
    w: &mut Packets<W>,
    seq: u32,
    uuid: u64,
    context_uuid: u64,
    name: &str,
    rank: u64,
) {
    w.descriptor(seq, |p| {
        p.varint(field::UUID, uuid);
        p.varint(field::PARENT_UUID, context_uuid);
        p.string(field::TRACK_NAME, name);
        p.varint(field::SIBLING_ORDER_RANK, rank);
        p.varint(field::SIBLING_MERGE_BEHAVIOR, MERGE_BY_TRACK_NAME);
    });
}
