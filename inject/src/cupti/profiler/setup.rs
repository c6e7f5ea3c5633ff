//! Kernel profiling set up on one context: the device checked, the metrics the chip has
//! chosen, the configuration image built, the range profiler enabled and configured (auto
//! range, kernel replay, one range per pass, one nesting level).

use super::api::{call, meaning, ProfApi};
use crate::cupti::api::{describe, Api};
use rtrace_cupti_abi as abi;
use rtrace_format::{ProfilerSetup, Replay};
use std::ffi::{c_char, c_void, CStr, CString};

/// Application replay: the ranges one context's counter data image holds (a run's ranges past
/// it are not profiled; docs/configuration.md).
pub(super) const RANGE_CAPACITY: usize = 64;

/// The range profiler on one context, ready to profile launches.
pub(super) struct Profiled {
    /// CUPTI's context id.
    pub context: u32,
    pub range_object: *mut c_void,
    /// The host object the metrics are evaluated with.
    pub host_object: *mut c_void,
    /// The configuration image (kept alive: CUPTI was given it).
    #[allow(dead_code)]
    pub config: Vec<u8>,
    /// The counter data image, re-initialized before each launch.
    pub counter_data: Vec<u8>,
    /// The metrics, in value order (kept alive: `name_ptrs` point into them), and pointers to
    /// them for CUPTI.
    #[allow(dead_code)]
    pub names: Vec<CString>,
    pub name_ptrs: Vec<*const c_char>,
    /// The calls whose failure during a launch was said already (said once per context).
    pub said: Vec<&'static str>,
}

// SAFETY: the pointers are CUPTI's objects and rtrace's own buffers; the value is only used
// under the profiler's lock.
unsafe impl Send for Profiled {}

/// `call` of `name` failed with `rc`: a notice's text.
pub(super) fn failed(api: &Api, context: u32, name: &str, rc: u32) -> String {
    format!(
        "{} off for context {context}: {name}: {}: {}",
        rtrace_format::PROFILING_NOTICE,
        describe(api, rc as i32),
        meaning(rc)
    )
}

/// Runs `f` with `p`; `Err` with the notice's text when CUPTI fails.
fn check<P>(api: &Api, context: u32, name: &str, f: abi::Call<P>, p: &mut P) -> Result<(), String> {
    match call(f, p) {
        abi::SUCCESS => Ok(()),
        rc => Err(failed(api, context, name, rc)),
    }
}

/// A C string CUPTI returned, copied (empty for null).
fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: CUPTI returns NUL-terminated strings that live at least until its next call.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The fields of a device-support answer that are not supported, by name.
fn unsupported(p: &abi::DeviceSupported) -> Vec<&'static str> {
    let off = |level: u32| level == abi::SUPPORT_UNSUPPORTED || level == abi::SUPPORT_DISABLED;
    [
        (
            "architecture (compute capability 7.0 or later needed)",
            p.architecture,
        ),
        ("SLI", p.sli),
        ("vGPU", p.v_gpu),
        ("confidential computing", p.confidential_compute),
        ("CMP", p.cmp),
        ("WSL", p.wsl),
    ]
    .into_iter()
    .filter(|(_, level)| off(*level))
    .map(|(name, _)| name)
    .collect()
}

/// A host object for `chip` with `metrics` added; `Err` with CUPTI's result of the failed call.
fn host_object(
    prof: &ProfApi,
    chip: &CStr,
    availability: &[u8],
    metrics: &[*const c_char],
) -> Result<*mut c_void, (&'static str, u32)> {
    let mut init = abi::HostInitialize::new();
    init.profiler_type = abi::PROFILER_TYPE_RANGE_PROFILER;
    init.chip_name = chip.as_ptr();
    init.counter_availability_image = availability.as_ptr();
    let rc = call(prof.host_initialize, &mut init);
    if rc != abi::SUCCESS {
        return Err(("cuptiProfilerHostInitialize", rc));
    }
    let mut add = abi::HostConfigAddMetrics::new();
    add.host_object = init.host_object;
    add.metric_names = metrics.as_ptr();
    add.num_metrics = metrics.len();
    let rc = call(prof.add_metrics, &mut add);
    if rc != abi::SUCCESS {
        release_host(prof, init.host_object);
        return Err(("cuptiProfilerHostConfigAddMetrics", rc));
    }
    Ok(init.host_object)
}

pub(super) fn release_host(prof: &ProfApi, host_object: *mut c_void) {
    let mut p = abi::HostDeinitialize::new();
    p.host_object = host_object;
    call(prof.host_deinitialize, &mut p);
}

/// A context to set up: its handle, CUPTI's id for it, its device ordinal.
pub(super) struct Target {
    pub ctx: *mut c_void,
    pub context: u32,
    pub device: i32,
}

/// What [`configure`] built: the range profiler object, the configuration and counter data
/// images, and the passes.
struct Configured {
    object: *mut c_void,
    config: Vec<u8>,
    counter_data: Vec<u8>,
    passes: u32,
}

/// Sets profiling up on `target` for `metrics`, for `replay`: kernel replay configures auto
/// range at once; application replay sizes the counter data image for [`RANGE_CAPACITY`]
/// ranges and leaves the configuration to the run's first range (`range.rs`).
/// `initialized`: whether `cuptiProfilerInitialize` succeeded already in this process (it is
/// not reference-counted, so it is called once and never undone). Notices about metrics the
/// chip lacks go to `notices`. `Err`: the notice saying why profiling is off on the context.
pub(super) fn set_up(
    api: &Api,
    prof: &ProfApi,
    target: Target,
    metrics: &[String],
    initialized: &mut bool,
    notices: &mut Vec<String>,
    replay: Replay,
) -> Result<(Profiled, ProfilerSetup), String> {
    let Target {
        ctx,
        context,
        device,
    } = target;
    if !*initialized {
        let mut p = abi::ProfilerInitialize::new();
        check(
            api,
            context,
            "cuptiProfilerInitialize",
            prof.initialize,
            &mut p,
        )?;
        *initialized = true;
    }
    let mut p = abi::DeviceSupported::new();
    p.cu_device = device;
    p.api = abi::PROFILER_API_RANGE_PROFILING;
    check(
        api,
        context,
        "cuptiProfilerDeviceSupported",
        prof.device_supported,
        &mut p,
    )?;
    if p.is_supported != abi::SUPPORT_SUPPORTED {
        let fields = unsupported(&p);
        return Err(format!(
            "{} off for context {context}: device {device} does not support profiling{}",
            rtrace_format::PROFILING_NOTICE,
            if fields.is_empty() {
                String::new()
            } else {
                format!(" (unsupported: {})", fields.join(", "))
            }
        ));
    }
    let mut p = abi::DeviceGetChipName::new();
    p.device_index = device.max(0) as usize;
    check(
        api,
        context,
        "cuptiDeviceGetChipName",
        prof.chip_name,
        &mut p,
    )?;
    let chip_text = text(p.chip_name);
    let chip = CString::new(chip_text.clone()).unwrap_or_default();
    let mut p = abi::GetCounterAvailability::new();
    p.ctx = ctx;
    let name = "cuptiProfilerGetCounterAvailability";
    check(api, context, name, prof.counter_availability, &mut p)?;
    let mut availability = vec![0u8; p.counter_availability_image_size];
    p.counter_availability_image = availability.as_mut_ptr();
    check(api, context, name, prof.counter_availability, &mut p)?;

    // Each metric on a host object of its own first: a failed add spoils the object.
    let mut names = Vec::new();
    let mut dropped = Vec::new();
    for m in metrics {
        let Ok(c) = CString::new(m.as_str()) else {
            dropped.push(m.clone());
            continue;
        };
        match host_object(prof, &chip, &availability, &[c.as_ptr()]) {
            Ok(h) => {
                release_host(prof, h);
                names.push(c);
            }
            Err(("cuptiProfilerHostConfigAddMetrics", _)) => dropped.push(m.clone()),
            Err((call_name, rc)) => return Err(failed(api, context, call_name, rc)),
        }
    }
    if !dropped.is_empty() {
        notices.push(format!(
            "{} on context {context}: chip {chip_text} lacks {}: left out",
            rtrace_format::PROFILING_NOTICE,
            dropped.join(", ")
        ));
    }
    if names.is_empty() {
        return Err(format!(
            "{} off for context {context}: chip {chip_text} has none of the metrics asked for",
            rtrace_format::PROFILING_NOTICE
        ));
    }
    let name_ptrs: Vec<*const c_char> = names.iter().map(|c| c.as_ptr()).collect();
    let host = host_object(prof, &chip, &availability, &name_ptrs)
        .map_err(|(n, rc)| failed(api, context, n, rc))?;
    let built = configure(api, prof, ctx, context, host, &name_ptrs, replay);
    let Configured {
        object: range_object,
        config,
        counter_data,
        passes,
    } = match built {
        Ok(b) => b,
        Err(e) => {
            release_host(prof, host);
            return Err(e);
        }
    };
    let setup = ProfilerSetup {
        context,
        device: device.max(0) as u32,
        time_ns: crate::clock::now_ns(),
        chip: chip_text,
        metrics: names
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect(),
        passes,
        replay,
    };
    Ok((
        Profiled {
            context,
            range_object,
            host_object: host,
            config,
            counter_data,
            names,
            name_ptrs,
            said: Vec::new(),
        },
        setup,
    ))
}

/// The configuration image and its passes, the range profiler enabled on `ctx`, its counter
/// data image, and its configuration set.
fn configure(
    api: &Api,
    prof: &ProfApi,
    ctx: *mut c_void,
    context: u32,
    host: *mut c_void,
    names: &[*const c_char],
    replay: Replay,
) -> Result<Configured, String> {
    let mut p = abi::HostGetConfigImageSize::new();
    p.host_object = host;
    let name = "cuptiProfilerHostGetConfigImageSize";
    check(api, context, name, prof.config_image_size, &mut p)?;
    let mut config = vec![0u8; p.config_image_size];
    let mut p = abi::HostGetConfigImage::new();
    p.host_object = host;
    p.config_image_size = config.len();
    p.config_image = config.as_mut_ptr();
    check(
        api,
        context,
        "cuptiProfilerHostGetConfigImage",
        prof.config_image,
        &mut p,
    )?;
    let mut p = abi::HostGetNumOfPasses::new();
    p.config_image_size = config.len();
    p.config_image = config.as_mut_ptr();
    check(
        api,
        context,
        "cuptiProfilerHostGetNumOfPasses",
        prof.num_passes,
        &mut p,
    )?;
    let passes = p.num_of_passes as u32;
    let mut p = abi::RangeProfilerEnable::new();
    p.ctx = ctx;
    check(
        api,
        context,
        "cuptiRangeProfilerEnable",
        prof.enable,
        &mut p,
    )?;
    let object = p.range_profiler_object;
    let mut p = abi::RangeProfilerGetCounterDataSize::new();
    p.range_profiler_object = object;
    p.metric_names = names.as_ptr();
    p.num_metrics = names.len();
    let ranges = match replay {
        Replay::Kernel => 1,
        Replay::Application => RANGE_CAPACITY,
    };
    p.max_num_of_ranges = ranges;
    p.max_num_range_tree_nodes = ranges as u32;
    let name = "cuptiRangeProfilerGetCounterDataSize";
    check(api, context, name, prof.counter_data_size, &mut p)?;
    let mut counter_data = vec![0u8; p.counter_data_size];
    initialize_counter_data(api, prof, context, object, &mut counter_data)?;
    if replay == Replay::Application {
        return Ok(Configured {
            object,
            config,
            counter_data,
            passes,
        });
    }
    let mut p = abi::RangeProfilerSetConfig::new();
    p.range_profiler_object = object;
    p.config_size = config.len();
    p.config = config.as_ptr();
    p.counter_data_image_size = counter_data.len();
    p.counter_data_image = counter_data.as_mut_ptr();
    p.range = abi::AUTO_RANGE;
    p.replay_mode = abi::KERNEL_REPLAY;
    p.max_ranges_per_pass = 1;
    p.num_nesting_levels = 1;
    p.min_nesting_level = 1;
    p.pass_index = 0;
    p.target_nesting_level = 1;
    check(
        api,
        context,
        "cuptiRangeProfilerSetConfig",
        prof.set_config,
        &mut p,
    )?;
    Ok(Configured {
        object,
        config,
        counter_data,
        passes,
    })
}

/// (Re-)initializes a counter data image for `object`.
pub(super) fn initialize_counter_data(
    api: &Api,
    prof: &ProfApi,
    context: u32,
    object: *mut c_void,
    image: &mut [u8],
) -> Result<(), String> {
    let mut p = abi::RangeProfilerCounterDataImageInitialize::new();
    p.range_profiler_object = object;
    p.counter_data_size = image.len();
    p.counter_data = image.as_mut_ptr();
    let name = "cuptiRangeProfilerCounterDataImageInitialize";
    check(api, context, name, prof.counter_data_initialize, &mut p)
}
