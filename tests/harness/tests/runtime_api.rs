//! Runtime API records: a program of the CUDA runtime (tests/programs/runtime.c on the simulated
//! libcudart.so.13 of tests/programs/simcudart.c) traced with GPU activity on the simulated
//! CUPTI, whose runtime callbacks make one record per runtime call: exact calls, results,
//! the driver calls nested in each, and the GPU work linked to the runtime call.

use rtrace_format::{runtime_cbid, ApiRecord, FLAG_CORRELATED};
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
    let all = records(&t);
    let tid = all[0].0;
    assert!(all.iter().all(|(th, _)| *th == tid), "one thread");
    let name = |r: &ApiRecord| t.functions[&r.function].clone();
    let runtime: Vec<ApiRecord> = all.iter().map(|(_, r)| *r).filter(is_runtime).collect();
    let driver: Vec<ApiRecord> = all
        .iter()
        .map(|(_, r)| *r)
        .filter(|r| !is_runtime(r))
        .collect();

    // Each runtime call, its result, and the driver calls inside its interval.
    let got: Vec<(String, u32, Vec<String>)> = runtime
        .iter()
        .map(|rt| {
            let inside = driver
                .iter()
                .filter(|d| d.start_ns >= rt.start_ns && d.end_ns <= rt.end_ns)
                .map(name)
                .collect();
            (name(rt), rt.result, inside)
        })
        .collect();
    let want: Vec<(String, u32, Vec<String>)> = EXPECTED
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
    // Runtime calls do not overlap (none is nested in another here), and ids are unique.
    for w in runtime.windows(2) {
        assert!(w[0].end_ns <= w[1].start_ns);
        assert_ne!(w[0].correlation, w[1].correlation);
    }
    // Driver calls outside every runtime call: the program's own (module) and those of
    // cudaFree(NULL), which CUPTI did not see begin.
    let outside: Vec<String> = driver
        .iter()
        .filter(|d| {
            !runtime
                .iter()
                .any(|rt| d.start_ns >= rt.start_ns && d.end_ns <= rt.end_ns)
        })
        .map(name)
        .filter(|n| !n.starts_with("cuGetProcAddress"))
        .collect();
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
    let corr_of = |n: &str| -> Vec<u64> {
        runtime
            .iter()
            .filter(|r| name(r) == n)
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
    assert!(!all.iter().any(|(_, r)| is_runtime(r)));
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
