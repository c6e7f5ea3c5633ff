//! The simulated profiler's state (in simcupti's `State`, behind its lock): host objects of the
//! Profiler Host API and one range-profiler object per context, with what a kernel launch
//! between Start and Stop adds (README.md, "Kernel profiling"). The exported functions are in
//! `profiler_host` and `range_profiler`.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::layout::*;
use crate::profiler::{self, Range, LEVEL_SEP};
use crate::sim::{SimOp, SIMOP_KERNEL};
use rtrace_cupti_abi as abi;

/// `SIMCUPTI_PROFILER`, read once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Knob {
    Works,
    Privileges,
    Busy,
    Unsupported,
    Mps,
    /// `once`: profiling works, but `SetConfig` refuses a second configuration of one range
    /// profiler object (a lever for clients' fallback; not a CUPTI behaviour seen).
    Once,
}

pub fn knob() -> Knob {
    static K: OnceLock<Knob> = OnceLock::new();
    *K.get_or_init(|| match std::env::var("SIMCUPTI_PROFILER").as_deref() {
        Ok("privileges") => Knob::Privileges,
        Ok("busy") => Knob::Busy,
        Ok("unsupported") => Knob::Unsupported,
        Ok("mps") => Knob::Mps,
        Ok("once") => Knob::Once,
        _ => Knob::Works,
    })
}

/// A Profiler Host object.
pub struct Host {
    /// Distinct metrics added, in first-added order.
    pub metrics: Vec<String>,
    /// A `ConfigAddMetrics` failed: every later call on it fails with `UNKNOWN` (as CUPTI 13.0).
    pub spoiled: bool,
}

/// What `SetConfig` set.
pub struct Config {
    pub passes: usize,
    /// The client's counter data image (its address: it is the client's, written at decode).
    pub image: usize,
    pub image_size: usize,
    pub user_range: bool,
    /// Application replay (user range): the session collects pass `passIndex` only, whatever
    /// Start/Stop it sees, and later passes add to the ranges the image holds.
    pub application: bool,
    pub max_per_pass: usize,
    pub target_level: u16,
}

/// An open user range: its name (levels joined by `LEVEL_SEP`), GPU time and launches so far.
struct Open {
    name: Vec<u8>,
    duration_ns: u64,
    launches: u32,
}

/// The range profiler of one context.
#[derive(Default)]
pub struct Object {
    /// The last `GetCounterDataSize`: metrics and max ranges (what `CounterDataImageInitialize`
    /// lays out).
    pub sized: Option<(Vec<String>, usize)>,
    pub config: Option<Config>,
    pub started: bool,
    /// Ranges collected since `SetConfig` or the last `DecodeData`.
    pending: Vec<Range>,
    dropped: usize,
    /// Auto range: launches since `SetConfig` (the next range's name).
    launches: usize,
    /// User replay: the pass being collected, and the ranges closed in it.
    pass: usize,
    closed_in_pass: usize,
    open: Vec<Open>,
    /// Application replay, pass > 0: ranges closed since the last decode (each adds a pass to
    /// the image's first range still awaiting this pass).
    credits: usize,
}

#[derive(Default)]
pub struct Profiling {
    /// `cuptiProfilerInitialize` was called (and no `DeInitialize` since).
    pub initialized: bool,
    pub hosts: BTreeMap<u32, Host>,
    next_host: u32,
    /// Range-profiler objects by context id.
    pub objects: BTreeMap<u32, Object>,
    /// The kernel just observed was replayed (auto range, kernel replay): as real CUPTI 13.0
    /// does (measured on an H100), its activity record gets no times (start = end = 0).
    replayed: bool,
}

/// Handles: fake addresses, never dereferenced (`BASE + 16·id`).
const HOST_BASE: usize = 0x5300_0000_0000;
const OBJECT_BASE: usize = 0x5400_0000_0000;

fn id_of(handle: *mut std::ffi::c_void, base: usize) -> Option<u32> {
    let off = (handle as usize).checked_sub(base)?;
    (off % 16 == 0 && off / 16 > 0 && off / 16 <= u32::MAX as usize).then_some((off / 16) as u32)
}

pub fn object_handle(ctx_id: u32) -> *mut std::ffi::c_void {
    (OBJECT_BASE + 16 * ctx_id as usize) as *mut _
}

impl Profiling {
    pub const fn new() -> Profiling {
        Profiling {
            initialized: false,
            hosts: BTreeMap::new(),
            next_host: 1,
            objects: BTreeMap::new(),
            replayed: false,
        }
    }

    pub fn new_host(&mut self) -> *mut std::ffi::c_void {
        let id = self.next_host;
        self.next_host += 1;
        self.hosts.insert(
            id,
            Host {
                metrics: Vec::new(),
                spoiled: false,
            },
        );
        (HOST_BASE + 16 * id as usize) as *mut _
    }

    /// The host object behind a handle: `INVALID_PARAMETER` for an unknown handle, `UNKNOWN`
    /// for a spoiled one.
    pub fn host(&mut self, handle: *mut std::ffi::c_void) -> Result<&mut Host, u32> {
        let h = id_of(handle, HOST_BASE)
            .and_then(|id| self.hosts.get_mut(&id))
            .ok_or(CUPTI_ERROR_INVALID_PARAMETER)?;
        if h.spoiled {
            return Err(CUPTI_ERROR_UNKNOWN);
        }
        Ok(h)
    }

    pub fn drop_host(&mut self, handle: *mut std::ffi::c_void) -> bool {
        id_of(handle, HOST_BASE).is_some_and(|id| self.hosts.remove(&id).is_some())
    }

    /// The range profiler behind a handle (`INVALID_OPERATION` if not enabled, as the header
    /// says for calls "without enabling range profiler").
    pub fn object(&mut self, handle: *mut std::ffi::c_void) -> Result<&mut Object, u32> {
        id_of(handle, OBJECT_BASE)
            .and_then(|id| self.objects.get_mut(&id))
            .ok_or(CUPTI_ERROR_INVALID_OPERATION)
    }

    pub fn object_ctx(handle: *mut std::ffi::c_void) -> Option<u32> {
        id_of(handle, OBJECT_BASE)
    }

    /// A driver call's operation: a kernel launch on a context whose range profiler is started.
    pub fn observe(&mut self, op: &SimOp) {
        if op.kind != SIMOP_KERNEL {
            return;
        }
        let Some(obj) = self.objects.get_mut(&op.context_id) else {
            return;
        };
        let name = if op.name.is_null() {
            Vec::new()
        } else {
            // SAFETY: a kernel op's name is NUL-terminated and valid during the callback.
            unsafe { std::ffi::CStr::from_ptr(op.name) }
                .to_bytes()
                .to_vec()
        };
        self.replayed = obj.launch(&name, op.end_ns.saturating_sub(op.start_ns));
    }

    /// Whether the kernel [`Profiling::observe`] saw last was replayed (once).
    pub fn take_replayed(&mut self) -> bool {
        std::mem::take(&mut self.replayed)
    }

    /// The context is being destroyed: its range profiler goes with it.
    pub fn context_destroyed(&mut self, ctx_id: u32) {
        self.objects.remove(&ctx_id);
    }
}

impl Object {
    /// A kernel launched on the context; whether it was replayed (auto range, not dropped).
    fn launch(&mut self, kernel: &[u8], duration_ns: u64) -> bool {
        let Some(cfg) = self.config.as_ref().filter(|_| self.started) else {
            return false;
        };
        if cfg.user_range {
            for o in &mut self.open {
                o.duration_ns += duration_ns;
                o.launches += 1;
            }
            return false;
        }
        let name = self.launches.to_string().into_bytes();
        self.launches += 1;
        if self.pending.len() >= cfg.max_per_pass {
            self.dropped += 1;
            return false;
        }
        self.pending.push(Range {
            name,
            subject: kernel.to_vec(),
            duration_ns,
            passes: cfg.passes as u32,
            launches: 1,
        });
        true
    }

    /// `SetConfig` (checked by the caller): a new session.
    pub fn set_config(&mut self, cfg: Config, pass_index: usize) {
        self.config = Some(cfg);
        self.pending.clear();
        self.dropped = 0;
        self.launches = 0;
        self.pass = pass_index;
        self.closed_in_pass = 0;
        self.open.clear();
        self.credits = 0;
    }

    pub fn start(&mut self) -> u32 {
        if self.config.is_none() || self.started {
            return CUPTI_ERROR_INVALID_OPERATION;
        }
        self.started = true;
        self.closed_in_pass = 0;
        self.open.clear();
        CUPTI_SUCCESS
    }

    /// `Stop`: `(passIndex, targetNestingLevel, isAllPassSubmitted)`.
    pub fn stop(&mut self) -> Result<(usize, usize, u8), u32> {
        let cfg = match self.config.as_ref() {
            Some(c) if self.started => c,
            _ => return Err(CUPTI_ERROR_INVALID_OPERATION),
        };
        self.started = false;
        self.open.clear();
        let level = cfg.target_level as usize;
        if !cfg.user_range {
            return Ok((0, level, 1));
        }
        let pass = self.pass;
        if cfg.application {
            return Ok((pass, level, u8::from(pass + 1 >= cfg.passes)));
        }
        self.pass += 1;
        Ok((pass, level, u8::from(self.pass >= cfg.passes)))
    }

    pub fn push(&mut self, name: &[u8]) -> u32 {
        if !self.started || !self.config.as_ref().is_some_and(|c| c.user_range) {
            return CUPTI_ERROR_INVALID_OPERATION;
        }
        let mut full = self.open.last().map_or(Vec::new(), |o| {
            let mut n = o.name.clone();
            n.push(LEVEL_SEP);
            n
        });
        full.extend_from_slice(name);
        self.open.push(Open {
            name: full,
            duration_ns: 0,
            launches: 0,
        });
        CUPTI_SUCCESS
    }

    pub fn pop(&mut self) -> u32 {
        let (Some(cfg), true) = (self.config.as_ref(), self.started) else {
            return CUPTI_ERROR_INVALID_OPERATION;
        };
        let Some(o) = self.open.pop() else {
            return CUPTI_ERROR_INVALID_OPERATION;
        };
        if cfg.application && self.pass > 0 {
            self.credits += 1;
            return CUPTI_SUCCESS;
        }
        let index = if cfg.application {
            self.pending.len()
        } else {
            self.closed_in_pass
        };
        self.closed_in_pass += 1;
        if index >= cfg.max_per_pass {
            if self.pass == 0 {
                self.dropped += 1;
            }
            return CUPTI_SUCCESS;
        }
        match self.pending.get_mut(index) {
            Some(r) if self.pass > 0 => r.passes += 1,
            _ => self.pending.push(Range {
                subject: o.name.clone(),
                name: o.name,
                duration_ns: o.duration_ns,
                passes: 1,
                launches: o.launches,
            }),
        }
        CUPTI_SUCCESS
    }

    /// `DecodeData`: the pending ranges go into the configured image; returns the ranges dropped
    /// (past `maxRangesPerPass`, or past the image's room).
    pub fn decode(&mut self) -> Result<usize, u32> {
        let cfg = match self.config.as_ref() {
            Some(c) if !self.started => c,
            _ => return Err(CUPTI_ERROR_INVALID_OPERATION),
        };
        // SAFETY: the client keeps the image given to SetConfig valid while it profiles.
        let img = unsafe { std::slice::from_raw_parts_mut(cfg.image as *mut u8, cfg.image_size) };
        let mut lost = profiler::data_append(img, &self.pending);
        for _ in 0..std::mem::take(&mut self.credits) {
            if !profiler::data_add_pass(img, self.pass) {
                lost += 1;
            }
        }
        let dropped = self.dropped + lost;
        self.pending.clear();
        self.dropped = 0;
        if !cfg.application {
            self.pass = 0;
        }
        self.closed_in_pass = 0;
        Ok(dropped)
    }
}

/// The check every params struct gets: non-NULL and `structSize >= T::SIZE`.
///
/// # Safety
/// `p` is NULL or points to at least a `usize`.
pub unsafe fn sized<T>(p: *mut T, size: usize) -> bool {
    // SAFETY: the caller's contract.
    !p.is_null() && unsafe { p.cast::<usize>().read_unaligned() } >= size
}

/// The result codes simcupti's profiler uses that the ABI crate also names (one definition of
/// each value: the generated layout's).
const _: () = {
    assert!(abi::ERROR_INSUFFICIENT_PRIVILEGES == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES);
    assert!(abi::ERROR_NOT_SUPPORTED == CUPTI_ERROR_NOT_SUPPORTED);
};

#[cfg(test)]
mod tests;
