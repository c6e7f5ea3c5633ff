//! The configuration read from the environment: defaults, values clamped and said.

use super::*;
use std::collections::HashMap;

fn cfg(vars: &[(&str, &str)]) -> Config {
    let m: HashMap<String, OsString> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.into()))
        .collect();
    Config::from_lookup(|k| m.get(k).cloned())
}

#[test]
fn defaults() {
    let c = cfg(&[]);
    assert_eq!(c.output, "rtrace-%p.bin");
    assert_eq!(c.buffer_records, 65536);
    assert_eq!(c.full_wait_ms, 100);
    assert_eq!(c.flush_ms, 200);
    assert_eq!(c.poll_ms, 5);
    assert!(!c.disabled && !c.debug);
    assert_eq!(c.cuda_library, "libcuda.so.1");
    assert!(!c.clock_monotonic);
    assert!(!c.gpu_activity.any());
    assert_eq!(c.cupti_library, None);
    assert!(cfg(&[("RTRACE_CLOCK", "monotonic")]).clock_monotonic);
    assert_eq!(c.session, "");
    assert_eq!(c.status_dir, None);
    let c = cfg(&[("RTRACE_SESSION", "ab12"), ("RTRACE_STATUS_DIR", "/tmp/s")]);
    assert_eq!(c.session, "ab12");
    assert_eq!(c.status_dir, Some("/tmp/s".into()));
    assert_eq!(cfg(&[("RTRACE_STATUS_DIR", "")]).status_dir, None);
}

#[test]
fn module_images_only_when_needed_or_asked_for() {
    let images = |vars: &[(&str, &str)]| {
        let c = cfg(vars);
        (c.module_images, c.gpu_activity.resources)
    };
    assert_eq!(images(&[]), (false, false));
    assert_eq!(images(&[("RTRACE_GPU_ACTIVITY", "1")]), (false, true));
    assert_eq!(images(&[("RTRACE_MODULE_IMAGES", "")]), (false, false));
    assert_eq!(images(&[("RTRACE_MODULE_IMAGES", "1")]), (true, true));
    assert_eq!(images(&[("RTRACE_PC_SAMPLING", "1")]), (true, true));
    assert_eq!(
        images(&[("RTRACE_PC_SAMPLING", "1"), ("RTRACE_MODULE_IMAGES", "0")]),
        (false, true)
    );
    assert_eq!(
        images(&[
            ("RTRACE_METRICS", "SpeedOfLight"),
            ("RTRACE_GPU_ACTIVITY", "1")
        ]),
        (true, true)
    );
    assert_eq!(images(&[("RTRACE_METRICS", "SpeedOfLight")]), (true, false));
}

#[test]
fn pc_sampling() {
    let c = cfg(&[]);
    assert_eq!(c.pc_sampling, PcSampling::default());
    let c = cfg(&[("RTRACE_PC_SAMPLING", "1")]);
    assert!(c.pc_sampling.on && c.pc_sampling.period_log2.is_none());
    // Samples need modules: resources come on, nothing else.
    assert!(c.gpu_activity.resources && !c.gpu_activity.kernel);
    let c = cfg(&[
        ("RTRACE_PC_SAMPLING", "12"),
        (
            "RTRACE_PC_SAMPLING_STALLS",
            "long_scoreboard, mio_throttle,",
        ),
    ]);
    assert_eq!(
        c.pc_sampling,
        PcSampling {
            on: true,
            period_log2: Some(12),
            stalls: vec!["long_scoreboard".into(), "mio_throttle".into()],
            error: None,
        }
    );
    for bad in ["4", "32", "often"] {
        let c = cfg(&[("RTRACE_PC_SAMPLING", bad)]);
        assert!(!c.pc_sampling.on && !c.gpu_activity.any());
        assert_eq!(
            c.pc_sampling.error.as_deref(),
            Some(format!("RTRACE_PC_SAMPLING={bad}: expected 0, 1 or a period 5..31 (2^N cycles); PC sampling off").as_str())
        );
    }
}

#[test]
fn metrics() {
    assert_eq!(cfg(&[]).metrics, None);
    assert_eq!(cfg(&[("RTRACE_METRICS", " ")]).metrics, None);
    let c = cfg(&[("RTRACE_METRICS", " SpeedOfLight,gpu__time_duration.sum ")]);
    assert_eq!(
        c.metrics.as_deref(),
        Some("SpeedOfLight,gpu__time_duration.sum")
    );
    // Kernel records come on (profiles link to them), nothing else.
    assert!(c.gpu_activity.kernel && !c.gpu_activity.memcpy && !c.gpu_activity.resources);
}

#[test]
fn application_replay() {
    assert_eq!(cfg(&[]).application_replay, None);
    assert_eq!(
        cfg(&[("RTRACE_METRICS_REPLAY", "kernel")]).application_replay,
        None
    );
    let app = |extra: &[(&str, &str)]| {
        let mut v = vec![("RTRACE_METRICS_REPLAY", "application")];
        v.extend_from_slice(extra);
        cfg(&v).application_replay
    };
    assert_eq!(
        app(&[("RTRACE_REPLAY_PASS", "2"), ("RTRACE_REPLAY_DIR", "/tmp/r")]),
        Some(Ok((2, "/tmp/r".into())))
    );
    assert_eq!(
        app(&[("RTRACE_REPLAY_DIR", "/tmp/r")]),
        Some(Ok((0, "/tmp/r".into())))
    );
    assert_eq!(
        app(&[("RTRACE_REPLAY_PASS", "x"), ("RTRACE_REPLAY_DIR", "/tmp/r")]),
        Some(Err("RTRACE_REPLAY_PASS: not a pass number".into()))
    );
    assert_eq!(
        app(&[]),
        Some(Err("RTRACE_REPLAY_DIR is not set (run the program with rtrace record --replay application)".into()))
    );
    assert_eq!(
        cfg(&[("RTRACE_METRICS_REPLAY", "app")]).application_replay,
        Some(Err(
            "RTRACE_METRICS_REPLAY: give kernel or application".into()
        ))
    );
}

#[test]
fn gpu_kinds() {
    assert_eq!(cfg(&[]).gpu_activity, GpuKinds::default());
    assert_eq!(
        cfg(&[("RTRACE_GPU_ACTIVITY", "1")]).gpu_activity,
        GpuKinds::DEFAULT
    );
    assert_eq!(cfg(&[]).gpu_activity_error, None);
    // Words that name no kind are ignored, and said.
    let c = cfg(&[("RTRACE_GPU_ACTIVITY", "memory, bogus")]);
    assert_eq!(
        c.gpu_activity,
        GpuKinds {
            memory: true,
            ..Default::default()
        }
    );
    assert_eq!(
        c.gpu_activity_error.as_deref(),
        Some(
            "RTRACE_GPU_ACTIVITY: ignored bogus (the kinds are kernel, memcpy, memset, \
             memory, sync, resources)"
        )
    );
}

#[test]
fn rank_variables_are_read_at_start_up() {
    let c = cfg(&[
        ("LOCAL_RANK", "1"),
        ("SLURM_PROCID", "9"),
        ("RANK", "5"),
        ("OTHER", "x"),
    ]);
    let want = [("RANK", "5"), ("SLURM_PROCID", "9"), ("LOCAL_RANK", "1")];
    let want: Vec<(String, String)> = want.iter().map(|&(n, v)| (n.into(), v.into())).collect();
    assert_eq!(c.rank_env, want);
    assert!(cfg(&[]).rank_env.is_empty());
}

#[test]
fn output_variables_are_read_once() {
    let c = cfg(&[
        ("RTRACE_OUTPUT", "/t/%q{RANK}-%q{UNSET}-%q{RANK}-%p.bin"),
        ("RANK", "3"),
        ("OTHER", "x"),
    ]);
    assert_eq!(
        c.output_vars,
        vec![
            (b"RANK".to_vec(), b"3".to_vec()),
            (b"RANK".to_vec(), b"3".to_vec())
        ]
    );
    assert!(cfg(&[]).output_vars.is_empty());
    assert!(!cfg(&[]).force_overwrite);
    assert!(cfg(&[("RTRACE_FORCE_OVERWRITE", "1")]).force_overwrite);
}

#[test]
fn values_are_clamped_and_rounded() {
    let c = cfg(&[
        ("RTRACE_BUFFER_RECORDS", "1000"),
        ("RTRACE_FLUSH_MS", "5000"),
        ("RTRACE_DISABLE", "1"),
        ("RTRACE_DEBUG", "0"),
    ]);
    assert_eq!(c.buffer_records, 1024);
    assert_eq!(c.flush_ms, 1000);
    assert!(c.disabled && !c.debug);
    assert_eq!(cfg(&[("RTRACE_BUFFER_RECORDS", "3")]).buffer_records, 64);
    assert_eq!(cfg(&[("RTRACE_FLUSH_MS", "junk")]).flush_ms, 200);
    assert_eq!(cfg(&[("RTRACE_FLUSH_MS", "2")]).poll_ms, 2);
    // Each value not used as given is said.
    assert_eq!(
        c.settings_errors,
        [
            "RTRACE_FLUSH_MS: 5000 is out of range (give 1..=1000): 1000 is used",
            "RTRACE_BUFFER_RECORDS: 1000 is not a power of two: 1024 is used",
        ]
    );
    let c = cfg(&[
        ("RTRACE_FLUSH_MS", "junk"),
        ("RTRACE_FULL_WAIT_MS", "-1"),
        ("RTRACE_BUFFER_RECORDS", ""),
        ("RTRACE_CLOCK", "tsc"),
    ]);
    assert_eq!(
        c.settings_errors,
        [
            "RTRACE_FULL_WAIT_MS: \"-1\" is not a number (give 0..=1000): 100 is used",
            "RTRACE_FLUSH_MS: \"junk\" is not a number (give 1..=1000): 200 is used",
            "RTRACE_CLOCK=tsc is not monotonic: ignored",
        ]
    );
    assert_eq!((c.buffer_records, c.clock_monotonic), (65536, false));
    assert!(cfg(&[("RTRACE_CLOCK", "monotonic")])
        .settings_errors
        .is_empty());
    assert!(cfg(&[]).settings_errors.is_empty());
}
