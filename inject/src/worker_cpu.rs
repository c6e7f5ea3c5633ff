//! Where the worker's CPU time goes, phase by phase. Measured only under `RTRACE_DEBUG=1`
//! (two reads of the thread's CPU clock a phase, one `getrusage` a pass), and logged by
//! whoever ends the trace: the worker is not joined, so what it measured is kept here.

use crate::{diag, sys};
use std::sync::atomic::{AtomicU64, Ordering};

/// What the worker does in one pass of its loop, in that order.
#[derive(Clone, Copy)]
pub enum Phase {
    /// Parked or yielding until the next pass.
    Wait,
    /// CUPTI's flush when no buffer came back by itself (each flush period).
    CuptiFlush,
    /// NVTX texts and the rings, copied into the pending output.
    Rings,
    /// CUPTI's finished buffers converted (each flush period).
    CuptiConvert,
    /// The pending output written to the file.
    Write,
    /// Spare regions put in the file for new threads (each flush period).
    Spare,
    /// Finished threads' rings given back.
    Forget,
}

const PHASES: usize = 7;
const NAMES: [&str; PHASES] = [
    "wait ",
    ", CUPTI flush ",
    ", rings ",
    ", CUPTI convert ",
    ", write ",
    ", spare regions ",
    ", finished rings ",
];

/// The worker's CPU time by phase (ns), its passes, and its user and system time (µs).
#[derive(Default)]
pub struct WorkerCpu {
    ns: [AtomicU64; PHASES],
    passes: AtomicU64,
    user_us: AtomicU64,
    system_us: AtomicU64,
}

impl WorkerCpu {
    /// A stopwatch for the worker's thread: measures only when `on`.
    pub fn stopwatch(&self, on: bool) -> Stopwatch<'_> {
        Stopwatch {
            cpu: self,
            last: if on { thread_cpu_ns() } else { 0 },
            on,
        }
    }

    /// Logs what was measured (nothing if nothing was).
    pub fn log(&self) {
        let passes = self.passes.load(Ordering::Relaxed);
        if passes == 0 {
            return;
        }
        let mut digits = [[0u8; 20]; PHASES + 3];
        let (phases, rest) = digits.split_at_mut(PHASES);
        let [passes_out, user_out, system_out] = rest else {
            return;
        };
        // No allocation: this may run in a fatal signal's handler.
        let mut parts = [""; 2 * PHASES + 7];
        parts[0] = "worker CPU by phase (µs): ";
        for (i, ((name, ns), out)) in NAMES
            .iter()
            .zip(&self.ns)
            .zip(phases.iter_mut())
            .enumerate()
        {
            parts[1 + 2 * i] = name;
            parts[2 + 2 * i] = number(ns.load(Ordering::Relaxed) / 1000, out);
        }
        let tail = [
            "; passes ",
            number(passes, passes_out),
            "; user ",
            number(self.user_us.load(Ordering::Relaxed), user_out),
            ", system ",
            number(self.system_us.load(Ordering::Relaxed), system_out),
        ];
        parts[1 + 2 * PHASES..].copy_from_slice(&tail);
        diag::log(&parts);
    }
}

/// Times the phases of the worker's passes into a [`WorkerCpu`].
pub struct Stopwatch<'a> {
    cpu: &'a WorkerCpu,
    last: u64,
    on: bool,
}

impl Stopwatch<'_> {
    /// Charges the CPU time since the last lap to `phase`.
    #[inline]
    pub fn lap(&mut self, phase: Phase) {
        if self.on {
            let now = thread_cpu_ns();
            self.cpu.ns[phase as usize].fetch_add(now.saturating_sub(self.last), Ordering::Relaxed);
            self.last = now;
        }
    }

    /// Ends a pass: counts it and keeps the thread's user and system time so far.
    pub fn pass(&mut self) {
        if self.on {
            self.cpu.passes.fetch_add(1, Ordering::Relaxed);
            let (user, system) = sys::thread_times_us();
            self.cpu.user_us.store(user, Ordering::Relaxed);
            self.cpu.system_us.store(system, Ordering::Relaxed);
        }
    }
}

fn thread_cpu_ns() -> u64 {
    sys::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn number(v: u64, out: &mut [u8; 20]) -> &str {
    std::str::from_utf8(diag::format_u64(v, out)).unwrap_or("?")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_phases_only_when_on() {
        let cpu = WorkerCpu::default();
        let mut off = cpu.stopwatch(false);
        off.lap(Phase::Rings);
        off.pass();
        assert_eq!(cpu.passes.load(Ordering::Relaxed), 0);
        let mut on = cpu.stopwatch(true);
        let mut x = 0u64;
        for i in 0..200_000u64 {
            x = x.wrapping_mul(31).wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
        on.lap(Phase::Rings);
        on.lap(Phase::Write);
        on.pass();
        assert_eq!(cpu.passes.load(Ordering::Relaxed), 1);
        assert!(cpu.ns[Phase::Rings as usize].load(Ordering::Relaxed) > 0);
        assert_eq!(cpu.ns[Phase::Wait as usize].load(Ordering::Relaxed), 0);
    }
}
