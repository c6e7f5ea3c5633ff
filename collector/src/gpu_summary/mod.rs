//! Statistics over the GPU activity records (kernels, memory copies, memsets)
//! of one or more traces: per-kernel and per-copy-kind summaries, memsets,
//! per-device and per-stream utilisation, launch-to-start latency, and kernel launch and
//! execution times ([`exec`]); and over
//! the memory (allocation and free) and synchronization records: memory in use
//! per memory kind, and host waits per kind of synchronization; and the
//! resources of the traced processes ([`resources`]): devices, contexts,
//! streams, modules and functions.
//!
//! A record's duration is `end_ns - start_ns` (0 if the end is before the
//! start). Means, medians and standard deviations are in integer ns, rounded
//! down; the median of an even count is the mean of the two middle values and the standard
//! deviation is the sample one, as `nsys stats` gives them.

mod common;
pub mod dist;
pub mod exec;
pub mod fast_hash;
pub mod latency;
mod memory;
mod resources;
mod squares;
mod timeline;
pub mod union;
mod work;

pub use common::*;
pub use exec::{kern_exec_summary, KernExecSummary, PartStats};
pub use memory::*;
pub use resources::*;
pub use timeline::*;
pub use work::*;

/// Traces for the tests of the summaries and their rendering.
#[cfg(test)]
pub(crate) mod samples {
    use crate::model::Trace;
    use rtrace_format::{MemoryKind, MemoryOperation, MemoryRecord, SyncKind, SyncRecord, ID_NONE};

    /// One process: device allocations A (4096 B at 1000 ns), B (1 MiB at 2000), a pinned P
    /// (8192 at 2500), free A (3000), device C (4096 at 3500), free B (4000), free P (4500):
    /// C is never freed. Synchronizations: stream 1000-6000 and 7000-7100, context
    /// 8000-10000, event 11000-11500.
    pub fn memory_and_sync() -> Trace {
        use MemoryKind::{Device, Pinned};
        use MemoryOperation::{Alloc, Free};
        let mem = |operation, kind, timestamp_ns, address, bytes| MemoryRecord {
            timestamp_ns,
            address,
            bytes,
            operation,
            kind,
            stream: ID_NONE,
            ..Default::default()
        };
        let sync = |kind, start_ns, end_ns| SyncRecord {
            start_ns,
            end_ns,
            kind,
            stream: ID_NONE,
            event: ID_NONE,
            ..Default::default()
        };
        Trace {
            memory: vec![
                mem(Alloc, Device, 1_000, 0xA000, 4_096),
                mem(Alloc, Device, 2_000, 0xB000, 1 << 20),
                mem(Alloc, Pinned, 2_500, 0xF000, 8_192),
                mem(Free, Device, 3_000, 0xA000, 4_096),
                mem(Alloc, Device, 3_500, 0xC000, 4_096),
                mem(Free, Device, 4_000, 0xB000, 1 << 20),
                mem(Free, Pinned, 4_500, 0xF000, 8_192),
            ],
            syncs: vec![
                sync(SyncKind::StreamSynchronize, 1_000, 6_000),
                sync(SyncKind::StreamSynchronize, 7_000, 7_100),
                sync(SyncKind::ContextSynchronize, 8_000, 10_000),
                sync(SyncKind::EventSynchronize, 11_000, 11_500),
            ],
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::timeline::union;
    use super::*;
    use rtrace_format::MemoryRecord;

    #[test]
    fn hundredths_round_half_up() {
        assert_eq!(Hundredths::ratio(1, 3).to_string(), "0.33");
        assert_eq!(Hundredths::ratio(2, 3).to_string(), "0.67");
        assert_eq!(Hundredths::ratio(1, 200).to_string(), "0.01");
        assert_eq!(Hundredths::ratio(1, 201).to_string(), "0.00");
        assert_eq!(Hundredths::percent(3, 4).to_string(), "75.00");
        assert_eq!(Hundredths::percent(5, 0).to_string(), "0.00");
        assert_eq!(Hundredths(123_456).to_string(), "1234.56");
        assert_eq!(Hundredths(5).to_string(), "0.05");
    }

    #[test]
    fn stats_are_exact() {
        let s = Stats::of(&mut [40, 10, 30, 20]);
        assert_eq!(
            s,
            Stats {
                count: 4,
                total: 100,
                mean: 25,
                // The mean of the two middle values, 20 and 30.
                median: 25,
                min: 10,
                max: 40,
                // sample variance 500 / 3 → 12.9
                stddev: 12,
            }
        );
        assert_eq!(Stats::of(&mut [2, 4, 4, 4, 5, 5, 7, 9]).stddev, 2);
        assert_eq!(Stats::of(&mut [7]).stddev, 0);
        assert_eq!(Stats::of(&mut []), Stats::default());
        assert_eq!(Stats::of(&mut [7, 1, 4]).median, 4);
        assert_eq!(Stats::of(&mut [7, 2]).median, 4);
        // Σx² past 128 bits, exactly: (2^64 − 1)² / 4, √ = 2^63 − 1/2, rounded down.
        let big = u64::MAX;
        let s = Stats::of(&mut [big, big, big, 0]);
        assert_eq!(s.total_ns(), u64::MAX);
        assert_eq!(s.median, u64::MAX);
        assert_eq!(s.stddev, (1 << 63) - 1);
    }

    #[test]
    fn union_merges_overlaps_and_touching() {
        assert_eq!(union(&mut []), (0, 0));
        assert_eq!(union(&mut [(10, 20)]), (10, 0));
        // 10-20 and 15-30 overlap, 30-35 touches, 40-50 after a gap, 42-45 inside.
        assert_eq!(
            union(&mut [(40, 50), (15, 30), (10, 20), (30, 35), (42, 45)]),
            (25 + 10, 1)
        );
        assert_eq!(union(&mut [(0, 1), (2, 3), (4, 5)]), (3, 2));
        assert_eq!(union(&mut [(5, 5), (5, 5)]), (0, 0));
    }

    fn mem(
        op: MemoryOperation,
        kind: MemoryKind,
        at: u64,
        address: u64,
        bytes: u64,
    ) -> MemoryRecord {
        MemoryRecord {
            timestamp_ns: at,
            address,
            bytes,
            operation: op,
            kind,
            stream: rtrace_format::ID_NONE,
            ..Default::default()
        }
    }

    #[test]
    fn memory_peak_follows_allocations_and_frees_by_address() {
        use MemoryKind::{Device, Managed, Pinned};
        use MemoryOperation::{Alloc, Free};
        // Device, in time order (file order differs): +100 @A, +50 @B, free A (-100),
        // +300 @C (peak 350), free B, free @X (allocated before tracing: no change),
        // +20 @A again; left in use: C and A = 320.
        let first = Trace {
            memory: vec![
                mem(Alloc, Device, 10, 0xA, 100),
                mem(Alloc, Device, 20, 0xB, 50),
                mem(Alloc, Device, 40, 0xC, 300),
                mem(Free, Device, 30, 0xA, 100),
                mem(Free, Device, 50, 0xB, 50),
                mem(Free, Device, 55, 0xF00, 999),
                mem(Alloc, Device, 60, 0xA, 20),
                mem(Alloc, Pinned, 15, 0xA, 4096),
                mem(Free, Pinned, 16, 0xA, 4096),
                mem(MemoryOperation::Unknown, Pinned, 17, 0xA, 7),
            ],
            ..Default::default()
        };
        // A second process on the same clock: device +200 @A at 35 (its own A), while the
        // first holds B (50) and C is not yet allocated: 250; at 40 the first's C makes 550.
        // Then an allocation at an address still in use replaces it (its free was lost).
        let second = Trace {
            memory: vec![
                mem(Alloc, Device, 35, 0xA, 200),
                mem(Alloc, Managed, 1, 0x10, 64),
                mem(Alloc, Managed, 2, 0x10, 32),
            ],
            ..Default::default()
        };
        let rows = memory_summary(&[first.clone(), second]);
        let row = |kind, allocations, frees, bytes, peak, largest, live| MemorySummary {
            kind,
            allocations,
            frees,
            bytes_allocated: bytes,
            peak_bytes: peak,
            largest_bytes: largest,
            live_bytes: live,
        };
        assert_eq!(
            rows,
            vec![
                row(Pinned, 1, 1, 4096, 4096, 4096, 0),
                row(Device, 5, 3, 670, 550, 300, 520),
                row(Managed, 2, 0, 96, 64, 64, 32),
            ]
        );
        // The first process alone.
        assert_eq!(
            memory_summary(&[first])[1],
            row(Device, 4, 3, 470, 350, 300, 320)
        );
        assert!(memory_summary(&[]).is_empty());
    }

    #[test]
    fn sync_waits_by_kind_and_queries_by_their_call() {
        use rtrace_format::{ApiRecord, SyncRecord};
        let sync = |kind, start, end, correlation: u64| SyncRecord {
            correlation,
            start_ns: start,
            end_ns: end,
            kind,
            flags: if correlation != 0 {
                FLAG_CORRELATED as u8
            } else {
                0
            },
            ..Default::default()
        };
        let mut t = Trace {
            syncs: vec![
                sync(SyncKind::StreamSynchronize, 100, 1_100, 1),
                sync(SyncKind::StreamSynchronize, 2_000, 2_500, 2),
                sync(SyncKind::StreamSynchronize, 3_000, 3_000, 0),
                sync(SyncKind::StreamSynchronize, 4_000, 4_010, 3),
                sync(SyncKind::EventSynchronize, 5_000, 9_000, 4),
                sync(SyncKind::EventSynchronize, 9_000, 9_001, 5),
                sync(SyncKind::ContextSynchronize, 10_000, 10_300, 6),
                sync(SyncKind::StreamWaitEvent, 11_000, 11_000, 7),
                // An end before the start counts as no wait.
                sync(SyncKind::ContextSynchronize, 12_000, 11_000, 0),
            ],
            ..Default::default()
        };
        t.functions = [
            (0, "cuStreamSynchronize"),
            (1, "cuStreamQuery"),
            (2, "cuEventSynchronize"),
            (3, "cuEventQuery"),
            (4, "cuCtxSynchronize"),
            (5, "cuStreamWaitEvent"),
        ]
        .into_iter()
        .map(|(id, n)| (id, n.to_string()))
        .collect();
        let api = |function, correlation| ApiRecord {
            function,
            correlation,
            ..Default::default()
        };
        t.threads.insert(
            1,
            crate::model::ThreadTrace {
                tid: 1,
                records: vec![
                    api(0, 1),
                    api(0, 2),
                    api(1, 3),
                    api(2, 4),
                    api(3, 5),
                    api(4, 6),
                    api(5, 7),
                ],
                ..Default::default()
            },
        );
        let row = |kind, count, total, mean, max| SyncSummary {
            kind,
            count,
            total_wait_ns: total,
            mean_wait_ns: mean,
            max_wait_ns: max,
        };
        assert_eq!(
            sync_summary(std::slice::from_ref(&t)),
            vec![
                row("event synchronize", 1, 4_000, 4_000, 4_000),
                row("stream synchronize", 3, 1_500, 500, 1_000),
                row("context synchronize", 2, 300, 150, 300),
                row("stream query", 1, 10, 10, 10),
                row("event query", 1, 1, 1, 1),
                row("stream wait event", 1, 0, 0, 0),
            ]
        );
        assert!(sync_summary(&[]).is_empty());
    }
}
