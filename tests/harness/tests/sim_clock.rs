//! The simulated driver's real-time clock (`SIMCUDA_CLOCK=real`, what tools/demo.sh uses): GPU
//! work starts after the call that queued it began, so every launch-to-start latency in the
//! report is ≥ 0, while durations stay the simulator's own.

use rtrace_collector::launch_latency;
use rtrace_tests::*;

#[test]
fn gpu_work_starts_after_its_launch_call_on_the_real_time_clock() {
    let r =
        run(Spec::traced("driver_api")
            .env(&[("RTRACE_GPU_ACTIVITY", "1"), ("SIMCUDA_CLOCK", "real")]));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert!(r.stdout().contains("driver_api: OK"), "{}", r.stdout());
    let t = r.trace();
    check_invariants(&t);
    let matched = launch_latency(std::slice::from_ref(&t), usize::MAX);
    let gpu_records = (t.kernels.len() + t.memcpys.len() + t.memsets.len()) as u64;
    // The sample's vecadd and two scales, two copies in and one out.
    assert_eq!(
        (t.kernels.len(), t.memcpys.len(), t.memsets.len()),
        (3, 3, 0)
    );
    assert_eq!(matched.correlated, gpu_records);
    assert_eq!(matched.slowest.len() as u64, gpu_records);
    for l in &matched.slowest {
        assert!(l.latency_ns >= 0, "{l:?}");
    }
    // Durations are the simulator's: 1000 ns for each kernel of the sample's PTX.
    for k in &t.kernels {
        assert_eq!(k.end_ns - k.start_ns, 1000, "{k:?}");
    }
}
