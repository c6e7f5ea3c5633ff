//! Export tests over traces built in memory: the Perfetto output decoded
//! with a protobuf decoder of its own, the Chrome JSON compared as text.

#[path = "../../tests/common/export_fixture.rs"]
mod fixture;

use super::layout::{binary_bytes, Nest, Step, MAX_LANES};
use super::*;
use crate::model::Trace;
use fixture::*;
use rtrace_format::{CopyKind, MemoryKind, MemoryOperation, FLAG_CORRELATED};
use std::collections::{BTreeMap, HashMap};

fn read(bytes: &[u8]) -> Trace {
    Trace::read(Path::new("t.bin"), bytes).unwrap()
}

fn export(traces: &[Trace], format: ExportFormat) -> (Vec<u8>, Stats) {
    export_traces(traces, format, Vec::new()).unwrap()
}

/// An NVTX event's bytes.
fn nvtx_event(
    kind: rtrace_format::NvtxKind,
    domain: u32,
    message: u32,
    time_ns: u64,
    value: u64,
) -> [u8; rtrace_format::NvtxEvent::SIZE] {
    rtrace_format::NvtxEvent {
        kind,
        domain,
        message,
        time_ns,
        value,
        ..Default::default()
    }
    .to_bytes()
}

// ---- A minimal protobuf decoder ----

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum F<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

fn read_varint(b: &mut &[u8]) -> u64 {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = b[0];
        *b = &b[1..];
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return v;
        }
    }
    panic!("varint longer than 10 bytes");
}

/// The fields of a message, in order.
fn fields(mut b: &[u8]) -> Vec<(u32, F<'_>)> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = read_varint(&mut b);
        let field = (key >> 3) as u32;
        let value = match key & 7 {
            0 => F::Varint(read_varint(&mut b)),
            1 => {
                let v = u64::from_le_bytes(b[..8].try_into().unwrap());
                b = &b[8..];
                F::Fixed64(v)
            }
            2 => {
                let len = read_varint(&mut b) as usize;
                let (v, rest) = b.split_at(len);
                b = rest;
                F::Bytes(v)
            }
            5 => {
                let v = u32::from_le_bytes(b[..4].try_into().unwrap());
                b = &b[4..];
                F::Fixed32(v)
            }
            w => panic!("wire type {w}"),
        };
        assert!(field > 0, "field 0");
        out.push((field, value));
    }
    out
}

trait Msg<'a> {
    fn uint(&self, field: u32) -> Option<u64>;
    fn msg(&self, field: u32) -> Option<&'a [u8]>;
    fn msgs(&self, field: u32) -> Vec<&'a [u8]>;
    fn str(&self, field: u32) -> Option<&'a str>;
    fn fixed(&self, field: u32) -> Vec<u64>;
    fn numbers(&self) -> Vec<u32>;
}

impl<'a> Msg<'a> for Vec<(u32, F<'a>)> {
    fn uint(&self, field: u32) -> Option<u64> {
        self.iter().rev().find_map(|(f, v)| match v {
            F::Varint(x) if *f == field => Some(*x),
            _ => None,
        })
    }
    fn msg(&self, field: u32) -> Option<&'a [u8]> {
        self.msgs(field).pop()
    }
    fn msgs(&self, field: u32) -> Vec<&'a [u8]> {
        self.iter()
            .filter_map(|(f, v)| match v {
                F::Bytes(b) if *f == field => Some(*b),
                _ => None,
            })
            .collect()
    }
    fn str(&self, field: u32) -> Option<&'a str> {
        self.msg(field).map(|b| std::str::from_utf8(b).unwrap())
    }
    fn fixed(&self, field: u32) -> Vec<u64> {
        self.iter()
            .filter_map(|(f, v)| match v {
                F::Fixed64(x) if *f == field => Some(*x),
                _ => None,
            })
            .collect()
    }
    fn numbers(&self) -> Vec<u32> {
        self.iter().map(|(f, _)| *f).collect()
    }
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Track {
    uuid: u64,
    parent: Option<u64>,
    name: Option<String>,
    /// process: (pid, process_name, cmdline)
    process: Option<(i64, String, Vec<String>)>,
    /// thread: (pid, tid, thread_name)
    thread: Option<(i64, i64, Option<String>)>,
    counter_unit: Option<u64>,
    counter_unit_name: Option<String>,
    rank: Option<u64>,
    merge: Option<u64>,
    child_ordering: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Slice {
    track: u64,
    name: String,
    ts: u64,
    dur: u64,
    args: Vec<(String, String)>,
    flows: Vec<u64>,
    terminating: Vec<u64>,
}

#[derive(Debug, Default)]
struct Decoded {
    /// Per sequence, the fields of its first packet (besides the sequence id).
    first_packets: BTreeMap<u64, Vec<u32>>,
    /// Clock snapshots naming the trace's clock (`primary_trace_clock`).
    clock_snapshots: usize,
    /// Per sequence with a clock of its own: (clock id, incremental) as its snapshot set it.
    lane_clocks: BTreeMap<u64, (u64, bool)>,
    /// Events whose timestamp is on `CLOCK_MONOTONIC` itself rather than their lane's clock.
    absolute: usize,
    tracks: Vec<Track>,
    slices: Vec<Slice>,
    /// Slices begun and never ended (only NVTX ranges that never ended may be).
    open: Vec<Slice>,
    /// (track, ts, value)
    counters: Vec<(u64, u64, i64)>,
    /// (track, ts, value) of double counters (GPU metrics).
    double_counters: Vec<(u64, u64, f64)>,
    packets: usize,
}

impl Decoded {
    fn track(&self, uuid: u64) -> &Track {
        self.tracks.iter().find(|t| t.uuid == uuid).unwrap()
    }
    /// Slices of the tracks named `name` (lanes included), in time order.
    fn slices_named(&self, name: &str) -> Vec<&Slice> {
        let uuids: Vec<u64> = self
            .tracks
            .iter()
            .filter(|t| t.name.as_deref() == Some(name))
            .map(|t| t.uuid)
            .collect();
        let mut s: Vec<&Slice> = self
            .slices
            .iter()
            .filter(|s| uuids.contains(&s.track))
            .collect();
        s.sort_by_key(|s| (s.ts, std::cmp::Reverse(s.dur)));
        s
    }
}

/// What the trace processor keeps of one packet sequence.
#[derive(Default)]
struct SeqState {
    cleared: bool,
    event_names: HashMap<u64, String>,
    arg_names: HashMap<u64, String>,
    strings: HashMap<u64, String>,
    /// `TracePacketDefaults`: the timestamps' clock, the events' track.
    clock: Option<u64>,
    track: Option<u64>,
    /// Its clocks: id → (incremental, value, `CLOCK_MONOTONIC` minus the clock).
    clocks: HashMap<u64, (bool, u64, u64)>,
}

/// Decodes a Perfetto trace as the trace processor reads one: per sequence, interned names
/// and strings, packet defaults and clocks (incremental: each timestamp the time since the
/// last on that clock); events sorted by timestamp (stably), then matched begin to end on each
/// track.
fn decode(bytes: &[u8]) -> Decoded {
    let mut d = Decoded::default();
    // (ts, file order, track, begin?, slice under construction)
    let mut events: Vec<(u64, usize, u64, Option<Slice>)> = Vec::new();
    let mut seqs: HashMap<u64, SeqState> = HashMap::new();
    for (field, packet) in fields(bytes) {
        assert_eq!(field, 1, "Trace has only packets");
        let F::Bytes(packet) = packet else {
            panic!("packet is a message")
        };
        d.packets += 1;
        let p = fields(packet);
        let seq = p.uint(10).expect("every packet has a trusted sequence id");
        let s = seqs.entry(seq).or_default();
        let flags = p.uint(13).unwrap_or(0);
        if flags & 1 != 0 {
            let clocks = std::mem::take(&mut s.clocks);
            *s = SeqState {
                cleared: true,
                clocks,
                ..Default::default()
            };
            let mut numbers = p.numbers();
            numbers.retain(|&n| n != 10);
            d.first_packets.insert(seq, numbers);
        }
        if let Some(defaults) = p.msg(59) {
            let defaults = fields(defaults);
            s.clock = defaults.uint(58);
            s.track = defaults.msg(11).and_then(|e| fields(e).uint(11));
        }
        if let Some(clock) = p.msg(6) {
            let clock = fields(clock);
            if let Some(primary) = clock.uint(2) {
                d.clock_snapshots += 1;
                assert_eq!(primary, 3, "primary trace clock");
            }
            let clocks: Vec<_> = clock.msgs(1).into_iter().map(fields).collect();
            let monotonic = clocks.iter().find(|c| c.uint(1) == Some(3));
            for c in clocks.iter().filter(|c| c.uint(1) != Some(3)) {
                let id = c.uint(1).unwrap();
                assert!((64..128).contains(&id), "a clock of the sequence's own");
                let (value, incremental) = (c.uint(2).unwrap(), c.uint(3) == Some(1));
                let mono = monotonic.expect("tied to CLOCK_MONOTONIC").uint(2).unwrap();
                s.clocks
                    .insert(id, (incremental, value, mono.wrapping_sub(value)));
                d.lane_clocks.insert(seq, (id, incremental));
            }
        }
        if let Some(interned) = p.msg(12) {
            let interned = fields(interned);
            for n in interned.msgs(2) {
                let n = fields(n);
                s.event_names
                    .insert(n.uint(1).unwrap(), n.str(2).unwrap().into());
            }
            for n in interned.msgs(3) {
                let n = fields(n);
                s.arg_names
                    .insert(n.uint(1).unwrap(), n.str(2).unwrap().into());
            }
            for n in interned.msgs(29) {
                let n = fields(n);
                s.strings
                    .insert(n.uint(1).unwrap(), n.str(2).unwrap().into());
            }
        }
        if let Some(t) = p.msg(60) {
            let t = fields(t);
            let mut track = Track {
                uuid: t.uint(1).unwrap(),
                parent: t.uint(5),
                name: t.str(2).map(String::from),
                counter_unit: t.msg(8).and_then(|c| fields(c).uint(3)),
                counter_unit_name: t.msg(8).and_then(|c| fields(c).str(6).map(String::from)),
                rank: t.uint(12),
                merge: t.uint(15),
                child_ordering: t.uint(11),
                ..Default::default()
            };
            if let Some(pd) = t.msg(3) {
                let pd = fields(pd);
                track.process = Some((
                    pd.uint(1).unwrap() as i64,
                    pd.str(6).unwrap().into(),
                    pd.msgs(2)
                        .iter()
                        .map(|b| String::from_utf8(b.to_vec()).unwrap())
                        .collect(),
                ));
            }
            if let Some(td) = t.msg(4) {
                let td = fields(td);
                track.thread = Some((
                    td.uint(1).unwrap() as i64,
                    td.uint(2).unwrap() as i64,
                    td.str(5).map(String::from),
                ));
            }
            assert!(
                !d.tracks.iter().any(|x| x.uuid == track.uuid),
                "uuid reused"
            );
            d.tracks.push(track);
        }
        if let Some(e) = p.msg(11) {
            assert!(s.cleared);
            assert_eq!(flags, 2, "track events need the incremental state");
            let e = fields(e);
            let raw = p.uint(8).expect("event timestamp");
            let ts = match p.uint(58).or(s.clock).expect("a timestamp's clock") {
                3 => {
                    d.absolute += 1;
                    raw
                }
                id => {
                    let c = s.clocks.get_mut(&id).expect("a clock of the sequence");
                    if c.0 {
                        c.1 += raw;
                        c.1.wrapping_add(c.2)
                    } else {
                        raw.wrapping_add(c.2)
                    }
                }
            };
            let track = e.uint(11).or(s.track).expect("an event's track");
            match e.uint(9) {
                Some(1) => {
                    let name = s.event_names[&e.uint(10).unwrap()].clone();
                    let args = e
                        .msgs(4)
                        .into_iter()
                        .map(|a| {
                            let a = fields(a);
                            let name = s.arg_names[&a.uint(1).unwrap()].clone();
                            let value = match (a.uint(3), a.uint(17)) {
                                (Some(v), None) => v.to_string(),
                                (None, Some(iid)) => s.strings[&iid].clone(),
                                other => panic!("{other:?}"),
                            };
                            (name, value)
                        })
                        .collect();
                    let slice = Slice {
                        track,
                        name,
                        ts,
                        dur: 0,
                        args,
                        flows: e.fixed(47),
                        terminating: e.fixed(48),
                    };
                    events.push((ts, events.len(), track, Some(slice)));
                }
                Some(2) => events.push((ts, events.len(), track, None)),
                Some(4) => match e.uint(30) {
                    Some(value) => d.counters.push((track, ts, value as i64)),
                    None => {
                        let bits = e.fixed(44);
                        d.double_counters.push((track, ts, f64::from_bits(bits[0])));
                    }
                },
                other => panic!("event type {other:?}"),
            }
        }
    }
    events.sort_by_key(|e| (e.0, e.1));
    let mut open: HashMap<u64, Vec<Slice>> = HashMap::new();
    for (ts, _, track, begin) in events {
        match begin {
            Some(slice) => open.entry(track).or_default().push(slice),
            None => {
                let mut slice = open
                    .get_mut(&track)
                    .and_then(|s| s.pop())
                    .expect("an end matches a begin");
                slice.dur = ts - slice.ts;
                d.slices.push(slice);
            }
        }
    }
    let mut open: Vec<Slice> = open.into_values().flatten().collect();
    open.sort_by_key(|s| (s.ts, s.track));
    for s in &open {
        let name = d.track(s.track).name.clone().unwrap_or_default();
        assert!(name.starts_with("NVTX: "), "a slice on {name} never ends");
    }
    d.open = open;
    d
}

fn args(a: &[(&str, &str)]) -> Vec<(String, String)> {
    a.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn slice(track: u64, name: &str, ts: u64, dur: u64, a: &[(&str, &str)]) -> Slice {
    Slice {
        track,
        name: name.into(),
        ts,
        dur,
        args: args(a),
        flows: vec![],
        terminating: vec![],
    }
}

fn flows(mut s: Slice, flows: &[u64], terminating: &[u64]) -> Slice {
    s.flows = flows.to_vec();
    s.terminating = terminating.to_vec();
    s
}

#[test]
fn perfetto_tracks_are_exact() {
    let t = read(&sample().bytes);
    let (bytes, stats) = export(&[t], ExportFormat::Perfetto);
    let d = decode(&bytes);
    assert_eq!(stats.bytes, bytes.len() as u64);
    assert_eq!(stats.packets, d.packets as u64);
    // The trace's descriptors are a sequence whose first packet clears its state, is the
    // first on it and (the output's first) makes CLOCK_MONOTONIC the trace's clock.
    assert_eq!(d.first_packets[&1], vec![13, 87, 6]);
    assert_eq!(d.clock_snapshots, 1);
    // Each lane with events (threads 11 and 12, stream 7's two lanes, streams 8 and 3, the
    // two memory counters) is a sequence of its own, whose first packet holds its flags,
    // first-on-sequence, defaults (clock, track), the interned argument names and the
    // snapshot of its clock (id 64, incremental); every event is on that clock.
    let lanes: Vec<u64> = d.first_packets.keys().skip(1).copied().collect();
    assert_eq!(lanes, (2..=9).collect::<Vec<_>>());
    for seq in lanes {
        assert_eq!(d.first_packets[&seq], vec![13, 87, 59, 12, 6]);
        assert_eq!(d.lane_clocks[&seq], (64, true));
    }
    assert_eq!(d.absolute, 0);
    let track = |uuid, parent: Option<u64>, name: Option<&str>| Track {
        uuid,
        parent,
        name: name.map(String::from),
        ..Default::default()
    };
    let mut want = vec![
        Track {
            process: Some((
                1234,
                "./app --size '2 MB'".into(),
                vec!["./app".into(), "--size".into(), "2 MB".into()],
            )),
            ..track(1, None, None)
        },
        Track {
            thread: Some((1234, 11, Some("app".into()))),
            ..track(2, Some(1), None)
        },
        Track {
            thread: Some((1234, 12, Some("worker".into()))),
            ..track(3, Some(1), None)
        },
        Track {
            child_ordering: Some(3),
            ..track(4, Some(1), Some("GPU 0: NVIDIA H100 80GB HBM3"))
        },
    ];
    let stream = |uuid, parent, name: &str, rank| Track {
        rank: Some(rank),
        merge: Some(1),
        ..track(uuid, Some(parent), Some(name))
    };
    let counter = |uuid, parent, name: &str, rank| Track {
        rank: Some(rank),
        counter_unit: Some(3),
        ..track(uuid, Some(parent), Some(name))
    };
    let context = |uuid, parent, name: &str, rank| Track {
        rank: Some(rank),
        child_ordering: Some(3),
        ..track(uuid, Some(parent), Some(name))
    };
    want.extend([
        // The device's contexts, each with its streams' first lanes up front (ranked MAX_LANES
        // apart), then the device's counters.
        context(5, 4, "GPU 0 context 1", 0),
        stream(6, 5, "GPU 0 stream 7", 0),
        stream(7, 5, "GPU 0 stream 8", 32),
        counter(8, 4, "GPU 0 memory in use", 1),
        counter(9, 4, "GPU 0 host memory in use", 2),
        Track {
            child_ordering: Some(3),
            ..track(10, Some(1), Some("GPU 1"))
        },
        context(11, 10, "GPU 1 context 2", 0),
        stream(12, 11, "GPU 1 stream 3", 0),
        // Stream 7's second lane, made when the kernel that overlaps the first came.
        stream(13, 5, "GPU 0 stream 7", 1),
    ]);
    assert_eq!(d.tracks, want);
    assert_eq!(stats.tracks, 13);
}

#[test]
fn perfetto_groups_streams_by_context() {
    // Two contexts on one device (a second one made with cuCtxCreate, say), each with a
    // stream of its own, and a stream id shared by both.
    let mut ks = vec![
        kernel(3, (0, 13), (1_000, 2_000), 0, false),
        kernel(3, (0, 21), (1_500, 2_500), 0, false),
        kernel(3, (0, 13), (3_000, 3_500), 0, false),
    ];
    ks[1].context = 3;
    ks[2].context = 3;
    let b = Builder::new(&header(42, &["./two-contexts"])).kernel_names(&[(3, "_Z4stepPfi")]);
    let t = read(&b.kernels(&ks).bytes);
    let (bytes, _) = export(&[t], ExportFormat::Perfetto);
    let d = decode(&bytes);
    let names: HashMap<u64, &str> = d
        .tracks
        .iter()
        .filter_map(|t| Some((t.uuid, t.name.as_deref()?)))
        .collect();
    let gpu: Vec<(&str, &str, Option<u64>)> = d
        .tracks
        .iter()
        .filter_map(|t| {
            let name = t.name.as_deref()?;
            let parent = names.get(&t.parent?).copied().unwrap_or("process");
            Some((name, parent, t.rank))
        })
        .collect();
    assert_eq!(
        gpu,
        [
            ("GPU 0", "process", None),
            ("GPU 0 context 1", "GPU 0", Some(0)),
            ("GPU 0 stream 13", "GPU 0 context 1", Some(0)),
            ("GPU 0 context 3", "GPU 0", Some(1)),
            ("GPU 0 stream 13", "GPU 0 context 3", Some(0)),
            ("GPU 0 stream 21", "GPU 0 context 3", Some(MAX_LANES as u64)),
        ]
    );
    // Each kernel on its context's stream track.
    let mut on: Vec<(u64, u64)> = d.slices.iter().map(|s| (s.ts, s.track)).collect();
    on.sort_unstable();
    let uuid = |context: &str, stream: &str| {
        let c = d
            .tracks
            .iter()
            .find(|t| t.name.as_deref() == Some(context))
            .unwrap()
            .uuid;
        d.tracks
            .iter()
            .find(|t| t.name.as_deref() == Some(stream) && t.parent == Some(c))
            .unwrap()
            .uuid
    };
    let (a, b, c) = (
        uuid("GPU 0 context 1", "GPU 0 stream 13"),
        uuid("GPU 0 context 3", "GPU 0 stream 21"),
        uuid("GPU 0 context 3", "GPU 0 stream 13"),
    );
    assert_eq!(on, [(1_000, a), (1_500, b), (3_000, c)]);
}

#[test]
fn perfetto_slices_flows_and_counters_are_exact() {
    let t = read(&sample().bytes);
    let (bytes, stats) = export(&[t], ExportFormat::Perfetto);
    let d = decode(&bytes);
    let api = |track, name, ts, dur, result: &str, corr: &str| {
        slice(
            track,
            name,
            ts,
            dur,
            &[("result", result), ("correlation", corr)],
        )
    };
    let k = |track, name, ts, dur, corr: Option<&str>| {
        let mut a = vec![
            ("grid", "(120,1,1)"),
            ("block", "(256,1,1)"),
            ("registers_per_thread", "32"),
            ("static_shared_memory", "1024"),
            ("dynamic_shared_memory", "0"),
        ];
        a.extend(corr.map(|c| ("correlation", c)));
        slice(track, name, ts, dur, &a)
    };
    let mut got = d.slices.clone();
    got.sort_by_key(|s| (s.track, s.ts));
    let want = vec![
        api(2, "cuInit", 2_000, 100, "0", "1"),
        api(2, "cuMemAlloc_v2", 2_200, 100, "0", "2"),
        flows(api(2, "cuMemcpyHtoD_v2", 2_400, 100, "0", "3"), &[3], &[]),
        flows(api(2, "cuLaunchKernel", 2_600, 50, "0", "4"), &[4], &[]),
        flows(api(2, "cuLaunchKernel", 2_700, 50, "0", "5"), &[5], &[]),
        flows(api(2, "cuMemsetD8_v2", 2_800, 50, "0", "6"), &[6], &[]),
        api(2, "cuMemFree_v2", 6_000, 100, "0", "7"),
        flows(api(3, "cuLaunchKernel", 3_000, 50, "0", "8"), &[8], &[]),
        api(3, "cuLaunchKernel", 3_100, 200, "0", "9"),
        api(3, "cuMemAlloc_v2", 3_150, 50, "2", "10"),
        flows(
            slice(
                6,
                "memcpy HtoD 4 KiB",
                2_450,
                450,
                &[
                    ("bytes", "4096"),
                    ("src_kind", "pinned"),
                    ("dst_kind", "device"),
                    ("correlation", "3"),
                ],
            ),
            &[],
            &[3],
        ),
        flows(k(6, VECADD, 3_000, 1_000, Some("4")), &[], &[4]),
        flows(
            slice(
                7,
                "memset 1000 B",
                5_000,
                100,
                &[("bytes", "1000"), ("value", "0"), ("correlation", "6")],
            ),
            &[],
            &[6],
        ),
        // The work started before its call: the flow passes through, not ends.
        flows(k(12, "fill", 2_900, 200, Some("8")), &[8], &[]),
        k(12, "kernel#9", 3_400, 100, None),
        slice(
            12,
            "memcpy DtoH 1.5 KiB",
            3_600,
            100,
            &[
                ("bytes", "1536"),
                ("src_kind", "device"),
                ("dst_kind", "pageable"),
                ("correlation", "42"),
            ],
        ),
        // Stream 7's second lane.
        flows(k(13, VECADD, 3_800, 1_200, Some("5")), &[], &[5]),
    ];
    assert_eq!(got, want);
    assert_eq!(stats.slices, 17);
    assert_eq!(stats.flows, 5);
    // The call at 3150 nests in the one at 3100 on the same track.
    assert_eq!(d.track(3).thread.as_ref().unwrap().1, 12);
    assert_eq!(
        d.counters,
        vec![
            (8, 1_500, 1 << 20),
            (8, 2_250, (1 << 20) + 4096),
            (8, 6_050, 1 << 20),
            (9, 3_160, 8192),
        ]
    );
    assert_eq!(stats.counter_values, 4);
}

#[test]
fn perfetto_names_are_interned_once_per_sequence() {
    let one = read(&sample().bytes);
    let two = read(&sample().bytes);
    let (bytes, stats) = export(&[one, two], ExportFormat::Perfetto);
    let d = decode(&bytes);
    assert_eq!(stats.traces, 2);
    // Per trace a sequence of its descriptors, then one per lane with events (eight: see
    // perfetto_tracks_are_exact); the clock snapshot naming the trace's clock only once.
    assert_eq!(
        d.first_packets.keys().copied().collect::<Vec<_>>(),
        (1..=18).collect::<Vec<_>>()
    );
    assert_eq!(d.first_packets[&10], vec![13, 87]);
    assert_eq!(d.clock_snapshots, 1);
    // Distinct uuids and flow ids across the two (decode checks uuids).
    assert_eq!(d.tracks.len(), 26);
    let mut ids: Vec<u64> = d.slices.iter().flat_map(|s| s.flows.clone()).collect();
    ids.sort_unstable();
    // (The kernel that starts before its call carries its flow id too.)
    ids.dedup();
    // A flow's id is its correlation id's place among the trace's ids (1 to 42 here), after
    // those of the traces before it.
    assert_eq!(ids, [3, 4, 5, 6, 8, 45, 46, 47, 48, 50]);
    // The second trace's slices are the first's, on its own tracks.
    assert_eq!(d.slices.len(), 34);
    let mut names = HashMap::new();
    let mut p = &bytes[..];
    // Count event-name interning entries: each name once per sequence.
    while !p.is_empty() {
        let _key = read_varint(&mut p);
        let len = read_varint(&mut p) as usize;
        let (packet, rest) = p.split_at(len);
        p = rest;
        let f = fields(packet);
        if let Some(i) = f.msg(12) {
            for n in fields(i).msgs(2) {
                let n = fields(n);
                *names
                    .entry((f.uint(10).unwrap(), n.str(2).unwrap().to_string()))
                    .or_insert(0) += 1;
            }
        }
    }
    assert!(names.values().all(|&n| n == 1), "{names:?}");
    // Once on each lane (a sequence) that has a slice of that name: cuInit, cuMemAlloc_v2,
    // cuMemcpyHtoD_v2, cuLaunchKernel, cuMemsetD8_v2 and cuMemFree_v2 on thread 11, two of
    // them on thread 12, the GPU work's names on their streams' lanes; per trace.
    let mut used: Vec<(u64, &str)> = d
        .slices
        .iter()
        .map(|s| (s.track, s.name.as_str()))
        .collect();
    used.sort_unstable();
    used.dedup();
    assert_eq!(names.len(), used.len());
    assert_eq!(names.len(), 2 * 15);
}

#[test]
fn perfetto_of_a_generated_trace_matches_its_records() {
    let t = read(&generated(77, 3, 2_000, 5).bytes);
    let (bytes, stats) = export(std::slice::from_ref(&t), ExportFormat::Perfetto);
    let d = decode(&bytes);
    // Every API call is a slice of its thread, exactly.
    for (tid, thread) in &t.threads {
        let uuid = d
            .tracks
            .iter()
            .find(|x| x.thread.as_ref().is_some_and(|th| th.1 == *tid as i64))
            .unwrap()
            .uuid;
        let mut got: Vec<(u64, u64, String)> = d
            .slices
            .iter()
            .filter(|s| s.track == uuid)
            .map(|s| (s.ts, s.dur, s.name.clone()))
            .collect();
        let mut want: Vec<(u64, u64, String)> = thread
            .records
            .iter()
            .map(|r| {
                (
                    r.start_ns,
                    r.end_ns - r.start_ns,
                    t.function_name(r.function).into_owned(),
                )
            })
            .collect();
        got.sort();
        want.sort();
        assert_eq!(got, want);
    }
    // Every kernel and copy is a slice of its stream's tracks, exactly.
    let mut want: BTreeMap<String, Vec<(u64, u64, String)>> = BTreeMap::new();
    for k in &t.kernels {
        want.entry(format!("GPU {} stream {}", k.device, k.stream))
            .or_default()
            .push((
                k.start_ns,
                k.end_ns - k.start_ns,
                t.kernel_display_name(k.name),
            ));
    }
    for m in &t.memcpys {
        want.entry(format!("GPU {} stream {}", m.device, m.stream))
            .or_default()
            .push((
                m.start_ns,
                m.end_ns - m.start_ns,
                format!("memcpy {} {}", m.kind.name(), binary_bytes(m.bytes)),
            ));
    }
    let mut lanes = 0;
    for (name, mut want) in want {
        let mut got: Vec<(u64, u64, String)> = d
            .slices_named(&name)
            .into_iter()
            .map(|s| (s.ts, s.dur, s.name.clone()))
            .collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{name}");
        lanes += d
            .tracks
            .iter()
            .filter(|x| x.name.as_deref() == Some(name.as_str()))
            .count();
    }
    // 2 devices with 3 streams each.
    assert!(lanes > 6, "the generated kernels overlap: {lanes} lanes");
    assert_eq!(stats.clipped, 0);
    // Each flow joins a call and the GPU record with its correlation id.
    let by_flow: HashMap<u64, &Slice> = d
        .slices
        .iter()
        .flat_map(|s| s.flows.iter().chain(&s.terminating).map(move |&f| (f, s)))
        .filter(|(_, s)| s.args.iter().all(|(k, _)| k != "result"))
        .collect();
    let mut linked = 0;
    for s in d
        .slices
        .iter()
        .filter(|s| !s.flows.is_empty() && s.args[0].0 == "result")
    {
        for f in &s.flows {
            let gpu = by_flow[f];
            assert_eq!(gpu.args.last().unwrap(), &s.args[1], "correlation");
            linked += 1;
        }
    }
    assert_eq!(linked, linked_records(&t));
    assert_eq!(stats.flows, linked_records(&t) as u64);
}

#[test]
fn nest_puts_overlaps_on_lanes_and_keeps_nesting() {
    // Nested, adjacent, zero-length, overlapping, and an end before its start.
    let spans = [
        (10, 20), // 0
        (12, 15), // 1: in 0
        (20, 30), // 2: after 0
        (25, 40), // 3: overlaps 2 -> lane 1
        (30, 30), // 4: zero-length, after 2
        (35, 36), // 5: lane 0 is free again
        (50, 40), // 6: end before start -> zero-length at 50
        (12, 15), // 7: same as 1 -> nests in it
    ];
    let steps: Vec<Step> = Nest::new(&spans).collect();
    use Step::*;
    assert_eq!(
        steps,
        vec![
            Begin {
                index: 0,
                lane: 0,
                end: 20
            },
            Begin {
                index: 1,
                lane: 0,
                end: 15
            },
            Begin {
                index: 7,
                lane: 0,
                end: 15
            },
            End {
                index: 7,
                lane: 0,
                end: 15
            },
            End {
                index: 1,
                lane: 0,
                end: 15
            },
            End {
                index: 0,
                lane: 0,
                end: 20
            },
            Begin {
                index: 2,
                lane: 0,
                end: 30
            },
            Begin {
                index: 3,
                lane: 1,
                end: 40
            },
            End {
                index: 2,
                lane: 0,
                end: 30
            },
            Begin {
                index: 4,
                lane: 0,
                end: 30
            },
            End {
                index: 4,
                lane: 0,
                end: 30
            },
            Begin {
                index: 5,
                lane: 0,
                end: 36
            },
            End {
                index: 5,
                lane: 0,
                end: 36
            },
            // Lane 1 is not looked at again: its slice ends when all do.
            Begin {
                index: 6,
                lane: 0,
                end: 50
            },
            End {
                index: 6,
                lane: 0,
                end: 50
            },
            End {
                index: 3,
                lane: 1,
                end: 40
            },
        ]
    );
}

#[test]
fn nest_clips_past_the_last_lane() {
    // MAX_LANES + 2 slices, each overlapping every one before it.
    let spans: Vec<(u64, u64)> = (0..MAX_LANES as u64 + 2).map(|i| (i, 100 + i)).collect();
    let mut nest = Nest::new(&spans);
    let mut lanes = vec![0u32; spans.len()];
    let mut ends = vec![0u64; spans.len()];
    for step in nest.by_ref() {
        if let Step::Begin { index, lane, end } = step {
            lanes[index as usize] = lane;
            ends[index as usize] = end;
        }
    }
    assert_eq!(nest.clipped(), 2);
    let last = MAX_LANES as u32 - 1;
    assert_eq!(
        &lanes[..MAX_LANES],
        &(0..MAX_LANES as u32).collect::<Vec<_>>()[..]
    );
    assert_eq!(lanes[MAX_LANES..], [last, last]);
    // Clipped to the end of the slice open on the last lane, then nested.
    assert_eq!(ends[MAX_LANES], 100 + last as u64);
    assert_eq!(ends[MAX_LANES + 1], 100 + last as u64);
}

#[test]
fn binary_byte_counts() {
    for (bytes, text) in [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (4000, "3.9 KiB"),
        (4096, "4 KiB"),
        (1 << 20, "1 MiB"),
        ((1 << 20) - 1, "1024.0 KiB"),
        (3 << 30, "3 GiB"),
        (u64::MAX, "16.0 EiB"),
    ] {
        assert_eq!(binary_bytes(bytes), text, "{bytes}");
    }
}

/// A trace small enough to compare its Chrome JSON whole.
fn small() -> Builder {
    Builder::new(&header(42, &["./tiny", "a\"b"]))
        .names(&[(0, "cuLaunchKernel"), (1, "cuMemcpyDtoH_v2")])
        .kernel_names(&[(3, "_Z4stepPfi")])
        .thread(7, "main")
        .records(
            7,
            &[
                call(0, 0, (1_000, 1_500), 1),
                call(1, 700, (2_000, 12_345), 2),
            ],
        )
        .kernels(&[
            kernel(3, (0, 13), (1_800, 2_600), 1, true),
            kernel(3, (0, 13), (2_500, 3_000), 0, false),
        ])
        .memcpys(&[copy(
            CopyKind::DtoH,
            (0, 13),
            (3_000, 4_024),
            2048,
            2,
            (MemoryKind::Device, MemoryKind::Pinned),
        )])
        .memory(&[
            memory(
                MemoryOperation::Alloc,
                MemoryKind::Device,
                0,
                500,
                1 << 20,
                0,
            ),
            memory(
                MemoryOperation::Free,
                MemoryKind::Device,
                0,
                20_000,
                1 << 20,
                0,
            ),
        ])
}

#[test]
fn chrome_json_is_exact() {
    let t = read(&small().bytes);
    let (bytes, stats) = export(&[t], ExportFormat::Chrome);
    let text = String::from_utf8(bytes).unwrap();
    // Slices in time order; GPU streams named when first used.
    let g = SYNTHETIC_TID_BASE;
    let want = format!(
        r#"{{"traceEvents":[
{{"ph":"M","name":"process_name","pid":42,"tid":0,"args":{{"name":"./tiny 'a\"b'"}}}},
{{"ph":"M","name":"thread_name","pid":42,"tid":7,"args":{{"name":"main"}}}},
{{"ph":"X","cat":"cuda_driver","name":"cuLaunchKernel","pid":42,"tid":7,"ts":1.000,"dur":0.500,"args":{{"result":0,"correlation":1}}}},
{{"ph":"s","cat":"flow","name":"launch","id":1,"pid":42,"tid":7,"ts":1.000}},
{{"ph":"M","name":"thread_name","pid":42,"tid":{g},"args":{{"name":"GPU 0 context 1 stream 13"}}}},
{{"ph":"X","cat":"kernel","name":"step(float*, int)","pid":42,"tid":{g},"ts":1.800,"dur":0.800,"args":{{"grid":"(120,1,1)","block":"(256,1,1)","registers_per_thread":32,"static_shared_memory":1024,"dynamic_shared_memory":0,"correlation":1,"device":0,"context":1,"stream":13}}}},
{{"ph":"f","bp":"e","cat":"flow","name":"launch","id":1,"pid":42,"tid":{g},"ts":1.800}},
{{"ph":"X","cat":"cuda_driver","name":"cuMemcpyDtoH_v2","pid":42,"tid":7,"ts":2.000,"dur":10.345,"args":{{"result":700,"correlation":2}}}},
{{"ph":"s","cat":"flow","name":"launch","id":2,"pid":42,"tid":7,"ts":2.000}},
{{"ph":"M","name":"thread_name","pid":42,"tid":{g1},"args":{{"name":"GPU 0 context 1 stream 13"}}}},
{{"ph":"X","cat":"kernel","name":"step(float*, int)","pid":42,"tid":{g1},"ts":2.500,"dur":0.500,"args":{{"grid":"(120,1,1)","block":"(256,1,1)","registers_per_thread":32,"static_shared_memory":1024,"dynamic_shared_memory":0,"device":0,"context":1,"stream":13}}}},
{{"ph":"X","cat":"gpu_memcpy","name":"Memcpy DtoH 2 KiB","pid":42,"tid":{g},"ts":3.000,"dur":1.024,"args":{{"bytes":2048,"src_kind":"device","dst_kind":"pinned","correlation":2,"device":0,"context":1,"stream":13}}}},
{{"ph":"f","bp":"e","cat":"flow","name":"launch","id":2,"pid":42,"tid":{g},"ts":3.000}},
{{"ph":"C","name":"GPU 0 memory in use","pid":42,"ts":0.500,"args":{{"bytes":1048576}}}},
{{"ph":"C","name":"GPU 0 memory in use","pid":42,"ts":20.000,"args":{{"bytes":0}}}}
],"displayTimeUnit":"ns"}}
"#,
        g1 = g + 1
    );
    assert_eq!(text, want);
    assert_eq!(
        stats,
        Stats {
            bytes: text.len() as u64,
            traces: 1,
            slices: 5,
            flows: 2,
            counter_values: 2,
            clipped: 0,
            nvtx_unplaced: 0,
            nvtx_held: 0,
            packets: 0,
            tracks: 2,
            events: 15,
        }
    );
}

#[test]
fn chrome_json_without_traces_or_records() {
    let (bytes, _) = export(&[], ExportFormat::Chrome);
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        "{\"traceEvents\":[\n],\"displayTimeUnit\":\"ns\"}\n"
    );
    let t = read(&Builder::new(&header(9, &[])).bytes);
    let (bytes, _) = export(&[t], ExportFormat::Chrome);
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        "{\"traceEvents\":[\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":9,\"tid\":0,\
         \"args\":{\"name\":\"/opt/app\"}}\n],\"displayTimeUnit\":\"ns\"}\n"
    );
}

/// The fields Holistic Trace Analysis reads, as PyTorch's profiler writes them: the categories
/// `cuda_runtime`, `cuda_driver`, `kernel`, `gpu_memset`; GPU slices' `device`, `context`,
/// `stream`; a memset named from `Memset`; the process's rank as `distributedInfo` after the
/// events, with the space HTA's pattern `"rank":\s+(\d+)` needs.
#[test]
fn chrome_json_has_the_fields_holistic_trace_analysis_reads() {
    use rtrace_format::{runtime_function, MemsetRecord};
    let launch = runtime_function(211);
    let ranked = |rank: &str| {
        let mut h = header(7, &["./train"]);
        h.rank_env = vec![
            ("LOCAL_RANK".into(), "1".into()),
            ("RANK".into(), rank.into()),
        ];
        Builder::new(&h)
            .names(&[(0, "cuLaunchKernel"), (launch, "cudaLaunchKernel")])
            .kernel_names(&[(3, "ncclDevKernel_AllReduce_Sum_f32_RING_LL")])
            .thread(7, "main")
            .records(
                7,
                &[
                    call(launch, 0, (1_000, 2_000), 1),
                    call(0, 0, (1_100, 1_900), 2),
                ],
            )
            .kernels(&[kernel(3, (0, 13), (2_500, 3_000), 2, true)])
            .memsets(&[MemsetRecord {
                correlation: 1,
                start_ns: 3_000,
                end_ns: 3_500,
                bytes: 1 << 20,
                value: 7,
                device: 0,
                context: 1,
                stream: 14,
                ..Default::default()
            }])
    };
    let (bytes, _) = export(&[read(&ranked("3").bytes)], ExportFormat::Chrome);
    let g = SYNTHETIC_TID_BASE;
    let want = format!(
        r#"{{"traceEvents":[
{{"ph":"M","name":"process_name","pid":7,"tid":0,"args":{{"name":"./train"}}}},
{{"ph":"M","name":"thread_name","pid":7,"tid":7,"args":{{"name":"main"}}}},
{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":7,"tid":7,"ts":1.000,"dur":1.000,"args":{{"result":0,"correlation":1}}}},
{{"ph":"s","cat":"flow","name":"launch","id":1,"pid":7,"tid":7,"ts":1.000}},
{{"ph":"X","cat":"cuda_driver","name":"cuLaunchKernel","pid":7,"tid":7,"ts":1.100,"dur":0.800,"args":{{"result":0,"correlation":2}}}},
{{"ph":"s","cat":"flow","name":"launch","id":2,"pid":7,"tid":7,"ts":1.100}},
{{"ph":"M","name":"thread_name","pid":7,"tid":{g},"args":{{"name":"GPU 0 context 1 stream 13"}}}},
{{"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL","pid":7,"tid":{g},"ts":2.500,"dur":0.500,"args":{{"grid":"(120,1,1)","block":"(256,1,1)","registers_per_thread":32,"static_shared_memory":1024,"dynamic_shared_memory":0,"correlation":2,"device":0,"context":1,"stream":13}}}},
{{"ph":"f","bp":"e","cat":"flow","name":"launch","id":2,"pid":7,"tid":{g},"ts":2.500}},
{{"ph":"M","name":"thread_name","pid":7,"tid":{g1},"args":{{"name":"GPU 0 context 1 stream 14"}}}},
{{"ph":"X","cat":"gpu_memset","name":"Memset 1 MiB","pid":7,"tid":{g1},"ts":3.000,"dur":0.500,"args":{{"bytes":1048576,"value":7,"correlation":1,"device":0,"context":1,"stream":14}}}},
{{"ph":"f","bp":"e","cat":"flow","name":"launch","id":1,"pid":7,"tid":{g1},"ts":3.000}}
],"displayTimeUnit":"ns","distributedInfo": {{"rank": 3}}}}
"#,
        g1 = g + 1,
    );
    assert_eq!(String::from_utf8(bytes).unwrap(), want);
    // HTA reads one rank per file: none is named for two processes in one output, or for a
    // rank that is not a number.
    let two = [read(&ranked("3").bytes), read(&ranked("4").bytes)];
    let (bytes, _) = export(&two, ExportFormat::Chrome);
    assert!(String::from_utf8(bytes)
        .unwrap()
        .ends_with("\n],\"displayTimeUnit\":\"ns\"}\n"));
    let (bytes, _) = export(&[read(&ranked("x").bytes)], ExportFormat::Chrome);
    assert!(String::from_utf8(bytes)
        .unwrap()
        .ends_with("\n],\"displayTimeUnit\":\"ns\"}\n"));
}

#[test]
fn json_strings_are_escaped() {
    let mut s = String::new();
    crate::text::push_json_string(&mut s, "a\"b\\c\nd\u{1}é");
    assert_eq!(s, r#""a\"b\\c\nd\u0001é""#);
}

#[test]
fn chrome_size_warning_past_256_mib() {
    let mut outcome = Outcome::default();
    outcome.stats.bytes = CHROME_SIZE_WARNING;
    size_warning(ExportFormat::Chrome, None, &mut outcome);
    assert!(outcome.warnings.is_empty());
    outcome.stats.bytes += 1;
    size_warning(ExportFormat::Perfetto, None, &mut outcome);
    assert!(outcome.warnings.is_empty());
    size_warning(
        ExportFormat::Chrome,
        Some(Path::new("out.json")),
        &mut outcome,
    );
    assert_eq!(
        outcome.warnings,
        vec![
            "out.json is 268.4 MB: Chrome's trace viewer fails around 256 MB; use --format perfetto"
        ]
    );
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rtrace-export-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn files_and_directories_are_read_one_at_a_time_into_a_renamed_file() {
    let dir = temp_dir("files");
    std::fs::write(dir.join("b.bin"), small().bytes).unwrap();
    std::fs::write(dir.join("a.bin"), sample().bytes).unwrap();
    std::fs::write(dir.join("junk.bin"), b"not a trace").unwrap();
    // `*.bin` entries that are not files: said, not read (a FIFO would block the read).
    std::fs::create_dir(dir.join("d.bin")).unwrap();
    std::os::unix::fs::symlink("loop.bin", dir.join("loop.bin")).unwrap();
    let inputs = expand_inputs(&[dir.clone(), dir.join("a.bin")]).unwrap();
    assert_eq!(inputs.files, vec![dir.join("a.bin"), dir.join("b.bin")]);
    let at = |name: &str| dir.join(name).display().to_string();
    assert_eq!(
        inputs.skipped,
        [
            format!("{}: a directory, not a trace file; skipped", at("d.bin")),
            format!(
                "{}: a link that cannot be followed (Too many levels of symbolic links), not a \
                 trace file; skipped",
                at("loop.bin")
            ),
            format!(
                "{}: not an rtrace trace (bad magic bytes); skipped",
                at("junk.bin")
            ),
        ]
    );
    std::fs::remove_dir(dir.join("d.bin")).unwrap();
    std::fs::remove_file(dir.join("loop.bin")).unwrap();
    let out = dir.join("out.json");
    let outcome = export_files(&inputs.files, ExportFormat::Chrome, Some(&out)).unwrap();
    assert!(outcome.warnings.is_empty());
    let written = std::fs::read(&out).unwrap();
    assert_eq!(outcome.stats.bytes, written.len() as u64);
    assert_eq!(outcome.stats.traces, 2);
    // Same as exporting the two in memory.
    let traces = [
        Trace {
            path: dir.join("a.bin"),
            ..read(&sample().bytes)
        },
        read(&small().bytes),
    ];
    assert_eq!(written, export(&traces, ExportFormat::Chrome).0);
    // No temporary file is left.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["a.bin", "b.bin", "junk.bin", "out.json"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_output_that_is_no_regular_file_is_written_as_it_is_and_a_link_keeps_its_target() {
    use std::os::unix::fs::FileTypeExt;
    let dir = temp_dir("special");
    let input = dir.join("a.bin");
    std::fs::write(&input, sample().bytes).unwrap();
    let files = [input];
    // A device stays the device (it used to be replaced by a regular file).
    let null = Path::new("/dev/null");
    export_files(&files, ExportFormat::Chrome, Some(null)).unwrap();
    assert!(std::fs::metadata(null)
        .unwrap()
        .file_type()
        .is_char_device());
    // A symbolic link stays a link; its target gets the export.
    let target = dir.join("target.json");
    std::fs::write(&target, b"old").unwrap();
    let link = dir.join("link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let outcome = export_files(&files, ExportFormat::Chrome, Some(&link)).unwrap();
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read(&target).unwrap().len() as u64,
        outcome.stats.bytes
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unreadable_inputs_fail_before_writing() {
    let dir = temp_dir("bad");
    std::fs::write(dir.join("a.bin"), sample().bytes).unwrap();
    std::fs::write(dir.join("junk"), b"not a trace").unwrap();
    let err = expand_inputs(&[dir.join("a.bin"), dir.join("junk")]).unwrap_err();
    assert!(err
        .to_string()
        .ends_with("junk: not an rtrace trace (bad magic bytes)"));
    let err = expand_inputs(&[dir.join("missing.bin")]).unwrap_err();
    assert!(err
        .to_string()
        .ends_with("missing.bin: No such file or directory"));
    let empty = dir.join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = expand_inputs(&[empty]).unwrap_err();
    assert!(err
        .to_string()
        .ends_with("empty: no rtrace traces (*.bin) in this directory"));
    // A write that fails leaves nothing behind.
    let out = dir.join("no-such-dir").join("out.pftrace");
    let err = export_files(&[dir.join("a.bin")], ExportFormat::Perfetto, Some(&out)).unwrap_err();
    assert_eq!(err.exit_code(), 1);
    assert!(err.to_string().starts_with("writing "), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn damaged_traces_are_exported_up_to_the_damage_with_warnings() {
    let dir = temp_dir("damaged");
    let mut bytes = sample().bytes;
    bytes.truncate(bytes.len() - 10);
    std::fs::write(dir.join("t.bin"), bytes).unwrap();
    let out = dir.join("t.pftrace");
    let outcome = export_files(&[dir.join("t.bin")], ExportFormat::Perfetto, Some(&out)).unwrap();
    assert_eq!(outcome.warnings.len(), 1);
    assert!(
        outcome.warnings[0].contains("t.bin: truncated: the file ends inside the chunk at byte"),
        "{:?}",
        outcome.warnings
    );
    // Everything but the memory records (the last chunk).
    let d = decode(&std::fs::read(&out).unwrap());
    assert_eq!(d.slices.len(), 17);
    assert!(d.counters.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn format_is_required_and_checked() {
    use crate::cli::{Cli, Command};
    use clap::Parser;
    let cli = Cli::try_parse_from([
        "rtrace", "export", "--format", "chrome", "-o", "x.json", "a.bin",
    ])
    .unwrap();
    let Command::Export(args) = cli.command else {
        panic!("export")
    };
    assert_eq!(args.format, crate::cli::ExportOutputFormat::Chrome);
    assert_eq!(args.output.as_deref(), Some(Path::new("x.json")));
    assert_eq!(args.files, vec![PathBuf::from("a.bin")]);
    let err = Cli::try_parse_from(["rtrace", "export", "--format", "json", "a.bin"]).unwrap_err();
    assert_eq!(err.kind(), clap::error::ErrorKind::InvalidValue);
    assert_eq!(err.exit_code(), 2);
    let text = err.to_string();
    assert!(
        text.contains("invalid value 'json' for '--format <FORMAT>'")
            && text.contains("[possible values: perfetto, chrome, parquet]"),
        "{text}"
    );
    let err = Cli::try_parse_from(["rtrace", "export", "a.bin"]).unwrap_err();
    assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    let err = Cli::try_parse_from(["rtrace", "export", "--format", "perfetto"]).unwrap_err();
    assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
}

/// Sizes and speed on a trace of 1M API records (4 threads; 1 in 4 calls a
/// kernel launch, 1 in 8 a copy, 1 in 16 holding a nested call):
/// `cargo test --release -p rtrace-collector --lib export_speed -- --ignored --nocapture`.
/// With `RTRACE_EXPORT_BENCH=FILE` it also writes the trace to FILE, to time
/// `rtrace export` on it.
#[test]
#[ignore]
fn export_speed() {
    let build = std::time::Instant::now();
    let bytes = generated(4242, 4, 235_294, 9).bytes;
    if let Some(path) = std::env::var_os("RTRACE_EXPORT_BENCH") {
        std::fs::write(path, &bytes).unwrap();
    }
    let t = read(&bytes);
    assert_eq!(t.api_records(), 1_000_000);
    eprintln!(
        "trace: {} API records, {} kernels, {} copies, {} memory records; {} bytes ({:.2?} to build and read)",
        t.api_records(),
        t.kernels.len(),
        t.memcpys.len(),
        t.memory.len(),
        bytes.len(),
        build.elapsed()
    );
    for format in [ExportFormat::Perfetto, ExportFormat::Chrome] {
        let start = std::time::Instant::now();
        let (out, stats) = export(std::slice::from_ref(&t), format);
        let took = start.elapsed();
        eprintln!(
            "{format:?}: {} bytes ({:.1} bytes per slice), {} slices, {} flows, {} counter values in {took:.2?}",
            out.len(),
            out.len() as f64 / stats.slices as f64,
            stats.slices,
            stats.flows,
            stats.counter_values,
        );
        if format == ExportFormat::Perfetto {
            let start = std::time::Instant::now();
            let d = decode(&out);
            eprintln!(
                "  decoded {} slices in {:.2?}",
                d.slices.len(),
                start.elapsed()
            );
        }
    }
}

/// Traces of two hosts are exported on one clock: the second host's calls are shifted by the
/// difference of the boots' realtime anchors, and the export says so.
#[test]
fn traces_from_two_hosts_are_exported_on_one_clock() {
    let dir = temp_dir("hosts");
    let a = header(1, &["a"]);
    // Another boot whose monotonic 90_000 is a's 1_000 + 5_000 of realtime later.
    let b = rtrace_format::ProcessHeader {
        hostname: "gpu2".into(),
        boot_id: "other".into(),
        start: rtrace_format::ClockAnchor {
            monotonic_ns: 90_000,
            realtime_ns: a.start.realtime_ns + 5_000,
        },
        ..header(2, &["b"])
    };
    for (name, h, tid, start) in [("a.bin", &a, 1, 2_000), ("b.bin", &b, 2, 91_000)] {
        let bytes = Builder::new(h)
            .names(&[(0, "cuInit")])
            .records(tid, &[call(0, 0, (start, start + 100), 1)])
            .bytes;
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    let out = dir.join("out.json");
    let files = [dir.join("a.bin"), dir.join("b.bin")];
    let outcome = export_files(&files, ExportFormat::Chrome, Some(&out)).unwrap();
    assert_eq!(
        outcome.clock_notes,
        vec![format!(
            "{}: shifted -0.000084000 s onto the clock of host gpu1 (boot id b00t), from the \
             hosts' realtime clocks",
            files[1].display()
        )]
    );
    let json = std::fs::read_to_string(&out).unwrap();
    // b's call at its monotonic 91_000 is a's 7_000: 7.000 us, as a's own call is 2.000 us.
    assert!(
        json.contains("\"name\":\"cuInit\",\"pid\":1,\"tid\":1,\"ts\":2.000,"),
        "{json}"
    );
    assert!(
        json.contains("\"name\":\"cuInit\",\"pid\":2,\"tid\":2,\"ts\":7.000,"),
        "{json}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// NVTX ranges appear on a track of their thread, and projected onto the GPU work they
/// launched on a track of that device.
#[test]
fn perfetto_shows_nvtx_ranges_and_their_gpu_projection() {
    use rtrace_format::{encode_function_names, ChunkKind, NvtxKind};
    let ev = |kind, message, time_ns, value| nvtx_event(kind, 0, message, time_ns, value);
    let events = [
        ev(NvtxKind::Push, 1, 2_350, 0),
        ev(NvtxKind::Push, 2, 2_550, 1),
        ev(NvtxKind::Pop, 0, 2_760, 1),
        ev(NvtxKind::Pop, 0, 2_860, 0),
    ]
    .concat();
    let bytes = sample()
        .chunk(
            ChunkKind::NvtxStrings,
            0,
            &encode_function_names([(1, "step"), (2, "fwd")]),
        )
        .chunk(ChunkKind::NvtxEvents, 11, &events)
        .bytes;
    let trace = Trace::read(Path::new("t.bin"), &bytes[..]).unwrap();
    let (out, _) = export_traces(
        std::slice::from_ref(&trace),
        ExportFormat::Perfetto,
        Vec::new(),
    )
    .unwrap();
    let d = decode(&out);
    let on = |prefix: &str| -> Vec<(String, u64, u64)> {
        let tracks: Vec<u64> = d
            .tracks
            .iter()
            .filter(|t| t.name.as_deref().is_some_and(|n| n.starts_with(prefix)))
            .map(|t| t.uuid)
            .collect();
        assert_eq!(tracks.len(), 1, "{prefix}");
        let mut s: Vec<(String, u64, u64)> = d
            .slices
            .iter()
            .filter(|s| s.track == tracks[0])
            .map(|s| (s.name.clone(), s.ts, s.dur))
            .collect();
        s.sort();
        s
    };
    assert_eq!(
        on("NVTX: app (11)"),
        vec![("fwd".into(), 2_550, 210), ("step".into(), 2_350, 510)]
    );
    // step: calls at 2400 (copy 2450-2900), 2600 and 2700 (kernels to 5000), 2800 (memset to
    // 5100); fwd: the two kernels (3000-5000).
    assert_eq!(
        on("NVTX projected: "),
        vec![("fwd".into(), 3_000, 2_000), ("step".into(), 2_450, 2_650)]
    );
}

/// A graph launch's kernels each get a flow of their own from the one call; the ids are
/// the call's correlation id's place among the trace's ids, `stride` apart (the most GPU
/// records of one id).
#[test]
fn link_table_fans_a_call_out_to_each_of_its_records() {
    use super::layout::{Flow, Gpu};
    use crate::read::links::LinkTable;
    use rtrace_format::{ApiRecord, KernelRecord};
    let api = |c| ApiRecord {
        correlation: c,
        ..Default::default()
    };
    let k = |c| KernelRecord {
        correlation: c,
        flags: FLAG_CORRELATED,
        ..Default::default()
    };
    let mut t = LinkTable::default();
    // Ids 10..=14 in calls; 12 launched three kernels, 13 one, 11 none; 99 has no call;
    // an id 2^40 away (a damaged record) is held apart.
    for c in [12, 10, 11, 13, 14] {
        t.api(c);
    }
    for c in [12, 13, 12, 99, 12, 1 << 40] {
        t.gpu(c);
    }
    t.api(1 << 40);
    let mut next = 5;
    t.number(&mut next);
    // Dense ids 10..=99 (90 places), then the stray one: 91 places, 3 flows each.
    assert_eq!(next, 5 + 91 * 3);
    let first = |c: u64| 5 + (c - 10) * 3;
    // The kernel of 13 comes before its call: its flow passes through.
    assert_eq!(
        t.gpu_flow(Gpu::Kernel(&k(13))),
        Some(Flow {
            id: first(13),
            call_first: false
        })
    );
    assert_eq!(t.api_flows(&api(11)), 0..0);
    assert_eq!(t.api_flows(&api(12)), first(12)..first(12) + 3);
    // A second call with the id starts none.
    assert_eq!(t.api_flows(&api(12)), 0..0);
    assert_eq!(t.api_flows(&api(13)), first(13)..first(13) + 1);
    let ids: Vec<Option<Flow>> = (0..3).map(|_| t.gpu_flow(Gpu::Kernel(&k(12)))).collect();
    let ends = |i| {
        Some(Flow {
            id: first(12) + i,
            call_first: true,
        })
    };
    assert_eq!(ids, [ends(0), ends(1), ends(2)]);
    assert_eq!(t.gpu_flow(Gpu::Kernel(&k(99))), None);
    assert_eq!(t.api_flows(&api(1 << 40)), 5 + 90 * 3..5 + 90 * 3 + 1);
    assert_eq!(t.flows, 5);
}

/// A trace file is exported through the time-ordered merge of its chunks (kernel chunks
/// after every API chunk in the file, threads one after the other): the same bytes as the
/// trace exported from memory, in both formats.
#[test]
fn streamed_files_export_as_the_trace_in_memory() {
    let dir = temp_dir("streamed");
    let path = dir.join("g.bin");
    std::fs::write(&path, generated(91, 3, 3_000, 17).bytes).unwrap();
    let t = Trace {
        path: path.clone(),
        ..rtrace_collector_load(&path)
    };
    let graphs = t
        .kernels
        .iter()
        .filter(|k| {
            t.kernels
                .iter()
                .filter(|o| o.correlation == k.correlation)
                .count()
                == 3
        })
        .count();
    assert!(graphs > 0, "the trace holds graph launches");
    for format in [ExportFormat::Perfetto, ExportFormat::Chrome] {
        let out = dir.join("out");
        let outcome = export_files(std::slice::from_ref(&path), format, Some(&out)).unwrap();
        let (want, stats) = export(std::slice::from_ref(&t), format);
        assert_eq!(std::fs::read(&out).unwrap(), want, "{format:?}");
        assert_eq!(outcome.stats, stats);
        assert_eq!(stats.flows, linked_records(&t) as u64);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The GPU records of a generated trace that link to a call (its flagged kernels, and
/// every copy).
fn linked_records(t: &Trace) -> usize {
    let kernels = t.kernels.iter();
    kernels.filter(|k| k.flags & FLAG_CORRELATED != 0).count() + t.memcpys.len()
}

fn rtrace_collector_load(path: &Path) -> Trace {
    crate::read::load_trace(path).unwrap()
}

/// The tracks of one thread's NVTX ranges, drawn as they begin: a push goes on the lane of
/// the range of its domain it was pushed in, when that one is innermost there; any other range
/// on the first free lane. A range that never ended stays open (Perfetto) or is a begin event
/// alone (Chrome).
#[test]
fn nvtx_ranges_take_lanes_as_they_begin() {
    use rtrace_format::{encode_function_names, ChunkKind, NvtxKind};
    let ev = nvtx_event;
    use NvtxKind::{End, Pop, Push, Start};
    let events = [
        ev(Push, 0, 1, 1_000, 0),  // step: lane 0
        ev(Push, 0, 2, 1_100, 1),  // fwd, in step: lane 0
        ev(Push, 5, 3, 1_150, 0),  // io, another domain: lane 1
        ev(Pop, 0, 0, 1_200, 1),   // fwd ends
        ev(Start, 0, 4, 1_250, 7), // async (id 7): lanes 0 and 1 hold ranges, so lane 2
        ev(Pop, 5, 0, 1_300, 0),   // io ends
        ev(Push, 0, 5, 1_350, 1),  // bwd, in step: lane 0
        ev(Pop, 0, 0, 1_400, 1),   // bwd ends
        ev(End, 0, 0, 1_450, 7),   // async ends
        ev(Pop, 0, 0, 1_500, 0),   // step ends
        ev(Push, 0, 6, 1_600, 0),  // tail: never ends
        ev(Start, 0, 4, 1_700, 8), // async (id 8): lane 1, free again
        ev(End, 0, 0, 1_800, 8),
    ]
    .concat();
    let strings = [
        (1, "step"),
        (2, "fwd"),
        (3, "io"),
        (4, "async"),
        (5, "bwd"),
        (6, "tail"),
    ];
    let bytes = sample()
        .chunk(ChunkKind::NvtxStrings, 0, &encode_function_names(strings))
        .chunk(ChunkKind::NvtxEvents, 11, &events)
        .bytes;
    let trace = read(&bytes);

    let (out, stats) = export(std::slice::from_ref(&trace), ExportFormat::Perfetto);
    let d = decode(&out);
    // The lanes of the thread's NVTX track: the track, then its children in order.
    let lanes: Vec<u64> = d
        .tracks
        .iter()
        .filter(|t| t.name.as_deref() == Some("NVTX: app (11)"))
        .map(|t| t.uuid)
        .collect();
    assert_eq!(lanes.len(), 3);
    for &child in &lanes[1..] {
        assert_eq!(d.track(child).parent, Some(lanes[0]));
    }
    let lane = |uuid: u64| lanes.iter().position(|&l| l == uuid).unwrap();
    let mut got: Vec<(usize, String, u64, u64)> = d
        .slices
        .iter()
        .filter(|s| lanes.contains(&s.track))
        .map(|s| (lane(s.track), s.name.clone(), s.ts, s.dur))
        .collect();
    got.sort();
    let want = [
        (0, "bwd", 1_350, 50),
        (0, "fwd", 1_100, 100),
        (0, "step", 1_000, 500),
        (1, "async", 1_700, 100),
        (1, "io", 1_150, 150),
        (2, "async", 1_250, 200),
    ];
    let want: Vec<(usize, String, u64, u64)> = want
        .iter()
        .map(|&(l, n, ts, dur)| (l, n.to_string(), ts, dur))
        .collect();
    assert_eq!(got, want);
    let open: Vec<(usize, &str, u64)> = d
        .open
        .iter()
        .map(|s| (lane(s.track), s.name.as_str(), s.ts))
        .collect();
    assert_eq!(open, vec![(0, "tail", 1_600)]);
    assert_eq!((stats.nvtx_unplaced, stats.clipped), (0, 0));

    // Chrome: the same slices as complete events on a thread per lane, the open one alone;
    // and the spans of the GPU work of `tail` (open over the sample's calls), in the process
    // view: on GPU 0 its thread's, on GPU 1 the kernel the worker thread (no range of its
    // own) launched while it was open.
    let (out, _) = export(std::slice::from_ref(&trace), ExportFormat::Chrome);
    let json = String::from_utf8(out).unwrap();
    let nvtx: Vec<&str> = json
        .lines()
        .filter(|l| l.contains("\"cat\":\"nvtx\""))
        .collect();
    assert_eq!(nvtx.len(), 9, "{json}");
    let base = super::SYNTHETIC_TID_BASE;
    // Lane thread ids in order of first use: lane 0, 1, 2 of the track, from the base up,
    // then the sample's 4 stream lanes, then the projected track.
    for (name, tid, ts, dur) in [
        ("fwd", base, "1.100", Some("0.100")),
        ("step", base, "1.000", Some("0.500")),
        ("io", base + 1, "1.150", Some("0.150")),
        ("async", base + 2, "1.250", Some("0.200")),
        ("bwd", base, "1.350", Some("0.050")),
        ("async", base + 1, "1.700", Some("0.100")),
        ("tail", base, "1.600", None),
        ("tail", base + 7, "2.450", Some("2.650")),
        ("tail", base + 8, "2.900", Some("0.200")),
    ] {
        let line = match dur {
            Some(dur) => format!(
                "{{\"ph\":\"X\",\"cat\":\"nvtx\",\"name\":\"{name}\",\"pid\":1234,\"tid\":{tid},\
                 \"ts\":{ts},\"dur\":{dur},\"args\":{{}}}}"
            ),
            None => format!(
                "{{\"ph\":\"B\",\"cat\":\"nvtx\",\"name\":\"{name}\",\"pid\":1234,\"tid\":{tid},\
                 \"ts\":{ts}}}"
            ),
        };
        assert!(
            nvtx.iter().any(|l| l.trim_end_matches(',') == line),
            "{line} in {json}"
        );
    }
}

/// NVTX tracks are written as the ranges end, holding a bounded number of them, even under a
/// range open over the whole trace: 40 000 ranges inside one, each with a kernel that runs
/// after it ended.
#[test]
fn nvtx_tracks_hold_few_ranges_under_a_long_one() {
    use rtrace_format::{encode_function_names, ChunkKind, NvtxKind};
    const N: u64 = 40_000;
    let ev = |kind, message, time_ns| nvtx_event(kind, 0, message, time_ns, 0);
    let (mut events, mut calls, mut kernels) =
        (ev(NvtxKind::Push, 1, 500).to_vec(), vec![], vec![]);
    let mut at = 1_000;
    let mut want = Vec::new();
    for i in 0..N {
        let d = 1_000 + (i * 7_919) % 5_003;
        events.extend(ev(NvtxKind::Push, 2, at));
        events.extend(ev(NvtxKind::Pop, 0, at + d));
        calls.push(call(1, 0, (at + 10, at + 20), i + 1));
        let (start, end) = (at + d + 250, at + d + 350);
        kernels.push(kernel(0, (0, 7), (start, end), i + 1, true));
        want.push(("it".to_string(), start, 100));
        at += d + 200;
    }
    events.extend(ev(NvtxKind::Pop, 0, at));
    let (first, last) = (want[0].1, want[N as usize - 1].1 + 100);
    want.push(("run".to_string(), first, last - first));
    want.sort();
    let bytes = Builder::new(&header(1234, &["./app"]))
        .names(&[(1, "cuLaunchKernel")])
        .kernel_names(&[(0, "k")])
        .thread(11, "app")
        .chunk(
            ChunkKind::NvtxStrings,
            0,
            &encode_function_names([(1, "run"), (2, "it")]),
        )
        .chunk(ChunkKind::NvtxEvents, 11, &events)
        .records(11, &calls)
        .kernels(&kernels)
        .bytes;
    let trace = read(&bytes);
    let (out, stats) = export(std::slice::from_ref(&trace), ExportFormat::Perfetto);
    // The spans waited for the long range's end while fewer than 16 384 did, then were drawn
    // every 4 096 records; far fewer than the 40 001 ranges were held.
    assert!(
        (16_384..16_384 + 4_096).contains(&stats.nvtx_held),
        "{}",
        stats.nvtx_held
    );
    let d = decode(&out);
    let on = |name: &str| -> Vec<(String, u64, u64)> {
        let mut s: Vec<(String, u64, u64)> = d
            .slices
            .iter()
            .filter(|s| d.track(s.track).name.as_deref() == Some(name))
            .map(|s| (s.name.clone(), s.ts, s.dur))
            .collect();
        s.sort();
        s
    };
    // Every span drawn, nested in the long one's on one lane.
    assert_eq!(on("NVTX projected: GPU 0"), want);
    let lanes = |name: &str| {
        d.tracks
            .iter()
            .filter(|t| t.name.as_deref() == Some(name))
            .count()
    };
    assert_eq!(
        (lanes("NVTX projected: GPU 0"), lanes("NVTX: app (11)")),
        (1, 1)
    );
    assert_eq!(on("NVTX: app (11)").len(), N as usize + 1);
    assert_eq!(stats.nvtx_unplaced, 0);
}

#[test]
fn launch_dimensions_read_as_formatted() {
    let mut text = String::new();
    for d in [
        [1, 1, 1],
        [0, 10, 255],
        [-7, 1_000_000, 65_535],
        [i32::MIN, i32::MAX, -1],
    ] {
        let want = format!("({},{},{})", d[0], d[1], d[2]);
        let value = super::layout::Value::Dim(d);
        assert_eq!(value.write_str(&mut text), Some(want.as_str()));
    }
    let value = super::layout::Value::Name("device");
    assert_eq!(value.write_str(&mut text), Some("device"));
    assert_eq!(super::layout::Value::Uint(3).write_str(&mut text), None);
}

#[test]
fn perfetto_draws_a_counter_track_per_gpu_metric() {
    let mut t = read(&sample().bytes);
    t.gpu_metric_setups.push(rtrace_format::GpuMetricsSetup {
        device: 0,
        chip: "GH100".into(),
        metrics: vec![
            "sm__cycles_active.avg.pct_of_peak_sustained_elapsed".into(),
            "dram__bytes_read.sum".into(),
        ],
        interval: 1_000,
        ..Default::default()
    });
    // Two samples of 1 µs: 40 % and 2000 bytes, 60 % and NaN (no point for it).
    t.gpu_metric_samples.push(rtrace_format::GpuMetricSamples {
        device: 0,
        times: vec![(2_000, 3_000), (3_000, 4_000)],
        values: vec![40.0, 2000.0, 60.0, f64::NAN],
        ..Default::default()
    });
    let (bytes, stats) = export(&[t], ExportFormat::Perfetto);
    let d = decode(&bytes);
    let device = d
        .tracks
        .iter()
        .find(|t| t.name.as_deref() == Some("GPU 0: NVIDIA H100 80GB HBM3"))
        .unwrap()
        .uuid;
    let metric = |name: &str| {
        d.tracks
            .iter()
            .find(|t| t.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no track {name}"))
    };
    let sm = metric("GPU 0 sm__cycles_active.avg.pct_of_peak_sustained_elapsed");
    let dram = metric("GPU 0 dram__bytes_read.sum.per_second");
    assert_eq!(
        (sm.parent, sm.counter_unit_name.as_deref()),
        (Some(device), Some("%"))
    );
    assert_eq!(
        (dram.parent, dram.counter_unit_name.as_deref()),
        (Some(device), Some("B/s"))
    );
    let points = |uuid| -> Vec<(u64, f64)> {
        d.double_counters
            .iter()
            .filter(|c| c.0 == uuid)
            .map(|c| (c.1, c.2))
            .collect()
    };
    assert_eq!(
        points(sm.uuid),
        vec![(2_000, 40.0), (3_000, 60.0), (4_000, 60.0)]
    );
    // 2000 bytes in 1 µs: 2e9 B/s; the NaN sample has no point, nor the end after it.
    assert_eq!(points(dram.uuid), vec![(2_000, 2000.0 / 1e-6)]);
    assert_eq!(stats.counter_values, 4 + 4);
}

#[test]
fn chrome_draws_a_counter_per_gpu_metric() {
    let mut t = read(&sample().bytes);
    t.gpu_metric_setups.push(rtrace_format::GpuMetricsSetup {
        metrics: vec!["sm__cycles_active.avg.pct_of_peak_sustained_elapsed".into()],
        ..Default::default()
    });
    t.gpu_metric_samples.push(rtrace_format::GpuMetricSamples {
        times: vec![(2_000, 3_000), (3_000, 4_500)],
        values: vec![40.0, 62.5],
        ..Default::default()
    });
    let (bytes, stats) = export(&[t], ExportFormat::Chrome);
    let text = String::from_utf8(bytes).unwrap();
    let name = "\"name\":\"GPU 0 sm__cycles_active.avg.pct_of_peak_sustained_elapsed\"";
    for (ts, v) in [("2.000", "40"), ("3.000", "62.5"), ("4.500", "62.5")] {
        let want = format!("{name},\"pid\":1234,\"ts\":{ts},\"args\":{{\"value\":{v}}}}}");
        assert!(text.contains(&want), "{want} not in {text}");
    }
    assert_eq!(stats.counter_values, 4 + 3);
}
