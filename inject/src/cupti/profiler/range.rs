//! Application replay (`RTRACE_METRICS_REPLAY=application`): each occurrence of the capture
//! range (`cuProfilerStart`..`cuProfilerStop`, or an NVTX range of `RTRACE_NVTX_CAPTURE`) is
//! profiled as one unit, one CUPTI user range, and `rtrace record --replay application` runs
//! the whole program once per replay pass (`RTRACE_REPLAY_PASS`), the passes sharing a
//! directory (`RTRACE_REPLAY_DIR`). Kernel launches run untouched (only counted).
//!
//! - At a range's start, on the calling thread's context (set up on first use, its counter
//!   data image sized for [`RANGE_CAPACITY`] ranges: in pass 0 freshly initialized, in later
//!   passes loaded as the previous pass left it): `SetConfig` (user range, application replay
//!   (user replay if CUPTI refuses it), this run's pass), `Start`, `PushRange("NAME [i]")` (i: the range's index on
//!   the context, so that no two ranges share a name in CUPTI's range tree).
//! - At its end: `PopRange`, `Stop`, `DecodeData`; the image is saved. Every range, profiled or
//!   not, is appended to this pass's list (`ranges.<pass>`: context, kernel launches, Stop's
//!   pass index and all-passes flag (`-` when not profiled), name), which `rtrace record`
//!   compares with pass 0's.
//! - In the last pass, the range's metrics are evaluated: one `KernelProfile` (correlation 0,
//!   `launch` = the range's index in the image, name = the NVTX range's text, or
//!   `cuProfilerStart N`).
//! - Pass 0 writes `setup` (one line per context: id, passes, chip), from which `rtrace record`
//!   learns how many runs to make. Every failure is a notice; tracing goes on.
//!
//! A range nested in an open one is part of it. Ranges of one run are one per `SetConfig`, so
//! a context's image gathers them in order across runs.

use super::api::call;
use super::driver::current_context;
use super::launch::evaluate;
use super::output::{queue, say};
use super::range_setup::{range_name, renew, set_config, set_up_context};
use super::range_state::{Open, Ranges};
use super::setup::{failed, RANGE_CAPACITY};
use crate::cupti::api::{describe, Api};
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
    let mut configured = set_config(api, prof, p, pass, &mut r.mode, notices);
    // CUPTI may refuse a configuration on an object configured before: enabled anew (the
    // counter data image is rtrace's, so nothing is lost), it is tried once more.
    if let (Err((_, refused)), true) = (configured, c.ranges > 0) {
        if renew(prof, p, ctx).is_ok() {
            configured = set_config(api, prof, p, pass, &mut r.mode, notices);
            if configured.is_ok() && !c.renewed {
                c.renewed = true;
                notices.push(format!(
                    "{PROFILING_NOTICE}: context {id}: cuptiRangeProfilerSetConfig refused a second configuration ({}): the range profiler is enabled anew for each range",
                    describe(api, refused as i32)
                ));
            }
        }
    }
    if let Err((call_name, rc)) = configured {
        notices.push(lost(api, id, name, call_name, rc));
        return (id, None);
    }
    let object = p.range_object;
    let mut s = abi::RangeProfilerStart::new();
    s.range_profiler_object = object;
    let rc = call(prof.start, &mut s);
    if rc != abi::SUCCESS {
        notices.push(lost(api, id, name, "cuptiRangeProfilerStart", rc));
        return (id, None);
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
        let mut s = abi::RangeProfilerStop::new();
        s.range_profiler_object = object;
        call(prof.stop, &mut s);
        return (id, None);
    }
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
    let stopped = open
        .context
        .and_then(|i| finish_profiling(r, i, &open, notices));
    let (stop_pass, all) = match &stopped {
        Some(s) => (s.pass.to_string(), s.all.to_string()),
        None => ("-".to_string(), "-".to_string()),
    };
    let line = format!(
        "{}\t{launches}\t{stop_pass}\t{all}\t{}\n",
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
    let (Some(stopped), Some(i)) = (stopped, open.context) else {
        return;
    };
    let (Some(api), Some(c)) = (CUPTI.api.get(), r.contexts.get_mut(i)) else {
        return;
    };
    let (Some(Ok(prof)), Some(p)) = (&api.profiler, c.profiled.as_mut()) else {
        return;
    };
    if r.pass + 1 < c.passes && stopped.all == 0 {
        return;
    }
    let values = evaluate(prof, p, stopped.index);
    let record = KernelProfile {
        context: c.id,
        correlation: 0,
        launch: stopped.index as u64,
        start_ns: open.start_ns,
        end_ns: crate::clock::now_ns(),
        range: range_name(prof, p, stopped.index),
        name: open.name,
        values,
        counter_data: p.counter_data.clone(),
    };
    queue(
        ChunkKind::KernelProfile,
        rtrace_format::encode_value(&record),
    );
}

/// What `Stop` said of a profiled range, and its index in the image.
struct Stopped {
    pass: usize,
    all: u8,
    index: usize,
}

/// Ends profiling `open` on context `i`: `PopRange`, `Stop`, `DecodeData`, the image saved.
/// `None` (with a notice) when a call fails.
fn finish_profiling(
    r: &mut Ranges,
    i: usize,
    open: &Open,
    notices: &mut Vec<String>,
) -> Option<Stopped> {
    let api = CUPTI.api.get()?;
    let c = r.contexts.get_mut(i)?;
    let (Some(Ok(prof)), Some(p)) = (&api.profiler, c.profiled.as_mut()) else {
        return None;
    };
    let object = p.range_object;
    let mut pop = abi::RangeProfilerPopRange::new();
    pop.range_profiler_object = object;
    let pop_rc = call(prof.pop_range, &mut pop);
    let mut s = abi::RangeProfilerStop::new();
    s.range_profiler_object = object;
    let stop_rc = call(prof.stop, &mut s);
    let id = c.id;
    for (name, rc) in [
        ("cuptiRangeProfilerPopRange", pop_rc),
        ("cuptiRangeProfilerStop", stop_rc),
    ] {
        if rc != abi::SUCCESS {
            notices.push(lost(api, id, &open.name, name, rc));
            return None;
        }
    }
    let mut d = abi::RangeProfilerDecodeData::new();
    d.range_profiler_object = object;
    let rc = call(prof.decode, &mut d);
    if rc != abi::SUCCESS {
        notices.push(lost(
            api,
            id,
            &open.name,
            "cuptiRangeProfilerDecodeData",
            rc,
        ));
        return None;
    }
    if d.num_of_range_dropped > 0 {
        notices.push(format!(
            "{PROFILING_NOTICE}: context {id}: CUPTI dropped range {} ({} dropped)",
            open.name, d.num_of_range_dropped
        ));
    }
    let index = c.ranges;
    c.ranges += 1;
    if let Err(e) = write_file(&r.dir.join(format!("image.{id}")), &p.counter_data) {
        notices.push(format!(
            "{PROFILING_NOTICE}: context {id}: range {}: cannot write to {}: {e}",
            open.name,
            r.dir.display()
        ));
        return None;
    }
    Some(Stopped {
        pass: s.pass_index,
        all: s.is_all_pass_submitted,
        index,
    })
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
