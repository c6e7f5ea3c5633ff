//! Every route to the driver is recorded: direct binding, dlsym, cuGetProcAddress. Each
//! program's API records must match, function by function, the simulated driver's own count of
//! the calls it received, and the program must behave exactly as without rtrace.

use rtrace_tests::*;
use std::collections::BTreeMap;

/// Runs `program` untraced and traced; checks same output and status, one trace, invariants,
/// and that rtrace's per-function counts equal the simulator's. Returns the traced run.
fn traced_like_untraced(program: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    let plain = run(Spec::untraced(program).args(args).env(env));
    let traced = run(Spec::traced(program).args(args).env(env));
    assert_eq!(
        traced.stdout(),
        plain.stdout(),
        "{program}: output differs under rtrace"
    );
    assert_eq!(traced.output.status, plain.output.status, "{program}");
    assert!(plain.trace_files().is_empty());
    let t = traced.trace();
    check_invariants(&t);
    let sim = traced.sim_counts();
    assert_eq!(sim.len(), 1);
    assert_eq!(
        counts(std::slice::from_ref(&t)),
        *sim.values().next().unwrap(),
        "{program}: rtrace and the simulated driver disagree"
    );
    let end = t.end.as_ref().expect("end record");
    assert_eq!(end.reason, "exit");
    assert_eq!(end.dropped, 0);
    assert_eq!(end.unwrapped_lookups, 0);
    assert_eq!(t.dropped, 0);
    traced
}

fn total(r: &Run) -> u64 {
    counts(&r.traces()).values().sum()
}

#[test]
fn direct_binding() {
    let r = traced_like_untraced("direct", &[], &[]);
    assert_eq!(
        r.stdout().trim_end(),
        "direct ok driver=13000 sms=132 cc=9.0 elapsed_ms=0.003000 calls=44"
    );
    assert_eq!(total(&r), 44);
    let t = r.trace();
    let c = counts(std::slice::from_ref(&t));
    assert_eq!(c["cuLaunchKernel"], 2);
    assert_eq!(c["cuMemAlloc_v2"], 3);
    assert_eq!(c["cuInit"], 1);
    // Every call succeeded and ran on the main thread.
    assert_eq!(t.threads.len(), 1);
    let th = t.threads.values().next().unwrap();
    assert_eq!(th.name.as_deref(), Some("direct"));
    assert!(th.records.iter().all(|r| r.result == 0));
    assert_eq!(
        t.header.command_line,
        vec![build().bin.join("direct").display().to_string()]
    );
    assert_eq!(t.header.pid, th.tid as u32);
}

#[test]
fn cu_get_proc_address_every_version_and_flag() {
    let r = traced_like_untraced("procaddr", &[], &[]);
    assert_eq!(
        r.stdout().trim_end(),
        "procaddr ok elapsed_ms=0.002000 calls=85"
    );
    let c = counts(&r.traces());
    assert_eq!(c.values().sum::<u64>(), 85);
    // The ABI variants the driver picked for each version and flag, each recorded as itself.
    for (f, n) in [
        ("cuGetProcAddress_v2", 41),
        ("cuGetProcAddress", 1),
        ("cuMemAlloc", 1),
        ("cuMemAlloc_v2", 1),
        ("cuMemcpyAsync_ptsz", 1),
        ("cuMemcpyHtoD_v2_ptds", 1),
        ("cuLaunchKernel_ptsz", 1),
        ("cuStreamSynchronize_ptsz", 1),
        ("cuCtxSynchronize_v2", 1),
    ] {
        assert_eq!(c.get(f), Some(&n), "{f}");
    }
}

#[test]
fn dlsym_on_the_driver_handle() {
    let r = traced_like_untraced("dlsym", &[], &[]);
    assert_eq!(r.stdout().trim_end(), "dlsym ok calls=41");
    assert_eq!(total(&r), 41);
}

#[test]
fn bundled_sample_runs_on_the_simulator() {
    let r = traced_like_untraced("driver_api", &[], &[]);
    assert!(r.stdout().contains("driver_api: OK"), "{}", r.stdout());
}

#[test]
fn failed_calls_keep_their_codes_and_errno() {
    let fail =
        "cuMemAlloc_v2=2@2,cuLaunchKernel=719@*,cuCtxGetCurrent=201@3,cuStreamSynchronize=999@2+";
    let r = traced_like_untraced("errors", &[], &[("SIMCUDA_FAIL", fail)]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert_eq!(r.stdout().trim_end(), "errors ok failed=22 calls=43");
    let t = r.trace();
    let mut errors: BTreeMap<String, BTreeMap<u32, u64>> = BTreeMap::new();
    for (_, rec) in records(&t) {
        if rec.result != 0 {
            *errors
                .entry(t.functions[&rec.function].clone())
                .or_default()
                .entry(rec.result)
                .or_insert(0) += 1;
        }
    }
    let failed: u64 = errors.values().flat_map(|m| m.values()).sum();
    assert_eq!(failed, 22);
    // Each failure the program provoked (it checks every code itself), as recorded.
    let expected: BTreeMap<String, BTreeMap<u32, u64>> = [
        ("cuCtxGetCurrent", &[(201, 1)][..]),
        ("cuDeviceGet", &[(101, 1)]),
        ("cuDeviceGetCount", &[(3, 1)]),
        ("cuEventElapsedTime_v2", &[(400, 1)]),
        ("cuGetErrorString", &[(1, 1)]),
        ("cuGetExportTable", &[(801, 1)]),
        ("cuInit", &[(1, 1)]),
        ("cuLaunchKernel", &[(719, 2)]),
        ("cuMemAlloc_v2", &[(1, 1), (2, 1), (201, 1)]),
        ("cuMemFree_v2", &[(1, 1)]),
        ("cuMemcpyHtoD_v2", &[(1, 2)]),
        ("cuMemsetD32_v2", &[(1, 1)]),
        ("cuModuleGetFunction", &[(500, 1)]),
        ("cuModuleLoadData", &[(200, 1)]),
        ("cuStreamCreate", &[(1, 1)]),
        ("cuStreamDestroy_v2", &[(400, 1)]),
        ("cuStreamSynchronize", &[(999, 2)]),
    ]
    .iter()
    .map(|(f, codes)| (f.to_string(), codes.iter().copied().collect()))
    .collect();
    assert_eq!(errors, expected);
}

#[test]
fn disabled_records_nothing_and_changes_nothing() {
    let plain = run(Spec::untraced("direct"));
    let off = run(Spec::traced("direct").env(&[("RTRACE_DISABLE", "1")]));
    assert_eq!(off.stdout(), plain.stdout());
    assert_eq!(off.output.status, plain.output.status);
    assert!(off.trace_files().is_empty());
}

#[test]
fn function_table_names_every_wrapper() {
    let r = run(Spec::traced("direct"));
    let t = r.trace();
    assert_eq!(t.functions.len(), 683);
    assert_eq!(
        t.functions
            .values()
            .filter(|n| n.ends_with("_ptds") || n.ends_with("_ptsz"))
            .count(),
        99
    );
}
