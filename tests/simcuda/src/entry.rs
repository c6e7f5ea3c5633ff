//! What every exported function does around its body: fault injection, panic catching, errno
//! preservation, debug logging; and the locked access to the virtual GPU.

use std::cell::{Cell, RefCell};
use std::ffi::{CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Once, OnceLock};

use crate::activity;
use crate::config::{self, When};
use crate::errors::{self, CUresult, CUDA_ERROR_UNKNOWN, CUDA_SUCCESS};
use crate::lock::Locked;
use crate::state::{Caller, Id, State};

/// One exported function: its name and its `SIMCUDA_FAIL` rules and call counter.
pub struct Site {
    name: &'static str,
    /// `name` as a C string, for activity reporting.
    cname: OnceLock<CString>,
    rules: OnceLock<Box<[(CUresult, When)]>>,
    calls: AtomicU64,
    /// Calls of this function, counted only with `SIMCUDA_COUNT_OUTPUT`.
    counted: AtomicU64,
    /// Next site in the list of counted sites.
    next: AtomicPtr<Site>,
    listed: AtomicBool,
}

impl Site {
    pub const fn new(name: &'static str) -> Site {
        Site {
            name,
            cname: OnceLock::new(),
            rules: OnceLock::new(),
            calls: AtomicU64::new(0),
            counted: AtomicU64::new(0),
            next: AtomicPtr::new(std::ptr::null_mut()),
            listed: AtomicBool::new(false),
        }
    }

    /// Counts a call for `SIMCUDA_COUNT_OUTPUT` (an independent count of calls per function).
    fn count(&'static self) {
        static RESET_IN_CHILD: Once = Once::new();
        RESET_IN_CHILD.call_once(|| {
            // SAFETY: registers a plain extern "C" handler that only stores to atomics.
            unsafe { libc::pthread_atfork(None, None, Some(reset_counts)) };
        });
        self.counted.fetch_add(1, Ordering::Relaxed);
        if !self.listed.swap(true, Ordering::AcqRel) {
            let me = self as *const Site as *mut Site;
            let mut head = COUNTED.load(Ordering::Acquire);
            loop {
                self.next.store(head, Ordering::Relaxed);
                match COUNTED.compare_exchange(head, me, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => break,
                    Err(h) => head = h,
                }
            }
        }
    }

    /// The injected result of this call, if a rule fires. Calls are only counted for functions
    /// that have rules, so others stay free of shared writes.
    fn injected(&self, cfg: &config::Config) -> Option<CUresult> {
        let rules = self.rules.get_or_init(|| {
            cfg.fail
                .iter()
                .filter(|r| r.function == self.name)
                .map(|r| (r.code, r.when))
                .collect()
        });
        if rules.is_empty() {
            return None;
        }
        let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        rules
            .iter()
            .find(|(_, w)| w.matches(n))
            .map(|&(code, _)| code)
    }

    fn cname(&self) -> &CStr {
        self.cname
            .get_or_init(|| CString::new(self.name).unwrap_or_default())
    }
}

/// Runs the body of exported function `site`: an injected failure replaces it; a panic becomes
/// `CUDA_ERROR_UNKNOWN`; `errno` is the same after as before. A subscribed simulated CUPTI
/// hears of the call at its entry and exit (`activity`).
pub fn call(site: &'static Site, body: impl FnOnce() -> Result<(), CUresult>) -> CUresult {
    let saved = errno();
    if count_output().is_some() {
        site.count();
    }
    let report = activity::begin(|| site.cname());
    let cfg = config::get();
    let rc = match site.injected(cfg) {
        Some(code) => code,
        None => match catch_unwind(AssertUnwindSafe(body)) {
            Ok(Ok(())) => CUDA_SUCCESS,
            Ok(Err(code)) => code,
            Err(_) => CUDA_ERROR_UNKNOWN,
        },
    };
    if cfg.debug {
        let name = errors::lookup(rc).map_or(std::borrow::Cow::Borrowed("?"), |(n, _)| {
            n.to_string_lossy()
        });
        let clock = match LAST_CLOCK.try_with(Cell::take).ok().flatten() {
            Some((h, Some((start, end)))) => format!(" H={h} op={start}..{end}"),
            Some((h, None)) => format!(" H={h}"),
            None => String::new(),
        };
        debug(&format!("{} -> {rc} {name}{clock}", site.name));
    }
    if report {
        activity::end(site.cname(), rc as u32);
    }
    set_errno(saved);
    rc
}

/// Sites called at least once, when counting.
static COUNTED: AtomicPtr<Site> = AtomicPtr::new(std::ptr::null_mut());

/// `SIMCUDA_COUNT_OUTPUT`: where the per-function call counts go at exit (`<path>.<pid>`).
fn count_output() -> Option<&'static std::ffi::OsStr> {
    static PATH: OnceLock<Option<std::ffi::OsString>> = OnceLock::new();
    PATH.get_or_init(|| std::env::var_os("SIMCUDA_COUNT_OUTPUT").filter(|v| !v.is_empty()))
        .as_deref()
}

/// In a forked child: its count starts from zero (it is another process).
extern "C" fn reset_counts() {
    let mut p = COUNTED.load(Ordering::Acquire);
    while !p.is_null() {
        // SAFETY: sites are statics; the list only ever grows.
        let site = unsafe { &*p };
        site.counted.store(0, Ordering::Relaxed);
        p = site.next.load(Ordering::Acquire);
    }
}

/// Writes `name count` lines, sorted by name, for every function called in this process.
extern "C" fn write_counts() {
    let Some(base) = count_output() else {
        return;
    };
    let mut rows = Vec::new();
    let mut p = COUNTED.load(Ordering::Acquire);
    while !p.is_null() {
        // SAFETY: sites are statics; the list only ever grows.
        let site = unsafe { &*p };
        rows.push((site.name, site.counted.load(Ordering::Relaxed)));
        p = site.next.load(Ordering::Acquire);
    }
    rows.sort();
    let text: String = rows.iter().map(|(n, c)| format!("{n} {c}\n")).collect();
    let mut path = base.to_os_string();
    path.push(format!(".{}", std::process::id()));
    let _ = std::fs::write(path, text);
}

#[used]
#[link_section = ".fini_array"]
static WRITE_COUNTS: extern "C" fn() = write_counts;

/// Writes one line to stderr with write(2) (no stdio locks). Only called when
/// `SIMCUDA_DEBUG=1`.
pub fn debug(msg: &str) {
    let line = format!("simcuda[{}]: {msg}\n", std::process::id());
    // SAFETY: writes `line.len()` bytes from a live buffer to fd 2.
    unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
}

fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() }
}

fn set_errno(v: i32) {
    // SAFETY: as in `errno`.
    unsafe { *libc::__errno_location() = v };
}

// ---- the locked virtual GPU

static STATE: Locked<Option<State>> = Locked::new(None);
static ATFORK: Once = Once::new();
/// Mirrors `State::initialized` for the lock-free `cuCtxGetCurrent`.
pub static INITIALIZED: AtomicBool = AtomicBool::new(false);

extern "C" fn before_fork() {
    STATE.raw_lock();
}

extern "C" fn after_fork() {
    // SAFETY: `before_fork` took the lock on this thread, which is the one that forked.
    unsafe { STATE.raw_unlock() };
}

/// Runs `f` on the virtual GPU under the state lock, after advancing the virtual host clock by
/// `SIMCUDA_HOST_NS_PER_CALL` (with `SIMCUDA_CLOCK=real`, at least to `CLOCK_MONOTONIC` now). Each exported function calls this at most once.
pub fn locked<R>(
    f: impl FnOnce(&mut State, &Caller) -> Result<R, CUresult>,
) -> Result<R, CUresult> {
    ATFORK.call_once(|| {
        // SAFETY: registers plain extern "C" handlers that only take and release STATE's mutex.
        unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork), Some(after_fork)) };
    });
    let cfg = config::get();
    let caller = Caller {
        thread: thread_key(),
        ctx: current(),
    };
    let mut guard = STATE.lock();
    let st = guard.get_or_insert_with(|| State::new(cfg.devices, cfg.copy_bytes_per_us));
    let before = st.host_now;
    st.host_now = st.host_now.saturating_add(cfg.host_ns_per_call);
    if cfg.real_clock {
        // Not behind real time: work queued now starts after the call began.
        st.host_now = st.host_now.max(crate::activity_abi::monotonic_ns());
    }
    st.last_op = None;
    let r = f(st, &caller);
    activity::clock(before, st.host_now);
    if cfg.debug {
        let _ = LAST_CLOCK.try_with(|c| c.set(Some((st.host_now, st.last_op))));
    }
    r
}

/// Runs `f` on the virtual GPU under the state lock without advancing any clock: for the private
/// activity exports, which are not driver calls.
pub fn with_state<R>(f: impl FnOnce(&mut State, &Caller) -> R) -> R {
    ATFORK.call_once(|| {
        // SAFETY: as in `locked`.
        unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork), Some(after_fork)) };
    });
    let cfg = config::get();
    let caller = Caller {
        thread: thread_key(),
        ctx: current(),
    };
    let mut guard = STATE.lock();
    let st = guard.get_or_insert_with(|| State::new(cfg.devices, cfg.copy_bytes_per_us));
    f(st, &caller)
}

/// The host clock after a call, and the `(start, end)` of the operation it queued.
type Clock = (u64, Option<(u64, u64)>);

// ---- per-thread context stack (lock-free)

thread_local! {
    /// `SIMCUDA_DEBUG`: the host clock after the last locked call and its operation, if any.
    static LAST_CLOCK: Cell<Option<Clock>> = const { Cell::new(None) };
    static STACK: RefCell<Vec<Id>> = const { RefCell::new(Vec::new()) };
    static KEY: Cell<u64> = const { Cell::new(0) };
}

static NEXT_THREAD_KEY: AtomicU64 = AtomicU64::new(1);

/// A number for the calling thread, never reused within the process.
pub fn thread_key() -> u64 {
    KEY.try_with(|k| {
        if k.get() == 0 {
            k.set(NEXT_THREAD_KEY.fetch_add(1, Ordering::Relaxed));
        }
        k.get()
    })
    .unwrap_or(0)
}

/// The top of the calling thread's context stack.
pub fn current() -> Option<Id> {
    STACK
        .try_with(|s| s.borrow().last().copied())
        .ok()
        .flatten()
}

pub fn push(ctx: Id) {
    let _ = STACK.try_with(|s| s.borrow_mut().push(ctx));
}

pub fn pop() -> Option<Id> {
    STACK.try_with(|s| s.borrow_mut().pop()).ok().flatten()
}

/// `cuCtxSetCurrent`: replaces the top (pushes onto an empty stack); `None` pops.
pub fn set_current(ctx: Option<Id>) {
    let _ = STACK.try_with(|s| {
        let mut s = s.borrow_mut();
        match ctx {
            Some(c) => match s.last_mut() {
                Some(top) => *top = c,
                None => s.push(c),
            },
            None => {
                s.pop();
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_unknown_and_errno_is_kept() {
        static SITE: Site = Site::new("cuTestOnly");
        set_errno(1234);
        assert_eq!(call(&SITE, || panic!("boom")), CUDA_ERROR_UNKNOWN);
        assert_eq!(errno(), 1234);
        assert_eq!(call(&SITE, || Err(7)), 7);
        assert_eq!(call(&SITE, || Ok(())), CUDA_SUCCESS);
    }

    #[test]
    fn context_stack() {
        std::thread::spawn(|| {
            assert_eq!(current(), None);
            push(1);
            push(2);
            assert_eq!(current(), Some(2));
            set_current(Some(3));
            assert_eq!(pop(), Some(3));
            assert_eq!(current(), Some(1));
            set_current(None);
            assert_eq!(current(), None);
            set_current(Some(4));
            assert_eq!(current(), Some(4));
            assert_ne!(thread_key(), 0);
        })
        .join()
        .unwrap();
    }
}
