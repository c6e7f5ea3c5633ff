//! GPU activity (kernels, memory copies, memsets, allocations and frees, host synchronizations,
//! and the contexts, streams, modules and functions they use) through CUPTI's Activity API,
//! loaded at run time. Opt-in (`RTRACE_GPU_ACTIVITY=1`): it adds 0.75–0.84 µs per launch on an
//! H200, most of it CUPTI's own (see docs/benchmarks.md). CUPTI 13.0 serves one activity
//! client per process: a program that is a CUPTI client itself (the PyTorch profiler) is
//! served as a second one by rtrace (`share.rs`).
//! Allocation and synchronization records are optional: if CUPTI refuses them, the rest stays
//! on and a notice says so.
//!
//! - Enabled right after the program's first successful `cuInit`, on that thread, as rtrace's
//!   own code (CUPTI's driver calls are neither recorded nor rerouted), or earlier, when the
//!   program itself calls CUPTI first. CUPTI timestamps are put
//!   on rtrace's clock (`cuptiActivityRegisterTimestampCallback` → `CLOCK_MONOTONIC`).
//! - CUPTI fills buffers from a small recycled pool and hands full ones back through
//!   `buffers::complete`, which only queues them. Every flush period the worker turns queued
//!   buffers into kernel/memcpy/memset/memory/sync/resource chunks ([`drain_into`]), and
//!   flushes CUPTI only if it handed back no buffer since the last period ([`flush_if_idle`]).
//! - Modules come from CUPTI's resource callbacks (`CUPTI_CBID_RESOURCE_MODULE_LOADED`,
//!   `..._MODULE_UNLOAD_STARTING`) on
//!   rtrace's subscriber, inside the loading call: CUPTI 13.0 refuses the MODULE activity kind
//!   (`CUPTI_ERROR_INVALID_KIND`); functions and contexts come as activity records.
//! - At exit, an `atexit` handler registered when CUPTI was enabled flushes CUPTI and converts
//!   everything while CUPTI is still alive (its destructor runs before rtrace's).
//! - Any failure leaves API tracing on and writes a notice saying why GPU activity is off.
//!
//! CUPTI's state is one value, `state::CUPTI`. The rooms, from the bottom: `api.rs` (the
//! library and its entry points), `state.rs` (the value), `records.rs` (activity records →
//! rtrace's), `share.rs` (the program's own CUPTI client), `buffers.rs` (the activity buffers),
//! `activity.rs` (the Activity API set up), `modules.rs` (devices and modules),
//! `pcsampling/` (the PC Sampling API), `profiler/` (kernel profiling), `source_counters/` (SASS metrics), `entry.rs` (their entry points looked up and called), `callbacks.rs` (the Callback API); here, start and end;
//! above, `exports.rs` (the CUPTI entry points the program calls).

/// CUPTI 13.0's record layouts and constants (generated from cupti_activity.h).
#[path = "../generated/cupti.rs"]
#[allow(dead_code, clippy::all)]
mod layout;

mod activity;
mod api;
mod buffers;
mod callbacks;
mod clockmap;
mod entry;
mod exports;
mod fields;
mod modules;
mod pcsampling;
mod profiler;
mod records;
mod share;
mod source_counters;
mod state;
#[cfg(test)]
mod tests;

pub use buffers::flush_if_idle;

use crate::thread::internal;

use crate::output::Sink;
use state::{CUPTI, DONE};
use std::sync::atomic::Ordering;

/// A status line for the trace (GPU activity on, or why it is off).
pub(crate) fn notice(msg: String) {
    CUPTI.notice(msg);
}

/// Enables GPU activity once, after the program's first successful `cuInit`.
pub fn after_cuinit() {
    if !crate::state::config().gpu_activity.any() {
        return;
    }
    CUPTI.enable.call_once(enable);
    // The devices, once the driver is up (GPU activity may have started before, when the
    // program called CUPTI first).
    if CUPTI.state.load(Ordering::Acquire) == state::ON {
        modules::read_devices();
    }
}

/// Takes CUPTI for rtrace now if its GPU activity is asked for and not yet on (the program
/// called CUPTI before its first `cuInit`), so that the program becomes the second client.
#[cfg_attr(test, allow(dead_code))]
fn take_early() {
    if crate::state::config().gpu_activity.any() {
        CUPTI.enable.call_once(enable);
    }
}

fn enable() {
    internal(enable_now);
}

/// GPU activity could not start: says why, for PC sampling too when it was asked for.
fn off(why: String) {
    profiler::activity_off(&format!("GPU activity is off: {why}"));
    source_counters::activity_off(&format!("GPU activity is off: {why}"));
    if crate::state::config().pc_sampling.on {
        notice(format!("{} off: {why}", rtrace_format::PC_SAMPLING_NOTICE));
    }
    notice(format!("{}: {why}", rtrace_format::GPU_ACTIVITY_OFF));
}

fn enable_now() {
    let api = match api::load() {
        Ok(api) => CUPTI.api.get_or_init(|| api),
        Err(e) => {
            return off(e);
        }
    };
    let mut kinds = match activity::start(api) {
        Ok(kinds) => kinds,
        Err(e) => return off(e),
    };
    CUPTI.start_here();
    // SAFETY: registers a plain extern "C" function.
    unsafe { libc::atexit(at_exit) };
    let want = crate::state::config().gpu_activity;
    // Modules come through the subscriber's resource callback.
    let subscribed = callbacks::subscribe(api, want);
    let mut module_error = None;
    let mut runtime = Some(Err("no CUPTI subscriber".to_string()));
    if let Ok(s) = &subscribed {
        runtime = s.runtime.clone();
        match &s.modules {
            Some(Ok(())) if want.resources => kinds.push("modules"),
            Some(Ok(())) => {}
            Some(Err(e)) => module_error = Some(e.clone()),
            None => {}
        }
    }
    if let Some(Err(e)) = &api.profiler {
        profiler::activity_off(e);
    }
    source_counters::configure(api);
    let last = kinds.pop().unwrap_or_default();
    let listed = if kinds.is_empty() {
        last.to_string()
    } else {
        format!("{} and {last}", kinds.join(", "))
    };
    notice(format!(
        "{}: {listed} through CUPTI",
        rtrace_format::GPU_ACTIVITY_ON
    ));
    match subscribed {
        Ok(s) => notice(format!(
            "GPU records carry rtrace correlation ids (CUPTI callbacks on {} driver functions)",
            s.functions
        )),
        Err(e) => notice(format!(
            "GPU records carry no rtrace correlation id{}: {e}",
            if want.resources {
                ", and no modules"
            } else {
                ""
            }
        )),
    }
    if let Some(e) = module_error {
        notice(format!("GPU activity without modules: {e}"));
    }
    match runtime {
        Some(Ok(())) => notice("runtime API calls recorded (CUPTI runtime callbacks)".into()),
        // Nothing is lost for want of CUPTI's route: libcudart's functions are rtrace's too.
        Some(Err(e)) => {
            crate::runtime_api::set_interposing(true);
            notice(format!(
                "runtime API calls recorded by interposing libcudart, not by CUPTI: {e}"
            ))
        }
        None if crate::state::config().runtime_api == crate::runtime_api::Route::Off => {
            notice(format!(
                "runtime API calls not recorded ({}=0)",
                rtrace_format::env::RUNTIME_API
            ))
        }
        None => {}
    }
}

/// Kernel profiling at start-up: resolves `RTRACE_METRICS`; the notices to write.
pub fn configure_profiling() -> Vec<String> {
    profiler::configure()
}

/// Whether kernel profiling or source counters are on: the two relaxed loads a launch
/// wrapper adds.
#[inline(always)]
pub fn profiling() -> bool {
    CUPTI.prof.on.load(Ordering::Relaxed) || CUPTI.sc.on.load(Ordering::Relaxed)
}

/// A recorded launch of kernel `f` while profiling or source counters are on: runs `run` once
/// (profiled or counted if chosen) and returns its result.
#[cold]
pub fn profiled_launch(
    correlation: u64,
    f: *mut std::ffi::c_void,
    run: impl FnOnce() -> u32,
) -> u32 {
    if CUPTI.sc.on.load(Ordering::Relaxed) {
        return source_counters::launch(correlation, f, run);
    }
    profiler::launch(correlation, f, run)
}

/// A capture range begins on the calling thread (`name`: the NVTX range's; `None`:
/// `cuProfilerStart`): in application replay, its profiling starts.
pub fn capture_range_begin(name: Option<&str>) {
    profiler::range::begin(name);
}

/// The capture range ends: in application replay, its profiling ends.
pub fn capture_range_end() {
    profiler::range::end();
}

/// The run ends (exit): in application replay, the run's profiling ends (`Stop`, the image
/// saved; in the last pass, the ranges' profiles).
pub fn finish_profiling() {
    profiler::range::finish_run();
}

/// After a recorded `cuGraphLaunch`: graph kernels are not profiled (said once).
pub fn graph_launched() {
    profiler::graph_launched();
}

/// Asks CUPTI to hand over its buffers (`force`: also records still being written).
pub fn flush(force: bool) {
    CUPTI.flush(force);
}

/// Reads every sampled context one last time and disables PC sampling (exit).
pub fn finish_pc_sampling() {
    if !CUPTI.on_here() {
        return;
    }
    if let Some(api) = CUPTI.api.get() {
        internal(|| pcsampling::finish(api));
    }
}

/// What makes a CUPTI buffer of so many bytes in the trace file, with the layout a reader
/// needs before the first one (None: the file cannot hold one now).
pub type RegionSource = fn(
    u64,
    &rtrace_format::gpu_region::GpuBufferLayout,
) -> Option<&'static crate::region::GpuRegion>;

/// Sets what makes CUPTI's buffers in the trace file (once, at start-up).
pub fn set_region_source(source: RegionSource) {
    let _ = CUPTI.buffers.region_source.set(source);
}

/// Sets what runs when CUPTI is about to go away (once, at start-up).
pub fn set_exit_sequence(sequence: fn()) {
    let _ = CUPTI.exit_sequence.set(sequence);
}

extern "C" fn at_exit() {
    if !CUPTI.in_enabling_process() {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        if let Some(sequence) = CUPTI.exit_sequence.get() {
            sequence();
        }
        CUPTI.state.store(DONE, Ordering::Release);
    });
}

/// Converts the queued CUPTI buffers into GPU chunks in `sink`, and writes pending notices.
/// Consumer only.
pub fn drain_into(sink: &mut Sink) {
    // A forked child's copies of the parent's queued buffers and notices are not its own.
    if CUPTI.enabled_by.load(Ordering::Acquire) != 0 && !CUPTI.in_enabling_process() {
        return;
    }
    if let Ok(mut n) = CUPTI.notices.lock() {
        for msg in n.drain(..) {
            sink.notice(&msg);
        }
    }
    profiler::drain_into(sink);
    modules::drain_into(sink);
    source_counters::drain_into(sink);
    buffers::keep_spare(sink);
    buffers::learn_names(sink);
    let Some(full) = buffers::take_full() else {
        return;
    };
    let Some(api) = CUPTI.api.get() else {
        sink.write_gpu_batch();
        return;
    };
    buffers::convert_full(api, full, sink);
    sink.write_gpu_batch();
    buffers::reuse_written(sink);
    // After the module images, which the samples name.
    pcsampling::drain_into(api, sink);
    buffers::report_dropped(sink);
}
