//! Process-level interposition: `dlsym` (the route to the driver other than
//! direct binding and cuGetProcAddress), `_exit`/`_Exit`, `SIGINT`/`SIGTERM`
//! with their default disposition, fork, and the ELF constructor/destructor.
//!
//! The exported symbols exist only in the cdylib (`cfg(not(test))`): a unit-test
//! binary must keep libc's own.
#![cfg_attr(test, allow(dead_code))]

use crate::session::{self, Ending};
use crate::state::{self, State};
use crate::{driver, generated, nvtx, thread};
use std::cell::UnsafeCell;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

extern "C" {
    fn __register_atfork(
        prepare: Option<unsafe extern "C" fn()>,
        parent: Option<unsafe extern "C" fn()>,
        child: Option<unsafe extern "C" fn()>,
        dso_handle: *mut c_void,
    ) -> c_int;
}

/// `dlsym` for every handle except `RTLD_NEXT`: a driver function found in the
/// driver library is swapped for its wrapper. `RTLD_NEXT` lookups never get here:
/// the entry stub jumps straight to libc so that the caller's position is kept.
extern "C" fn dlsym_hook(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    let p = driver::real_dlsym(handle, symbol);
    if p.is_null() || symbol.is_null() {
        return p;
    }
    // SAFETY: the caller's NUL-terminated name.
    let name = unsafe { CStr::from_ptr(symbol) }.to_bytes();
    if !name.starts_with(b"cu") || thread::in_rtrace() || state::state() == State::Disabled {
        return p;
    }
    thread::with_errno_saved(|| thread::internal(|| wrapper_for_export(name, p)))
        .flatten()
        .unwrap_or(p)
}

/// If `p` is the driver's export `name`, returns the wrapper to hand out instead.
fn wrapper_for_export(name: &[u8], p: *mut c_void) -> Option<*mut c_void> {
    let id = generated::id::function_id(name)?;
    let wrapper = crate::procaddr::wrapper_address(id as usize);
    if p == wrapper {
        return None;
    }
    if driver::driver_export(id) != p {
        return None;
    }
    Some(wrapper)
}

/// The exported `dlsym`: a tail-jumping stub, so libc sees the original return
/// address (which `RTLD_NEXT` and namespaces depend on).
///
/// # Safety
/// libc's contract for `dlsym`.
#[cfg(all(not(test), target_arch = "x86_64"))]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    core::arch::naked_asm!(
        "mov rax, qword ptr [rip + {real}]",
        "test rax, rax",
        "jnz 2f",
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "call {resolve}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "2:",
        "cmp rdi, -1",
        "je 3f",
        "jmp {hook}",
        "3:",
        "jmp rax",
        real = sym crate::driver::REAL_DLSYM,
        resolve = sym crate::driver::rtrace_resolve_dlsym,
        hook = sym dlsym_hook,
    )
}

fn exit_now(status: c_int) -> ! {
    crate::sys::exit_group(status)
}

/// `_exit`: flush the trace, then end the process as libc would.
#[cfg(not(test))]
#[no_mangle]
pub extern "C" fn _exit(status: c_int) -> ! {
    session::drain_and_finish(Ending::Exit("_exit"));
    exit_now(status)
}

/// `_Exit`: the same as `_exit`.
#[cfg(not(test))]
#[no_mangle]
pub extern "C" fn _Exit(status: c_int) -> ! {
    session::drain_and_finish(Ending::Exit("_exit"));
    exit_now(status)
}

// ---- SIGINT / SIGTERM --------------------------------------------------------

const MANAGED_SIGNALS: [c_int; 2] = [libc::SIGINT, libc::SIGTERM];

/// Per managed signal: is rtrace's handler installed (the program's disposition is SIG_DFL)?
static OURS: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];
/// Per managed signal: the disposition the program believes it has, while ours is installed.
struct AppActions(UnsafeCell<[libc::sigaction; 2]>);
// SAFETY: only accessed with SIG_LOCK held.
unsafe impl Sync for AppActions {}
// SAFETY: an all-zero sigaction is SIG_DFL with no flags and an empty mask.
static APP: AppActions = AppActions(UnsafeCell::new(unsafe { std::mem::zeroed() }));
static SIG_LOCK: AtomicBool = AtomicBool::new(false);
static REAL_SIGACTION: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static ARMED: AtomicBool = AtomicBool::new(false);

type SigactionFn =
    unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;

fn real_sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    let mut p = REAL_SIGACTION.load(Ordering::Acquire);
    if p.is_null() {
        p = driver::real_dlsym(libc::RTLD_NEXT, c"sigaction".as_ptr());
        if p.is_null() {
            // As a failed sigaction would.
            crate::sys::set_errno(libc::ENOSYS);
            return -1;
        }
        REAL_SIGACTION.store(p, Ordering::Release);
    }
    // SAFETY: `p` is libc's sigaction.
    unsafe { std::mem::transmute::<*mut c_void, SigactionFn>(p)(sig, act, old) }
}

fn slot(sig: c_int) -> Option<usize> {
    MANAGED_SIGNALS.iter().position(|&s| s == sig)
}

struct SigGuard;
impl SigGuard {
    fn lock() -> SigGuard {
        while SIG_LOCK
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        SigGuard
    }
}
impl Drop for SigGuard {
    fn drop(&mut self) {
        SIG_LOCK.store(false, Ordering::Release);
    }
}

fn is_default(act: &libc::sigaction) -> bool {
    act.sa_sigaction == libc::SIG_DFL
}

/// Installs rtrace's handler for `sig`. Call with SIG_LOCK held.
fn install_ours(sig: c_int, i: usize) -> bool {
    // SAFETY: a zeroed sigaction is a valid starting point; fields set below.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = on_fatal_signal as *const () as usize;
    act.sa_flags = libc::SA_SIGINFO;
    // SAFETY: valid sigset pointer.
    unsafe { libc::sigfillset(&mut act.sa_mask) };
    let ok = real_sigaction(sig, &act, std::ptr::null_mut()) == 0;
    OURS[i].store(ok, Ordering::Release);
    ok
}

extern "C" fn on_fatal_signal(sig: c_int, _info: *mut libc::siginfo_t, _ctx: *mut c_void) {
    let errno = crate::sys::errno();
    let mut reason = *b"signal   ";
    let mut digits = [0u8; 20];
    let d = crate::diag::format_u64(sig as u64, &mut digits);
    reason[7..7 + d.len().min(2)].copy_from_slice(&d[..d.len().min(2)]);
    let text = std::str::from_utf8(&reason[..7 + d.len().min(2)]).unwrap_or("signal");
    let _ = std::panic::catch_unwind(|| session::drain_and_finish(Ending::Signal(text)));
    // The program's disposition is the default one: apply it.
    if let Some(i) = slot(sig) {
        OURS[i].store(false, Ordering::Release);
    }
    // Restoring SIG_DFL, unblocking and re-raising `sig`: the default action ends the process.
    // SAFETY: a zeroed sigaction is valid; SIG_DFL is set below.
    let mut dfl: libc::sigaction = unsafe { std::mem::zeroed() };
    dfl.sa_sigaction = libc::SIG_DFL;
    real_sigaction(sig, &dfl, std::ptr::null_mut());
    crate::sys::unblock_and_raise(sig);
    crate::sys::set_errno(errno);
}

/// The `sigaction` the program sees: for SIGINT and SIGTERM, while the program's
/// disposition is SIG_DFL, rtrace's flushing handler stays installed but the
/// program is told SIG_DFL; any other disposition is installed for real.
fn sigaction_impl(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    let Some(i) = slot(sig).filter(|_| ARMED.load(Ordering::Acquire)) else {
        return real_sigaction(sig, act, old);
    };
    let _g = SigGuard::lock();
    // SAFETY: SIG_LOCK is held.
    let app = unsafe { &mut *APP.0.get() };
    if OURS[i].load(Ordering::Acquire) {
        let previous = app[i];
        let mut rc = 0;
        if !act.is_null() {
            // SAFETY: the caller's sigaction.
            let new = unsafe { *act };
            if is_default(&new) {
                app[i] = new;
            } else {
                rc = real_sigaction(sig, act, std::ptr::null_mut());
                if rc == 0 {
                    OURS[i].store(false, Ordering::Release);
                }
            }
        }
        if rc == 0 && !old.is_null() {
            // SAFETY: the caller's out-pointer.
            unsafe { *old = previous };
        }
        rc
    } else {
        let rc = real_sigaction(sig, act, old);
        if rc == 0 && !act.is_null() && state::state() == State::Running {
            // SAFETY: the caller's sigaction.
            let new = unsafe { *act };
            if is_default(&new) && install_ours(sig, i) {
                app[i] = new;
            }
        }
        rc
    }
}

/// # Safety
/// libc's contract for `sigaction`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    sigaction_impl(sig, act, old)
}

/// `signal` with glibc's (BSD) semantics — the handler restarts interrupted calls and runs
/// with its own signal blocked — routed through [`sigaction_impl`], so SIGINT and SIGTERM get
/// the same treatment whichever way the program sets them.
fn signal_impl(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: zeroed sigactions are valid; fields set below.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler;
    act.sa_flags = libc::SA_RESTART;
    // SAFETY: valid sigset pointer; an invalid `sig` makes sigaction fail with EINVAL below.
    unsafe { libc::sigaddset(&mut act.sa_mask, sig) };
    if sigaction_impl(sig, &act, &mut old) != 0 {
        return libc::SIG_ERR;
    }
    old.sa_sigaction
}

/// # Safety
/// libc's contract for `signal`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    signal_impl(sig, handler)
}

/// # Safety
/// libc's contract for `bsd_signal`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn bsd_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    signal_impl(sig, handler)
}

unsafe extern "C" fn fork_child() {
    session::after_fork_in_child();
}

/// Arms the fatal-signal handlers and the fork handler (once, at start-up).
pub fn arm_process_hooks() {
    if ARMED.swap(true, Ordering::AcqRel) {
        return;
    }
    {
        let _g = SigGuard::lock();
        for (i, &sig) in MANAGED_SIGNALS.iter().enumerate() {
            // SAFETY: zeroed sigaction as an out-buffer.
            let mut cur: libc::sigaction = unsafe { std::mem::zeroed() };
            if real_sigaction(sig, std::ptr::null(), &mut cur) == 0 && is_default(&cur) {
                // SAFETY: SIG_LOCK is held.
                unsafe { (*APP.0.get())[i] = cur };
                install_ours(sig, i);
            }
        }
    }
    // SAFETY: registers a plain function; a null dso handle ties it to no object.
    unsafe {
        __register_atfork(None, None, Some(fork_child), std::ptr::null_mut());
    }
}

// ---- ELF constructor and destructor -------------------------------------------

/// Starts the session and, with tracing running, arms the process hooks (fatal signals, fork).
/// A session started earlier (by a driver or NVTX call from another library's constructor)
/// gets its hooks here, still before `main`.
extern "C" fn on_load() {
    let _ = std::panic::catch_unwind(|| {
        session::start();
        if state::state() == State::Running {
            arm_process_hooks();
        }
    });
}

/// NVTX's entry point for a tool: starts the session if need be and, with tracing running and
/// NVTX on (`RTRACE_NVTX`), fills the calling image's callback tables ([`nvtx::attach`]).
/// Returns 1 (attached) or 0, in which case NVTX turns that image's calls into no-ops.
///
/// # Safety
/// Called by NVTX with its `getExportTable` function.
#[no_mangle]
pub unsafe extern "C" fn InitializeInjectionNvtx2(get: Option<nvtx::GetExportTable>) -> i32 {
    let on = thread::with_errno_saved(|| {
        session::start();
        state::state() == State::Running && state::config().nvtx
    });
    if on != Some(true) {
        return 0;
    }
    // SAFETY: NVTX's own `getExportTable`, passed on.
    unsafe { nvtx::attach(get) }
}

/// Runs in `_dl_fini`, after the program's atexit handlers (libcudart's
/// teardown included), so its calls are in the trace.
extern "C" fn on_unload() {
    let _ = std::panic::catch_unwind(|| session::drain_and_finish(Ending::Exit("exit")));
}

#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static INIT_ARRAY: extern "C" fn() = on_load;

#[cfg(not(test))]
#[used]
#[link_section = ".fini_array"]
static FINI_ARRAY: extern "C" fn() = on_unload;
