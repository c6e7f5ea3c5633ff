//! Sampling set up on a context: enabled, with the stall reasons and period asked for, and
//! CUPTI's choices for the rest read back as a `PcSamplingConfig`.

use super::api::{
    disable, ConfigInfo, ConfigParams, CtxParams, NumStallParams, PcApi, SamplingData, StallParams,
    ATTR_COLLECTION_MODE, ATTR_HARDWARE_BUFFER_SIZE, ATTR_SAMPLING_DATA_BUFFER,
    ATTR_SAMPLING_PERIOD, ATTR_SCRATCH_BUFFER_SIZE, ATTR_STALL_REASON, COLLECTION_MODE_CONTINUOUS,
    STALL_NAME_BYTES,
};
use super::data::{Buffer, Sampled, BUFFER_PCS, CONFIG_BUFFER_PCS};
use crate::clock;
use crate::cupti::api::{describe, Api};
use crate::cupti::state::CUPTI;
use rtrace_format::PcSamplingConfig;
use std::ffi::{c_char, c_void};

/// Enables sampling on `ctx` and sets it up as configured.
pub(super) fn enable(
    api: &Api,
    pc: &PcApi,
    ctx: *mut c_void,
) -> Result<(Sampled, PcSamplingConfig), String> {
    let mut id = 0u32;
    // SAFETY: plain CUPTI query with a valid out-pointer.
    if unsafe { (api.context_id)(ctx, &mut id) } != 0 {
        id = 0;
    }
    let mut device = 0u32;
    if let Some(f) = pc.device_id {
        // SAFETY: as above.
        if unsafe { f(ctx, &mut device) } != 0 {
            device = 0;
        }
    }
    let mut p = CtxParams {
        size: std::mem::size_of::<CtxParams>(),
        priv_: std::ptr::null_mut(),
        ctx,
    };
    // SAFETY: CUPTI reads the parameters.
    let rc = unsafe { (pc.enable)(&mut p) };
    if rc != 0 {
        return Err(format!(
            "cuptiPCSamplingEnable on context {id}: {}{}",
            describe(api, rc),
            if rc == 7 || rc == 39 {
                " (another tool sampling it?)"
            } else {
                ""
            }
        ));
    }
    let fail = |what: &str, rc: i32| {
        disable(pc, ctx);
        Err(format!("{what} on context {id}: {}", describe(api, rc)))
    };
    let mut count = 0usize;
    let mut np = NumStallParams {
        size: std::mem::size_of::<NumStallParams>(),
        priv_: std::ptr::null_mut(),
        ctx,
        num: &mut count,
    };
    // SAFETY: CUPTI writes the count.
    let rc = unsafe { (pc.num_stall_reasons)(&mut np) };
    if rc != 0 {
        return fail("cuptiPCSamplingGetNumStallReasons", rc);
    }
    let count = count.min(1024);
    let mut indices = vec![0u32; count];
    let mut storage = vec![0 as c_char; count * STALL_NAME_BYTES];
    let mut names: Vec<*mut c_char> = (0..count)
        // SAFETY: within `storage`.
        .map(|i| unsafe { storage.as_mut_ptr().add(i * STALL_NAME_BYTES) })
        .collect();
    let mut sp = StallParams {
        size: std::mem::size_of::<StallParams>(),
        priv_: std::ptr::null_mut(),
        ctx,
        num: count,
        index: indices.as_mut_ptr(),
        names: names.as_mut_ptr(),
    };
    // SAFETY: CUPTI writes `count` indices and names of at most STALL_NAME_BYTES each.
    let rc = unsafe { (pc.stall_reasons)(&mut sp) };
    if rc != 0 {
        return fail("cuptiPCSamplingGetStallReasons", rc);
    }
    let all: Vec<(u32, String)> = (0..count)
        .map(|i| {
            let bytes = &storage[i * STALL_NAME_BYTES..(i + 1) * STALL_NAME_BYTES];
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            let name: Vec<u8> = bytes[..end].iter().map(|&b| b as u8).collect();
            (indices[i], String::from_utf8_lossy(&name).into_owned())
        })
        .collect();
    let cfg = &crate::state::config().pc_sampling;
    let (chosen, unknown) = choose_stalls(&all, &cfg.stalls);
    if !unknown.is_empty() {
        CUPTI.notice(format!(
            "{}: no stall reason named {} on context {id}; known: {}",
            rtrace_format::PC_SAMPLING_NOTICE,
            unknown.join(", "),
            all.iter()
                .map(|(_, n)| short_name(n))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if chosen.is_empty() {
        disable(pc, ctx);
        return Err(format!("no stall reason to sample on context {id}"));
    }
    let mut chosen_indices: Vec<u32> = chosen.iter().map(|(i, _)| *i).collect();
    let mut sampled = Sampled {
        ctx: ctx as usize,
        id,
        config_buf: Buffer::new(CONFIG_BUFFER_PCS, chosen.len()),
        read_buf: Buffer::new(BUFFER_PCS, chosen.len()),
    };
    let mut info = vec![
        ConfigInfo {
            kind: ATTR_STALL_REASON,
            status: 0,
            data: [
                chosen_indices.len() as u64,
                chosen_indices.as_mut_ptr() as u64,
                0,
            ],
        },
        ConfigInfo {
            kind: ATTR_SAMPLING_DATA_BUFFER,
            status: 0,
            data: [
                &mut *sampled.config_buf.data as *mut SamplingData as u64,
                0,
                0,
            ],
        },
        ConfigInfo {
            kind: ATTR_COLLECTION_MODE,
            status: 0,
            data: [COLLECTION_MODE_CONTINUOUS, 0, 0],
        },
    ];
    if let Some(period) = cfg.period_log2 {
        info.push(ConfigInfo {
            kind: ATTR_SAMPLING_PERIOD,
            status: 0,
            data: [u64::from(period), 0, 0],
        });
    }
    let mut cp = ConfigParams {
        size: std::mem::size_of::<ConfigParams>(),
        priv_: std::ptr::null_mut(),
        ctx,
        num_attributes: info.len(),
        info: info.as_mut_ptr(),
    };
    // SAFETY: CUPTI reads the attributes; the stall index array and the configuration buffer
    // outlive the call (the buffer lives in `sampled`, kept until sampling is disabled).
    let rc = unsafe { (pc.set_config)(&mut cp) };
    if rc != 0 {
        return fail("cuptiPCSamplingSetConfigurationAttribute", rc);
    }
    // What CUPTI chose for what was left at its defaults.
    let mut q = [
        ATTR_SAMPLING_PERIOD,
        ATTR_SCRATCH_BUFFER_SIZE,
        ATTR_HARDWARE_BUFFER_SIZE,
    ]
    .map(|kind| ConfigInfo {
        kind,
        status: 0,
        data: [0; 3],
    });
    let mut cp = ConfigParams {
        size: std::mem::size_of::<ConfigParams>(),
        priv_: std::ptr::null_mut(),
        ctx,
        num_attributes: q.len(),
        info: q.as_mut_ptr(),
    };
    // SAFETY: CUPTI writes the attributes' values.
    let got = unsafe { (pc.get_config)(&mut cp) } == 0;
    let config = PcSamplingConfig {
        context: id,
        device,
        time_ns: clock::now_ns(),
        // The period is a uint32_t, the sizes size_t, each first in the union.
        period_log2: if got {
            q[0].data[0] as u32
        } else {
            cfg.period_log2.unwrap_or(0)
        },
        scratch_bytes: if got { q[1].data[0] } else { 0 },
        hardware_bytes: if got { q[2].data[0] } else { 0 },
        stall_reasons: chosen,
    };
    Ok((sampled, config))
}

/// CUPTI's stall reason names without the common prefix: `long_scoreboard`, `selected`, ...
fn short_name(name: &str) -> &str {
    name.strip_prefix("smsp__pcsamp_warps_issue_stalled_")
        .unwrap_or(name)
}

/// The stall reasons `wanted` names (short names; a reason brings its `_not_issued` twin), or
/// all of them when `wanted` is empty; and the names that matched none.
fn choose_stalls(all: &[(u32, String)], wanted: &[String]) -> (Vec<(u32, String)>, Vec<String>) {
    if wanted.is_empty() {
        return (all.to_vec(), Vec::new());
    }
    let unknown = wanted
        .iter()
        .filter(|w| !all.iter().any(|(_, n)| short_name(n) == w.as_str()))
        .cloned()
        .collect();
    let chosen = all
        .iter()
        .filter(|(_, n)| {
            let s = short_name(n);
            let base = s.strip_suffix("_not_issued").unwrap_or(s);
            wanted.iter().any(|w| w == s || w == base)
        })
        .cloned()
        .collect();
    (chosen, unknown)
}
