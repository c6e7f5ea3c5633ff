//! The ABI-agnostic recording trampoline (x86-64 SysV) for the driver exports no header declares
//! (`generated::OPAQUE`, listed in `tools/gen-wrappers/unwrappable.txt`): their parameters and
//! result are unknown, so they cannot be wrapped like the others, yet their calls are recorded.
//! The runtime API by interposition uses it too: libcudart's functions (`runtime_stubs`, ids with
//! `RUNTIME_STUB_BIT`), whose stubs enter it with their index unless their own fast path jumps
//! straight to libcudart (docs/runtime-api.md).
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

/// The hot-path API the trampoline calls: `crate::hook` for driver functions and
/// `crate::runtime_api` with `crate::cudart` for interposed runtime functions (ids with
/// `RUNTIME_STUB_BIT`) in the library; stand-ins in unit tests, which must not start tracing
/// in the test process.
#[cfg(not(test))]
mod backend {
    use crate::runtime_ids::{RUNTIME_STUB_BIT, RUNTIME_STUB_CBIDS};
    use std::ffi::c_void;

    /// A call in flight: a driver call's token, or a runtime call's entry of
    /// `RUNTIME_STUB_CBIDS` (its exit must be seen, recorded or not).
    pub enum Token {
        Driver(crate::hook::CallToken),
        Runtime(u16),
    }

    /// The real function of `id`, called from `return_address`.
    #[inline]
    pub fn real(id: u32, return_address: usize) -> *mut c_void {
        if id & RUNTIME_STUB_BIT != 0 {
            return crate::cudart::real((id & !RUNTIME_STUB_BIT) as usize, return_address);
        }
        crate::hook::real(id)
    }

    #[inline]
    pub fn begin(id: u32) -> Option<Token> {
        if id & RUNTIME_STUB_BIT != 0 {
            if crate::state::state() == crate::state::State::Uninit {
                crate::session::start();
            }
            let cbid = RUNTIME_STUB_CBIDS[(id & !RUNTIME_STUB_BIT) as usize];
            return crate::runtime_api::interposed_enter().then_some(Token::Runtime(cbid));
        }
        crate::hook::begin(id).map(Token::Driver)
    }

    /// Ends the call with its result register.
    #[inline]
    pub fn end(token: Option<Token>, rax: u64) {
        match token {
            Some(Token::Driver(t)) => crate::hook::end(Some(t), rax as u32),
            Some(Token::Runtime(cbid)) => crate::runtime_api::interposed_exit(cbid, rax),
            None => {}
        }
    }
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
    let target = catch_unwind(|| backend::real(id, return_address) as usize).unwrap_or(0);
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
    let _ = catch_unwind(AssertUnwindSafe(|| backend::end(token, rax)));
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
mod tests;
