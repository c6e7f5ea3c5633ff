//! CUPTI activity records → rtrace records, into a [`GpuBatch`] with the ids the [`Links`]
//! give: one conversion per record kind, declared once in [`KINDS`] with the least size of its
//! record and its time fields.

use super::api::Api;
use super::clockmap::ClockMap;
use super::fields;
use super::layout;
use super::state::CUPTI;
use crate::gpu_batch::{GpuBatch, Links};
use crate::output::Sink;
use rtrace_format::{
    ContextRecord, CopyKind, FunctionRecord, MemcpyRecord, MemoryKind, MemoryOperation,
    MemoryPoolType, MemoryRecord, PeerCopyRecord, StreamFlag, StreamRecord, SyncKind, SyncRecord,
    FLAG_CORRELATED, FLAG_IN_GRAPH, FLAG_PROFILED,
};
use std::ffi::{c_char, CStr};
use std::sync::atomic::Ordering;

pub(super) fn rd<const N: usize>(rec: &[u8], at: usize) -> [u8; N] {
    rec[at..at + N].try_into().unwrap()
}
pub(super) fn u32_at(rec: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(rd(rec, at))
}
pub(super) fn i32_at(rec: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(rd(rec, at))
}
pub(super) fn u64_at(rec: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(rd(rec, at))
}

/// One CUPTI activity kind rtrace converts: CUPTI's kind, the least size of its record, its
/// time fields (put on rtrace's clock when CUPTI timed it on the program's), its conversion.
struct Kind {
    kind: u32,
    size: usize,
    times: &'static [usize],
    convert: fn(&[u8], &mut GpuBatch, &Links),
}

/// The kinds rtrace converts, each declared once.
const KINDS: [Kind; 10] = {
    use layout::*;
    [
        Kind {
            kind: CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
            size: kernel10::SIZE,
            times: &[kernel10::START, kernel10::END, kernel10::COMPLETED],
            convert: kernel,
        },
        Kind {
            kind: CUPTI_ACTIVITY_KIND_KERNEL,
            size: kernel10::SIZE,
            times: &[kernel10::START, kernel10::END, kernel10::COMPLETED],
            convert: kernel,
        },
        Kind {
            kind: CUPTI_ACTIVITY_KIND_MEMCPY,
            size: memcpy6::SIZE,
            times: &[memcpy6::START, memcpy6::END],
            convert: memcpy,
        },
        Kind {
            kind: CUPTI_ACTIVITY_KIND_MEMSET,
            size: memset4::SIZE,
            times: &[memset4::START, memset4::END],
            convert: memset,
        },
        Kind {
            kind: CUPTI_ACTIVITY_KIND_MEMORY2,
            size: memory4::SIZE,
            times: &[memory4::TIMESTAMP],
            convert: memory,
        },
        Kind {
            kind: CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
            size: synchronization2::SIZE,
            times: &[synchronization2::START, synchronization2::END],
            convert: sync,
        },
        Kind {
            kind: CUPTI_ACTIVITY_KIND_MEMCPY2,
            size: memcpy_ptop4::SIZE,
            times: &[memcpy_ptop4::START, memcpy_ptop4::END],
            convert: peer_copy,
        },
        Kind {
            kind: CUPTI_ACTIVITY_KIND_CONTEXT,
            size: context3::SIZE,
            times: &[],
            convert: |r, batch, _| context(r, batch),
        },
        Kind {
            kind: CUPTI_ACTIVITY_KIND_STREAM,
            size: stream::SIZE,
            times: &[],
            convert: stream,
        },
        Kind {
            kind: CUPTI_ACTIVITY_KIND_FUNCTION,
            size: function::SIZE,
            times: &[],
            convert: |r, batch, _| function(r, batch),
        },
    ]
};

fn kind_of(kind: i32) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.kind as i32 == kind)
}

/// The timestamp fields of a record of `kind`.
pub(super) fn time_fields(kind: i32) -> &'static [usize] {
    kind_of(kind).map_or(&[], |k| k.times)
}

/// Puts the times of a record CUPTI timed on the program's clock on rtrace's.
pub(super) fn retime(kind: i32, rec: &mut [u8], map: &ClockMap) {
    for &at in time_fields(kind) {
        if at + 8 <= rec.len() {
            let t = map.map(u64_at(rec, at));
            rec[at..at + 8].copy_from_slice(&t.to_le_bytes());
        }
    }
}

/// Walks one CUPTI buffer and appends the records of rtrace's kinds to `sink`'s GPU batch;
/// `map` puts times of the program's clock on rtrace's.
pub(super) fn convert(
    api: &Api,
    base: *mut u8,
    valid: usize,
    sink: &mut Sink,
    map: Option<&ClockMap>,
) {
    let ours = CUPTI.share.our_kinds.load(Ordering::Acquire);
    let mut rec: *mut u8 = std::ptr::null_mut();
    let mut copy = [0u8; 256];
    loop {
        // SAFETY: `base..base+valid` is the buffer CUPTI filled; `rec` is CUPTI's cursor.
        if unsafe { (api.next_record)(base, valid, &mut rec) } != 0 || rec.is_null() {
            break;
        }
        let offset = rec as usize - base as usize;
        // SAFETY: the record lies inside the valid part of the buffer.
        let mut bytes: &[u8] = unsafe { std::slice::from_raw_parts(rec, valid - offset) };
        let kind = u32_at(bytes, 0) as i32;
        if !(0..64).contains(&kind) || ours & (1u64 << kind) == 0 {
            continue;
        }
        if let Some(map) = map {
            let n = bytes.len().min(copy.len());
            copy[..n].copy_from_slice(&bytes[..n]);
            retime(kind, &mut copy[..n], map);
            bytes = &copy[..n];
        }
        if let Some(k) = kind_of(kind) {
            if bytes.len() >= k.size {
                (k.convert)(bytes, &mut sink.gpu_batch, &sink.links);
            }
        }
    }
}

pub(super) fn graph_flags(graph_id: u32) -> u32 {
    if graph_id != 0 {
        FLAG_IN_GRAPH
    } else {
        0
    }
}

/// rtrace's correlation id for CUPTI's `source`, and the flags that say whether there was one.
pub(super) fn correlate(links: &Links, source: u32, flags: u32) -> (u64, u32) {
    match links.get(source) {
        Some(c) => (c, flags | FLAG_CORRELATED),
        None => (0, flags),
    }
}

pub(super) fn kernel(r: &[u8], batch: &mut GpuBatch, links: &Links) {
    // One length check: the fields' offsets are constants within it, so each read is a load.
    let Some(r) = r.get(..layout::kernel10::SIZE) else {
        return;
    };
    let mut rec = fields::KERNEL.record(r);
    let name_ptr = fields::KERNEL.name_address(r) as *const c_char;
    // SAFETY: CUPTI's NUL-terminated kernel name (or null), valid while the record is.
    let text = (!name_ptr.is_null()).then(|| unsafe { CStr::from_ptr(name_ptr) });
    let (correlation, flags) = correlate(links, rec.source_correlation, rec.flags);
    if !crate::capture::keep_work(flags)
        || !crate::capture::keep_kernel(name_ptr as usize, || {
            text.map_or(
                std::borrow::Cow::Borrowed("<unknown>"),
                CStr::to_string_lossy,
            )
        })
    {
        return;
    }
    let (mut start_ns, mut end_ns, mut flags) = (rec.start_ns, rec.end_ns, flags);
    if correlation != 0 && CUPTI.prof.on.load(Ordering::Relaxed) {
        if let Some((start, end)) = super::profiler::take_profiled_times(correlation) {
            (start_ns, end_ns, flags) = (start, end, flags | FLAG_PROFILED);
        }
    }
    rec.correlation = correlation;
    (rec.start_ns, rec.end_ns, rec.flags) = (start_ns, end_ns, flags);
    rec.name = match text {
        Some(text) => batch.name_id_at(name_ptr as u64, text),
        None => batch.name_id("<unknown>"),
    };
    batch.kernels.extend_from_slice(&rec.to_bytes());
}

pub(super) fn memcpy(r: &[u8], batch: &mut GpuBatch, links: &Links) {
    let Some(r) = r.get(..layout::memcpy6::SIZE) else {
        return;
    };
    let mut rec = fields::COPY.record(r);
    let (correlation, flags) = correlate(links, rec.source_correlation, u32::from(rec.flags));
    if !crate::capture::keep_work(flags) {
        return;
    }
    (rec.correlation, rec.flags) = (correlation, flags as u8);
    batch.memcpys.extend_from_slice(&rec.to_bytes());
}

pub(super) fn memset(r: &[u8], batch: &mut GpuBatch, links: &Links) {
    let Some(r) = r.get(..layout::memset4::SIZE) else {
        return;
    };
    let mut rec = fields::SET.record(r);
    let (correlation, flags) = correlate(links, rec.source_correlation, 0);
    if !crate::capture::keep_work(flags) {
        return;
    }
    rec.correlation = correlation;
    batch.memsets.extend_from_slice(&rec.to_bytes());
}

pub(super) fn memory(r: &[u8], batch: &mut GpuBatch, links: &Links) {
    use layout::memory4 as m;
    let (correlation, flags) = correlate(links, u32_at(r, m::CORRELATION_ID), 0);
    if !crate::capture::keep_work(flags) {
        return;
    }
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

pub(super) fn sync(r: &[u8], batch: &mut GpuBatch, links: &Links) {
    use layout::synchronization2 as s;
    let (correlation, flags) = correlate(links, u32_at(r, s::CORRELATION_ID), 0);
    if !crate::capture::keep_work(flags) {
        return;
    }
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

pub(super) fn peer_copy(r: &[u8], batch: &mut GpuBatch, links: &Links) {
    use layout::memcpy_ptop4 as m;
    let graph_id = u32_at(r, m::GRAPH_ID);
    let (correlation, flags) =
        correlate(links, u32_at(r, m::CORRELATION_ID), graph_flags(graph_id));
    if !crate::capture::keep_work(flags) {
        return;
    }
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

pub(super) fn context(r: &[u8], batch: &mut GpuBatch) {
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

pub(super) fn stream(r: &[u8], batch: &mut GpuBatch, links: &Links) {
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

pub(super) fn function(r: &[u8], batch: &mut GpuBatch) {
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
