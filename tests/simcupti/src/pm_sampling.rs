//! The PM Sampling API (`cupti_pmsampling.h`, CUDA 13.0) and `cuptiGetDeviceId`, simulated by
//! documented rules (README.md, "PM sampling"):
//!
//! - One PM sampling object per device (`Enable` again: `INVALID_OPERATION`); `SIMCUPTI_PROFILER`
//!   refuses `Enable` as it refuses the range profiler (`privileges`, `busy`, `unsupported`).
//! - The configuration image is the profiler host's (`SetConfig` takes its metrics; more than
//!   one pass: `NOT_SUPPORTED`). The interval is in ns (time trigger) or taken as ns (SYSCLK).
//! - Samples on CLOCK_REALTIME, as CUPTI's: at `Start` (time T0), sample 0 spans from `Enable`
//!   or the last `Stop` to T0 (the stale sample real CUPTI gives); sample k ≥ 1 spans
//!   [T0 + (k-1)·I, T0 + k·I] and is complete once its end has passed (before `Stop`'s time
//!   once stopped). Samples are numbered on the device from 0 across starts.
//! - `DecodeData` appends complete samples to the image (a range each: name `START:END`,
//!   subject `pm DEVICE INDEX`, duration END − START) until it is full (`COUNTER_DATA_FULL`)
//!   or none is left (`END_OF_RECORDS`); no overflow. As CUPTI 13.0 on an H200: the complete
//!   samples a full image left behind are lost, and the next decode begins with one sample
//!   whose times are both 0. The profiler host evaluates them by its rules
//!   (`profiler::value`).

#![allow(clippy::missing_safety_doc, non_snake_case)]

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::Mutex;

use rtrace_cupti_abi as abi;

use crate::api::call;
use crate::layout::*;
use crate::profiler::{self, Range};
use crate::profiler_host::names;
use crate::profiling::{knob, sized, Knob};
use crate::state;

/// Handles of PM sampling objects: this base plus the device ordinal.
const HANDLE_BASE: usize = 0x5e00_0000;

struct Object {
    metrics: Vec<String>,
    interval: u64,
    /// Realtime of `Enable` or the last `Stop`: where the next stale sample starts.
    since: u64,
    /// Realtime of the last `Start`, and of `Stop` once stopped.
    start: Option<u64>,
    stop: Option<u64>,
    /// The next sample of this start to hand out (0: the stale one).
    k: u64,
    /// Samples handed out on the device.
    index: u64,
    /// The last decode filled its image: the next one begins with a sample with no times.
    untimed_next: bool,
}

static OBJECTS: Mutex<BTreeMap<u32, Object>> = Mutex::new(BTreeMap::new());

fn device_of(handle: *mut c_void) -> Option<u32> {
    (handle as usize)
        .checked_sub(HANDLE_BASE)
        .and_then(|d| u32::try_from(d).ok())
}

fn with_object<R>(
    handle: *mut c_void,
    f: impl FnOnce(&mut Object) -> Result<R, u32>,
) -> Result<R, u32> {
    let d = device_of(handle).ok_or(CUPTI_ERROR_INVALID_PARAMETER)?;
    let mut g = OBJECTS.lock().map_err(|_| CUPTI_ERROR_UNKNOWN)?;
    g.get_mut(&d)
        .ok_or(CUPTI_ERROR_INVALID_OPERATION)
        .and_then(f)
}

fn result(r: Result<(), u32>) -> u32 {
    r.err().unwrap_or(CUPTI_SUCCESS)
}

/// The device of a context: simcuda's `cuCtxGetDevice` with the context pushed.
#[no_mangle]
pub unsafe extern "C" fn cuptiGetDeviceId(context: *mut c_void, deviceId: *mut u32) -> u32 {
    call(|| {
        if deviceId.is_null() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        type CtxFn = unsafe extern "C" fn(*mut c_void) -> i32;
        type PopFn = unsafe extern "C" fn(*mut *mut c_void) -> i32;
        type DevFn = unsafe extern "C" fn(*mut i32) -> i32;
        // SAFETY: dlopen/dlsym with valid C strings; simcuda's exports have these signatures.
        unsafe {
            let h = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
            if h.is_null() {
                return CUPTI_ERROR_NOT_INITIALIZED;
            }
            let (push, pop, get) = (
                libc::dlsym(h, c"cuCtxPushCurrent_v2".as_ptr()),
                libc::dlsym(h, c"cuCtxPopCurrent_v2".as_ptr()),
                libc::dlsym(h, c"cuCtxGetDevice".as_ptr()),
            );
            if push.is_null() || pop.is_null() || get.is_null() {
                return CUPTI_ERROR_NOT_INITIALIZED;
            }
            let push = std::mem::transmute::<*mut c_void, CtxFn>(push);
            let pop = std::mem::transmute::<*mut c_void, PopFn>(pop);
            let get = std::mem::transmute::<*mut c_void, DevFn>(get);
            if !context.is_null() && push(context) != 0 {
                return CUPTI_ERROR_INVALID_CONTEXT;
            }
            let mut d = 0i32;
            let rc = get(&mut d);
            if !context.is_null() {
                let mut old = std::ptr::null_mut();
                pop(&mut old);
            }
            if rc != 0 {
                return CUPTI_ERROR_INVALID_CONTEXT;
            }
            *deviceId = d as u32;
        }
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiPmSamplingGetCounterAvailability(
    p: *mut abi::PmSamplingGetCounterAvailability,
) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`; the client's buffer of the size it gives.
        unsafe {
            if !sized(p, abi::PmSamplingGetCounterAvailability::SIZE) {
                return CUPTI_ERROR_INVALID_PARAMETER;
            }
            let Some(sim) = state::sim() else {
                return CUPTI_ERROR_NOT_INITIALIZED;
            };
            if (*p).device_index >= sim.device_count().max(0) as usize {
                return CUPTI_ERROR_INVALID_DEVICE;
            }
            let img = profiler::availability_image(profiler::DEVICE_CHIP);
            if (*p).counter_availability_image.is_null() {
                (*p).counter_availability_image_size = img.len();
                return CUPTI_SUCCESS;
            }
            if (*p).counter_availability_image_size < img.len() {
                return CUPTI_ERROR_INVALID_PARAMETER;
            }
            std::ptr::copy_nonoverlapping(img.as_ptr(), (*p).counter_availability_image, img.len());
        }
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiPmSamplingEnable(p: *mut abi::PmSamplingEnable) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::PmSamplingEnable::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        match knob() {
            Knob::Privileges => return CUPTI_ERROR_INSUFFICIENT_PRIVILEGES,
            Knob::Busy => return CUPTI_ERROR_HARDWARE_BUSY,
            Knob::Unsupported | Knob::Mps => return CUPTI_ERROR_NOT_SUPPORTED,
            Knob::Works | Knob::Once => {}
        }
        let Some(sim) = state::sim() else {
            return CUPTI_ERROR_NOT_INITIALIZED;
        };
        // SAFETY: as above.
        let d = unsafe { (*p).device_index };
        if d >= sim.device_count().max(0) as usize {
            return CUPTI_ERROR_INVALID_DEVICE;
        }
        let Ok(mut g) = OBJECTS.lock() else {
            return CUPTI_ERROR_UNKNOWN;
        };
        if g.contains_key(&(d as u32)) {
            return CUPTI_ERROR_INVALID_OPERATION;
        }
        g.insert(
            d as u32,
            Object {
                metrics: Vec::new(),
                interval: 0,
                since: state::realtime_ns(),
                start: None,
                stop: None,
                k: 0,
                index: 0,
                untimed_next: false,
            },
        );
        // SAFETY: as above.
        unsafe { (*p).pm_sampling_object = (HANDLE_BASE + d) as *mut c_void };
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiPmSamplingDisable(p: *mut abi::PmSamplingDisable) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::PmSamplingDisable::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above.
        let Some(d) = device_of(unsafe { (*p).pm_sampling_object }) else {
            return CUPTI_ERROR_INVALID_PARAMETER;
        };
        match OBJECTS.lock().map(|mut g| g.remove(&d)) {
            Ok(Some(_)) => CUPTI_SUCCESS,
            _ => CUPTI_ERROR_INVALID_OPERATION,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiPmSamplingSetConfig(p: *mut abi::PmSamplingSetConfig) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`; the client's configuration image.
        let (handle, config, interval) = unsafe {
            if !sized(p, abi::PmSamplingSetConfig::SIZE) || (*p).config.is_null() {
                return CUPTI_ERROR_INVALID_PARAMETER;
            }
            (
                (*p).pm_sampling_object,
                std::slice::from_raw_parts((*p).config, (*p).config_size).to_vec(),
                (*p).sampling_interval,
            )
        };
        let Some((metrics, passes)) = profiler::read_config(&config) else {
            return CUPTI_ERROR_INVALID_PARAMETER;
        };
        if passes != 1 {
            return CUPTI_ERROR_NOT_SUPPORTED;
        }
        if interval == 0 {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        result(with_object(handle, |o| {
            o.metrics = metrics;
            o.interval = interval;
            Ok(())
        }))
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiPmSamplingStart(p: *mut abi::PmSamplingStart) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::PmSamplingStart::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above.
        result(with_object(unsafe { (*p).pm_sampling_object }, |o| {
            if o.interval == 0 || (o.start.is_some() && o.stop.is_none()) {
                return Err(CUPTI_ERROR_INVALID_OPERATION);
            }
            o.start = Some(state::realtime_ns());
            o.stop = None;
            o.k = 0;
            Ok(())
        }))
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiPmSamplingStop(p: *mut abi::PmSamplingStop) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::PmSamplingStop::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above.
        result(with_object(unsafe { (*p).pm_sampling_object }, |o| {
            if o.start.is_none() || o.stop.is_some() {
                return Err(CUPTI_ERROR_INVALID_OPERATION);
            }
            o.stop = Some(state::realtime_ns());
            Ok(())
        }))
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiPmSamplingGetCounterDataSize(
    p: *mut abi::PmSamplingGetCounterDataSize,
) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`; the client's names.
        unsafe {
            if !sized(p, abi::PmSamplingGetCounterDataSize::SIZE) {
                return CUPTI_ERROR_INVALID_PARAMETER;
            }
            let Some(list) = names((*p).metric_names, (*p).num_metrics) else {
                return CUPTI_ERROR_INVALID_PARAMETER;
            };
            if let Err(e) = with_object((*p).pm_sampling_object, |_| Ok(())) {
                return e;
            }
            (*p).counter_data_size = profiler::data_size(&list, (*p).max_samples as usize);
        }
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiPmSamplingCounterDataImageInitialize(
    p: *mut abi::PmSamplingCounterDataImageInitialize,
) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`; the client's image of the size it gives.
        unsafe {
            if !sized(p, abi::PmSamplingCounterDataImageInitialize::SIZE)
                || (*p).counter_data.is_null()
            {
                return CUPTI_ERROR_INVALID_PARAMETER;
            }
            let Ok(metrics) = with_object((*p).pm_sampling_object, |o| Ok(o.metrics.clone()))
            else {
                return CUPTI_ERROR_INVALID_OPERATION;
            };
            let img = std::slice::from_raw_parts_mut((*p).counter_data, (*p).counter_data_size);
            let base = profiler::data_size(&metrics, 0);
            if img.len() < base {
                return CUPTI_ERROR_INVALID_PARAMETER;
            }
            profiler::data_init(img, &metrics, (img.len() - base) / profiler::SLOT);
        }
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiPmSamplingDecodeData(p: *mut abi::PmSamplingDecodeData) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`; the client's image of the size it gives.
        unsafe {
            if !sized(p, abi::PmSamplingDecodeData::SIZE) || (*p).counter_data_image.is_null() {
                return CUPTI_ERROR_INVALID_PARAMETER;
            }
            let img = std::slice::from_raw_parts_mut(
                (*p).counter_data_image,
                (*p).counter_data_image_size,
            );
            let Some((max, filled, _)) = profiler::read_data(img) else {
                return CUPTI_ERROR_INVALID_PARAMETER;
            };
            let device = device_of((*p).pm_sampling_object).unwrap_or(0);
            let now = state::realtime_ns();
            let full = with_object((*p).pm_sampling_object, |o| {
                let Some(t0) = o.start else { return Ok(false) };
                let until = o.stop.unwrap_or(now);
                let mut ranges = Vec::new();
                if o.untimed_next && filled < max {
                    o.untimed_next = false;
                    ranges.push(Range {
                        name: b"0:0".to_vec(),
                        subject: format!("pm {device} untimed").into_bytes(),
                        duration_ns: 0,
                        passes: 1,
                        launches: 0,
                    });
                }
                while filled + ranges.len() < max {
                    let (a, b) = if o.k == 0 {
                        (o.since, t0)
                    } else {
                        (t0 + (o.k - 1) * o.interval, t0 + o.k * o.interval)
                    };
                    if b > until {
                        break;
                    }
                    ranges.push(Range {
                        name: format!("{a}:{b}").into_bytes(),
                        subject: format!("pm {device} {}", o.index).into_bytes(),
                        duration_ns: b - a,
                        passes: 1,
                        launches: 0,
                    });
                    o.k += 1;
                    o.index += 1;
                }
                let full = filled + ranges.len() == max;
                // The complete samples a full image left behind are lost.
                while full && o.k > 0 && t0 + o.k * o.interval <= until {
                    o.k += 1;
                    o.index += 1;
                    o.untimed_next = true;
                }
                if let Some(stop) = o.stop {
                    o.since = stop;
                }
                profiler::data_append(img, &ranges);
                Ok(full)
            });
            match full {
                Ok(full) => {
                    (*p).decode_stop_reason = if full {
                        abi::PM_DECODE_STOP_COUNTER_DATA_FULL
                    } else {
                        abi::PM_DECODE_STOP_END_OF_RECORDS
                    };
                    (*p).overflow = 0;
                    CUPTI_SUCCESS
                }
                Err(e) => e,
            }
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiPmSamplingGetCounterDataInfo(
    p: *mut abi::PmSamplingGetCounterDataInfo,
) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`; the client's image.
        unsafe {
            if !sized(p, abi::PmSamplingGetCounterDataInfo::SIZE)
                || (*p).counter_data_image.is_null()
            {
                return CUPTI_ERROR_INVALID_PARAMETER;
            }
            let img =
                std::slice::from_raw_parts((*p).counter_data_image, (*p).counter_data_image_size);
            let Some((max, filled, _)) = profiler::read_data(img) else {
                return CUPTI_ERROR_INVALID_PARAMETER;
            };
            (*p).num_total_samples = max;
            (*p).num_populated_samples = filled;
            (*p).num_completed_samples = filled;
        }
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiPmSamplingCounterDataGetSampleInfo(
    p: *mut abi::PmSamplingCounterDataGetSampleInfo,
) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`; the client's image.
        unsafe {
            if !sized(p, abi::PmSamplingCounterDataGetSampleInfo::SIZE)
                || (*p).counter_data_image.is_null()
            {
                return CUPTI_ERROR_INVALID_PARAMETER;
            }
            let img =
                std::slice::from_raw_parts((*p).counter_data_image, (*p).counter_data_image_size);
            let Some(r) = profiler::data_range(img, (*p).sample_index) else {
                return CUPTI_ERROR_INVALID_PARAMETER;
            };
            let text = String::from_utf8_lossy(&r.name).into_owned();
            let Some((a, b)) = text.split_once(':') else {
                return CUPTI_ERROR_INVALID_PARAMETER;
            };
            let (Ok(a), Ok(b)) = (a.parse::<u64>(), b.parse::<u64>()) else {
                return CUPTI_ERROR_INVALID_PARAMETER;
            };
            (*p).start_timestamp = a;
            (*p).end_timestamp = b;
        }
        CUPTI_SUCCESS
    })
}
