//! Kernel profiling through CUPTI's range profiler (`RTRACE_METRICS`): hardware metrics of the
//! kernel launches the kernel controls choose (`RTRACE_KERNEL_REGEX`, `_SKIP`, `_COUNT`), each
//! replayed by CUPTI (kernel replay, auto range: one range per launch).
//!
//! - At start-up ([`configure`]) the LIST is resolved, the kernel controls built into the
//!   one [`KernelFilter`](crate::capture::KernelFilter), and the hot-path flag set. A bad LIST,
//!   a bad regex or PC sampling leaves profiling off with a notice.
//! - A launch wrapper with the flag set calls [`launch`]: it takes the profiler's lock, asks the
//!   filter (whose verdict is cached by function handle: the driver's name is fetched once per
//!   function), and runs an unchosen launch untouched. A chosen one sets its context up on
//!   first use (`setup.rs`: a `ProfilerSetup` chunk, or a notice saying why the context is not
//!   profiled), then is profiled (`launch.rs`) and becomes a `KernelProfile` chunk, queued for
//!   the worker, which writes the queue at each drain.
//! - The launch itself runs exactly once and its result is returned unchanged, whatever CUPTI
//!   does; a panic in rtrace's part is caught.
//! - Launches in CUDA graphs are not profiled: a notice says so at the first `cuGraphLaunch`.
//!
//! With `RTRACE_METRICS_REPLAY=application`, capture ranges are profiled instead, by
//! replaying the whole program (`range.rs`).
//!
//! Rooms: `api.rs` (entry points), `driver.rs` (the driver's queries), `output.rs` (chunks
//! and notices handed on), `setup.rs` (one context), `launch.rs` (one launch), `range_state.rs`,
//! `range_setup.rs` and `range.rs` (application replay: its state, one context, the ranges);
//! here, the state's use, start-up and the worker's drain.

pub(super) mod api;
pub(super) mod driver;
pub(super) mod launch;
mod output;
pub(crate) mod range;
mod range_setup;
pub(super) mod range_state;
pub(super) mod setup;

use super::api::Api;
use super::state::CUPTI;
use crate::capture::KernelFilter;
use crate::output::Sink;
use crate::thread::internal;
use driver::{current_context, current_device, function_name};
use launch::{profile, Launches};
use output::{queue, say};
use rtrace_format::{ChunkKind, KernelProfile, PROFILING_NOTICE};
use setup::{release_host, set_up, Profiled, Target};
use std::ffi::c_void;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;

/// `CUDA_ERROR_UNKNOWN`: what a launch returns had it been lost (it cannot be: the real call
/// runs exactly once, and a C function does not unwind).
const CUDA_ERROR_UNKNOWN: u32 = 999;

/// At start-up: resolves `RTRACE_METRICS` and turns profiling on. Returns the notices.
pub(super) fn configure() -> Vec<String> {
    let cfg = crate::state::config();
    let Some(list) = &cfg.metrics else {
        return Vec::new();
    };
    let off = |why: String| vec![format!("{PROFILING_NOTICE} off: {why}")];
    let chosen = match rtrace_format::metric_sets::resolve(list) {
        Ok(c) => c,
        Err(e) => return off(format!("RTRACE_METRICS: {e}")),
    };
    if cfg.pc_sampling.on {
        return off("PC sampling is on; CUPTI cannot do both on one context".into());
    }
    if let Some(settings) = &cfg.application_replay {
        let metrics = chosen.into_iter().map(|c| c.name).collect();
        return range::configure(cfg, settings, metrics);
    }
    let mut error = None;
    let filter = KernelFilter::from_config(&mut error);
    if let Some(e) = error {
        return off(e);
    }
    let metrics: Vec<String> = chosen.into_iter().map(|c| c.name).collect();
    let n = metrics.len();
    let _ = CUPTI.prof.metrics.set(metrics);
    if let Ok(mut g) = CUPTI.prof.launches.lock() {
        *g = Some(Launches {
            filter,
            chosen: 0,
            contexts: Vec::new(),
            initialized: false,
        });
    }
    CUPTI.prof.on.store(true, Ordering::Release);
    let which = crate::capture::describe_kernels(&cfg.capture)
        .unwrap_or_else(|| "every kernel".to_string());
    vec![format!(
        "{PROFILING_NOTICE} on: {n} metrics by kernel replay, for {which} (kernels in CUDA graphs are not profiled)"
    )]
}

/// GPU activity could not start: profiling, which needs its CUPTI, is off.
pub(super) fn activity_off(why: &str) {
    if CUPTI.prof.on.swap(false, Ordering::AcqRel) {
        CUPTI.notice(format!("{PROFILING_NOTICE} off: {why}"));
    }
}

/// After a recorded `cuGraphLaunch`: says once that graph kernels are not profiled.
pub(super) fn graph_launched() {
    if CUPTI.prof.on.load(Ordering::Relaxed) && !CUPTI.prof.graph_said.swap(true, Ordering::AcqRel)
    {
        CUPTI.notice(format!(
            "{PROFILING_NOTICE}: kernels launched by CUDA graphs (cuGraphLaunch) are not profiled"
        ));
    }
}

/// A recorded kernel launch of function handle `f` (its API record's `correlation`) while
/// profiling is on: runs `run` exactly once, profiled if the kernel controls choose it, and
/// returns its result.
pub(super) fn launch(correlation: u64, f: *mut c_void, run: impl FnOnce() -> u32) -> u32 {
    if CUPTI.prof.application.load(Ordering::Relaxed) {
        // Application replay: launches run untouched, counted for the ranges.
        CUPTI.prof.range_launches.fetch_add(1, Ordering::AcqRel);
        return run();
    }
    let mut run = Some(run);
    let mut ret = None;
    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let mut once = || {
            let r = run.take().map_or(CUDA_ERROR_UNKNOWN, |r| r());
            ret = Some(r);
            r
        };
        internal(|| launch_chosen(correlation, f, &mut once));
    }));
    match (ret, run.take()) {
        (Some(r), _) => r,
        (None, Some(r)) => r(),
        (None, None) => CUDA_ERROR_UNKNOWN,
    }
}

fn launch_chosen(correlation: u64, f: *mut c_void, run: &mut dyn FnMut() -> u32) {
    let Some(api) = CUPTI.api.get() else {
        run();
        return;
    };
    let Some(Ok(prof)) = &api.profiler else {
        run();
        return;
    };
    let Ok(mut guard) = CUPTI.prof.launches.lock() else {
        run();
        return;
    };
    let Some(l) = guard.as_mut() else {
        drop(guard);
        run();
        return;
    };
    let chosen = match &mut l.filter {
        None => true,
        Some(filter) => filter.keep_by(f as usize, || function_name(f).unwrap_or_default()),
    };
    if !chosen {
        drop(guard);
        run();
        return;
    }
    let ordinal = l.chosen;
    l.chosen += 1;
    let ctx = current_context();
    if ctx.is_null() {
        drop(guard);
        run();
        return;
    }
    let mut notices = Vec::new();
    let mut context = 0u32;
    // SAFETY: `ctx` is the calling thread's current context; CUPTI writes its id.
    unsafe { (api.context_id)(ctx, &mut context) };
    // A handle reused by a new context: the old one's entry is dropped (its host object
    // released; its range profiler went with the context).
    if let Some(i) = l
        .contexts
        .iter()
        .position(|(c, id, _)| *c == ctx as usize && *id != context)
    {
        let (_, _, old) = l.contexts.swap_remove(i);
        if let Some(old) = old {
            release_host(prof, old.host_object);
        }
    }
    let i = match l.contexts.iter().position(|(c, _, _)| *c == ctx as usize) {
        Some(i) => i,
        None => {
            let profiled = set_up_context(api, prof, l, ctx, context, &mut notices);
            l.contexts.push((ctx as usize, context, profiled));
            l.contexts.len() - 1
        }
    };
    let Some((_, _, Some(p))) = l.contexts.get_mut(i) else {
        drop(guard);
        say(notices);
        run();
        return;
    };
    let start_ns = crate::clock::now_ns();
    // Before the launch: its kernel record may be converted as soon as the kernel ends.
    if let Ok(mut times) = CUPTI.prof.profiled.lock() {
        times.push((correlation, start_ns, None));
    }
    let (_, measured) = profile(api, prof, p, &mut *run, &mut notices);
    let end_ns = crate::clock::now_ns();
    if let Some(m) = measured {
        let duration = p
            .names
            .iter()
            .position(|n| n.as_bytes() == b"gpu__time_duration.sum")
            .and_then(|i| m.values.get(i))
            .filter(|v| v.is_finite() && **v >= 0.0)
            .map(|v| *v as u64);
        if let Ok(mut times) = CUPTI.prof.profiled.lock() {
            if let Some(t) = times.iter_mut().find(|t| t.0 == correlation) {
                t.2 = duration;
            }
        }
        let record = KernelProfile {
            context: p.context,
            correlation,
            launch: ordinal,
            start_ns,
            end_ns,
            name: function_name(f).unwrap_or_default(),
            range: m.range,
            values: m.values,
            counter_data: m.counter_data,
        };
        queue(
            ChunkKind::KernelProfile,
            rtrace_format::encode_value(&record),
        );
    }
    drop(guard);
    say(notices);
}

/// Sets profiling up on `ctx`: a `ProfilerSetup` chunk and a notice, or a notice saying why not.
fn set_up_context(
    api: &Api,
    prof: &api::ProfApi,
    l: &mut Launches,
    ctx: *mut c_void,
    context: u32,
    notices: &mut Vec<String>,
) -> Option<Profiled> {
    let device = current_device();
    let metrics = CUPTI.prof.metrics.get().map(Vec::as_slice).unwrap_or(&[]);
    let target = Target {
        ctx,
        context,
        device,
    };
    match set_up(
        api,
        prof,
        target,
        metrics,
        &mut l.initialized,
        notices,
        rtrace_format::Replay::Kernel,
    ) {
        Ok((p, setup)) => {
            notices.push(format!(
                "{PROFILING_NOTICE} on for context {context} (device {}, {}): {} metrics, {} replay pass{}",
                setup.device,
                setup.chip,
                setup.metrics.len(),
                setup.passes,
                if setup.passes == 1 { "" } else { "es" }
            ));
            queue(
                ChunkKind::ProfilerSetup,
                rtrace_format::encode_value(&setup),
            );
            Some(p)
        }
        Err(e) => {
            notices.push(e);
            None
        }
    }
}

/// The program calls `cuptiProfilerInitialize` itself (it profiles with CUPTI's profiler API):
/// the GPU's counters are its own. rtrace's kernel profiling stops for good, before the
/// program's call goes on: every range profiler rtrace enabled is disabled (so the program's
/// own `cuptiRangeProfilerEnable` finds its context free), and a notice says why.
#[cfg_attr(test, allow(dead_code))]
pub(super) fn yield_to_program() {
    let was_on = CUPTI.prof.on.swap(false, Ordering::AcqRel);
    let was_application = CUPTI.prof.application.swap(false, Ordering::AcqRel);
    if !was_on && !was_application {
        return;
    }
    let mut released = Vec::new();
    if let Ok(mut guard) = CUPTI.prof.launches.lock() {
        if let Some(l) = guard.as_mut() {
            released.extend(l.contexts.iter_mut().filter_map(|(_, _, p)| p.take()));
        }
    }
    if let Ok(mut guard) = CUPTI.prof.ranges.lock() {
        if let Some(r) = guard.as_mut() {
            released.extend(r.contexts.iter_mut().filter_map(|c| c.profiled.take()));
        }
    }
    let prof = CUPTI
        .api
        .get()
        .and_then(|a| a.profiler.as_ref()?.as_ref().ok());
    if let Some(prof) = prof {
        for p in &released {
            let mut d = rtrace_cupti_abi::RangeProfilerDisable::new();
            d.range_profiler_object = p.range_object;
            api::call(prof.disable, &mut d);
            release_host(prof, p.host_object);
        }
    }
    CUPTI.notice(format!(
        "{PROFILING_NOTICE} off: the program uses CUPTI's profiler itself \
         (cuptiProfilerInitialize): rtrace leaves the GPU's counters to it ({} context{} \
         released)",
        released.len(),
        if released.len() == 1 { "" } else { "s" }
    ));
}

/// The times of a profiled launch's kernel record (CUPTI gives it none): `(start, end)`, once
/// per launch, for rtrace's `correlation`; `None` for a launch that was not profiled.
pub(super) fn take_profiled_times(correlation: u64) -> Option<(u64, u64)> {
    let mut times = CUPTI.prof.profiled.lock().ok()?;
    let i = times.iter().position(|t| t.0 == correlation)?;
    let (_, start, duration) = times.swap_remove(i);
    Some((start, start + duration.unwrap_or(0)))
}

/// The worker's drain: the queued setups and profiles, in order.
pub(super) fn drain_into(sink: &mut Sink) {
    let pending = match CUPTI.prof.pending.lock() {
        Ok(mut q) => std::mem::take(&mut *q),
        Err(_) => return,
    };
    for (kind, bytes) in pending {
        sink.chunk(kind, 0, 0, 0, &bytes);
    }
}
