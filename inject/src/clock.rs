//! The host clock every timestamp is on: `CLOCK_MONOTONIC`, in ns (a vDSO
//! read, no system call).

use rtrace_format::ClockAnchor;

#[inline(always)]
fn read(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; clock_gettime cannot fail for these clocks.
    unsafe {
        libc::clock_gettime(clock, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Now on the trace clock.
#[inline(always)]
pub fn now_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC)
}

/// Monotonic and real-time clocks read back to back (the tighter of three tries).
pub fn anchor() -> ClockAnchor {
    let mut best = (u64::MAX, ClockAnchor::default());
    for _ in 0..3 {
        let a = now_ns();
        let r = read(libc::CLOCK_REALTIME);
        let b = now_ns();
        if b - a < best.0 {
            best = (
                b - a,
                ClockAnchor {
                    monotonic_ns: a + (b - a) / 2,
                    realtime_ns: r,
                },
            );
        }
    }
    best.1
}
