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

It reads events as the trace processor does: interned names per sequence, events
sorted by timestamp (stably), slices matched begin to end per track. It fails
(exit 1, the reason on stderr) on anything the schema or the track-event rules
do not allow: unknown fields, a packet without a trusted sequence id, an event
before its sequence's state is cleared or without SEQ_NEEDS_INCREMENTAL_STATE,
an unknown interned id or track, an end without a begin, a slice left open (but
for an NVTX range that never ended, on its thread's NVTX track: its DUR is `open`).
"""

import sys
from collections import defaultdict

from google.protobuf import unknown_fields
import perfetto.protos.perfetto.trace.perfetto_trace_pb2 as pb

MONOTONIC = pb.BUILTIN_CLOCK_MONOTONIC
CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
NEEDS = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
TE = pb.TrackEvent


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


def main(path):
    trace = pb.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    tracks = {}  # uuid -> TrackDescriptor
    track_order = []
    event_names = {}  # (seq, iid) -> name
    arg_names = {}
    cleared = set()
    events = []  # (ts, order, seq, TrackEvent)
    clock_snapshots = 0
    for i, packet in enumerate(trace.packet):
        check_known(packet, "packet")
        if not packet.HasField("trusted_packet_sequence_id"):
            fail(f"packet {i} has no trusted sequence id")
        seq = packet.trusted_packet_sequence_id
        if packet.sequence_flags & CLEARED:
            cleared.add(seq)
            for k in [k for k in event_names if k[0] == seq]:
                del event_names[k]
            for k in [k for k in arg_names if k[0] == seq]:
                del arg_names[k]
            if packet.trace_packet_defaults.timestamp_clock_id != MONOTONIC:
                fail(f"sequence {seq}: timestamps are not on CLOCK_MONOTONIC")
        if packet.HasField("clock_snapshot"):
            clock_snapshots += 1
            if packet.clock_snapshot.primary_trace_clock != MONOTONIC:
                fail("the primary trace clock is not CLOCK_MONOTONIC")
        if packet.HasField("interned_data"):
            for n in packet.interned_data.event_names:
                event_names[(seq, n.iid)] = n.name
            for n in packet.interned_data.debug_annotation_names:
                arg_names[(seq, n.iid)] = n.name
        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            if d.uuid in tracks:
                fail(f"track uuid {d.uuid} described twice")
            tracks[d.uuid] = d
            track_order.append(d.uuid)
        if packet.HasField("track_event"):
            if seq not in cleared:
                fail(f"packet {i}: an event before its sequence's state was cleared")
            if not packet.sequence_flags & NEEDS:
                fail(f"packet {i}: an event without SEQ_NEEDS_INCREMENTAL_STATE")
            e = packet.track_event
            if e.track_uuid not in tracks:
                fail(f"packet {i}: an event on an undescribed track {e.track_uuid}")
            resolved = {
                "type": e.type,
                "track": e.track_uuid,
                "flows": list(e.flow_ids),
                "terminating": list(e.terminating_flow_ids),
                "value": e.counter_value,
            }
            if e.type == TE.TYPE_SLICE_BEGIN:
                try:
                    resolved["name"] = event_names[(seq, e.name_iid)]
                    args = []
                    for a in e.debug_annotations:
                        which = a.WhichOneof("value")
                        key = a.name if a.HasField("name") else arg_names[(seq, a.name_iid)]
                        args.append(f"{key}={getattr(a, which)}")
                except KeyError as k:
                    fail(f"packet {i}: unknown interned id {k}")
                resolved["args"] = ",".join(args)
            events.append((packet.timestamp, i, resolved))
    if clock_snapshots != 1:
        fail(f"{clock_snapshots} clock snapshots")

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
    main(sys.argv[1])
