//! GPU metrics as `rtrace record --gpu-metrics` recorded them on an H200
//! (collector/tests/pmsampling/README.md): the program's trace and the sampler's, read here with
//! no GPU. The sampler's kept counter data image, evaluated again by the wheel's CUPTI host
//! library, gives the values the sampler wrote; the report gives the kernels and NVTX ranges of
//! the one trace the samples of the other, and the copy kernel's DRAM throughput its bytes over
//! its duration.

use rtrace_collector::gpu_metrics::{section, Row, Work};
use rtrace_collector::Trace;
use rtrace_format::unpack_counter_data;
use std::path::PathBuf;
use std::process::Command;

#[path = "common/wheel_cupti.rs"]
mod wheel_cupti;

/// A directory of a test's own, removed when the test ends.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The two traces, unpacked into a directory of this test's own: (program, sampler), and the
/// directory (to be kept until they are read).
fn traces(tag: &str) -> (PathBuf, PathBuf, Scratch) {
    let dir = std::env::temp_dir().join(format!("rtrace-h200-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pmsampling");
    let unpack = |name: &str, to: &str| {
        let packed = std::fs::read(src.join(name)).unwrap();
        let path = dir.join(to);
        std::fs::write(&path, zstd::stream::decode_all(&packed[..]).unwrap()).unwrap();
        path
    };
    (
        unpack("h200_program.bin.zst", "gm.bin"),
        unpack("h200_sampler.gpu-metrics.bin.zst", "gm.gpu-metrics.bin"),
        Scratch(dir),
    )
}

fn load(p: &std::path::Path) -> Trace {
    rtrace_collector::load_trace(p).unwrap()
}

#[test]
fn the_kept_image_evaluates_to_the_values_the_sampler_wrote() {
    let (_, sampler, _scratch) = traces("image");
    let t = load(&sampler);
    assert!(t.header.is_gpu_sampler());
    let setup = &t.gpu_metric_setups[0];
    assert_eq!(
        (setup.chip.as_str(), setup.interval, setup.metrics.len()),
        ("GH100", 100_000, 11)
    );
    assert_eq!(setup.samples_per_image, 500);
    let kept: Vec<_> = t
        .gpu_metric_samples
        .iter()
        .filter(|b| !b.counter_data.is_empty())
        .collect();
    assert_eq!(kept.len(), 1);
    let b = kept[0];
    // The stale first sample left out; the rest of the first decode kept.
    assert_eq!((b.first, b.image_first, b.times.len()), (0, 1, 193));
    let image = unpack_counter_data(&b.counter_data, 1 << 30).unwrap();
    let cupti = rtrace_collector::metrics::Cupti::load(Some(&wheel_cupti::cupti_path())).unwrap();
    let host = cupti.pm_host("GH100").unwrap();
    let names: Vec<&str> = setup.metrics.iter().map(String::as_str).collect();
    let n = b.image_first as usize + b.times.len();
    let rows = host.evaluate_samples(&image, n, &names).unwrap();
    let again: Vec<f64> = rows[b.image_first as usize..].concat();
    assert_eq!(again.len(), b.values.len());
    for (i, (a, w)) in again.iter().zip(&b.values).enumerate() {
        assert_eq!(a.to_bits(), w.to_bits(), "value {i}: {a} against {w}");
    }
}

#[test]
fn each_kernel_and_range_gets_the_samples_of_the_other_trace() {
    let (program, sampler, _scratch) = traces("report");
    let traces = vec![load(&program), load(&sampler)];
    let works: Vec<Work> = traces.iter().map(Work::in_memory).collect();
    let s = section(
        &traces,
        &works,
        Err("the samples carry their values".into()),
    );
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert_eq!((s.setups[0].samples, s.setups[0].dropped), (4135, 0));
    let col = |name: &str| s.metrics.iter().position(|m| m == name).unwrap();
    let shown = |r: &Row, m: &str| format!("{:.2}", r.values[col(m)]);
    let sm = "sm__cycles_active.avg.pct_of_peak_sustained_elapsed";
    let tensor = "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed";
    let (rd, wr) = (
        "dram__bytes_read.sum.per_second",
        "dram__bytes_write.sum.per_second",
    );
    let find = |rows: &[Row], name: &str| rows.iter().find(|r| r.name.starts_with(name)).cloned();
    for (rows, names) in [
        (&s.kernels, ["copy_kernel", "fma_kernel", "wmma_kernel"]),
        (&s.nvtx, ["copy", "fma", "wmma"]),
    ] {
        let [copy, fma, wmma] = names.map(|n| find(rows, n).expect(n));
        for r in [&copy, &fma, &wmma] {
            assert_eq!(r.covered, 1.0, "{}", r.name);
        }
        assert_eq!([shown(&fma, sm), shown(&fma, tensor)], ["99.76", "0.00"]);
        assert_eq!([shown(&wmma, sm), shown(&wmma, tensor)], ["99.47", "99.14"]);
        assert_eq!([shown(&copy, sm), shown(&copy, tensor)], ["94.80", "0.00"]);
        // 40 copies of 1 GiB each way in the copy kernel's time (its NVTX range's GPU span is
        // the kernel's): the samples' DRAM read and write rates are those bytes over it.
        let want = 40.0 * (1u64 << 30) as f64 / (copy.span_ns as f64 / 1e9);
        for m in [rd, wr] {
            let got = copy.values[col(m)];
            assert!(
                (got / want - 1.0).abs() < 0.002,
                "{m}: {got} against {want}"
            );
        }
    }
    // The GPU over the run (the union of its 4135 samples on the traces' clock), SM active
    // about its kernels' busy share (14.46%).
    let gpu = &s.devices[0];
    assert_eq!(
        (gpu.span_ns, shown(gpu, sm)),
        (413_498_004, "14.30".to_string())
    );
}

#[test]
fn the_report_reads_both_traces_as_given() {
    let (program, sampler, _scratch) = traces("cli");
    let out = Command::new(env!("CARGO_BIN_EXE_rtrace"))
        .args(["report", "--format", "csv", "--section", "gpu-metrics"])
        .arg(&program)
        .arg(&sampler)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = String::from_utf8_lossy(&out.stdout);
    let rows = |scope: &str| csv.lines().filter(|l| l.starts_with(scope)).count();
    // 11 metrics a row: one GPU, one process, three kernels, three NVTX ranges.
    assert_eq!(
        [
            rows("device,"),
            rows("process,"),
            rows("kernel,"),
            rows("nvtx,")
        ],
        [11, 11, 33, 33],
        "{csv}"
    );
}
