//! The ABI-agnostic recording trampoline (x86-64 SysV) for the driver exports no header declares
//! (`generated::OPAQUE`, listed in `tools/gen-wrappers/unwrappable.txt`): their parameters and
//! result are unknown, so they cannot be wrapped like the others, yet their calls are recorded.
//!
//! Each such export is a generated two-instruction stub (`generated/generic_stubs.rs`):
//! `mov r11d, ID; jmp rtrace_generic_trampoline`. r11 is free at a SysV function's entry (neither
//! an argument register nor callee-saved), so the stub leaves everything the caller set up as it
//! was. The trampoline then:
//!
//! 1. saves every register that can carry an argument (rdi, rsi, rdx, rcx, r8, r9, rax, whose
//!    `al` is the vector-register count of a variadic call, r10, the static chain, and
//!    xmm0–xmm7) in a 16-byte-aligned frame and calls [`rtrace_generic_enter`], which resolves
//!    the real function and, if the call is to be recorded, starts its record and pushes the
//!    caller's return address on a per-thread shadow stack;
//! 2. restores those registers and the stack exactly as at entry (stack arguments and everything
//!    above the return address are never touched) and jumps to the real function: a plain tail
//!    call when the call is not recorded; when it is, the return address slot is first pointed
//!    at the trampoline's continuation. A function the driver lacks is not called: `eax` = 500
//!    (`CUDA_ERROR_NOT_FOUND`), as the generated wrappers do;
//! 3. the continuation runs when the real function returns: it saves the registers that can
//!    carry a result (rax, rdx, xmm0, xmm1), calls [`rtrace_generic_exit`], which pops the shadow
//!    stack, ends the record with the low 32 bits of rax as its result (a `CUresult` if the
//!    function returns one; meaningless otherwise) and hands back the original return address,
//!    and returns there with the result registers restored.
//!
//! [`rtrace_generic_enter`] returns the real function and the "recorded" flag as two words
//! (rax:rdx) rather than a flag in the address's low bit: a function's address need not be even.
//! It also gets the stack pointer at the stub's entry, which matches a continuation to its
//! shadow frame: a real function left by `longjmp` leaves its frame behind, and the next
//! continuation of an outer frame discards it.
//!
//! Limits, none of which a C driver entry point is expected to meet: the upper halves of
//! ymm/zmm registers (`__m256`/`__m512` arguments) and the x87 stack (a `long double` result)
//! are not preserved across the recording code; a recorded real function sees the continuation
//! as its return address (one that inspects its caller would see librtrace.so); while a
//! recorded call runs, a backtrace taken inside it stops at the continuation and a C++
//! exception cannot unwind through it; a call that returns on another thread than it started
//! on (user-level context switching) finds no shadow frame, and the process is aborted with a
//! message; a process with hardware shadow stacks (CET) enabled would reject the rewritten
//! return address (librtrace.so is not marked CET-compatible, so the loader does not enable
//! them).
#![cfg(target_arch = "x86_64")]

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The hot-path API the trampoline calls: `crate::hook` in the library; stand-ins in unit tests,
/// which must not start tracing in the test process.
#[cfg(not(test))]
mod backend {
    pub use crate::hook::{begin, end, real, CallToken as Token};
}
#[cfg(test)]
use tests::backend;

/// Recorded calls in flight on one thread, at most. A recorded call's nested driver calls are
/// not recorded (`hook::begin` returns `None`), so a thread rarely has more than one; past this
/// depth calls are not recorded, and run as plain tail calls.
const SHADOW_DEPTH: usize = 64;

/// One thread's recorded calls in flight, innermost last.
struct Shadow {
    depth: Cell<usize>,
    /// The caller's return address, which the continuation returns to.
    return_address: [Cell<usize>; SHADOW_DEPTH],
    /// The stack pointer at the stub's entry (the address of the return address slot): matches
    /// a continuation to its frame.
    entry_sp: [Cell<usize>; SHADOW_DEPTH],
    token: [Cell<Option<backend::Token>>; SHADOW_DEPTH],
}

impl Shadow {
    const fn new() -> Shadow {
        Shadow {
            depth: Cell::new(0),
            return_address: [const { Cell::new(0) }; SHADOW_DEPTH],
            entry_sp: [const { Cell::new(0) }; SHADOW_DEPTH],
            token: [const { Cell::new(None) }; SHADOW_DEPTH],
        }
    }

    /// Starts recording with `begin` and pushes the frame; false (and nothing started) when the
    /// stack is full or `begin` records nothing.
    fn push(
        &self,
        return_address: usize,
        entry_sp: usize,
        begin: impl FnOnce() -> Option<backend::Token>,
    ) -> bool {
        let d = self.depth.get();
        if d >= SHADOW_DEPTH {
            return false;
        }
        let Some(token) = begin() else {
            return false;
        };
        self.return_address[d].set(return_address);
        self.entry_sp[d].set(entry_sp);
        self.token[d].set(Some(token));
        // Last: a signal handler that runs before this sees the stack without the frame.
        self.depth.set(d + 1);
        true
    }

    /// Pops the frame whose stub was entered with stack pointer `entry_sp`: its return address
    /// and token. Frames above it (deeper in the stack, left by `longjmp`) are discarded; `None`
    /// if there is no such frame (nothing is changed then).
    fn pop(&self, entry_sp: usize) -> Option<(usize, Option<backend::Token>)> {
        let mut i = self.depth.get();
        while i > 0 {
            i -= 1;
            let sp = self.entry_sp[i].get();
            if sp == entry_sp {
                self.depth.set(i);
                return Some((self.return_address[i].get(), self.token[i].take()));
            }
            if sp > entry_sp {
                // An outer frame: ours would be above it.
                break;
            }
        }
        None
    }
}

thread_local! {
    /// No destructor and const-initialised: always accessible, async-signal-safe, no allocation.
    static SHADOW: Shadow = const { Shadow::new() };
}

/// What [`rtrace_generic_enter`] hands back to the trampoline, in rax:rdx.
#[repr(C)]
pub struct Enter {
    /// The real function; 0 when the driver lacks it.
    target: usize,
    /// Non-zero when the call is recorded: the real function must return to the continuation.
    pushed: usize,
}

/// Step 1 of the trampoline: the real function of `id`, and whether the call is recorded (then
/// `return_address`, the caller's, is on the shadow stack under `entry_sp`).
extern "C" fn rtrace_generic_enter(id: u32, return_address: usize, entry_sp: usize) -> Enter {
    let target = catch_unwind(|| backend::real(id) as usize).unwrap_or(0);
    if target == 0 {
        return Enter {
            target: 0,
            pushed: 0,
        };
    }
    let pushed = catch_unwind(AssertUnwindSafe(|| {
        SHADOW
            .try_with(|s| s.push(return_address, entry_sp, || backend::begin(id)))
            .unwrap_or(false)
    }))
    .unwrap_or(false);
    Enter {
        target,
        pushed: pushed as usize,
    }
}

/// Step 3: the real function entered with stack pointer `entry_sp` returned `rax`: ends its
/// record and returns the caller's return address.
extern "C" fn rtrace_generic_exit(rax: u64, entry_sp: usize) -> usize {
    let popped = catch_unwind(|| SHADOW.try_with(|s| s.pop(entry_sp)).ok().flatten())
        .ok()
        .flatten();
    let Some((return_address, token)) = popped else {
        lost_return_address()
    };
    let _ = catch_unwind(AssertUnwindSafe(|| backend::end(token, rax as u32)));
    return_address
}

/// A continuation ran for a frame the shadow stack does not hold: there is nowhere to return.
#[cold]
fn lost_return_address() -> ! {
    const MSG: &[u8] = b"rtrace: generic trampoline: return address lost, aborting\n";
    crate::sys::die(MSG)
}

/// The shared body of every stub in `generated/generic_stubs.rs`: entered by `jmp` with the
/// function id in r11d and the stack as the stub's caller left it (`[rsp]` = return address).
///
/// Frame while calling [`rtrace_generic_enter`] (rbp = entry rsp − 8, the return address at
/// `[rbp + 8]`, stack arguments from `[rbp + 16]`; rsp aligned down to 16 whatever the caller's
/// alignment): `[rsp]` rdi, rsi, rdx, rcx, r8, r9, rax, r10, then `[rsp + 64]` xmm0–xmm7.
///
/// # Safety
/// Only the generated stubs enter it, with r11d a function id.
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn rtrace_generic_trampoline() {
    core::arch::naked_asm!(
        "push rbp",
        "mov rbp, rsp",
        "and rsp, -16",
        "sub rsp, 192",
        "mov qword ptr [rsp], rdi",
        "mov qword ptr [rsp + 8], rsi",
        "mov qword ptr [rsp + 16], rdx",
        "mov qword ptr [rsp + 24], rcx",
        "mov qword ptr [rsp + 32], r8",
        "mov qword ptr [rsp + 40], r9",
        "mov qword ptr [rsp + 48], rax",
        "mov qword ptr [rsp + 56], r10",
        "movaps xmmword ptr [rsp + 64], xmm0",
        "movaps xmmword ptr [rsp + 80], xmm1",
        "movaps xmmword ptr [rsp + 96], xmm2",
        "movaps xmmword ptr [rsp + 112], xmm3",
        "movaps xmmword ptr [rsp + 128], xmm4",
        "movaps xmmword ptr [rsp + 144], xmm5",
        "movaps xmmword ptr [rsp + 160], xmm6",
        "movaps xmmword ptr [rsp + 176], xmm7",
        // rtrace_generic_enter(id, return address, entry rsp) -> (rax: target, rdx: pushed)
        "mov edi, r11d",
        "mov rsi, qword ptr [rbp + 8]",
        "lea rdx, [rbp + 8]",
        "call {enter}",
        "test rax, rax",
        "jz 3f",
        "mov r11, rax",
        "test rdx, rdx",
        "jz 2f",
        // Recorded: the real function returns to the continuation.
        "lea rax, [rip + 4f]",
        "mov qword ptr [rbp + 8], rax",
        "2:",
        "mov rdi, qword ptr [rsp]",
        "mov rsi, qword ptr [rsp + 8]",
        "mov rdx, qword ptr [rsp + 16]",
        "mov rcx, qword ptr [rsp + 24]",
        "mov r8, qword ptr [rsp + 32]",
        "mov r9, qword ptr [rsp + 40]",
        "mov rax, qword ptr [rsp + 48]",
        "mov r10, qword ptr [rsp + 56]",
        "movaps xmm0, xmmword ptr [rsp + 64]",
        "movaps xmm1, xmmword ptr [rsp + 80]",
        "movaps xmm2, xmmword ptr [rsp + 96]",
        "movaps xmm3, xmmword ptr [rsp + 112]",
        "movaps xmm4, xmmword ptr [rsp + 128]",
        "movaps xmm5, xmmword ptr [rsp + 144]",
        "movaps xmm6, xmmword ptr [rsp + 160]",
        "movaps xmm7, xmmword ptr [rsp + 176]",
        "mov rsp, rbp",
        "pop rbp",
        "jmp r11",
        // The driver lacks the function: CUDA_ERROR_NOT_FOUND, nothing called.
        "3:",
        "mov rsp, rbp",
        "pop rbp",
        "mov eax, {missing}",
        "ret",
        // The continuation: the real function returned, rsp = entry rsp + 8. The return address
        // goes back in its old slot (entry rsp); rbp = entry rsp - 8 again.
        "4:",
        "sub rsp, 8",
        "push rbp",
        "mov rbp, rsp",
        "and rsp, -16",
        "sub rsp, 64",
        "movaps xmmword ptr [rsp], xmm0",
        "movaps xmmword ptr [rsp + 16], xmm1",
        "mov qword ptr [rsp + 32], rax",
        "mov qword ptr [rsp + 40], rdx",
        // rtrace_generic_exit(rax, entry rsp) -> return address
        "mov rdi, rax",
        "lea rsi, [rbp + 8]",
        "call {exit}",
        "mov qword ptr [rbp + 8], rax",
        "movaps xmm0, xmmword ptr [rsp]",
        "movaps xmm1, xmmword ptr [rsp + 16]",
        "mov rax, qword ptr [rsp + 32]",
        "mov rdx, qword ptr [rsp + 40]",
        "mov rsp, rbp",
        "pop rbp",
        "ret",
        enter = sym rtrace_generic_enter,
        exit = sym rtrace_generic_exit,
        missing = const crate::hook::MISSING_RESULT,
    )
}

#[cfg(test)]
mod tests {
    //! The trampoline's assembly, run for real through the generated stubs, against stand-ins
    //! for `crate::hook` (per thread, so tests run in parallel): `real` returns the function a
    //! test installed, `begin` records unless switched off, `end` logs `(id, result)`.

    use super::{Shadow, SHADOW, SHADOW_DEPTH};
    use crate::generated::{self, OPAQUE};
    use std::arch::asm;
    use std::cell::{Cell, RefCell};
    use std::ffi::c_void;

    thread_local! {
        static TARGETS: [Cell<usize>; OPAQUE.len()] =
            const { [const { Cell::new(0) }; OPAQUE.len()] };
        static RECORDING: Cell<bool> = const { Cell::new(true) };
        static ENDED: RefCell<Vec<(u32, u32)>> = const { RefCell::new(Vec::new()) };
    }

    pub mod backend {
        use super::*;

        /// A test token: the function id.
        pub type Token = u32;

        pub fn real(id: u32) -> *mut c_void {
            let name = generated::id::FUNCTION_NAMES[id as usize];
            let i = OPAQUE.iter().position(|&n| n == name).unwrap();
            TARGETS.with(|t| t[i].get()) as *mut c_void
        }

        pub fn begin(id: u32) -> Option<Token> {
            RECORDING.with(|r| r.get()).then_some(id)
        }

        pub fn end(token: Option<Token>, result: u32) {
            ENDED.with(|e| e.borrow_mut().push((token.unwrap(), result)));
        }
    }

    /// The stub of `name` with `target` as its real function (null: the driver lacks it).
    fn stub(name: &str, target: *const ()) -> (*const (), u32) {
        let id = generated::id::function_id(name.as_bytes()).unwrap();
        let i = OPAQUE.iter().position(|&n| n == name).unwrap();
        TARGETS.with(|t| t[i].set(target as usize));
        (generated::wrapper_address(id as usize) as *const (), id)
    }

    fn ended() -> Vec<(u32, u32)> {
        ENDED.with(|e| std::mem::take(&mut *e.borrow_mut()))
    }

    fn depth() -> usize {
        SHADOW.with(|s| s.depth.get())
    }

    #[repr(C)]
    #[derive(Debug, PartialEq)]
    struct Pair {
        a: u64,
        b: u64,
    }

    type Many = unsafe extern "C" fn(
        u64,
        u64,
        u64,
        u64,
        u64,
        u64,
        u64,
        u64,
        f64,
        f64,
        f64,
        f64,
        f64,
        f64,
        f64,
        f64,
        f64,
        f32,
    ) -> Pair;

    /// Six integer registers and two stack slots, eight xmm registers and two more stack slots.
    extern "C" fn many(
        i1: u64,
        i2: u64,
        i3: u64,
        i4: u64,
        i5: u64,
        i6: u64,
        i7: u64,
        i8: u64,
        d1: f64,
        d2: f64,
        d3: f64,
        d4: f64,
        d5: f64,
        d6: f64,
        d7: f64,
        d8: f64,
        d9: f64,
        f10: f32,
    ) -> Pair {
        let ints = [i1, i2, i3, i4, i5, i6, i7, i8];
        let floats = [d1, d2, d3, d4, d5, d6, d7, d8, d9, f10 as f64];
        let mut a = 0u64;
        for (k, v) in ints.iter().enumerate() {
            assert_eq!(*v, 0x1111_1111_1111_1111 * (k as u64 + 1), "integer {k}");
            a = a.wrapping_mul(31).wrapping_add(*v);
        }
        for (k, v) in floats.iter().enumerate() {
            assert_eq!(*v, 0.5 + k as f64, "float {k}");
        }
        Pair {
            a,
            b: 0xdead_beef_0000_0000 | i8,
        }
    }

    fn call_many(f: *const ()) -> Pair {
        // SAFETY: `f` is a stub whose real function is `many`.
        unsafe {
            let f: Many = std::mem::transmute(f);
            f(
                0x1111_1111_1111_1111,
                0x2222_2222_2222_2222,
                0x3333_3333_3333_3333,
                0x4444_4444_4444_4444,
                0x5555_5555_5555_5555,
                0x6666_6666_6666_6666,
                0x7777_7777_7777_7777,
                0x8888_8888_8888_8888,
                0.5,
                1.5,
                2.5,
                3.5,
                4.5,
                5.5,
                6.5,
                7.5,
                8.5,
                9.5,
            )
        }
    }

    fn expected_many() -> Pair {
        many(
            0x1111_1111_1111_1111,
            0x2222_2222_2222_2222,
            0x3333_3333_3333_3333,
            0x4444_4444_4444_4444,
            0x5555_5555_5555_5555,
            0x6666_6666_6666_6666,
            0x7777_7777_7777_7777,
            0x8888_8888_8888_8888,
            0.5,
            1.5,
            2.5,
            3.5,
            4.5,
            5.5,
            6.5,
            7.5,
            8.5,
            9.5,
        )
    }

    #[test]
    fn arguments_and_results_pass_through() {
        let (f, id) = stub("cudbgApiAttach", many as *const ());
        assert_eq!(call_many(f), expected_many());
        assert_eq!(ended(), vec![(id, expected_many().a as u32)]);
        assert_eq!(depth(), 0);

        extern "C" fn scaled(x: f64, n: i32, y: f32) -> f64 {
            x * n as f64 + y as f64
        }
        let (f, id) = stub("cudbgGetAPI", scaled as *const ());
        // SAFETY: the stub's real function is `scaled`.
        let r = unsafe { std::mem::transmute::<*const (), extern "C" fn(f64, i32, f32) -> f64>(f) }(
            1.25, -3, 0.5,
        );
        assert_eq!(r, -3.25);
        assert_eq!(ended().len(), 1);
        let _ = id;
        assert_eq!(depth(), 0);
    }

    #[test]
    fn unrecorded_calls_are_tail_calls() {
        RECORDING.with(|r| r.set(false));
        let (f, _) = stub("cudbgApiDetach", many as *const ());
        assert_eq!(call_many(f), expected_many());
        RECORDING.with(|r| r.set(true));
        assert!(ended().is_empty());
        assert_eq!(depth(), 0);
    }

    #[test]
    fn missing_function_returns_not_found() {
        let (f, _) = stub("cudbgMain", std::ptr::null());
        // SAFETY: the stub returns 500 without calling anything.
        let r = unsafe { std::mem::transmute::<*const (), extern "C" fn(u64) -> u32>(f) }(7);
        assert_eq!(r, 500);
        assert!(ended().is_empty());
    }

    /// Returns its rax and r10 as they were at its entry (rax:rdx).
    #[unsafe(naked)]
    extern "C" fn echo_rax_r10() {
        core::arch::naked_asm!("mov rdx, r10", "ret")
    }

    #[test]
    fn rax_and_r10_reach_the_real_function() {
        for recording in [true, false] {
            RECORDING.with(|r| r.set(recording));
            let (f, _) = stub("cuEGLApiInit", echo_rax_r10 as *const ());
            let (rax, rdx): (u64, u64);
            // SAFETY: calls the stub with rax and r10 set, as a variadic caller sets al; the
            // stub's real function only reads them and returns. Stack aligned (no `nostack`).
            unsafe {
                asm!(
                    "call {f}",
                    f = in(reg) f,
                    inout("rax") 0x0123_4567_89ab_cdefu64 => rax,
                    in("r10") 0xfedc_ba98_7654_3210u64,
                    out("rdx") rdx,
                    clobber_abi("C"),
                );
            }
            assert_eq!((rax, rdx), (0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210));
            assert_eq!(ended().len(), recording as usize);
        }
        RECORDING.with(|r| r.set(true));
    }

    thread_local! {
        static NESTED_STUB: Cell<usize> = const { Cell::new(0) };
    }

    /// Calls the stub again `n` times deep, then returns `n`.
    extern "C" fn recurse(n: u32) -> u32 {
        if n > 0 {
            let f = NESTED_STUB.with(|s| s.get());
            // SAFETY: the stub's real function is this one.
            let r = unsafe { std::mem::transmute::<usize, extern "C" fn(u32) -> u32>(f) }(n - 1);
            assert_eq!(r, n - 1);
            assert!(depth() <= SHADOW_DEPTH);
        }
        n
    }

    #[test]
    fn nested_calls_past_the_shadow_depth() {
        let (f, id) = stub("cuMemGetAttribute", recurse as *const ());
        NESTED_STUB.with(|s| s.set(f as usize));
        let n = SHADOW_DEPTH as u32 + 10;
        // SAFETY: the stub's real function is `recurse`.
        let r = unsafe { std::mem::transmute::<*const (), extern "C" fn(u32) -> u32>(f) }(n);
        assert_eq!(r, n);
        // The outermost SHADOW_DEPTH calls are recorded, innermost first.
        let expected: Vec<(u32, u32)> =
            (n + 1 - SHADOW_DEPTH as u32..=n).map(|k| (id, k)).collect();
        assert_eq!(ended(), expected);
        assert_eq!(depth(), 0);
    }

    #[test]
    fn pop_matches_frames_by_stack_address() {
        let s = Shadow::new();
        assert!(s.push(0xa, 1000, || Some(1)));
        assert!(s.push(0xb, 900, || Some(2)));
        assert!(!s.push(0xc, 800, || None));
        assert_eq!(s.depth.get(), 2);
        // A frame that is not there (an outer one): nothing changes.
        assert_eq!(s.pop(2000), None);
        assert_eq!(s.pop(950), None);
        assert_eq!(s.depth.get(), 2);
        // The frame at 900 was left by longjmp: the frame at 1000 still returns.
        assert_eq!(s.pop(1000), Some((0xa, Some(1))));
        assert_eq!(s.depth.get(), 0);
        for k in 0..SHADOW_DEPTH {
            assert!(s.push(k, 5000 - k, || Some(k as u32)));
        }
        assert!(!s.push(0, 0, || panic!("begin called with the stack full")));
        assert_eq!(
            s.pop(5000 - (SHADOW_DEPTH - 1)),
            Some((SHADOW_DEPTH - 1, Some(SHADOW_DEPTH as u32 - 1)))
        );
    }
}
