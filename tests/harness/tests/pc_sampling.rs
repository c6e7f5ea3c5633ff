//! PC sampling (`RTRACE_PC_SAMPLING`) on the simulated driver and the simulated CUPTI, whose
//! samples are deterministic (tests/simcupti/README.md, "PC sampling"): each launch of a
//! module's kernel gives 4 PCs at offsets 0, 32, 64, 96 with, for the k-th, (k+1)*10 samples
//! stalled on long_scoreboard (and (k+1)*5 of them not issued), (4-k)*3 on short_scoreboard
//! and 1 selected: 134 per launch.

use rtrace_tests::*;

fn messages(t: &rtrace_collector::model::Trace) -> Vec<String> {
    t.notices.iter().map(|n| n.message.clone()).collect()
}

#[test]
fn each_kernel_gets_its_samples_by_pc_and_stall_reason() {
    let r = run(Spec::traced("direct").env(&[("RTRACE_PC_SAMPLING", "1")]));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let untraced = run(Spec::untraced("direct"));
    assert_eq!(r.stdout(), untraced.stdout());
    let t = r.trace();
    check_invariants(&t);
    // Sampling set up on the primary context, every stall reason simcupti serves, the
    // period CUPTI chose.
    assert_eq!(t.pc_configs.len(), 1, "{:?}", messages(&t));
    let c = &t.pc_configs[0];
    assert_eq!((c.device, c.period_log2), (0, 11));
    assert_eq!(
        (c.scratch_bytes, c.hardware_bytes),
        (1_048_576, 536_870_912)
    );
    assert_eq!(
        c.stall_reasons.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        vec![0, 14, 15, 20, 21, 28, 30, 36, 1]
    );
    assert!(messages(&t).contains(&format!(
        "PC sampling on for context {}: every 2^11 cycles, 9 stall reasons",
        c.context
    )));
    let p = rtrace_collector::pcsamp::profile(std::slice::from_ref(&t));
    assert_eq!(p.total_samples, 268);
    assert_eq!((p.dropped_samples, p.non_user_samples), (0, 0));
    let kernels: Vec<(&str, u64, u64)> = p
        .kernels
        .iter()
        .map(|k| (k.name.as_str(), k.samples, k.not_issued))
        .collect();
    assert_eq!(
        kernels,
        vec![("fill_u32", 134, 50), ("vecadd_f32", 134, 50)]
    );
    for k in &p.kernels {
        // The image's CRC (cuptiGetCubinCrc) names the module image the trace stores.
        let image = t
            .module_images
            .iter()
            .find(|i| i.crc == k.crc)
            .expect("the samples' image is in the trace");
        assert_eq!(k.image, Some(image.hash));
        assert_eq!(
            k.stalls,
            vec![
                ("long_scoreboard".to_string(), 100),
                ("short_scoreboard".to_string(), 30),
                ("selected".to_string(), 4)
            ]
        );
        let pcs: Vec<(u64, u64, u64)> = k
            .pcs
            .iter()
            .map(|r| (r.offset, r.samples, r.not_issued))
            .collect();
        assert_eq!(
            pcs,
            vec![(96, 44, 20), (64, 37, 15), (32, 30, 10), (0, 23, 5)]
        );
    }
    // The report says so (no nvdisasm can read simcuda's text images).
    let out = std::process::Command::new(rtrace_bin())
        .args(["report", "--nvdisasm", "/nonexistent/nvdisasm"])
        .arg(&r.trace_files()[0])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "\nPC sampling: 268 samples in 2 kernels (1 context sampled every 2^11 cycles; \
             CUPTI counted 268 samples, 0 dropped, 0 in kernels without PCs)\n"
        ),
        "{text}"
    );
    assert!(text.contains("  fill_u32: 134 samples (50.0% of all): Stall Long Scoreboard 74.6%, Stall Short Scoreboard 22.4%, Selected 3.0%\n"), "{text}");
}

#[test]
fn sampling_that_cannot_start_is_said_and_tracing_goes_on() {
    // CUPTI refuses (an unsupported device).
    let r = run(Spec::traced("direct").env(&[
        ("RTRACE_PC_SAMPLING", "12"),
        ("SIMCUPTI_PC_SAMPLING", "unsupported"),
    ]));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let t = r.trace();
    assert!(t.pc_configs.is_empty() && t.pc_batches.is_empty());
    let off: Vec<String> = messages(&t)
        .into_iter()
        .filter(|m| m.starts_with("PC sampling"))
        .collect();
    assert_eq!(
        off,
        vec![format!(
            "PC sampling off: cuptiPCSamplingEnable on context {}: CUPTI_ERROR_NOT_SUPPORTED (27)",
            t.contexts[0].context
        )]
    );
    assert_eq!(counts(std::slice::from_ref(&t)).values().sum::<u64>(), 44);
    // No CUPTI at all.
    let r = run(Spec::traced("direct").env(&[
        ("RTRACE_PC_SAMPLING", "1"),
        ("RTRACE_CUPTI_LIBRARY", "/nonexistent/libcupti.so.13"),
    ]));
    assert_eq!(r.code(), Some(0));
    assert_eq!(
        messages(&r.trace()),
        vec![
            "PC sampling off: no CUPTI library found (tried /nonexistent/libcupti.so.13)",
            "GPU activity off: no CUPTI library found (tried /nonexistent/libcupti.so.13)"
        ]
    );
    // A setting that cannot be read.
    let r = run(Spec::traced("direct").env(&[("RTRACE_PC_SAMPLING", "often")]));
    assert_eq!(r.code(), Some(0));
    assert_eq!(
        messages(&r.trace()),
        vec!["RTRACE_PC_SAMPLING=often: expected 0, 1 or a period 5..31 (2^N cycles); PC sampling off"]
    );
}
