//! The exported target functions (`cupti_profiler_target.h`, `cupti_target.h`) and the Range
//! Profiler API (`cupti_range_profiler.h`) of CUDA 13.0, with their C ABI (the parameter
//! structs of `rtrace-cupti-abi`). The state is `profiling::Profiling`, in simcupti's `State`;
//! kernel launches reach it through `State`'s simcuda callback. README.md, "Kernel profiling".

#![allow(clippy::missing_safety_doc, non_snake_case)]

use std::ffi::CStr;

use rtrace_cupti_abi as abi;

use crate::api::call;
use crate::layout::*;
use crate::profiler::{self, DEVICE_CHIP};
use crate::profiler_host::{malloc_str, names, range_name};
use crate::profiling::{knob, object_handle, sized, Config, Knob, Object, Profiling};
use crate::state;

/// The id of a live context (`INVALID_CONTEXT` else; `NOT_INITIALIZED` without simcuda).
fn live_context(ctx: *mut std::ffi::c_void) -> Result<u32, u32> {
    let sim = state::sim().ok_or(CUPTI_ERROR_NOT_INITIALIZED)?;
    let mut id = 0u32;
    // SAFETY: a valid out-pointer.
    match unsafe { sim.context_id(ctx, &mut id) } {
        CUPTI_SUCCESS => Ok(id),
        _ => Err(CUPTI_ERROR_INVALID_CONTEXT),
    }
}

/// Runs `f` on the range profiler a params struct names.
fn with_object<R>(
    handle: *mut std::ffi::c_void,
    f: impl FnOnce(&mut Object) -> Result<R, u32>,
) -> Result<R, u32> {
    state::with(|st| st.prof.object(handle).and_then(f))
}

#[no_mangle]
pub unsafe extern "C" fn cuptiProfilerInitialize(p: *mut abi::ProfilerInitialize) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::ProfilerInitialize::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        state::with(|st| st.prof.initialized = true);
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiProfilerDeInitialize(p: *mut abi::ProfilerDeInitialize) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::ProfilerDeInitialize::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        state::with(|st| st.prof.initialized = false);
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiDeviceGetChipName(p: *mut abi::DeviceGetChipName) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::DeviceGetChipName::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        let Some(sim) = state::sim() else {
            return CUPTI_ERROR_NOT_INITIALIZED;
        };
        // SAFETY: as above.
        if unsafe { (*p).device_index } >= sim.device_count().max(0) as usize {
            return CUPTI_ERROR_INVALID_DEVICE;
        }
        static CHIP: &CStr = c"GH100";
        debug_assert_eq!(CHIP.to_bytes(), DEVICE_CHIP.as_bytes());
        // SAFETY: as above.
        unsafe { (*p).chip_name = CHIP.as_ptr() };
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiProfilerGetCounterAvailability(
    p: *mut abi::GetCounterAvailability,
) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::GetCounterAvailability::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        if !state::with(|st| st.prof.initialized) {
            return CUPTI_ERROR_NOT_INITIALIZED;
        }
        match knob() {
            Knob::Privileges => return CUPTI_ERROR_INSUFFICIENT_PRIVILEGES,
            Knob::Busy => return CUPTI_ERROR_HARDWARE_BUSY,
            _ => {}
        }
        // SAFETY: as above.
        let (ctx, size, buf) = unsafe {
            (
                (*p).ctx,
                (*p).counter_availability_image_size,
                (*p).counter_availability_image,
            )
        };
        if let Err(e) = live_context(ctx) {
            return e;
        }
        if buf.is_null() {
            // SAFETY: as above.
            unsafe { (*p).counter_availability_image_size = profiler::AVAILABILITY_SIZE };
            return CUPTI_SUCCESS;
        }
        if size < profiler::AVAILABILITY_SIZE {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        let img = profiler::availability_image(DEVICE_CHIP);
        // SAFETY: the client's buffer of `size` >= 64 bytes.
        unsafe { std::ptr::copy_nonoverlapping(img.as_ptr(), buf, img.len()) };
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiProfilerDeviceSupported(p: *mut abi::DeviceSupported) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::DeviceSupported::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        let Some(sim) = state::sim() else {
            return CUPTI_ERROR_NOT_INITIALIZED;
        };
        // SAFETY: as above.
        let dev = unsafe { (*p).cu_device };
        if dev < 0 || dev >= sim.device_count() {
            return CUPTI_ERROR_INVALID_DEVICE;
        }
        let (overall, arch) = match knob() {
            Knob::Unsupported => (abi::SUPPORT_UNSUPPORTED, abi::SUPPORT_UNSUPPORTED),
            _ => (abi::SUPPORT_SUPPORTED, abi::SUPPORT_SUPPORTED),
        };
        let ok = abi::SUPPORT_SUPPORTED;
        // SAFETY: as above.
        unsafe {
            (*p).is_supported = overall;
            (*p).architecture = arch;
            (*p).sli = ok;
            (*p).v_gpu = ok;
            (*p).confidential_compute = ok;
            (*p).cmp = ok;
            (*p).wsl = ok;
        }
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiRangeProfilerEnable(p: *mut abi::RangeProfilerEnable) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::RangeProfilerEnable::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        if !state::with(|st| st.prof.initialized) {
            return CUPTI_ERROR_NOT_INITIALIZED;
        }
        match knob() {
            Knob::Privileges => return CUPTI_ERROR_INSUFFICIENT_PRIVILEGES,
            Knob::Busy => return CUPTI_ERROR_HARDWARE_BUSY,
            Knob::Unsupported | Knob::Mps => return CUPTI_ERROR_NOT_SUPPORTED,
            Knob::Works | Knob::Once => {}
        }
        // SAFETY: as above.
        let id = match live_context(unsafe { (*p).ctx }) {
            Ok(id) => id,
            Err(e) => return e,
        };
        let rc = state::with(|st| {
            if let Err(e) = st.attach() {
                return e;
            }
            if st.prof.objects.contains_key(&id) {
                return CUPTI_ERROR_INVALID_OPERATION;
            }
            st.prof.objects.insert(id, Object::default());
            CUPTI_SUCCESS
        });
        if rc == CUPTI_SUCCESS {
            // SAFETY: as above.
            unsafe { (*p).range_profiler_object = object_handle(id) };
        }
        rc
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiRangeProfilerDisable(p: *mut abi::RangeProfilerDisable) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::RangeProfilerDisable::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above.
        let Some(id) = Profiling::object_ctx(unsafe { (*p).range_profiler_object }) else {
            return CUPTI_ERROR_INVALID_PARAMETER;
        };
        match state::with(|st| st.prof.objects.remove(&id)) {
            Some(_) => CUPTI_SUCCESS,
            None => CUPTI_ERROR_INVALID_PARAMETER,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiRangeProfilerGetCounterDataSize(
    p: *mut abi::RangeProfilerGetCounterDataSize,
) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::RangeProfilerGetCounterDataSize::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above; the names array as the header describes it.
        let (h, list, max) = unsafe {
            (
                (*p).range_profiler_object,
                names((*p).metric_names, (*p).num_metrics),
                (*p).max_num_of_ranges,
            )
        };
        let r = with_object(h, |obj| {
            let list = list
                .filter(|l| max > 0 && l.iter().all(|n| profiler::metric_valid(n)))
                .ok_or(CUPTI_ERROR_INVALID_PARAMETER)?;
            let size = profiler::data_size(&list, max);
            obj.sized = Some((list, max));
            Ok(size)
        });
        match r {
            Ok(size) => {
                // SAFETY: as above.
                unsafe { (*p).counter_data_size = size };
                CUPTI_SUCCESS
            }
            Err(e) => e,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiRangeProfilerCounterDataImageInitialize(
    p: *mut abi::RangeProfilerCounterDataImageInitialize,
) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::RangeProfilerCounterDataImageInitialize::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above.
        let (h, size, img) = unsafe {
            (
                (*p).range_profiler_object,
                (*p).counter_data_size,
                (*p).counter_data,
            )
        };
        let r = with_object(h, |obj| {
            let (metrics, max) = obj.sized.as_ref().ok_or(CUPTI_ERROR_INVALID_OPERATION)?;
            if img.is_null() || size != profiler::data_size(metrics, *max) {
                return Err(CUPTI_ERROR_INVALID_PARAMETER);
            }
            // SAFETY: the client's image of `size` bytes.
            let img = unsafe { std::slice::from_raw_parts_mut(img, size) };
            profiler::data_init(img, metrics, *max);
            Ok(())
        });
        r.err().unwrap_or(CUPTI_SUCCESS)
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiRangeProfilerSetConfig(p: *mut abi::RangeProfilerSetConfig) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::RangeProfilerSetConfig::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above.
        let p = unsafe { &*p };
        let config = (!p.config.is_null()).then(|| {
            // SAFETY: the client's config image of `config_size` bytes.
            profiler::read_config(unsafe { std::slice::from_raw_parts(p.config, p.config_size) })
        });
        let image_ok = !p.counter_data_image.is_null() && {
            // SAFETY: the client's counter data image.
            let s = unsafe {
                std::slice::from_raw_parts(p.counter_data_image, p.counter_data_image_size)
            };
            profiler::read_data(s).is_some()
        };
        let (user_range, application) = match (p.range, p.replay_mode) {
            (abi::AUTO_RANGE, abi::KERNEL_REPLAY) => (false, false),
            (abi::USER_RANGE, abi::USER_REPLAY) => (true, false),
            (abi::USER_RANGE, abi::APPLICATION_REPLAY) => (true, true),
            _ => return CUPTI_ERROR_INVALID_PARAMETER,
        };
        let (Some(Some((_, passes))), true) = (config, image_ok) else {
            return CUPTI_ERROR_INVALID_PARAMETER;
        };
        if p.max_ranges_per_pass == 0
            || p.num_nesting_levels == 0
            || (!user_range && p.num_nesting_levels != 1)
            || (user_range && p.pass_index >= passes)
        {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        let cfg = Config {
            passes,
            image: p.counter_data_image as usize,
            image_size: p.counter_data_image_size,
            user_range,
            application,
            max_per_pass: p.max_ranges_per_pass,
            target_level: p.target_nesting_level.max(1),
        };
        let pass = if user_range { p.pass_index } else { 0 };
        let r = with_object(p.range_profiler_object, |obj| {
            if obj.started || (knob() == Knob::Once && obj.config.is_some()) {
                return Err(CUPTI_ERROR_INVALID_OPERATION);
            }
            obj.set_config(cfg, pass);
            Ok(())
        });
        r.err().unwrap_or(CUPTI_SUCCESS)
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiRangeProfilerStart(p: *mut abi::RangeProfilerStart) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::RangeProfilerStart::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above.
        let h = unsafe { (*p).range_profiler_object };
        with_object(h, |obj| Ok(obj.start())).unwrap_or_else(|e| e)
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiRangeProfilerStop(p: *mut abi::RangeProfilerStop) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::RangeProfilerStop::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above.
        let h = unsafe { (*p).range_profiler_object };
        match with_object(h, Object::stop) {
            Ok((pass, level, all)) => {
                // SAFETY: as above.
                unsafe {
                    (*p).pass_index = pass;
                    (*p).target_nesting_level = level;
                    (*p).is_all_pass_submitted = all;
                }
                CUPTI_SUCCESS
            }
            Err(e) => e,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiRangeProfilerPushRange(p: *mut abi::RangeProfilerPushRange) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::RangeProfilerPushRange::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above.
        let (h, name) = unsafe { ((*p).range_profiler_object, (*p).range_name) };
        if name.is_null() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: the client's C string.
        let name = unsafe { CStr::from_ptr(name) }.to_bytes();
        with_object(h, |obj| Ok(obj.push(name))).unwrap_or_else(|e| e)
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiRangeProfilerPopRange(p: *mut abi::RangeProfilerPopRange) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::RangeProfilerPopRange::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above.
        let h = unsafe { (*p).range_profiler_object };
        with_object(h, |obj| Ok(obj.pop())).unwrap_or_else(|e| e)
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiRangeProfilerDecodeData(p: *mut abi::RangeProfilerDecodeData) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::RangeProfilerDecodeData::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above.
        let h = unsafe { (*p).range_profiler_object };
        match with_object(h, Object::decode) {
            Ok(dropped) => {
                // SAFETY: as above.
                unsafe { (*p).num_of_range_dropped = dropped };
                CUPTI_SUCCESS
            }
            Err(e) => e,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiRangeProfilerGetCounterDataInfo(
    p: *mut abi::RangeProfilerGetCounterDataInfo,
) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::RangeProfilerGetCounterDataInfo::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above.
        let (img, size) = unsafe { ((*p).counter_data_image, (*p).counter_data_image_size) };
        if img.is_null() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: the client's image of `size` bytes.
        match profiler::read_data(unsafe { std::slice::from_raw_parts(img, size) }) {
            Some((_, filled, _)) => {
                // SAFETY: as above.
                unsafe { (*p).num_total_ranges = filled };
                CUPTI_SUCCESS
            }
            None => CUPTI_ERROR_INVALID_PARAMETER,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiRangeProfilerCounterDataGetRangeInfo(
    p: *mut abi::RangeProfilerCounterDataGetRangeInfo,
) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::RangeProfilerCounterDataGetRangeInfo::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above.
        let (img, size, index, delim) = unsafe {
            (
                (*p).counter_data_image,
                (*p).counter_data_image_size,
                (*p).range_index,
                (*p).range_delimiter,
            )
        };
        let img = (!img.is_null()).then(|| {
            // SAFETY: the client's image of `size` bytes.
            unsafe { std::slice::from_raw_parts(img, size) }
        });
        match range_name(img, index, delim) {
            Some(name) => {
                // SAFETY: as above.
                unsafe { (*p).range_name = malloc_str(&name) };
                CUPTI_SUCCESS
            }
            None => CUPTI_ERROR_INVALID_PARAMETER,
        }
    })
}
