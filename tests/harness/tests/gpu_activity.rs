//! GPU activity (`RTRACE_GPU_ACTIVITY=1`) on the simulated driver and the simulated CUPTI
//! (tests/simcupti): exact kernel, copy and memset records, each linked to its launch call.

use rtrace_format::{CopyKind, DeviceInfo, FLAG_CORRELATED};
use rtrace_tests::*;

const ON: &[(&str, &str)] = &[("RTRACE_GPU_ACTIVITY", "1")];

#[test]
fn kernels_copies_and_memsets_are_recorded_and_linked() {
    let plain = run(Spec::untraced("direct"));
    let r = run(Spec::traced("direct").env(ON));
    assert_eq!(r.stdout(), plain.stdout());
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let t = r.trace();
    check_invariants(&t);
    let messages: Vec<&str> = t.notices.iter().map(|n| n.message.as_str()).collect();
    assert_eq!(
        messages,
        vec![
            "GPU activity on: kernels, memory copies and memsets through CUPTI",
            "GPU records carry rtrace correlation ids (CUPTI callbacks on 117 driver functions)",
        ]
    );
    let api: std::collections::HashMap<u64, (String, u64)> = records(&t)
        .into_iter()
        .map(|(_, a)| {
            (
                a.correlation,
                (t.functions[&a.function].clone(), a.start_ns),
            )
        })
        .collect();
    let launcher = |corr: u64| api.get(&corr).map(|(f, _)| f.as_str());

    // Kernels: names and durations from the module image, in launch order.
    let kernels: Vec<_> = t
        .kernels
        .iter()
        .map(|k| {
            assert_eq!(k.flags & FLAG_CORRELATED, FLAG_CORRELATED);
            assert_eq!(launcher(k.correlation), Some("cuLaunchKernel"));
            (
                t.kernel_name(k.name).into_owned(),
                k.end_ns - k.start_ns,
                k.grid,
                k.block,
                k.registers_per_thread,
            )
        })
        .collect();
    assert_eq!(
        kernels,
        vec![
            ("vecadd_f32".into(), 2000, [4, 1, 1], [256, 1, 1], 32),
            ("fill_u32".into(), 500, [4, 1, 1], [256, 1, 1], 32),
        ]
    );
    assert!(t.kernels[0].start_ns < t.kernels[1].start_ns);

    // Copies: 4096 bytes at 10 GB/s take 410 virtual ns.
    let copies: Vec<_> = t
        .memcpys
        .iter()
        .map(|c| {
            assert_eq!(c.flags as u32 & FLAG_CORRELATED, FLAG_CORRELATED);
            (
                launcher(c.correlation).unwrap().to_string(),
                c.kind,
                c.bytes,
                c.end_ns - c.start_ns,
            )
        })
        .collect();
    assert_eq!(
        copies,
        vec![
            ("cuMemcpyHtoD_v2".into(), CopyKind::HtoD, 4096, 410),
            ("cuMemcpyHtoD_v2".into(), CopyKind::HtoD, 4096, 410),
            ("cuMemcpyDtoH_v2".into(), CopyKind::DtoH, 4096, 410),
            ("cuMemcpyDtoHAsync_v2".into(), CopyKind::DtoH, 4096, 410),
        ]
    );
    assert_eq!(t.memsets.len(), 1);
    let m = t.memsets[0];
    assert_eq!((m.bytes, m.end_ns - m.start_ns), (4096, 410));
    assert_eq!(launcher(m.correlation), Some("cuMemsetD32_v2"));

    // The device, as the driver describes it.
    let devices: Vec<&DeviceInfo> = t.devices.values().collect();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].ordinal, 0);
    assert_eq!(
        devices[0].attribute(rtrace_format::attr::MULTIPROCESSOR_COUNT),
        Some(132)
    );
}

#[test]
fn a_program_that_uses_cupti_itself_keeps_it() {
    let plain = run(Spec::untraced("cupti_client"));
    assert_eq!(plain.code(), Some(0), "{}", plain.stderr());
    let r = run(Spec::traced("cupti_client").env(ON));
    assert_eq!(r.stdout(), plain.stdout(), "{}", r.stderr());
    assert_eq!(r.code(), Some(0));
    let t = r.trace();
    let messages: Vec<&str> = t.notices.iter().map(|n| n.message.as_str()).collect();
    assert_eq!(
        messages,
        vec!["GPU activity off: the program uses CUPTI itself (CUPTI 13.0 serves one client)"]
    );
    assert!(t.kernels.is_empty());
}

#[test]
fn missing_cupti_is_said_and_api_tracing_goes_on() {
    let env = [
        ("RTRACE_GPU_ACTIVITY", "1"),
        ("RTRACE_CUPTI_LIBRARY", "/nonexistent/libcupti.so.13"),
    ];
    let r = run(Spec::traced("direct").env(&env));
    assert_eq!(r.code(), Some(0));
    let t = r.trace();
    assert_eq!(counts(std::slice::from_ref(&t)).values().sum::<u64>(), 44);
    let messages: Vec<&str> = t.notices.iter().map(|n| n.message.as_str()).collect();
    assert_eq!(
        messages,
        vec!["GPU activity off: no CUPTI library found (tried /nonexistent/libcupti.so.13)"]
    );
}
