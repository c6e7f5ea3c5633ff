//! Application replay (`RTRACE_METRICS_REPLAY=application`): each occurrence of the capture
//! range (`cuProfilerStart`..`cuProfilerStop`, or an NVTX range of `RTRACE_NVTX_CAPTURE`) is
//! profiled as one unit, one CUPTI user range, and `rtrace record --replay application` runs
//! the whole program once per replay pass (`RTRACE_REPLAY_PASS`), the passes sharing a
//! directory (`RTRACE_REPLAY_DIR`). Kernel launches run untouched (only counted).
//!
//! CUPTI's application replay takes one `Start`..`Stop` per run (measured on an H100: a second
//! `Start`..`Stop` in a run counts as the next pass, and its ranges evaluate to NaN). So:
//!
//! - At the first range of a run on the calling thread's context (set up on first use, its
//!   counter data image sized for [`RANGE_CAPACITY`] ranges: in pass 0 freshly initialized, in
//!   later passes loaded as the previous pass left it): `SetConfig` (user range, application
//!   replay (user replay if CUPTI refuses it), this run's pass) and `Start`.
//! - Each range: `PushRange("NAME [i]")` at its start (i: the range's index on the context, so
//!   that no two ranges share a name in CUPTI's range tree), `PopRange` at its end. Every range,
//!   profiled or not, is appended to this pass's list (`ranges.<pass>`: context, kernel
//!   launches, `-`, `-`, name), which `rtrace record` compares with pass 0's.
//! - At the end of the run ([`finish_run`], before the trace's last chunks): `Stop`,
//!   `DecodeData`, the image saved; in the last pass, each range's metrics are evaluated: one
//!   `KernelProfile` per range (correlation 0, `launch` = the range's index in the image,
//!   name = the NVTX range's text, or `cuProfilerStart N`).
//! - Pass 0 writes `setup` (one line per context: id, passes, chip), from which `rtrace record`
//!   learns how many runs to make. Every failure is a notice; tracing goes on.
//!
//! A range nested in an open one is part of it.

use super::api::call;
use super::driver::current_context;
use super::launch::evaluate;
use super::output::{queue, say};
use super::range_setup::{range_name, set_config, set_up_context};
use super::range_state::{Context, Done, Open, Ranges};
use super::setup::{failed, RANGE_CAPACITY};
use crate::cupti::api::Api;
use crate::cupti::state::CUPTI;
use rtrace_cupti_abi as abi;
use rtrace_format::{ChunkKind, KernelProfile, PROFILING_NOTICE};
use std::ffi::CString;
use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::atomic::Ordering;

/// At start-up, with `RTRACE_METRICS_REPLAY=application`: the notices; profiling is on when
/// the settings hold.
pub(super) fn configure(
    cfg: &crate::config::Config,
    settings: &crate::config::AppReplay,
    metrics: Vec<String>,
) -> Vec<String> {
    let off = |why: String| vec![format!("{PROFILING_NOTICE} off: {why}")];
    let (pass, dir) = match settings {
        Ok(s) => s.clone(),
        Err(e) => return off(e.clone()),
    };
    let c = &cfg.capture;
    let unit = match (c.profiler_api, c.nvtx_include.is_empty()) {
        (true, _) => "each cuProfilerStart..cuProfilerStop range".to_string(),
        (false, false) => format!(
            "each NVTX range {}",
            c.nvtx_include
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (false, true) => {
            return off(format!(
                "application replay profiles capture ranges: set {}=cudaProfilerApi or {}",
                rtrace_format::env::CAPTURE_RANGE,
                rtrace_format::env::NVTX_CAPTURE
            ))
        }
    };
    if !dir.is_dir() {
        return off(format!(
            "{}: {} is not a directory",
            rtrace_format::env::REPLAY_DIR,
            dir.display()
        ));
    }
    let n = metrics.len();
    let _ = CUPTI.prof.metrics.set(metrics);
    if let Ok(mut g) = CUPTI.prof.ranges.lock() {
        *g = Some(Ranges::new(pass, dir));
    }
    CUPTI.prof.application.store(true, Ordering::Release);
    CUPTI.prof.on.store(true, Ordering::Release);
    vec![format!(
        "{PROFILING_NOTICE} on: {n} metrics by application replay (pass {pass}), for {unit}; kernels run unprofiled"
    )]
}

/// A capture range begins on the calling thread: `name` (an NVTX range's), or `None` for
/// `cuProfilerStart`.
pub(crate) fn begin(name: Option<&str>) {
    guarded(|notices| begin_range(name, notices));
}

/// The capture range ends.
pub(crate) fn end() {
    guarded(end_range);
}

/// Runs `f` as rtrace's own code (its driver calls unrecorded), no panic escaping, then
/// writes its notices.
fn guarded(f: impl FnOnce(&mut Vec<String>)) {
    if !CUPTI.prof.application.load(Ordering::Acquire) {
        return;
    }
    let mut notices = Vec::new();
    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
        crate::thread::internal(|| f(&mut notices))
    }));
    say(notices);
}

fn begin_range(name: Option<&str>, notices: &mut Vec<String>) {
    let Ok(mut guard) = CUPTI.prof.ranges.lock() else {
        return;
    };
    let Some(r) = guard.as_mut() else {
        return;
    };
    if r.open.is_some() {
        return;
    }
    let name = match name {
        Some(n) => n.to_string(),
        None => {
            r.numbered += 1;
            format!("cuProfilerStart {}", r.numbered)
        }
    };
    // Every range is listed, profiled or not: the list says what the program did.
    let (id, context) = start_profiling(r, &name, notices);
    r.open = Some(Open {
        context,
        id,
        name,
        launches: CUPTI.prof.range_launches.load(Ordering::Acquire),
        start_ns: crate::clock::now_ns(),
    });
}

/// Starts profiling range `name` on the calling thread's context: (CUPTI's id of the context,
/// 0 if none; the context's index in `r.contexts` when the range is being profiled).
fn start_profiling(r: &mut Ranges, name: &str, notices: &mut Vec<String>) -> (u32, Option<usize>) {
    let Some(api) = CUPTI.api.get() else {
        once(r, notices, "no GPU activity", || {
            format!("{PROFILING_NOTICE}: range {name} began before GPU activity started: not profiled (said once)")
        });
        return (0, None);
    };
    let Some(Ok(prof)) = &api.profiler else {
        return (0, None);
    };
    let ctx = current_context();
    if ctx.is_null() {
        once(r, notices, "no context", || {
            format!("{PROFILING_NOTICE}: range {name} began with no current CUDA context: not profiled (said once)")
        });
        return (0, None);
    }
    let mut id = 0u32;
    // SAFETY: `ctx` is the calling thread's current context; CUPTI writes its id.
    unsafe { (api.context_id)(ctx, &mut id) };
    let i = match r
        .contexts
        .iter()
        .position(|c| c.ctx == ctx as usize && c.id == id)
    {
        Some(i) => i,
        None => {
            let c = set_up_context(api, prof, r, ctx, id, notices);
            r.contexts.push(c);
            r.contexts.len() - 1
        }
    };
    let pass = r.pass;
    let c = &mut r.contexts[i];
    let Some(p) = c.profiled.as_mut() else {
        return (id, None);
    };
    // A context whose metrics cost fewer passes than another's is done.
    if pass >= c.passes {
        return (id, None);
    }
    if c.ranges >= RANGE_CAPACITY {
        if c.ranges == RANGE_CAPACITY {
            notices.push(format!(
                "{PROFILING_NOTICE}: context {id}: ranges past the first {RANGE_CAPACITY} are not profiled"
            ));
            c.ranges += 1;
        }
        return (id, None);
    }
    let object = p.range_object;
    if !c.started {
        if let Err((call_name, rc)) = set_config(api, prof, p, pass, &mut r.mode, notices) {
            notices.push(lost(api, id, name, call_name, rc));
            return (id, None);
        }
        let mut s = abi::RangeProfilerStart::new();
        s.range_profiler_object = object;
        let rc = call(prof.start, &mut s);
        if rc != abi::SUCCESS {
            notices.push(lost(api, id, name, "cuptiRangeProfilerStart", rc));
            return (id, None);
        }
        c.started = true;
    }
    // Unique on the context (the same NVTX range recurs): `NAME [index]`.
    let text =
        CString::new(format!("{} [{}]", name.replace('\0', " "), c.ranges)).unwrap_or_default();
    let mut push = abi::RangeProfilerPushRange::new();
    push.range_profiler_object = object;
    push.range_name = text.as_ptr();
    let rc = call(prof.push_range, &mut push);
    if rc != abi::SUCCESS {
        notices.push(lost(api, id, name, "cuptiRangeProfilerPushRange", rc));
        return (id, None);
    }
    c.ranges += 1;
    (id, Some(i))
}

fn end_range(notices: &mut Vec<String>) {
    let Ok(mut guard) = CUPTI.prof.ranges.lock() else {
        return;
    };
    let Some(r) = guard.as_mut() else {
        return;
    };
    let Some(open) = r.open.take() else {
        return;
    };
    let launches = CUPTI.prof.range_launches.load(Ordering::Acquire) - open.launches;
    if let Some(i) = open.context {
        pop(r, i, &open, notices);
    }
    let line = format!(
        "{}\t{launches}\t-\t-\t{}\n",
        open.id,
        open.name.replace(['\n', '\t'], " ")
    );
    let listed = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(r.dir.join(format!("ranges.{}", r.pass)))
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = listed {
        notices.push(format!(
            "{PROFILING_NOTICE}: range {}: cannot write to {}: {e}",
            open.name,
            r.dir.display()
        ));
    }
}

/// Ends profiling `open` on context `i`: `PopRange`; the range is kept for [`finish_run`].
fn pop(r: &mut Ranges, i: usize, open: &Open, notices: &mut Vec<String>) {
    let (Some(api), Some(c)) = (CUPTI.api.get(), r.contexts.get_mut(i)) else {
        return;
    };
    let (Some(Ok(prof)), Some(p)) = (&api.profiler, c.profiled.as_mut()) else {
        return;
    };
    let mut pop = abi::RangeProfilerPopRange::new();
    pop.range_profiler_object = p.range_object;
    let rc = call(prof.pop_range, &mut pop);
    if rc != abi::SUCCESS {
        notices.push(lost(
            api,
            c.id,
            &open.name,
            "cuptiRangeProfilerPopRange",
            rc,
        ));
        return;
    }
    c.done.push(Done {
        index: c.ranges - 1,
        name: open.name.clone(),
        start_ns: open.start_ns,
        end_ns: crate::clock::now_ns(),
    });
}

/// The end of the run: on each context profiling started on, `Stop`, `DecodeData`, the image
/// saved for the next pass; in the last pass, each range's `KernelProfile`. Once (later calls
/// find nothing started).
pub(crate) fn finish_run() {
    guarded(|notices| {
        let Ok(mut guard) = CUPTI.prof.ranges.lock() else {
            return;
        };
        let Some(r) = guard.as_mut() else {
            return;
        };
        let pass = r.pass;
        let dir = r.dir.clone();
        for c in r.contexts.iter_mut().filter(|c| c.started) {
            c.started = false;
            finish_context(c, pass, &dir, notices);
        }
    });
}

/// A context is about to be destroyed: its profiling in this run ends now, as at the end of
/// the run (its range profiler goes with it).
pub(crate) fn context_destroying(ctx: *mut std::ffi::c_void) {
    guarded(|notices| {
        let Ok(mut guard) = CUPTI.prof.ranges.lock() else {
            return;
        };
        let Some(r) = guard.as_mut() else {
            return;
        };
        let (pass, dir) = (r.pass, r.dir.clone());
        for c in r
            .contexts
            .iter_mut()
            .filter(|c| c.started && c.ctx == ctx as usize)
        {
            c.started = false;
            finish_context(c, pass, &dir, notices);
        }
    });
}

fn finish_context(c: &mut Context, pass: u32, dir: &Path, notices: &mut Vec<String>) {
    let Some(api) = CUPTI.api.get() else {
        return;
    };
    let (Some(Ok(prof)), Some(p)) = (&api.profiler, c.profiled.as_mut()) else {
        return;
    };
    let id = c.id;
    let whole_run = "the run's ranges";
    let object = p.range_object;
    let mut s = abi::RangeProfilerStop::new();
    s.range_profiler_object = object;
    let rc = call(prof.stop, &mut s);
    if rc != abi::SUCCESS {
        notices.push(lost(api, id, whole_run, "cuptiRangeProfilerStop", rc));
        return;
    }
    let mut d = abi::RangeProfilerDecodeData::new();
    d.range_profiler_object = object;
    let rc = call(prof.decode, &mut d);
    if rc != abi::SUCCESS {
        notices.push(lost(api, id, whole_run, "cuptiRangeProfilerDecodeData", rc));
        return;
    }
    if d.num_of_range_dropped > 0 {
        notices.push(format!(
            "{PROFILING_NOTICE}: context {id}: CUPTI dropped {} range(s)",
            d.num_of_range_dropped
        ));
    }
    if let Err(e) = write_file(&dir.join(format!("image.{id}")), &p.counter_data) {
        notices.push(format!(
            "{PROFILING_NOTICE}: context {id}: cannot write to {}: {e}",
            dir.display()
        ));
        return;
    }
    if pass + 1 < c.passes && s.is_all_pass_submitted == 0 {
        return;
    }
    // The image holds every range of the run: kept once, with the first.
    for (n, done) in c.done.drain(..).enumerate() {
        let record = KernelProfile {
            context: id,
            correlation: 0,
            launch: done.index as u64,
            start_ns: done.start_ns,
            end_ns: done.end_ns,
            range: range_name(prof, p, done.index),
            name: done.name,
            values: evaluate(prof, p, done.index),
            counter_data: if n == 0 {
                p.counter_data.clone()
            } else {
                Vec::new()
            },
        };
        queue(
            ChunkKind::KernelProfile,
            rtrace_format::encode_value(&record),
        );
    }
}

/// A range lost to a failed call: the notice.
fn lost(api: &Api, context: u32, range: &str, name: &str, rc: u32) -> String {
    format!(
        "{}: range {range} is not profiled",
        failed(api, context, name, rc).replacen(" off for", " failed for", 1)
    )
}

fn once(
    r: &mut Ranges,
    notices: &mut Vec<String>,
    key: &'static str,
    text: impl FnOnce() -> String,
) {
    if !r.said.contains(&key) {
        r.said.push(key);
        notices.push(text());
    }
}

/// Writes `bytes` to `path` whole (a temporary file renamed over it).
fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}
