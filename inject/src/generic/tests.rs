//! The trampoline's assembly, run for real through the generated stubs, against stand-ins
//! for `crate::hook` (per thread, so tests run in parallel): `real` returns the function a
//! test installed, `begin` records unless switched off, `end` logs `(id, result)`.

use super::{Shadow, SHADOW, SHADOW_DEPTH};
use crate::generated::{self, OPAQUE};
use crate::runtime_ids::{RUNTIME_STUB_BIT, RUNTIME_STUB_NAMES};
use crate::runtime_stubs::RUNTIME_STUB_ADDRESSES;
use std::arch::asm;
use std::cell::{Cell, RefCell};
use std::ffi::c_void;

thread_local! {
    static TARGETS: [Cell<usize>; OPAQUE.len()] =
        const { [const { Cell::new(0) }; OPAQUE.len()] };
    static RECORDING: Cell<bool> = const { Cell::new(true) };
    static ENDED: RefCell<Vec<(u32, u32)>> = const { RefCell::new(Vec::new()) };
    static RUNTIME_TARGET: Cell<usize> = const { Cell::new(0) };
}

pub mod backend {
    use super::*;

    /// A test token: the function id.
    pub type Token = u32;

    pub fn real(id: u32, _return_address: usize) -> *mut c_void {
        if id & RUNTIME_STUB_BIT != 0 {
            return RUNTIME_TARGET.with(|t| t.get()) as *mut c_void;
        }
        let name = generated::id::FUNCTION_NAMES[id as usize];
        let i = OPAQUE.iter().position(|&n| n == name).unwrap();
        TARGETS.with(|t| t[i].get()) as *mut c_void
    }

    pub fn begin(id: u32) -> Option<Token> {
        RECORDING.with(|r| r.get()).then_some(id)
    }

    pub fn end(token: Option<Token>, rax: u64) {
        ENDED.with(|e| e.borrow_mut().push((token.unwrap(), rax as u32)));
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
    let expected: Vec<(u32, u32)> = (n + 1 - SHADOW_DEPTH as u32..=n).map(|k| (id, k)).collect();
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

#[test]
fn runtime_stubs_enter_the_trampoline_with_their_index() {
    let k = RUNTIME_STUB_NAMES
        .iter()
        .position(|n| n.to_bytes() == b"cudaGetDevice")
        .unwrap();
    RUNTIME_TARGET.with(|t| t.set(many as *const () as usize));
    let f = RUNTIME_STUB_ADDRESSES[k] as *const ();
    assert_eq!(call_many(f), expected_many());
    assert_eq!(
        ended(),
        vec![(RUNTIME_STUB_BIT | k as u32, expected_many().a as u32)]
    );
    RUNTIME_TARGET.with(|t| t.set(0));
    // SAFETY: the stub returns 500 (cudaErrorSymbolNotFound) without calling anything.
    let r = unsafe { std::mem::transmute::<*const (), extern "C" fn(u64) -> u32>(f) }(7);
    assert_eq!(r, 500);
    assert!(ended().is_empty());
    assert_eq!(depth(), 0);
}

/// The stubs' own fast path (CUPTI's route: the stubs do not record): a stub called from the
/// caller it was last called from jumps to that caller's function itself, every argument
/// register, stack argument, rax and r10 as the caller set them, and never enters the
/// trampoline; a call from elsewhere does.
#[test]
fn runtime_stubs_jump_straight_to_their_last_callers_function() {
    let index = |name: &[u8]| {
        RUNTIME_STUB_NAMES
            .iter()
            .position(|n| n.to_bytes() == name)
            .unwrap()
    };
    let (k, e) = (index(b"cudaGetErrorName"), index(b"cudaGetErrorString"));
    // The trampoline's stand-in would call nothing: only the fast path reaches `many`.
    RUNTIME_TARGET.with(|t| t.set(0));
    crate::cudart::remember_for_test(k, 0, usize::MAX, many as *const () as usize);
    let f = RUNTIME_STUB_ADDRESSES[k] as *const ();
    assert_eq!(call_many(f), expected_many());
    assert!(ended().is_empty());
    crate::cudart::remember_for_test(e, 0, usize::MAX, echo_rax_r10 as *const () as usize);
    let g = RUNTIME_STUB_ADDRESSES[e] as *const ();
    let (rax, rdx): (u64, u64);
    // SAFETY: calls the stub with rax and r10 set; its function only reads them and returns.
    unsafe {
        asm!(
            "call {g}",
            g = in(reg) g,
            inout("rax") 0x0123_4567_89ab_cdefu64 => rax,
            in("r10") 0xfedc_ba98_7654_3210u64,
            out("rdx") rdx,
            clobber_abi("C"),
        );
    }
    assert_eq!((rax, rdx), (0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210));
    // Called from outside the remembered caller's range: the trampoline, whose stand-in
    // finds no function (500), and the stub's function is not called.
    crate::cudart::remember_for_test(k, 0, 1, many as *const () as usize);
    // SAFETY: the stub returns 500 without calling anything.
    let r = unsafe { std::mem::transmute::<*const (), extern "C" fn(u64) -> u32>(f) }(7);
    assert_eq!(r, 500);
    assert!(ended().is_empty());
    assert_eq!(depth(), 0);
}
