#!/usr/bin/env python3
"""Decodes a Perfetto trace written by `rtrace export --format perfetto` with the
trace schema Perfetto ships (the `perfetto` PyPI package's perfetto_trace_pb2;
its trace processor is not used) and prints what a trace viewer would show,
one fact per line, for collector/tests/export.rs to compare with the trace:

    process PID NAME | ARGV...
    thread PID TID NAME
    track NAME | parent PARENT_NAME          (once per name and parent: lanes share it)
    lanes NAME N                             (tracks of that name and parent)
    counter_track NAME | parent PARENT_NAME | unit UNIT
    slice TRACK | NAME | TS | DUR | K=V,...
    flow TRACK|NAME|TS -> TRACK|NAME|TS ends|passes
    counter NAME TS VALUE

    perfetto_decode.py TRACE.pftrace            # the facts above
    perfetto_decode.py --events TRACE.pftrace   # each descriptor and event, in file order

It reads packets as the trace processor does (`Sequences`): per sequence its interned
names and argument strings and its packet defaults (the timestamp's clock, the event's
track), each cleared with SEQ_INCREMENTAL_STATE_CLEARED; timestamps on CLOCK_MONOTONIC or
on a clock of the sequence that a clock snapshot ties to it (incremental: each packet's
timestamp a delta from the last on that clock). For the facts, events are then sorted by
timestamp (stably) and slices matched begin to end per track. It fails (exit 1, the
reason on stderr) on anything the schema or the track-event rules do not allow: unknown
fields, a packet without a trusted sequence id, an event before its sequence's state is
cleared or without SEQ_NEEDS_INCREMENTAL_STATE, an unknown interned id, track or clock,
other than one clock snapshot naming CLOCK_MONOTONIC the trace's clock, an end without a
begin, a slice left open (but for an NVTX range that never ended, on its thread's NVTX
track: its DUR is `open`).

`--events` reads the file as a stream (a trace of any size), in constant memory, and prints
one line per track descriptor (`track UUID FIELDS`) and per event (`event TS TRACK TYPE
NAME | ARGS | flows F... | ends F... | value V`), timestamps absolute and names resolved:
two exports that mean the same, written in the same order, print the same lines, however
they are encoded (tools/bench/same_output.sh compares two builds so).
"""

import sys
from collections import defaultdict

from google.protobuf import text_format, unknown_fields
import perfetto.protos.perfetto.trace.perfetto_trace_pb2 as pb

MONOTONIC = pb.BUILTIN_CLOCK_MONOTONIC
BOOTTIME = pb.BUILTIN_CLOCK_BOOTTIME
CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
NEEDS = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
TE = pb.TrackEvent
# Clock ids of a sequence's own clocks (ClockSnapshot.Clock.clock_id).
SEQUENCE_CLOCKS = range(64, 128)


def fail(why):
    print(f"perfetto_decode: {why}", file=sys.stderr)
    sys.exit(1)


def check_known(msg, where):
    if len(unknown_fields.UnknownFieldSet(msg)):
        fail(f"unknown fields in {where}: {msg}")
    for field, value in msg.ListFields():
        if field.message_type is None:
            continue
        values = value if field.is_repeated else [value]
        for v in values:
            check_known(v, f"{where}.{field.name}")


def read_varint(f):
    """A varint from file `f`; None at the end of the file."""
    shift = value = 0
    while True:
        b = f.read(1)
        if not b:
            if shift:
                fail("the file ends inside a packet's key or length")
            return None
        value |= (b[0] & 0x7F) << shift
        if b[0] < 0x80:
            return value
        shift += 7


def packets(path):
    """The file's TracePackets, one at a time (a `Trace` is its packets, field 1, in a row)."""
    with open(path, "rb", buffering=1 << 20) as f:
        while True:
            key = read_varint(f)
            if key is None:
                return
            if key != (1 << 3 | 2):
                fail(f"a Trace field other than packet (key {key})")
            data = f.read(read_varint(f))
            packet = pb.TracePacket()
            packet.ParseFromString(data)
            yield packet


class Sequence:
    """What the trace processor keeps of one packet sequence."""

    def __init__(self):
        self.cleared = False
        self.names = {}
        self.arg_names = {}
        self.strings = {}
        self.defaults = None
        # clock id -> [incremental, last value, MONOTONIC minus the clock]
        self.clocks = {}

    def clear(self):
        self.cleared = True
        self.names, self.arg_names, self.strings = {}, {}, {}
        self.defaults = None


class Sequences:
    """Packets read as the trace processor reads them, in file order (`read`)."""

    def __init__(self):
        self.seqs = defaultdict(Sequence)
        self.primary_clocks = 0
        self.tracks = set()

    def clock_snapshot(self, seq, snapshot):
        if snapshot.HasField("primary_trace_clock"):
            self.primary_clocks += 1
            if snapshot.primary_trace_clock != MONOTONIC:
                fail("the primary trace clock is not CLOCK_MONOTONIC")
        values = {c.clock_id: c for c in snapshot.clocks}
        for c in snapshot.clocks:
            if c.clock_id == MONOTONIC:
                continue
            if c.clock_id not in SEQUENCE_CLOCKS or MONOTONIC not in values:
                fail(f"sequence {seq}: a clock snapshot other than a sequence's clock and CLOCK_MONOTONIC")
            if c.unit_multiplier_ns not in (0, 1):
                fail(f"sequence {seq}: clock {c.clock_id} not in ns")
            seq.clocks[c.clock_id] = [c.is_incremental, c.timestamp, values[MONOTONIC].timestamp - c.timestamp]

    def timestamp(self, i, seq, packet):
        """The packet's timestamp on CLOCK_MONOTONIC."""
        clock = BOOTTIME
        if packet.HasField("timestamp_clock_id"):
            clock = packet.timestamp_clock_id
        elif seq.defaults is not None and seq.defaults.HasField("timestamp_clock_id"):
            clock = seq.defaults.timestamp_clock_id
        if clock == MONOTONIC:
            return packet.timestamp
        if clock not in seq.clocks:
            fail(f"packet {i}: a timestamp on clock {clock}, which no snapshot of its sequence ties to CLOCK_MONOTONIC")
        c = seq.clocks[clock]
        if c[0]:
            c[1] += packet.timestamp
            return c[1] + c[2]
        return packet.timestamp + c[2]

    def read(self, i, packet):
        """Packet `i` resolved: ("track", descriptor), ("event", ts, event dict) or None."""
        check_known(packet, "packet")
        if not packet.HasField("trusted_packet_sequence_id"):
            fail(f"packet {i} has no trusted sequence id")
        seq = self.seqs[packet.trusted_packet_sequence_id]
        if packet.sequence_flags & CLEARED:
            seq.clear()
        if packet.HasField("trace_packet_defaults"):
            seq.defaults = packet.trace_packet_defaults
        if packet.HasField("interned_data"):
            d = packet.interned_data
            for n in d.event_names:
                seq.names[n.iid] = n.name
            for n in d.debug_annotation_names:
                seq.arg_names[n.iid] = n.name
            for n in d.debug_annotation_string_values:
                seq.strings[n.iid] = n.str.decode()
        if packet.HasField("clock_snapshot"):
            self.clock_snapshot(seq, packet.clock_snapshot)
        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            if d.uuid in self.tracks:
                fail(f"track uuid {d.uuid} described twice")
            self.tracks.add(d.uuid)
            return ("track", d)
        if not packet.HasField("track_event"):
            return None
        if not seq.cleared:
            fail(f"packet {i}: an event before its sequence's state was cleared")
        if not packet.sequence_flags & NEEDS:
            fail(f"packet {i}: an event without SEQ_NEEDS_INCREMENTAL_STATE")
        e = packet.track_event
        if e.HasField("track_uuid"):
            track = e.track_uuid
        elif seq.defaults is not None and seq.defaults.track_event_defaults.HasField("track_uuid"):
            track = seq.defaults.track_event_defaults.track_uuid
        else:
            fail(f"packet {i}: an event without a track")
        if track not in self.tracks:
            fail(f"packet {i}: an event on an undescribed track {track}")
        resolved = {
            "type": e.type,
            "track": track,
            "flows": list(e.flow_ids),
            "terminating": list(e.terminating_flow_ids),
            "value": e.double_counter_value if e.HasField("double_counter_value") else e.counter_value,
        }
        if e.type == TE.TYPE_SLICE_BEGIN:
            try:
                resolved["name"] = seq.names[e.name_iid]
                args = []
                for a in e.debug_annotations:
                    key = a.name if a.HasField("name") else seq.arg_names[a.name_iid]
                    which = a.WhichOneof("value")
                    value = seq.strings[a.string_value_iid] if which == "string_value_iid" else getattr(a, which)
                    args.append(f"{key}={value}")
            except KeyError as k:
                fail(f"packet {i}: unknown interned id {k}")
            resolved["args"] = ",".join(args)
        return ("event", self.timestamp(i, seq, packet), resolved)


def events(path):
    """--events: each descriptor and event in file order."""
    seqs = Sequences()
    out = sys.stdout
    for i, packet in enumerate(packets(path)):
        r = seqs.read(i, packet)
        if r is None:
            continue
        if r[0] == "track":
            out.write(f"track {r[1].uuid} {text_format.MessageToString(r[1], as_one_line=True)}\n")
            continue
        _, ts, e = r
        flows = " ".join(map(str, e["flows"]))
        ends = " ".join(map(str, e["terminating"]))
        out.write(
            f"event {ts} {e['track']} {e['type']} {e.get('name', '')} | {e.get('args', '')}"
            f" | flows {flows} | ends {ends} | value {e['value']}\n"
        )
    if seqs.primary_clocks != 1:
        fail(f"{seqs.primary_clocks} clock snapshots name the trace's clock")


def main(path):
    seqs = Sequences()
    tracks = {}  # uuid -> TrackDescriptor
    track_order = []
    events = []  # (ts, order, event)
    for i, packet in enumerate(packets(path)):
        r = seqs.read(i, packet)
        if r is None:
            continue
        if r[0] == "track":
            tracks[r[1].uuid] = r[1]
            track_order.append(r[1].uuid)
        else:
            events.append((r[1], i, r[2]))
    if seqs.primary_clocks != 1:
        fail(f"{seqs.primary_clocks} clock snapshots name the trace's clock")

    def name(uuid):
        d = tracks[uuid]
        if d.HasField("process"):
            return f"process {d.process.pid}"
        if d.HasField("thread"):
            return f"thread {d.thread.tid}"
        return d.name

    lines = []
    lanes = defaultdict(int)
    for uuid in track_order:
        d = tracks[uuid]
        if d.HasField("process"):
            p = d.process
            lines.append(f"process {p.pid} {p.process_name} | {' '.join(p.cmdline)}")
        elif d.HasField("thread"):
            t = d.thread
            lines.append(f"thread {t.pid} {t.tid} {t.thread_name}")
            if name(d.parent_uuid) != f"process {t.pid}":
                fail(f"thread {t.tid} is not in its process")
        elif d.HasField("counter"):
            unit = pb.CounterDescriptor.Unit.Name(d.counter.unit)
            lines.append(f"counter_track {d.name} | parent {name(d.parent_uuid)} | unit {unit}")
        else:
            if lanes[(d.parent_uuid, d.name)] == 0:
                lines.append(f"track {d.name} | parent {name(d.parent_uuid)}")
            lanes[(d.parent_uuid, d.name)] += 1
    lines += [f"lanes {n} {c}" for (_, n), c in lanes.items()]

    events.sort(key=lambda e: (e[0], e[1]))
    open_slices = defaultdict(list)
    slices = []
    for ts, _, e in events:
        if e["type"] == TE.TYPE_SLICE_BEGIN:
            e["ts"] = ts
            open_slices[e["track"]].append(e)
        elif e["type"] == TE.TYPE_SLICE_END:
            if not open_slices[e["track"]]:
                fail(f"an end at {ts} without a begin on track {name(e['track'])}")
            s = open_slices[e["track"]].pop()
            s["dur"] = ts - s["ts"]
            slices.append(s)
        elif e["type"] == TE.TYPE_COUNTER:
            lines.append(f"counter {name(e['track'])} {ts} {e['value']}")
        else:
            fail(f"event type {e['type']}")
    for track, left in open_slices.items():
        # Only an NVTX range that never ended may stay open (the viewer shows it so).
        if left and not name(track).startswith("NVTX: "):
            fail(f"slices left open on track {name(track)}")
        for s in left:
            s["dur"] = "open"
            slices.append(s)
    flows = defaultdict(list)
    for s in slices:
        lines.append(
            f"slice {name(s['track'])} | {s['name']} | {s['ts']} | {s['dur']} | {s['args']}"
        )
        for f in s["flows"]:
            flows[f].append((s, False))
        for f in s["terminating"]:
            flows[f].append((s, True))
    for f, ends in flows.items():
        if len(ends) != 2:
            fail(f"flow {f} joins {len(ends)} slices")
        ends.sort(key=lambda e: not tracks[e[0]["track"]].HasField("thread"))
        (call, call_terminates), (work, work_terminates) = ends
        if not tracks[call["track"]].HasField("thread") or tracks[work["track"]].HasField("thread"):
            fail(f"flow {f} does not join a call to GPU work")
        if call_terminates:
            fail(f"flow {f} ends at its call")
        kind = "ends" if work_terminates else "passes"

        def where(s):
            return f"{name(s['track'])}|{s['name']}|{s['ts']}"

        lines.append(f"flow {where(call)} -> {where(work)} {kind}")
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--events":
        events(sys.argv[2])
    elif len(sys.argv) == 2:
        main(sys.argv[1])
    else:
        fail("usage: perfetto_decode.py [--events] TRACE.pftrace")
