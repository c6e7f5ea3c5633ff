//! simcupti's state and what it does with each driver call simcuda reports: correlation ids,
//! callback-API callbacks, and activity records written into the client's buffers.
//!
//! All of it sits behind one `pthread_mutex_t` (`lock::Locked`, shared with simcuda), made
//! fork-safe by `pthread_atfork`. The client's buffer-request callback runs with that lock held;
//! its other callbacks (buffer completed, callback API, timestamp) run without it.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Once, OnceLock};

use crate::buffer::Buffer;
use crate::layout::*;
use crate::lock::Locked;
use crate::pcsampling::PcSampling;
use crate::profiling::Profiling;
use crate::records::{self, Times};
use crate::sass_metrics::SassMetrics;
use crate::sim::*;
use crate::worker;

pub type RequestFn = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
pub type CompleteFn = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
pub type TimestampFn = unsafe extern "C" fn() -> u64;
/// `CUpti_CallbackFunc`.
pub type CallbackFn = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);

/// `CUPTI_DRIVER_TRACE_CBID_SIZE` of CUPTI 13.0: driver callback ids are 1..CBID_SIZE.
pub const CBID_SIZE: u32 = 807;

/// simcuda's private exports (activity_abi.rs).
pub struct Sim {
    subscribe: unsafe extern "C" fn(u32, Option<SimCallback>) -> c_int,
    host_now: unsafe extern "C" fn() -> u64,
    stream_id: unsafe extern "C" fn(*mut c_void, *mut c_void, u8, *mut u32) -> u32,
    context_id: unsafe extern "C" fn(*mut c_void, *mut u32) -> u32,
    device_count: unsafe extern "C" fn() -> c_int,
}

/// simcuda, found in the process's `libcuda.so.1` (loaded if it is not yet).
pub fn sim() -> Option<&'static Sim> {
    static SIM: OnceLock<Option<Sim>> = OnceLock::new();
    SIM.get_or_init(|| {
        let name = c"libcuda.so.1";
        // SAFETY: dlopen with a valid C string.
        let mut h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if h.is_null() {
            // SAFETY: as above.
            h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW) };
        }
        if h.is_null() {
            return None;
        }
        let sym = |s: &CStr| {
            // SAFETY: dlsym on a live handle with a valid C string.
            let p = unsafe { libc::dlsym(h, s.as_ptr()) };
            (!p.is_null()).then_some(p)
        };
        let (a, b, c, d, e) = (
            sym(c"simcuda_activity_subscribe")?,
            sym(c"simcuda_host_now")?,
            sym(c"simcuda_stream_id")?,
            sym(c"simcuda_context_id")?,
            sym(c"simcuda_device_count")?,
        );
        type Subscribe = unsafe extern "C" fn(u32, Option<SimCallback>) -> c_int;
        type HostNow = unsafe extern "C" fn() -> u64;
        type StreamId = unsafe extern "C" fn(*mut c_void, *mut c_void, u8, *mut u32) -> u32;
        type ContextId = unsafe extern "C" fn(*mut c_void, *mut u32) -> u32;
        type DeviceCount = unsafe extern "C" fn() -> c_int;
        // SAFETY: simcuda's exports, with the signatures of activity_abi.rs.
        unsafe {
            Some(Sim {
                subscribe: std::mem::transmute::<*mut c_void, Subscribe>(a),
                host_now: std::mem::transmute::<*mut c_void, HostNow>(b),
                stream_id: std::mem::transmute::<*mut c_void, StreamId>(c),
                context_id: std::mem::transmute::<*mut c_void, ContextId>(d),
                device_count: std::mem::transmute::<*mut c_void, DeviceCount>(e),
            })
        }
    })
    .as_ref()
}

impl Sim {
    pub fn host_now(&self) -> u64 {
        // SAFETY: a plain simcuda export.
        unsafe { (self.host_now)() }
    }

    /// # Safety
    /// As `cuptiGetStreamIdEx`: `id` valid for a write.
    pub unsafe fn stream_id(
        &self,
        ctx: *mut c_void,
        stream: *mut c_void,
        pt: u8,
        id: *mut u32,
    ) -> u32 {
        // SAFETY: the caller's contract.
        unsafe { (self.stream_id)(ctx, stream, pt, id) }
    }

    /// `SIMCUDA_DEVICES`.
    pub fn device_count(&self) -> i32 {
        // SAFETY: a plain simcuda export.
        unsafe { (self.device_count)() }
    }

    /// # Safety
    /// As `cuptiGetContextId`: `id` valid for a write.
    pub unsafe fn context_id(&self, ctx: *mut c_void, id: *mut u32) -> u32 {
        // SAFETY: the caller's contract.
        unsafe { (self.context_id)(ctx, id) }
    }
}

/// The one callback-API subscriber (CUPTI 13.0 allows one).
pub struct Subscriber {
    pub callback: CallbackFn,
    pub userdata: usize,
    /// Enabled driver callback ids.
    pub driver: Vec<bool>,
    /// Enabled resource callback ids (`CUpti_CallbackIdResource`).
    pub resource: Vec<bool>,
    /// Enabled runtime callback ids (`CUpti_runtime_api_trace_cbid`).
    pub runtime: Vec<bool>,
}

pub struct State {
    pub request: Option<RequestFn>,
    pub complete: Option<CompleteFn>,
    pub timestamp: Option<TimestampFn>,
    /// Enabled activity kinds (bit `kind`).
    enabled: u64,
    /// Virtual time 0 on the CUPTI clock, read at the first enable.
    pub t0: Option<u64>,
    /// DRIVER records were enabled at some point: every call gets a correlation id.
    driver_ever: bool,
    /// Subscribed to simcuda.
    attached: bool,
    current: Option<Buffer>,
    full: VecDeque<Buffer>,
    next_correlation: u32,
    pub subscriber: Option<Subscriber>,
    /// Interned kernel names (leaked: records point to them for the life of the process).
    names: BTreeMap<Vec<u8>, usize>,
    /// The id of the next function record, from 1.
    next_function_id: u32,
    /// The PC Sampling API's state.
    pub pcs: PcSampling,
    /// The profiler's state (host objects, range profilers).
    pub prof: Profiling,
    /// The SASS Metric API's state.
    pub sass: SassMetrics,
}

/// The client hands over zeroed buffers (`CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER`).
pub static CLIENT_ZEROES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

static STATE: Locked<State> = Locked::new(State {
    request: None,
    complete: None,
    timestamp: None,
    enabled: 0,
    t0: None,
    driver_ever: false,
    attached: false,
    current: None,
    full: VecDeque::new(),
    next_correlation: 1,
    subscriber: None,
    names: BTreeMap::new(),
    next_function_id: 1,
    pcs: PcSampling::new(),
    prof: Profiling::new(),
    sass: SassMetrics::new(),
});

/// `CUpti_ExternalCorrelationKind` values are below this.
const EXTERNAL_KINDS: usize = CUPTI_EXTERNAL_CORRELATION_KIND_SIZE as usize;

/// Records dropped for want of a buffer, since the last `cuptiActivityGetNumDroppedRecords`.
pub static DROPPED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread is running one of the client's callbacks (or is the delivery thread): driver
    /// calls it makes are not reported.
    static IN_CLIENT: Cell<bool> = const { Cell::new(false) };
    /// The external correlation id stacks, by `CUpti_ExternalCorrelationKind`.
    static EXTERNAL: RefCell<[Vec<u64>; EXTERNAL_KINDS]> =
        const { RefCell::new([const { Vec::new() }; EXTERNAL_KINDS]) };
    /// The last correlation id given to a call on this thread (0: none yet): what a stream
    /// record made by a call without an id of its own carries.
    static LAST_CORRELATION: Cell<u32> = const { Cell::new(0) };
    /// `correlationData` of the calls in progress on this thread (innermost last); boxed so
    /// that the address a callback got stays put while nested calls push more.
    #[allow(clippy::vec_box)]
    static CORRELATION_DATA: RefCell<Vec<Box<u64>>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` as client code: driver calls made meanwhile on this thread are not reported.
pub fn in_client<R>(f: impl FnOnce() -> R) -> R {
    let was = IN_CLIENT.try_with(|c| c.replace(true)).unwrap_or(false);
    let r = f();
    let _ = IN_CLIENT.try_with(|c| c.set(was));
    r
}

pub fn is_in_client() -> bool {
    IN_CLIENT.try_with(Cell::get).unwrap_or(true)
}

extern "C" fn fork_prepare() {
    STATE.raw_lock();
    worker::fork_prepare();
}

extern "C" fn fork_parent() {
    worker::fork_parent();
    // SAFETY: fork_prepare took the lock on this thread.
    unsafe { STATE.raw_unlock() };
}

extern "C" fn fork_child() {
    worker::fork_child();
    // SAFETY: as in fork_parent.
    unsafe { STATE.raw_unlock() };
}

/// Runs `f` on the state under the lock.
pub fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    static ATFORK: Once = Once::new();
    ATFORK.call_once(|| {
        // SAFETY: registers plain extern "C" handlers that only take and release the locks.
        unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child)) };
    });
    let mut guard = STATE.lock();
    f(&mut guard)
}

/// Whether simcuda's host clock follows real time (`SIMCUDA_CLOCK=real`, read once).
pub fn real_clock() -> bool {
    static REAL: OnceLock<bool> = OnceLock::new();
    *REAL.get_or_init(|| {
        std::env::var(crate::sim::SIMCUDA_CLOCK)
            .ok()
            .and_then(|v| crate::sim::real_clock(&v))
            .unwrap_or(false)
    })
}

/// CLOCK_REALTIME, CUPTI's default clock on Linux, in ns.
pub fn realtime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// The driver callback id of an exported function name.
pub fn cbid_of(name: &[u8]) -> Option<u32> {
    DRIVER_API_CBIDS
        .binary_search_by(|(n, _)| n.as_bytes().cmp(name))
        .ok()
        .map(|i| DRIVER_API_CBIDS[i].1)
}

/// The name of a driver callback id, NUL-terminated.
pub fn cbid_name(cbid: u32) -> Option<&'static CStr> {
    static NAMES: OnceLock<BTreeMap<u32, CString>> = OnceLock::new();
    NAMES
        .get_or_init(|| {
            DRIVER_API_CBIDS
                .iter()
                .filter_map(|&(n, id)| Some((id, CString::new(n).ok()?)))
                .collect()
        })
        .get(&cbid)
        .map(CString::as_c_str)
}

/// Driver functions whose calls queue GPU work, which CUPTI always gives a correlation id.
fn queues_gpu_work(name: &[u8]) -> bool {
    [&b"cuLaunch"[..], b"cuMemcpy", b"cuMemset"]
        .iter()
        .any(|p| name.starts_with(p))
}

impl State {
    /// Subscribed to simcuda.
    pub fn attached(&self) -> bool {
        self.attached
    }

    /// The next correlation id.
    pub fn take_correlation(&mut self) -> u32 {
        let c = self.next_correlation;
        self.next_correlation = c.wrapping_add(1).max(1);
        let _ = LAST_CORRELATION.try_with(|l| l.set(c));
        c
    }

    pub fn on(&self, kind: u32) -> bool {
        kind < 64 && self.enabled & (1 << kind) != 0
    }

    /// While memory or synchronization records are enabled, every driver call gets a
    /// correlation id (as CUPTI 13.0 gave one to `cuStreamCreate`, `cuEventCreate`,
    /// `cuEventRecord` with both enabled).
    fn every_call_correlated(&self) -> bool {
        self.on(CUPTI_ACTIVITY_KIND_MEMORY2) || self.on(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)
    }

    /// `cuptiActivityEnable`.
    pub fn enable(&mut self, kind: u32) -> u32 {
        if kind == CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT {
            return CUPTI_ERROR_NOT_COMPATIBLE;
        }
        // CUPTI 13.0 refuses it: module records are not made by the activity API.
        if kind == CUPTI_ACTIVITY_KIND_MODULE {
            return CUPTI_ERROR_INVALID_KIND;
        }
        // Kernel activity once SASS metrics are enabled: refused, as CUPTI 13.0 on an H100; its
        // enabling arms the contexts that exist for the SASS metrics (sass_metrics.rs).
        if kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || kind == CUPTI_ACTIVITY_KIND_KERNEL {
            if self.sass.any_enabled() {
                return CUPTI_ERROR_NOT_COMPATIBLE;
            }
            self.sass.kernel_activity(true);
        }
        let other = match kind {
            CUPTI_ACTIVITY_KIND_KERNEL => Some(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
            CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL => Some(CUPTI_ACTIVITY_KIND_KERNEL),
            _ => None,
        };
        if other.is_some_and(|o| self.on(o)) {
            return CUPTI_ERROR_NOT_COMPATIBLE;
        }
        if let Err(e) = self.attach() {
            return e;
        }
        if self.t0.is_none() {
            // Read before the client's clock, so that T0 maps no time earlier than it was.
            let monotonic_now = crate::sim::monotonic_ns();
            let client_now = match self.timestamp {
                // SAFETY: the client's timestamp callback.
                Some(f) => in_client(|| unsafe { f() }),
                None => realtime_ns(),
            };
            self.t0 = Some(if real_clock() {
                // simcuda's host clock follows CLOCK_MONOTONIC: virtual ns are monotonic ns.
                client_now.wrapping_sub(monotonic_now)
            } else {
                client_now
            });
        }
        self.enabled |= 1 << kind;
        if kind == CUPTI_ACTIVITY_KIND_DRIVER {
            self.driver_ever = true;
        }
        CUPTI_SUCCESS
    }

    pub fn disable(&mut self, kind: u32) {
        if kind < 64 {
            self.enabled &= !(1 << kind);
        }
        if kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || kind == CUPTI_ACTIVITY_KIND_KERNEL {
            self.sass.kernel_activity(false);
        }
    }

    /// Subscribes to simcuda's calls, once.
    pub fn attach(&mut self) -> Result<(), u32> {
        if self.attached {
            return Ok(());
        }
        let sim = sim().ok_or(CUPTI_ERROR_NOT_INITIALIZED)?;
        // SAFETY: `on_sim_call` has the SimCallback signature and lives forever.
        if unsafe { (sim.subscribe)(SIMCUDA_ACTIVITY_VERSION, Some(on_sim_call)) } != 0 {
            return Err(CUPTI_ERROR_NOT_INITIALIZED);
        }
        self.attached = true;
        Ok(())
    }

    /// `cuptiFinalize` after its flush: forgets everything but the correlation counter.
    pub fn finalize(&mut self) {
        if let (true, Some(sim)) = (self.attached, sim()) {
            // SAFETY: unsubscribes.
            unsafe { (sim.subscribe)(SIMCUDA_ACTIVITY_VERSION, None) };
        }
        self.attached = false;
        self.enabled = 0;
        self.t0 = None;
        self.driver_ever = false;
        self.request = None;
        self.complete = None;
        self.timestamp = None;
        self.subscriber = None;
        self.current = None;
        self.full.clear();
        DROPPED.store(0, Ordering::Relaxed);
    }

    fn time(&self, virtual_ns: u64) -> u64 {
        // T0 is a difference of clocks with SIMCUDA_CLOCK=real, and may wrap.
        self.t0.unwrap_or(0).wrapping_add(virtual_ns)
    }

    fn intern(&mut self, name: &[u8]) -> *const c_char {
        if let Some(&p) = self.names.get(name) {
            return p as *const c_char;
        }
        let c = CString::new(name).unwrap_or_default().into_raw();
        self.names.insert(name.to_vec(), c as usize);
        c
    }

    /// Asks the client for a buffer; `false` if it gave none.
    fn request_buffer(&mut self) -> bool {
        let Some(request) = self.request else {
            return false;
        };
        let (mut ptr, mut size, mut max) = (std::ptr::null_mut::<u8>(), 0usize, 0usize);
        // SAFETY: the client's callback with valid out-pointers.
        in_client(|| unsafe { request(&mut ptr, &mut size, &mut max) });
        if ptr.is_null() || size == 0 {
            return false;
        }
        let zero = !CLIENT_ZEROES.load(std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the client handed over `size` bytes at `ptr` until we complete the buffer.
        self.current = Some(unsafe { Buffer::new(ptr, size, max, zero) });
        true
    }

    /// Appends a record to the current buffer, taking a new buffer when it is full; counts it
    /// dropped when the client gives no buffer or one too small for it.
    fn write(&mut self, rec: &[u8], gpu: Option<(u32, u64)>) {
        for _ in 0..2 {
            if self.current.is_none() && !self.request_buffer() {
                break;
            }
            let Some(cur) = self.current.as_mut() else {
                break;
            };
            if cur.fits(rec.len()) {
                cur.append(rec, gpu);
                if cur.at_max() {
                    self.full.extend(self.current.take());
                }
                return;
            }
            if cur.records == 0 {
                break; // a fresh buffer too small for this record: it stays, for smaller ones
            }
            self.full.extend(self.current.take());
        }
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }

    /// The buffers ready to be handed back, in order (with `SIMCUPTI_HOLD_CURRENT=1`, a flush
    /// that is not forced keeps the buffer being filled, as CUPTI may): full buffers whose operations have all
    /// ended by virtual time `now`, up to the first that has not; with `flush`, then the current
    /// buffer too if it is ready; with `force`, all of them, records of unfinished operations
    /// getting zero timestamps.
    fn take_ready(&mut self, now: u64, flush: bool, force: bool) -> Vec<(CompleteFn, Buffer)> {
        let mut out = Vec::new();
        let Some(complete) = self.complete else {
            return out;
        };
        while let Some(front) = self.full.front() {
            if !force && !front.complete(now) {
                return out;
            }
            out.extend(self.full.pop_front().map(|b| (complete, b)));
        }
        if flush && (force || !holds_current()) {
            if let Some(cur) = &self.current {
                if force || cur.complete(now) {
                    out.extend(self.current.take().map(|b| (complete, b)));
                }
            }
        }
        for (_, b) in &mut out {
            b.finish(now);
        }
        out
    }

    /// The records of one finished call (see README.md, "Records").
    /// `own`: the call's own correlation id (its driver record's); its GPU work carries
    /// `call.correlation_id` (the runtime call's when made inside one).
    fn record_call(&mut self, call: &SimCall, name: &[u8], own: u32) {
        if self.t0.is_none() {
            return;
        }
        let corr = call.correlation_id;
        if own != 0
            && self.on(CUPTI_ACTIVITY_KIND_DRIVER)
            && self.on(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)
        {
            let tops: Vec<(u32, u64)> = EXTERNAL
                .try_with(|e| {
                    e.borrow()
                        .iter()
                        .enumerate()
                        .filter_map(|(k, s)| Some((k as u32, *s.last()?)))
                        .collect()
                })
                .unwrap_or_default();
            for (kind, id) in tops {
                self.write(&records::external_correlation(kind, id, own), None);
            }
        }
        // SAFETY: simcuda's op is valid during the callback.
        if let Some(op) = unsafe { call.op.as_ref() } {
            let t = if op.kind == SIMOP_KERNEL && self.prof.take_replayed() {
                Times { start: 0, end: 0 }
            } else {
                Times {
                    start: self.time(op.start_ns),
                    end: self.time(op.end_ns),
                }
            };
            let rec = match op.kind {
                SIMOP_KERNEL => {
                    let kind = if self.on(CUPTI_ACTIVITY_KIND_KERNEL) {
                        Some(CUPTI_ACTIVITY_KIND_KERNEL)
                    } else if self.on(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
                        Some(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
                    } else {
                        None
                    };
                    kind.map(|k| {
                        // SAFETY: a kernel op's name is a NUL-terminated string (or NULL).
                        let kname = if op.name.is_null() {
                            &[][..]
                        } else {
                            unsafe { CStr::from_ptr(op.name) }.to_bytes()
                        };
                        let interned = self.intern(kname);
                        (k, records::kernel(k, op, t, corr, interned))
                    })
                }
                SIMOP_MEMCPY if self.on(CUPTI_ACTIVITY_KIND_MEMCPY) => {
                    Some((CUPTI_ACTIVITY_KIND_MEMCPY, records::memcpy(op, t, corr)))
                }
                SIMOP_MEMSET if self.on(CUPTI_ACTIVITY_KIND_MEMSET) => {
                    Some((CUPTI_ACTIVITY_KIND_MEMSET, records::memset(op, t, corr)))
                }
                SIMOP_ALLOC | SIMOP_FREE if self.on(CUPTI_ACTIVITY_KIND_MEMORY2) => {
                    // SAFETY: getpid cannot fail.
                    let pid = unsafe { libc::getpid() } as u32;
                    let rec = records::memory(op, t, corr, pid);
                    Some((CUPTI_ACTIVITY_KIND_MEMORY2, rec))
                }
                SIMOP_SYNC if self.on(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) => {
                    let rec = records::synchronization(op, t, corr, call.result);
                    Some((CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, rec))
                }
                SIMOP_CONTEXT | SIMOP_STREAM | SIMOP_MODULE => {
                    self.record_resources(op, corr);
                    None
                }
                _ => None,
            };
            match rec {
                // Host-side records are complete when written.
                Some((CUPTI_ACTIVITY_KIND_MEMORY2 | CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, rec)) => {
                    self.write(&rec, None)
                }
                Some((kind, rec)) => self.write(&rec, Some((kind, op.end_ns))),
                None => {}
            }
        }
        if own != 0 && self.on(CUPTI_ACTIVITY_KIND_DRIVER) {
            if let Some(cbid) = cbid_of(name) {
                let t = Times {
                    start: self.time(call.start_ns),
                    end: self.time(call.end_ns),
                };
                // SAFETY: getpid and pthread_self cannot fail.
                let (pid, tid) = unsafe { (libc::getpid() as u32, libc::pthread_self() as u32) };
                let rec = records::driver_api(cbid, t, pid, tid, own, call.result);
                self.write(&rec, None);
            }
        }
    }
}

impl State {
    /// The records of a context or stream created, or a module loaded (see README.md,
    /// "Records"): complete when written.
    fn record_resources(&mut self, op: &SimOp, corr: u32) {
        // A call without an id of its own: CUPTI writes the thread's last one.
        let stream_corr = if corr != 0 {
            corr
        } else {
            LAST_CORRELATION.try_with(Cell::get).unwrap_or(0)
        };
        match op.kind {
            SIMOP_CONTEXT => {
                if self.on(CUPTI_ACTIVITY_KIND_STREAM) {
                    let null = CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NULL;
                    let (ctx, id) = (op.context_id, op.stream_id);
                    let rec = records::stream(ctx, id, 0, null, stream_corr);
                    self.write(&rec, None);
                }
                if self.on(CUPTI_ACTIVITY_KIND_CONTEXT) {
                    self.write(&records::context(op), None);
                }
            }
            SIMOP_STREAM if self.on(CUPTI_ACTIVITY_KIND_STREAM) => {
                let flag = if op.stream_flags & 1 != 0 {
                    CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NON_BLOCKING
                } else {
                    CUPTI_ACTIVITY_STREAM_CREATE_FLAG_DEFAULT
                };
                let (ctx, id) = (op.context_id, op.stream_id);
                let rec = records::stream(ctx, id, op.priority, flag, stream_corr);
                self.write(&rec, None);
            }
            SIMOP_MODULE if self.on(CUPTI_ACTIVITY_KIND_FUNCTION) && !op.functions.is_null() => {
                // SAFETY: simcuda's array of `function_count` functions, valid during the call.
                let functions =
                    unsafe { std::slice::from_raw_parts(op.functions, op.function_count as usize) };
                for f in functions {
                    // SAFETY: a function's name is NUL-terminated.
                    let name = self.intern(unsafe { CStr::from_ptr(f.name) }.to_bytes());
                    let id = self.next_function_id;
                    self.next_function_id = id.wrapping_add(1).max(1);
                    let rec = records::function(id, op, f.index, name);
                    self.write(&rec, None);
                }
            }
            _ => {}
        }
    }
}

/// The subscriber's callback for a resource callback id, if it is enabled.
fn resource_callback(st: &State, cbid: u32) -> Option<(CallbackFn, usize)> {
    let s = st.subscriber.as_ref()?;
    (s.resource.get(cbid as usize) == Some(&true)).then_some((s.callback, s.userdata))
}

/// `CUpti_ResourceData` (and a module's `CUpti_ModuleResourceData`), laid out with the
/// generated offsets.
#[repr(C, align(8))]
struct ResourceData([u8; resource_data::SIZE]);
#[repr(C, align(8))]
struct ModuleResourceData([u8; module_resource_data::SIZE]);

/// Calls the subscriber's callback for a context created (`CUPTI_CBID_RESOURCE_CONTEXT_CREATED`)
/// or about to be destroyed (`CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING`): a
/// `CUpti_ResourceData` with the context's handle, `resourceDescriptor` NULL.
fn context_callback(cb: (CallbackFn, usize), cbid: u32, context: *mut c_void) {
    use crate::layout::resource_data as r;
    let mut data = ResourceData([0; r::SIZE]);
    data.0[r::CONTEXT..r::CONTEXT + r::CONTEXT_LEN]
        .copy_from_slice(&(context as u64).to_le_bytes()[..r::CONTEXT_LEN]);
    // SAFETY: the subscriber's callback with CUPTI's arguments; `data` outlives it.
    in_client(|| unsafe {
        (cb.0)(
            cb.1 as *mut c_void,
            CUPTI_CB_DOMAIN_RESOURCE,
            cbid,
            data.0.as_ptr().cast(),
        )
    });
}

/// Calls the subscriber's callback for a module loaded (`CUPTI_CBID_RESOURCE_MODULE_LOADED`) or
/// about to be unloaded (`CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING`, `cbid`): the module's id,
/// and, for a load, its image.
fn module_callback(cb: (CallbackFn, usize), cbid: u32, op: &SimOp) {
    use crate::layout::{module_resource_data as m, resource_data as r};
    let put = |b: &mut [u8], at: usize, len: usize, v: u64| {
        b[at..at + len].copy_from_slice(&v.to_le_bytes()[..len]);
    };
    let mut module = ModuleResourceData([0; m::SIZE]);
    put(
        &mut module.0,
        m::MODULE_ID,
        m::MODULE_ID_LEN,
        u64::from(op.module_id),
    );
    put(
        &mut module.0,
        m::CUBIN_SIZE,
        m::CUBIN_SIZE_LEN,
        op.image_size,
    );
    if op.kind == SIMOP_MODULE {
        put(&mut module.0, m::P_CUBIN, m::P_CUBIN_LEN, op.image as u64);
    }
    let mut data = ResourceData([0; r::SIZE]);
    put(&mut data.0, r::CONTEXT, r::CONTEXT_LEN, op.context as u64);
    let descriptor = module.0.as_ptr() as u64;
    put(
        &mut data.0,
        r::RESOURCE_DESCRIPTOR,
        r::RESOURCE_DESCRIPTOR_LEN,
        descriptor,
    );
    // SAFETY: the subscriber's callback with CUPTI's arguments; `data` and `module` outlive it.
    in_client(|| unsafe {
        (cb.0)(
            cb.1 as *mut c_void,
            CUPTI_CB_DOMAIN_RESOURCE,
            cbid,
            data.0.as_ptr().cast(),
        )
    });
}

/// Hands the ready buffers to the delivery thread (called with the state locked, so buffers
/// are delivered in the order they were completed); returns the sequence number to wait for.
fn deliver(st: &mut State, flush: bool, force: bool) -> u64 {
    let now = sim().map_or(0, Sim::host_now);
    worker::enqueue(st.take_ready(now, flush, force))
}

/// `cuptiActivityFlushAll`: hands back every buffer whose operations have ended (`force`: every
/// buffer) and waits until the client has received them.
pub fn flush_all(force: bool) {
    let seq = with(|st| deliver(st, true, force));
    worker::wait(seq);
}

/// The external-correlation stacks of the calling thread.
pub fn with_external<R>(f: impl FnOnce(&mut [Vec<u64>]) -> R) -> Option<R> {
    EXTERNAL.try_with(|e| f(&mut e.borrow_mut()[..])).ok()
}

/// `CUpti_CallbackData`, laid out with the generated offsets.
#[repr(C, align(8))]
pub struct CallbackData([u8; callback_data::SIZE]);

impl CallbackData {
    pub fn zeroed() -> CallbackData {
        CallbackData([0; callback_data::SIZE])
    }

    pub fn as_ptr(&self) -> *const c_void {
        self.0.as_ptr().cast()
    }

    pub fn put(&mut self, at: usize, len: usize, v: u64) {
        self.0[at..at + len].copy_from_slice(&v.to_le_bytes()[..len]);
    }
}

/// `SIMCUPTI_HOLD_CURRENT=1`: a flush that is not forced keeps the buffer being filled.
fn holds_current() -> bool {
    static V: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *V.get_or_init(|| std::env::var_os("SIMCUPTI_HOLD_CURRENT").is_some_and(|v| v == "1"))
}

/// Calls the subscriber's callback for a driver call, at entry or exit.
fn callback(cb: (CallbackFn, usize), cbid: u32, call: &SimCall, slot: *mut u64, result: &u32) {
    use crate::layout::callback_data as d;
    let mut data = CallbackData([0; d::SIZE]);
    let site = if call.site == SIMCALL_ENTER {
        CUPTI_API_ENTER
    } else {
        CUPTI_API_EXIT
    };
    let name = cbid_name(cbid).map_or(std::ptr::null(), CStr::as_ptr);
    data.put(d::CALLBACK_SITE, d::CALLBACK_SITE_LEN, u64::from(site));
    data.put(d::FUNCTION_NAME, d::FUNCTION_NAME_LEN, name as u64);
    // Set at entry too, as CUPTI does (what it points to is meaningful only at exit).
    let ret = result as *const u32 as u64;
    data.put(d::FUNCTION_RETURN_VALUE, d::FUNCTION_RETURN_VALUE_LEN, ret);
    // SAFETY: simcuda's op is valid during the callback; a kernel's name is NUL-terminated.
    if let Some(op) = unsafe { call.op.as_ref() }.filter(|op| op.kind == SIMOP_KERNEL) {
        data.put(d::SYMBOL_NAME, d::SYMBOL_NAME_LEN, op.name as u64);
    }
    data.put(d::CONTEXT, d::CONTEXT_LEN, call.context as u64);
    data.put(
        d::CONTEXT_UID,
        d::CONTEXT_UID_LEN,
        u64::from(call.context_id),
    );
    data.put(d::CORRELATION_DATA, d::CORRELATION_DATA_LEN, slot as u64);
    data.put(
        d::CORRELATION_ID,
        d::CORRELATION_ID_LEN,
        u64::from(call.correlation_id),
    );
    // SAFETY: the subscriber's callback with CUPTI's arguments; `data` outlives the call.
    in_client(|| unsafe {
        (cb.0)(
            cb.1 as *mut c_void,
            CUPTI_CB_DOMAIN_DRIVER_API,
            cbid,
            data.0.as_ptr().cast(),
        )
    });
}

/// A context is about to be destroyed (simcuda's notice, during `cuCtxDestroy*` or the last
/// `cuDevicePrimaryCtxRelease*`, the context still alive): the resource callback
/// `CONTEXT_DESTROY_STARTING`, if enabled, then PC sampling on it is disabled (as
/// `cuptiPCSamplingDisable`, if still enabled).
fn context_destroying(op: &SimOp) {
    let cb = with(|st| resource_callback(st, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING));
    if let Some(cb) = cb {
        context_callback(cb, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, op.context);
    }
    // SAFETY: a configured sampling buffer is the client's until sampling is disabled.
    with(|st| unsafe { st.pcs.context_destroyed(op.context_id) });
    with(|st| st.prof.context_destroyed(op.context_id));
}

/// simcuda's callback (`SimCallback`): every driver call, at entry and at exit.
unsafe extern "C" fn on_sim_call(call: *const SimCall) -> u32 {
    if is_in_client() || call.is_null() {
        return 0;
    }
    std::panic::catch_unwind(|| {
        // SAFETY: simcuda's SimCall is valid during the callback.
        let call = unsafe { &*call };
        // SAFETY: the exported function's name, NUL-terminated.
        let name = unsafe { CStr::from_ptr(call.name) }.to_bytes();
        let cbid = cbid_of(name);
        if call.site == SIMCALL_ENTER {
            let (corr, cb) = with(|st| {
                let cb = match (&st.subscriber, cbid) {
                    (Some(s), Some(c)) if s.driver.get(c as usize) == Some(&true) => {
                        Some((s.callback, s.userdata))
                    }
                    _ => None,
                };
                let gets_id = st.attached
                    && (queues_gpu_work(name)
                        || st.driver_ever
                        || st.every_call_correlated()
                        || cb.is_some());
                let corr = if gets_id { st.take_correlation() } else { 0 };
                (corr, cb)
            });
            let slot = CORRELATION_DATA
                .try_with(|s| {
                    let mut s = s.borrow_mut();
                    s.push(Box::new(0));
                    s.last_mut()
                        .map_or(std::ptr::null_mut(), |b| &mut **b as *mut u64)
                })
                .unwrap_or(std::ptr::null_mut());
            // Its GPU work carries the runtime call's id when it is made inside one.
            let work = crate::runtime::driver_enter(corr);
            if let (Some(cb), Some(cbid)) = (cb, cbid) {
                let entered = SimCall {
                    correlation_id: corr,
                    ..*call
                };
                callback(cb, cbid, &entered, slot, &0);
            }
            work
        } else if call.site == SIMCALL_NOTICE {
            // SAFETY: simcuda's op is valid during the callback.
            if let Some(op) =
                unsafe { call.op.as_ref() }.filter(|op| op.kind == SIMOP_CONTEXT_DESTROY)
            {
                context_destroying(op);
            }
            0
        } else {
            let mut slot = CORRELATION_DATA
                .try_with(|s| s.borrow_mut().pop())
                .ok()
                .flatten();
            let own = crate::runtime::driver_exit(call.correlation_id);
            let own_call = SimCall {
                correlation_id: own,
                ..*call
            };
            // The records first (CUPTI writes a GPU record during the call), then a module's
            // resource callback (loaded, or unload starting), then the driver callback.
            // SAFETY: simcuda's op is valid during the callback.
            let op = unsafe { call.op.as_ref() };
            let (cb, loaded) = with(|st| {
                if let Some(op) = op {
                    st.pcs.observe(op);
                    st.prof.observe(op);
                    let pcs = &st.pcs;
                    st.sass.observe(op, |ctx, name| pcs.function_of(ctx, name));
                }
                st.record_call(call, name, own);
                deliver(st, false, false);
                let loaded = op.and_then(|op| {
                    let cbid = match op.kind {
                        SIMOP_CONTEXT => CUPTI_CBID_RESOURCE_CONTEXT_CREATED,
                        SIMOP_MODULE => CUPTI_CBID_RESOURCE_MODULE_LOADED,
                        SIMOP_MODULE_UNLOAD => CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING,
                        _ => return None,
                    };
                    resource_callback(st, cbid).map(|cb| (cb, cbid))
                });
                let cb = match (&st.subscriber, cbid) {
                    (Some(s), Some(c)) if s.driver.get(c as usize) == Some(&true) => {
                        Some((s.callback, s.userdata))
                    }
                    _ => None,
                };
                (cb, loaded)
            });
            match (loaded, op) {
                (Some((cb, cbid)), Some(op)) if op.kind == SIMOP_CONTEXT => {
                    context_callback(cb, cbid, op.context)
                }
                (Some((cb, cbid)), Some(op)) => module_callback(cb, cbid, op),
                _ => {}
            }
            if let (Some(cb), Some(cbid)) = (cb, cbid) {
                let p = slot
                    .as_mut()
                    .map_or(std::ptr::null_mut(), |b| &mut **b as *mut u64);
                callback(cb, cbid, &own_call, p, &call.result);
            }
            0
        }
    })
    .unwrap_or(0)
}
