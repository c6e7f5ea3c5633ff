//! CUPTI's state in this process, as one value ([`Cupti`]) behind the one static that CUPTI's
//! callbacks and the program's CUPTI calls reach it through ([`CUPTI`]).
//!
//! Every field keeps the synchronization it had as a static of its own: atomics where the
//! program's threads read it inside their launch calls (no lock there), locks where only the
//! worker, rare callbacks (module loads, context creation) or the program's own CUPTI calls
//! touch it. The value is built at compile time (`const`), so reaching it costs no more than
//! reaching a static, and nothing is allocated until GPU activity starts.

use super::api::Api;
use super::clockmap::ClockMap;
use super::pcsampling::data::PcState;
use super::profiler::launch::Launches;
use super::profiler::range_state::Ranges;
use super::source_counters::state::ScState;
use crate::{diag, thread::internal};
use rtrace_format::{DeviceInfo, ModuleImage, ModuleRecord};
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize};
use std::sync::{Mutex, Once, OnceLock};

/// CUPTI's state. The one instance is [`CUPTI`].
pub(super) struct Cupti {
    /// CUPTI's entry points, loaded when GPU activity starts.
    pub api: OnceLock<Api>,
    /// [`OFF`], [`ON`] or [`DONE`].
    pub state: AtomicU8,
    /// GPU activity is enabled once: after the program's first successful `cuInit`, or at its
    /// first CUPTI call.
    pub enable: Once,
    /// What the `atexit` handler runs: the session's drain-and-finish sequence for CUPTI going
    /// away (set once, at start-up).
    pub exit_sequence: OnceLock<fn()>,
    /// The process that enabled CUPTI: a forked child inherits rtrace's memory (and its
    /// `atexit` handler) but not CUPTI's threads, and must never touch the parent's collection.
    pub enabled_by: AtomicU32,
    /// CUPTI's subscriber handle for rtrace's API callbacks (null: none).
    pub subscriber: AtomicPtr<c_void>,
    /// Status lines for the trace (GPU activity on, or why it is off), taken by the worker.
    pub notices: Mutex<Vec<String>>,
    /// The activity buffers CUPTI fills.
    pub buffers: Buffers,
    /// Devices and modules, for the worker to write.
    pub found: Found,
    /// The program's own CUPTI client, served as a second one (`share.rs`).
    pub share: Share,
    /// PC sampling's contexts and what its callbacks read (`pcsampling/`); `None` until a
    /// context is sampled.
    pub pc: Mutex<Option<PcState>>,
    /// Kernel profiling (`profiler/`).
    pub prof: ProfilerState,
    /// Source counters (`source_counters/`).
    pub sc: ScState,
    /// CUPTI's own functions behind the entry points rtrace interposes (`exports.rs`).
    #[cfg_attr(test, allow(dead_code))]
    pub own: OwnFns,
}

/// Kernel profiling's state.
pub(super) struct ProfilerState {
    /// Profiling is on: the one relaxed load a launch wrapper adds.
    pub on: AtomicBool,
    /// The metrics asked for (`RTRACE_METRICS` resolved), in value order.
    pub metrics: OnceLock<Vec<String>>,
    /// The kernel controls' state and the profiled contexts, under the lock a launch takes.
    pub launches: Mutex<Option<Launches>>,
    /// `ProfilerSetup` and `KernelProfile` chunks for the worker to write, in order.
    pub pending: Mutex<Vec<(rtrace_format::ChunkKind, Vec<u8>)>>,
    /// The notice about graph launches was written.
    pub graph_said: AtomicBool,
    /// Profiled launches whose kernel record has not been converted yet: (rtrace's
    /// correlation, when profiling began, `gpu__time_duration.sum` in ns if collected).
    pub profiled: Mutex<Vec<(u64, u64, Option<u64>)>>,
    /// Application replay (`profiler/range.rs`): launches then pass through, counted.
    pub application: AtomicBool,
    /// Kernel launches so far while application replay is on.
    pub range_launches: AtomicU64,
    /// Application replay's contexts and open ranges.
    pub ranges: Mutex<Option<Ranges>>,
}

pub(super) const OFF: u8 = 0;
pub(super) const ON: u8 = 1;
pub(super) const DONE: u8 = 2;

/// The activity buffers: CUPTI asks for them on the program's threads (`request`) and hands
/// them back full on its own (`complete`); the worker converts them.
pub(super) struct Buffers {
    /// Full buffers, their valid byte counts, and whether CUPTI timed them on the program's
    /// clock, waiting for the worker.
    pub full: Mutex<Vec<(Buffer, usize, bool)>>,
    /// Empty buffers for CUPTI to fill.
    pub pool: Mutex<Vec<Buffer>>,
    /// The buffers CUPTI holds (found by address when it hands one back).
    pub lent: Mutex<Vec<Buffer>>,
    /// How a reader finds its way in the buffers that are pages of the trace file (set when
    /// GPU activity starts), and what makes one ([`super::set_region_source`]).
    pub layout: std::sync::OnceLock<rtrace_format::gpu_region::GpuBufferLayout>,
    pub region_source: std::sync::OnceLock<RegionSource>,
    /// Buffers handed to CUPTI are zeroed by rtrace (new ones are; the worker zeroes used ones
    /// before they go back to the pool), and CUPTI was told so.
    pub zeroed: AtomicBool,
    /// Buffers CUPTI has handed back so far, and their count at the last `flush_if_idle`.
    pub completed: AtomicU64,
    pub completed_at_last_look: AtomicU64,
    /// Records CUPTI reported as dropped, and the count last written as a notice.
    pub dropped: AtomicU64,
    pub reported_dropped: AtomicU64,
}

/// What makes a CUPTI buffer of so many bytes in the trace file, with the layout a reader
/// needs before the first one (None: the file cannot hold one now).
pub type RegionSource = fn(
    u64,
    &rtrace_format::gpu_region::GpuBufferLayout,
) -> Option<&'static crate::region::GpuRegion>;

/// One CUPTI activity buffer: pages of the trace file, so that what CUPTI wrote into it is in
/// the trace however the process ends, or heap memory where the file cannot hold one.
pub(super) enum Buffer {
    File(&'static crate::region::GpuRegion),
    Heap(Box<[u64]>),
}

impl Buffer {
    /// Its first byte and its length.
    pub fn memory(&self) -> (*mut u8, usize) {
        match self {
            Buffer::File(r) => r.buffer(),
            Buffer::Heap(b) => (b.as_ptr() as *mut u8, b.len() * 8),
        }
    }
}

/// What CUPTI's resource callbacks and the start of GPU activity found, for the worker.
pub(super) struct Found {
    /// The devices, read when GPU activity starts (once).
    pub devices: Mutex<Vec<DeviceInfo>>,
    pub devices_read: Once,
    /// Modules loaded (from CUPTI's resource callback).
    pub modules: Mutex<Vec<ModuleRecord>>,
    /// Their code images, for the worker to write; the contents seen so far, each with whether
    /// another process of the run stores it.
    pub images: Mutex<Vec<ModuleImage>>,
    pub image_hashes: Mutex<Vec<(u64, bool)>>,
}

/// Callback domains (CUPTI has 7) and ids (below 4096 in every domain).
pub(super) const DOMAINS: usize = 8;
pub(super) const WORDS: usize = 64;
/// A set of callbacks: one bit per (domain, callback id).
pub(super) type CbidSet = [[AtomicU64; WORDS]; DOMAINS];

/// The state of the program's own CUPTI client (see `share.rs`).
pub(super) struct Share {
    /// The program's buffer callbacks (0: none).
    pub request: AtomicUsize,
    pub complete: AtomicUsize,
    /// Activity kinds the program has enabled now, has enabled at some time, and those rtrace
    /// enabled (bit = kind).
    pub program_kinds: AtomicU64,
    pub program_ever: AtomicU64,
    pub our_kinds: AtomicU64,
    /// For each kind, when (on CUPTI's clock) the program last enabled it and last disabled it
    /// (`u64::MAX` while enabled): a record of one of rtrace's kinds, which CUPTI keeps making,
    /// goes to the program only if it started in that window (CUPTI hands over what it made
    /// while a kind was enabled even after the program disables it, as the PyTorch profiler
    /// expects).
    pub enabled_at: [AtomicU64; 64],
    pub disabled_at: [AtomicU64; 64],
    /// Records the program lost (no buffer, or one too small): its dropped count.
    pub program_dropped: AtomicU64,
    /// The program's subscriber: its callback and userdata (0: none).
    pub callback: AtomicUsize,
    pub userdata: AtomicUsize,
    /// Callbacks the program enabled, and those rtrace enabled.
    pub program_cbids: CbidSet,
    pub our_cbids: CbidSet,
    /// Whether the program enabled any callback (the fast check in `share::forward`).
    pub program_any: AtomicBool,
    /// The handle the program gets for its subscriber is this byte's address.
    pub handle: u8,
    /// The program's timestamp callback (0: none), and whether CUPTI's records are on it.
    pub program_clock: AtomicUsize,
    pub on_program_clock: AtomicBool,
    /// Pairs of readings of the program's clock and rtrace's.
    pub clock_map: Mutex<ClockMap>,
    /// The program's buffer being filled.
    pub open: Mutex<Option<Open>>,
}

/// The program's buffer being filled: its address, size, bytes used, records, record limit.
pub(super) struct Open {
    pub buf: usize,
    pub size: usize,
    pub used: usize,
    pub records: usize,
    pub max_records: usize,
}

/// CUPTI's own functions behind each entry point rtrace interposes (0: not resolved yet).
#[cfg_attr(test, allow(dead_code))]
pub(super) struct OwnFns {
    pub register_callbacks: AtomicUsize,
    pub register_timestamp: AtomicUsize,
    pub enable: AtomicUsize,
    pub disable: AtomicUsize,
    pub flush_all: AtomicUsize,
    pub dropped: AtomicUsize,
    pub subscribe: AtomicUsize,
    pub subscribe_v2: AtomicUsize,
    pub unsubscribe: AtomicUsize,
    pub enable_callback: AtomicUsize,
    pub enable_domain: AtomicUsize,
    pub enable_all_domains: AtomicUsize,
    pub callback_state: AtomicUsize,
    pub finalize: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
#[allow(clippy::declare_interior_mutable_const)]
const ZERO_DOMAIN: [AtomicU64; WORDS] = [ZERO; WORDS];
#[allow(clippy::declare_interior_mutable_const)]
const NONE: AtomicUsize = AtomicUsize::new(0);

/// The one CUPTI state of the process. A static because CUPTI's buffer callbacks
/// (`request`, `complete`), its timestamp callback, the `atexit` handler and the CUPTI entry
/// points rtrace exports carry no pointer of rtrace's: this is the only way they reach it.
pub(super) static CUPTI: Cupti = Cupti {
    api: OnceLock::new(),
    state: AtomicU8::new(OFF),
    enable: Once::new(),
    exit_sequence: OnceLock::new(),
    enabled_by: AtomicU32::new(0),
    subscriber: AtomicPtr::new(std::ptr::null_mut()),
    notices: Mutex::new(Vec::new()),
    buffers: Buffers {
        full: Mutex::new(Vec::new()),
        pool: Mutex::new(Vec::new()),
        lent: Mutex::new(Vec::new()),
        layout: std::sync::OnceLock::new(),
        region_source: std::sync::OnceLock::new(),
        zeroed: AtomicBool::new(false),
        completed: AtomicU64::new(0),
        completed_at_last_look: AtomicU64::new(0),
        dropped: AtomicU64::new(0),
        reported_dropped: AtomicU64::new(0),
    },
    found: Found {
        devices: Mutex::new(Vec::new()),
        devices_read: Once::new(),
        modules: Mutex::new(Vec::new()),
        images: Mutex::new(Vec::new()),
        image_hashes: Mutex::new(Vec::new()),
    },
    share: Share {
        request: NONE,
        complete: NONE,
        program_kinds: ZERO,
        program_ever: ZERO,
        our_kinds: ZERO,
        enabled_at: [ZERO; 64],
        disabled_at: [ZERO; 64],
        program_dropped: ZERO,
        callback: NONE,
        userdata: NONE,
        program_cbids: [ZERO_DOMAIN; DOMAINS],
        our_cbids: [ZERO_DOMAIN; DOMAINS],
        program_any: AtomicBool::new(false),
        handle: 0,
        program_clock: NONE,
        on_program_clock: AtomicBool::new(false),
        clock_map: Mutex::new(ClockMap::new()),
        open: Mutex::new(None),
    },
    pc: Mutex::new(None),
    prof: ProfilerState {
        on: AtomicBool::new(false),
        metrics: OnceLock::new(),
        launches: Mutex::new(None),
        pending: Mutex::new(Vec::new()),
        graph_said: AtomicBool::new(false),
        profiled: Mutex::new(Vec::new()),
        application: AtomicBool::new(false),
        range_launches: AtomicU64::new(0),
        ranges: Mutex::new(None),
    },
    sc: ScState::new(),
    own: OwnFns {
        register_callbacks: NONE,
        register_timestamp: NONE,
        enable: NONE,
        disable: NONE,
        flush_all: NONE,
        dropped: NONE,
        subscribe: NONE,
        subscribe_v2: NONE,
        unsubscribe: NONE,
        enable_callback: NONE,
        enable_domain: NONE,
        enable_all_domains: NONE,
        callback_state: NONE,
        finalize: NONE,
    },
};

impl Cupti {
    /// A status line for the trace (also to the diagnostic log).
    pub fn notice(&self, msg: String) {
        diag::log(&["gpu activity: ", &msg]);
        if let Ok(mut n) = self.notices.lock() {
            n.push(msg);
        }
    }

    /// This process enabled CUPTI (see [`Cupti::enabled_by`]).
    pub fn in_enabling_process(&self) -> bool {
        self.enabled_by.load(Ordering::Acquire) == crate::sys::getpid()
    }

    /// GPU activity is on now, enabled by this process.
    pub fn start_here(&self) {
        self.enabled_by
            .store(crate::sys::getpid(), Ordering::Release);
        self.state.store(ON, Ordering::Release);
    }

    /// GPU activity is on, in this process.
    pub fn on_here(&self) -> bool {
        self.state.load(Ordering::Acquire) == ON && self.in_enabling_process()
    }

    /// Asks CUPTI to hand over its buffers (`force`: also records still being written).
    pub fn flush(&self, force: bool) {
        if !self.on_here() {
            return;
        }
        if let Some(api) = self.api.get() {
            internal(|| {
                // SAFETY: plain CUPTI call; buffers come back through `complete`.
                unsafe { (api.flush_all)(u32::from(force)) };
            });
        }
    }
}
