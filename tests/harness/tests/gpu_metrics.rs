//! GPU metrics over time (`rtrace record --gpu-metrics`): the sampler process beside the
//! program, on the simulated driver and the simulated CUPTI, whose PM sampling is deterministic
//! but for how many samples a run lasts (tests/simcupti/README.md, "PM sampling"): sample
//! k ≥ 1 of a start spans [T0 + (k-1)·I, T0 + k·I]; its values are the profiler host's rules
//! for the subject `pm DEVICE INDEX` (INDEX counted on the device from the stale sample 0,
//! which the sampler leaves out) and the sample's duration; a configuration costs
//! `1 + (n-1)/4` passes, so the first four metrics of `rtrace_format::GPU_METRICS` fit PM
//! sampling's one pass.

use rtrace_collector::Trace;
use rtrace_format::{unpack_counter_data, PmTrigger, GPU_METRICS};
use rtrace_tests::*;
use std::path::PathBuf;
use std::process::Output;

/// simcupti's FNV-1a of `metric`, a 0 byte and `subject` (tests/simcupti/src/profiler.rs).
fn hash(metric: &str, subject: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in metric.as_bytes().iter().chain(&[0u8]).chain(subject) {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// simcupti's value of `metric` for a sample of `duration_ns` with `subject`.
fn value(metric: &str, subject: &[u8], duration_ns: u64) -> f64 {
    match metric {
        "gpu__time_duration.sum" => duration_ns as f64,
        _ if metric.contains("pct") => (hash(metric, subject) % 10_000) as f64 / 100.0,
        _ => ((hash(metric, subject) >> 16) % 1_000_000) as f64,
    }
}

/// `rtrace record --gpu-metrics=100kHz` of the program `direct`, with `env` more; its output,
/// and the program's trace and the sampler's (by their headers).
fn record(tag: &str, env: &[(&str, &str)]) -> (Output, Trace, Option<Trace>) {
    let b = build();
    let dir = fresh_dir(tag);
    let out = std::process::Command::new(rtrace_bin())
        .args(["record", "--gpu-metrics=100kHz", "-o"])
        .arg(dir.join("t-%p.bin"))
        .arg("--")
        .arg(b.bin.join("direct"))
        .env("LD_LIBRARY_PATH", &b.lib)
        .env_remove("LD_PRELOAD")
        .env_remove("RTRACE_GPU_ACTIVITY")
        .env_remove("NVTX_INJECTION64_PATH")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let mut program = None;
    let mut sampler = None;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in files {
        let t = rtrace_collector::load_trace(&f).unwrap();
        if t.header.is_gpu_sampler() {
            assert!(sampler.replace(t).is_none(), "one sampler's trace");
        } else {
            assert!(program.replace(t).is_none(), "one program's trace");
        }
    }
    (out, program.expect("the program's trace"), sampler)
}

/// Checks a sampler's batches of 10 µs samples of `metrics` (the first four of
/// `GPU_METRICS`): numbered on from 1 (the stale one left out), each one's values the
/// simulated CUPTI's for its index; one after the other but where samples were lost, each gap
/// counted in its batch's `dropped`. Returns the samples lost.
fn check_samples(batches: &[rtrace_format::GpuMetricSamples], metrics: &[String]) -> u64 {
    assert!(!batches.is_empty());
    let mut next = 0u64;
    // The device's index of the next sample: on from 1, past those lost.
    let mut index = 1u64;
    let mut last_end = None;
    let mut lost = 0;
    for b in batches {
        assert_eq!((b.device, b.first, b.overflow), (0, next, false));
        assert_eq!(b.values.len(), b.times.len() * 4);
        // The samples lost before the batch's first, and between its own.
        let (mut gaps, mut inner) = (0, 0);
        for (i, &(start, end)) in b.times.iter().enumerate() {
            assert_eq!(end - start, 10_000);
            if let Some(e) = last_end {
                assert!(
                    start >= e,
                    "samples in order: batch {} row {i}: {start} after {e}",
                    b.first
                );
                assert_eq!((start - e) % 10_000, 0, "gaps of whole samples");
                gaps += (start - e) / 10_000;
                if i > 0 {
                    inner += (start - e) / 10_000;
                }
                index += (start - e) / 10_000;
            }
            last_end = Some(end);
            let subject = format!("pm 0 {index}");
            let want: Vec<f64> = metrics
                .iter()
                .map(|m| value(m, subject.as_bytes(), 10_000))
                .collect();
            assert_eq!(&b.values[i * 4..i * 4 + 4], &want[..], "sample {index}");
            index += 1;
        }
        assert_eq!(b.dropped, gaps, "batch {}", b.first);
        assert_eq!(
            b.raw_last.1 - b.raw_first.0,
            10_000 * (b.times.len() as u64 + inner)
        );
        lost += gaps;
        next += b.times.len() as u64;
    }
    lost
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn samples_are_set_up_decoded_evaluated_and_reported() {
    let (out, program, sampler) = record("gpu-metrics-samples", &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let plain = run(Spec::untraced("direct"));
    assert_eq!(String::from_utf8_lossy(&out.stdout), plain.stdout());
    check_invariants(&program);
    // The program loads no PM sampling: its trace holds none of it.
    assert!(program.gpu_metric_setups.is_empty() && program.gpu_metric_samples.is_empty());
    let t = sampler.expect("the sampler's trace");
    assert_eq!(t.header.session, program.header.session);
    assert_eq!(t.header.hostname, program.header.hostname);
    let notices: Vec<&str> = t.notices.iter().map(|n| n.message.as_str()).collect();
    assert!(
        notices.contains(&"GPU metrics on device 0: GH100, every 10000 ns, 4 metrics"),
        "{notices:?}"
    );
    // The device it sampled is the program's (what the report matches them by).
    assert_eq!(
        t.devices[&0].pci_address(),
        program.devices[&0].pci_address()
    );
    assert_eq!(t.gpu_metric_setups.len(), 1);
    let s = &t.gpu_metric_setups[0];
    let metrics: Vec<String> = GPU_METRICS[..4].iter().map(|m| m.to_string()).collect();
    assert_eq!(
        (s.device, s.chip.as_str(), &s.metrics, s.interval, s.trigger),
        (0, "GH100", &metrics, 10_000, PmTrigger::GpuTime)
    );
    // Images of 10 ms of samples (1000), decoded every 4 ms.
    assert_eq!(
        (s.hardware_buffer_bytes, s.samples_per_image),
        (128 << 20, 1000)
    );
    let batches = &t.gpu_metric_samples;
    let lost = check_samples(batches, &metrics);
    // The samples cover the program's run.
    assert!(t.gpu_metric_samples[0].times[0].0 <= program.header.start.monotonic_ns);
    // The first decode keeps its image (the stale sample first): the host API evaluates it to
    // the values kept.
    let kept: Vec<_> = batches
        .iter()
        .filter(|b| !b.counter_data.is_empty())
        .collect();
    assert_eq!(kept.len(), 1);
    let first = kept[0];
    assert!(std::ptr::eq(first, &batches[0]));
    assert_eq!(first.image_first, 1);
    let image = unpack_counter_data(&first.counter_data, 1 << 30).unwrap();
    let cupti =
        rtrace_collector::metrics::Cupti::load(Some(&build().lib.join("libcupti.so.13"))).unwrap();
    let host = cupti.pm_host("GH100").unwrap();
    let names: Vec<&str> = metrics.iter().map(String::as_str).collect();
    let rows = host
        .evaluate_samples(&image, first.times.len() + 1, &names)
        .unwrap();
    assert_eq!(rows[1..].concat(), first.values);

    // The report of the run's traces: the GPU over the run, the mean of its samples (equal
    // widths).
    let out = std::process::Command::new(rtrace_bin())
        .args(["report", "--format", "csv", "--section", "gpu-metrics"])
        .arg(&program.path)
        .arg(&t.path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let csv = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        csv.lines().next(),
        Some("scope,pid,device,name,span_ns,covered,metric,value")
    );
    let all: Vec<&[f64]> = batches.iter().flat_map(|b| b.values.chunks(4)).collect();
    let n = all.len() as f64;
    let device_rows: Vec<&str> = csv.lines().filter(|l| l.starts_with("device,")).collect();
    assert_eq!(device_rows.len(), 4, "{csv}");
    for (m, row) in device_rows.iter().enumerate() {
        // A count (`gpu__time_duration.sum`) becomes its rate over each sample's duration.
        let secs = 10_000f64 / 1e9;
        let shown_value = |v: f64| if m == 0 { v / secs } else { v };
        let sum: f64 = all.iter().map(|v| shown_value(v[m]) * 10_000.0).sum();
        let want_value = sum / (n * 10_000.0);
        let shown = if m == 0 {
            "gpu__time_duration.sum.per_second".to_string()
        } else {
            metrics[m].clone()
        };
        let fields: Vec<&str> = row.split(',').collect();
        assert_eq!(fields[1], t.header.pid.to_string());
        // The run's span: the samples', the gaps left by samples lost not counted.
        assert_eq!(fields[4], (10_000 * all.len()).to_string(), "lost {lost}");
        assert_eq!((fields[5], fields[6]), ("1", shown.as_str()));
        assert_eq!(fields[7].parse::<f64>().unwrap(), want_value, "{row}");
    }
    // `rtrace record` said what was sampled.
    let samples: usize = batches.iter().map(|b| b.times.len()).sum();
    let line = format!("rtrace:   GPU metrics: {samples} samples on 1 device\n");
    assert!(err.contains(&line), "{err}");
}

#[test]
fn a_device_cupti_refuses_is_said_and_the_program_runs_on() {
    let (out, program, sampler) = record(
        "gpu-metrics-refused",
        &[("SIMCUPTI_PROFILER", "privileges")],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(program.kernels.len(), 2);
    assert!(
        err.contains("rtrace: GPU metrics: no device could be sampled"),
        "{err}"
    );
    let t = sampler.expect("the sampler's trace");
    assert!(t.gpu_metric_setups.is_empty() && t.gpu_metric_samples.is_empty());
    let notices: Vec<&str> = t.notices.iter().map(|n| n.message.as_str()).collect();
    let refused = "GPU metrics off on device 0: cuptiPmSamplingEnable: \
                   CUPTI_ERROR_INSUFFICIENT_PRIVILEGES";
    assert!(notices.contains(&refused), "{notices:?}");
    // The report shows the notice.
    let out = std::process::Command::new(rtrace_bin())
        .args(["report", "--section", "gpu-metrics"])
        .arg(&t.path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("GPU metrics: 0 samples on 0 devices"),
        "{text}"
    );
    assert!(text.contains("notice (pid"), "{text}");
}

#[test]
fn on_the_real_time_clock_every_kernel_lies_inside_the_samples() {
    // SIMCUDA_CLOCK=real: GPU work at real times (tests/harness/tests/sim_clock.rs). The
    // samples' CLOCK_REALTIME times (the sampler's) and the kernels' times (the program's)
    // reach the traces' clock by different roads, in two processes; on it, every kernel lies
    // inside the sampled time.
    let (out, program, sampler) = record("gpu-metrics-clock", &[("SIMCUDA_CLOCK", "real")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(program.kernels.len(), 2);
    let traces = vec![program, sampler.expect("the sampler's trace")];
    let works: Vec<_> = traces
        .iter()
        .map(rtrace_collector::gpu_metrics::Work::in_memory)
        .collect();
    let s =
        rtrace_collector::gpu_metrics::section(&traces, &works, Err("no evaluation needed".into()));
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    assert_eq!(s.kernels.len(), 2, "{:?}", s.kernels);
    // The samples (start, end) in order, and the gaps samples lost left between them (a
    // sampler held back on a loaded machine loses what a full image left behind; each gap is
    // counted in a batch's `dropped`).
    let mut samples: Vec<(u64, u64)> = traces[1]
        .gpu_metric_samples
        .iter()
        .flat_map(|b| b.times.iter().copied())
        .collect();
    samples.sort();
    let lost: u64 = traces[1].gpu_metric_samples.iter().map(|b| b.dropped).sum();
    let gaps: Vec<(u64, u64)> = samples
        .windows(2)
        .filter(|w| w[1].0 > w[0].1)
        .map(|w| (w[0].1, w[1].0))
        .collect();
    assert_eq!(gaps.is_empty(), lost == 0, "gaps {gaps:?}, lost {lost}");
    let (first, last) = (samples[0].0, samples[samples.len() - 1].1);
    let kernels = &traces[0].kernels;
    for k in kernels {
        // Every kernel inside the sampled time, on the traces' clock.
        assert!(
            first <= k.start_ns && k.end_ns <= last,
            "{k:?} outside {first}..{last}"
        );
    }
    // Covered whole, unless samples were lost where a kernel ran.
    let in_gap = kernels
        .iter()
        .any(|k| gaps.iter().any(|&(a, b)| a < k.end_ns && k.start_ns < b));
    for k in &s.kernels {
        assert_eq!(k.pid, traces[0].header.pid);
        if !in_gap {
            assert_eq!(k.covered, 1.0, "{} at {:?}", k.name, k.span_ns);
            assert!(k.values.iter().all(|v| v.is_finite()), "{k:?}");
        }
    }
    // The process's row spans its copies and memsets too: covered whole where all of its GPU
    // work lies in the sampled time, outside every gap (in CI once: 0.91 covered, the kernels
    // whole). Only the kernels are the test's: the copies are sampled as it happens.
    let p = &traces[0];
    let work: Vec<(u64, u64)> = kernels
        .iter()
        .map(|k| (k.start_ns, k.end_ns))
        .chain(p.memcpys.iter().map(|m| (m.start_ns, m.end_ns)))
        .chain(p.memsets.iter().map(|m| (m.start_ns, m.end_ns)))
        .collect();
    let sampled = |&(start, end): &(u64, u64)| {
        first <= start && end <= last && !gaps.iter().any(|&(a, b)| a < end && start < b)
    };
    if work.iter().all(sampled) {
        assert_eq!(
            s.processes[0].covered, 1.0,
            "{work:?} in {first}..{last}, gaps {gaps:?}"
        );
    }
}

#[test]
fn samples_a_full_image_left_behind_are_counted_lost() {
    // The sampler alone at 100 kHz (images of 10 ms), stopped for 150 ms: its next decode
    // fills an image and the simulated CUPTI, as CUPTI 13.0, loses what did not fit and gives
    // a sample without times next. Every sample lost is counted where its gap is.
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let b = build();
    let dir = fresh_dir("gpu-metrics-lost");
    let path = dir.join("s.bin");
    let mut child = std::process::Command::new(rtrace_bin())
        .args(["gpu-sampler", "--hz", "100000", "-o"])
        .arg(&path)
        .arg("--cupti")
        .arg(b.lib.join("libcupti.so.13"))
        .env("LD_LIBRARY_PATH", &b.lib)
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    assert_eq!(said, "ready\n");
    let pid = child.id() as i32;
    std::thread::sleep(std::time::Duration::from_millis(10));
    // SAFETY: signals to the child this test started and waits for.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(std::time::Duration::from_millis(150));
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    std::thread::sleep(std::time::Duration::from_millis(30));
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    let t = rtrace_collector::load_trace(&path).unwrap();
    let metrics: Vec<String> = GPU_METRICS[..4].iter().map(|m| m.to_string()).collect();
    let lost = check_samples(&t.gpu_metric_samples, &metrics);
    // At least what 150 ms holds beyond one image of 10 ms.
    assert!(lost >= 14_000, "lost {lost}");
    let written: usize = t.gpu_metric_samples.iter().map(|b| b.times.len()).sum();
    let tally = t
        .notices
        .iter()
        .map(|n| n.message.as_str())
        .find(|m| m.contains("decodes ("))
        .expect("the tally");
    // "GPU metrics on device 0: N decodes (F with the image full, R rounds waiting for an
    // image), C samples completed, W written, L lost, B left out (begun before Start), U
    // without times, E not evaluated; D ms decoding, V ms evaluating, I ms initializing images"
    let numbers: Vec<u64> = tally
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    let [_device, _decodes, full, _waited, completed, w, l, before, untimed, unevaluated, _, _, _] =
        numbers[..]
    else {
        panic!("{tally}")
    };
    assert!(full >= 1, "{tally}");
    assert_eq!((w, l, unevaluated), (written as u64, lost, 0), "{tally}");
    // The stale sample; one sample without times after each full image but maybe the last.
    assert_eq!(before, 1, "{tally}");
    assert!((full - 1..=full).contains(&untimed), "{tally}");
    assert_eq!(completed, w + before + untimed, "{tally}");
    // The report says so: the samples lost beside those written.
    let out = std::process::Command::new(rtrace_bin())
        .args(["report", "--format", "json", "--section", "gpu-metrics"])
        .arg(&path)
        .env("RTRACE_CUPTI_LIBRARY", b.lib.join("libcupti.so.13"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let want = format!("\"samples\":{written},\"overflows\":0,\"dropped\":{lost}");
    assert!(text.replace([' ', '\n'], "").contains(&want), "{text}");
}
