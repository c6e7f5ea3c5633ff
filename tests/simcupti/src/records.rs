//! Activity records, written byte by byte at the offsets of the generated CUPTI 13.0 layouts
//! (`layout`, from tools/gen-cupti), as CUPTI writes them. Every field not set here is zero.

use crate::layout::{self, *};
use crate::sim::{
    SimOp, SIMOP_ALLOC, SIMOP_CONTEXT, SIMOP_FREE, SIMOP_KERNEL, SIMOP_MEMCPY, SIMOP_MEMSET,
    SIMOP_MODULE, SIMOP_SYNC,
};

/// Writes `value`'s low `len` bytes, little-endian, at `at` (`len` is the field's width).
fn put(rec: &mut [u8], at: usize, len: usize, value: u64) {
    debug_assert!(
        len == 8 || value >> (8 * len) == 0,
        "{value} does not fit {len} bytes"
    );
    rec[at..at + len].copy_from_slice(&value.to_le_bytes()[..len]);
}

/// Sets a field of a record: `set!(rec, module, FIELD / FIELD_LEN, value)` writes `value` at
/// `layout::module::FIELD`, `layout::module::FIELD_LEN` bytes wide.
macro_rules! set {
    ($rec:expr, $m:ident, $f:ident / $l:ident, $v:expr) => {
        put($rec, layout::$m::$f, layout::$m::$l, ($v) as u64)
    };
}

/// How a GPU record's times are filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Times {
    pub start: u64,
    pub end: u64,
}

/// The values simcupti gives the fields of a kernel record that the simulator has no notion of
/// (what CUPTI 13.0 reported for a plain launch on an H100, or zero).
pub const CLUSTER_SCHEDULING_POLICY: u32 = 1;

/// A kernel record (`CUpti_ActivityKernel10`) of `kind` (`CUPTI_ACTIVITY_KIND_KERNEL` or
/// `_CONCURRENT_KERNEL`). `name` is the interned kernel name.
pub fn kernel(
    kind: u32,
    op: &SimOp,
    t: Times,
    correlation_id: u32,
    name: *const std::os::raw::c_char,
) -> Vec<u8> {
    debug_assert_eq!(op.kind, SIMOP_KERNEL);
    let mut rec = [0u8; kernel10::SIZE];
    let r = &mut rec[..];
    set!(r, kernel10, KIND / KIND_LEN, kind);
    set!(
        r,
        kernel10,
        REGISTERS_PER_THREAD / REGISTERS_PER_THREAD_LEN,
        op.registers
    );
    let not_supported = CUPTI_ACTIVITY_PARTITIONED_GLOBAL_CACHE_CONFIG_NOT_SUPPORTED;
    set!(
        r,
        kernel10,
        PARTITIONED_GLOBAL_CACHE_REQUESTED / PARTITIONED_GLOBAL_CACHE_REQUESTED_LEN,
        not_supported
    );
    set!(
        r,
        kernel10,
        PARTITIONED_GLOBAL_CACHE_EXECUTED / PARTITIONED_GLOBAL_CACHE_EXECUTED_LEN,
        not_supported
    );
    set!(r, kernel10, START / START_LEN, t.start);
    set!(r, kernel10, END / END_LEN, t.end);
    // CONCURRENT_KERNEL records carry the completion time; KERNEL records leave it unknown.
    let completed = if kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL {
        t.end
    } else {
        CUPTI_TIMESTAMP_UNKNOWN
    };
    set!(r, kernel10, COMPLETED / COMPLETED_LEN, completed);
    set!(r, kernel10, DEVICE_ID / DEVICE_ID_LEN, op.device);
    set!(r, kernel10, CONTEXT_ID / CONTEXT_ID_LEN, op.context_id);
    set!(r, kernel10, STREAM_ID / STREAM_ID_LEN, op.stream_id);
    set!(r, kernel10, GRID_X / GRID_X_LEN, op.grid[0]);
    set!(r, kernel10, GRID_Y / GRID_Y_LEN, op.grid[1]);
    set!(r, kernel10, GRID_Z / GRID_Z_LEN, op.grid[2]);
    set!(r, kernel10, BLOCK_X / BLOCK_X_LEN, op.block[0]);
    set!(r, kernel10, BLOCK_Y / BLOCK_Y_LEN, op.block[1]);
    set!(r, kernel10, BLOCK_Z / BLOCK_Z_LEN, op.block[2]);
    set!(
        r,
        kernel10,
        STATIC_SHARED_MEMORY / STATIC_SHARED_MEMORY_LEN,
        op.static_shared
    );
    set!(
        r,
        kernel10,
        DYNAMIC_SHARED_MEMORY / DYNAMIC_SHARED_MEMORY_LEN,
        op.dynamic_shared
    );
    set!(
        r,
        kernel10,
        CORRELATION_ID / CORRELATION_ID_LEN,
        correlation_id
    );
    set!(r, kernel10, GRID_ID / GRID_ID_LEN, op.grid_id);
    set!(r, kernel10, NAME / NAME_LEN, name as usize);
    set!(
        r,
        kernel10,
        SHARED_MEMORY_EXECUTED / SHARED_MEMORY_EXECUTED_LEN,
        op.static_shared.saturating_add(op.dynamic_shared)
    );
    set!(
        r,
        kernel10,
        CHANNEL_TYPE / CHANNEL_TYPE_LEN,
        CUPTI_CHANNEL_TYPE_COMPUTE
    );
    set!(
        r,
        kernel10,
        CLUSTER_SCHEDULING_POLICY / CLUSTER_SCHEDULING_POLICY_LEN,
        CLUSTER_SCHEDULING_POLICY
    );
    rec.to_vec()
}

/// A copy record (`CUpti_ActivityMemcpy6`).
pub fn memcpy(op: &SimOp, t: Times, correlation_id: u32) -> Vec<u8> {
    debug_assert_eq!(op.kind, SIMOP_MEMCPY);
    let mut rec = [0u8; memcpy6::SIZE];
    let r = &mut rec[..];
    set!(r, memcpy6, KIND / KIND_LEN, CUPTI_ACTIVITY_KIND_MEMCPY);
    set!(r, memcpy6, COPY_KIND / COPY_KIND_LEN, op.copy_kind);
    set!(r, memcpy6, SRC_KIND / SRC_KIND_LEN, op.src_kind);
    set!(r, memcpy6, DST_KIND / DST_KIND_LEN, op.dst_kind);
    let flags = if op.is_async != 0 {
        CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC
    } else {
        CUPTI_ACTIVITY_FLAG_NONE
    };
    set!(r, memcpy6, FLAGS / FLAGS_LEN, flags);
    set!(r, memcpy6, BYTES / BYTES_LEN, op.bytes);
    set!(r, memcpy6, START / START_LEN, t.start);
    set!(r, memcpy6, END / END_LEN, t.end);
    set!(r, memcpy6, DEVICE_ID / DEVICE_ID_LEN, op.device);
    set!(r, memcpy6, CONTEXT_ID / CONTEXT_ID_LEN, op.context_id);
    set!(r, memcpy6, STREAM_ID / STREAM_ID_LEN, op.stream_id);
    set!(
        r,
        memcpy6,
        CORRELATION_ID / CORRELATION_ID_LEN,
        correlation_id
    );
    set!(
        r,
        memcpy6,
        CHANNEL_TYPE / CHANNEL_TYPE_LEN,
        CUPTI_CHANNEL_TYPE_COMPUTE
    );
    set!(r, memcpy6, COPY_COUNT / COPY_COUNT_LEN, 1u64);
    rec.to_vec()
}

/// A memset record (`CUpti_ActivityMemset4`).
pub fn memset(op: &SimOp, t: Times, correlation_id: u32) -> Vec<u8> {
    debug_assert_eq!(op.kind, SIMOP_MEMSET);
    let mut rec = [0u8; memset4::SIZE];
    let r = &mut rec[..];
    set!(r, memset4, KIND / KIND_LEN, CUPTI_ACTIVITY_KIND_MEMSET);
    set!(r, memset4, VALUE / VALUE_LEN, op.value);
    set!(r, memset4, BYTES / BYTES_LEN, op.bytes);
    set!(r, memset4, START / START_LEN, t.start);
    set!(r, memset4, END / END_LEN, t.end);
    set!(r, memset4, DEVICE_ID / DEVICE_ID_LEN, op.device);
    set!(r, memset4, CONTEXT_ID / CONTEXT_ID_LEN, op.context_id);
    set!(r, memset4, STREAM_ID / STREAM_ID_LEN, op.stream_id);
    set!(
        r,
        memset4,
        CORRELATION_ID / CORRELATION_ID_LEN,
        correlation_id
    );
    let flags = if op.is_async != 0 {
        CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC
    } else {
        CUPTI_ACTIVITY_FLAG_NONE
    };
    set!(r, memset4, FLAGS / FLAGS_LEN, flags);
    set!(r, memset4, MEMORY_KIND / MEMORY_KIND_LEN, op.dst_kind);
    set!(
        r,
        memset4,
        CHANNEL_TYPE / CHANNEL_TYPE_LEN,
        CUPTI_CHANNEL_TYPE_COMPUTE
    );
    rec.to_vec()
}

/// A memory record (`CUpti_ActivityMemory4`, kind `CUPTI_ACTIVITY_KIND_MEMORY2`) for an
/// allocation or a release; `t.start` is its timestamp.
pub fn memory(op: &SimOp, t: Times, correlation_id: u32, process_id: u32) -> Vec<u8> {
    debug_assert!(op.kind == SIMOP_ALLOC || op.kind == SIMOP_FREE);
    let mut rec = [0u8; memory4::SIZE];
    let r = &mut rec[..];
    set!(r, memory4, KIND / KIND_LEN, CUPTI_ACTIVITY_KIND_MEMORY2);
    let operation = if op.kind == SIMOP_ALLOC {
        CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
    } else {
        CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE
    };
    set!(
        r,
        memory4,
        MEMORY_OPERATION_TYPE / MEMORY_OPERATION_TYPE_LEN,
        operation
    );
    set!(r, memory4, MEMORY_KIND / MEMORY_KIND_LEN, op.dst_kind);
    set!(
        r,
        memory4,
        CORRELATION_ID / CORRELATION_ID_LEN,
        correlation_id
    );
    set!(r, memory4, ADDRESS / ADDRESS_LEN, op.address);
    set!(r, memory4, BYTES / BYTES_LEN, op.bytes);
    set!(r, memory4, TIMESTAMP / TIMESTAMP_LEN, t.start);
    set!(r, memory4, PROCESS_ID / PROCESS_ID_LEN, process_id);
    set!(r, memory4, DEVICE_ID / DEVICE_ID_LEN, op.device);
    set!(r, memory4, CONTEXT_ID / CONTEXT_ID_LEN, op.context_id);
    set!(r, memory4, STREAM_ID / STREAM_ID_LEN, op.stream_id);
    set!(r, memory4, IS_ASYNC / IS_ASYNC_LEN, op.is_async);
    rec.to_vec()
}

/// A synchronization record (`CUpti_ActivitySynchronization2`) with the call's `CUresult`.
pub fn synchronization(op: &SimOp, t: Times, correlation_id: u32, result: u32) -> Vec<u8> {
    debug_assert_eq!(op.kind, SIMOP_SYNC);
    let mut rec = [0u8; synchronization2::SIZE];
    let r = &mut rec[..];
    set!(
        r,
        synchronization2,
        KIND / KIND_LEN,
        CUPTI_ACTIVITY_KIND_SYNCHRONIZATION
    );
    set!(r, synchronization2, TYPE / TYPE_LEN, op.sync_type);
    set!(r, synchronization2, START / START_LEN, t.start);
    set!(r, synchronization2, END / END_LEN, t.end);
    set!(
        r,
        synchronization2,
        CORRELATION_ID / CORRELATION_ID_LEN,
        correlation_id
    );
    set!(
        r,
        synchronization2,
        CONTEXT_ID / CONTEXT_ID_LEN,
        op.context_id
    );
    set!(r, synchronization2, STREAM_ID / STREAM_ID_LEN, op.stream_id);
    set!(
        r,
        synchronization2,
        CUDA_EVENT_ID / CUDA_EVENT_ID_LEN,
        op.event_id
    );
    // CUPTI 13.0 wrote 0 for event synchronizations and stream waits (no CUDA_EVENT records
    // to associate), and the 32-bit invalid value in this 64-bit field for the others.
    let event_sync_id = if op.event_id == crate::sim::SIM_ID_NONE {
        u64::from(CUPTI_SYNCHRONIZATION_INVALID_VALUE)
    } else {
        0
    };
    set!(
        r,
        synchronization2,
        CUDA_EVENT_SYNC_ID / CUDA_EVENT_SYNC_ID_LEN,
        event_sync_id
    );
    set!(r, synchronization2, RETURN_VALUE / RETURN_VALUE_LEN, result);
    rec.to_vec()
}

/// An external-correlation record (`CUpti_ActivityExternalCorrelation`).
pub fn external_correlation(external_kind: u32, external_id: u64, correlation_id: u32) -> Vec<u8> {
    let mut rec = [0u8; external_correlation::SIZE];
    let r = &mut rec[..];
    set!(
        r,
        external_correlation,
        KIND / KIND_LEN,
        CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION
    );
    set!(
        r,
        external_correlation,
        EXTERNAL_KIND / EXTERNAL_KIND_LEN,
        external_kind
    );
    set!(
        r,
        external_correlation,
        EXTERNAL_ID / EXTERNAL_ID_LEN,
        external_id
    );
    set!(
        r,
        external_correlation,
        CORRELATION_ID / CORRELATION_ID_LEN,
        correlation_id
    );
    rec.to_vec()
}

/// A driver API record (`CUpti_ActivityAPI` of kind `CUPTI_ACTIVITY_KIND_DRIVER`).
pub fn driver_api(
    cbid: u32,
    t: Times,
    process_id: u32,
    thread_id: u32,
    correlation_id: u32,
    result: u32,
) -> Vec<u8> {
    let mut rec = [0u8; api::SIZE];
    let r = &mut rec[..];
    set!(r, api, KIND / KIND_LEN, CUPTI_ACTIVITY_KIND_DRIVER);
    set!(r, api, CBID / CBID_LEN, cbid);
    set!(r, api, START / START_LEN, t.start);
    set!(r, api, END / END_LEN, t.end);
    set!(r, api, PROCESS_ID / PROCESS_ID_LEN, process_id);
    set!(r, api, THREAD_ID / THREAD_ID_LEN, thread_id);
    set!(r, api, CORRELATION_ID / CORRELATION_ID_LEN, correlation_id);
    set!(r, api, RETURN_VALUE / RETURN_VALUE_LEN, result);
    rec.to_vec()
}

/// A context record (`CUpti_ActivityContext3`) for a context created (`SIMOP_CONTEXT`): its id,
/// device, compute API `CUDA` and its legacy stream as the NULL stream (a 16-bit field).
pub fn context(op: &SimOp) -> Vec<u8> {
    debug_assert_eq!(op.kind, SIMOP_CONTEXT);
    let mut rec = [0u8; context3::SIZE];
    let r = &mut rec[..];
    set!(r, context3, KIND / KIND_LEN, CUPTI_ACTIVITY_KIND_CONTEXT);
    set!(r, context3, CONTEXT_ID / CONTEXT_ID_LEN, op.context_id);
    set!(r, context3, DEVICE_ID / DEVICE_ID_LEN, op.device);
    set!(
        r,
        context3,
        COMPUTE_API_KIND / COMPUTE_API_KIND_LEN,
        CUPTI_ACTIVITY_COMPUTE_API_CUDA
    );
    set!(
        r,
        context3,
        NULL_STREAM_ID / NULL_STREAM_ID_LEN,
        op.stream_id & 0xffff
    );
    rec.to_vec()
}

/// A stream record (`CUpti_ActivityStream`): `flag` a `CUPTI_ACTIVITY_STREAM_CREATE_FLAG_*`,
/// `priority` as the 32-bit field holds it (-5 is 0xfffffffb).
pub fn stream(context_id: u32, stream_id: u32, priority: i32, flag: u32, corr: u32) -> Vec<u8> {
    let mut rec = [0u8; layout::stream::SIZE];
    let r = &mut rec[..];
    set!(r, stream, KIND / KIND_LEN, CUPTI_ACTIVITY_KIND_STREAM);
    set!(r, stream, CONTEXT_ID / CONTEXT_ID_LEN, context_id);
    set!(r, stream, STREAM_ID / STREAM_ID_LEN, stream_id);
    set!(r, stream, PRIORITY / PRIORITY_LEN, priority as u32);
    set!(r, stream, FLAG / FLAG_LEN, flag);
    set!(r, stream, CORRELATION_ID / CORRELATION_ID_LEN, corr);
    rec.to_vec()
}

/// A function record (`CUpti_ActivityFunction`) of a module loaded (`SIMOP_MODULE`): `id`
/// simcupti's, `index` the function's place in the image, `name` the interned name.
pub fn function(id: u32, op: &SimOp, index: u32, name: *const std::os::raw::c_char) -> Vec<u8> {
    debug_assert_eq!(op.kind, SIMOP_MODULE);
    let mut rec = [0u8; layout::function::SIZE];
    let r = &mut rec[..];
    set!(r, function, KIND / KIND_LEN, CUPTI_ACTIVITY_KIND_FUNCTION);
    set!(r, function, ID / ID_LEN, id);
    set!(r, function, CONTEXT_ID / CONTEXT_ID_LEN, op.context_id);
    set!(r, function, MODULE_ID / MODULE_ID_LEN, op.module_id);
    set!(r, function, FUNCTION_INDEX / FUNCTION_INDEX_LEN, index);
    set!(r, function, NAME / NAME_LEN, name as usize);
    rec.to_vec()
}

/// The size of a record of activity kind `kind`, for the kinds simcupti writes (`None`: a kind
/// it does not know).
pub fn size_of_kind(kind: u32) -> Option<usize> {
    Some(match kind {
        CUPTI_ACTIVITY_KIND_KERNEL | CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL => kernel10::SIZE,
        CUPTI_ACTIVITY_KIND_MEMCPY => memcpy6::SIZE,
        CUPTI_ACTIVITY_KIND_MEMSET => memset4::SIZE,
        CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION => external_correlation::SIZE,
        CUPTI_ACTIVITY_KIND_DRIVER | CUPTI_ACTIVITY_KIND_RUNTIME => api::SIZE,
        CUPTI_ACTIVITY_KIND_MEMORY2 => memory4::SIZE,
        CUPTI_ACTIVITY_KIND_SYNCHRONIZATION => synchronization2::SIZE,
        CUPTI_ACTIVITY_KIND_CONTEXT => context3::SIZE,
        CUPTI_ACTIVITY_KIND_STREAM => layout::stream::SIZE,
        CUPTI_ACTIVITY_KIND_FUNCTION => layout::function::SIZE,
        CUPTI_ACTIVITY_KIND_MEMCPY2 => memcpy_ptop4::SIZE,
        _ => return None,
    })
}

/// Clears the timestamps of a GPU record whose operation had not ended when its buffer was
/// handed over by a forced flush (CUPTI leaves them 0).
pub fn clear_times(rec: &mut [u8], kind: u32) {
    let fields: &[(usize, usize)] = match kind {
        CUPTI_ACTIVITY_KIND_KERNEL | CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL => &[
            (kernel10::START, kernel10::START_LEN),
            (kernel10::END, kernel10::END_LEN),
            (kernel10::COMPLETED, kernel10::COMPLETED_LEN),
        ],
        CUPTI_ACTIVITY_KIND_MEMCPY => &[
            (memcpy6::START, memcpy6::START_LEN),
            (memcpy6::END, memcpy6::END_LEN),
        ],
        CUPTI_ACTIVITY_KIND_MEMSET => &[
            (memset4::START, memset4::START_LEN),
            (memset4::END, memset4::END_LEN),
        ],
        _ => &[],
    };
    for &(at, len) in fields {
        rec[at..at + len].fill(0);
    }
}

#[cfg(test)]
mod tests;
