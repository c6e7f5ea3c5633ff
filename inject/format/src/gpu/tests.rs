//! Round trips of every GPU record field.

use super::*;

#[test]
fn kernel_record_round_trips_every_field() {
    let k = KernelRecord {
        correlation: 1,
        start_ns: 2,
        end_ns: 3,
        graph_node_id: 4,
        source_correlation: 5,
        name: 6,
        device: 7,
        context: 8,
        stream: 9,
        graph_id: 10,
        grid: [11, 12, 13],
        block: [14, 15, 16],
        cluster: [17, 18, 19],
        dynamic_shared_memory: 20,
        static_shared_memory: 21,
        registers_per_thread: 22,
        local_memory_per_thread: 23,
        flags: 24,
    };
    assert_eq!(KernelRecord::from_bytes(&k.to_bytes()), k);
}

#[test]
fn copy_and_set_records_round_trip() {
    let m = MemcpyRecord {
        correlation: 1,
        start_ns: 2,
        end_ns: 3,
        bytes: 4,
        source_correlation: 5,
        device: 6,
        context: 7,
        stream: 8,
        kind: CopyKind::PtoP,
        src_kind: MemoryKind::Pinned,
        dst_kind: MemoryKind::Managed,
        flags: 1,
        graph_id: 9,
        graph_node_id: 10,
    };
    assert_eq!(MemcpyRecord::from_bytes(&m.to_bytes()), m);
    let s = MemsetRecord {
        correlation: 1,
        start_ns: 2,
        end_ns: 3,
        bytes: 4,
        source_correlation: 5,
        device: 6,
        context: 7,
        stream: 8,
        value: 9,
        graph_id: 10,
        graph_node_id: 11,
    };
    assert_eq!(MemsetRecord::from_bytes(&s.to_bytes()), s);
    for v in 0..=10 {
        assert_eq!(CopyKind::from_u8(v) as u8, v);
    }
    for v in 0..=7 {
        assert_eq!(MemoryKind::from_u8(v) as u8, v);
    }
}

#[test]
fn memory_record_round_trips_every_field() {
    let m = MemoryRecord {
        correlation: 1,
        timestamp_ns: 2,
        address: 0x7fa8_5c80_0000,
        bytes: 4,
        pc: 5,
        pool_address: 6,
        pool_size: 7,
        pool_utilized: 8,
        pool_release_threshold: 9,
        source_correlation: 10,
        device: 11,
        context: 12,
        stream: ID_NONE,
        operation: MemoryOperation::Free,
        kind: MemoryKind::Managed,
        pool_type: MemoryPoolType::Imported,
        flags: FLAG_CORRELATED as u8,
        is_async: true,
    };
    let b = m.to_bytes();
    assert_eq!(MemoryRecord::from_bytes(&b), m);
    // Fixed offsets: the format is the bytes, not the struct.
    assert_eq!(b[16..24], 0x7fa8_5c80_0000u64.to_le_bytes());
    assert_eq!(b[84..92], [0xff, 0xff, 0xff, 0xff, 2, 5, 2, 2]);
    assert_eq!(b[92..], [1, 0, 0, 0]);
    let default = MemoryRecord::default();
    assert_eq!(MemoryRecord::from_bytes(&default.to_bytes()), default);
    for v in 0..=2 {
        assert_eq!(MemoryOperation::from_u8(v) as u8, v);
        assert_eq!(MemoryPoolType::from_u8(v) as u8, v);
    }
    assert_eq!(MemoryOperation::from_u8(3), MemoryOperation::Unknown);
    assert_eq!(MemoryPoolType::from_u8(9), MemoryPoolType::None);
    assert_eq!(MemoryOperation::Alloc.name(), "alloc");
    assert_eq!(MemoryPoolType::Local.name(), "local");
}

#[test]
fn sync_record_round_trips_every_field() {
    let s = SyncRecord {
        correlation: 1,
        start_ns: 200,
        end_ns: 350,
        source_correlation: 4,
        context: 5,
        stream: 6,
        event: ID_NONE,
        result: 600,
        kind: SyncKind::StreamWaitEvent,
        flags: FLAG_CORRELATED as u8,
    };
    let b = s.to_bytes();
    assert_eq!(SyncRecord::from_bytes(&b), s);
    assert_eq!(b[40..], [0x58, 2, 0, 0, 2, 2, 0, 0]);
    assert_eq!(s.wait_ns(), 150);
    assert_eq!(SyncRecord { end_ns: 100, ..s }.wait_ns(), 0);
    for v in 0..=4 {
        assert_eq!(SyncKind::from_u8(v) as u8, v);
    }
    assert_eq!(SyncKind::from_u8(5), SyncKind::Unknown);
    assert_eq!(SyncKind::ContextSynchronize.name(), "context synchronize");
    for (kind, v) in [(crate::ChunkKind::Memory, 11), (crate::ChunkKind::Sync, 12)] {
        assert_eq!(kind.to_u16(), v);
        assert_eq!(crate::ChunkKind::from_u16(v), kind);
    }
}

#[test]
fn resource_records_round_trip_at_fixed_offsets() {
    let c = ContextRecord {
        context: 1,
        device: 2,
        null_stream: 3,
        parent_context: 4,
        compute_api: 1,
        num_multiprocessors: 66,
        cig_mode: 2,
        is_green: true,
    };
    let b = c.to_bytes();
    assert_eq!(ContextRecord::from_bytes(&b), c);
    assert_eq!(b[16..], [1, 0, 66, 0, 2, 1, 0, 0]);
    let s = StreamRecord {
        correlation: 7,
        source_correlation: 8,
        context: 1,
        stream: 13,
        priority: -5,
        flag: StreamFlag::NonBlocking,
        flags: FLAG_CORRELATED as u8,
    };
    let b = s.to_bytes();
    assert_eq!(StreamRecord::from_bytes(&b), s);
    assert_eq!(b[16..28], [13, 0, 0, 0, 0xfb, 0xff, 0xff, 0xff, 2, 2, 0, 0]);
    let m = ModuleRecord {
        correlation: 1,
        timestamp_ns: 2,
        cubin_size: 6584,
        module: 23,
        context: 1,
        flags: FLAG_CORRELATED as u8,
    };
    let b = m.to_bytes();
    assert_eq!(ModuleRecord::from_bytes(&b), m);
    assert_eq!(b[24..33], [23, 0, 0, 0, 1, 0, 0, 0, 2]);
    let f = FunctionRecord {
        function: 1,
        context: 2,
        module: 23,
        function_index: 12,
        name: 5,
    };
    let b = f.to_bytes();
    assert_eq!(FunctionRecord::from_bytes(&b), f);
    assert_eq!(b[8..], [23, 0, 0, 0, 12, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0]);
    for v in 0..=3 {
        assert_eq!(StreamFlag::from_u8(v) as u8, v);
    }
    assert_eq!(StreamFlag::from_u8(4), StreamFlag::Unknown);
    assert_eq!(StreamFlag::NonBlocking.name(), "non-blocking");
    for (kind, v) in [
        (crate::ChunkKind::Contexts, 13),
        (crate::ChunkKind::Streams, 14),
        (crate::ChunkKind::Modules, 15),
        (crate::ChunkKind::Functions, 16),
        (crate::ChunkKind::PeerCopies, 17),
    ] {
        assert_eq!(kind.to_u16(), v);
        assert_eq!(crate::ChunkKind::from_u16(v), kind);
    }
}

#[test]
fn peer_copy_record_is_a_memcpy_record_and_its_ends() {
    let p = PeerCopyRecord {
        copy: MemcpyRecord {
            correlation: 1,
            start_ns: 2,
            end_ns: 3,
            bytes: 4,
            kind: CopyKind::PtoP,
            src_kind: MemoryKind::Device,
            dst_kind: MemoryKind::Device,
            device: 1,
            ..Default::default()
        },
        src_device: 1,
        src_context: 2,
        dst_device: 0,
        dst_context: 1,
    };
    let b = p.to_bytes();
    assert_eq!(PeerCopyRecord::from_bytes(&b), p);
    assert_eq!(b[..64], p.copy.to_bytes());
    assert_eq!(b[64..], [1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]);
}
