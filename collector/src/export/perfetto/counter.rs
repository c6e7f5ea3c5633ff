//! Counter tracks' packets: a counter value event, and the descriptor of a GPU metric's counter
//! track ([`crate::gpu_metrics`]): `GPU N metric`, under the device's track, its unit named
//! (`%`, `B/s`, `/s`).

use super::field;
use crate::export::proto::Proto;

/// A packet of sequence `seq` holding a counter event on track `uuid` at `ts`, its value
/// written by `value`.
pub(super) fn value_packet(
    p: &mut Proto,
    seq: u64,
    uuid: u64,
    ts: u64,
    value: impl FnOnce(&mut Proto),
) {
    let packet = p.begin(field::TRACE_PACKET);
    p.varint(field::TIMESTAMP, ts);
    p.varint(field::TRUSTED_PACKET_SEQUENCE_ID, seq);
    p.varint(field::SEQUENCE_FLAGS, field::SEQ_NEEDS_INCREMENTAL_STATE);
    let e = p.begin(field::TRACK_EVENT);
    p.varint(field::TYPE, field::TYPE_COUNTER);
    p.varint(field::TRACK_UUID, uuid);
    value(p);
    p.end(e);
    p.end(packet);
}

/// Writes the track descriptor's fields for `metric` of `device`.
pub(super) fn gpu_metric_track(p: &mut Proto, uuid: u64, parent: u64, device: u32, metric: &str) {
    let unit = [("pct", "%"), ("bytes", "B/s"), ("per_second", "/s")]
        .iter()
        .find(|(k, _)| metric.contains(k))
        .map_or("", |u| u.1);
    p.varint(field::UUID, uuid);
    p.varint(field::PARENT_UUID, parent);
    p.string(field::TRACK_NAME, &format!("GPU {device} {metric}"));
    let c = p.begin(field::COUNTER);
    p.string(field::UNIT_NAME, unit);
    p.end(c);
}
