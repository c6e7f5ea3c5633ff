//! The descriptor of a GPU metric's counter track ([`crate::gpu_metrics`]): `GPU N metric`,
//! under the device's track, its unit named (`%`, `B/s`, `/s`).

use super::field;
use crate::export::proto::Proto;

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
