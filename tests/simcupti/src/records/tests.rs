//! Record bytes: every byte of each record simcupti writes, compared with a record built from
//! the expected field values (all other bytes zero).

use super::*;

/// A record of `size` zero bytes with `fields` (offset, width, value) set, little-endian.
fn expected(size: usize, fields: &[(usize, usize, u64)]) -> Vec<u8> {
    let mut r = vec![0u8; size];
    for &(at, len, v) in fields {
        r[at..at + len].copy_from_slice(&v.to_le_bytes()[..len]);
    }
    r
}

fn kernel_op() -> SimOp {
    let mut op = SimOp::zeroed(SIMOP_KERNEL);
    op.device = 1;
    op.context_id = 5;
    op.stream_id = 9;
    op.start_ns = 26_820;
    op.end_ns = 28_820;
    op.grid = [2, 3, 4];
    op.block = [32, 2, 1];
    op.dynamic_shared = 128;
    op.static_shared = 1024;
    op.registers = 32;
    op.grid_id = 7;
    op.is_async = 1;
    op
}

#[test]
fn concurrent_kernel_record() {
    use kernel10 as k;
    let t = Times {
        start: 1_000_026_820,
        end: 1_000_028_820,
    };
    let name = 0x1234_5678_9abc_usize as *const std::os::raw::c_char;
    let rec = kernel(
        CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
        &kernel_op(),
        t,
        42,
        name,
    );
    let want = expected(
        k::SIZE,
        &[
            (k::KIND, 4, 10),
            (k::REGISTERS_PER_THREAD, 2, 32),
            (k::PARTITIONED_GLOBAL_CACHE_REQUESTED, 4, 1),
            (k::PARTITIONED_GLOBAL_CACHE_EXECUTED, 4, 1),
            (k::START, 8, 1_000_026_820),
            (k::END, 8, 1_000_028_820),
            (k::COMPLETED, 8, 1_000_028_820),
            (k::DEVICE_ID, 4, 1),
            (k::CONTEXT_ID, 4, 5),
            (k::STREAM_ID, 4, 9),
            (k::GRID_X, 4, 2),
            (k::GRID_Y, 4, 3),
            (k::GRID_Z, 4, 4),
            (k::BLOCK_X, 4, 32),
            (k::BLOCK_Y, 4, 2),
            (k::BLOCK_Z, 4, 1),
            (k::STATIC_SHARED_MEMORY, 4, 1024),
            (k::DYNAMIC_SHARED_MEMORY, 4, 128),
            (k::CORRELATION_ID, 4, 42),
            (k::GRID_ID, 8, 7),
            (k::NAME, 8, 0x1234_5678_9abc),
            (k::SHARED_MEMORY_EXECUTED, 4, 1152),
            (k::CHANNEL_TYPE, 4, 1),
            (k::CLUSTER_SCHEDULING_POLICY, 4, 1),
        ],
    );
    assert_eq!(rec, want);
    // The fixed offsets of CUPTI 13.0 (as gcc's offsetof gives them for cupti_activity.h).
    assert_eq!(
        (k::SIZE, k::START, k::CORRELATION_ID, k::NAME),
        (216, 16, 92, 104)
    );
    // The first 16 bytes, as CUPTI 13.0 wrote them on an H100 for such a launch (but for the
    // register count): kind 10, cacheConfig 0, sharedMemoryConfig 0, 32 registers, then the
    // partitioned global cache configs (NOT_SUPPORTED).
    assert_eq!(
        rec[..16],
        [10, 0, 0, 0, 0, 0, 32, 0, 1, 0, 0, 0, 1, 0, 0, 0]
    );
}

#[test]
fn serial_kernel_record_has_no_completion_time() {
    let t = Times { start: 5, end: 9 };
    let rec = kernel(
        CUPTI_ACTIVITY_KIND_KERNEL,
        &kernel_op(),
        t,
        1,
        std::ptr::null(),
    );
    assert_eq!(rec[..4], 3u32.to_le_bytes());
    let completed = &rec[kernel10::COMPLETED..kernel10::COMPLETED + 8];
    assert_eq!(completed, &[0; 8]);
}

#[test]
fn memcpy_record() {
    use memcpy6 as m;
    let mut op = SimOp::zeroed(SIMOP_MEMCPY);
    op.device = 0;
    op.context_id = 1;
    op.stream_id = 2;
    op.bytes = 4096;
    op.copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    op.src_kind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    op.dst_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    op.is_async = 1;
    let rec = memcpy(
        &op,
        Times {
            start: 100,
            end: 510,
        },
        8,
    );
    let want = expected(
        m::SIZE,
        &[
            (m::KIND, 4, 1),
            (m::COPY_KIND, 1, 1),
            (m::SRC_KIND, 1, 2),
            (m::DST_KIND, 1, 3),
            (m::FLAGS, 1, 1),
            (m::BYTES, 8, 4096),
            (m::START, 8, 100),
            (m::END, 8, 510),
            (m::CONTEXT_ID, 4, 1),
            (m::STREAM_ID, 4, 2),
            (m::CORRELATION_ID, 4, 8),
            (m::CHANNEL_TYPE, 4, 1),
            (m::COPY_COUNT, 8, 1),
        ],
    );
    assert_eq!(rec, want);
    // As CUPTI 13.0 wrote a synchronous pageable-to-device copy's first 8 bytes.
    op.src_kind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
    op.is_async = 0;
    let rec = memcpy(&op, Times { start: 1, end: 2 }, 8);
    assert_eq!(rec[..8], [1, 0, 0, 0, 1, 1, 3, 0]);
    assert_eq!(m::SIZE, 96);
}

#[test]
fn memset_record() {
    use memset4 as m;
    let mut op = SimOp::zeroed(SIMOP_MEMSET);
    op.context_id = 1;
    op.stream_id = 2;
    op.bytes = 4096;
    op.value = 0x5a;
    op.src_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    op.dst_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    let rec = memset(&op, Times { start: 7, end: 417 }, 19);
    let want = expected(
        m::SIZE,
        &[
            (m::KIND, 4, 2),
            (m::VALUE, 4, 0x5a),
            (m::BYTES, 8, 4096),
            (m::START, 8, 7),
            (m::END, 8, 417),
            (m::CONTEXT_ID, 4, 1),
            (m::STREAM_ID, 4, 2),
            (m::CORRELATION_ID, 4, 19),
            (m::MEMORY_KIND, 2, 3),
            (m::CHANNEL_TYPE, 4, 1),
        ],
    );
    assert_eq!(rec, want);
    // CUPTI 13.0's bytes 48..56 for a synchronous device memset: flags 0, memoryKind 3.
    assert_eq!(rec[48..56], [0, 0, 3, 0, 0, 0, 0, 0]);
    op.is_async = 1;
    assert_eq!(memset(&op, Times { start: 7, end: 417 }, 19)[m::FLAGS], 1);
}

#[test]
fn external_correlation_and_api_records() {
    // As CUPTI 13.0 wrote them (hex of the H100 run, but the timestamps and thread).
    let ext = external_correlation(CUPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN, 200, 29);
    assert_eq!(
        ext,
        [39, 0, 0, 0, 1, 0, 0, 0, 200, 0, 0, 0, 0, 0, 0, 0, 29, 0, 0, 0, 0, 0, 0, 0]
    );
    let t = Times {
        start: 0x0102_0304,
        end: 0x0506_0708,
    };
    let rec = driver_api(307, t, 517, 0x599a_7740, 29, 0);
    let want = expected(
        api::SIZE,
        &[
            (api::KIND, 4, 4),
            (api::CBID, 4, 307),
            (api::START, 8, 0x0102_0304),
            (api::END, 8, 0x0506_0708),
            (api::PROCESS_ID, 4, 517),
            (api::THREAD_ID, 4, 0x599a_7740),
            (api::CORRELATION_ID, 4, 29),
        ],
    );
    assert_eq!(rec, want);
}

#[test]
fn memory_records() {
    use memory4 as m;
    let mut op = SimOp::zeroed(SIMOP_ALLOC);
    op.device = 0;
    op.context_id = 1;
    op.stream_id = crate::sim::SIM_ID_NONE;
    op.start_ns = 19_000;
    op.end_ns = 19_000;
    op.address = 0x7fa8_5c80_0000;
    op.bytes = 1 << 20;
    op.dst_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    let t = Times {
        start: 19_000,
        end: 19_000,
    };
    let rec = memory(&op, t, 4, 409);
    // The fields CUPTI 13.0 set for a cuMemAlloc_v2 on an H200 (PC, name, pool and source 0).
    let want = expected(
        m::SIZE,
        &[
            (m::KIND, 4, 49),
            (m::MEMORY_OPERATION_TYPE, 4, 1),
            (m::MEMORY_KIND, 4, 3),
            (m::CORRELATION_ID, 4, 4),
            (m::ADDRESS, 8, 0x7fa8_5c80_0000),
            (m::BYTES, 8, 1 << 20),
            (m::TIMESTAMP, 8, 19_000),
            (m::PROCESS_ID, 4, 409),
            (m::CONTEXT_ID, 4, 1),
            (m::STREAM_ID, 4, 0xffff_ffff),
        ],
    );
    assert_eq!(rec, want);
    assert_eq!(rec.len(), 128);
    op.kind = SIMOP_FREE;
    op.dst_kind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    let rec = memory(&op, t, 27, 409);
    assert_eq!(rec[4..16], [2, 0, 0, 0, 2, 0, 0, 0, 27, 0, 0, 0]);
}

#[test]
fn synchronization_records() {
    use synchronization2 as s;
    let none = crate::sim::SIM_ID_NONE;
    let mut op = SimOp::zeroed(SIMOP_SYNC);
    op.sync_type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    op.context_id = 1;
    op.stream_id = 13;
    op.event_id = none;
    let t = Times {
        start: 2_000,
        end: 209_795,
    };
    let rec = synchronization(&op, t, 15, 0);
    // As CUPTI 13.0 wrote a cuStreamSynchronize (H200): no event, the 32-bit invalid value in
    // the 64-bit cudaEventSyncId.
    let want = expected(
        s::SIZE,
        &[
            (s::KIND, 4, 38),
            (s::TYPE, 4, 3),
            (s::START, 8, 2_000),
            (s::END, 8, 209_795),
            (s::CORRELATION_ID, 4, 15),
            (s::CONTEXT_ID, 4, 1),
            (s::STREAM_ID, 4, 13),
            (s::CUDA_EVENT_ID, 4, 0xffff_ffff),
            (s::CUDA_EVENT_SYNC_ID, 8, 0xffff_ffff),
        ],
    );
    assert_eq!(rec, want);
    assert_eq!(rec.len(), 56);
    // An event synchronization: the event's id, cudaEventSyncId 0, and the call's result.
    op.sync_type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE;
    op.stream_id = none;
    op.event_id = 1;
    let rec = synchronization(&op, t, 13, 600);
    assert_eq!(rec[32..56], {
        let mut b = [0u8; 24];
        b[..4].copy_from_slice(&none.to_le_bytes());
        b[4] = 1;
        b[16..18].copy_from_slice(&600u16.to_le_bytes());
        b
    });
}

#[test]
fn sizes_by_kind_and_clearing_times() {
    assert_eq!(size_of_kind(CUPTI_ACTIVITY_KIND_MEMORY2), Some(128));
    assert_eq!(size_of_kind(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION), Some(56));
    assert_eq!(
        size_of_kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
        Some(216)
    );
    assert_eq!(size_of_kind(CUPTI_ACTIVITY_KIND_KERNEL), Some(216));
    assert_eq!(size_of_kind(CUPTI_ACTIVITY_KIND_MEMCPY), Some(96));
    assert_eq!(size_of_kind(CUPTI_ACTIVITY_KIND_MEMSET), Some(88));
    assert_eq!(
        size_of_kind(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION),
        Some(24)
    );
    assert_eq!(size_of_kind(CUPTI_ACTIVITY_KIND_DRIVER), Some(40));
    assert_eq!(size_of_kind(CUPTI_ACTIVITY_KIND_INVALID), None);
    assert_eq!(size_of_kind(9999), None);
    let t = Times { start: 5, end: 9 };
    let mut rec = kernel(
        CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
        &kernel_op(),
        t,
        3,
        std::ptr::null(),
    );
    let before = rec.clone();
    clear_times(&mut rec, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    for (i, (a, b)) in before.iter().zip(&rec).enumerate() {
        let in_times = (kernel10::START..kernel10::COMPLETED + 8).contains(&i);
        assert_eq!(*b, if in_times { 0 } else { *a }, "byte {i}");
    }
}

#[test]
fn context_stream_and_function_records() {
    // As CUPTI 13.0 wrote them on an H200 (driver 580.159.04) for a primary context (id 1,
    // NULL stream 7), a stream created with CU_STREAM_NON_BLOCKING and priority -5 by the call
    // of correlation id 8, and a module's function (docs/gpu-activity-design.md).
    let mut op = SimOp::zeroed(crate::sim::SIMOP_CONTEXT);
    op.context_id = 1;
    op.stream_id = 7;
    let rec = context(&op);
    assert_eq!(
        rec,
        [
            0x09, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, 0
        ]
    );
    let rec = stream(1, 14, -5, CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NON_BLOCKING, 8);
    assert_eq!(
        rec,
        [
            0x25, 0, 0, 0, 1, 0, 0, 0, 0x0e, 0, 0, 0, 0xfb, 0xff, 0xff, 0xff, 2, 0, 0, 0, 8, 0, 0,
            0
        ]
    );
    let mut op = SimOp::zeroed(crate::sim::SIMOP_MODULE);
    op.context_id = 1;
    op.module_id = 23;
    let name = 0x7f00_1234_5678_usize as *const std::os::raw::c_char;
    let rec = function(1, &op, 12, name);
    let want = expected(
        layout::function::SIZE,
        &[
            (layout::function::KIND, 4, 26),
            (layout::function::ID, 4, 1),
            (layout::function::CONTEXT_ID, 4, 1),
            (layout::function::MODULE_ID, 4, 23),
            (layout::function::FUNCTION_INDEX, 4, 12),
            (layout::function::NAME, 8, name as u64),
        ],
    );
    assert_eq!(rec, want);
    assert_eq!(
        rec[..24],
        [0x1a, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0x17, 0, 0, 0, 0x0c, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(size_of_kind(CUPTI_ACTIVITY_KIND_CONTEXT), Some(32));
    assert_eq!(size_of_kind(CUPTI_ACTIVITY_KIND_STREAM), Some(24));
    assert_eq!(size_of_kind(CUPTI_ACTIVITY_KIND_FUNCTION), Some(32));
    assert_eq!(size_of_kind(CUPTI_ACTIVITY_KIND_MEMCPY2), Some(96));
    assert_eq!(size_of_kind(CUPTI_ACTIVITY_KIND_MODULE), None);
    // CUPTI 13.0 refuses to enable module records.
    assert_eq!(
        crate::state::with(|st| st.enable(CUPTI_ACTIVITY_KIND_MODULE)),
        CUPTI_ERROR_INVALID_KIND
    );
}
