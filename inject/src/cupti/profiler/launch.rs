//! One chosen launch profiled on a context already set up: the counter data image reset,
//! the range profiler started, the launch (which CUPTI replays once per pass), stopped,
//! decoded, and the metrics evaluated for its one range.

use super::api::{call, ProfApi};
use super::setup::{failed, initialize_counter_data, Profiled};
use crate::capture::KernelFilter;
use crate::cupti::api::Api;
use rtrace_cupti_abi as abi;
use std::ffi::{c_char, CStr};

/// What the profiled launches share, under the state's `launches`.
pub(crate) struct Launches {
    /// The kernel controls; `None`: every kernel is chosen.
    pub(super) filter: Option<KernelFilter>,
    /// Launches chosen so far.
    pub(super) chosen: u64,
    /// Contexts seen by a chosen launch: their handle, CUPTI's id (a handle can be reused by
    /// a later context; the id is not), and their profiler (`None`: off there).
    pub(super) contexts: Vec<(usize, u32, Option<Profiled>)>,
    /// `cuptiProfilerInitialize` succeeded (called once per process, never undone).
    pub(super) initialized: bool,
}

/// What profiling one launch measured.
pub(super) struct Measured {
    /// CUPTI's name of the range.
    pub range: String,
    /// The setup's metrics' values (NaN where one could not be evaluated).
    pub values: Vec<f64>,
    /// The counter data image, decoded.
    pub counter_data: Vec<u8>,
}

/// A failed call during a launch: said once per context.
fn say(api: &Api, p: &mut Profiled, name: &'static str, rc: u32, notices: &mut Vec<String>) {
    if !p.said.contains(&name) {
        p.said.push(name);
        notices.push(format!(
            "{}: a launch's profile is lost (said once per context)",
            failed(api, p.context, name, rc).replacen(" off for", " failed for", 1)
        ));
    }
}

/// Profiles the launch `run` (called exactly once, its result returned unchanged) on `p`.
/// `None` when CUPTI failed before the launch (it then ran unprofiled) or after it.
pub(super) fn profile(
    api: &Api,
    prof: &ProfApi,
    p: &mut Profiled,
    run: impl FnOnce() -> u32,
    notices: &mut Vec<String>,
) -> (u32, Option<Measured>) {
    let object = p.range_object;
    if let Err(e) = initialize_counter_data(api, prof, p.context, object, &mut p.counter_data) {
        let name = "cuptiRangeProfilerCounterDataImageInitialize";
        if !p.said.contains(&name) {
            p.said.push(name);
            notices.push(e);
        }
        return (run(), None);
    }
    let mut s = abi::RangeProfilerStart::new();
    s.range_profiler_object = object;
    let rc = call(prof.start, &mut s);
    if rc != abi::SUCCESS {
        say(api, p, "cuptiRangeProfilerStart", rc, notices);
        return (run(), None);
    }
    let result = run();
    let mut s = abi::RangeProfilerStop::new();
    s.range_profiler_object = object;
    let rc = call(prof.stop, &mut s);
    if rc != abi::SUCCESS {
        say(api, p, "cuptiRangeProfilerStop", rc, notices);
        return (result, None);
    }
    let mut d = abi::RangeProfilerDecodeData::new();
    d.range_profiler_object = object;
    let rc = call(prof.decode, &mut d);
    if rc != abi::SUCCESS {
        say(api, p, "cuptiRangeProfilerDecodeData", rc, notices);
        return (result, None);
    }
    if d.num_of_range_dropped > 0 {
        notices.push(format!(
            "{}: context {}: CUPTI dropped {} range(s) of a profiled launch",
            rtrace_format::PROFILING_NOTICE,
            p.context,
            d.num_of_range_dropped
        ));
    }
    let mut info = abi::RangeProfilerGetCounterDataInfo::new();
    info.counter_data_image = p.counter_data.as_ptr();
    info.counter_data_image_size = p.counter_data.len();
    let rc = call(prof.counter_data_info, &mut info);
    if rc != abi::SUCCESS {
        say(api, p, "cuptiRangeProfilerGetCounterDataInfo", rc, notices);
        return (result, None);
    }
    if info.num_total_ranges == 0 {
        notices.push(format!(
            "{}: context {}: a profiled launch left no range in the counter data",
            rtrace_format::PROFILING_NOTICE,
            p.context
        ));
        return (result, None);
    }
    let mut r = abi::RangeProfilerCounterDataGetRangeInfo::new();
    r.counter_data_image = p.counter_data.as_ptr();
    r.counter_data_image_size = p.counter_data.len();
    r.range_index = 0;
    r.range_delimiter = c"/".as_ptr();
    let range = match call(prof.range_info, &mut r) {
        abi::SUCCESS if !r.range_name.is_null() => {
            // SAFETY: CUPTI returned a NUL-terminated string.
            unsafe { CStr::from_ptr(r.range_name) }
                .to_string_lossy()
                .into_owned()
        }
        _ => String::new(),
    };
    let values = evaluate(prof, p, 0);
    (
        result,
        Some(Measured {
            range,
            values,
            counter_data: p.counter_data.clone(),
        }),
    )
}

/// The metrics' values for range `index` of `p`'s counter data: all at once, else one by one
/// with NaN where one fails.
pub(super) fn evaluate(prof: &ProfApi, p: &Profiled, index: usize) -> Vec<f64> {
    let one_call = |names: &[*const c_char], out: &mut [f64]| -> bool {
        let mut e = abi::HostEvaluateToGpuValues::new();
        e.host_object = p.host_object;
        e.counter_data_image = p.counter_data.as_ptr();
        e.counter_data_image_size = p.counter_data.len();
        e.range_index = index;
        e.metric_names = names.as_ptr();
        e.num_metrics = names.len();
        e.metric_values = out.as_mut_ptr();
        call(prof.evaluate, &mut e) == abi::SUCCESS
    };
    let mut values = vec![f64::NAN; p.name_ptrs.len()];
    if one_call(&p.name_ptrs, &mut values) {
        return values;
    }
    for (i, name) in p.name_ptrs.iter().enumerate() {
        let mut v = [f64::NAN];
        values[i] = if one_call(std::slice::from_ref(name), &mut v) {
            v[0]
        } else {
            f64::NAN
        };
    }
    values
}
