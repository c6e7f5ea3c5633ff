//! The sampler's foreign calls: the CUDA driver (`libcuda.so.1`, opened here: the devices, their
//! identity, and a context where CUPTI wants one) and CUPTI's PM sampling target API
//! (`cupti_pmsampling.h`, `cupti_profiler_target.h`), looked up in the CUPTI that
//! [`crate::metrics::Cupti`] loaded. Their parameter structures are `rtrace-cupti-abi`'s.
//! Every call is wrapped here, so the rest of the sampler is safe code.
#![allow(unsafe_code)]

use crate::metrics::Cupti;
use rtrace_cupti_abi as abi;
use rtrace_cupti_abi::{Call, CuptiResult};
use std::ffi::{c_char, c_void, CStr};

type InitFn = unsafe extern "C" fn(u32) -> u32;
type CountFn = unsafe extern "C" fn(*mut i32) -> u32;
type DeviceGetFn = unsafe extern "C" fn(*mut i32, i32) -> u32;
type NameFn = unsafe extern "C" fn(*mut c_char, i32, i32) -> u32;
type TotalMemFn = unsafe extern "C" fn(*mut usize, i32) -> u32;
type AttributeFn = unsafe extern "C" fn(*mut i32, i32, i32) -> u32;
type RetainFn = unsafe extern "C" fn(*mut *mut c_void, i32) -> u32;
type SetCurrentFn = unsafe extern "C" fn(*mut c_void) -> u32;

/// The CUDA driver's entry points the sampler calls, and the primary contexts it retained (by
/// device ordinal). The library is never closed, the contexts never released: the sampler's
/// end releases them.
pub struct Driver {
    contexts: std::cell::RefCell<Vec<(u32, usize)>>,
    count: CountFn,
    device_get: DeviceGetFn,
    name: NameFn,
    total_mem: TotalMemFn,
    attribute: AttributeFn,
    retain: RetainFn,
    set_current: SetCurrentFn,
}

/// A symbol's address as the function pointer type `F`.
///
/// # Safety
/// `F` is a function pointer type matching the symbol's C signature.
unsafe fn as_fn<F: Copy>(p: *mut c_void) -> F {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: same size (checked); the caller vouches for the signature.
    unsafe { std::mem::transmute_copy(&p) }
}

impl Driver {
    /// `libcuda.so.1`, initialized (`cuInit`); Err says why there is no driver to sample.
    pub fn load() -> Result<Driver, String> {
        let lib = c"libcuda.so.1";
        // SAFETY: a NUL-terminated name; the driver's constructors are made to be run so.
        let h = unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if h.is_null() {
            return Err("no CUDA driver here (libcuda.so.1 cannot be loaded)".into());
        }
        let sym = |s: &CStr| {
            // SAFETY: a live handle from dlopen and a NUL-terminated name.
            let f = unsafe { libc::dlsym(h, s.as_ptr()) };
            (!f.is_null())
                .then_some(f)
                .ok_or_else(|| format!("libcuda.so.1 has no {}", s.to_string_lossy()))
        };
        // SAFETY (each as_fn): the driver function of that name as cuda.h declares it.
        let (init, d) = unsafe {
            let init: InitFn = as_fn(sym(c"cuInit")?);
            let d = Driver {
                contexts: Default::default(),
                count: as_fn(sym(c"cuDeviceGetCount")?),
                device_get: as_fn(sym(c"cuDeviceGet")?),
                name: as_fn(sym(c"cuDeviceGetName")?),
                total_mem: as_fn(sym(c"cuDeviceTotalMem_v2")?),
                attribute: as_fn(sym(c"cuDeviceGetAttribute")?),
                retain: as_fn(sym(c"cuDevicePrimaryCtxRetain")?),
                set_current: as_fn(sym(c"cuCtxSetCurrent")?),
            };
            (init, d)
        };
        // SAFETY: cuInit with its only valid flags.
        match unsafe { init(0) } {
            0 => Ok(d),
            rc => Err(format!("the CUDA driver finds no GPU (cuInit: error {rc})")),
        }
    }

    /// The devices the driver sees (as `CUDA_VISIBLE_DEVICES` lets this process see them).
    pub fn devices(&self) -> Result<u32, String> {
        let mut n = 0;
        // SAFETY: the driver writes the count.
        match unsafe { (self.count)(&mut n) } {
            0 => Ok(n.max(0) as u32),
            rc => Err(format!("cuDeviceGetCount: error {rc}")),
        }
    }

    fn handle(&self, ordinal: u32) -> Result<i32, String> {
        let mut dev = 0;
        // SAFETY: the driver writes the handle of a device below the count.
        match unsafe { (self.device_get)(&mut dev, ordinal as i32) } {
            0 => Ok(dev),
            rc => Err(format!("cuDeviceGet({ordinal}): error {rc}")),
        }
    }

    /// Device `ordinal`'s name, memory and the attributes `ids` (those it has), as a trace
    /// records its devices.
    pub fn info(&self, ordinal: u32, ids: &[i32]) -> Result<rtrace_format::DeviceInfo, String> {
        let dev = self.handle(ordinal)?;
        let mut buf = [0 as c_char; 256];
        // SAFETY: the driver writes a NUL-terminated name of at most the length given.
        let rc = unsafe { (self.name)(buf.as_mut_ptr(), buf.len() as i32, dev) };
        let name = if rc == 0 {
            // SAFETY: NUL-terminated within `buf` (above).
            unsafe { CStr::from_ptr(buf.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        } else {
            String::new()
        };
        let mut total = 0usize;
        // SAFETY: the driver writes the size.
        unsafe { (self.total_mem)(&mut total, dev) };
        let attributes = ids
            .iter()
            .filter_map(|&id| {
                let mut v = 0;
                // SAFETY: the driver writes the value of an attribute it knows.
                (unsafe { (self.attribute)(&mut v, id, dev) } == 0).then_some((id, v))
            })
            .collect();
        Ok(rtrace_format::DeviceInfo {
            ordinal,
            name,
            total_memory: total as u64,
            attributes,
        })
    }

    /// Device `ordinal`'s primary context (retained the first time) made current on this
    /// thread: CUPTI's PM sampling calls want a context on the device they sample.
    pub fn use_primary_context(&self, ordinal: u32) -> Result<(), String> {
        let known = self
            .contexts
            .borrow()
            .iter()
            .find(|c| c.0 == ordinal)
            .map(|c| c.1);
        let ctx = match known {
            Some(c) => c as *mut c_void,
            None => {
                let dev = self.handle(ordinal)?;
                let mut ctx = std::ptr::null_mut();
                // SAFETY: the driver writes the context of a valid device.
                let rc = unsafe { (self.retain)(&mut ctx, dev) };
                if rc != 0 {
                    return Err(format!("cuDevicePrimaryCtxRetain({ordinal}): error {rc}"));
                }
                self.contexts.borrow_mut().push((ordinal, ctx as usize));
                ctx
            }
        };
        // SAFETY: a context the driver gave, retained for the process's life.
        match unsafe { (self.set_current)(ctx) } {
            0 => Ok(()),
            rc => Err(format!("cuCtxSetCurrent: error {rc}")),
        }
    }
}

/// CUPTI's PM sampling target entry points, and those of the profiler's target API it needs.
pub struct PmTarget {
    initialize: Call<abi::ProfilerInitialize>,
    device_supported: Call<abi::DeviceSupported>,
    chip_name: Call<abi::DeviceGetChipName>,
    availability: Call<abi::PmSamplingGetCounterAvailability>,
    enable: Call<abi::PmSamplingEnable>,
    set_config: Call<abi::PmSamplingSetConfig>,
    start: Call<abi::PmSamplingStart>,
    stop: Call<abi::PmSamplingStop>,
    decode: Call<abi::PmSamplingDecodeData>,
    counter_data_size: Call<abi::PmSamplingGetCounterDataSize>,
    counter_data_initialize: Call<abi::PmSamplingCounterDataImageInitialize>,
    counter_data_info: Call<abi::PmSamplingGetCounterDataInfo>,
    sample_info: Call<abi::PmSamplingCounterDataGetSampleInfo>,
}

/// A PM sampling object (`CUpti_PmSampling_Object *`), CUPTI's.
#[derive(Clone, Copy, Debug)]
pub struct PmObject(*mut c_void);

// SAFETY: an opaque handle rtrace never dereferences, only hands back to CUPTI; the sampler's
// evaluator thread initializes images with it while the decoding thread decodes (CUPTI's own
// clients decode on a thread of their own too).
unsafe impl Send for PmObject {}

/// What a decode gave: CUPTI's result, why it stopped, whether the hardware buffer
/// overflowed, and the completed samples now in the image.
#[derive(Clone, Copy, Debug)]
pub struct Decoded {
    pub full: bool,
    pub overflow: bool,
    pub completed: usize,
}

/// Calls `f` with `p`, CUPTI's result as an error naming the call.
fn check<P>(cupti: &Cupti, name: &str, f: Call<P>, p: &mut P) -> Result<(), String> {
    // SAFETY: `f` was looked up as the CUPTI entry point whose parameter structure is `P`
    // (rtrace-cupti-abi, checked against the headers); `p` is a live structure whose pointers
    // the caller set to live buffers.
    match unsafe { f(p) } {
        abi::SUCCESS => Ok(()),
        rc => Err(format!("{name}: {}", cupti.result_text(rc as CuptiResult))),
    }
}

impl PmTarget {
    /// The entry points, from the CUPTI `cupti` loaded; Err names the first one missing.
    pub fn load(cupti: &Cupti) -> Result<PmTarget, String> {
        let sym = |s: &CStr| cupti.symbol(s);
        // SAFETY (each as_fn): the CUPTI function of that name takes one pointer to the
        // rtrace-cupti-abi structure its field's type names and returns CUptiResult.
        unsafe {
            Ok(PmTarget {
                initialize: as_fn(sym(c"cuptiProfilerInitialize")?),
                device_supported: as_fn(sym(c"cuptiProfilerDeviceSupported")?),
                chip_name: as_fn(sym(c"cuptiDeviceGetChipName")?),
                availability: as_fn(sym(c"cuptiPmSamplingGetCounterAvailability")?),
                enable: as_fn(sym(c"cuptiPmSamplingEnable")?),
                set_config: as_fn(sym(c"cuptiPmSamplingSetConfig")?),
                start: as_fn(sym(c"cuptiPmSamplingStart")?),
                stop: as_fn(sym(c"cuptiPmSamplingStop")?),
                decode: as_fn(sym(c"cuptiPmSamplingDecodeData")?),
                counter_data_size: as_fn(sym(c"cuptiPmSamplingGetCounterDataSize")?),
                counter_data_initialize: as_fn(sym(c"cuptiPmSamplingCounterDataImageInitialize")?),
                counter_data_info: as_fn(sym(c"cuptiPmSamplingGetCounterDataInfo")?),
                sample_info: as_fn(sym(c"cuptiPmSamplingCounterDataGetSampleInfo")?),
            })
        }
    }

    /// `cuptiProfilerInitialize` (once a process).
    pub fn initialize(&self, cupti: &Cupti) -> Result<(), String> {
        let mut p = abi::ProfilerInitialize::new();
        check(cupti, "cuptiProfilerInitialize", self.initialize, &mut p)
    }

    /// Whether device `d` supports PM sampling.
    pub fn supported(&self, cupti: &Cupti, d: u32) -> Result<bool, String> {
        let mut p = abi::DeviceSupported::new();
        p.cu_device = d as i32;
        p.api = abi::PROFILER_API_PM_SAMPLING;
        check(
            cupti,
            "cuptiProfilerDeviceSupported",
            self.device_supported,
            &mut p,
        )?;
        Ok(p.is_supported == abi::SUPPORT_SUPPORTED)
    }

    /// The chip CUPTI names device `d` (`GH100`).
    pub fn chip(&self, cupti: &Cupti, d: u32) -> Result<String, String> {
        let mut p = abi::DeviceGetChipName::new();
        p.device_index = d as usize;
        check(cupti, "cuptiDeviceGetChipName", self.chip_name, &mut p)?;
        if p.chip_name.is_null() {
            return Err("cuptiDeviceGetChipName gave no name".into());
        }
        // SAFETY: a NUL-terminated name CUPTI owns.
        Ok(unsafe { CStr::from_ptr(p.chip_name) }
            .to_string_lossy()
            .into_owned())
    }

    /// Device `d`'s counter availability image for PM sampling.
    pub fn availability(&self, cupti: &Cupti, d: u32) -> Result<Vec<u8>, String> {
        let name = "cuptiPmSamplingGetCounterAvailability";
        let mut p = abi::PmSamplingGetCounterAvailability::new();
        p.device_index = d as usize;
        check(cupti, name, self.availability, &mut p)?;
        let mut image = vec![0u8; p.counter_availability_image_size];
        p.counter_availability_image = image.as_mut_ptr();
        check(cupti, name, self.availability, &mut p)?;
        Ok(image)
    }

    /// A PM sampling object on device `d`.
    pub fn enable(&self, cupti: &Cupti, d: u32) -> Result<PmObject, String> {
        let mut p = abi::PmSamplingEnable::new();
        p.device_index = d as usize;
        check(cupti, "cuptiPmSamplingEnable", self.enable, &mut p)?;
        Ok(PmObject(p.pm_sampling_object))
    }

    /// Configures `o`: `config` (one pass), a GPU-time `interval` in ns, a hardware buffer
    /// of `buffer` bytes that keeps its oldest records when full.
    pub fn set_config(
        &self,
        cupti: &Cupti,
        o: PmObject,
        config: &[u8],
        interval: u64,
        buffer: usize,
    ) -> Result<(), String> {
        let mut p = abi::PmSamplingSetConfig::new();
        p.pm_sampling_object = o.0;
        p.config_size = config.len();
        p.config = config.as_ptr();
        p.hardware_buffer_size = buffer;
        p.sampling_interval = interval;
        p.trigger_mode = abi::PM_TRIGGER_GPU_TIME_INTERVAL;
        p.hw_buffer_append_mode = abi::PM_APPEND_KEEP_OLDEST;
        check(cupti, "cuptiPmSamplingSetConfig", self.set_config, &mut p)
    }

    /// Bytes of a counter data image of `samples` samples of `metrics` on `o`.
    pub fn image_size(
        &self,
        cupti: &Cupti,
        o: PmObject,
        metrics: &crate::metrics::MetricNames,
        samples: u32,
    ) -> Result<usize, String> {
        let mut p = abi::PmSamplingGetCounterDataSize::new();
        p.pm_sampling_object = o.0;
        p.metric_names = metrics.as_ptr();
        p.num_metrics = metrics.len();
        p.max_samples = samples;
        check(
            cupti,
            "cuptiPmSamplingGetCounterDataSize",
            self.counter_data_size,
            &mut p,
        )?;
        Ok(p.counter_data_size)
    }

    pub fn start(&self, cupti: &Cupti, o: PmObject) -> Result<(), String> {
        let mut p = abi::PmSamplingStart::new();
        p.pm_sampling_object = o.0;
        check(cupti, "cuptiPmSamplingStart", self.start, &mut p)
    }

    pub fn stop(&self, cupti: &Cupti, o: PmObject) -> Result<(), String> {
        let mut p = abi::PmSamplingStop::new();
        p.pm_sampling_object = o.0;
        check(cupti, "cuptiPmSamplingStop", self.stop, &mut p)
    }

    /// Initializes `image` for `o`'s samples (before each decode into it).
    pub fn init_image(&self, cupti: &Cupti, o: PmObject, image: &mut [u8]) -> Result<(), String> {
        let mut init = abi::PmSamplingCounterDataImageInitialize::new();
        init.pm_sampling_object = o.0;
        init.counter_data_size = image.len();
        init.counter_data = image.as_mut_ptr();
        check(
            cupti,
            "cuptiPmSamplingCounterDataImageInitialize",
            self.counter_data_initialize,
            &mut init,
        )
    }

    /// Decodes into `image` (initialized: [`PmTarget::init_image`]) what CUPTI's hardware
    /// buffer holds for `o`.
    pub fn decode(&self, cupti: &Cupti, o: PmObject, image: &mut [u8]) -> Result<Decoded, String> {
        let mut d = abi::PmSamplingDecodeData::new();
        d.pm_sampling_object = o.0;
        d.counter_data_image = image.as_mut_ptr();
        d.counter_data_image_size = image.len();
        check(cupti, "cuptiPmSamplingDecodeData", self.decode, &mut d)?;
        let mut info = abi::PmSamplingGetCounterDataInfo::new();
        info.counter_data_image = image.as_ptr();
        info.counter_data_image_size = image.len();
        check(
            cupti,
            "cuptiPmSamplingGetCounterDataInfo",
            self.counter_data_info,
            &mut info,
        )?;
        Ok(Decoded {
            full: d.decode_stop_reason == abi::PM_DECODE_STOP_COUNTER_DATA_FULL,
            overflow: d.overflow != 0,
            completed: info.num_completed_samples,
        })
    }

    /// Sample `i` of a decoded image: CUPTI's start and end times.
    pub fn sample_times(
        &self,
        cupti: &Cupti,
        o: PmObject,
        image: &[u8],
        i: usize,
    ) -> Result<(u64, u64), String> {
        let mut p = abi::PmSamplingCounterDataGetSampleInfo::new();
        p.pm_sampling_object = o.0;
        p.counter_data_image = image.as_ptr();
        p.counter_data_image_size = image.len();
        p.sample_index = i;
        check(
            cupti,
            "cuptiPmSamplingCounterDataGetSampleInfo",
            self.sample_info,
            &mut p,
        )?;
        Ok((p.start_timestamp, p.end_timestamp))
    }
}
