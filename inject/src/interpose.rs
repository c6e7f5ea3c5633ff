//! Process-level interposition: `dlsym` (the route to the driver other than
//! direct binding and cuGetProcAddress), `_exit`/`_Exit`, `SIGINT`/`SIGTERM`
//! with their default disposition, fork, and the ELF constructor/destructor.
//!
//! The exported symbols exist only in the cdylib (`cfg(not(test))`): a unit-test
//! binary must keep libc's own.
#![cfg_attr(test, allow(dead_code))]

use crate::session::{self, Ending};
use crate::state::{self, State};
use crate::{driver, generated, got, nvtx, thread};
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

/// `dlsym` of a `cu*` name, for every handle except `RTLD_NEXT` (`caller`: the return address
/// of the program's call). Other names and `RTLD_NEXT` never get here: the entry stub jumps
/// straight to libc for them, so that libc sees the caller's position.
///
/// A driver function found in the driver library is swapped for its wrapper. rtrace's own
/// export is handed out only where the lookup would find a definition without rtrace (see
/// [`own_export`]).
extern "C" fn dlsym_hook(
    handle: *mut c_void,
    symbol: *const c_char,
    caller: *const c_void,
) -> *mut c_void {
    let p = driver::real_dlsym(handle, symbol);
    if p.is_null() && handle == libc::RTLD_DEFAULT {
        // libc looked from rtrace's place; the caller's scope may hold more (its own
        // dependencies, when it was opened RTLD_LOCAL). A failure there sets dlerror as libc
        // would, naming the caller.
        return match caller_map(caller) {
            Some(map) => driver::real_dlsym(map, symbol),
            None => p,
        };
    }
    if p.is_null() || symbol.is_null() || thread::in_rtrace() {
        return p;
    }
    // SAFETY: the caller's NUL-terminated name.
    let name = unsafe { CStr::from_ptr(symbol) };
    thread::with_errno_saved(|| thread::internal(|| lookup(handle, name, p, caller))).unwrap_or(p)
}

/// What a `dlsym` of `name` that found `p` returns.
fn lookup(handle: *mut c_void, name: &CStr, p: *mut c_void, caller: *const c_void) -> *mut c_void {
    let Some(id) = generated::id::function_id(name.to_bytes()) else {
        if name.to_bytes().starts_with(b"cuda") && driver::is_own_address(p) {
            return own_runtime_export(handle, name, caller, p);
        }
        return p;
    };
    let wrapper = crate::procaddr::wrapper_address(id as usize);
    if p == wrapper {
        return own_export(id, handle, name, caller, p);
    }
    swapped(id, p)
}

/// `p`, or its wrapper if it is the driver library's own export of function `id`.
fn swapped(id: u32, p: *mut c_void) -> *mut c_void {
    if state::state() == State::Disabled || driver::driver_export(id) != p {
        return p;
    }
    crate::procaddr::wrapper_address(id as usize)
}

/// The answer to a lookup that found rtrace's own export `wrapper` of `name`, as without rtrace:
/// the wrapper where a definition follows rtrace in the global scope (the driver, or another
/// interposer); for `RTLD_DEFAULT` from a library with a scope of its own (opened
/// `RTLD_LOCAL`), that scope's definition (the driver's swapped for the wrapper), or NULL with
/// the error libc gives, which names the caller. Otherwise NULL, with libc's error for a lookup
/// from rtrace's place: it names librtrace.so where libc would name the program or the handle's
/// object.
fn own_export(
    id: u32,
    handle: *mut c_void,
    name: &CStr,
    caller: *const c_void,
    wrapper: *mut c_void,
) -> *mut c_void {
    if !driver::real_dlsym(libc::RTLD_NEXT, name.as_ptr()).is_null() {
        return wrapper;
    }
    if handle == libc::RTLD_DEFAULT {
        if let Some(map) = caller_map(caller) {
            let r = driver::real_dlsym(map, name.as_ptr());
            if r.is_null() {
                return r;
            }
            if !driver::is_own_address(r) {
                return swapped(id, r);
            }
        }
    }
    // Fails (nothing follows rtrace with this name) and sets dlerror.
    driver::real_dlsym(libc::RTLD_NEXT, name.as_ptr())
}

/// The answer to a lookup that found rtrace's own export `stub` of runtime function `name`
/// (`crate::cudart`), as without rtrace: the stub where a libcudart follows rtrace in the
/// global scope (the stub finds that definition); for `RTLD_DEFAULT` from a library with a
/// scope of its own, that scope's definition itself (unrecorded: the stub would be called from
/// wherever the pointer goes, whose scope may not hold it); otherwise NULL with libc's error.
fn own_runtime_export(
    handle: *mut c_void,
    name: &CStr,
    caller: *const c_void,
    stub: *mut c_void,
) -> *mut c_void {
    if !driver::real_dlsym(libc::RTLD_NEXT, name.as_ptr()).is_null() {
        return stub;
    }
    if handle == libc::RTLD_DEFAULT {
        if let Some(map) = caller_map(caller) {
            let r = crate::cudart::lookup_in(map, name);
            if !r.is_null() && !driver::is_own_address(r) {
                return r;
            }
        }
    }
    driver::real_dlsym(libc::RTLD_NEXT, name.as_ptr())
}

/// `dlclose`: libc's, after which the interposed runtime functions are looked up anew if it
/// unloaded a libcudart or one of their callers (`crate::cudart::after_dlclose`).
///
/// # Safety
/// libc's contract for `dlclose`.
#[cfg(not(test))]
#[no_mangle]
pub unsafe extern "C" fn dlclose(handle: *mut c_void) -> c_int {
    let r = crate::cudart::real_dlclose(handle);
    if r == 0 {
        let _ = std::panic::catch_unwind(crate::cudart::after_dlclose);
    }
    r
}

/// The loader's `link_map` of the object holding `addr` (which glibc accepts as a handle).
fn caller_map(addr: *const c_void) -> Option<*mut c_void> {
    crate::cudart::object_map(addr as usize).map(|m| m as *mut c_void)
}

/// Before every `dlsym` other than `RTLD_NEXT`: a plugin is usually entered through `dlsym`
/// right after `dlopen`, so this is when libraries that bind the driver past rtrace are found
/// ([`got::rescan`]; one step of `dl_iterate_phdr` when nothing was loaded).
extern "C" fn before_dlsym() {
    let _ = std::panic::catch_unwind(got::rescan);
}

/// The exported `dlsym`: a stub that leaves `RTLD_NEXT` and every name not starting with `cu`
/// to libc by a tail jump, so libc sees the original return address (which `RTLD_NEXT`,
/// `RTLD_DEFAULT`'s scope, namespaces and dlerror's messages depend on), and hands `cu*` names
/// to [`dlsym_hook`] with that return address.
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
        "je 4f",
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "call {before}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "test rsi, rsi",
        "jz 3f",
        "cmp byte ptr [rsi], 0x63",
        "jne 3f",
        "cmp byte ptr [rsi + 1], 0x75",
        "jne 3f",
        "mov rdx, qword ptr [rsp]",
        "jmp {hook}",
        "3:",
        "mov rax, qword ptr [rip + {real}]",
        "4:",
        "jmp rax",
        real = sym crate::driver::REAL_DLSYM,
        resolve = sym crate::driver::rtrace_resolve_dlsym,
        before = sym before_dlsym,
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
/// teardown included), so its calls are in the trace. A last look for libraries that bound the
/// driver past rtrace since the last one (a plugin never entered through `dlsym`, whose calls
/// escaped), so that the trace names them. (Not in `_exit`, which a signal handler or a `vfork`
/// child may call.)
extern "C" fn on_unload() {
    let _ = std::panic::catch_unwind(|| {
        got::rescan();
        session::drain_and_finish(Ending::Exit("exit"))
    });
}

#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static INIT_ARRAY: extern "C" fn() = on_load;

#[cfg(not(test))]
#[used]
#[link_section = ".fini_array"]
static FINI_ARRAY: extern "C" fn() = on_unload;
