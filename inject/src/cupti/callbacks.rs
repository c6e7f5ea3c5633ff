//! The Callback API: rtrace's subscriber, its callback on the API-enter site of the driver
//! functions that make GPU work (linking CUPTI's correlation ids to rtrace's, no allocation and
//! no lock there), on both sites of every runtime function (runtime API records,
//! [`crate::runtime_api`]), and the resource callbacks for modules and PC sampling's contexts.

use super::api::{describe, Api};
use super::layout;
use super::modules;
use super::pcsampling;
use super::profiler;
use super::share;
use super::state::CUPTI;
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const CB_DOMAIN_DRIVER_API: u32 = layout::CUPTI_CB_DOMAIN_DRIVER_API;
const CB_DOMAIN_RESOURCE: u32 = layout::CUPTI_CB_DOMAIN_RESOURCE;
const CB_DOMAIN_RUNTIME_API: u32 = layout::CUPTI_CB_DOMAIN_RUNTIME_API;
const CB_SITE_ENTER: u32 = layout::CUPTI_API_ENTER;
const CB_DATA_RETURN_VALUE: usize = layout::callback_data::FUNCTION_RETURN_VALUE;
const CB_DATA_SITE: usize = layout::callback_data::CALLBACK_SITE;
const CB_DATA_CORRELATION: usize = layout::callback_data::CORRELATION_ID;
const CB_DATA_SYMBOL: usize = layout::callback_data::SYMBOL_NAME;
/// Upper bound of driver callback ids (`CUPTI_DRIVER_TRACE_CBID_SIZE` is 807 in CUPTI 13.0).
const MAX_DRIVER_CBID: u32 = 4096;

/// Driver functions whose calls make the GPU activity records `kinds` asks for (GPU work, and
/// allocations and frees, synchronizations, streams when asked): their CUPTI correlation ids
/// are linked.
pub(super) fn makes_gpu_work(name: &[u8], kinds: crate::config::GpuKinds) -> bool {
    const WORK: [&[u8]; 4] = [b"cuLaunch", b"cuMemcpy", b"cuMemset", b"cuGraphLaunch"];
    if WORK.iter().any(|p| name.starts_with(p)) && !name.starts_with(b"cuLaunchHostFunc") {
        return true;
    }
    const MEMORY: [&[u8]; 3] = [b"cuMemAlloc", b"cuMemFree", b"cuMemHostAlloc"];
    const SYNC: [&[u8]; 6] = [
        b"cuCtxSynchronize",
        b"cuStreamSynchronize",
        b"cuEventSynchronize",
        b"cuStreamWaitEvent",
        b"cuStreamQuery",
        b"cuEventQuery",
    ];
    // Stream records carry the correlation id of the call that created the stream: one that
    // creates streams, or a context (with its NULL stream and the driver's own). CUPTI gives a
    // call an id only when something asks for one (else the record has the thread's last).
    const STREAMS: [&[u8]; 5] = [
        b"cuStreamCreate",
        b"cuCtxCreate",
        b"cuDevicePrimaryCtxRetain",
        b"cuGreenCtxCreate",
        b"cuGreenCtxStreamCreate",
    ];
    (kinds.memory && (MEMORY.iter().any(|p| name.starts_with(p)) || VMM.contains(&name)))
        || (kinds.sync && SYNC.iter().any(|p| name.starts_with(p)))
        || (kinds.resources && STREAMS.iter().any(|p| name.starts_with(p)))
}

/// Runtime functions that never make GPU work, activity records or streams, called often
/// (PyTorch asks `cudaGetDevice` and `cudaGetLastError` around every operation): their calls
/// are recorded, but CUPTI's correlation id is not linked (no ring entry, no link for the
/// worker). Every other runtime function is linked, so a call this list misses still links.
pub(super) fn runtime_never_makes_work(name: &[u8]) -> bool {
    // Queries only: no function here can create a context or load a module (cudaSetDevice
    // and lazily loaded modules' cudaFuncGetAttributes can, and stay linked).
    const QUERIES: [&[u8]; 9] = [
        b"cudaGetDevice", // and cudaGetDeviceCount, cudaGetDeviceProperties, cudaGetDeviceFlags
        b"cudaGetLastError",
        b"cudaPeekAtLastError",
        b"cudaDeviceGetAttribute",
        b"cudaPointerGetAttributes",
        b"cudaStreamIsCapturing",
        b"cudaStreamGetCaptureInfo",
        b"cudaDriverGetVersion",
        b"cudaRuntimeGetVersion",
    ];
    QUERIES.iter().any(|p| name.starts_with(p))
}

/// Runtime callback ids whose CUPTI correlation ids are not linked
/// ([`runtime_never_makes_work`]), one bit each; set once when the runtime domain is enabled.
static RUNTIME_UNLINKED: [AtomicU64; 16] = [const { AtomicU64::new(0) }; 16];

/// rtrace enabled the runtime domain: every runtime callback id of the table (1 to its end) is
/// rtrace's ([`enable_runtime`] marks them all in `share`, and marks are never taken back), so
/// [`on_api`] knows without looking it up (about 12 instructions on each of the two callbacks
/// of every runtime call).
static RUNTIME_ALL_OURS: AtomicBool = AtomicBool::new(false);

/// Whether a callback of `domain` and `cbid` is rtrace's.
#[inline(always)]
fn ours(domain: u32, cbid: u32) -> bool {
    const RUNTIME_CBIDS: u32 = rtrace_format::RUNTIME_API_CBID_NAMES.len() as u32;
    if domain == CB_DOMAIN_RUNTIME_API
        && cbid.wrapping_sub(1) < RUNTIME_CBIDS - 1
        && RUNTIME_ALL_OURS.load(Ordering::Relaxed)
    {
        return true;
    }
    share::ours(domain, cbid)
}

fn runtime_unlinked(cbid: u32) -> bool {
    let c = cbid as usize;
    RUNTIME_UNLINKED
        .get(c / 64)
        .is_some_and(|w| w.load(Ordering::Relaxed) & (1 << (c % 64)) != 0)
}

/// Virtual memory management: physical allocations, mappings and address ranges.
const VMM: [&[u8]; 6] = [
    b"cuMemCreate",
    b"cuMemRelease",
    b"cuMemMap",
    b"cuMemUnmap",
    b"cuMemAddressReserve",
    b"cuMemAddressFree",
];

/// What [`subscribe`] enabled.
pub(super) struct Subscribed {
    /// Driver functions whose calls are linked.
    pub functions: usize,
    /// The module-loaded resource callback, when resources were asked for.
    pub modules: Option<Result<(), String>>,
    /// The runtime API domain (runtime API records), when they come by CUPTI's route.
    pub runtime: Option<Result<(), String>>,
}

/// Subscribes rtrace's callback to the API-enter site of every GPU-work driver function, and
/// to modules as they load when `kinds` asks for resources.
pub(super) fn subscribe(api: &Api, kinds: crate::config::GpuKinds) -> Result<Subscribed, String> {
    let mut sub: *mut c_void = std::ptr::null_mut();
    // SAFETY: registers a plain extern "C" callback; `sub` is CUPTI's out-parameter.
    let rc = unsafe { (api.subscribe)(&mut sub, on_api, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(format!(
            "cuptiSubscribe: {} (another CUPTI client?)",
            describe(api, rc)
        ));
    }
    CUPTI.subscriber.store(sub, Ordering::Release);
    let mut enabled = 0;
    for cbid in 1..MAX_DRIVER_CBID {
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: CUPTI writes a pointer to a static string, or fails past the last id.
        let rc = unsafe { (api.callback_name)(CB_DOMAIN_DRIVER_API, cbid, &mut name) };
        if rc != 0 || name.is_null() {
            continue;
        }
        // SAFETY: a NUL-terminated static string.
        if makes_gpu_work(unsafe { CStr::from_ptr(name) }.to_bytes(), kinds) {
            // SAFETY: plain CUPTI call on our subscriber.
            if unsafe { (api.enable_callback)(1, sub, CB_DOMAIN_DRIVER_API, cbid) } == 0 {
                share::mark_ours(CB_DOMAIN_DRIVER_API, cbid);
                enabled += 1;
            }
        }
    }
    let runtime = (crate::state::config().runtime_api == crate::runtime_api::Route::Cupti)
        .then(|| enable_runtime(api, sub));
    let sampling = api.pc_sampling.as_ref().is_some_and(|r| r.is_ok());
    let contexts: &[(u32, &str)] = if sampling {
        &[
            (
                layout::CUPTI_CBID_RESOURCE_CONTEXT_CREATED,
                "CONTEXT_CREATED",
            ),
            (
                layout::CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
                "CONTEXT_DESTROY_STARTING",
            ),
        ]
    } else if CUPTI.prof.application.load(Ordering::Acquire) {
        // Application replay stops a context's profiling before the context goes.
        &[(
            layout::CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
            "CONTEXT_DESTROY_STARTING",
        )]
    } else {
        &[]
    };
    let module_cbids: &[(u32, &str)] = if kinds.resources {
        &[
            (layout::CUPTI_CBID_RESOURCE_MODULE_LOADED, "MODULE_LOADED"),
            (
                layout::CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING,
                "MODULE_UNLOAD_STARTING",
            ),
        ]
    } else {
        &[]
    };
    // The resource callbacks: modules when resources are asked for, contexts for PC sampling
    // and application replay (`modules` says how enabling them went).
    let wanted = kinds.resources || !contexts.is_empty();
    let modules = wanted.then(|| {
        for &(cbid, name) in module_cbids.iter().chain(contexts) {
            // SAFETY: plain CUPTI call on our subscriber.
            match unsafe { (api.enable_callback)(1, sub, CB_DOMAIN_RESOURCE, cbid) } {
                0 => share::mark_ours(CB_DOMAIN_RESOURCE, cbid),
                rc => {
                    return Err(format!(
                        "cuptiEnableCallback({name}): {}",
                        describe(api, rc)
                    ))
                }
            }
        }
        Ok(())
    });
    Ok(Subscribed {
        functions: enabled,
        modules,
        runtime,
    })
}

/// Every runtime function's callbacks on rtrace's subscriber (entry and exit).
fn enable_runtime(api: &Api, sub: *mut c_void) -> Result<(), String> {
    // SAFETY: plain CUPTI call on our subscriber.
    match unsafe { (api.enable_domain)(1, sub, CB_DOMAIN_RUNTIME_API) } {
        0 => {
            for (cbid, name) in rtrace_format::RUNTIME_API_CBID_NAMES
                .iter()
                .enumerate()
                .skip(1)
            {
                share::mark_ours(CB_DOMAIN_RUNTIME_API, cbid as u32);
                if runtime_never_makes_work(name.as_bytes()) {
                    if let Some(w) = RUNTIME_UNLINKED.get(cbid / 64) {
                        w.fetch_or(1 << (cbid % 64), Ordering::Relaxed);
                    }
                }
            }
            RUNTIME_ALL_OURS.store(true, Ordering::Relaxed);
            Ok(())
        }
        rc => Err(format!(
            "cuptiEnableDomain(RUNTIME_API): {}",
            describe(api, rc)
        )),
    }
}

/// CUPTI's callback: at the entry of a GPU-work call, link CUPTI's correlation id to
/// rtrace's for the call in progress (no allocation, no lock); a module loaded or about to be
/// unloaded goes to [`modules::on_module`]; then the program's own callback, if it enabled this one.
extern "C" fn on_api(user: *mut c_void, domain: u32, cbid: u32, data: *const u8) {
    if ours(domain, cbid) {
        our_callback(user, domain, cbid, data);
    }
    share::forward(domain, cbid, data);
}

fn our_callback(_user: *mut c_void, domain: u32, cbid: u32, data: *const u8) {
    if data.is_null() {
        return;
    }
    if domain == CB_DOMAIN_RESOURCE {
        let _ = std::panic::catch_unwind(|| on_resource(cbid, data));
        return;
    }
    if domain == CB_DOMAIN_RUNTIME_API {
        on_runtime(cbid, data);
        return;
    }
    if domain != CB_DOMAIN_DRIVER_API {
        return;
    }
    // SAFETY: `data` is CUPTI's CUpti_CallbackData for this call.
    let (site, correlation) = unsafe {
        (
            (data.add(CB_DATA_SITE) as *const u32).read_unaligned(),
            (data.add(CB_DATA_CORRELATION) as *const u32).read_unaligned(),
        )
    };
    if site == CB_SITE_ENTER {
        // SAFETY: as above; `symbolName`, a launch's kernel name (null for other calls), is a
        // pointer field: only its value is kept.
        let symbol = unsafe { (data.add(CB_DATA_SYMBOL) as *const u64).read_unaligned() };
        crate::thread::link_current(correlation, symbol);
    }
}

/// A runtime function's entry or exit: a runtime API record (no allocation, no lock).
#[inline]
fn on_runtime(cbid: u32, data: *const u8) {
    // SAFETY: `data` is CUPTI's CUpti_CallbackData for this call.
    let (site, correlation) = unsafe {
        (
            (data.add(CB_DATA_SITE) as *const u32).read_unaligned(),
            (data.add(CB_DATA_CORRELATION) as *const u32).read_unaligned(),
        )
    };
    if site == CB_SITE_ENTER {
        let source = if runtime_unlinked(cbid) {
            0
        } else {
            correlation
        };
        crate::runtime_api::enter(source, crate::capture::recording());
        return;
    }
    // SAFETY: as above; at exit `functionReturnValue` points to the call's `cudaError_t`.
    let result = unsafe {
        let p = (data.add(CB_DATA_RETURN_VALUE) as *const *const u32).read_unaligned();
        if p.is_null() {
            0
        } else {
            p.read_unaligned()
        }
    };
    crate::runtime_api::exit(cbid, result);
}

/// A resource callback: modules for GPU activity, contexts and modules for PC sampling.
fn on_resource(cbid: u32, data: *const u8) {
    use layout::resource_data as r;
    // SAFETY: `data` is CUPTI's CUpti_ResourceData.
    let context = unsafe { (data.add(r::CONTEXT) as *const *mut c_void).read_unaligned() };
    let api = CUPTI.api.get();
    match cbid {
        layout::CUPTI_CBID_RESOURCE_MODULE_LOADED => {
            modules::on_module(data, false);
            if !context.is_null() {
                pcsampling::on_module_loaded(context);
            }
        }
        layout::CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING => {
            if let (false, Some(api)) = (context.is_null(), api) {
                pcsampling::on_module_unloading(api, context);
            }
            modules::on_module(data, true);
        }
        layout::CUPTI_CBID_RESOURCE_CONTEXT_CREATED => {
            if let (false, Some(api)) = (context.is_null(), api) {
                pcsampling::on_context_created(api, context);
            }
        }
        layout::CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING => {
            if let (false, Some(api)) = (context.is_null(), api) {
                pcsampling::on_context_destroying(api, context);
                profiler::range::context_destroying(context);
            }
        }
        _ => {}
    }
}
