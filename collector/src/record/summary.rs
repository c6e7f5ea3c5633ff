//! What `rtrace record` says after a run: for each trace, where it went and how big it is, its
//! records by kind and how many were dropped, and what was not recorded and why (what the
//! options turned off, what the trace's notices say of GPU activity and capture control, what
//! its records show); then why tracing
//! turned itself off where it did, or that no trace was written.

use super::session::{contents, Contents, Found};
use super::traced::Traced;

/// `n thing` or `n things`.
fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The lines `rtrace record` prints for a run (without the `rtrace: ` prefix): what it
/// `found`, why it could not make its status directory (`status_error`), `traced` being what
/// its options asked for.
pub fn summary_lines(found: &Found, status_error: Option<&str>, traced: &Traced) -> Vec<String> {
    let mut lines = Vec::new();
    for t in &found.traces {
        let beside = t.beside.as_ref().map_or(String::new(), |b| {
            format!("; {} was taken, so it went beside it", b.display())
        });
        if found.running.contains(&t.pid) {
            lines.push(format!(
                "trace {} is still being written by process {}, which outlived the program \
                 (report it once that process ends)",
                t.path.display(),
                t.pid
            ));
            continue;
        }
        match contents(&t.path) {
            Ok(c) => {
                lines.push(format!(
                    "trace written to {} ({}){beside}",
                    t.path.display(),
                    c.size,
                ));
                lines.extend(describe(&c, traced).into_iter().map(|l| format!("  {l}")));
            }
            Err(e) => lines.push(format!("trace {} cannot be read: {e}", t.path.display())),
        }
    }
    for (path, why) in &found.unreadable {
        lines.push(format!("trace {} cannot be read: {why}", path.display()));
    }
    for (pid, why) in &found.off {
        lines.push(format!("tracing turned itself off in process {pid}: {why}"));
    }
    if found.traces.is_empty() && found.unreadable.is_empty() && found.off.is_empty() {
        if traced.nothing {
            lines.push(format!(
                "no trace was written: nothing was traced ({})",
                traced.chosen_by
            ));
        } else {
            lines.push(
                "no trace was written (no process of the run made CUDA driver calls before the \
                 program ended)"
                    .into(),
            );
            if let Some(e) = status_error {
                lines.push(format!("(the reason may be elsewhere: {e})"));
            }
        }
    }
    lines
}

/// A trace's records by kind and what was not recorded, a line each:
///
/// ```text
/// 26 API calls, 3 kernels, 2 memory copies, 1 memset, 4 NVTX ranges; none dropped
/// NVTX: off (-t cuda,gpu)
/// ```
fn describe(c: &Contents, traced: &Traced) -> Vec<String> {
    if c.sampler {
        return gpu_metrics_lines(c, true);
    }
    let mut kinds = vec![plural(c.api, "API call", "API calls")];
    let gpu_asked = traced.gpu.any();
    for (n, on, one, many) in [
        (c.kernels, traced.gpu.kernel, "kernel", "kernels"),
        (c.copies, traced.gpu.memcpy, "memory copy", "memory copies"),
        (c.memsets, traced.gpu.memset, "memset", "memsets"),
        (
            c.memory,
            traced.gpu.memory,
            "allocation or free",
            "allocations and frees",
        ),
        (
            c.syncs,
            traced.gpu.sync,
            "synchronization",
            "synchronizations",
        ),
    ] {
        // A kind asked for is counted when none came, so that its absence shows.
        if n > 0 || (on && c.gpu_activity.as_ref().is_some_and(|g| g.is_ok())) {
            kinds.push(plural(n, one, many));
        }
    }
    if c.nvtx_ranges > 0 || traced.nvtx {
        kinds.push(plural(c.nvtx_ranges, "NVTX range", "NVTX ranges"));
    }
    if c.nvtx_marks > 0 {
        kinds.push(plural(c.nvtx_marks, "NVTX mark", "NVTX marks"));
    }
    let dropped = match (c.dropped, &c.write_failure) {
        (0, _) => "none dropped".to_string(),
        (n, Some(_)) => format!(
            "{} dropped (writing the trace failed: the buffers filled up)",
            plural(n, "API record", "API records")
        ),
        (n, None) => format!(
            "{} dropped (buffers were full: a larger --buffer-records loses fewer)",
            plural(n, "API record", "API records")
        ),
    };
    let mut lines = vec![format!("{}; {dropped}", kinds.join(", "))];
    let gpu = if !gpu_asked {
        Some(format!("off ({})", traced.chosen_by))
    } else {
        match &c.gpu_activity {
            Some(Err(why)) => Some(format!("off: {why}")),
            None => Some(
                "none recorded: CUPTI was not started in this process (it starts after the \
                 process's first successful cuInit, and none was seen: no GPU, no cuInit, or a \
                 forked child)"
                    .into(),
            ),
            Some(Ok(on)) if c.gpu() == 0 => Some(format!(
                "on, {}",
                crate::model::none_recorded(on, c.untimed as usize, !c.capture.is_empty())
            )),
            Some(Ok(_)) => None,
        }
    };
    if let Some(g) = gpu {
        lines.push(format!("GPU activity: {g}"));
    }
    if !traced.nvtx {
        lines.push(format!("NVTX: off ({})", traced.chosen_by));
    }
    lines.extend(gpu_metrics_lines(c, false));
    lines.extend(c.capture.iter().map(|what| format!("capture: {what}")));
    lines.extend(c.pc_sampling.iter().cloned());
    if let Some(w) = &c.write_failure {
        lines.push(w.clone());
    }
    if let Some(d) = &c.damage {
        lines.push(format!("damaged: {d}"));
    }
    lines
}

/// What a trace says of GPU metrics: samples on how many devices (always for the sampler's
/// own trace, `sampler`), and the notices on devices not sampled; the damage of a sampler's.
fn gpu_metrics_lines(c: &Contents, sampler: bool) -> Vec<String> {
    let (devices, samples, off) = &c.gpu_metrics;
    let mut lines = Vec::new();
    if *devices > 0 || sampler {
        lines.push(format!(
            "GPU metrics: {} on {}",
            plural(*samples, "sample", "samples"),
            plural(*devices, "device", "devices")
        ));
    }
    lines.extend(off.iter().cloned());
    if let (true, Some(d)) = (sampler, &c.damage) {
        lines.push(format!("damaged: {d}"));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_trace_holds_and_what_was_off() {
        let default = Traced::default();
        let c = Contents {
            size: "4.1 kB".into(),
            api: 26,
            kernels: 3,
            copies: 1,
            nvtx_ranges: 2,
            nvtx_marks: 1,
            gpu_activity: Some(Ok("kernels through CUPTI".into())),
            ..Default::default()
        };
        assert_eq!(
            describe(&c, &default),
            ["26 API calls, 3 kernels, 1 memory copy, 0 memsets, 2 NVTX ranges, 1 NVTX mark; none dropped"]
        );
        let api_only = Traced::parse("cuda").unwrap();
        let c = Contents {
            api: 1,
            dropped: 5,
            ..Default::default()
        };
        assert_eq!(
            describe(&c, &api_only),
            [
                "1 API call; 5 API records dropped (buffers were full: a larger \
                 --buffer-records loses fewer)",
                "GPU activity: off (-t cuda)",
                "NVTX: off (-t cuda)"
            ]
        );
        // A failed write: said, and the lost records blamed on it, not on the buffers.
        let c = Contents {
            api: 1,
            dropped: 5,
            write_failure: Some(
                "no end record: writing the trace failed (file too large; \
                                 what the buffers held was kept)"
                    .into(),
            ),
            ..Default::default()
        };
        assert_eq!(
            describe(&c, &api_only),
            [
                "1 API call; 5 API records dropped (writing the trace failed: the buffers \
                 filled up)",
                "GPU activity: off (-t cuda)",
                "NVTX: off (-t cuda)",
                "no end record: writing the trace failed (file too large; what the buffers \
                 held was kept)"
            ]
        );
        let c = Contents {
            api: 4,
            gpu_activity: Some(Err("CUPTI is held by another tool".into())),
            capture: vec!["recording only between cuProfilerStart and cuProfilerStop".into()],
            damage: Some("truncated".into()),
            ..Default::default()
        };
        assert_eq!(
            describe(&c, &default),
            [
                "4 API calls, 0 NVTX ranges; none dropped",
                "GPU activity: off: CUPTI is held by another tool",
                "capture: recording only between cuProfilerStart and cuProfilerStop",
                "damaged: truncated"
            ]
        );
        let c = Contents {
            api: 4,
            ..Default::default()
        };
        assert_eq!(
            describe(&c, &default)[1],
            "GPU activity: none recorded: CUPTI was not started in this process (it starts \
             after the process's first successful cuInit, and none was seen: no GPU, no cuInit, \
             or a forked child)"
        );
        let c = Contents {
            api: 4,
            gpu_activity: Some(Ok("kernels".into())),
            ..Default::default()
        };
        assert_eq!(
            describe(&c, &default),
            [
                "4 API calls, 0 kernels, 0 memory copies, 0 memsets, 0 NVTX ranges; none dropped",
                "GPU activity: on, none recorded (the program ran no kernels, copies or \
                 memsets while recording)"
            ]
        );
        // Work launched and never timed, or capture control choosing: not "ran none".
        let untimed = Contents {
            untimed: 2,
            ..c.clone()
        };
        assert_eq!(
            describe(&untimed, &default)[1],
            "GPU activity: on, none timed: 2 launched, not timed by CUPTI when the process ended \
             (listed as never timed)"
        );
        let captured = Contents {
            capture: vec!["recording only between cuProfilerStart and cuProfilerStop".into()],
            ..c.clone()
        };
        assert_eq!(
            describe(&captured, &default)[1],
            "GPU activity: on, none recorded while capture control recorded (see its notices)"
        );
        // Source counters record modules only: kernels were not asked for.
        let c = Contents {
            gpu_activity: Some(Ok("modules through CUPTI".into())),
            ..c
        };
        assert_eq!(
            describe(&c, &default)[1],
            "GPU activity: on, none recorded: kernels, copies and memsets were not asked for \
             (on: modules through CUPTI)"
        );
    }
}
