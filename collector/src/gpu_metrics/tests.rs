//! The part from traces held in memory, with decodes evaluated by a rule of the test's (the
//! evaluation through CUPTI is tested on a GPU-recorded fixture in collector/tests).

use super::*;
use rtrace_format::{GpuMetricSamples, GpuMetricsSetup, KernelRecord, MemcpyRecord, Notice};

const METRICS: [&str; 2] = [
    "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum",
];

fn setup(device: u32) -> GpuMetricsSetup {
    GpuMetricsSetup {
        device,
        time_ns: 0,
        chip: "GH100".into(),
        metrics: METRICS.iter().map(|m| m.to_string()).collect(),
        interval: 1_000,
        trigger: PmTrigger::GpuTime,
        hardware_buffer_bytes: 1 << 20,
        samples_per_image: 4,
    }
}

/// Samples of 1 µs from `start`; the image's bytes are each sample's index in the run.
fn batch(device: u32, first: u64, start: u64, n: u64) -> GpuMetricSamples {
    GpuMetricSamples {
        device,
        time_ns: start + n * 1_000,
        first,
        times: (0..n)
            .map(|i| (start + i * 1_000, start + (i + 1) * 1_000))
            .collect(),
        counter_data: (first..first + n).map(|i| i as u8).collect(),
        overflow: first > 0,
        dropped: u64::from(first > 0) * 3,
        ..Default::default()
    }
}

/// Sample k: SM active 10·k %, k·1000 bytes read in its microsecond (k·1e9 B/s).
fn rule(_: &GpuMetricsSetup, b: &GpuMetricSamples) -> Result<Vec<Vec<f64>>, String> {
    Ok(b.counter_data
        .iter()
        .map(|&k| vec![10.0 * k as f64, 1000.0 * k as f64])
        .collect())
}

fn kernel(name: u32, start: u64, end: u64) -> KernelRecord {
    KernelRecord {
        name,
        start_ns: start,
        end_ns: end,
        ..Default::default()
    }
}

fn trace() -> Trace {
    let mut t = Trace::default();
    t.header.pid = 7;
    t.kernel_names.insert(1, "_Z4copyPfS_".into());
    t.kernel_names.insert(2, "fma".into());
    // Samples 0..4 from 10 µs, then 4..6 from 14 µs.
    t.gpu_metric_setups.push(setup(0));
    t.gpu_metric_samples.push(batch(0, 0, 10_000, 4));
    t.gpu_metric_samples.push(batch(0, 4, 14_000, 2));
    // copy over samples 1 and 2 exactly (10 and 20 %, 1e9 and 2e9 B/s), twice; fma from
    // the middle of sample 4 to past the end (half a sample of 40 %, then none).
    t.kernels = vec![
        kernel(1, 11_000, 12_000),
        kernel(1, 12_000, 13_000),
        kernel(2, 14_500, 17_000),
    ];
    t.memcpys = vec![MemcpyRecord {
        start_ns: 9_000,
        end_ns: 10_500,
        ..Default::default()
    }];
    t.notices.push(Notice {
        time_ns: 1,
        message: "GPU metrics on device 1: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES".into(),
    });
    t
}

#[test]
fn each_kernel_process_and_gpu_gets_the_average_over_its_time() {
    let t = trace();
    let works = vec![Work::in_memory(&t)];
    let s = section(std::slice::from_ref(&t), &works, Ok(&rule));
    assert_eq!(
        s.metrics,
        vec![
            "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
            "dram__bytes_read.sum.per_second"
        ]
    );
    assert_eq!(
        s.setups,
        vec![SetupRow {
            pid: 7,
            device: 0,
            chip: "GH100".into(),
            interval: 1_000,
            trigger: "ns",
            metrics: 2,
            samples: 6,
            overflows: 1,
            dropped: 3,
        }]
    );
    assert_eq!(s.notices.len(), 1);
    assert!(s.errors.is_empty());
    // The whole run: samples 0..6, 0 to 50 % (mean 25), 0 to 5e9 B/s.
    assert_eq!(s.devices.len(), 1);
    assert_eq!((s.devices[0].span_ns, s.devices[0].covered), (6_000, 1.0));
    assert_eq!(s.devices[0].values, vec![25.0, 2.5e9]);
    let k: Vec<(&str, u64, f64, Vec<f64>)> = s
        .kernels
        .iter()
        .map(|r| (r.name.as_str(), r.span_ns, r.covered, r.values.clone()))
        .collect();
    assert_eq!(
        k,
        vec![
            // fma: 500 ns of sample 4 (40 %), 1000 of sample 5 (50 %), 1000 ns unsampled.
            (
                "fma",
                2_500,
                0.6,
                vec![
                    (500.0 * 40.0 + 1000.0 * 50.0) / 1500.0,
                    (500.0 * 4e9 + 1000.0 * 5e9) / 1500.0
                ]
            ),
            ("copy(float*, float*)", 2_000, 1.0, vec![15.0, 1.5e9]),
        ]
    );
    // The process: 9..10.5 µs (copy, 500 ns sampled: sample 0 at 0), 11..13, 14.5..17.
    let p = &s.processes[0];
    assert_eq!((p.span_ns, p.covered_ns_check()), (6_000, 4_000));
    assert_eq!(
        p.values,
        vec![
            (500.0 * 0.0 + 1000.0 * 10.0 + 1000.0 * 20.0 + 500.0 * 40.0 + 1000.0 * 50.0) / 4000.0,
            (1000.0 * 1e9 + 1000.0 * 2e9 + 500.0 * 4e9 + 1000.0 * 5e9) / 4000.0
        ]
    );
}

impl Row {
    /// The covered nanoseconds back from the share (exact for these spans).
    fn covered_ns_check(&self) -> u64 {
        (self.covered * self.span_ns as f64).round() as u64
    }
}

#[test]
fn no_cupti_says_why_and_a_trace_without_sampling_has_no_part() {
    let t = trace();
    let works = vec![Work::default()];
    let s = section(
        std::slice::from_ref(&t),
        &works,
        Err("cannot load CUPTI".into()),
    );
    assert_eq!(s.errors, vec!["cannot load CUPTI".to_string()]);
    assert!(s.devices.is_empty() && s.kernels.is_empty());
    assert!(!s.is_empty());
    let plain = Trace::default();
    let s = section(&[plain], &[Work::default()], Ok(&rule));
    assert!(s.is_empty());
}

#[test]
fn a_process_that_did_not_sample_gets_the_samples_of_its_gpu() {
    // Two processes on one GPU (same host, boot and PCI address): only the first sampled it.
    let mut a = trace();
    let mut b = Trace::default();
    b.header.pid = 8;
    b.kernel_names.insert(1, "other".into());
    b.kernels = vec![kernel(1, 10_000, 11_000)];
    let dev = rtrace_format::DeviceInfo {
        ordinal: 0,
        name: "H100".into(),
        attributes: vec![
            (rtrace_format::attr::PCI_BUS_ID, 0x19),
            (rtrace_format::attr::PCI_DEVICE_ID, 0),
            (rtrace_format::attr::PCI_DOMAIN_ID, 0),
        ],
        ..Default::default()
    };
    for t in [&mut a, &mut b] {
        t.header.hostname = "h".into();
        t.header.boot_id = "boot".into();
        t.devices.insert(0, dev.clone());
    }
    let traces = vec![a, b];
    let works: Vec<Work> = traces.iter().map(Work::in_memory).collect();
    let s = section(&traces, &works, Ok(&rule));
    let other = s.kernels.iter().find(|r| r.pid == 8).unwrap();
    assert_eq!((other.name.as_str(), other.covered), ("other", 1.0));
    assert_eq!(other.values, vec![0.0, 0.0]);
    assert_eq!(s.processes.iter().filter(|r| r.pid == 8).count(), 1);
    assert_eq!(s.devices[0].name, "H100");
}

#[test]
fn values_the_library_evaluated_are_taken_as_they_are() {
    let mut t = trace();
    // The second decode carries its values (and no image): 70 % and 7000 B per µs, 80 % and
    // nothing (NaN).
    let b = &mut t.gpu_metric_samples[1];
    b.counter_data.clear();
    b.values = vec![70.0, 7000.0, 80.0, f64::NAN];
    let never = |_: &GpuMetricsSetup, b: &GpuMetricSamples| {
        assert!(
            b.values.is_empty(),
            "decodes with values are not evaluated again"
        );
        rule(&GpuMetricsSetup::default(), b)
    };
    let s = section(std::slice::from_ref(&t), &[Work::in_memory(&t)], Ok(&never));
    // 0, 10, 20, 30, 70, 80 %; 0, 1, 2, 3, 7 e9 B/s (the NaN left out).
    assert_eq!(s.devices[0].values, vec![35.0, 13e9 / 5.0]);
}

#[test]
fn an_nvtx_range_name_gets_the_union_of_its_gpu_spans() {
    let t = trace();
    let mut w = Work::in_memory(&t);
    // Two ranges named step: 11..13 µs and 12.5..14.5 µs (overlapping: 11..14.5 once), one
    // named other on another device (no samples there: no row).
    w.nvtx = vec![
        ("step".into(), 0, 11_000, 13_000),
        ("step".into(), 0, 12_500, 14_500),
        ("other".into(), 1, 11_000, 12_000),
    ];
    let s = section(std::slice::from_ref(&t), &[w], Ok(&rule));
    assert_eq!(s.nvtx.len(), 1);
    let r = &s.nvtx[0];
    // Samples 1, 2, 3 whole (10, 20, 30 %) and half of sample 4 (40 %).
    assert_eq!(
        (r.name.as_str(), r.span_ns, r.covered),
        ("step", 3_500, 1.0)
    );
    assert_eq!(
        r.values,
        vec![
            (1000.0 * 10.0 + 1000.0 * 20.0 + 1000.0 * 30.0 + 500.0 * 40.0) / 3500.0,
            (1000.0 * 1e9 + 1000.0 * 2e9 + 1000.0 * 3e9 + 500.0 * 4e9) / 3500.0
        ]
    );
}
