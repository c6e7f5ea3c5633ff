//! GPU activity (kernels, memory copies, memsets, allocations and frees, host synchronizations,
//! and the contexts, streams, modules and functions they use) through CUPTI's Activity API,
//! loaded at run time. Opt-in (`RTRACE_GPU_ACTIVITY=1`): it adds 0.75–0.84 µs per launch on an
//! H200, most of it CUPTI's own (see docs/benchmarks.md). CUPTI 13.0 serves one activity
//! client per process: a program that is a CUPTI client itself (the PyTorch profiler) is
//! served as a second one by rtrace (`share.rs`).
//! Allocation and synchronization records are optional: if CUPTI refuses them, the rest stays
//! on and a notice says so.
//!
//! - Enabled right after the program's first successful `cuInit`, on that thread, as rtrace's
//!   own code (CUPTI's driver calls are neither recorded nor rerouted), or earlier, when the
//!   program itself calls CUPTI first. CUPTI timestamps are put
//!   on rtrace's clock (`cuptiActivityRegisterTimestampCallback` → `CLOCK_MONOTONIC`).
//! - CUPTI fills buffers from a small recycled pool and hands full ones back through
//!   [`complete`], which only queues them. Every flush period the worker turns queued buffers
//!   into kernel/memcpy/memset/memory/sync/resource chunks ([`drain_into`]), and flushes CUPTI
//!   only if it handed back no buffer since the last period ([`flush_if_idle`]).
//! - Modules come from CUPTI's resource callbacks (`CUPTI_CBID_RESOURCE_MODULE_LOADED`,
//!   `..._MODULE_UNLOAD_STARTING`) on
//!   rtrace's subscriber, inside the loading call: CUPTI 13.0 refuses the MODULE activity kind
//!   (`CUPTI_ERROR_INVALID_KIND`); functions and contexts come as activity records.
//! - At exit, an `atexit` handler registered when CUPTI was enabled flushes CUPTI and converts
//!   everything while CUPTI is still alive (its destructor runs before rtrace's).
//! - Any failure leaves API tracing on and writes a notice saying why GPU activity is off.

/// CUPTI 13.0's record layouts and constants (generated from cupti_activity.h).
#[path = "../generated/cupti.rs"]
#[allow(dead_code, clippy::all)]
mod layout;

mod clockmap;
mod exports;
mod pcsampling;
mod records;
mod share;
#[cfg(test)]
mod tests;

use records::convert;
pub use records::{GpuBatch, Links};

use crate::output::Sink;
use crate::thread::internal;
use crate::{clock, diag, driver, state};
use rtrace_format::{
    ChunkKind, ContextRecord, CopyKind, FunctionRecord, KernelRecord, MemcpyRecord, MemoryKind,
    MemoryOperation, MemoryPoolType, MemoryRecord, MemsetRecord, ModuleRecord, PeerCopyRecord,
    StreamFlag, StreamRecord, SyncKind, SyncRecord, FLAG_CORRELATED, FLAG_IN_GRAPH, FLAG_UNLOADED,
};
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, Once, OnceLock};

/// Size of one CUPTI buffer, in 8-byte words (4 MiB).
const BUFFER_WORDS: usize = 1 << 19;
/// Buffers kept for reuse.
const POOL_MAX: usize = 16;
/// Buffers allocated when GPU activity starts, so that CUPTI's requests, which come on the
/// program's threads when a buffer fills, find one ready instead of allocating 4 MiB there.
const POOL_START: usize = 4;

type Buffer = Box<[u64]>;

type RequestFn = extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
type CompleteFn = extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
type TimestampFn = extern "C" fn() -> u64;

type RegisterFn = unsafe extern "C" fn(RequestFn, CompleteFn) -> i32;
type RegisterTimestampFn = unsafe extern "C" fn(TimestampFn) -> i32;
type EnableFn = unsafe extern "C" fn(i32) -> i32;
type EnableDomainFn = unsafe extern "C" fn(u32, *mut c_void, u32) -> i32;
type FlushFn = unsafe extern "C" fn(u32) -> i32;
type NextRecordFn = unsafe extern "C" fn(*mut u8, usize, *mut *mut u8) -> i32;
type DroppedFn = unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> i32;
type ResultStringFn = unsafe extern "C" fn(i32, *mut *const c_char) -> i32;
type CallbackFn = extern "C" fn(*mut c_void, u32, u32, *const u8);
type SubscribeFn = unsafe extern "C" fn(*mut *mut c_void, CallbackFn, *mut c_void) -> i32;
#[cfg_attr(test, allow(dead_code))]
type UnsubscribeFn = unsafe extern "C" fn(*mut c_void) -> i32;
type EnableCallbackFn = unsafe extern "C" fn(u32, *mut c_void, u32, u32) -> i32;
type CallbackNameFn = unsafe extern "C" fn(u32, u32, *mut *const c_char) -> i32;
type ContextIdFn = unsafe extern "C" fn(*mut c_void, *mut u32) -> i32;
type SetAttributeFn = unsafe extern "C" fn(u32, *mut usize, *mut c_void) -> i32;
type GetCubinCrcFn = unsafe extern "C" fn(*mut CubinCrcParams) -> i32;

/// `CUpti_GetCubinCrcParams` (cupti_pcsampling.h).
#[repr(C)]
struct CubinCrcParams {
    size: usize,
    cubin_size: usize,
    cubin: *const c_void,
    cubin_crc: u64,
}

/// `CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER` (cupti_activity.h, a `uint8_t`): the client
/// hands CUPTI zeroed buffers, so CUPTI does not zero each new one on the program's thread.
const ATTR_ZEROED_OUT_ACTIVITY_BUFFER: u32 = 5;

/// The CUPTI entry points rtrace uses.
#[cfg_attr(test, allow(dead_code))]
struct Api {
    register_callbacks: RegisterFn,
    register_timestamp: RegisterTimestampFn,
    enable: EnableFn,
    disable: EnableFn,
    flush_all: FlushFn,
    next_record: NextRecordFn,
    dropped: DroppedFn,
    result_string: ResultStringFn,
    subscribe: SubscribeFn,
    enable_callback: EnableCallbackFn,
    enable_domain: EnableDomainFn,
    callback_name: CallbackNameFn,
    /// `cuptiGetContextId`, for the context of a loaded module.
    context_id: ContextIdFn,
    /// `cuptiActivitySetAttribute`, if this CUPTI has it.
    set_attribute: Option<SetAttributeFn>,
    /// `cuptiGetCubinCrc`, if this CUPTI has it.
    cubin_crc: Option<GetCubinCrcFn>,
    /// The PC Sampling API when PC sampling is asked for (`Err`: why it cannot be had).
    pc_sampling: Option<Result<pcsampling::PcApi, String>>,
}

// SAFETY: plain function pointers into libcupti, callable from any thread.
unsafe impl Send for Api {}
// SAFETY: as above.
unsafe impl Sync for Api {}

static API: OnceLock<Api> = OnceLock::new();

const OFF: u8 = 0;
const ON: u8 = 1;
const DONE: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(OFF);
static ENABLE: Once = Once::new();

/// Full buffers, their valid byte counts, and whether CUPTI timed them on the program's clock,
/// waiting for the worker.
static FULL: Mutex<Vec<(Buffer, usize, bool)>> = Mutex::new(Vec::new());
/// Empty buffers for CUPTI to fill.
static POOL: Mutex<Vec<Buffer>> = Mutex::new(Vec::new());
/// Buffers handed to CUPTI are zeroed by rtrace (new ones are; the worker zeroes used ones
/// before they go back to the pool), and CUPTI was told so.
static ZEROED: AtomicBool = AtomicBool::new(false);
/// Buffers CUPTI has handed back so far, and their count at the last [`flush_if_idle`].
static COMPLETED: AtomicU64 = AtomicU64::new(0);
static COMPLETED_AT_LAST_LOOK: AtomicU64 = AtomicU64::new(0);
/// Records CUPTI reported as dropped.
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Status lines for the trace (GPU activity on, or why it is off), taken by the worker.
static NOTICES: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// The devices, read when GPU activity starts, for the worker to write.
static DEVICES: Mutex<Vec<rtrace_format::DeviceInfo>> = Mutex::new(Vec::new());
/// Modules loaded (from CUPTI's resource callback), for the worker to write.
static MODULES: Mutex<Vec<ModuleRecord>> = Mutex::new(Vec::new());
/// Their code images, for the worker to write; the hashes of those stored so far.
static IMAGES: Mutex<Vec<rtrace_format::ModuleImage>> = Mutex::new(Vec::new());
static IMAGE_HASHES: Mutex<Vec<u64>> = Mutex::new(Vec::new());

pub(crate) fn notice(msg: String) {
    diag::log(&["gpu activity: ", &msg]);
    if let Ok(mut n) = NOTICES.lock() {
        n.push(msg);
    }
}

/// The process's own libcupti if it has loaded one (PyTorch does), else `RTRACE_CUPTI_LIBRARY`,
/// else `libcupti.so.13` from the library path or the CUDA toolkit.
fn open_library() -> Result<*mut c_void, String> {
    let open = |name: &[u8], flags: i32| -> *mut c_void {
        let Ok(c) = CString::new(name) else {
            return std::ptr::null_mut();
        };
        // SAFETY: dlopen with a valid C string.
        unsafe { libc::dlopen(c.as_ptr(), flags) }
    };
    let loaded = open(b"libcupti.so.13", libc::RTLD_NOW | libc::RTLD_NOLOAD);
    if !loaded.is_null() {
        return Ok(loaded);
    }
    let mut tried = Vec::new();
    let mut candidates: Vec<Vec<u8>> = Vec::new();
    if let Some(p) = &state::config().cupti_library {
        candidates.push(p.as_bytes().to_vec());
    } else {
        candidates.push(b"libcupti.so.13".to_vec());
        for dir in [
            "/usr/local/cuda/extras/CUPTI/lib64",
            "/usr/local/cuda/targets/x86_64-linux/lib",
            "/usr/local/cuda-13.0/targets/x86_64-linux/lib",
        ] {
            candidates.push(format!("{dir}/libcupti.so.13").into_bytes());
        }
    }
    for c in candidates {
        let h = open(&c, libc::RTLD_NOW | libc::RTLD_LOCAL);
        if !h.is_null() {
            return Ok(h);
        }
        tried.push(String::from_utf8_lossy(&c).into_owned());
    }
    Err(format!(
        "no CUPTI library found (tried {})",
        tried.join(", ")
    ))
}

fn load() -> Result<Api, String> {
    let h = open_library()?;
    let sym = |name: &CStr| -> Result<*mut c_void, String> {
        let p = driver::real_dlsym(h, name.as_ptr());
        if p.is_null() {
            Err(format!("CUPTI lacks {}", name.to_string_lossy()))
        } else {
            Ok(p)
        }
    };
    // SAFETY: each symbol is the CUPTI function of that name, whose C signature (from
    // cupti_activity.h / cupti_result.h) is the function type it is transmuted to.
    unsafe {
        Ok(Api {
            register_callbacks: std::mem::transmute::<*mut c_void, RegisterFn>(sym(
                c"cuptiActivityRegisterCallbacks",
            )?),
            register_timestamp: std::mem::transmute::<*mut c_void, RegisterTimestampFn>(sym(
                c"cuptiActivityRegisterTimestampCallback",
            )?),
            enable: std::mem::transmute::<*mut c_void, EnableFn>(sym(c"cuptiActivityEnable")?),
            disable: std::mem::transmute::<*mut c_void, EnableFn>(sym(c"cuptiActivityDisable")?),
            flush_all: std::mem::transmute::<*mut c_void, FlushFn>(sym(c"cuptiActivityFlushAll")?),
            next_record: std::mem::transmute::<*mut c_void, NextRecordFn>(sym(
                c"cuptiActivityGetNextRecord",
            )?),
            dropped: std::mem::transmute::<*mut c_void, DroppedFn>(sym(
                c"cuptiActivityGetNumDroppedRecords",
            )?),
            result_string: std::mem::transmute::<*mut c_void, ResultStringFn>(sym(
                c"cuptiGetResultString",
            )?),
            subscribe: std::mem::transmute::<*mut c_void, SubscribeFn>(sym(c"cuptiSubscribe")?),
            enable_callback: std::mem::transmute::<*mut c_void, EnableCallbackFn>(sym(
                c"cuptiEnableCallback",
            )?),
            enable_domain: std::mem::transmute::<*mut c_void, EnableDomainFn>(sym(
                c"cuptiEnableDomain",
            )?),
            callback_name: std::mem::transmute::<*mut c_void, CallbackNameFn>(sym(
                c"cuptiGetCallbackName",
            )?),
            context_id: std::mem::transmute::<*mut c_void, ContextIdFn>(sym(c"cuptiGetContextId")?),
            set_attribute: sym(c"cuptiActivitySetAttribute")
                .ok()
                .map(|p| std::mem::transmute::<*mut c_void, SetAttributeFn>(p)),
            cubin_crc: sym(c"cuptiGetCubinCrc")
                .ok()
                .map(|p| std::mem::transmute::<*mut c_void, GetCubinCrcFn>(p)),
            pc_sampling: state::config()
                .pc_sampling
                .on
                .then(|| pcsampling::PcApi::load(sym)),
        })
    }
}

fn describe(api: &Api, rc: i32) -> String {
    let mut s: *const c_char = std::ptr::null();
    // SAFETY: CUPTI writes a pointer to a static string.
    if unsafe { (api.result_string)(rc, &mut s) } == 0 && !s.is_null() {
        // SAFETY: a NUL-terminated static string.
        return format!("{} ({rc})", unsafe { CStr::from_ptr(s) }.to_string_lossy());
    }
    format!("CUPTI error {rc}")
}

extern "C" fn timestamp() -> u64 {
    clock::now_ns()
}

extern "C" fn request(buf: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    let b = POOL
        .lock()
        .ok()
        .and_then(|mut p| p.pop())
        .unwrap_or_else(|| vec![0u64; BUFFER_WORDS].into_boxed_slice());
    let ptr = Box::into_raw(b) as *mut u64 as *mut u8;
    // SAFETY: CUPTI's out-parameters.
    unsafe {
        *buf = ptr;
        *size = BUFFER_WORDS * 8;
        *max_records = 0;
    }
}

extern "C" fn complete(ctx: *mut c_void, stream: u32, buf: *mut u8, _size: usize, valid: usize) {
    if buf.is_null() {
        return;
    }
    // SAFETY: `buf` is a buffer `request` leaked from a Box<[u64]> of BUFFER_WORDS words.
    let b: Buffer = unsafe {
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(
            buf as *mut u64,
            BUFFER_WORDS,
        ))
    };
    let program_clock = share::ON_PROGRAM_CLOCK.load(Ordering::Acquire);
    if let Some(api) = API.get() {
        let mut n = 0usize;
        // SAFETY: plain CUPTI query with a valid out-pointer.
        if unsafe { (api.dropped)(ctx, stream, &mut n) } == 0 {
            DROPPED.fetch_add(n as u64, Ordering::Relaxed);
        }
        let _ = std::panic::catch_unwind(|| {
            share::copy_to_program(api, ctx, stream, buf, valid.min(BUFFER_WORDS * 8))
        });
    }
    if let Ok(mut f) = FULL.lock() {
        f.push((b, valid, program_clock));
    }
    COMPLETED.fetch_add(1, Ordering::Release);
}

/// Enables GPU activity once, after the program's first successful `cuInit`.
pub fn after_cuinit() {
    if !state::config().gpu_activity.any() {
        return;
    }
    ENABLE.call_once(enable);
    // The devices, once the driver is up (GPU activity may have started before, when the
    // program called CUPTI first).
    if STATE.load(Ordering::Acquire) == ON {
        DEVICES_READ.call_once(|| {
            if let Ok(mut d) = DEVICES.lock() {
                *d = internal(crate::devices::device_infos);
            }
        });
    }
}

static DEVICES_READ: Once = Once::new();

fn enable() {
    internal(enable_now);
}

/// GPU activity could not start: says why, for PC sampling too when it was asked for.
fn off(why: String) {
    if state::config().pc_sampling.on {
        notice(format!("PC sampling off: {why}"));
    }
    notice(format!("GPU activity off: {why}"));
}

fn enable_now() {
    let api = match load() {
        Ok(api) => API.get_or_init(|| api),
        Err(e) => {
            return off(e);
        }
    };
    if let Ok(mut pool) = POOL.lock() {
        pool.extend((0..POOL_START).map(|_| vec![0u64; BUFFER_WORDS].into_boxed_slice()));
    }
    // SAFETY: registering a plain extern "C" callback with its documented signature.
    let rc = unsafe { (api.register_timestamp)(timestamp) };
    if rc != 0 {
        return off(format!(
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
        ZEROED.store(rc == 0, Ordering::Release);
    }
    // SAFETY: as above.
    let rc = unsafe { (api.register_callbacks)(request, complete) };
    if rc != 0 {
        return off(format!(
            "cuptiActivityRegisterCallbacks: {} (another CUPTI client?)",
            describe(api, rc)
        ));
    }
    let want = state::config().gpu_activity;
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
        if !on {
            continue;
        }
        // SAFETY: plain CUPTI call.
        let rc = unsafe { (api.enable)(kind as i32) };
        if rc == 0 {
            share::OUR_KINDS.fetch_or(1 << kind, Ordering::AcqRel);
            kinds.push(name);
        } else {
            notice(format!(
                "GPU activity without {name}: enabling them: {}",
                describe(api, rc)
            ));
        }
    }
    if kinds.is_empty() {
        return off("CUPTI enabled none of the kinds asked for".into());
    }
    ENABLED_BY.store(crate::sys::getpid(), Ordering::Release);
    STATE.store(ON, Ordering::Release);
    // SAFETY: registers a plain extern "C" function.
    unsafe { libc::atexit(at_exit) };
    // Modules come through the subscriber's resource callback.
    let subscribed = subscribe(api, want);
    let mut module_error = None;
    if let Ok(s) = &subscribed {
        match &s.modules {
            Some(Ok(())) => kinds.push("modules"),
            Some(Err(e)) => module_error = Some(e.clone()),
            None => {}
        }
    }
    let last = kinds.pop().unwrap_or_default();
    let listed = if kinds.is_empty() {
        last.to_string()
    } else {
        format!("{} and {last}", kinds.join(", "))
    };
    notice(format!("GPU activity on: {listed} through CUPTI"));
    match subscribed {
        Ok(s) => notice(format!(
            "GPU records carry rtrace correlation ids (CUPTI callbacks on {} driver functions)",
            s.functions
        )),
        Err(e) => notice(format!(
            "GPU records carry no rtrace correlation id{}: {e}",
            if want.resources {
                ", and no modules"
            } else {
                ""
            }
        )),
    }
    if let Some(e) = module_error {
        notice(format!("GPU activity without modules: {e}"));
    }
}

/// CUPTI's subscriber handle for rtrace's API callbacks (null: none).
static SUBSCRIBER: std::sync::atomic::AtomicPtr<c_void> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

const CB_DOMAIN_DRIVER_API: u32 = layout::CUPTI_CB_DOMAIN_DRIVER_API;
const CB_DOMAIN_RESOURCE: u32 = layout::CUPTI_CB_DOMAIN_RESOURCE;
const CB_SITE_ENTER: u32 = layout::CUPTI_API_ENTER;
const CB_DATA_SITE: usize = layout::callback_data::CALLBACK_SITE;
const CB_DATA_CORRELATION: usize = layout::callback_data::CORRELATION_ID;
/// Upper bound of driver callback ids (`CUPTI_DRIVER_TRACE_CBID_SIZE` is 807 in CUPTI 13.0).
const MAX_DRIVER_CBID: u32 = 4096;

/// Driver functions whose calls make the GPU activity records `kinds` asks for (GPU work, and
/// allocations and frees, synchronizations, streams when asked): their CUPTI correlation ids
/// are linked.
fn makes_gpu_work(name: &[u8], kinds: crate::config::GpuKinds) -> bool {
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
struct Subscribed {
    /// Driver functions whose calls are linked.
    functions: usize,
    /// The module-loaded resource callback, when resources were asked for.
    modules: Option<Result<(), String>>,
}

/// Subscribes rtrace's callback to the API-enter site of every GPU-work driver function, and
/// to modules as they load when `kinds` asks for resources.
fn subscribe(api: &Api, kinds: crate::config::GpuKinds) -> Result<Subscribed, String> {
    let mut sub: *mut c_void = std::ptr::null_mut();
    // SAFETY: registers a plain extern "C" callback; `sub` is CUPTI's out-parameter.
    let rc = unsafe { (api.subscribe)(&mut sub, on_api, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(format!(
            "cuptiSubscribe: {} (another CUPTI client?)",
            describe(api, rc)
        ));
    }
    SUBSCRIBER.store(sub, Ordering::Release);
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
    } else {
        &[]
    };
    let modules = kinds.resources.then(|| {
        for &(cbid, name) in [
            (layout::CUPTI_CBID_RESOURCE_MODULE_LOADED, "MODULE_LOADED"),
            (
                layout::CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING,
                "MODULE_UNLOAD_STARTING",
            ),
        ]
        .iter()
        .chain(contexts)
        {
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
    })
}

/// CUPTI's callback: at the entry of a GPU-work call, link CUPTI's correlation id to
/// rtrace's for the call in progress (no allocation, no lock); a module loaded or about to be
/// unloaded goes to [`on_module`]; then the program's own callback, if it enabled this one.
extern "C" fn on_api(user: *mut c_void, domain: u32, cbid: u32, data: *const u8) {
    if share::ours(domain, cbid) {
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
        crate::thread::link_current(correlation);
    }
}

/// A resource callback: modules for GPU activity, contexts and modules for PC sampling.
fn on_resource(cbid: u32, data: *const u8) {
    use layout::resource_data as r;
    // SAFETY: `data` is CUPTI's CUpti_ResourceData.
    let context = unsafe { (data.add(r::CONTEXT) as *const *mut c_void).read_unaligned() };
    let api = API.get();
    match cbid {
        layout::CUPTI_CBID_RESOURCE_MODULE_LOADED => {
            on_module(data, false);
            if !context.is_null() {
                pcsampling::on_module_loaded(context);
            }
        }
        layout::CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING => {
            if let (false, Some(api)) = (context.is_null(), api) {
                pcsampling::on_module_unloading(api, context);
            }
            on_module(data, true);
        }
        layout::CUPTI_CBID_RESOURCE_CONTEXT_CREATED => {
            if let (false, Some(api)) = (context.is_null(), api) {
                pcsampling::on_context_created(api, context);
            }
        }
        layout::CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING => {
            if let (false, Some(api)) = (context.is_null(), api) {
                pcsampling::on_context_destroying(api, context);
            }
        }
        _ => {}
    }
}

/// A module loaded, or about to be unloaded (inside the loading or unloading call, on its
/// thread): kept for the worker, with the call's correlation id. Rare, so it may lock and
/// allocate.
fn on_module(data: *const u8, unloading: bool) {
    use layout::{module_resource_data as m, resource_data as r};
    // SAFETY: `data` is CUPTI's CUpti_ResourceData for a module-loaded callback; its
    // descriptor, if not NULL, is a CUpti_ModuleResourceData.
    let (context, descriptor) = unsafe {
        (
            (data.add(r::CONTEXT) as *const *mut c_void).read_unaligned(),
            (data.add(r::RESOURCE_DESCRIPTOR) as *const *const u8).read_unaligned(),
        )
    };
    if descriptor.is_null() {
        return;
    }
    // SAFETY: as above.
    let (module, cubin_size, cubin) = unsafe {
        (
            (descriptor.add(m::MODULE_ID) as *const u32).read_unaligned(),
            (descriptor.add(m::CUBIN_SIZE) as *const u64).read_unaligned(),
            (descriptor.add(m::P_CUBIN) as *const *const u8).read_unaligned(),
        )
    };
    let mut context_id = 0u32;
    if let (false, Some(api)) = (context.is_null(), API.get()) {
        // SAFETY: plain CUPTI query with a valid out-pointer.
        if internal(|| unsafe { (api.context_id)(context, &mut context_id) }) != 0 {
            context_id = 0;
        }
    }
    let correlation = crate::thread::current_correlation();
    let mut flags = if correlation != 0 { FLAG_CORRELATED } else { 0 };
    if unloading {
        flags |= FLAG_UNLOADED;
    }
    let rec = ModuleRecord {
        correlation,
        timestamp_ns: clock::now_ns(),
        cubin_size,
        module,
        context: context_id,
        flags: flags as u8,
    };
    if let Ok(mut m) = MODULES.lock() {
        m.push(rec);
    }
    if !unloading && state::config().module_images && !cubin.is_null() && cubin_size > 0 {
        // SAFETY: CUPTI's image of the module, `cubin_size` bytes, valid during the callback.
        let bytes = unsafe { std::slice::from_raw_parts(cubin, cubin_size as usize) };
        keep_image(module, context_id, bytes);
    }
}

/// Queues a module's image for the worker: its hash and CUPTI's CRC always, the bytes the first
/// time this content is seen. Inside the loading call (a module load: it may lock and copy).
fn keep_image(module: u32, context: u32, bytes: &[u8]) {
    let hash = rtrace_format::image_hash(bytes);
    let new = IMAGE_HASHES.lock().is_ok_and(|mut seen| {
        if seen.contains(&hash) {
            false
        } else {
            seen.push(hash);
            true
        }
    });
    let mut crc = 0;
    if let Some(get) = API.get().and_then(|a| a.cubin_crc) {
        let mut p = CubinCrcParams {
            size: std::mem::size_of::<CubinCrcParams>(),
            cubin_size: bytes.len(),
            cubin: bytes.as_ptr() as *const c_void,
            cubin_crc: 0,
        };
        // SAFETY: CUPTI reads the image and writes the CRC into `p`.
        if internal(|| unsafe { get(&mut p) }) == 0 {
            crc = p.cubin_crc;
        }
    }
    let image = rtrace_format::ModuleImage {
        module,
        context,
        hash,
        crc,
        size: bytes.len() as u64,
        bytes: new.then(|| bytes.to_vec()),
    };
    if let Ok(mut q) = IMAGES.lock() {
        q.push(image);
    }
}

/// The process that enabled CUPTI: a forked child inherits rtrace's memory (and its `atexit`
/// handler) but not CUPTI's threads, and must never touch the parent's collection.
static ENABLED_BY: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn in_enabling_process() -> bool {
    ENABLED_BY.load(Ordering::Acquire) == crate::sys::getpid()
}

/// The worker's periodic flush: asks CUPTI for its buffers only when it handed back none since
/// the last look. A program making GPU work fast fills buffers, which CUPTI hands back by
/// itself, and is spared the flush, which takes CUPTI's locks while the program launches
/// (docs/benchmarks.md); a slower one gets its records within a flush period.
pub fn flush_if_idle() {
    let completed = COMPLETED.load(Ordering::Acquire);
    if COMPLETED_AT_LAST_LOOK.swap(completed, Ordering::AcqRel) == completed {
        flush(false);
        // Buffers this flush handed back are not the program filling them.
        COMPLETED_AT_LAST_LOOK.store(COMPLETED.load(Ordering::Acquire), Ordering::Release);
    }
}

/// Asks CUPTI to hand over its buffers (`force`: also records still being written).
pub fn flush(force: bool) {
    if STATE.load(Ordering::Acquire) != ON || !in_enabling_process() {
        return;
    }
    if let Some(api) = API.get() {
        internal(|| {
            // SAFETY: plain CUPTI call; buffers come back through `complete`.
            unsafe { (api.flush_all)(u32::from(force)) };
        });
    }
}

/// Reads every sampled context one last time and disables PC sampling (exit).
pub fn finish_pc_sampling() {
    if STATE.load(Ordering::Acquire) != ON || !in_enabling_process() {
        return;
    }
    if let Some(api) = API.get() {
        internal(|| pcsampling::finish(api));
    }
}

/// What [`at_exit`] runs: the session's drain-and-finish sequence for CUPTI going away.
static EXIT_SEQUENCE: OnceLock<fn()> = OnceLock::new();

/// Sets what runs when CUPTI is about to go away (once, at start-up).
pub fn set_exit_sequence(sequence: fn()) {
    let _ = EXIT_SEQUENCE.set(sequence);
}

extern "C" fn at_exit() {
    if !in_enabling_process() {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        if let Some(sequence) = EXIT_SEQUENCE.get() {
            sequence();
        }
        STATE.store(DONE, Ordering::Release);
    });
}

/// Converts the queued CUPTI buffers into GPU chunks in `sink`, and writes pending notices.
/// Consumer only.
pub fn drain_into(sink: &mut Sink) {
    // A forked child's copies of the parent's queued buffers and notices are not its own.
    if ENABLED_BY.load(Ordering::Acquire) != 0 && !in_enabling_process() {
        return;
    }
    if let Ok(mut n) = NOTICES.lock() {
        for msg in n.drain(..) {
            sink.notice(&msg);
        }
    }
    if let Ok(mut d) = DEVICES.lock() {
        for info in d.drain(..) {
            sink.chunk(
                ChunkKind::DeviceInfo,
                0,
                0,
                0,
                &rtrace_format::encode_value(&info),
            );
        }
    }
    if let Ok(mut m) = MODULES.lock() {
        for rec in m.drain(..) {
            sink.gpu_batch.modules.extend_from_slice(&rec.to_bytes());
        }
    }
    let images = IMAGES
        .lock()
        .map(|mut q| std::mem::take(&mut *q))
        .unwrap_or_default();
    for image in images {
        sink.chunk(ChunkKind::ModuleImage, 0, 0, 0, &image.encode());
    }
    let full: Vec<(Buffer, usize, bool)> = match FULL.lock() {
        Ok(mut f) => std::mem::take(&mut *f),
        Err(_) => return,
    };
    let Some(api) = API.get() else {
        GpuBatch::emit(sink);
        return;
    };
    if full.iter().any(|&(_, _, program_clock)| program_clock) {
        share::read_clocks();
    }
    for (mut buf, valid, program_clock) in full {
        if program_clock {
            share::with_map(|map| convert(api, &mut buf, valid, sink, Some(map)));
        } else {
            convert(api, &mut buf, valid, sink, None);
        }
        // Zeroed before the lock: `request`, on the program's threads, takes it.
        if ZEROED.load(Ordering::Acquire) {
            buf.fill(0);
        }
        if let Ok(mut pool) = POOL.lock() {
            if pool.len() < POOL_MAX {
                pool.push(buf);
            }
        }
    }
    GpuBatch::emit(sink);
    // After the module images, which the samples name.
    pcsampling::drain_into(api, sink);
    let dropped = DROPPED.load(Ordering::Relaxed);
    if dropped > REPORTED_DROPPED.swap(dropped, Ordering::Relaxed) {
        sink.notice(&format!(
            "CUPTI dropped {dropped} GPU activity records so far (its buffers were full)"
        ));
    }
}

/// The dropped count last written as a notice.
static REPORTED_DROPPED: AtomicU64 = AtomicU64::new(0);
