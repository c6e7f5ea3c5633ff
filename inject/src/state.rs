//! The process's tracing state and configuration: a leaf every other module may read (below it
//! only `config`, `diag`, and `files` and `sys`, through which `disable` says why).
//!
//! One atomic lifecycle state advances by compare-and-swap: `Uninit → Running → Finished`,
//! and any internal failure moves to `Disabled`, after which every wrapper passes calls
//! straight through. The configuration is read from the environment once, on first use.
//! Who moves the state (start-up, the end of the trace) is the session's business; this
//! module only holds it.

use crate::config::Config;
use crate::{diag, files, sys};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum State {
    Uninit = 0,
    Running = 1,
    Disabled = 2,
    Finished = 3,
}

static STATE: AtomicU8 = AtomicU8::new(State::Uninit as u8);
static CONFIG: OnceLock<Config> = OnceLock::new();
/// Bumped in a forked child: rings of an older generation belong to the parent.
static GENERATION: AtomicU64 = AtomicU64::new(1);
/// Set in a forked child: the pid of the traced parent.
static FORKED_FROM: AtomicU32 = AtomicU32::new(0);
/// Entry points handed out unwrapped (see `ProcessEnd::unwrapped_lookups`).
pub static UNWRAPPED_LOOKUPS: AtomicU64 = AtomicU64::new(0);

#[inline(always)]
pub fn state() -> State {
    match STATE.load(Ordering::Acquire) {
        1 => State::Running,
        0 => State::Uninit,
        2 => State::Disabled,
        _ => State::Finished,
    }
}

/// Whether calls are recorded: while tracing runs, and after the trace's end was written
/// (`Finished`: the rings are pages of the file, so a reader finds what other threads record
/// while the process ends).
#[inline(always)]
pub fn records() -> bool {
    matches!(state(), State::Running | State::Finished)
}

/// Moves from `from` to `to`; false if the state was not `from`.
pub fn advance(from: State, to: State) -> bool {
    STATE
        .compare_exchange(from as u8, to as u8, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
}

/// Turns tracing off for good; the program runs on unchanged. Says why on stderr with
/// `RTRACE_DEBUG=1`, and to `rtrace record` in its status directory (`RTRACE_STATUS_DIR`).
pub fn disable(why: &str) {
    let prev = STATE.swap(State::Disabled as u8, Ordering::AcqRel);
    if prev != State::Disabled as u8 {
        diag::log(&["tracing disabled: ", why]);
        if let Some(dir) = &config().status_dir {
            let line = format!("{}\n", why.replace('\n', " "));
            files::leave_status(
                dir,
                rtrace_format::STATUS_OFF,
                sys::getpid(),
                line.as_bytes(),
            );
        }
    }
}

/// The configuration, read from the environment on first use.
pub fn config() -> &'static Config {
    CONFIG.get_or_init(Config::from_env)
}

/// The process generation the current trace belongs to (changes in a forked child).
#[inline(always)]
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// In a forked child: records the traced parent's pid. No allocation.
pub fn set_forked_from(parent: u32) {
    FORKED_FROM.store(parent, Ordering::Relaxed);
}

/// In a forked child: starts a new generation. No allocation.
pub fn next_generation() {
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// The pid of the traced parent, in a forked child.
pub fn forked_from() -> Option<u32> {
    let p = FORKED_FROM.load(Ordering::Relaxed);
    (p != 0).then_some(p)
}
