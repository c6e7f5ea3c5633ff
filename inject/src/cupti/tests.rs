//! Unit tests of the CUPTI client: which calls are linked, and record conversion.

use super::callbacks::{makes_gpu_work, runtime_never_makes_work};
use super::layout;
use super::records::*;
use crate::gpu_batch::{GpuBatch, Links};
use rtrace_format::{
    ContextRecord, CopyKind, FunctionRecord, MemcpyRecord, MemoryKind, MemoryOperation,
    MemoryPoolType, MemoryRecord, PeerCopyRecord, StreamFlag, StreamRecord, SyncKind, SyncRecord,
    FLAG_CORRELATED,
};

#[test]
fn runtime_queries_are_not_linked() {
    let unlinked: Vec<&str> = rtrace_format::RUNTIME_API_CBID_NAMES
        .iter()
        .copied()
        .filter(|name| runtime_never_makes_work(name.as_bytes()))
        .collect();
    assert_eq!(unlinked.len(), 19);
    for name in [
        "cudaGetDevice_v3020",
        "cudaGetLastError_v3020",
        "cudaStreamIsCapturing_v10000",
    ] {
        assert!(unlinked.contains(&name), "{name}");
    }
    for name in [
        "cudaLaunchKernel_v7000",
        "cudaMemcpyAsync_v3020",
        "cudaMemsetAsync_v3020",
        "cudaGraphLaunch_v10000",
        "cudaMalloc_v3020",
        "cudaFree_v3020",
        "cudaStreamSynchronize_v3020",
        "cudaDeviceSynchronize_v3020",
        "cudaStreamCreate_v3020",
        "cudaSetDevice_v3020",
        "cudaFuncGetAttributes_v3020",
        "cudaEventRecord_v3020",
    ] {
        assert!(
            rtrace_format::RUNTIME_API_CBID_NAMES.contains(&name) && !unlinked.contains(&name),
            "{name}"
        );
    }
}

#[test]
fn linked_functions_are_gpu_work_allocations_synchronizations_and_stream_creators() {
    let linked: Vec<&str> = layout::DRIVER_API_CBIDS
        .iter()
        .map(|&(name, _)| name)
        .filter(|name| makes_gpu_work(name.as_bytes(), crate::config::GpuKinds::parse("all").0))
        .collect();
    assert_eq!(linked.len(), 161);
    let count = |kinds: &str| {
        let kinds = crate::config::GpuKinds::parse(kinds).0;
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
        0x09, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0,
    ];
    let null: [u8; 24] = [
        0x25, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0,
    ];
    let created: [u8; 24] = [
        0x25, 0, 0, 0, 1, 0, 0, 0, 0x0e, 0, 0, 0, 0xfb, 0xff, 0xff, 0xff, 2, 0, 0, 0, 8, 0, 0, 0,
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
