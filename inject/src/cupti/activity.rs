//! The Activity API set up: rtrace's clock for CUPTI's timestamps, its buffer callbacks, and
//! the activity kinds the configuration asks for.

use super::api::{describe, Api, ATTR_ZEROED_OUT_ACTIVITY_BUFFER};
use super::buffers;
use super::layout;
use super::state::CUPTI;
use crate::clock;
use std::ffi::c_void;
use std::sync::atomic::Ordering;

/// CUPTI's timestamps: rtrace's clock.
extern "C" fn timestamp() -> u64 {
    clock::now_ns()
}

/// Starts collecting: the names of the kinds CUPTI enabled, or why none could be. A kind CUPTI
/// refuses is said in a notice and the rest stays on.
pub(super) fn start(api: &Api) -> Result<Vec<&'static str>, String> {
    let filtered = crate::capture::chooses_gpu_work();
    let _ = CUPTI
        .buffers
        .layout
        .set(super::fields::buffer_layout(api, filtered));
    buffers::prefill_pool();
    // SAFETY: registering a plain extern "C" callback with its documented signature.
    let rc = unsafe { (api.register_timestamp)(timestamp) };
    if rc != 0 {
        return Err(format!(
            "cuptiActivityRegisterTimestampCallback: {}",
            describe(api, rc)
        ));
    }
    // Every buffer rtrace hands CUPTI is zero already: CUPTI need not zero 4 MiB on the
    // program's thread each time it takes one. Without it, CUPTI zeroes them itself.
    if let Some(set) = api.set_attribute {
        let (mut size, mut on) = (1usize, 1u8);
        // SAFETY: a uint8_t attribute, with its size.
        let rc = unsafe {
            set(
                ATTR_ZEROED_OUT_ACTIVITY_BUFFER,
                &mut size,
                &mut on as *mut u8 as *mut c_void,
            )
        };
        CUPTI.buffers.zeroed.store(rc == 0, Ordering::Release);
    }
    // SAFETY: as above.
    let rc = unsafe { (api.register_callbacks)(buffers::request, buffers::complete) };
    if rc != 0 {
        return Err(format!(
            "cuptiActivityRegisterCallbacks: {} (another CUPTI client?)",
            describe(api, rc)
        ));
    }
    let want = crate::state::config().gpu_activity;
    // Source counters: with the context, stream, function, copy and memset kinds on, CUPTI's SASS
    // metrics counted nothing (tests/gpu/sassmetrics_probe.sh on an H100): no activity kind is
    // enabled, the modules and their images come through the resource callbacks alone.
    let counters = crate::state::config().source_counters;
    // What the configuration asks for; a kind CUPTI refuses is said in a notice and the rest
    // stays on.
    let mut kinds = Vec::new();
    for (on, kind, name) in [
        (
            want.kernel,
            layout::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
            "kernels",
        ),
        (
            want.memcpy,
            layout::CUPTI_ACTIVITY_KIND_MEMCPY,
            "memory copies",
        ),
        // CUPTI reports peer-to-peer copies as a kind of their own.
        (
            want.memcpy,
            layout::CUPTI_ACTIVITY_KIND_MEMCPY2,
            "peer copies",
        ),
        (want.memset, layout::CUPTI_ACTIVITY_KIND_MEMSET, "memsets"),
        (
            want.memory,
            layout::CUPTI_ACTIVITY_KIND_MEMORY2,
            "allocations",
        ),
        (
            want.sync,
            layout::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
            "synchronizations",
        ),
        (
            want.resources,
            layout::CUPTI_ACTIVITY_KIND_CONTEXT,
            "contexts",
        ),
        (
            want.resources,
            layout::CUPTI_ACTIVITY_KIND_STREAM,
            "streams",
        ),
        (
            want.resources,
            layout::CUPTI_ACTIVITY_KIND_FUNCTION,
            "functions",
        ),
    ] {
        if !on || counters {
            continue;
        }
        // SAFETY: plain CUPTI call.
        let rc = unsafe { (api.enable)(kind as i32) };
        if rc == 0 {
            CUPTI.share.our_kinds.fetch_or(1 << kind, Ordering::AcqRel);
            kinds.push(name);
        } else {
            CUPTI.notice(format!(
                "GPU activity without {name}: enabling them: {}",
                describe(api, rc)
            ));
        }
    }
    if kinds.is_empty() && !counters {
        return Err("CUPTI enabled none of the kinds asked for".into());
    }
    Ok(kinds)
}
