//! Each thread's tracing state ([`ThreadState`]), and the hot path's way to it ([`current`]).
//!
//! The state is a `const`-initialised thread-local without a destructor: it sits at one address
//! for the whole life of its thread, and reaching it never fails, not even while the thread
//! exits. In a shared library, Rust gives thread-locals the general-dynamic model, where each
//! access calls `__tls_get_addr` (about 20 instructions; 11 accesses a PyTorch op). On x86-64
//! the state's address is kept instead, after the thread's first access, in one word of
//! initial-exec thread-local storage declared here in assembly (stable Rust cannot choose a
//! thread-local's model), which the hot path reads in two instructions. The word takes 8 bytes
//! of the static TLS block: the program's own when rtrace is preloaded; in a library opened
//! later with `dlopen`, of the room glibc keeps for such words.
//!
//! `unsafe` here: the assembly, and the state's address turned back into a reference.

use crate::ring::RingRef;
use std::cell::Cell;

/// One thread's tracing state.
pub struct ThreadState {
    /// This thread is inside rtrace or inside a recorded call: nested calls pass through.
    pub busy: Cell<bool>,
    /// Never record on this thread (the worker).
    pub excluded: Cell<bool>,
    /// The thread's ring (kept alive by the process's registry until closed).
    pub ring: RingRef,
    /// The process generation the ring belongs to (changes in a forked child).
    pub generation: Cell<u64>,
    pub next_correlation: Cell<u64>,
    pub correlation_end: Cell<u64>,
    /// Correlation id of the recorded call in progress on this thread (0: none).
    pub current: Cell<u64>,
    /// The runtime API calls in progress on this thread ([`crate::runtime_api`]).
    pub runtime: RuntimeCalls,
}

/// Runtime API calls in progress on one thread, innermost last: CUPTI's runtime callbacks
/// come in enter/exit pairs on the calling thread.
pub struct RuntimeCalls {
    /// Calls entered and not yet exited (may exceed [`RUNTIME_DEPTH`]: deeper ones are not
    /// recorded).
    pub depth: Cell<usize>,
    /// Each level's start in ticks (0: that call is not recorded) and rtrace correlation id.
    pub start: [Cell<u64>; RUNTIME_DEPTH],
    pub correlation: [Cell<u64>; RUNTIME_DEPTH],
}

/// Runtime calls nested deeper than this on one thread are not recorded.
pub const RUNTIME_DEPTH: usize = 4;

thread_local! {
    static TLS: ThreadState = const {
        ThreadState {
            busy: Cell::new(false),
            excluded: Cell::new(false),
            ring: RingRef::none(),
            generation: Cell::new(0),
            next_correlation: Cell::new(0),
            correlation_end: Cell::new(0),
            current: Cell::new(0),
            runtime: RuntimeCalls {
                depth: Cell::new(0),
                start: [const { Cell::new(0) }; RUNTIME_DEPTH],
                correlation: [const { Cell::new(0) }; RUNTIME_DEPTH],
            },
        }
    };
}

// Neither a dropped value nor a lazily made one: with either, the thread-local could be gone
// (or not yet there) during the thread's exit, and its address could not be kept.
const _: () = assert!(!std::mem::needs_drop::<ThreadState>());

/// The calling thread's state. A reference to it cannot leave the thread (`ThreadState` is not
/// `Sync`), and it stays valid as long as the thread runs, its exit included.
#[inline(always)]
pub fn current() -> &'static ThreadState {
    let p = word::get() as *const ThreadState;
    if p.is_null() {
        return first_access();
    }
    // SAFETY: the word is this thread's own and holds only the address of this thread's
    // `TLS`, stored by `first_access` (a forked child's copy of both matches the same way);
    // that storage lives as long as the thread and is only read through shared references.
    unsafe { &*p }
}

/// The thread's first access: finds the state the general-dynamic way and keeps its address.
#[cold]
#[inline(never)]
fn first_access() -> &'static ThreadState {
    let p = TLS.with(|t| t as *const ThreadState);
    word::set(p as usize);
    // SAFETY: `p` is the address of this thread's `TLS`, which has no destructor and lives as
    // long as the thread (above).
    unsafe { &*p }
}

/// The initial-exec thread-local word: `.tbss` (zero in every thread, the threads that exist
/// when a library is opened included), hidden so that it is neither exported nor preempted.
#[cfg(target_arch = "x86_64")]
mod word {
    core::arch::global_asm!(
        ".pushsection .tbss,\"awT\",@nobits",
        ".balign 8",
        ".globl rtrace_thread_state_address",
        ".hidden rtrace_thread_state_address",
        ".type rtrace_thread_state_address,@object",
        ".size rtrace_thread_state_address,8",
        "rtrace_thread_state_address:",
        ".zero 8",
        ".popsection",
    );

    #[inline(always)]
    pub fn get() -> usize {
        let v: usize;
        // SAFETY: loads the word's offset from the thread pointer (the GOT entry the loader
        // fills for the initial-exec model), then the calling thread's own word.
        unsafe {
            core::arch::asm!(
                "mov {v}, qword ptr [rip + rtrace_thread_state_address@GOTTPOFF]",
                "mov {v}, qword ptr fs:[{v}]",
                v = out(reg) v,
                options(nostack, preserves_flags, readonly),
            );
        }
        v
    }

    pub fn set(v: usize) {
        // SAFETY: as in `get`, a store to the calling thread's own word; `out` keeps the
        // offset's register apart from `v`'s.
        unsafe {
            core::arch::asm!(
                "mov {t}, qword ptr [rip + rtrace_thread_state_address@GOTTPOFF]",
                "mov qword ptr fs:[{t}], {v}",
                t = out(reg) _,
                v = in(reg) v,
                options(nostack, preserves_flags),
            );
        }
    }
}

/// Elsewhere, no word: every access is the thread-local's own.
#[cfg(not(target_arch = "x86_64"))]
mod word {
    pub fn get() -> usize {
        0
    }
    pub fn set(_: usize) {}
}
