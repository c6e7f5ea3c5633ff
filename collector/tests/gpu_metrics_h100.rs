//! GPU metrics attribution on samples the H100 recorded (collector/tests/pmsampling/README.md):
//! the report's part, from a trace built of the probe's samples and kernel records, gives each
//! kernel the averages the probe computed itself (tests/gpu/pmsampling_probe.cu, its own
//! overlap weighting in C++), to the digits it printed.

use rtrace_collector::gpu_metrics::{section, Work};
use rtrace_collector::model::Trace;
use rtrace_format::{GpuMetricSamples, GpuMetricsSetup, KernelRecord};

#[path = "common/wheel_cupti.rs"]
mod wheel_cupti;
use wheel_cupti::cupti_path;

fn fixture(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/pmsampling")
        .join(name);
    std::fs::read_to_string(p).unwrap()
}

/// The probe's samples and kernels as one trace: a set-up of the CSV's metrics, one decode of
/// every sample (times as recorded, values as evaluated), the kernels as kernel records.
fn trace() -> Trace {
    let samples = fixture("h100_samples.csv");
    let mut lines = samples.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let metrics: Vec<String> = header[2..].iter().map(|s| s.to_string()).collect();
    let mut b = GpuMetricSamples::default();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        b.times.push((f[0].parse().unwrap(), f[1].parse().unwrap()));
        b.values
            .extend(f[2..].iter().map(|v| v.parse::<f64>().unwrap()));
    }
    let mut t = Trace::default();
    t.header.pid = 1;
    t.gpu_metric_setups.push(GpuMetricsSetup {
        chip: "GH100".into(),
        metrics,
        interval: 100_000,
        ..Default::default()
    });
    t.gpu_metric_samples.push(b);
    for l in fixture("h100_kernels.csv").lines().skip(1) {
        let f: Vec<&str> = l.split(',').collect();
        // One name id per kernel name, as a trace names them.
        let id = match t.kernel_names.iter().find(|(_, n)| n.as_str() == f[0]) {
            Some((&id, _)) => id,
            None => t.kernel_names.len() as u32 + 1,
        };
        t.kernel_names.insert(id, f[0].to_string());
        t.kernels.push(KernelRecord {
            name: id,
            start_ns: f[1].parse().unwrap(),
            end_ns: f[2].parse().unwrap(),
            ..Default::default()
        });
    }
    t
}

#[test]
fn each_kernel_gets_the_averages_the_probe_computed() {
    let t = trace();
    let works = vec![Work::in_memory(&t)];
    let never = |_: &GpuMetricsSetup, _: &GpuMetricSamples| -> Result<Vec<Vec<f64>>, String> {
        panic!("the samples carry their values")
    };
    let s = section(std::slice::from_ref(&t), &works, Ok(&never));
    assert_eq!(s.setups[0].samples, 178);
    let col = |name: &str| s.metrics.iter().position(|m| m == name).unwrap();
    let (sm, issue, tensor, warps, rd) = (
        col("sm__cycles_active.avg.pct_of_peak_sustained_elapsed"),
        col("sm__issue_active.avg.pct_of_peak_sustained_elapsed"),
        col("sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed"),
        col("sm__warps_active_realtime.avg.pct_of_peak_sustained_elapsed"),
        col("dram__bytes_read.sum.per_second"),
    );
    let row = |name: &str| s.kernels.iter().find(|r| r.name.starts_with(name)).unwrap();
    let shown = |r: &rtrace_collector::gpu_metrics::Row, c: usize| format!("{:.2}", r.values[c]);
    // The probe's table (h100_probe_table.txt):
    //   _Z10fma_kernel  26887.3  1.000  98.35  98.31  0.00  91.62  0.0  0.1
    //   _Z11wmma_kerne  10840.2  1.000  97.06  25.29  95.21  18.17  0.0  0.2
    let fma = row("fma_kernel");
    assert_eq!((fma.span_ns, fma.covered), (26_887_339, 1.0));
    assert_eq!(
        [
            shown(fma, sm),
            shown(fma, issue),
            shown(fma, tensor),
            shown(fma, warps)
        ],
        ["98.35", "98.31", "0.00", "91.62"]
    );
    let wmma = row("wmma_kernel");
    assert_eq!(wmma.covered, 1.0);
    assert_eq!(
        [
            shown(wmma, sm),
            shown(wmma, issue),
            shown(wmma, tensor),
            shown(wmma, warps)
        ],
        ["97.06", "25.29", "95.21", "18.17"]
    );
    // The copies (one name, eight launches): their union's read rate times its length is the
    // bytes the samples give them; the probe's per-launch GB/s times durations agree.
    let copy = row("copy_kernel");
    assert_eq!(copy.covered, 1.0);
    let bytes = copy.values[rd] * copy.span_ns as f64 / 1e9;
    let probe: f64 = [
        (576.6, 749.3),
        (998.5, 752.8),
        (1424.4, 753.5),
        (1404.7, 757.5),
        (1412.2, 762.2),
        (1421.2, 755.4),
        (1401.5, 757.9),
        (1324.8, 757.9),
    ]
    .iter()
    .map(|(gbs, us)| gbs * 1e9 * us * 1e-6)
    .sum();
    assert!((bytes / probe - 1.0).abs() < 1e-3, "{bytes} vs {probe}");
}

#[test]
fn the_default_metrics_fit_one_pm_sampling_pass_on_gh100() {
    let cupti = rtrace_collector::metrics::Cupti::load(Some(&cupti_path())).unwrap();
    // rtrace_format::GPU_METRICS together: one pass (PM sampling takes no more).
    let mut h = cupti.pm_host("GH100").unwrap();
    h.add_metrics(&rtrace_format::GPU_METRICS).unwrap();
    assert_eq!(h.passes().unwrap(), 1);
    // sm__warps_active (not `_realtime`) would cost a second: why the list has the other.
    let mut more = rtrace_format::GPU_METRICS.to_vec();
    more.push("sm__warps_active.avg.pct_of_peak_sustained_elapsed");
    let mut h = cupti.pm_host("GH100").unwrap();
    h.add_metrics(&more).unwrap();
    assert_eq!(h.passes().unwrap(), 2);
}

#[test]
fn bytes_that_are_no_counter_data_image_are_an_error_not_a_crash() {
    let cupti = rtrace_collector::metrics::Cupti::load(Some(&cupti_path())).unwrap();
    let host = cupti.pm_host("GH100").unwrap();
    let e = host
        .evaluate_samples(
            &[7u8; 4096],
            2,
            &["sm__cycles_active.avg.pct_of_peak_sustained_elapsed"],
        )
        .unwrap_err();
    assert!(e.starts_with("cuptiProfilerHostEvaluateToGpuValues"), "{e}");
}
