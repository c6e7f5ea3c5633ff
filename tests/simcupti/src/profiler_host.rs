//! The exported functions of the Profiler Host API (`cupti_profiler_host.h`, CUDA 13.0), with
//! its C ABI (the parameter structs of `rtrace-cupti-abi`). They work without a GPU and
//! without simcuda, from a chip name, as CUPTI's do. README.md, "Kernel profiling".

#![allow(clippy::missing_safety_doc, non_snake_case)]

use std::ffi::{c_char, CStr, CString};
use std::sync::OnceLock;

use rtrace_cupti_abi as abi;

use crate::api::call;
use crate::layout::*;
use crate::profiler::{self, CHIPS};
use crate::profiling::{sized, Profiling};
use crate::state;

/// `CHIPS` as C strings, and the array of their pointers (static for the process's life).
fn chip_ptrs() -> &'static [usize] {
    static PTRS: OnceLock<Vec<usize>> = OnceLock::new();
    PTRS.get_or_init(|| {
        CHIPS
            .iter()
            .map(|c| CString::new(*c).map_or(0, |s| s.into_raw() as usize))
            .collect()
    })
}

/// Base metric names as C strings, per metric type.
fn base_ptrs(kind: u32) -> Option<&'static [usize]> {
    static PTRS: OnceLock<[Vec<usize>; 3]> = OnceLock::new();
    let all = PTRS.get_or_init(|| {
        let c = |l: &[&str]| -> Vec<usize> {
            l.iter()
                .map(|n| CString::new(*n).map_or(0, |s| s.into_raw() as usize))
                .collect()
        };
        [
            c(&profiler::BASE_COUNTERS),
            c(&profiler::BASE_RATIOS),
            c(&profiler::BASE_THROUGHPUTS),
        ]
    });
    all.get(kind as usize).map(Vec::as_slice)
}

/// `n` C strings from `names` (NULL array or entry: `None`).
///
/// # Safety
/// `names` is NULL or points to `n` pointers, each NULL or a C string.
pub unsafe fn names(names: *const *const c_char, n: usize) -> Option<Vec<String>> {
    if names.is_null() || n == 0 {
        return None;
    }
    (0..n)
        .map(|i| {
            // SAFETY: the caller's contract.
            let p = unsafe { *names.add(i) };
            // SAFETY: as above.
            (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        })
        .collect()
}

/// A `malloc`ed copy of `s`, NUL-terminated (the client frees it, as CUPTI's header says).
pub fn malloc_str(s: &[u8]) -> *const c_char {
    // SAFETY: malloc of a positive size; checked for NULL before writing.
    let p = unsafe { libc::malloc(s.len() + 1) }.cast::<u8>();
    if !p.is_null() {
        // SAFETY: `p` has room for `s` and the NUL.
        unsafe {
            std::ptr::copy_nonoverlapping(s.as_ptr(), p, s.len());
            *p.add(s.len()) = 0;
        }
    }
    p as *const c_char
}

#[no_mangle]
pub unsafe extern "C" fn cuptiProfilerHostInitialize(p: *mut abi::HostInitialize) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`; fields read through the raw pointer.
        unsafe {
            if !sized(p, abi::HostInitialize::SIZE) || (*p).chip_name.is_null() {
                return CUPTI_ERROR_INVALID_PARAMETER;
            }
            if (*p).profiler_type != abi::PROFILER_TYPE_RANGE_PROFILER
                && (*p).profiler_type != abi::PROFILER_TYPE_PM_SAMPLING
            {
                return CUPTI_ERROR_INVALID_PARAMETER;
            }
            let chip = CStr::from_ptr((*p).chip_name)
                .to_string_lossy()
                .into_owned();
            if !CHIPS.contains(&chip.as_str()) {
                return CUPTI_ERROR_INVALID_CHIP_NAME;
            }
            let avail = (*p).counter_availability_image;
            if !avail.is_null() {
                let img = std::slice::from_raw_parts(avail, 8);
                if img != profiler::AVAILABILITY_MAGIC {
                    return CUPTI_ERROR_INVALID_PARAMETER;
                }
            }
            (*p).host_object = state::with(|st| st.prof.new_host());
        }
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiProfilerHostDeinitialize(p: *mut abi::HostDeinitialize) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::HostDeinitialize::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above.
        let h = unsafe { (*p).host_object };
        if state::with(|st| st.prof.drop_host(h)) {
            CUPTI_SUCCESS
        } else {
            CUPTI_ERROR_INVALID_PARAMETER
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiProfilerHostGetSupportedChips(
    p: *mut abi::HostGetSupportedChips,
) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::HostGetSupportedChips::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        let ptrs = chip_ptrs();
        // SAFETY: as above.
        unsafe {
            (*p).num_chips = ptrs.len();
            (*p).chip_names = ptrs.as_ptr().cast();
        }
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiProfilerHostGetBaseMetrics(p: *mut abi::HostGetBaseMetrics) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::HostGetBaseMetrics::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above.
        let (h, kind) = unsafe { ((*p).host_object, (*p).metric_type) };
        if let Err(e) = state::with(|st| st.prof.host(h).map(|_| ())) {
            return e;
        }
        let Some(list) = base_ptrs(kind) else {
            return CUPTI_ERROR_INVALID_PARAMETER;
        };
        // SAFETY: as above.
        unsafe {
            (*p).num_metrics = list.len();
            (*p).metric_names = list.as_ptr() as *mut *const c_char;
        }
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiProfilerHostConfigAddMetrics(
    p: *mut abi::HostConfigAddMetrics,
) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::HostConfigAddMetrics::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above; the names array as the header describes it.
        let (h, list) = unsafe { ((*p).host_object, names((*p).metric_names, (*p).num_metrics)) };
        state::with(|st| {
            let host = match st.prof.host(h) {
                Ok(host) => host,
                Err(e) => return e,
            };
            // As CUPTI 13.0: no names is INVALID_PARAMETER; an invalid name too (not
            // INVALID_METRIC_NAME), and it spoils the host object.
            let Some(list) = list else {
                return CUPTI_ERROR_INVALID_PARAMETER;
            };
            if !list.iter().all(|n| profiler::metric_valid(n)) {
                host.spoiled = true;
                return CUPTI_ERROR_INVALID_PARAMETER;
            }
            for n in list {
                if !host.metrics.contains(&n) {
                    host.metrics.push(n);
                }
            }
            CUPTI_SUCCESS
        })
    })
}

/// The configuration image of a host object; one without metrics: `UNKNOWN` (as CUPTI 13.0).
fn configured(prof: &mut Profiling, h: *mut std::ffi::c_void) -> Result<Vec<u8>, u32> {
    let host = prof.host(h)?;
    if host.metrics.is_empty() {
        return Err(CUPTI_ERROR_UNKNOWN);
    }
    Ok(profiler::config_image(&host.metrics))
}

#[no_mangle]
pub unsafe extern "C" fn cuptiProfilerHostGetConfigImageSize(
    p: *mut abi::HostGetConfigImageSize,
) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::HostGetConfigImageSize::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above.
        let h = unsafe { (*p).host_object };
        match state::with(|st| configured(&mut st.prof, h).map(|img| img.len())) {
            Ok(n) => {
                // SAFETY: as above.
                unsafe { (*p).config_image_size = n };
                CUPTI_SUCCESS
            }
            Err(e) => e,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiProfilerHostGetConfigImage(p: *mut abi::HostGetConfigImage) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::HostGetConfigImage::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above.
        let (h, size, out) =
            unsafe { ((*p).host_object, (*p).config_image_size, (*p).config_image) };
        let img = match state::with(|st| configured(&mut st.prof, h)) {
            Ok(img) => img,
            Err(e) => return e,
        };
        if out.is_null() || size < img.len() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: the client's buffer of `size` >= img.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(img.as_ptr(), out, img.len()) };
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiProfilerHostGetNumOfPasses(p: *mut abi::HostGetNumOfPasses) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::HostGetNumOfPasses::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above.
        let (img, size) = unsafe { ((*p).config_image, (*p).config_image_size) };
        if img.is_null() {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: the client's image of `size` bytes.
        let img = unsafe { std::slice::from_raw_parts(img, size) };
        match profiler::read_config(img) {
            Some((_, passes)) => {
                // SAFETY: as above.
                unsafe { (*p).num_of_passes = passes };
                CUPTI_SUCCESS
            }
            None => CUPTI_ERROR_INVALID_PARAMETER,
        }
    })
}

/// A counter data image given to a host call, if it is one.
///
/// # Safety
/// `img` is NULL or points to `size` bytes.
unsafe fn data<'a>(img: *const u8, size: usize) -> Option<&'a [u8]> {
    if img.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    let s = unsafe { std::slice::from_raw_parts(img, size) };
    profiler::read_data(s).map(|_| s)
}

#[no_mangle]
pub unsafe extern "C" fn cuptiProfilerHostEvaluateToGpuValues(
    p: *mut abi::HostEvaluateToGpuValues,
) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::HostEvaluateToGpuValues::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above; the client's image and names as the header describes them.
        let (h, img, index, list, out) = unsafe {
            (
                (*p).host_object,
                data((*p).counter_data_image, (*p).counter_data_image_size),
                (*p).range_index,
                names((*p).metric_names, (*p).num_metrics),
                (*p).metric_values,
            )
        };
        // As CUPTI's host API: any host object evaluates any image, offline; a metric whose
        // counters the image does not hold cannot be evaluated.
        if let Err(e) = state::with(|st| st.prof.host(h).map(|_| ())) {
            return e;
        }
        let (Some(img), Some(list), false) = (img, list, out.is_null()) else {
            return CUPTI_ERROR_INVALID_PARAMETER;
        };
        let Some(range) = profiler::data_range(img, index) else {
            return CUPTI_ERROR_INVALID_PARAMETER;
        };
        let Some(collected) = profiler::data_metrics(img) else {
            return CUPTI_ERROR_INVALID_PARAMETER;
        };
        if !list.iter().all(|n| collected.contains(n)) {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        for (i, n) in list.iter().enumerate() {
            let v = profiler::value(n, &range.subject, range.duration_ns);
            // SAFETY: the client's array of `num_metrics` doubles.
            unsafe { out.add(i).write(v) };
        }
        CUPTI_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiProfilerHostGetRangeName(p: *mut abi::HostGetRangeName) -> u32 {
    call(|| {
        // SAFETY: checked by `sized`.
        if !unsafe { sized(p, abi::HostGetRangeName::SIZE) } {
            return CUPTI_ERROR_INVALID_PARAMETER;
        }
        // SAFETY: as above.
        let (img, index, delim) = unsafe {
            (
                data((*p).counter_data_image, (*p).counter_data_image_size),
                (*p).range_index,
                (*p).delimiter,
            )
        };
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

/// Range `index`'s name, levels joined by `delim` (NULL: "/").
pub fn range_name(img: Option<&[u8]>, index: usize, delim: *const c_char) -> Option<Vec<u8>> {
    let range = profiler::data_range(img?, index)?;
    let delim = if delim.is_null() {
        &b"/"[..]
    } else {
        // SAFETY: a non-NULL delimiter is the client's C string.
        unsafe { CStr::from_ptr(delim) }.to_bytes()
    };
    Some(profiler::display_name(&range.name, delim))
}
