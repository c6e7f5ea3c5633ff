//! Source counters through CUPTI's SASS Metric API (`cupti_sass_metrics.h`), opt-in
//! (`RTRACE_SOURCE_COUNTERS=1`): per SASS instruction of each kernel launch the kernel controls
//! choose, the counters of [`rtrace_format::COUNTERS`] (Nsight Compute's Source page).
//!
//! - Configured when GPU activity starts ([`configure`]): refused beside PC sampling, kernel
//!   profiling and kernel activity records (CUPTI patches the code: a mode of its own;
//!   [`rtrace_format::source_counters_activity_conflict`]), else the kernel controls are built
//!   into a [`Chooser`] and the launch wrappers' flag is set.
//! - A launch wrapper with the flag set calls [`launch`]: the chooser answers without a lock or
//!   an allocation for a launch it leaves out (`choose.rs`); a chosen one is collected under
//!   the state's lock (`collect.rs`): its context's device configured on first use (a
//!   `SourceCounterSetup` chunk and a notice, or a notice saying why not), then enable,
//!   launch, flush, disable, into a `SourceCounterLaunch` chunk queued for the worker.
//! - The launch runs exactly once and its result is returned unchanged whatever CUPTI does;
//!   a panic in rtrace's part is caught.
//! - Modules and their images come with GPU activity's resources, which source counters turn
//!   on: the counters name code by cubin CRC, function and offset, joined to the images.
//!
//! Rooms: `api.rs` (entry points, the driver's synchronization), `choose.rs` (which launches),
//! `collect.rs` (one launch); here, the state, start-up, the launch and the worker's drain.

pub(super) mod api;
mod choose;
mod collect;
pub(super) mod state;

use super::api::Api;
use super::state::CUPTI;
use crate::output::Sink;
use crate::thread::internal;
use choose::Chooser;
use collect::{collect, Collector, Output};
use rtrace_format::SOURCE_COUNTERS_NOTICE;
use std::ffi::c_void;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;

/// `CUDA_ERROR_UNKNOWN`: what a launch returns had it been lost (it cannot be: the real call
/// runs exactly once, and a C function does not unwind).
const CUDA_ERROR_UNKNOWN: u32 = 999;

/// When GPU activity has started with `api`: turns source counters on if asked for and
/// possible; the notices say what was done.
pub(super) fn configure(api: &Api) {
    let cfg = crate::state::config();
    if !cfg.source_counters {
        return;
    }
    let off = |why: &str| CUPTI.notice(format!("{SOURCE_COUNTERS_NOTICE} off: {why}"));
    if cfg.pc_sampling.on {
        return off(&format!(
            "PC sampling is on: {}",
            rtrace_format::SOURCE_COUNTERS_EXCLUSIVE
        ));
    }
    if cfg.metrics.is_some() {
        return off(&format!(
            "kernel profiling is on: {}",
            rtrace_format::SOURCE_COUNTERS_EXCLUSIVE
        ));
    }
    if let Some(why) = rtrace_format::source_counters_activity_conflict(&cfg.gpu_activity) {
        return off(why);
    }
    match &api.sass {
        Some(Ok(_)) => {}
        Some(Err(e)) => return off(e),
        None => return off("CUPTI's SASS Metric API was not loaded"),
    }
    let mut error = None;
    let filter = crate::capture::KernelFilter::from_config(&mut error);
    if let Some(e) = error {
        return off(&e);
    }
    let _ = CUPTI.sc.chooser.set(Chooser::new(filter));
    if let Ok(mut c) = CUPTI.sc.collector.lock() {
        *c = Some(Collector::default());
    }
    CUPTI.sc.on.store(true, Ordering::Release);
    let which = crate::capture::describe_kernels(&cfg.capture)
        .unwrap_or_else(|| "every kernel".to_string());
    CUPTI.notice(format!(
        "{SOURCE_COUNTERS_NOTICE} on: CUPTI's SASS metrics, for {which} (each chosen launch serialized; kernels in CUDA graphs are not counted)"
    ));
}

/// GPU activity could not start: source counters, which need its CUPTI, are off.
pub(super) fn activity_off(why: &str) {
    if crate::state::config().source_counters {
        CUPTI.notice(format!("{SOURCE_COUNTERS_NOTICE} off: {why}"));
    }
}

/// A recorded kernel launch of function handle `f` (its API record's `correlation`) while
/// source counters are on: runs `run` exactly once, counted if the kernel controls choose it,
/// and returns its result.
pub(super) fn launch(correlation: u64, f: *mut c_void, run: impl FnOnce() -> u32) -> u32 {
    let Some(chooser) = CUPTI.sc.chooser.get() else {
        return run();
    };
    if !chooser.choose(f as usize, || {
        internal(|| super::profiler::driver::function_name(f)).unwrap_or_default()
    }) {
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
    let (Some(api), ctx) = (CUPTI.api.get(), super::profiler::driver::current_context()) else {
        run();
        return;
    };
    let Some(Ok(sass)) = &api.sass else {
        run();
        return;
    };
    if ctx.is_null() {
        run();
        return;
    }
    let Ok(mut guard) = CUPTI.sc.collector.lock() else {
        run();
        return;
    };
    let Some(c) = guard.as_mut() else {
        drop(guard);
        run();
        return;
    };
    let device = super::profiler::driver::current_device();
    let name = super::profiler::driver::function_name(f).unwrap_or_default();
    let mut out = Output::default();
    collect(api, sass, c, correlation, ctx, device, name, run, &mut out);
    drop(guard);
    if let Ok(mut q) = CUPTI.sc.pending.lock() {
        q.append(&mut out.chunks);
    }
    for n in out.notices {
        CUPTI.notice(n);
    }
}

/// The worker's drain: the queued chunks into `sink`.
pub(super) fn drain_into(sink: &mut Sink) {
    let pending = match CUPTI.sc.pending.lock() {
        Ok(mut q) if !q.is_empty() => std::mem::take(&mut *q),
        _ => return,
    };
    for (kind, bytes) in pending {
        sink.chunk(kind, 0, 0, 0, &bytes);
    }
}
