//! A reader rebuilds, from a GPU buffer region CUPTI still held when the process ended, the
//! records CUPTI completed (with their names and calls) and the work it had not timed.

use rtrace_format::gpu_region::*;
use rtrace_format::ring::{FLAG_LIVE, FLAG_SALVAGED, RING_PAGE};
use rtrace_format::*;

const KERNEL: u32 = 10;
const MEMCPY: u32 = 1;

fn layout() -> GpuBufferLayout {
    GpuBufferLayout {
        strides: vec![(KERNEL, 64), (MEMCPY, 48)],
        kernel_kinds: vec![KERNEL],
        memcpy_kind: MEMCPY,
        memset_kind: 2,
        kernel: KernelFields {
            start: 8,
            end: 16,
            correlation: 24,
            name: 32,
            device: 40,
            stream: 44,
            grid: [48, 52, 56],
            ..Default::default()
        },
        memcpy: CopyFields {
            start: 8,
            end: 16,
            bytes: 24,
            correlation: 32,
            device: 36,
            stream: 40,
            ..Default::default()
        },
        memset: SetFields::default(),
        filtered: false,
    }
}

fn put(rec: &mut [u8], at: usize, v: &[u8]) {
    rec[at..at + v.len()].copy_from_slice(v);
}

fn kernel(complete: bool, correlation: u32, start: u64) -> Vec<u8> {
    let mut r = vec![0u8; 64];
    let kind = if complete {
        KERNEL
    } else {
        KERNEL | INCOMPLETE
    };
    put(&mut r, 0, &kind.to_le_bytes());
    if complete {
        put(&mut r, 8, &start.to_le_bytes());
        put(&mut r, 16, &(start + 50).to_le_bytes());
    }
    put(&mut r, 24, &correlation.to_le_bytes());
    put(&mut r, 32, &0x1000u64.to_le_bytes());
    put(&mut r, 40, &1u32.to_le_bytes());
    put(&mut r, 44, &7u32.to_le_bytes());
    put(&mut r, 48, &4u32.to_le_bytes());
    r
}

fn chunk(file: &mut Vec<u8>, kind: ChunkKind, payload: &[u8]) {
    file.extend_from_slice(&ChunkHeader::new(kind, 0, 0, 0, payload).encode());
    file.extend_from_slice(payload);
}

/// A file with the layout, one kernel name's address, and one region in `state` holding a
/// completed kernel, a kernel and a copy not yet timed; `written_at` and a kernel chunk after
/// the region when `written`.
fn file(state: u64, written: bool) -> Vec<u8> {
    let mut f = encode_file_header(&ProcessHeader::default());
    chunk(&mut f, ChunkKind::GpuBufferLayout, &encode_value(&layout()));
    let mut names = Vec::new();
    encode_name_addresses(&[(0x1000, 3)], &mut names);
    chunk(&mut f, ChunkKind::KernelNameAddresses, &names);
    let at = f.len() as u64;
    let len = 4096u64;
    let (payload_len, live_at) = gpu_region_layout(at, len);
    let descriptor = GpuRegionDescriptor {
        layout: GPU_REGION_LAYOUT,
        live_at,
        len,
    }
    .to_bytes();
    let mut payload = vec![0u8; payload_len as usize];
    payload[..32].copy_from_slice(&descriptor);
    let live = live_at as usize;
    put(&mut payload, live, &state.to_le_bytes());
    put(&mut payload, live + 8, &(64u64 * 2 + 48).to_le_bytes());
    let region_end = at + CHUNK_HEADER_LEN as u64 + u64::from(payload_len);
    if written {
        put(&mut payload, live + 16, &region_end.to_le_bytes());
    }
    let mut records = kernel(true, 5, 1000);
    records.extend(kernel(false, 6, 0));
    let mut copy = vec![0u8; 48];
    put(&mut copy, 0, &(MEMCPY | INCOMPLETE).to_le_bytes());
    put(&mut copy, 24, &4096u64.to_le_bytes());
    put(&mut copy, 32, &9u32.to_le_bytes());
    records.extend(copy);
    let buffer = live + RING_PAGE;
    payload[buffer..buffer + records.len()].copy_from_slice(&records);
    let mut header = ChunkHeader::new(ChunkKind::GpuBufferRegion, 0, 0, 0, &descriptor);
    header.flags = FLAG_LIVE;
    header.payload_len = payload_len;
    header.crc = header.checksum(&descriptor);
    f.extend_from_slice(&header.encode());
    f.extend_from_slice(&payload);
    assert_eq!(f.len() as u64, region_end);
    if written {
        let k = KernelRecord::default().to_bytes();
        chunk(&mut f, ChunkKind::Kernels, &k);
    }
    f
}

fn read(f: &[u8]) -> Vec<Chunk> {
    let mut r = TraceReader::new(f).unwrap();
    let mut out = Vec::new();
    while let Some(c) = r.next_chunk().unwrap() {
        out.push(c);
    }
    out
}

#[test]
fn a_region_cupti_held_gives_its_timed_and_untimed_work() {
    for state in [BUFFER_WITH_CUPTI, BUFFER_DELIVERED] {
        let chunks = read(&file(state, false));
        let rebuilt: Vec<&Chunk> = chunks
            .iter()
            .filter(|c| c.header.flags & FLAG_SALVAGED != 0)
            .collect();
        assert_eq!(rebuilt.len(), 2, "state {state}");
        let kernels = rebuilt[0].kernel_records().unwrap();
        assert_eq!(kernels.len(), 1);
        let k = &kernels[0];
        assert_eq!((k.start_ns, k.end_ns), (1000, 1050));
        assert_eq!((k.name, k.source_correlation, k.correlation), (3, 5, 0));
        assert_eq!((k.device, k.stream, k.grid), (1, 7, [4, 0, 0]));
        let untimed = rebuilt[1].untimed_work().unwrap();
        assert_eq!(rebuilt[1].header.kind, ChunkKind::UntimedWork);
        assert_eq!(untimed.len(), 2);
        assert_eq!(
            (untimed[0].kind, untimed[0].name, untimed[0].stream),
            (UntimedKind::Kernel, 3, 7)
        );
        assert_eq!(
            (untimed[1].kind, untimed[1].bytes, untimed[1].name),
            (UntimedKind::Memcpy, 4096, UNNAMED)
        );
    }
}

#[test]
fn a_free_or_written_region_gives_nothing() {
    for (state, written) in [(BUFFER_FREE, false), (BUFFER_DELIVERED, true)] {
        let chunks = read(&file(state, written));
        assert!(
            chunks.iter().all(|c| c.header.flags & FLAG_SALVAGED == 0),
            "state {state}, written {written}"
        );
    }
}

#[test]
fn a_filtered_trace_rebuilds_no_gpu_work() {
    let mut l = layout();
    l.filtered = true;
    let mut f = file(BUFFER_WITH_CUPTI, false);
    // The layout chunk comes right after the file header; swap it for the filtered one.
    let header_len = encode_file_header(&ProcessHeader::default()).len();
    let old = encode_value(&layout());
    let new = encode_value(&l);
    assert_eq!(old.len(), new.len());
    let mut replaced = f[..header_len].to_vec();
    replaced
        .extend_from_slice(&ChunkHeader::new(ChunkKind::GpuBufferLayout, 0, 0, 0, &new).encode());
    replaced.extend_from_slice(&new);
    replaced.extend_from_slice(&f[header_len + CHUNK_HEADER_LEN + old.len()..]);
    f = replaced;
    let chunks = read(&f);
    assert!(chunks.iter().all(|c| c.header.flags & FLAG_SALVAGED == 0));
}
