//! GPU activity (kernels, memory copies, memsets, allocations and frees, host synchronizations,
//! and the contexts, streams, modules and functions they use) through CUPTI's Activity API,
//! loaded at run time. Opt-in (`RTRACE_GPU_ACTIVITY=1`): on CUDA
//! 13.0 CUPTI serves one activity client per process, so rtrace must not take it from a program
//! that profiles itself (see docs/gpu-activity-design.md). Allocation and synchronization
//! records are optional: if CUPTI refuses them, the rest stays on and a notice says so.
//!
//! - Enabled right after the program's first successful `cuInit`, on that thread, as rtrace's
//!   own code (CUPTI's driver calls are neither recorded nor rerouted). CUPTI timestamps are put
//!   on rtrace's clock (`cuptiActivityRegisterTimestampCallback` → `CLOCK_MONOTONIC`).
//! - CUPTI fills buffers from a small recycled pool and hands full ones back through
//!   [`complete`], which only queues them. The worker flushes CUPTI every drain period and turns
//!   queued buffers into kernel/memcpy/memset/memory/sync/resource chunks ([`drain_into`]).
//! - Modules come from CUPTI's resource callback (`CUPTI_CBID_RESOURCE_MODULE_LOADED`) on
//!   rtrace's subscriber, inside the loading call: CUPTI 13.0 refuses the MODULE activity kind
//!   (`CUPTI_ERROR_INVALID_KIND`); functions and contexts come as activity records.
//! - At exit, an `atexit` handler registered when CUPTI was enabled flushes CUPTI and converts
//!   everything while CUPTI is still alive (its destructor runs before rtrace's).
//! - Any failure leaves API tracing on and writes a notice saying why GPU activity is off.

/// CUPTI 13.0's record layouts and constants (generated from cupti_activity.h).
#[path = "generated/cupti.rs"]
#[allow(dead_code, clippy::all)]
mod layout;

use crate::hook::internal;
use crate::output::Sink;
use crate::{clock, diag, interpose, lifecycle};
use rtrace_format::{
    ChunkKind, ContextRecord, CopyKind, FunctionRecord, KernelRecord, MemcpyRecord, MemoryKind,
    MemoryOperation, MemoryPoolType, MemoryRecord, MemsetRecord, ModuleRecord, PeerCopyRecord,
    StreamFlag, StreamRecord, SyncKind, SyncRecord, FLAG_CORRELATED, FLAG_IN_GRAPH,
};
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, Once, OnceLock};

/// Size of one CUPTI buffer, in 8-byte words (4 MiB).
const BUFFER_WORDS: usize = 1 << 19;
/// Buffers kept for reuse.
const POOL_MAX: usize = 16;

type Buffer = Box<[u64]>;

type RequestFn = extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
type CompleteFn = extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
type TimestampFn = extern "C" fn() -> u64;

type RegisterFn = unsafe extern "C" fn(RequestFn, CompleteFn) -> i32;
type RegisterTimestampFn = unsafe extern "C" fn(TimestampFn) -> i32;
type EnableFn = unsafe extern "C" fn(i32) -> i32;
type FlushFn = unsafe extern "C" fn(u32) -> i32;
type NextRecordFn = unsafe extern "C" fn(*mut u8, usize, *mut *mut u8) -> i32;
type DroppedFn = unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> i32;
type ResultStringFn = unsafe extern "C" fn(i32, *mut *const c_char) -> i32;
type CallbackFn = extern "C" fn(*mut c_void, u32, u32, *const u8);
type SubscribeFn = unsafe extern "C" fn(*mut *mut c_void, CallbackFn, *mut c_void) -> i32;
type UnsubscribeFn = unsafe extern "C" fn(*mut c_void) -> i32;
type EnableCallbackFn = unsafe extern "C" fn(u32, *mut c_void, u32, u32) -> i32;
type CallbackNameFn = unsafe extern "C" fn(u32, u32, *mut *const c_char) -> i32;
type ContextIdFn = unsafe extern "C" fn(*mut c_void, *mut u32) -> i32;

/// The CUPTI entry points rtrace uses.
struct Api {
    register_callbacks: RegisterFn,
    register_timestamp: RegisterTimestampFn,
    enable: EnableFn,
    flush_all: FlushFn,
    next_record: NextRecordFn,
    dropped: DroppedFn,
    result_string: ResultStringFn,
    subscribe: SubscribeFn,
    unsubscribe: UnsubscribeFn,
    enable_callback: EnableCallbackFn,
    callback_name: CallbackNameFn,
    /// `cuptiGetContextId`, for the context of a loaded module.
    context_id: ContextIdFn,
}

// SAFETY: plain function pointers into libcupti, callable from any thread.
unsafe impl Send for Api {}
// SAFETY: as above.
unsafe impl Sync for Api {}

static API: OnceLock<Api> = OnceLock::new();

/// The program itself is a CUPTI client (it registered activity callbacks or subscribed):
/// rtrace then never takes CUPTI.
static PROGRAM_USES_CUPTI: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

const OFF: u8 = 0;
const ON: u8 = 1;
const DONE: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(OFF);
static ENABLE: Once = Once::new();

/// Full buffers (and their valid byte counts) waiting for the worker.
static FULL: Mutex<Vec<(Buffer, usize)>> = Mutex::new(Vec::new());
/// Empty buffers for CUPTI to fill.
static POOL: Mutex<Vec<Buffer>> = Mutex::new(Vec::new());
/// Records CUPTI reported as dropped.
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Status lines for the trace (GPU activity on, or why it is off), taken by the worker.
static NOTICES: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// The devices, read when GPU activity starts, for the worker to write.
static DEVICES: Mutex<Vec<rtrace_format::DeviceInfo>> = Mutex::new(Vec::new());
/// Modules loaded (from CUPTI's resource callback), for the worker to write.
static MODULES: Mutex<Vec<ModuleRecord>> = Mutex::new(Vec::new());

fn notice(msg: String) {
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
    if let Some(p) = &lifecycle::config().cupti_library {
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
        let p = interpose::real_dlsym(h, name.as_ptr());
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
            unsubscribe: std::mem::transmute::<*mut c_void, UnsubscribeFn>(sym(
                c"cuptiUnsubscribe",
            )?),
            enable_callback: std::mem::transmute::<*mut c_void, EnableCallbackFn>(sym(
                c"cuptiEnableCallback",
            )?),
            callback_name: std::mem::transmute::<*mut c_void, CallbackNameFn>(sym(
                c"cuptiGetCallbackName",
            )?),
            context_id: std::mem::transmute::<*mut c_void, ContextIdFn>(sym(c"cuptiGetContextId")?),
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
    if let Some(api) = API.get() {
        let mut n = 0usize;
        // SAFETY: plain CUPTI query with a valid out-pointer.
        if unsafe { (api.dropped)(ctx, stream, &mut n) } == 0 {
            DROPPED.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
    if let Ok(mut f) = FULL.lock() {
        f.push((b, valid));
    }
}

/// Enables GPU activity once, after the program's first successful `cuInit`.
pub fn after_cuinit() {
    if !lifecycle::config().gpu_activity.any() {
        return;
    }
    ENABLE.call_once(|| internal(enable));
}

fn enable() {
    if PROGRAM_USES_CUPTI.load(Ordering::Acquire) {
        return notice(
            "GPU activity off: the program uses CUPTI itself (CUPTI 13.0 serves one client)".into(),
        );
    }
    let api = match load() {
        Ok(api) => API.get_or_init(|| api),
        Err(e) => return notice(format!("GPU activity off: {e}")),
    };
    // SAFETY: registering plain extern "C" callbacks with their documented signatures.
    let rc = unsafe { (api.register_timestamp)(timestamp) };
    if rc != 0 {
        return notice(format!(
            "GPU activity off: cuptiActivityRegisterTimestampCallback: {}",
            describe(api, rc)
        ));
    }
    // SAFETY: as above.
    let rc = unsafe { (api.register_callbacks)(request, complete) };
    if rc != 0 {
        return notice(format!(
            "GPU activity off: cuptiActivityRegisterCallbacks: {} (another CUPTI client?)",
            describe(api, rc)
        ));
    }
    let want = lifecycle::config().gpu_activity;
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
            kinds.push(name);
        } else {
            notice(format!(
                "GPU activity without {name}: enabling them: {}",
                describe(api, rc)
            ));
        }
    }
    if kinds.is_empty() {
        return notice("GPU activity off: CUPTI enabled none of the kinds asked for".into());
    }
    // SAFETY: getpid has no preconditions.
    ENABLED_BY.store(unsafe { libc::getpid() } as u32, Ordering::Release);
    STATE.store(ON, Ordering::Release);
    if let Ok(mut d) = DEVICES.lock() {
        *d = crate::devices::device_infos();
    }
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
                enabled += 1;
            }
        }
    }
    let modules = kinds.resources.then(|| {
        let cbid = layout::CUPTI_CBID_RESOURCE_MODULE_LOADED;
        // SAFETY: plain CUPTI call on our subscriber.
        match unsafe { (api.enable_callback)(1, sub, CB_DOMAIN_RESOURCE, cbid) } {
            0 => Ok(()),
            rc => Err(format!(
                "cuptiEnableCallback(MODULE_LOADED): {}",
                describe(api, rc)
            )),
        }
    });
    Ok(Subscribed {
        functions: enabled,
        modules,
    })
}

/// CUPTI's callback: at the entry of a GPU-work call, link CUPTI's correlation id to
/// rtrace's for the call in progress (no allocation, no lock); a module loaded goes to
/// [`on_module`].
extern "C" fn on_api(_user: *mut c_void, domain: u32, cbid: u32, data: *const u8) {
    if data.is_null() {
        return;
    }
    if domain == CB_DOMAIN_RESOURCE {
        if cbid == layout::CUPTI_CBID_RESOURCE_MODULE_LOADED {
            let _ = std::panic::catch_unwind(|| on_module(data));
        }
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
        crate::hook::link_current(correlation);
    }
}

/// A module loaded (inside the loading call, on its thread): kept for the worker, with the
/// call's correlation id. Rare, so it may lock and allocate.
fn on_module(data: *const u8) {
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
    let (module, cubin_size) = unsafe {
        (
            (descriptor.add(m::MODULE_ID) as *const u32).read_unaligned(),
            (descriptor.add(m::CUBIN_SIZE) as *const u64).read_unaligned(),
        )
    };
    let mut context_id = 0u32;
    if let (false, Some(api)) = (context.is_null(), API.get()) {
        // SAFETY: plain CUPTI query with a valid out-pointer.
        if internal(|| unsafe { (api.context_id)(context, &mut context_id) }) != 0 {
            context_id = 0;
        }
    }
    let correlation = crate::hook::current_correlation();
    let rec = ModuleRecord {
        correlation,
        timestamp_ns: clock::now_ns(),
        cubin_size,
        module,
        context: context_id,
        flags: if correlation != 0 {
            FLAG_CORRELATED as u8
        } else {
            0
        },
    };
    if let Ok(mut m) = MODULES.lock() {
        m.push(rec);
    }
}

/// CUPTI correlation id → rtrace correlation id, for the most recent links.
#[derive(Default)]
pub struct Links {
    map: HashMap<u32, u64>,
    order: std::collections::VecDeque<u32>,
}

impl Links {
    /// Links kept; older ones are forgotten (their GPU work is long done).
    const CAPACITY: usize = 1 << 20;

    pub fn insert(&mut self, source: u32, correlation: u64) {
        if self.map.insert(source, correlation).is_none() {
            self.order.push_back(source);
            if self.order.len() > Self::CAPACITY {
                if let Some(old) = self.order.pop_front() {
                    self.map.remove(&old);
                }
            }
        }
    }

    fn get(&self, source: u32) -> Option<u64> {
        self.map.get(&source).copied()
    }
}

/// The process that enabled CUPTI: a forked child inherits rtrace's memory (and its `atexit`
/// handler) but not CUPTI's threads, and must never touch the parent's collection.
static ENABLED_BY: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn in_enabling_process() -> bool {
    // SAFETY: getpid has no preconditions.
    ENABLED_BY.load(Ordering::Acquire) == unsafe { libc::getpid() } as u32
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

extern "C" fn at_exit() {
    if !in_enabling_process() {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        flush(true);
        if let Some(p) = lifecycle::current_process() {
            p.with_consumer(std::time::Duration::from_secs(2), |sink| {
                // The rings first: their links name the GPU records.
                let _ = crate::worker::drain(p, sink, crate::worker::Drain::Periodic);
                drain_into(sink);
            });
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
    let full: Vec<(Buffer, usize)> = match FULL.lock() {
        Ok(mut f) => std::mem::take(&mut *f),
        Err(_) => return,
    };
    let Some(api) = API.get() else {
        GpuBatch::emit(sink);
        return;
    };
    for (mut buf, valid) in full {
        convert(api, &mut buf, valid, sink);
        if let Ok(mut pool) = POOL.lock() {
            if pool.len() < POOL_MAX {
                pool.push(buf);
            }
        }
    }
    GpuBatch::emit(sink);
    let dropped = DROPPED.load(Ordering::Relaxed);
    if dropped > REPORTED_DROPPED.swap(dropped, Ordering::Relaxed) {
        sink.notice(&format!(
            "CUPTI dropped {dropped} GPU activity records so far (its buffers were full)"
        ));
    }
}

/// The dropped count last written as a notice.
static REPORTED_DROPPED: AtomicU64 = AtomicU64::new(0);

fn rd<const N: usize>(rec: &[u8], at: usize) -> [u8; N] {
    rec[at..at + N].try_into().unwrap()
}
fn u32_at(rec: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(rd(rec, at))
}
fn i32_at(rec: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(rd(rec, at))
}
fn u64_at(rec: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(rd(rec, at))
}

/// GPU records being collected for the next chunks, and the kernel-name table.
#[derive(Default)]
pub struct GpuBatch {
    kernels: Vec<u8>,
    memcpys: Vec<u8>,
    memsets: Vec<u8>,
    memory: Vec<u8>,
    syncs: Vec<u8>,
    peer_copies: Vec<u8>,
    contexts: Vec<u8>,
    streams: Vec<u8>,
    modules: Vec<u8>,
    functions: Vec<u8>,
    new_names: Vec<(u32, String)>,
    names: HashMap<String, u32>,
}

impl GpuBatch {
    fn name_id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.names.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.insert(name.to_string(), id);
        self.new_names.push((id, name.to_string()));
        id
    }

    /// Appends the collected records as chunks to `sink`.
    pub fn emit(sink: &mut Sink) {
        let mut b = std::mem::take(&mut sink.gpu_batch);
        if !b.new_names.is_empty() {
            let payload = rtrace_format::encode_function_names(
                b.new_names.iter().map(|(id, n)| (*id, n.as_str())),
            );
            sink.chunk(ChunkKind::KernelNames, 0, 0, 0, &payload);
            b.new_names.clear();
        }
        for (kind, data) in [
            (ChunkKind::Kernels, &mut b.kernels),
            (ChunkKind::Memcpys, &mut b.memcpys),
            (ChunkKind::Memsets, &mut b.memsets),
            (ChunkKind::Memory, &mut b.memory),
            (ChunkKind::Sync, &mut b.syncs),
            (ChunkKind::PeerCopies, &mut b.peer_copies),
            (ChunkKind::Contexts, &mut b.contexts),
            (ChunkKind::Streams, &mut b.streams),
            (ChunkKind::Modules, &mut b.modules),
            (ChunkKind::Functions, &mut b.functions),
        ] {
            if !data.is_empty() {
                sink.chunk(kind, 0, 0, 0, data);
                data.clear();
            }
        }
        sink.gpu_batch = b;
    }
}

/// Walks one CUPTI buffer and appends its records to `sink`'s GPU batch.
fn convert(api: &Api, buf: &mut Buffer, valid: usize, sink: &mut Sink) {
    let base = buf.as_mut_ptr() as *mut u8;
    let mut rec: *mut u8 = std::ptr::null_mut();
    loop {
        // SAFETY: `base..base+valid` is the buffer CUPTI filled; `rec` is CUPTI's cursor.
        if unsafe { (api.next_record)(base, valid, &mut rec) } != 0 || rec.is_null() {
            break;
        }
        let offset = rec as usize - base as usize;
        // SAFETY: the record lies inside the valid part of the buffer.
        let bytes = unsafe { std::slice::from_raw_parts(rec, valid - offset) };
        let kind = u32_at(bytes, 0) as i32;
        let batch = &mut sink.gpu_batch;
        let links = &sink.links;
        if kind == layout::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL as i32
            || kind == layout::CUPTI_ACTIVITY_KIND_KERNEL as i32
        {
            if bytes.len() < layout::kernel10::SIZE {
                continue;
            }
            kernel(bytes, batch, links);
        } else if kind == layout::CUPTI_ACTIVITY_KIND_MEMCPY as i32 {
            if bytes.len() < layout::memcpy6::SIZE {
                continue;
            }
            memcpy(bytes, batch, links);
        } else if kind == layout::CUPTI_ACTIVITY_KIND_MEMSET as i32 {
            if bytes.len() < layout::memset4::SIZE {
                continue;
            }
            memset(bytes, batch, links);
        } else if kind == layout::CUPTI_ACTIVITY_KIND_MEMORY2 as i32 {
            if bytes.len() < layout::memory4::SIZE {
                continue;
            }
            memory(bytes, batch, links);
        } else if kind == layout::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION as i32 {
            if bytes.len() < layout::synchronization2::SIZE {
                continue;
            }
            sync(bytes, batch, links);
        } else if kind == layout::CUPTI_ACTIVITY_KIND_MEMCPY2 as i32 {
            if bytes.len() < layout::memcpy_ptop4::SIZE {
                continue;
            }
            peer_copy(bytes, batch, links);
        } else if kind == layout::CUPTI_ACTIVITY_KIND_CONTEXT as i32 {
            if bytes.len() < layout::context3::SIZE {
                continue;
            }
            context(bytes, batch);
        } else if kind == layout::CUPTI_ACTIVITY_KIND_STREAM as i32 {
            if bytes.len() < layout::stream::SIZE {
                continue;
            }
            stream(bytes, batch, links);
        } else if kind == layout::CUPTI_ACTIVITY_KIND_FUNCTION as i32 {
            if bytes.len() < layout::function::SIZE {
                continue;
            }
            function(bytes, batch);
        }
    }
}

fn graph_flags(graph_id: u32) -> u32 {
    if graph_id != 0 {
        FLAG_IN_GRAPH
    } else {
        0
    }
}

/// rtrace's correlation id for CUPTI's `source`, and the flags that say whether there was one.
fn correlate(links: &Links, source: u32, flags: u32) -> (u64, u32) {
    match links.get(source) {
        Some(c) => (c, flags | FLAG_CORRELATED),
        None => (0, flags),
    }
}

fn kernel(r: &[u8], batch: &mut GpuBatch, links: &Links) {
    use layout::kernel10 as k;
    let name_ptr = u64_at(r, k::NAME) as *const c_char;
    let name = if name_ptr.is_null() {
        String::from("<unknown>")
    } else {
        // SAFETY: CUPTI's NUL-terminated kernel name, valid while the record is.
        unsafe { CStr::from_ptr(name_ptr) }
            .to_string_lossy()
            .into_owned()
    };
    let graph_id = u32_at(r, k::GRAPH_ID);
    let (correlation, flags) =
        correlate(links, u32_at(r, k::CORRELATION_ID), graph_flags(graph_id));
    let rec = KernelRecord {
        correlation,
        start_ns: u64_at(r, k::START),
        end_ns: u64_at(r, k::END),
        graph_node_id: u64_at(r, k::GRAPH_NODE_ID),
        source_correlation: u32_at(r, k::CORRELATION_ID),
        name: batch.name_id(&name),
        device: u32_at(r, k::DEVICE_ID),
        context: u32_at(r, k::CONTEXT_ID),
        stream: u32_at(r, k::STREAM_ID),
        graph_id,
        grid: [
            i32_at(r, k::GRID_X),
            i32_at(r, k::GRID_Y),
            i32_at(r, k::GRID_Z),
        ],
        block: [
            i32_at(r, k::BLOCK_X),
            i32_at(r, k::BLOCK_Y),
            i32_at(r, k::BLOCK_Z),
        ],
        cluster: [
            u32_at(r, k::CLUSTER_X),
            u32_at(r, k::CLUSTER_Y),
            u32_at(r, k::CLUSTER_Z),
        ],
        dynamic_shared_memory: u32_at(r, k::DYNAMIC_SHARED_MEMORY),
        static_shared_memory: u32_at(r, k::STATIC_SHARED_MEMORY),
        registers_per_thread: u32::from(u16::from_le_bytes(rd(r, k::REGISTERS_PER_THREAD))),
        local_memory_per_thread: u32_at(r, k::LOCAL_MEMORY_PER_THREAD),
        flags,
    };
    batch.kernels.extend_from_slice(&rec.to_bytes());
}

fn memcpy(r: &[u8], batch: &mut GpuBatch, links: &Links) {
    use layout::memcpy6 as m;
    let graph_id = u32_at(r, m::GRAPH_ID);
    let (correlation, flags) =
        correlate(links, u32_at(r, m::CORRELATION_ID), graph_flags(graph_id));
    let rec = MemcpyRecord {
        correlation,
        start_ns: u64_at(r, m::START),
        end_ns: u64_at(r, m::END),
        bytes: u64_at(r, m::BYTES),
        source_correlation: u32_at(r, m::CORRELATION_ID),
        device: u32_at(r, m::DEVICE_ID),
        context: u32_at(r, m::CONTEXT_ID),
        stream: u32_at(r, m::STREAM_ID),
        // rtrace's copy and memory kinds use CUPTI's numbering.
        kind: CopyKind::from_u8(r[m::COPY_KIND]),
        src_kind: MemoryKind::from_u8(r[m::SRC_KIND]),
        dst_kind: MemoryKind::from_u8(r[m::DST_KIND]),
        flags: flags as u8,
        graph_id,
        graph_node_id: u64_at(r, m::GRAPH_NODE_ID),
    };
    batch.memcpys.extend_from_slice(&rec.to_bytes());
}

fn memset(r: &[u8], batch: &mut GpuBatch, links: &Links) {
    use layout::memset4 as m;
    let graph_id = u32_at(r, m::GRAPH_ID);
    let (correlation, _) = correlate(links, u32_at(r, m::CORRELATION_ID), 0);
    let rec = MemsetRecord {
        correlation,
        start_ns: u64_at(r, m::START),
        end_ns: u64_at(r, m::END),
        bytes: u64_at(r, m::BYTES),
        source_correlation: u32_at(r, m::CORRELATION_ID),
        device: u32_at(r, m::DEVICE_ID),
        context: u32_at(r, m::CONTEXT_ID),
        stream: u32_at(r, m::STREAM_ID),
        value: u32_at(r, m::VALUE),
        graph_id,
        graph_node_id: u64_at(r, m::GRAPH_NODE_ID),
    };
    batch.memsets.extend_from_slice(&rec.to_bytes());
}

fn memory(r: &[u8], batch: &mut GpuBatch, links: &Links) {
    use layout::memory4 as m;
    let (correlation, flags) = correlate(links, u32_at(r, m::CORRELATION_ID), 0);
    let operation = match u32_at(r, m::MEMORY_OPERATION_TYPE) {
        layout::CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION => MemoryOperation::Alloc,
        layout::CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE => MemoryOperation::Free,
        _ => MemoryOperation::Unknown,
    };
    let pool_type = match u32_at(r, m::MEMORY_POOL_CONFIG_MEMORY_POOL_TYPE) {
        layout::CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL => MemoryPoolType::Local,
        layout::CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED => MemoryPoolType::Imported,
        _ => MemoryPoolType::None,
    };
    let kind = u32_at(r, m::MEMORY_KIND);
    let rec = MemoryRecord {
        correlation,
        timestamp_ns: u64_at(r, m::TIMESTAMP),
        address: u64_at(r, m::ADDRESS),
        bytes: u64_at(r, m::BYTES),
        pc: u64_at(r, m::PC),
        pool_address: u64_at(r, m::MEMORY_POOL_CONFIG_ADDRESS),
        pool_size: u64_at(r, m::MEMORY_POOL_CONFIG_POOL_SIZE),
        pool_utilized: u64_at(r, m::MEMORY_POOL_CONFIG_UTILIZED_SIZE),
        pool_release_threshold: u64_at(r, m::MEMORY_POOL_CONFIG_RELEASE_THRESHOLD),
        source_correlation: u32_at(r, m::CORRELATION_ID),
        device: u32_at(r, m::DEVICE_ID),
        context: u32_at(r, m::CONTEXT_ID),
        stream: u32_at(r, m::STREAM_ID),
        operation,
        // rtrace's memory kinds use CUPTI's numbering.
        kind: MemoryKind::from_u8(u8::try_from(kind).unwrap_or(0)),
        pool_type,
        flags: flags as u8,
        is_async: u32_at(r, m::IS_ASYNC) != 0,
    };
    batch.memory.extend_from_slice(&rec.to_bytes());
}

fn sync(r: &[u8], batch: &mut GpuBatch, links: &Links) {
    use layout::synchronization2 as s;
    let (correlation, flags) = correlate(links, u32_at(r, s::CORRELATION_ID), 0);
    let kind = u32_at(r, s::TYPE);
    let rec = SyncRecord {
        correlation,
        start_ns: u64_at(r, s::START),
        end_ns: u64_at(r, s::END),
        source_correlation: u32_at(r, s::CORRELATION_ID),
        context: u32_at(r, s::CONTEXT_ID),
        stream: u32_at(r, s::STREAM_ID),
        event: u32_at(r, s::CUDA_EVENT_ID),
        result: u32_at(r, s::RETURN_VALUE),
        // rtrace's sync kinds use CUPTI's numbering.
        kind: SyncKind::from_u8(u8::try_from(kind).unwrap_or(0)),
        flags: flags as u8,
    };
    batch.syncs.extend_from_slice(&rec.to_bytes());
}

fn peer_copy(r: &[u8], batch: &mut GpuBatch, links: &Links) {
    use layout::memcpy_ptop4 as m;
    let graph_id = u32_at(r, m::GRAPH_ID);
    let (correlation, flags) =
        correlate(links, u32_at(r, m::CORRELATION_ID), graph_flags(graph_id));
    let rec = PeerCopyRecord {
        copy: MemcpyRecord {
            correlation,
            start_ns: u64_at(r, m::START),
            end_ns: u64_at(r, m::END),
            bytes: u64_at(r, m::BYTES),
            source_correlation: u32_at(r, m::CORRELATION_ID),
            device: u32_at(r, m::DEVICE_ID),
            context: u32_at(r, m::CONTEXT_ID),
            stream: u32_at(r, m::STREAM_ID),
            // CUPTI writes PTOP (10); rtrace's copy and memory kinds use its numbering.
            kind: CopyKind::from_u8(r[m::COPY_KIND]),
            src_kind: MemoryKind::from_u8(r[m::SRC_KIND]),
            dst_kind: MemoryKind::from_u8(r[m::DST_KIND]),
            flags: flags as u8,
            graph_id,
            graph_node_id: u64_at(r, m::GRAPH_NODE_ID),
        },
        src_device: u32_at(r, m::SRC_DEVICE_ID),
        src_context: u32_at(r, m::SRC_CONTEXT_ID),
        dst_device: u32_at(r, m::DST_DEVICE_ID),
        dst_context: u32_at(r, m::DST_CONTEXT_ID),
    };
    batch.peer_copies.extend_from_slice(&rec.to_bytes());
}

fn context(r: &[u8], batch: &mut GpuBatch) {
    use layout::context3 as c;
    let rec = ContextRecord {
        context: u32_at(r, c::CONTEXT_ID),
        device: u32_at(r, c::DEVICE_ID),
        null_stream: u32::from(u16::from_le_bytes(rd(r, c::NULL_STREAM_ID))),
        parent_context: u32_at(r, c::PARENT_CONTEXT_ID),
        compute_api: u16::from_le_bytes(rd(r, c::COMPUTE_API_KIND)),
        num_multiprocessors: u16::from_le_bytes(rd(r, c::NUM_MULTIPROCESSORS)),
        cig_mode: u8::try_from(u32_at(r, c::CIG_MODE)).unwrap_or(u8::MAX),
        is_green: r[c::IS_GREEN_CONTEXT] != 0,
    };
    batch.contexts.extend_from_slice(&rec.to_bytes());
}

fn stream(r: &[u8], batch: &mut GpuBatch, links: &Links) {
    use layout::stream as s;
    let (correlation, flags) = correlate(links, u32_at(r, s::CORRELATION_ID), 0);
    // The flag field is CUpti_ActivityStreamFlag, under CUPTI_ACTIVITY_STREAM_CREATE_MASK.
    let flag = u32_at(r, s::FLAG) & layout::CUPTI_ACTIVITY_STREAM_CREATE_MASK;
    let rec = StreamRecord {
        correlation,
        source_correlation: u32_at(r, s::CORRELATION_ID),
        context: u32_at(r, s::CONTEXT_ID),
        stream: u32_at(r, s::STREAM_ID),
        priority: i32_at(r, s::PRIORITY),
        // rtrace's stream flags use CUPTI's numbering.
        flag: StreamFlag::from_u8(u8::try_from(flag).unwrap_or(0)),
        flags: flags as u8,
    };
    batch.streams.extend_from_slice(&rec.to_bytes());
}

fn function(r: &[u8], batch: &mut GpuBatch) {
    use layout::function as f;
    let name_ptr = u64_at(r, f::NAME) as *const c_char;
    let name = if name_ptr.is_null() {
        String::from("<unknown>")
    } else {
        // SAFETY: CUPTI's NUL-terminated function name, valid while the record is.
        unsafe { CStr::from_ptr(name_ptr) }
            .to_string_lossy()
            .into_owned()
    };
    let rec = FunctionRecord {
        function: u32_at(r, f::ID),
        context: u32_at(r, f::CONTEXT_ID),
        module: u32_at(r, f::MODULE_ID),
        function_index: u32_at(r, f::FUNCTION_INDEX),
        name: batch.name_id(&name),
    };
    batch.functions.extend_from_slice(&rec.to_bytes());
}

/// Another CUPTI client in the process is taking the activity buffers (CUPTI 13.0 serves one):
/// hand it CUPTI after collecting what is ours, and say so in the trace.
#[cfg_attr(test, allow(dead_code))]
fn step_aside() {
    PROGRAM_USES_CUPTI.store(true, Ordering::Release);
    if STATE.load(Ordering::Acquire) != ON {
        return;
    }
    flush(true);
    STATE.store(DONE, Ordering::Release);
    let sub = SUBSCRIBER.swap(std::ptr::null_mut(), Ordering::AcqRel);
    if let (false, Some(api)) = (sub.is_null(), API.get()) {
        // SAFETY: our own subscriber handle, given up once.
        unsafe { (api.unsubscribe)(sub) };
    }
    notice(
        "GPU activity stopped: the program started its own CUPTI activity collection \
         (for example the PyTorch profiler), and CUPTI 13.0 serves one client; GPU records \
         after this point are the program's"
            .into(),
    );
}

/// `cuptiActivityRegisterCallbacks` as the program sees it: rtrace steps aside, then CUPTI's
/// own function runs with the program's callbacks.
///
/// # Safety
/// CUPTI's contract for `cuptiActivityRegisterCallbacks`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn cuptiActivityRegisterCallbacks(
    request: RequestFn,
    complete: CompleteFn,
) -> i32 {
    static REAL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let real = next_cupti(&REAL, c"cuptiActivityRegisterCallbacks");
    if real == 0 {
        // No CUPTI behind us: CUPTI_ERROR_NOT_INITIALIZED, as a missing library would give.
        return 15;
    }
    if !crate::hook::in_rtrace() {
        let _ = crate::hook::with_errno_saved(|| internal(step_aside));
    }
    // SAFETY: `real` is CUPTI's own cuptiActivityRegisterCallbacks.
    unsafe { std::mem::transmute::<usize, RegisterFn>(real)(request, complete) }
}

#[cfg_attr(test, allow(dead_code))]
type SubscribeV2Fn =
    unsafe extern "C" fn(*mut *mut c_void, CallbackFn, *mut c_void, *mut c_void) -> i32;

/// Resolves CUPTI's own `name`, cached in `slot`: from the loaded libcupti.so.13 (a program
/// usually loads it as a dependency of its own, outside the global scope, so `RTLD_NEXT`
/// alone would miss it), else the next definition after librtrace.so.
#[cfg_attr(test, allow(dead_code))]
fn next_cupti(slot: &std::sync::atomic::AtomicUsize, name: &CStr) -> usize {
    let cached = slot.load(Ordering::Acquire);
    if cached != 0 {
        return cached;
    }
    let found = internal(|| {
        // SAFETY: dlopen with a valid C string; RTLD_NOLOAD only finds a loaded library.
        let h = unsafe {
            libc::dlopen(
                c"libcupti.so.13".as_ptr(),
                libc::RTLD_NOW | libc::RTLD_NOLOAD,
            )
        };
        let mut p = if h.is_null() {
            std::ptr::null_mut()
        } else {
            interpose::real_dlsym(h, name.as_ptr())
        };
        if p.is_null() {
            p = interpose::real_dlsym(libc::RTLD_NEXT, name.as_ptr());
        }
        p as usize
    });
    slot.store(found, Ordering::Release);
    found
}

/// `cuptiSubscribe` as the program sees it: rtrace gives up its subscriber and its activity
/// buffers first (CUPTI 13.0 allows one subscriber), then CUPTI's own function runs.
///
/// # Safety
/// CUPTI's contract for `cuptiSubscribe`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn cuptiSubscribe(
    subscriber: *mut *mut c_void,
    callback: CallbackFn,
    userdata: *mut c_void,
) -> i32 {
    static REAL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let real = next_cupti(&REAL, c"cuptiSubscribe");
    if real == 0 {
        return 15;
    }
    if !crate::hook::in_rtrace() {
        let _ = crate::hook::with_errno_saved(|| internal(step_aside));
    }
    // SAFETY: `real` is CUPTI's own cuptiSubscribe.
    unsafe { std::mem::transmute::<usize, SubscribeFn>(real)(subscriber, callback, userdata) }
}

/// `cuptiSubscribe_v2`: as [`cuptiSubscribe`].
///
/// # Safety
/// CUPTI's contract for `cuptiSubscribe_v2`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn cuptiSubscribe_v2(
    subscriber: *mut *mut c_void,
    callback: CallbackFn,
    userdata: *mut c_void,
    params: *mut c_void,
) -> i32 {
    static REAL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let real = next_cupti(&REAL, c"cuptiSubscribe_v2");
    if real == 0 {
        return 15;
    }
    if !crate::hook::in_rtrace() {
        let _ = crate::hook::with_errno_saved(|| internal(step_aside));
    }
    // SAFETY: `real` is CUPTI's own cuptiSubscribe_v2.
    unsafe {
        std::mem::transmute::<usize, SubscribeV2Fn>(real)(subscriber, callback, userdata, params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linked_functions_are_gpu_work_allocations_synchronizations_and_stream_creators() {
        let linked: Vec<&str> = layout::DRIVER_API_CBIDS
            .iter()
            .map(|&(name, _)| name)
            .filter(|name| makes_gpu_work(name.as_bytes(), crate::config::GpuKinds::parse("all")))
            .collect();
        assert_eq!(linked.len(), 161);
        let count = |kinds: &str| {
            let kinds = crate::config::GpuKinds::parse(kinds);
            layout::DRIVER_API_CBIDS
                .iter()
                .filter(|&&(name, _)| makes_gpu_work(name.as_bytes(), kinds))
                .count()
        };
        assert_eq!(count("1"), 127);
        assert_eq!(count("kernel,memcpy,memset"), 117);
        // The creators of streams, and of contexts (their NULL stream and the driver's own).
        assert_eq!(count("resources"), 117 + 10);
        for name in [
            "cuLaunchKernel",
            "cuMemcpyHtoD_v2",
            "cuMemsetD32Async",
            "cuGraphLaunch",
            "cuMemAlloc",
            "cuMemAlloc_v2",
            "cuMemAllocHost_v2",
            "cuMemAllocManaged",
            "cuMemAllocPitch_v2",
            "cuMemAllocAsync_ptsz",
            "cuMemAllocFromPoolAsync",
            "cuMemFree_v2",
            "cuMemFreeHost",
            "cuMemFreeAsync",
            "cuMemHostAlloc",
            "cuMemCreate",
            "cuMemRelease",
            "cuMemMap",
            "cuMemUnmap",
            "cuMemAddressReserve",
            "cuMemAddressFree",
            "cuCtxSynchronize",
            "cuCtxSynchronize_v2",
            "cuStreamSynchronize_ptsz",
            "cuEventSynchronize",
            "cuStreamWaitEvent",
            "cuStreamQuery",
            "cuEventQuery",
            "cuStreamCreate",
            "cuStreamCreateWithPriority",
            "cuCtxCreate_v4",
            "cuDevicePrimaryCtxRetain",
            "cuGreenCtxStreamCreate",
        ] {
            assert!(linked.contains(&name), "{name}");
        }
        for name in [
            "cuLaunchHostFunc",
            "cuMemMapArrayAsync",
            "cuMemHostRegister",
            "cuMemGetInfo_v2",
            "cuEventRecord",
            "cuStreamDestroy_v2",
            "cuModuleLoadData",
            "cuModuleGetFunction",
            "cuCtxGetCurrent",
        ] {
            assert!(!linked.contains(&name), "{name}");
        }
    }

    fn put(rec: &mut [u8], at: usize, len: usize, v: u64) {
        rec[at..at + len].copy_from_slice(&v.to_le_bytes()[..len]);
    }

    #[test]
    fn memory_records_are_converted_field_by_field() {
        use layout::memory4 as m;
        let mut r = [0u8; m::SIZE];
        put(
            &mut r,
            m::KIND,
            4,
            layout::CUPTI_ACTIVITY_KIND_MEMORY2.into(),
        );
        put(&mut r, m::MEMORY_OPERATION_TYPE, 4, 2);
        put(&mut r, m::MEMORY_KIND, 4, 5);
        put(&mut r, m::CORRELATION_ID, 4, 9);
        put(&mut r, m::ADDRESS, 8, 0x3_0200_0000);
        put(&mut r, m::BYTES, 8, 2 << 20);
        put(&mut r, m::TIMESTAMP, 8, 123_456);
        put(&mut r, m::PC, 8, 0x40);
        put(&mut r, m::PROCESS_ID, 4, 409);
        put(&mut r, m::DEVICE_ID, 4, 1);
        put(&mut r, m::CONTEXT_ID, 4, 2);
        put(&mut r, m::STREAM_ID, 4, 13);
        put(&mut r, m::IS_ASYNC, 4, 1);
        put(&mut r, m::MEMORY_POOL_CONFIG_MEMORY_POOL_TYPE, 4, 1);
        put(&mut r, m::MEMORY_POOL_CONFIG_ADDRESS, 8, 0x3_0000_0000);
        put(&mut r, m::MEMORY_POOL_CONFIG_RELEASE_THRESHOLD, 8, 7);
        put(&mut r, m::MEMORY_POOL_CONFIG_POOL_SIZE, 8, 32 << 20);
        put(&mut r, m::MEMORY_POOL_CONFIG_UTILIZED_SIZE, 8, 4 << 20);
        let mut links = Links::default();
        let mut batch = GpuBatch::default();
        memory(&r, &mut batch, &links);
        links.insert(9, 77);
        memory(&r, &mut batch, &links);
        let got: Vec<MemoryRecord> = batch
            .memory
            .chunks_exact(MemoryRecord::SIZE)
            .map(|b| MemoryRecord::from_bytes(b.try_into().unwrap()))
            .collect();
        let want = MemoryRecord {
            correlation: 0,
            timestamp_ns: 123_456,
            address: 0x3_0200_0000,
            bytes: 2 << 20,
            pc: 0x40,
            pool_address: 0x3_0000_0000,
            pool_size: 32 << 20,
            pool_utilized: 4 << 20,
            pool_release_threshold: 7,
            source_correlation: 9,
            device: 1,
            context: 2,
            stream: 13,
            operation: MemoryOperation::Free,
            kind: MemoryKind::Managed,
            pool_type: MemoryPoolType::Local,
            flags: 0,
            is_async: true,
        };
        let linked = MemoryRecord {
            correlation: 77,
            flags: FLAG_CORRELATED as u8,
            ..want
        };
        assert_eq!(got, vec![want, linked]);
    }

    #[test]
    fn sync_records_are_converted_field_by_field() {
        use layout::synchronization2 as s;
        let mut r = [0u8; s::SIZE];
        put(
            &mut r,
            s::KIND,
            4,
            layout::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION.into(),
        );
        put(&mut r, s::TYPE, 4, 2);
        put(&mut r, s::START, 8, 1_000);
        put(&mut r, s::END, 8, 4_340);
        put(&mut r, s::CORRELATION_ID, 4, 12);
        put(&mut r, s::CONTEXT_ID, 4, 1);
        put(&mut r, s::STREAM_ID, 4, 14);
        put(&mut r, s::CUDA_EVENT_ID, 4, 1);
        put(&mut r, s::CUDA_EVENT_SYNC_ID, 8, 0);
        put(&mut r, s::RETURN_VALUE, 4, 600);
        let mut links = Links::default();
        links.insert(12, 5);
        let mut batch = GpuBatch::default();
        sync(&r, &mut batch, &links);
        let got = SyncRecord::from_bytes(batch.syncs[..].try_into().unwrap());
        assert_eq!(
            got,
            SyncRecord {
                correlation: 5,
                start_ns: 1_000,
                end_ns: 4_340,
                source_correlation: 12,
                context: 1,
                stream: 14,
                event: 1,
                result: 600,
                kind: SyncKind::StreamWaitEvent,
                flags: FLAG_CORRELATED as u8,
            }
        );
        assert_eq!(got.wait_ns(), 3_340);
    }

    #[test]
    fn resource_records_are_converted_field_by_field() {
        // The bytes CUPTI 13.0 wrote on an H200 (docs/gpu-activity-design.md): the context,
        // its NULL stream, a created stream of priority -5, a function.
        let ctx: [u8; 32] = [
            0x09, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, 0,
        ];
        let null: [u8; 24] = [
            0x25, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0,
        ];
        let created: [u8; 24] = [
            0x25, 0, 0, 0, 1, 0, 0, 0, 0x0e, 0, 0, 0, 0xfb, 0xff, 0xff, 0xff, 2, 0, 0, 0, 8, 0, 0,
            0,
        ];
        let name = c"vecadd_f32";
        let mut func = [0u8; 32];
        func[..24].copy_from_slice(&[
            0x1a, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0x17, 0, 0, 0, 0x0c, 0, 0, 0, 0, 0, 0, 0,
        ]);
        func[24..].copy_from_slice(&(name.as_ptr() as u64).to_le_bytes());
        let mut links = Links::default();
        links.insert(8, 80);
        let mut batch = GpuBatch::default();
        context(&ctx, &mut batch);
        stream(&null, &mut batch, &links);
        stream(&created, &mut batch, &links);
        function(&func, &mut batch);
        assert_eq!(
            ContextRecord::from_bytes(batch.contexts[..].try_into().unwrap()),
            ContextRecord {
                context: 1,
                device: 0,
                null_stream: 7,
                compute_api: 1,
                ..Default::default()
            }
        );
        let streams: Vec<StreamRecord> = batch
            .streams
            .chunks_exact(StreamRecord::SIZE)
            .map(|b| StreamRecord::from_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(
            streams,
            vec![
                StreamRecord {
                    correlation: 0,
                    source_correlation: 1,
                    context: 1,
                    stream: 7,
                    priority: 0,
                    flag: StreamFlag::Null,
                    flags: 0,
                },
                StreamRecord {
                    correlation: 80,
                    source_correlation: 8,
                    context: 1,
                    stream: 14,
                    priority: -5,
                    flag: StreamFlag::NonBlocking,
                    flags: FLAG_CORRELATED as u8,
                },
            ]
        );
        assert_eq!(
            FunctionRecord::from_bytes(batch.functions[..].try_into().unwrap()),
            FunctionRecord {
                function: 1,
                context: 1,
                module: 23,
                function_index: 12,
                name: 0,
            }
        );
        assert_eq!(batch.new_names, vec![(0, "vecadd_f32".to_string())]);
    }

    #[test]
    fn peer_copies_are_converted_field_by_field() {
        use layout::memcpy_ptop4 as m;
        let mut r = [0u8; m::SIZE];
        put(
            &mut r,
            m::KIND,
            4,
            layout::CUPTI_ACTIVITY_KIND_MEMCPY2.into(),
        );
        put(&mut r, m::COPY_KIND, 1, 10);
        put(&mut r, m::SRC_KIND, 1, 3);
        put(&mut r, m::DST_KIND, 1, 3);
        put(&mut r, m::FLAGS, 1, 1);
        put(&mut r, m::BYTES, 8, 1 << 20);
        put(&mut r, m::START, 8, 1_000);
        put(&mut r, m::END, 8, 3_000);
        put(&mut r, m::DEVICE_ID, 4, 1);
        put(&mut r, m::CONTEXT_ID, 4, 2);
        put(&mut r, m::STREAM_ID, 4, 17);
        put(&mut r, m::SRC_DEVICE_ID, 4, 1);
        put(&mut r, m::SRC_CONTEXT_ID, 4, 2);
        put(&mut r, m::DST_DEVICE_ID, 4, 0);
        put(&mut r, m::DST_CONTEXT_ID, 4, 1);
        put(&mut r, m::CORRELATION_ID, 4, 5);
        put(&mut r, m::GRAPH_NODE_ID, 8, 0);
        let mut links = Links::default();
        links.insert(5, 50);
        let mut batch = GpuBatch::default();
        peer_copy(&r, &mut batch, &links);
        assert_eq!(
            PeerCopyRecord::from_bytes(batch.peer_copies[..].try_into().unwrap()),
            PeerCopyRecord {
                copy: MemcpyRecord {
                    correlation: 50,
                    start_ns: 1_000,
                    end_ns: 3_000,
                    bytes: 1 << 20,
                    source_correlation: 5,
                    device: 1,
                    context: 2,
                    stream: 17,
                    kind: CopyKind::PtoP,
                    src_kind: MemoryKind::Device,
                    dst_kind: MemoryKind::Device,
                    flags: FLAG_CORRELATED as u8,
                    graph_id: 0,
                    graph_node_id: 0,
                },
                src_device: 1,
                src_context: 2,
                dst_device: 0,
                dst_context: 1,
            }
        );
    }
}
