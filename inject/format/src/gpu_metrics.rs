//! GPU metrics over time (CUPTI's PM Sampling API, `cupti_pmsampling.h`), in the trace of the
//! sampler process `rtrace record --gpu-metrics` runs beside the program (its header's
//! `writer_version` starts with [`GPU_SAMPLER`]): how sampling was set up on each device
//! (chunk kind 45), and each decode of its samples (chunk kind 46): each sample's start and end
//! already on the traces' clock, its values as the sampler evaluated them (CUPTI's host API, a
//! PM sampling host object for the chip), and, for the first decode of each device, the counter
//! data image as CUPTI decoded it (zstd-compressed), so a reader can check the evaluation or
//! evaluate other metrics from it. Every image is not kept: on GH100 one costs 62.6 KB per
//! sample (measured with CUDA 13.0, tests/gpu/pmsampling_probe.cu), 62 MB/s at 1 kHz. Both are
//! bincode values. The sampler's trace also holds the devices it sampled (chunk kind 10), by
//! which a reader matches them with the traced processes' (host, boot and PCI address).
//!
//! Why sampling is off on a device (no permission, counters held by another tool, an
//! unsupported chip, a rate the chip refuses) is a [`Notice`](crate::Notice) whose message
//! starts with [`GPU_METRICS_NOTICE`].

use std::ops::RangeInclusive;

use serde::{Deserialize, Serialize};

/// The start of every notice about GPU metrics.
pub const GPU_METRICS_NOTICE: &str = "GPU metrics";

/// The start of the `writer_version` of a GPU metrics sampler's trace (not a traced program's).
pub const GPU_SAMPLER: &str = "rtrace gpu-sampler";

/// The sampling rate `rtrace record --gpu-metrics` takes when given none, Hz (Nsight Systems'
/// default: one sample every 100 µs).
pub const DEFAULT_GPU_METRICS_HZ: u64 = 10_000;
/// The rates [`crate::env::GPU_METRICS`] may give, Hz: from one sample a second to one every
/// 10 µs.
pub const GPU_METRICS_HZ_RANGE: RangeInclusive<u64> = 1..=100_000;

/// The metrics sampled, in this order, where the chip lists them and they fit one pass with
/// those before them (PM sampling takes a configuration of one pass only). Measured offline
/// with the CUDA 13.0 host library for GH100: all of these fit one pass together;
/// `sm__warps_active` (not `_realtime`) would need a second.
pub const GPU_METRICS: [&str; 13] = [
    "gpu__time_duration.sum",
    "sm__cycles_elapsed.avg.per_second",
    "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
    "sm__issue_active.avg.pct_of_peak_sustained_elapsed",
    "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active_realtime.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "pcie__read_bytes.sum",
    "pcie__write_bytes.sum",
    "nvlrx__bytes.sum",
    "nvltx__bytes.sum",
    "sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed",
];

/// A [`crate::env::GPU_METRICS`] value: empty or `0` → off; `1`, `on` → the default rate;
/// else a rate in Hz (`10000`, `10kHz`, `10k`, `500Hz`) in [`GPU_METRICS_HZ_RANGE`]. The rate,
/// or why the value is none.
pub fn parse_gpu_metrics_hz(v: &str) -> Result<Option<u64>, String> {
    let t = v.trim();
    match t {
        "" | "0" | "off" | "no" | "false" => return Ok(None),
        "1" | "on" | "yes" | "true" => return Ok(Some(DEFAULT_GPU_METRICS_HZ)),
        _ => {}
    }
    let lower = t.to_ascii_lowercase();
    let (digits, scale) = if let Some(d) = lower.strip_suffix("khz") {
        (d, 1000)
    } else if let Some(d) = lower.strip_suffix('k') {
        (d, 1000)
    } else if let Some(d) = lower.strip_suffix("hz") {
        (d, 1)
    } else {
        (lower.as_str(), 1)
    };
    let range = &GPU_METRICS_HZ_RANGE;
    let hz = digits
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| {
            format!(
                "GPU metrics: {v:?} is not a rate (give Hz, e.g. 10000 or 10kHz, in {}..={})",
                range.start(),
                range.end()
            )
        })?;
    if range.contains(&hz) {
        Ok(Some(hz))
    } else {
        Err(format!(
            "GPU metrics: {hz} Hz is out of range (give {}..={} Hz: one sample every 1 s to every 10 µs)",
            range.start(),
            range.end()
        ))
    }
}

/// The sampling interval of a rate, ns.
pub fn gpu_metrics_interval_ns(hz: u64) -> u64 {
    1_000_000_000 / hz.max(1)
}

/// How CUPTI triggers a sample (`CUpti_PmSampling_TriggerMode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PmTrigger {
    /// A fixed-frequency source; the interval in ns (Ampere GA10x and later).
    #[default]
    GpuTime,
    /// SYSCLK cycles (Turing, GA100).
    SysClock,
}

/// PM sampling set up on one device (chunk kind 45), written when sampling starts there.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuMetricsSetup {
    /// Device ordinal (CUPTI's device index).
    pub device: u32,
    /// When sampling started (the trace's clock, ns).
    pub time_ns: u64,
    /// The chip CUPTI names (`GH100`): what the counter data is evaluated for.
    pub chip: String,
    /// The metrics sampled, in the order they are evaluated.
    pub metrics: Vec<String>,
    /// The sampling interval asked for (ns for [`PmTrigger::GpuTime`], cycles for
    /// [`PmTrigger::SysClock`]).
    pub interval: u64,
    pub trigger: PmTrigger,
    /// CUPTI's hardware buffer, bytes.
    pub hardware_buffer_bytes: u64,
    /// Samples one counter data image holds.
    pub samples_per_image: u32,
}

/// One decode of a device's samples (chunk kind 46).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuMetricSamples {
    /// Device ordinal: the [`GpuMetricsSetup`] these were collected under.
    pub device: u32,
    /// When they were decoded (the trace's clock, ns).
    pub time_ns: u64,
    /// The index of the first sample among the device's samples since sampling started.
    pub first: u64,
    /// Each completed sample's `(start, end)` on the trace's clock, ns, in the image's order.
    pub times: Vec<(u64, u64)>,
    /// CUPTI's raw `(start, end)` of the first and last sample (its clock), for checking the
    /// mapping.
    pub raw_first: (u64, u64),
    pub raw_last: (u64, u64),
    /// CUPTI said its hardware buffer overflowed before this decode: samples were lost.
    pub overflow: bool,
    /// Samples known lost before these: when CUPTI reports an overflow, the gap since the last
    /// sample written over the interval.
    pub dropped: u64,
    /// The samples' values, row after row (`times.len()` rows of the set-up's metrics, in its
    /// order): NaN where CUPTI could not evaluate one; empty when evaluation failed as a whole
    /// (a notice says why; the reader can evaluate `counter_data` if kept).
    pub values: Vec<f64>,
    /// The counter data image as CUPTI decoded it, compressed ([`pack_counter_data`]): sample
    /// `i` of `times` is range `image_first + i`; kept for the first decode of each device only
    /// (empty in the others).
    pub counter_data: Vec<u8>,
    /// The image's range of the first sample (the ranges before it were left out: the sample
    /// CUPTI gives first after Start began before it).
    pub image_first: u32,
}

/// zstd level for counter data images: most of an image is zeros.
pub const COUNTER_DATA_ZSTD_LEVEL: i32 = 1;

/// A counter data image as [`GpuMetricSamples::counter_data`] keeps it (zstd); empty when zstd
/// cannot allocate its state.
pub fn pack_counter_data(image: &[u8]) -> Vec<u8> {
    zstd::bulk::compress(image, COUNTER_DATA_ZSTD_LEVEL).unwrap_or_default()
}

/// The image of [`GpuMetricSamples::counter_data`], at most `limit` bytes, or why not.
pub fn unpack_counter_data(packed: &[u8], limit: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut out = Vec::new();
    zstd::stream::read::Decoder::new(packed)
        .and_then(|d| d.take(limit).read_to_end(&mut out))
        .map_err(|e| format!("counter data image: {e}"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode_value, encode_value, ChunkKind};

    #[test]
    fn rates() {
        assert_eq!(parse_gpu_metrics_hz(""), Ok(None));
        assert_eq!(parse_gpu_metrics_hz("0"), Ok(None));
        assert_eq!(parse_gpu_metrics_hz("1"), Ok(Some(10_000)));
        assert_eq!(parse_gpu_metrics_hz("on"), Ok(Some(10_000)));
        assert_eq!(parse_gpu_metrics_hz("20000"), Ok(Some(20_000)));
        assert_eq!(parse_gpu_metrics_hz("10kHz"), Ok(Some(10_000)));
        assert_eq!(parse_gpu_metrics_hz("5k"), Ok(Some(5_000)));
        assert_eq!(parse_gpu_metrics_hz("500Hz"), Ok(Some(500)));
        assert_eq!(parse_gpu_metrics_hz("100kHz"), Ok(Some(100_000)));
        assert_eq!(
            parse_gpu_metrics_hz("200k"),
            Err(
                "GPU metrics: 200000 Hz is out of range (give 1..=100000 Hz: one sample every 1 s \
                 to every 10 µs)"
                    .into()
            )
        );
        assert_eq!(
            parse_gpu_metrics_hz("fast"),
            Err(
                "GPU metrics: \"fast\" is not a rate (give Hz, e.g. 10000 or 10kHz, in 1..=100000)"
                    .into()
            )
        );
        assert_eq!(gpu_metrics_interval_ns(10_000), 100_000);
        assert_eq!(gpu_metrics_interval_ns(3), 333_333_333);
    }

    #[test]
    fn chunks_round_trip() {
        let setup = GpuMetricsSetup {
            device: 1,
            time_ns: 5,
            chip: "GH100".into(),
            metrics: GPU_METRICS.iter().map(|s| s.to_string()).collect(),
            interval: 100_000,
            trigger: PmTrigger::GpuTime,
            hardware_buffer_bytes: 512 << 20,
            samples_per_image: 1000,
        };
        assert_eq!(
            decode_value::<GpuMetricsSetup>(&encode_value(&setup)).unwrap(),
            setup
        );
        let s = GpuMetricSamples {
            device: 1,
            time_ns: 9,
            first: 3,
            times: vec![(10, 20), (20, 30)],
            raw_first: (100, 200),
            raw_last: (200, 300),
            overflow: true,
            dropped: 2,
            values: vec![1.5, 2.5],
            counter_data: pack_counter_data(&[0u8; 4096]),
            image_first: 1,
        };
        assert_eq!(
            decode_value::<GpuMetricSamples>(&encode_value(&s)).unwrap(),
            s
        );
        assert!(s.counter_data.len() < 64);
        assert_eq!(
            unpack_counter_data(&s.counter_data, 1 << 20).unwrap(),
            vec![0u8; 4096]
        );
        assert!(unpack_counter_data(&[1, 2, 3], 1 << 20).is_err());
        assert_eq!(ChunkKind::from_u16(45), ChunkKind::GpuMetricsSetup);
        assert_eq!(ChunkKind::GpuMetricSamples.to_u16(), 46);
    }
}
