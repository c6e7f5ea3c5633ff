//! Runtime API records: a program of the CUDA runtime (tests/programs/runtime.c on the simulated
//! libcudart.so.13 of tests/programs/simcudart.c) traced with GPU activity on the simulated
//! CUPTI, whose runtime callbacks make one record per runtime call: exact calls, results,
//! the driver calls nested in each, and the GPU work linked to the runtime call.

use rtrace_format::{in_runtime, runtime_cbid, ApiRecord, FLAG_CORRELATED};
use rtrace_tests::*;

const ON: &[(&str, &str)] = &[("RTRACE_GPU_ACTIVITY", "1")];

/// The runtime calls CUPTI sees (cudaFree(NULL) initialises the driver, and GPU activity
/// starts inside it), each with its result and the driver calls made inside it.
const EXPECTED: &[(&str, u32, &[&str])] = &[
    ("cudaMalloc", 0, &["cuMemAlloc_v2"]),
    ("cudaMemcpy", 0, &["cuMemcpyHtoD_v2"]),
    ("cudaStreamCreate", 0, &["cuStreamCreate"]),
    ("cudaLaunchKernel", 0, &["cuLaunchKernel"]),
    ("cudaLaunchKernel", 0, &["cuLaunchKernel"]),
    ("cudaLaunchKernel", 0, &["cuLaunchKernel"]),
    ("cudaMemcpyAsync", 0, &["cuMemcpyDtoHAsync_v2"]),
    ("cudaStreamSynchronize", 0, &["cuStreamSynchronize"]),
    ("cudaMemset", 0, &["cuMemsetD8_v2"]),
    ("cudaLaunchKernel", 0, &["cuLaunchKernel"]),
    ("cudaDeviceSynchronize", 0, &["cuCtxSynchronize_v2"]),
    ("cudaGetLastError", 0, &[]),
    ("cudaStreamDestroy", 0, &["cuStreamDestroy_v2"]),
    ("cudaFree", 0, &["cuMemFree_v2"]),
    // cudaErrorInvalidValue, before any driver call.
    ("cudaMalloc", 1, &[]),
];

fn is_runtime(r: &ApiRecord) -> bool {
    runtime_cbid(r.function).is_some()
}

#[test]
fn runtime_calls_are_recorded_with_their_driver_calls_and_gpu_work() {
    let plain = run(Spec::untraced("runtime"));
    assert_eq!(
        plain.stdout(),
        "runtime ok value=7 runtime_calls=16 driver_calls=2\n",
        "{}",
        plain.stderr()
    );
    let r = run(Spec::traced("runtime").env(ON));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert_eq!(r.stdout(), plain.stdout());
    let t = r.trace();
    check_invariants(&t);
    assert!(t
        .notices
        .iter()
        .any(|n| n.message == "runtime API calls recorded (CUPTI runtime callbacks)"));
    // Driver calls outside every runtime call: the program's own (module) and those of
    // cudaFree(NULL), which CUPTI did not see begin.
    let outside = runtime_calls_are(&t, EXPECTED);
    assert_eq!(
        outside,
        [
            "cuInit",
            "cuDeviceGet",
            "cuDevicePrimaryCtxRetain",
            "cuCtxSetCurrent",
            "cuModuleLoadData",
            "cuModuleGetFunction"
        ]
    );

    // GPU work carries the runtime call's correlation id.
    work_is_linked_to_runtime_calls(&t);
    gpu_checks_reader_agrees(&r.trace_files()[0], &t);
}

/// Checks that the trace's runtime calls are `expected` (name, result, the driver calls
/// inside), that driver calls say whether they were made inside one, and that runtime calls
/// do not overlap; returns the driver calls made outside every runtime call
/// (`cuGetProcAddress*` left out).
fn runtime_calls_are(
    t: &rtrace_collector::Trace,
    expected: &[(&str, u32, &[&str])],
) -> Vec<String> {
    let all = records(t);
    let tid = all[0].0;
    assert!(all.iter().all(|(th, _)| *th == tid), "one thread");
    let name = |r: &ApiRecord| t.functions[&r.function].clone();
    let runtime: Vec<ApiRecord> = all.iter().map(|(_, r)| *r).filter(is_runtime).collect();
    let driver: Vec<ApiRecord> = all
        .iter()
        .map(|(_, r)| *r)
        .filter(|r| !is_runtime(r))
        .collect();
    let inside = |d: &ApiRecord| {
        runtime
            .iter()
            .any(|rt| d.start_ns >= rt.start_ns && d.end_ns <= rt.end_ns)
    };

    // Each runtime call, its result, and the driver calls inside its interval.
    let got: Vec<(String, u32, Vec<String>)> = runtime
        .iter()
        .map(|rt| {
            let within = driver
                .iter()
                .filter(|d| d.start_ns >= rt.start_ns && d.end_ns <= rt.end_ns)
                .map(name)
                .filter(|n| !n.starts_with("cuGetProcAddress"))
                .collect();
            (name(rt), rt.result, within)
        })
        .collect();
    let want: Vec<(String, u32, Vec<String>)> = expected
        .iter()
        .map(|(n, rc, d)| {
            (
                n.to_string(),
                *rc,
                d.iter().map(|s| s.to_string()).collect(),
            )
        })
        .collect();
    assert_eq!(got, want);
    for d in &driver {
        assert_eq!(in_runtime(d.function), inside(d), "{}", name(d));
    }
    // Runtime calls do not overlap (none is nested in another here), and ids are unique.
    for w in runtime.windows(2) {
        assert!(w[0].end_ns <= w[1].start_ns);
        assert_ne!(w[0].correlation, w[1].correlation);
    }
    driver
        .iter()
        .filter(|d| !inside(d))
        .map(name)
        .filter(|n| !n.starts_with("cuGetProcAddress"))
        .collect()
}

/// The runtime calls rtrace's own exports of libcudart's functions see: every one, the first
/// (cudaFree(NULL), which initialises the driver inside it) included.
fn interposed_expected() -> Vec<(&'static str, u32, &'static [&'static str])> {
    let first: (&str, u32, &[&str]) = (
        "cudaFree",
        0,
        &[
            "cuInit",
            "cuDeviceGet",
            "cuDevicePrimaryCtxRetain",
            "cuCtxSetCurrent",
        ],
    );
    std::iter::once(first)
        .chain(EXPECTED.iter().copied())
        .collect()
}

#[test]
fn interposed_runtime_calls_are_recorded_with_gpu_activity() {
    let env = &[
        ("RTRACE_GPU_ACTIVITY", "1"),
        ("RTRACE_RUNTIME_API", "interpose"),
    ];
    let plain = run(Spec::untraced("runtime"));
    let r = run(Spec::traced("runtime").env(env));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert_eq!(r.stdout(), plain.stdout());
    let t = r.trace();
    check_invariants(&t);
    let said = |m: &str| t.notices.iter().any(|n| n.message == m);
    assert!(said("runtime API calls recorded (interposing libcudart)"));
    assert!(!said(
        "runtime API calls recorded (CUPTI runtime callbacks)"
    ));
    let outside = runtime_calls_are(&t, &interposed_expected());
    assert_eq!(outside, ["cuModuleLoadData", "cuModuleGetFunction"]);
    // The work is linked through the driver calls inside the runtime calls.
    work_is_linked_to_runtime_calls(&t);
}

#[test]
fn without_gpu_activity_runtime_calls_are_interposed() {
    let r = run(Spec::traced("runtime"));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let t = r.trace();
    check_invariants(&t);
    assert!(t
        .notices
        .iter()
        .any(|n| n.message == "runtime API calls recorded (interposing libcudart)"));
    let outside = runtime_calls_are(&t, &interposed_expected());
    assert_eq!(outside, ["cuModuleLoadData", "cuModuleGetFunction"]);
    assert!(t.kernels.is_empty());
}

#[test]
fn an_unknown_runtime_route_is_said_and_the_default_taken() {
    let env = &[("RTRACE_GPU_ACTIVITY", "1"), ("RTRACE_RUNTIME_API", "both")];
    let r = run(Spec::traced("runtime").env(env));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let t = r.trace();
    let said = |m: &str| t.notices.iter().any(|n| n.message == m);
    assert!(said(
        "RTRACE_RUNTIME_API=both: give 0, 1, cupti or interpose; the default (cupti) used"
    ));
    assert!(said("runtime API calls recorded (CUPTI runtime callbacks)"));
    assert_eq!(runtime_calls_are(&t, EXPECTED).len(), 6);
}

/// Each kernel, copy and memset is linked to the runtime call that made it.
fn work_is_linked_to_runtime_calls(t: &rtrace_collector::Trace) {
    let runtime: Vec<ApiRecord> = records(t)
        .into_iter()
        .map(|(_, r)| r)
        .filter(is_runtime)
        .collect();
    let corr_of = |n: &str| -> Vec<u64> {
        runtime
            .iter()
            .filter(|r| t.functions[&r.function] == n)
            .map(|r| r.correlation)
            .collect()
    };
    let kernels: Vec<u64> = t.kernels.iter().map(|k| k.correlation).collect();
    assert!(t.kernels.iter().all(|k| k.flags & FLAG_CORRELATED != 0));
    assert_eq!(kernels, corr_of("cudaLaunchKernel"));
    let copies: Vec<u64> = t.memcpys.iter().map(|c| c.correlation).collect();
    let mut want_copies = corr_of("cudaMemcpy");
    want_copies.extend(corr_of("cudaMemcpyAsync"));
    assert_eq!(copies, want_copies);
    let memsets: Vec<u64> = t.memsets.iter().map(|m| m.correlation).collect();
    assert_eq!(memsets, corr_of("cudaMemset"));
}

#[test]
fn work_is_linked_to_the_runtime_call_whichever_id_cupti_gives_it() {
    // GPU work made inside a runtime call carrying the driver call's CUPTI id: rtrace links
    // that id to the runtime call too.
    let env = &[
        ("RTRACE_GPU_ACTIVITY", "1"),
        ("SIMCUPTI_RUNTIME_WORK", "driver"),
    ];
    let r = run(Spec::traced("runtime").env(env));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let t = r.trace();
    check_invariants(&t);
    assert_eq!(t.kernels.len(), 4);
    work_is_linked_to_runtime_calls(&t);
}

#[test]
fn runtime_records_off_leave_driver_records_and_links() {
    let env = &[("RTRACE_GPU_ACTIVITY", "1"), ("RTRACE_RUNTIME_API", "0")];
    let r = run(Spec::traced("runtime").env(env));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let t = r.trace();
    check_invariants(&t);
    assert!(t
        .notices
        .iter()
        .any(|n| n.message == "runtime API calls not recorded (RTRACE_RUNTIME_API=0)"));
    let all = records(&t);
    assert!(!all
        .iter()
        .any(|(_, r)| is_runtime(r) || in_runtime(r.function)));
    // Without runtime tracing, the GPU work carries the driver launch's id.
    let launches: Vec<u64> = all
        .iter()
        .filter(|(_, r)| t.functions[&r.function] == "cuLaunchKernel")
        .map(|(_, r)| r.correlation)
        .collect();
    let kernels: Vec<u64> = t.kernels.iter().map(|k| k.correlation).collect();
    assert_eq!(launches.len(), 4);
    assert_eq!(kernels, launches);
}

/// The function names of the JSON list `"key":[...]` in `json` (one object per line).
fn json_functions(json: &str, key: &str) -> Vec<(String, u64)> {
    let Some(at) = json.find(&format!("\"{key}\":[")) else {
        return Vec::new();
    };
    let list = &json[at..];
    let list = &list[..list.find("\n]").unwrap_or(list.len())];
    let mut rows: Vec<(String, u64)> = list
        .lines()
        .filter_map(|l| {
            let name = l.split("\"function\":\"").nth(1)?.split('"').next()?;
            let calls = l
                .split("\"calls\":")
                .nth(1)?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_string(), calls))
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn reports_and_exports_show_runtime_calls_with_their_driver_calls() {
    let r = run(Spec::traced("runtime").env(ON));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let trace = &r.trace_files()[0];
    let report = |args: &[&str]| {
        let out = std::process::Command::new(rtrace_bin())
            .arg("report")
            .args(args)
            .arg(trace)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let json = report(&["--format", "json"]);
    let own = |v: &[(&str, u64)]| -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = v.iter().map(|(n, c)| (n.to_string(), *c)).collect();
        v.sort();
        v
    };
    // The API summary: runtime calls, and the driver calls made outside them (17
    // cuGetProcAddress_v2 and the initialisation inside cudaFree(NULL), the module).
    assert_eq!(
        json_functions(&json, "api"),
        own(&[
            ("cuCtxSetCurrent", 1),
            ("cuDeviceGet", 1),
            ("cuDevicePrimaryCtxRetain", 1),
            ("cuGetProcAddress_v2", 17),
            ("cuInit", 1),
            ("cuModuleGetFunction", 1),
            ("cuModuleLoadData", 1),
            ("cudaDeviceSynchronize", 1),
            ("cudaFree", 1),
            ("cudaGetLastError", 1),
            ("cudaLaunchKernel", 4),
            ("cudaMalloc", 2),
            ("cudaMemcpy", 1),
            ("cudaMemcpyAsync", 1),
            ("cudaMemset", 1),
            ("cudaStreamCreate", 1),
            ("cudaStreamDestroy", 1),
            ("cudaStreamSynchronize", 1),
        ])
    );
    assert_eq!(
        json_functions(&json, "api_in_runtime"),
        own(&[
            ("cuCtxSynchronize_v2", 1),
            ("cuLaunchKernel", 4),
            ("cuMemAlloc_v2", 1),
            ("cuMemFree_v2", 1),
            ("cuMemcpyDtoHAsync_v2", 1),
            ("cuMemcpyHtoD_v2", 1),
            ("cuMemsetD8_v2", 1),
            ("cuStreamCreate", 1),
            ("cuStreamDestroy_v2", 1),
            ("cuStreamSynchronize", 1),
        ])
    );
    let table = report(&[]);
    assert!(
        table.contains("\nAPI summary: 18 functions, 38 calls, 1 process\n"),
        "{table}"
    );
    assert!(
        table.contains("\nDriver calls inside runtime calls: 10 functions, 13 calls, 1 process\n"),
        "{table}"
    );
    // Launch latency is measured from the runtime call: its rows (kernel, function, process,
    // correlation, latency and its unit) name it.
    let latency_rows = |call: &str| {
        table
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .filter(|w| w.len() == 6 && w[0] == "fill_u32" && w[1] == call)
            .count()
    };
    assert_eq!(latency_rows("cudaLaunchKernel"), 4, "{table}");
    assert_eq!(latency_rows("cuLaunchKernel"), 0, "{table}");

    // Chrome's JSON: each runtime slice, then the driver slices inside it, on the thread.
    let out = r.dir.join("out.json");
    let status = std::process::Command::new(rtrace_bin())
        .args(["export", "--format", "chrome", "-o"])
        .arg(&out)
        .arg(trace)
        .status()
        .unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(&out).unwrap();
    let slices: Vec<(String, f64, f64)> = text
        .lines()
        .filter(|l| l.contains("\"cat\":\"cuda_runtime\"") || l.contains("\"cat\":\"cuda_driver\""))
        .map(|l| {
            let field = |k: &str| l.split(&format!("\"{k}\":")).nth(1).unwrap();
            let name = field("name").split('"').nth(1).unwrap().to_string();
            // Runtime calls are `cuda_runtime` slices, driver calls `cuda_driver` ones.
            let cat = if name.starts_with("cuda") {
                "cuda_runtime"
            } else {
                "cuda_driver"
            };
            assert!(l.contains(&format!("\"cat\":\"{cat}\"")), "{l}");
            let num =
                |k: &str| -> f64 { field(k).split([',', '}']).next().unwrap().parse().unwrap() };
            (name, num("ts"), num("dur"))
        })
        .collect();
    let from = slices.iter().position(|s| s.0 == "cudaMalloc").unwrap();
    let names: Vec<&str> = slices[from..].iter().map(|s| s.0.as_str()).collect();
    let mut want = Vec::new();
    for (runtime, _, driver) in EXPECTED {
        want.push(*runtime);
        want.extend(driver.iter().copied());
    }
    assert_eq!(names, want);
    // Each driver slice lies inside the runtime slice before it.
    let mut outer = None;
    for s in &slices[from..] {
        if s.0.starts_with("cuda") {
            outer = Some(s);
        } else {
            let o = outer.unwrap();
            assert!(
                s.1 >= o.1 && s.1 + s.2 <= o.1 + o.2 + 0.001,
                "{s:?} in {o:?}"
            );
        }
    }
}

#[test]
fn each_caller_reaches_its_own_runtime_when_two_are_loaded() {
    // The program on libcudart.so.13 answers 13000; its plugin, opened RTLD_LOCAL and linked
    // to libcudart.so.12, 12000: through rtrace's one export of each name, as without it.
    let plugin = build().bin.join("libtwo_runtimes_plugin.so");
    let args = [plugin.to_str().unwrap()];
    let want = "main 0 13000 plugin 12000\n".repeat(3) + "main after dlclose 0 13000\n";
    let plain = run(Spec::untraced("two_runtimes").args(&args));
    assert_eq!(plain.stdout(), want, "{}", plain.stderr());
    // With GPU activity (CUPTI's route) the stubs only pass the calls on.
    let r = run(Spec::traced("two_runtimes")
        .args(&args)
        .env(&[("RTRACE_GPU_ACTIVITY", "1")]));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert_eq!(r.stdout(), want);
    // Without (interposed): every call recorded, seven.
    let r = run(Spec::traced("two_runtimes").args(&args));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert_eq!(r.stdout(), want);
    let t = r.trace();
    check_invariants(&t);
    let calls = records(&t)
        .into_iter()
        .filter(|(_, r)| is_runtime(r))
        .map(|(_, r)| (t.functions[&r.function].clone(), r.result))
        .collect::<Vec<_>>();
    assert_eq!(calls, vec![("cudaRuntimeGetVersion".to_string(), 0); 7]);
}

/// Kernels launched through the runtime and profiled (`RTRACE_METRICS`): the profile carries
/// the id the kernel record carries (the runtime call's), so that the record takes the
/// profiled times and the report links each profile to its kernel (its configuration, the
/// theoretical occupancy the occupancy rule needs). Before, the profile carried the driver
/// call's id and neither link was made.
#[test]
fn profiled_kernels_launched_by_the_runtime_are_linked_to_their_records() {
    let env = &[("RTRACE_METRICS", "gpu__time_duration.sum")];
    let r = run(Spec::traced("runtime").env(env));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let t = r.trace();
    check_invariants(&t);
    let launches: Vec<u64> = records(&t)
        .into_iter()
        .map(|(_, r)| r)
        .filter(|r| is_runtime(r) && t.functions[&r.function] == "cudaLaunchKernel")
        .map(|r| r.correlation)
        .collect();
    assert_eq!(launches.len(), 4);
    let kernels: Vec<u64> = t.kernels.iter().map(|k| k.correlation).collect();
    assert_eq!(kernels, launches);
    let profiled: Vec<u64> = t.kernel_profiles.iter().map(|p| p.correlation).collect();
    assert_eq!(profiled, launches);
    for (k, p) in t.kernels.iter().zip(&t.kernel_profiles) {
        assert_eq!(
            k.flags & rtrace_format::FLAG_PROFILED,
            rtrace_format::FLAG_PROFILED
        );
        assert_eq!((k.start_ns, k.end_ns - k.start_ns), (p.start_ns, 500));
        assert_eq!(p.values, vec![500.0]);
    }
    let linked = vec![rtrace_collector::profiles::linked_in_memory(&t)];
    let s = rtrace_collector::profiles::section(std::slice::from_ref(&t), &linked);
    assert_eq!(s.kernels.len(), 1);
    let k = &s.kernels[0];
    assert_eq!(k.name, "fill_u32");
    assert_eq!(k.launches.len(), 4);
    assert!(k.launches.iter().all(|l| l.kernel.is_some()));
    assert!(k.theoretical_occupancy.is_some());
}
