//! CUPTI's Profiler Host API (`cupti_profiler_host.h`, CUDA 13.0), loaded at run time: the part
//! of CUPTI that works from a chip name, with no GPU. It lists the chips and their base
//! metrics, builds a range profiler configuration from metric names and counts the replay
//! passes the configuration costs, and evaluates metrics from a counter data image recorded
//! elsewhere (a host object for the chip, no counter availability image) and names its ranges.
//! The parameter structures are those of `rtrace-cupti-abi`. The calls that read a counter
//! data image run in a forked child ([`crate::sys::isolate`]): CUPTI 13.0 does not check the
//! image and crashes on one that is not.
//!
//! `libcupti.so.13` loads `libnvperf_host.so` by name when a host call first needs it; when
//! CUPTI is opened by a path, the `libnvperf_host.so` beside it is opened first (global), so
//! that lookup finds it. Every failing call becomes an error naming the call and CUPTI's own
//! text for the result (`cuptiGetResultString`).
#![allow(unsafe_code)]

use std::ffi::{c_char, c_void, CStr, CString};
use std::mem::size_of;
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::Mutex;

use rtrace_cupti_abi::{
    Call, CuptiResult, HostConfigAddMetrics as ConfigAddMetricsParams,
    HostDeinitialize as DeinitializeParams, HostEvaluateToGpuValues as EvaluateParams,
    HostGetBaseMetrics as GetBaseMetricsParams, HostGetConfigImage as GetConfigImageParams,
    HostGetConfigImageSize as GetConfigImageSizeParams, HostGetNumOfPasses as GetNumOfPassesParams,
    HostGetRangeName as GetRangeNameParams, HostGetSupportedChips as GetSupportedChipsParams,
    HostInitialize as InitializeParams, ERROR_NOT_INITIALIZED, PROFILER_TYPE_RANGE_PROFILER,
};
use rtrace_cupti_abi::{DeviceGetChipName, ProfilerInitialize};

pub mod pm;

/// `CUpti_MetricType`: the kinds of base metric a chip lists.
pub use rtrace_cupti_abi::METRIC_TYPES;

/// Held for each host call: the host API is not safe to call from several threads at once
/// (measured: two threads initializing host objects at once got `CUPTI_ERROR_UNKNOWN`). One
/// lock for the process, as every `Cupti` value calls the same loaded library.
static CALLS: Mutex<()> = Mutex::new(());

/// Calls `f` with `p` under [`CALLS`].
///
/// # Safety
/// `f` is the host API function whose params struct is `P`, and `p` is valid for it.
unsafe fn call<P>(f: Call<P>, p: &mut P) -> CuptiResult {
    let _held = CALLS.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: the caller's promise.
    unsafe { f(p) }
}

/// Runs a host call that reads a counter data image in a forked child, under [`CALLS`]:
/// CUPTI does not check the image and crashes on one that is not
/// ([`crate::sys::isolate`]). `f` returns the call's result (4 bytes, little-endian) and
/// then what it wrote; a child that gave no answer becomes an error naming `call`.
fn isolated(call: &str, f: impl FnOnce() -> Vec<u8>) -> Result<Vec<u8>, String> {
    let _held = CALLS.lock().unwrap_or_else(|e| e.into_inner());
    let answer = crate::sys::isolate::in_child(f)
        .map_err(|why| format!("{call} {why}: the counter data is not an image CUPTI can read"))?;
    if answer.len() < 4 {
        return Err(format!("{call}: no answer from the child that ran it"));
    }
    Ok(answer)
}

/// The loaded library and the entry points rtrace uses. The handle is never closed: CUPTI
/// keeps state for the life of the process.
pub struct Cupti {
    path: String,
    result_string: unsafe extern "C" fn(CuptiResult, *mut *const c_char) -> CuptiResult,
    initialize: Call<InitializeParams>,
    deinitialize: Call<DeinitializeParams>,
    supported_chips: Call<GetSupportedChipsParams>,
    base_metrics: Call<GetBaseMetricsParams>,
    add_metrics: Call<ConfigAddMetricsParams>,
    config_image_size: Call<GetConfigImageSizeParams>,
    config_image: Call<GetConfigImageParams>,
    num_passes: Call<GetNumOfPassesParams>,
    range_name: Call<GetRangeNameParams>,
    evaluate: Call<EvaluateParams>,
    profiler_initialize: Call<ProfilerInitialize>,
    device_chip_name: Call<DeviceGetChipName>,
}

fn dlerror() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string owned by libc, read at once.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".to_string()
    } else {
        // SAFETY: not null, NUL-terminated (above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

fn open(name: &str, flags: i32) -> Result<*mut c_void, String> {
    let c = CString::new(name).map_err(|_| format!("{name:?}: a path with a NUL byte"))?;
    // SAFETY: a NUL-terminated name; dlopen runs the library's constructors, which CUPTI's
    // and nvperf's are made for.
    let h = unsafe { libc::dlopen(c.as_ptr(), flags) };
    if h.is_null() {
        Err(dlerror())
    } else {
        Ok(h)
    }
}

/// CUPTI at `path`, with the `libnvperf_host.so` in its folder opened first (global), where
/// CUPTI's own lookup by name finds it.
fn open_path(path: &Path) -> Result<*mut c_void, String> {
    let nvperf = path
        .parent()
        .unwrap_or(Path::new("."))
        .join("libnvperf_host.so");
    if nvperf.is_file() {
        open(
            &nvperf.to_string_lossy(),
            libc::RTLD_NOW | libc::RTLD_GLOBAL,
        )
        .map_err(|e| format!("cannot load {}: {e}", nvperf.display()))?;
    }
    open(&path.to_string_lossy(), libc::RTLD_NOW | libc::RTLD_LOCAL)
}

/// CUPTI by its name on the loader's search path, else in the toolkit's folders: the name of
/// what was opened, or the first error.
fn open_default() -> (String, Result<*mut c_void, String>) {
    let soname = rtrace_format::CUPTI_SONAME;
    let first = open(soname, libc::RTLD_NOW | libc::RTLD_LOCAL);
    if first.is_ok() {
        return (soname.to_string(), first);
    }
    for dir in rtrace_format::CUPTI_DIRS {
        let path = Path::new(dir).join(soname);
        if path.is_file() {
            return (path.to_string_lossy().into_owned(), open_path(&path));
        }
    }
    let looked = first.map_err(|e| {
        format!(
            "{e}; not in {} either",
            rtrace_format::CUPTI_DIRS.join(", ")
        )
    });
    (soname.to_string(), looked)
}

/// A symbol's address as the function pointer type `F`.
///
/// # Safety
/// `F` is a function pointer type matching the symbol's C signature.
unsafe fn as_fn<F: Copy>(p: *mut c_void) -> F {
    assert_eq!(size_of::<F>(), size_of::<*mut c_void>());
    // SAFETY: same size (checked); the caller vouches for the signature.
    unsafe { std::mem::transmute_copy(&p) }
}

impl Cupti {
    /// Loads CUPTI: `path` when given, else `libcupti.so.13` from the loader's search path,
    /// else from the CUDA toolkit's folders ([`rtrace_format::CUPTI_DIRS`], as the library
    /// looks). CUPTI opened by a path gets the `libnvperf_host.so` in its folder opened first.
    pub fn load(path: Option<&Path>) -> Result<Cupti, String> {
        let (name, handle) = match path {
            Some(p) => (p.to_string_lossy().into_owned(), open_path(p)),
            None => open_default(),
        };
        let handle = handle.map_err(|e| {
            format!(
                "cannot load CUPTI ({e}); give --cupti PATH or set {}",
                rtrace_format::env::CUPTI_LIBRARY
            )
        })?;
        let sym = |s: &str| -> Result<*mut c_void, String> {
            let c = CString::new(s).expect("a symbol name");
            // SAFETY: a live handle from dlopen and a NUL-terminated name.
            let f = unsafe { libc::dlsym(handle, c.as_ptr()) };
            if f.is_null() {
                Err(format!("{name} has no {s}: CUPTI 13 is needed"))
            } else {
                Ok(f)
            }
        };
        // SAFETY (each as_fn): the symbol is the C function of that name declared in
        // cupti_result.h / cupti_profiler_host.h, whose signature the field's type repeats.
        unsafe {
            Ok(Cupti {
                result_string: as_fn(sym("cuptiGetResultString")?),
                initialize: as_fn(sym("cuptiProfilerHostInitialize")?),
                deinitialize: as_fn(sym("cuptiProfilerHostDeinitialize")?),
                supported_chips: as_fn(sym("cuptiProfilerHostGetSupportedChips")?),
                base_metrics: as_fn(sym("cuptiProfilerHostGetBaseMetrics")?),
                add_metrics: as_fn(sym("cuptiProfilerHostConfigAddMetrics")?),
                config_image_size: as_fn(sym("cuptiProfilerHostGetConfigImageSize")?),
                config_image: as_fn(sym("cuptiProfilerHostGetConfigImage")?),
                num_passes: as_fn(sym("cuptiProfilerHostGetNumOfPasses")?),
                range_name: as_fn(sym("cuptiProfilerHostGetRangeName")?),
                evaluate: as_fn(sym("cuptiProfilerHostEvaluateToGpuValues")?),
                profiler_initialize: as_fn(sym("cuptiProfilerInitialize")?),
                device_chip_name: as_fn(sym("cuptiDeviceGetChipName")?),
                path: name,
            })
        }
    }

    /// The file or name CUPTI was loaded from.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The address of CUPTI's entry point `name` (the library opened again by what it was
    /// loaded from, which finds it already loaded), for the parts of CUPTI this type does not
    /// wrap (the PM sampling target API: [`crate::sampler`]).
    pub(crate) fn symbol(&self, name: &CStr) -> Result<*mut c_void, String> {
        let handle = open(
            &self.path,
            libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_NOLOAD,
        )?;
        // SAFETY: a live handle from dlopen and a NUL-terminated name.
        let f = unsafe { libc::dlsym(handle, name.as_ptr()) };
        if f.is_null() {
            Err(format!(
                "{} has no {}: CUPTI 13 is needed",
                self.path,
                name.to_string_lossy()
            ))
        } else {
            Ok(f)
        }
    }

    /// CUPTI's name for a result, e.g. `CUPTI_ERROR_INVALID_PARAMETER`.
    pub(crate) fn result_text(&self, r: CuptiResult) -> String {
        let mut s: *const c_char = ptr::null();
        // SAFETY: CUPTI writes a pointer to a static string into `s`.
        let ok = unsafe { (self.result_string)(r, &mut s) };
        if ok != 0 || s.is_null() {
            return format!("CUPTI error {r}");
        }
        // SAFETY: a static NUL-terminated string (above).
        unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
    }

    fn check(&self, call: &str, r: CuptiResult) -> Result<(), String> {
        match r {
            0 => Ok(()),
            // What the host calls return when libcupti found no libnvperf_host.so.
            ERROR_NOT_INITIALIZED => Err(format!(
                "{call} failed: {} (libcupti loads libnvperf_host.so by name: put it beside {} \
                 or on LD_LIBRARY_PATH)",
                self.result_text(r),
                self.path
            )),
            _ => Err(format!("{call} failed: {}", self.result_text(r))),
        }
    }

    /// The chip of this machine's first GPU, as CUPTI names it: the driver (`libcuda.so.1`,
    /// opened here) must find a device (`cuInit`, `cuDeviceGetCount`), then CUPTI's target
    /// API names it (`cuptiProfilerInitialize`, `cuptiDeviceGetChipName`). Err says why not.
    pub fn local_chip(&self) -> Result<String, String> {
        type InitFn = unsafe extern "C" fn(u32) -> u32;
        type CountFn = unsafe extern "C" fn(*mut i32) -> u32;
        let driver = open("libcuda.so.1", libc::RTLD_NOW | libc::RTLD_LOCAL)
            .map_err(|e| format!("no CUDA driver here ({e})"))?;
        let sym = |s: &CStr| {
            // SAFETY: a live handle from dlopen and a NUL-terminated name.
            let f = unsafe { libc::dlsym(driver, s.as_ptr()) };
            (!f.is_null())
                .then_some(f)
                .ok_or_else(|| format!("libcuda.so.1 has no {}", s.to_string_lossy()))
        };
        // SAFETY: cuInit and cuDeviceGetCount as cuda.h declares them.
        let (init, count): (InitFn, CountFn) =
            unsafe { (as_fn(sym(c"cuInit")?), as_fn(sym(c"cuDeviceGetCount")?)) };
        // SAFETY: plain driver calls with valid arguments.
        let rc = unsafe { init(0) };
        if rc != 0 {
            return Err(format!("the CUDA driver finds no GPU (cuInit: error {rc})"));
        }
        let mut n = 0;
        // SAFETY: as above; `n` is written.
        if unsafe { count(&mut n) } != 0 || n < 1 {
            return Err("the CUDA driver finds no GPU".to_string());
        }
        let mut init = ProfilerInitialize::new();
        // SAFETY: a params struct laid out as the header's.
        let r = unsafe { call(self.profiler_initialize, &mut init) };
        self.check("cuptiProfilerInitialize", r)?;
        let mut p = DeviceGetChipName::new();
        // SAFETY: as above; CUPTI writes a pointer to a name it owns.
        let r = unsafe { call(self.device_chip_name, &mut p) };
        self.check("cuptiDeviceGetChipName", r)?;
        if p.chip_name.is_null() {
            return Err("cuptiDeviceGetChipName gave no name".to_string());
        }
        // SAFETY: a NUL-terminated name CUPTI owns.
        Ok(unsafe { CStr::from_ptr(p.chip_name) }
            .to_string_lossy()
            .into_owned())
    }

    /// The chips the library knows (`GA100`, `GH100`, ...), in its order.
    pub fn supported_chips(&self) -> Result<Vec<String>, String> {
        let mut p = GetSupportedChipsParams::new();
        // SAFETY: a params struct laid out as the header's, its size set.
        let r = unsafe { call(self.supported_chips, &mut p) };
        self.check("cuptiProfilerHostGetSupportedChips", r)?;
        // SAFETY: CUPTI returns `num_chips` NUL-terminated names it owns.
        Ok(unsafe { strings(p.chip_names, p.num_chips) })
    }

    /// CUPTI's name for range `range` of a counter data image (`0`, `1`, ... in auto range
    /// mode, the pushed names in user range mode).
    pub fn range_name(&self, counter_data: &[u8], range: usize) -> Result<String, String> {
        let delimiter = c"/";
        let mut p = GetRangeNameParams {
            counter_data_image: counter_data.as_ptr(),
            counter_data_image_size: counter_data.len(),
            range_index: range,
            delimiter: delimiter.as_ptr(),
            ..GetRangeNameParams::new()
        };
        let call = "cuptiProfilerHostGetRangeName";
        let answer = isolated(call, || {
            // SAFETY: a params struct laid out as the header's; the image and the delimiter
            // outlive the call.
            let r = unsafe { (self.range_name)(&mut p) };
            let mut out = r.to_le_bytes().to_vec();
            if r == 0 && !p.range_name.is_null() {
                // SAFETY: CUPTI returned a NUL-terminated string it allocated for the caller
                // (the header says so); copied, in the child, which exits right after.
                out.extend(unsafe { CStr::from_ptr(p.range_name) }.to_bytes());
            }
            out
        })?;
        let (r, name) = answer.split_at(4);
        self.check(call, u32::from_le_bytes(r.try_into().expect("4 bytes")))?;
        Ok(String::from_utf8_lossy(name).into_owned())
    }

    /// A range profiler host object for `chip`.
    pub fn host(&self, chip: &str) -> Result<Host<'_>, String> {
        self.host_of(chip, PROFILER_TYPE_RANGE_PROFILER, None)
    }

    /// A host object for `chip` and one `CUpti_ProfilerType`; for a device, with its
    /// counter availability image.
    fn host_of(
        &self,
        chip: &str,
        profiler_type: u32,
        availability: Option<&[u8]>,
    ) -> Result<Host<'_>, String> {
        let name = CString::new(chip).map_err(|_| format!("{chip:?}: not a chip name"))?;
        let mut p = InitializeParams {
            profiler_type,
            chip_name: name.as_ptr(),
            // None: a host object for a chip, not a device.
            counter_availability_image: availability.map_or(ptr::null(), <[u8]>::as_ptr),
            ..InitializeParams::new()
        };
        // SAFETY: a params struct laid out as the header's; `name` outlives the call.
        let r = unsafe { call(self.initialize, &mut p) };
        self.check(&format!("cuptiProfilerHostInitialize for {chip}"), r)?;
        Ok(Host {
            cupti: self,
            object: p.host_object,
        })
    }
}

/// `n` C strings from CUPTI, copied.
///
/// # Safety
/// `names` points to `n` valid NUL-terminated strings (or `n` is 0).
unsafe fn strings(names: *const *const c_char, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            // SAFETY: the caller's promise.
            unsafe { CStr::from_ptr(*names.add(i)) }
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

/// A host object (`CUpti_Profiler_Host_Object`) for one chip; deinitialized when dropped.
/// A failed `add_metrics` leaves it unusable (later calls fail with `CUPTI_ERROR_UNKNOWN`):
/// try a doubtful name on an object of its own.
pub struct Host<'a> {
    cupti: &'a Cupti,
    object: *mut c_void,
}

impl Host<'_> {
    /// The chip's base metrics of one `CUpti_MetricType` (see [`METRIC_TYPES`]).
    pub fn base_metrics(&self, metric_type: u32) -> Result<Vec<String>, String> {
        let mut p = GetBaseMetricsParams {
            host_object: self.object,
            metric_type,
            ..GetBaseMetricsParams::new()
        };
        // SAFETY: a params struct laid out as the header's, with a live host object.
        let r = unsafe { call(self.cupti.base_metrics, &mut p) };
        self.cupti.check("cuptiProfilerHostGetBaseMetrics", r)?;
        // SAFETY: CUPTI returns `num_metrics` NUL-terminated names it owns.
        Ok(unsafe { strings(p.metric_names, p.num_metrics) })
    }

    /// Adds metrics to the configuration.
    pub fn add_metrics(&mut self, names: &[&str]) -> Result<(), String> {
        let owned: Vec<CString> = names
            .iter()
            .map(|n| CString::new(*n).map_err(|_| format!("{n:?}: not a metric name")))
            .collect::<Result<_, _>>()?;
        let ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        let mut p = ConfigAddMetricsParams {
            host_object: self.object,
            metric_names: ptrs.as_ptr(),
            num_metrics: ptrs.len(),
            ..ConfigAddMetricsParams::new()
        };
        // SAFETY: a params struct laid out as the header's; the names outlive the call.
        let r = unsafe { call(self.cupti.add_metrics, &mut p) };
        self.cupti.check("cuptiProfilerHostConfigAddMetrics", r)
    }

    /// The configuration image of the metrics added so far.
    pub fn config_image(&self) -> Result<Vec<u8>, String> {
        let mut s = GetConfigImageSizeParams {
            host_object: self.object,
            ..GetConfigImageSizeParams::new()
        };
        // SAFETY: a params struct laid out as the header's, with a live host object.
        let r = unsafe { call(self.cupti.config_image_size, &mut s) };
        self.cupti.check("cuptiProfilerHostGetConfigImageSize", r)?;
        let mut image = vec![0u8; s.config_image_size];
        let mut p = GetConfigImageParams {
            host_object: self.object,
            config_image_size: image.len(),
            config_image: image.as_mut_ptr(),
            ..GetConfigImageParams::new()
        };
        // SAFETY: as above; `image` holds `config_image_size` bytes.
        let r = unsafe { call(self.cupti.config_image, &mut p) };
        self.cupti.check("cuptiProfilerHostGetConfigImage", r)?;
        Ok(image)
    }

    /// The values of `metrics` in range `range` of `counter_data`, an image recorded on this
    /// host object's chip. Fails as a whole when one of them cannot be evaluated (its counters
    /// were not collected, or the image is not one): [`Host::evaluate_each`] says which.
    pub fn evaluate(
        &self,
        counter_data: &[u8],
        range: usize,
        metrics: &[&str],
    ) -> Result<Vec<f64>, String> {
        self.evaluate_image(counter_data, range, metrics)?
    }

    /// [`Host::evaluate`]: the outer error when the image cannot be read at all (CUPTI
    /// crashed on it), the inner one when CUPTI refused the call.
    fn evaluate_image(
        &self,
        counter_data: &[u8],
        range: usize,
        metrics: &[&str],
    ) -> Result<Result<Vec<f64>, String>, String> {
        let owned: Result<Vec<CString>, String> = metrics
            .iter()
            .map(|n| CString::new(*n).map_err(|_| format!("{n:?}: not a metric name")))
            .collect::<Result<_, _>>();
        let owned: Vec<CString> = match owned {
            Ok(o) => o,
            Err(e) => return Ok(Err(e)),
        };
        let ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        let mut values = vec![f64::NAN; ptrs.len()];
        let mut p = EvaluateParams {
            host_object: self.object,
            counter_data_image: counter_data.as_ptr(),
            counter_data_image_size: counter_data.len(),
            range_index: range,
            metric_names: ptrs.as_ptr(),
            num_metrics: ptrs.len(),
            metric_values: values.as_mut_ptr(),
            ..EvaluateParams::new()
        };
        let call = "cuptiProfilerHostEvaluateToGpuValues";
        let answer = isolated(call, || {
            // SAFETY: a params struct laid out as the header's; the image, the names and
            // `values` (one f64 per name) outlive the call.
            let r = unsafe { (self.cupti.evaluate)(&mut p) };
            let mut out = r.to_le_bytes().to_vec();
            if r == 0 {
                // SAFETY: `values` is written by the call above through `p`, read after it.
                let written = unsafe { std::slice::from_raw_parts(p.metric_values, values.len()) };
                written.iter().for_each(|v| out.extend(v.to_le_bytes()));
            }
            out
        })?;
        let (r, rest) = answer.split_at(4);
        if let Err(e) = self
            .cupti
            .check(call, u32::from_le_bytes(r.try_into().expect("4 bytes")))
        {
            return Ok(Err(e));
        }
        if rest.len() != values.len() * 8 {
            return Err(format!(
                "{call}: {} bytes of values for {} metrics",
                rest.len(),
                values.len()
            ));
        }
        for (v, b) in values.iter_mut().zip(rest.chunks_exact(8)) {
            *v = f64::from_le_bytes(b.try_into().expect("8 bytes"));
        }
        Ok(Ok(values))
    }

    /// Each of `metrics` in range `range` of `counter_data`: its value, or why CUPTI could not
    /// evaluate it from that image (the metrics are tried one by one when CUPTI refuses them
    /// together; an image CUPTI cannot read at all gives every metric that one reason).
    pub fn evaluate_each(
        &self,
        counter_data: &[u8],
        range: usize,
        metrics: &[&str],
    ) -> Vec<Result<f64, String>> {
        match self.evaluate_image(counter_data, range, metrics) {
            Ok(Ok(all)) => return all.into_iter().map(Ok).collect(),
            // Unreadable: the same reason for each, without a try per metric.
            Err(unreadable) => return metrics.iter().map(|_| Err(unreadable.clone())).collect(),
            Ok(Err(_)) => {}
        }
        metrics
            .iter()
            .map(|m| {
                self.evaluate(counter_data, range, &[m])
                    .map(|v| v[0])
                    .map_err(|e| format!("{m}: {e}"))
            })
            .collect()
    }

    /// The replay passes the metrics added so far cost.
    pub fn passes(&self) -> Result<usize, String> {
        let mut image = self.config_image()?;
        let mut p = GetNumOfPassesParams {
            config_image_size: image.len(),
            config_image: image.as_mut_ptr(),
            ..GetNumOfPassesParams::new()
        };
        // SAFETY: a params struct laid out as the header's; `image` outlives the call.
        let r = unsafe { call(self.cupti.num_passes, &mut p) };
        self.cupti.check("cuptiProfilerHostGetNumOfPasses", r)?;
        Ok(p.num_of_passes)
    }
}

impl Drop for Host<'_> {
    fn drop(&mut self) {
        let mut p = DeinitializeParams {
            host_object: self.object,
            ..DeinitializeParams::new()
        };
        // SAFETY: the live host object this value owns, deinitialized once.
        unsafe { call(self.cupti.deinitialize, &mut p) };
    }
}

/// Where CUPTI is: `--cupti`, else `$RTRACE_CUPTI_LIBRARY`, else none (the loader's search).
pub fn library_path(option: Option<&Path>) -> Option<PathBuf> {
    option.map(Path::to_path_buf).or_else(|| {
        std::env::var_os(rtrace_format::env::CUPTI_LIBRARY)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
}
