//! Where the fields rtrace reads lie in CUPTI's kernel, copy and memset records, from the
//! generated layouts: the conversion reads them ([`super::records`]), and the trace carries
//! them ([`buffer_layout`]) for a reader that rebuilds records from CUPTI's buffers.

use super::api::Api;
use super::layout::{self, kernel10 as k, memcpy6 as c, memset4 as s};
use rtrace_format::gpu_region::{CopyFields, GpuBufferLayout, KernelFields, SetFields};

pub(super) const KERNEL: KernelFields = KernelFields {
    start: k::START as u32,
    end: k::END as u32,
    correlation: k::CORRELATION_ID as u32,
    device: k::DEVICE_ID as u32,
    context: k::CONTEXT_ID as u32,
    stream: k::STREAM_ID as u32,
    graph_id: k::GRAPH_ID as u32,
    graph_node_id: k::GRAPH_NODE_ID as u32,
    name: k::NAME as u32,
    grid: [k::GRID_X as u32, k::GRID_Y as u32, k::GRID_Z as u32],
    block: [k::BLOCK_X as u32, k::BLOCK_Y as u32, k::BLOCK_Z as u32],
    cluster: [
        k::CLUSTER_X as u32,
        k::CLUSTER_Y as u32,
        k::CLUSTER_Z as u32,
    ],
    dynamic_shared_memory: k::DYNAMIC_SHARED_MEMORY as u32,
    static_shared_memory: k::STATIC_SHARED_MEMORY as u32,
    registers_per_thread: k::REGISTERS_PER_THREAD as u32,
    local_memory_per_thread: k::LOCAL_MEMORY_PER_THREAD as u32,
};

pub(super) const COPY: CopyFields = CopyFields {
    start: c::START as u32,
    end: c::END as u32,
    bytes: c::BYTES as u32,
    correlation: c::CORRELATION_ID as u32,
    device: c::DEVICE_ID as u32,
    context: c::CONTEXT_ID as u32,
    stream: c::STREAM_ID as u32,
    copy_kind: c::COPY_KIND as u32,
    src_kind: c::SRC_KIND as u32,
    dst_kind: c::DST_KIND as u32,
    graph_id: c::GRAPH_ID as u32,
    graph_node_id: c::GRAPH_NODE_ID as u32,
};

pub(super) const SET: SetFields = SetFields {
    start: s::START as u32,
    end: s::END as u32,
    bytes: s::BYTES as u32,
    correlation: s::CORRELATION_ID as u32,
    device: s::DEVICE_ID as u32,
    context: s::CONTEXT_ID as u32,
    stream: s::STREAM_ID as u32,
    value: s::VALUE as u32,
    graph_id: s::GRAPH_ID as u32,
    graph_node_id: s::GRAPH_NODE_ID as u32,
};

/// The size of CUPTI's records of `kind`, as its own cursor steps over them: the distance
/// `cuptiActivityGetNextRecord` moves on a buffer whose every 8-byte word holds `kind` (None:
/// CUPTI does not step over such a record).
fn stride(api: &Api, kind: u32) -> Option<u32> {
    let mut words = vec![u64::from(kind); 1024];
    let base = words.as_mut_ptr() as *mut u8;
    let mut rec: *mut u8 = std::ptr::null_mut();
    for _ in 0..2 {
        // SAFETY: CUPTI reads the 8 KiB buffer `words` and moves its cursor `rec` inside it.
        if unsafe { (api.next_record)(base, words.len() * 8, &mut rec) } != 0 || rec.is_null() {
            return None;
        }
    }
    u32::try_from(rec as usize - base as usize)
        .ok()
        .filter(|&n| n >= 8)
}

/// How a reader finds its way in rtrace's buffers: the record sizes CUPTI steps over, and
/// where the fields lie of the kinds a rebuilt trace holds. `filtered`: capture control
/// chooses which work to keep.
pub(super) fn buffer_layout(api: &Api, filtered: bool) -> GpuBufferLayout {
    let kernel_kinds = vec![
        layout::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
        layout::CUPTI_ACTIVITY_KIND_KERNEL,
    ];
    GpuBufferLayout {
        // Every kind CUPTI knows: a walk stops at a record of a kind it cannot step over.
        strides: (1..64)
            .filter_map(|kind| Some((kind, stride(api, kind)?)))
            .collect(),
        kernel_kinds,
        memcpy_kind: layout::CUPTI_ACTIVITY_KIND_MEMCPY,
        memset_kind: layout::CUPTI_ACTIVITY_KIND_MEMSET,
        kernel: KERNEL,
        memcpy: COPY,
        memset: SET,
        filtered,
    }
}
