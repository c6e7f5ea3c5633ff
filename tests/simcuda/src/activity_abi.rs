//! The private C interface between simcuda and a simulated CUPTI (`tests/simcupti`), which
//! includes this file with `#[path]`, so both sides share one definition.
//!
//! simcuda exports (from `libcuda.so.1`, beside the driver API):
//!
//! ```c
//! // Subscribes `cb` (NULL unsubscribes); `version` must be SIMCUDA_ACTIVITY_VERSION.
//! // Returns 0, or -1 for a version mismatch (nothing changes).
//! int simcuda_activity_subscribe(uint32_t version, uint32_t (*cb)(const SimCall *));
//! // The virtual host clock now, ns (after the last call that took simcuda's lock).
//! uint64_t simcuda_host_now(void);
//! // cuptiGetStreamIdEx's answer: a CUPTI result code, and the stream's id in *id.
//! uint32_t simcuda_stream_id(CUcontext ctx, CUstream stream, uint8_t per_thread, uint32_t *id);
//! ```
//!
//! While subscribed, `cb` is called twice for every call of an exported driver function (the
//! lock-free ones and those failed by `SIMCUDA_FAIL` included), on the calling thread, outside
//! simcuda's lock: at its start (`SIMCALL_ENTER`), where it returns the correlation id it gives
//! the call (0: none), and at its end (`SIMCALL_EXIT`, return value ignored), with that id, the
//! result, and what the call did that CUPTI reports (`SimOp`: the GPU operation it queued, the
//! memory it allocated or freed, the host synchronization it made, or the context, stream or
//! module it created or loaded). The pointers in a `SimCall` are valid only during the
//! callback. See tests/simcuda/README.md ("Activity reporting").
//!
//! Between the two, a call that is about to destroy a context (`cuCtxDestroy*`, the
//! `cuDevicePrimaryCtxRelease*` that drops the primary context's last reference) calls `cb`
//! once more with `SIMCALL_NOTICE` and a `SIMOP_CONTEXT_DESTROY` op, while the context is still
//! alive (outside simcuda's lock, so the subscriber may call simcuda's exports).
//!
//! ```c
//! // cuptiGetContextId's answer: a CUPTI result code, and the context's id in *id.
//! uint32_t simcuda_context_id(CUcontext ctx, uint32_t *id);
//! // SIMCUDA_DEVICES: the virtual GPU's device count (no cuInit needed).
//! int simcuda_device_count(void);
//! ```

#![allow(dead_code)]

use std::os::raw::{c_char, c_void};

/// The variable choosing the host clock: `virtual` (the default: each call steps it by
/// `SIMCUDA_HOST_NS_PER_CALL` from 0, so times are exact and repeatable) or `real` (it never
/// falls behind `CLOCK_MONOTONIC`: times are the real ones, a GPU operation starting after the
/// call that queued it). simcupti reads it too, to put virtual times on its client's clock.
pub const SIMCUDA_CLOCK: &str = "SIMCUDA_CLOCK";

/// Whether `value` of [`SIMCUDA_CLOCK`] asks for the real-time clock (`None`: not a value).
pub fn real_clock(value: &str) -> Option<bool> {
    match value.trim() {
        "virtual" | "" => Some(false),
        "real" => Some(true),
        _ => None,
    }
}

/// `CLOCK_MONOTONIC` now, ns: the host clock's floor with `SIMCUDA_CLOCK=real`.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// Bumped whenever `SimCall` or `SimOp` change.
pub const SIMCUDA_ACTIVITY_VERSION: u32 = 4;

/// `SimCall::site`: the call is starting.
pub const SIMCALL_ENTER: u32 = 0;
/// `SimCall::site`: the call has ended.
pub const SIMCALL_EXIT: u32 = 1;
/// `SimCall::site`: during the call, before it does what `op` says (`SIMOP_CONTEXT_DESTROY`);
/// `correlation_id`, `result` and `end_ns` are as at entry; the return value is ignored.
pub const SIMCALL_NOTICE: u32 = 2;

/// `SimOp::kind`: a kernel launch.
pub const SIMOP_KERNEL: u32 = 1;
/// `SimOp::kind`: a copy.
pub const SIMOP_MEMCPY: u32 = 2;
/// `SimOp::kind`: a memset.
pub const SIMOP_MEMSET: u32 = 3;
/// `SimOp::kind`: an allocation (`cuMemAlloc*`, `cuMemAllocHost*`).
pub const SIMOP_ALLOC: u32 = 4;
/// `SimOp::kind`: a release (`cuMemFree*`, `cuMemFreeHost`).
pub const SIMOP_FREE: u32 = 5;
/// `SimOp::kind`: a host synchronization (`cuCtxSynchronize*`, `cuStreamSynchronize*`,
/// `cuEventSynchronize`, `cuStreamWaitEvent*`) or a stream or event query.
pub const SIMOP_SYNC: u32 = 6;
/// `SimOp::kind`: a context created (`cuCtxCreate*`, the first `cuDevicePrimaryCtxRetain`),
/// with its legacy stream.
pub const SIMOP_CONTEXT: u32 = 7;
/// `SimOp::kind`: a stream created (`cuStreamCreate`, `cuStreamCreateWithPriority`).
pub const SIMOP_STREAM: u32 = 8;
/// `SimOp::kind`: a module loaded (`cuModuleLoadData`), with its functions.
pub const SIMOP_MODULE: u32 = 9;
/// `SimOp::kind`: a module about to be unloaded (`cuModuleUnload`): `module_id`, `context`.
pub const SIMOP_MODULE_UNLOAD: u32 = 10;
/// `SimOp::kind`: a context about to be destroyed (`SIMCALL_NOTICE` only): `device`,
/// `context_id`, `context`.
pub const SIMOP_CONTEXT_DESTROY: u32 = 11;

/// `SimOp::stream_id` / `SimOp::event_id` when there is none (CUPTI's
/// `CUPTI_SYNCHRONIZATION_INVALID_VALUE`, `CUPTI_INVALID_STREAM_ID`).
pub const SIM_ID_NONE: u32 = u32::MAX;

/// One function of a loaded module (`SimOp::functions`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SimFunction {
    /// simcuda's object id of the function (as in its `CUfunction` handle).
    pub id: u32,
    /// Its place in the module image, from 0.
    pub index: u32,
    /// Its name, NUL-terminated.
    pub name: *const c_char,
}

/// What one driver call did that CUPTI reports: a GPU operation it queued (kernel, copy,
/// memset), an allocation or release, a host synchronization, or a context, stream or module
/// it created or loaded.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SimOp {
    /// `SIMOP_KERNEL`, `SIMOP_MEMCPY`, `SIMOP_MEMSET`, `SIMOP_ALLOC`, `SIMOP_FREE` or
    /// `SIMOP_SYNC`.
    pub kind: u32,
    /// Device ordinal of the stream's context (allocations: of the allocation's context).
    pub device: u32,
    /// The context's id (simcuda's object id, as in its handle): the stream's, the
    /// allocation's, the event's or the synchronized context's.
    pub context_id: u32,
    /// The stream's id (simcuda's object id; also for the legacy and per-thread streams);
    /// `SIM_ID_NONE` for allocations, releases, and event and context synchronizations.
    pub stream_id: u32,
    /// Virtual start and end, ns. Allocations and releases: both the host clock after the
    /// call's own step. Synchronizations: the host clock before and after the host's wait.
    pub start_ns: u64,
    pub end_ns: u64,
    /// Kernels: the kernel's name (NUL-terminated); NULL for other operations.
    pub name: *const c_char,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// `sharedMemBytes` of the launch.
    pub dynamic_shared: u32,
    /// `cuFuncGetAttribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)`.
    pub static_shared: u32,
    /// `cuFuncGetAttribute(CU_FUNC_ATTRIBUTE_NUM_REGS)`.
    pub registers: u32,
    /// Kernels: 1 for the process's first launch, then +1 for each launch.
    pub grid_id: u64,
    /// Copies and memsets: bytes moved or set; allocations and releases: the allocation's size.
    pub bytes: u64,
    /// Copies: a `CUPTI_ACTIVITY_MEMCPY_KIND_*` value.
    pub copy_kind: u32,
    /// Copies: `CUPTI_ACTIVITY_MEMORY_KIND_*` of the source; memsets: of the destination.
    pub src_kind: u32,
    /// Copies and memsets: `CUPTI_ACTIVITY_MEMORY_KIND_*` of the destination; allocations and
    /// releases: of the allocation.
    pub dst_kind: u32,
    /// 1 if queued by an entry point with a stream argument (`*Async*`), else 0.
    pub is_async: u32,
    /// Memsets: the value (the byte for `cuMemsetD8*`, the word for `cuMemsetD32*`).
    pub value: u32,
    /// Allocations and releases: the allocation's base address.
    pub address: u64,
    /// Synchronizations: a `CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_*` value.
    pub sync_type: u32,
    /// Event synchronizations and `cuStreamWaitEvent`: the event's id (simcuda's object id);
    /// else `SIM_ID_NONE`.
    pub event_id: u32,
    /// Contexts, streams and modules: the context's handle (`context_id`'s).
    pub context: *mut c_void,
    /// Streams: the `CUstream` flags it was created with (0 or `CU_STREAM_NON_BLOCKING`).
    pub stream_flags: u32,
    /// Streams: its priority, clamped to the device's range.
    pub priority: i32,
    /// Modules: simcuda's object id of the module.
    pub module_id: u32,
    /// Modules: how many functions `functions` points to.
    pub function_count: u32,
    /// Modules: the image given to `cuModuleLoadData` and its length (the bytes before its
    /// NUL).
    pub image: *const c_void,
    pub image_size: u64,
    /// Modules: its functions, in image order.
    pub functions: *const SimFunction,
}

/// One driver call, at its start or its end.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SimCall {
    /// `SIMCALL_ENTER`, `SIMCALL_NOTICE` or `SIMCALL_EXIT`.
    pub site: u32,
    /// At exit (and at a notice): the id the subscriber returned at entry (0 at entry).
    pub correlation_id: u32,
    /// The exported function's name (NUL-terminated), e.g. `cuMemcpyHtoD_v2`.
    pub name: *const c_char,
    /// At exit: the `CUresult` the call returns (0 at entry).
    pub result: u32,
    /// The calling thread's current context when the call started: its id (simcuda's object id)
    /// and its handle; 0 and NULL when it had none.
    pub context_id: u32,
    pub context: *mut c_void,
    /// Virtual host clock when the call started (before its own clock step) and, at exit, when
    /// it ended (at entry both are the start).
    pub start_ns: u64,
    pub end_ns: u64,
    /// At exit: what the call did that CUPTI reports (`SimOp`), or NULL.
    pub op: *const SimOp,
}

/// The subscriber's callback: at entry it returns the call's correlation id (0: none).
pub type SimCallback = unsafe extern "C" fn(*const SimCall) -> u32;

impl SimOp {
    /// An operation with every field zero.
    pub const fn zeroed(kind: u32) -> SimOp {
        SimOp {
            kind,
            device: 0,
            context_id: 0,
            stream_id: 0,
            start_ns: 0,
            end_ns: 0,
            name: std::ptr::null(),
            grid: [0; 3],
            block: [0; 3],
            dynamic_shared: 0,
            static_shared: 0,
            registers: 0,
            grid_id: 0,
            bytes: 0,
            copy_kind: 0,
            src_kind: 0,
            dst_kind: 0,
            is_async: 0,
            value: 0,
            address: 0,
            sync_type: 0,
            event_id: 0,
            context: std::ptr::null_mut(),
            stream_flags: 0,
            priority: 0,
            module_id: 0,
            function_count: 0,
            image: std::ptr::null(),
            image_size: 0,
            functions: std::ptr::null(),
        }
    }
}
