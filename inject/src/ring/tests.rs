//! The ring's tests: order, losses, links, entries through a slot, concurrent use.

use super::*;
use rtrace_format::NvtxKind;

fn rec(i: u64) -> ApiRecord {
    ApiRecord {
        function: i as u32,
        result: 0,
        start_ns: i,
        end_ns: i + 1,
        correlation: i,
    }
}

#[test]
fn full_ring_counts_losses_and_drains_in_order() {
    let r = Ring::new(4, 1, String::new());
    assert_eq!(r.capacity(), 4);
    for i in 0..6 {
        assert_eq!(r.push(Entry::Call(rec(i))), i < 4);
    }
    assert_eq!(r.len(), 4);
    assert_eq!(r.take_dropped(), 2);
    assert_eq!(r.take_dropped(), 0);
    let mut out = Vec::new();
    let (n, end, earliest) = r.drain(&mut out, &mut |_| {});
    assert_eq!(earliest, 0);
    assert_eq!(n, 4);
    // Copied out but not yet written: the slots are not reused.
    assert!(!r.push(Entry::Call(rec(8))));
    assert_eq!(r.take_dropped(), 1);
    r.release(end);
    let got: Vec<u32> = out
        .chunks_exact(ApiRecord::SIZE)
        .map(|b| ApiRecord::from_bytes(b.try_into().unwrap()).function)
        .collect();
    assert_eq!(got, vec![0, 1, 2, 3]);
    assert!(r.push(Entry::Call(rec(9))));
    out.clear();
    assert_eq!(r.drain(&mut out, &mut |_| {}), (1, r.drained(), 9));
    // Copied as the ring held it: the reader converts the times.
    assert_eq!(ApiRecord::from_bytes(out[..32].try_into().unwrap()), rec(9));
}

#[test]
fn links_are_handed_over_not_written() {
    let r = Ring::new(8, 1, String::new());
    r.push(Entry::Call(rec(1)));
    r.push(Entry::Link {
        call: 5,
        source: 77,
        symbol: 0x7f00_0000_1000,
    });
    r.push(Entry::Call(rec(2)));
    let mut out = Vec::new();
    let mut links = Vec::new();
    assert_eq!(
        r.drain(&mut out, &mut |e| if let Entry::Link {
            call,
            source,
            symbol,
        } = e
        {
            links.push((call, source, symbol))
        })
        .0,
        2
    );
    assert_eq!(out.len(), 2 * ApiRecord::SIZE);
    assert_eq!(links, vec![(5, 77, 0x7f00_0000_1000)]);
}

#[test]
fn entries_round_trip_through_a_slot() {
    let entries = [
        Entry::Call(rec(3)),
        Entry::Link {
            call: 9,
            source: 4,
            symbol: 0x7f00_0000_2000,
        },
        Entry::Nvtx(NvtxEntry {
            kind: NvtxKind::Push,
            message: 7,
            time: 11,
            value: 2,
            domain: 5,
            category: 6,
        }),
        Entry::NvtxAttributes {
            color: 0xff00ff,
            color_type: 1,
            payload: 42,
            payload_type: 3,
        },
    ];
    for e in entries {
        assert_eq!(Entry::decode(e.encode()), e);
    }
}

#[test]
fn a_ring_ref_holds_and_closes() {
    let ring = Arc::new(Ring::new(4, 1, String::new()));
    let r = RingRef::none();
    assert!(!r.push(Entry::Call(rec(1))));
    r.hold(ring.clone());
    assert!(r.push(Entry::Call(rec(1))));
    assert_eq!(Arc::strong_count(&ring), 2);
    r.close();
    assert!(ring.is_closed() && !r.is_some());
    assert_eq!(Arc::strong_count(&ring), 1);
}

#[test]
fn concurrent_producer_and_consumer_lose_nothing_but_counted() {
    let r = std::sync::Arc::new(Ring::new(1024, 1, String::new()));
    let p = r.clone();
    let total = 200_000u64;
    let prod = std::thread::spawn(move || {
        for i in 0..total {
            p.push(Entry::Call(rec(i)));
        }
    });
    let mut seen = Vec::new();
    let mut out = Vec::new();
    loop {
        out.clear();
        let (_, end, _) = r.drain(&mut out, &mut |_| {});
        r.release(end);
        seen.extend(
            out.chunks_exact(32)
                .map(|b| ApiRecord::from_bytes(b.try_into().unwrap()).start_ns),
        );
        if prod.is_finished() && r.is_empty() {
            break;
        }
    }
    prod.join().unwrap();
    let dropped = r.take_dropped();
    assert_eq!(seen.len() as u64 + dropped, total);
    assert!(seen.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn a_drain_across_the_ring_end_copies_both_runs_in_order() {
    let r = Ring::new(4, 1, String::new());
    for i in 0..3 {
        assert!(r.push(Entry::Call(rec(i))));
    }
    let mut out = Vec::new();
    let (_, end, _) = r.drain(&mut out, &mut |_| {});
    r.release(end);
    out.clear();
    // Positions 3, 4 and 5: slot 3, then slots 0 and 1; a link between two calls.
    r.push(Entry::Call(rec(30)));
    r.push(Entry::Link {
        call: 1,
        source: 2,
        symbol: 0,
    });
    r.push(Entry::Call(rec(10)));
    let mut others = 0;
    let (n, end, earliest) = r.drain(&mut out, &mut |_| others += 1);
    assert_eq!((n, end - r.drained(), earliest, others), (2, 0, 10, 1));
    let got: Vec<ApiRecord> = out
        .chunks_exact(ApiRecord::SIZE)
        .map(|b| ApiRecord::from_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(got, vec![rec(30), rec(10)]);
}
