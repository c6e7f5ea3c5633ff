//! The virtual-time rules of README.md ("Virtual time"), checked on `State` directly.

use super::*;

fn setup() -> (State, Caller) {
    let mut st = State::new(1, 10_000);
    st.init().unwrap();
    let ctx = st.primary_retain(0).unwrap();
    (
        st,
        Caller {
            thread: 7,
            ctx: Some(ctx),
        },
    )
}

#[test]
fn handles_round_trip() {
    for kind in [
        Kind::Context,
        Kind::Module,
        Kind::Function,
        Kind::Stream,
        Kind::Event,
    ] {
        assert_eq!(decode(kind, handle(kind, 42)), Some(42));
        assert_eq!(decode(Kind::Event, handle(Kind::Stream, 42)), None);
    }
    assert_eq!(decode(Kind::Stream, 0), None);
    assert_eq!(decode(Kind::Stream, 2), None);
}

#[test]
fn copy_duration_rounds_to_nearest_ns() {
    let st = State::new(1, 10_000);
    assert_eq!(st.transfer_ns(10_000), 1_000);
    assert_eq!(st.transfer_ns(4096), 410); // 409.6
    assert_eq!(st.transfer_ns(5), 1); // 0.5 rounds up
    assert_eq!(st.transfer_ns(4), 0);
}

#[test]
fn same_stream_serialises_and_host_clock_bounds_start() {
    let (mut st, c) = setup();
    let ctx = c.ctx.unwrap();
    let s = st.create_stream(ctx, 0).unwrap();
    st.host_now = 1_000;
    assert_eq!(st.issue(s, 2_000), (1_000, 3_000));
    st.host_now = 2_000;
    assert_eq!(st.issue(s, 500), (3_000, 3_500));
    st.host_now = 10_000;
    assert_eq!(st.issue(s, 500), (10_000, 10_500));
}

#[test]
fn legacy_stream_synchronises_with_blocking_streams_only() {
    let (mut st, c) = setup();
    let ctx = c.ctx.unwrap();
    let blocking = st.create_stream(ctx, 0).unwrap();
    let nonblocking = st.create_stream(ctx, CU_STREAM_NON_BLOCKING).unwrap();
    let legacy = st.resolve_stream(0, false, &c).unwrap();
    let per_thread = st.resolve_stream(0, true, &c).unwrap();
    assert_eq!(
        st.resolve_stream(CU_STREAM_PER_THREAD, false, &c),
        Ok(per_thread)
    );
    assert_eq!(st.resolve_stream(CU_STREAM_LEGACY, true, &c), Ok(legacy));
    st.host_now = 1_000;
    st.issue(blocking, 5_000); // ends 6000
    st.issue(nonblocking, 9_000); // ends 10000
    assert_eq!(st.issue(legacy, 100), (6_000, 6_100));
    assert_eq!(st.issue(nonblocking, 1), (10_000, 10_001));
    assert_eq!(st.issue(blocking, 1), (6_100, 6_101));
    assert_eq!(st.issue(per_thread, 1), (6_100, 6_101));
    st.issue(per_thread, 1_000); // 6101..7101
    assert_eq!(st.issue(legacy, 1), (7_101, 7_102));
    // destroyed blocking streams still count for the legacy stream
    st.issue(blocking, 100_000);
    let end = st.stream_end(blocking);
    st.destroy_stream(handle(Kind::Stream, blocking)).unwrap();
    assert_eq!(st.issue(legacy, 0).0, end);
    assert_eq!(st.context_end(ctx), end);
}

#[test]
fn events_and_elapsed_time() {
    let (mut st, c) = setup();
    let ctx = c.ctx.unwrap();
    let s = st.create_stream(ctx, 0).unwrap();
    let a = handle(Kind::Event, st.create_event(ctx, 0).unwrap());
    let b = handle(Kind::Event, st.create_event(ctx, 0).unwrap());
    assert_eq!(st.elapsed(a, b), Err(CUDA_ERROR_INVALID_HANDLE));
    assert_eq!(st.query_event(a), Ok(()));
    st.host_now = 1_000;
    assert_eq!(st.record_event(a, s), Ok(1_000));
    st.host_now = 2_000;
    st.issue(s, 1_500_000); // 2000..1502000
    st.host_now = 3_000;
    assert_eq!(st.record_event(b, s), Ok(1_502_000));
    assert_eq!(st.query_event(b), Err(CUDA_ERROR_NOT_READY));
    assert_eq!(st.elapsed(a, b), Err(CUDA_ERROR_NOT_READY));
    st.wait_until(1_502_000);
    assert_eq!(st.elapsed(a, b), Ok(1.501));
    assert_eq!(st.elapsed(b, a), Ok(-1.501));
    let t = handle(
        Kind::Event,
        st.create_event(ctx, CU_EVENT_DISABLE_TIMING).unwrap(),
    );
    st.record_event(t, s).unwrap();
    assert_eq!(st.elapsed(a, t), Err(CUDA_ERROR_INVALID_HANDLE));
    assert_eq!(
        st.create_event(ctx, CU_EVENT_INTERPROCESS),
        Err(CUDA_ERROR_INVALID_VALUE)
    );
}

#[test]
fn wait_event_delays_other_stream() {
    let (mut st, c) = setup();
    let ctx = c.ctx.unwrap();
    let s1 = st.create_stream(ctx, CU_STREAM_NON_BLOCKING).unwrap();
    let s2 = st.create_stream(ctx, CU_STREAM_NON_BLOCKING).unwrap();
    let e = handle(Kind::Event, st.create_event(ctx, 0).unwrap());
    st.issue(s1, 4_000);
    st.record_event(e, s1).unwrap();
    st.wait_event(s2, e).unwrap();
    assert_eq!(st.issue(s2, 10), (4_000, 4_010));
}

#[test]
fn memory_ranges() {
    let (mut st, c) = setup();
    let ctx = c.ctx.unwrap();
    let p = st.allocate(ctx, AllocKind::Device, 1000).unwrap();
    assert_eq!(p % memory::ALIGN as u64, 0);
    assert_eq!(st.check_range(p, 1000), Ok(()));
    assert_eq!(st.check_range(p + 999, 1), Ok(()));
    assert!(st.check_range(p + 1, 1000).is_err());
    assert!(st.check_range(p - 1, 1).is_err());
    assert_eq!(
        st.allocate(ctx, AllocKind::Device, 0),
        Err(CUDA_ERROR_INVALID_VALUE)
    );
    assert_eq!(
        st.allocate(ctx, AllocKind::Device, TOTAL_MEM),
        Err(CUDA_ERROR_OUT_OF_MEMORY)
    );
    assert_eq!(st.free(p, true), Err(CUDA_ERROR_INVALID_VALUE));
    assert_eq!(st.free(p, false), Ok(()));
    assert_eq!(st.free(p, false), Err(CUDA_ERROR_INVALID_VALUE));
    let low = st.allocate(ctx, AllocKind::DeviceLow, 4096).unwrap();
    assert!(low + 4096 <= u64::from(u32::MAX));
    st.free(low, false).unwrap();
}

#[test]
fn primary_context_lifecycle() {
    let (mut st, c) = setup();
    let ctx = c.ctx.unwrap();
    assert_eq!(st.primary_retain(0), Ok(ctx));
    st.primary_release(0).unwrap();
    let p = st.allocate(ctx, AllocKind::Device, 16).unwrap();
    st.primary_release(0).unwrap();
    assert_eq!(st.check_range(p, 1), Err(CUDA_ERROR_INVALID_VALUE));
    assert_eq!(st.primary_release(0), Err(CUDA_ERROR_INVALID_CONTEXT));
    assert_ne!(st.primary_retain(0), Ok(ctx));
}
