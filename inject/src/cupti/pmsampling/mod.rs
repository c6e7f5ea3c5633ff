//! GPU metrics over time through CUPTI's PM Sampling API (`cupti_pmsampling.h`), opt-in
//! (`RTRACE_GPU_METRICS`, a rate in Hz). Per device, not per context: CUPTI samples the whole
//! GPU, one client at a time.
//!
//! - A device is set up in CUPTI's context-created callback for its first context (on the
//!   creating thread): the metrics that fit one pass, `Enable`, `SetConfig` (a GPU time
//!   interval of 1e9 / rate ns, a 64 MiB hardware buffer), `Start`; a `GpuMetricsSetup` chunk.
//! - The worker decodes every sampled device each drain: images of 64 samples until CUPTI
//!   has no more records, each completed sample's times put on the trace's clock (CUPTI's are
//!   CLOCK_REALTIME: tests/gpu/pmsampling_probe.cu) and its metrics evaluated in this process
//!   (a host object for the chip); `GpuMetricSamples` chunks, the first image kept with them.
//! - Sampling stops (`Stop`, the last decode, `Disable`) when the device's last context is
//!   about to be destroyed, and at exit.
//! - Nothing here runs on the program's launch path. A device CUPTI refuses (no permission,
//!   counters held by another tool, unsupported) is said in a notice and not tried again.
//!
//! Rooms: `api.rs` (the entry points), `device.rs` (one device's set-up, decodes and end);
//! here, the state, the callbacks and the worker's part.

pub(crate) mod api;
pub(super) mod device;

use super::api::Api;
use super::clockmap;
use super::state::CUPTI;
use crate::output::Sink;
use crate::thread::internal;
use api::{device_of, PmApi};
use device::PmState;
use rtrace_format::{encode_value, ChunkKind, GPU_METRICS_NOTICE};
use std::ffi::c_void;

fn pm_api(api: &Api) -> Option<&PmApi> {
    api.pm_sampling.as_ref().and_then(|r| r.as_ref().ok())
}

/// CUPTI's sample times (CLOCK_REALTIME, ns: measured on the H100 with no timestamp callback)
/// on the trace's clock, from a pair of readings of both taken now (a drain lasts
/// milliseconds: their rates agree to far better than a sample). A time nearer to the trace's
/// clock than to CLOCK_REALTIME is already on it (were CUPTI to time samples with the
/// timestamp callback GPU activity registers): kept as it is. The two clocks are decades
/// apart, a sample at most seconds old.
fn clock_map() -> impl Fn(u64) -> u64 {
    let (real, ours) = clockmap::read_pair(
        || crate::sys::clock_ns(libc::CLOCK_REALTIME),
        crate::clock::now_ns,
    );
    move |t| to_ours(t, real, ours)
}

/// `t` on the trace's clock, given `real` and `ours` read together (see [`clock_map`]).
fn to_ours(t: u64, real: u64, ours: u64) -> u64 {
    if t.abs_diff(ours) < t.abs_diff(real) {
        return t;
    }
    (t as i128 - real as i128 + ours as i128).max(0) as u64
}

/// Context created (CUPTI's resource callback, on the creating thread): its device's sampling
/// starts with its first context.
pub(super) fn on_context_created(api: &Api, ctx: *mut c_void) {
    let pm = match &api.pm_sampling {
        Some(Ok(pm)) => pm,
        Some(Err(e)) => return CUPTI.notice(format!("{GPU_METRICS_NOTICE} off: {e}")),
        None => return,
    };
    let Some(hz) = crate::state::config().gpu_metrics else {
        return;
    };
    internal(|| {
        let device = match device_of(pm, ctx) {
            Ok(d) => d,
            Err(rc) => {
                return CUPTI.notice(format!(
                    "{GPU_METRICS_NOTICE} off for a context: cuptiGetDeviceId: {}",
                    super::api::describe(api, rc as i32)
                ))
            }
        };
        let Ok(mut g) = CUPTI.pm.lock() else { return };
        let st = g.get_or_insert_with(PmState::default);
        if let Some(s) = st.devices.iter_mut().find(|s| s.device == device) {
            s.contexts += 1;
            return;
        }
        if st.off.contains(&device) {
            return;
        }
        match device::set_up(api, pm, device, hz, &mut st.initialized) {
            Ok((sampled, setup, refused)) => {
                CUPTI.notice(format!(
                    "{GPU_METRICS_NOTICE} on device {device}: {}, every {} ns, {} metrics{}",
                    setup.chip,
                    setup.interval,
                    setup.metrics.len(),
                    refused.map_or(String::new(), |r| format!(" ({r})"))
                ));
                st.pending
                    .push((ChunkKind::GpuMetricsSetup, encode_value(&setup)));
                st.devices.push(sampled);
            }
            Err(e) => {
                st.off.push(device);
                CUPTI.notice(e);
            }
        }
    });
}

/// A context about to be destroyed (callback): with its device's last context, sampling there
/// ends.
pub(super) fn on_context_destroying(api: &Api, ctx: *mut c_void) {
    let Some(pm) = pm_api(api) else { return };
    let Ok(device) = device_of(pm, ctx) else {
        return;
    };
    let Ok(mut g) = CUPTI.pm.lock() else { return };
    let Some(st) = g.as_mut() else { return };
    let Some(i) = st.devices.iter().position(|s| s.device == device) else {
        return;
    };
    st.devices[i].contexts = st.devices[i].contexts.saturating_sub(1);
    if st.devices[i].contexts > 0 {
        return;
    }
    let s = st.devices.swap_remove(i);
    let (mut out, mut notices) = (Vec::new(), Vec::new());
    internal(|| device::end(api, pm, s, &clock_map(), &mut out, &mut notices));
    st.queue(out);
    notices.into_iter().for_each(|n| CUPTI.notice(n));
}

/// At exit: every device still sampled is stopped, decoded one last time and disabled.
pub(super) fn finish(api: &Api) {
    let Some(pm) = pm_api(api) else { return };
    let Ok(mut g) = CUPTI.pm.lock() else { return };
    let Some(st) = g.as_mut() else { return };
    let (mut out, mut notices) = (Vec::new(), Vec::new());
    let map = clock_map();
    for s in std::mem::take(&mut st.devices) {
        device::end(api, pm, s, &map, &mut out, &mut notices);
    }
    st.queue(out);
    notices.into_iter().for_each(|n| CUPTI.notice(n));
}

/// The worker's part: every sampled device decoded, and what is queued written into `sink`.
pub(super) fn drain_into(api: &Api, sink: &mut Sink) {
    let Ok(mut g) = CUPTI.pm.lock() else { return };
    let Some(st) = g.as_mut() else { return };
    if let Some(pm) = pm_api(api) {
        let (mut out, mut notices) = (Vec::new(), Vec::new());
        let map = clock_map();
        for s in st.devices.iter_mut() {
            device::decode(api, pm, s, &map, &mut out, &mut notices);
        }
        st.queue(out);
        notices.iter().for_each(|n| sink.notice(n));
    }
    for (kind, bytes) in st.pending.drain(..) {
        sink.chunk(kind, 0, 0, 0, &bytes);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sample_times_are_put_on_the_traces_clock_once() {
        // CLOCK_REALTIME now 1.8e18, the trace's clock 5e9 (CLOCK_MONOTONIC-like).
        let (real, ours) = (1_795_596_004_227_443_970, 5_000_000_000);
        assert_eq!(
            super::to_ours(real - 2_000_000, real, ours),
            ours - 2_000_000
        );
        assert_eq!(super::to_ours(real + 10, real, ours), ours + 10);
        // Already on the trace's clock: as it is.
        assert_eq!(super::to_ours(ours - 7, real, ours), ours - 7);
    }
}
