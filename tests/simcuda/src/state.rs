//! The virtual GPU: contexts, streams, events, modules, allocations and the virtual clocks.
//!
//! Everything here is safe Rust behind one lock (see `entry::locked`); handles given to C are
//! encoded ids ([`handle`]), never pointers into this state. The timing rules are documented in
//! `tests/simcuda/README.md` ("Virtual time"), and the unit tests below check them.

use std::collections::BTreeMap;
use std::ffi::CString;

use crate::errors::*;
use crate::memory::{self, AllocKind};
use crate::module::Builtin;

pub type Id = u64;

/// Memory of each virtual device: 80 GiB, like an H100 SXM.
pub const TOTAL_MEM: u64 = 80 << 30;

/// Event flags accepted by `cuEventCreate`.
pub const CU_EVENT_BLOCKING_SYNC: u32 = 0x1;
pub const CU_EVENT_DISABLE_TIMING: u32 = 0x2;
pub const CU_EVENT_INTERPROCESS: u32 = 0x4;
/// `cuStreamCreate` flags.
pub const CU_STREAM_NON_BLOCKING: u32 = 0x1;
/// The special stream handles of `cuda.h`.
pub const CU_STREAM_LEGACY: usize = 0x1;
pub const CU_STREAM_PER_THREAD: usize = 0x2;
/// Stream priorities of an H100: 0 (lowest) down to -5 (highest).
pub const LEAST_PRIORITY: i32 = 0;
pub const GREATEST_PRIORITY: i32 = -5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Context = 1,
    Module = 2,
    Function = 3,
    Stream = 4,
    Event = 5,
}

const HANDLE_BASE: u64 = 0x5100_0000_0000;
const KIND_SHIFT: u32 = 40;

/// The opaque C handle of object `id` of `kind`: unique for the life of the process, never
/// reused, never dereferenceable.
pub fn handle(kind: Kind, id: Id) -> usize {
    (HANDLE_BASE + ((kind as u64) << KIND_SHIFT) + id * 16) as usize
}

/// The id behind a handle of `kind`, if it has that shape (whether it is live is a lookup).
pub fn decode(kind: Kind, h: usize) -> Option<Id> {
    let base = HANDLE_BASE + ((kind as u64) << KIND_SHIFT);
    let off = (h as u64).checked_sub(base)?;
    (off < (1 << KIND_SHIFT) && off % 16 == 0 && off > 0).then_some(off / 16)
}

/// Who is calling: the thread's key (for per-thread default streams) and its current context.
#[derive(Clone, Copy, Debug)]
pub struct Caller {
    pub thread: u64,
    pub ctx: Option<Id>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StreamKind {
    Legacy,
    PerThread,
    Blocking,
    NonBlocking,
}

#[derive(Debug)]
struct Stream {
    ctx: Id,
    kind: StreamKind,
    end: u64,
}

#[derive(Debug)]
struct Context {
    device: i32,
    legacy: Id,
    per_thread: BTreeMap<u64, Id>,
    /// Work of destroyed blocking streams, which the legacy stream still waits for.
    retired_blocking_end: u64,
    /// Work of all destroyed streams, which `cuCtxSynchronize` still waits for.
    retired_end: u64,
}

#[derive(Debug, Default)]
struct Device {
    primary: Option<Id>,
    refcount: u32,
    allocated: u64,
}

#[derive(Debug)]
struct Event {
    ctx: Id,
    flags: u32,
    time: Option<u64>,
}

#[derive(Debug)]
struct Module {
    ctx: Id,
}

#[derive(Debug)]
pub struct Function {
    module: Id,
    pub name: CString,
    pub ns: u64,
    pub builtin: Option<Builtin>,
}

#[derive(Debug)]
struct Alloc {
    size: u64,
    kind: AllocKind,
    ctx: Id,
    device: i32,
}

#[derive(Debug)]
pub struct State {
    /// The virtual host clock, ns.
    pub host_now: u64,
    /// `(start, end)` of the last operation queued (for `SIMCUDA_DEBUG`).
    pub last_op: Option<(u64, u64)>,
    pub initialized: bool,
    copy_bytes_per_us: u64,
    next_id: Id,
    devices: Vec<Device>,
    contexts: BTreeMap<Id, Context>,
    streams: BTreeMap<Id, Stream>,
    events: BTreeMap<Id, Event>,
    modules: BTreeMap<Id, Module>,
    functions: BTreeMap<Id, Function>,
    /// By base address.
    allocs: BTreeMap<u64, Alloc>,
    /// The grid id of the next kernel launch (CUPTI's `gridId`), from 1.
    next_grid_id: u64,
}

fn max_opt(a: u64, b: Option<u64>) -> u64 {
    b.map_or(a, |b| a.max(b))
}

impl State {
    pub fn new(devices: i32, copy_bytes_per_us: u64) -> State {
        State {
            host_now: 0,
            last_op: None,
            initialized: false,
            copy_bytes_per_us: copy_bytes_per_us.max(1),
            next_id: 1,
            devices: (0..devices.max(0)).map(|_| Device::default()).collect(),
            contexts: BTreeMap::new(),
            streams: BTreeMap::new(),
            events: BTreeMap::new(),
            modules: BTreeMap::new(),
            functions: BTreeMap::new(),
            allocs: BTreeMap::new(),
            next_grid_id: 1,
        }
    }

    fn id(&mut self) -> Id {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    // ---- initialisation and devices

    pub fn init(&mut self) -> Result<(), CUresult> {
        if self.devices.is_empty() {
            return Err(CUDA_ERROR_NO_DEVICE);
        }
        self.initialized = true;
        Ok(())
    }

    pub fn require_init(&self) -> Result<(), CUresult> {
        if self.initialized {
            Ok(())
        } else {
            Err(CUDA_ERROR_NOT_INITIALIZED)
        }
    }

    pub fn device_count(&self) -> i32 {
        self.devices.len() as i32
    }

    pub fn check_device(&self, dev: i32) -> Result<usize, CUresult> {
        usize::try_from(dev)
            .ok()
            .filter(|&d| d < self.devices.len())
            .ok_or(CUDA_ERROR_INVALID_DEVICE)
    }

    // ---- contexts

    pub fn create_context(&mut self, device: i32) -> Result<Id, CUresult> {
        self.check_device(device)?;
        let id = self.id();
        let legacy = self.id();
        self.streams.insert(
            legacy,
            Stream {
                ctx: id,
                kind: StreamKind::Legacy,
                end: 0,
            },
        );
        self.contexts.insert(
            id,
            Context {
                device,
                legacy,
                per_thread: BTreeMap::new(),
                retired_blocking_end: 0,
                retired_end: 0,
            },
        );
        crate::activity::report_context((device as u32, id as u32), legacy as u32);
        Ok(id)
    }

    /// The live context behind a `CUcontext` handle.
    pub fn context_of(&self, h: usize) -> Result<Id, CUresult> {
        decode(Kind::Context, h)
            .filter(|id| self.contexts.contains_key(id))
            .ok_or(CUDA_ERROR_INVALID_CONTEXT)
    }

    /// The caller's current context, which must be live.
    pub fn current(&self, caller: &Caller) -> Result<Id, CUresult> {
        caller
            .ctx
            .filter(|id| self.contexts.contains_key(id))
            .ok_or(CUDA_ERROR_INVALID_CONTEXT)
    }

    pub fn context_device(&self, ctx: Id) -> Result<i32, CUresult> {
        self.contexts
            .get(&ctx)
            .map(|c| c.device)
            .ok_or(CUDA_ERROR_INVALID_CONTEXT)
    }

    pub fn is_primary(&self, ctx: Id) -> bool {
        self.devices.iter().any(|d| d.primary == Some(ctx))
    }

    /// Destroys a context and everything created in it (streams, events, modules, memory).
    pub fn destroy_context(&mut self, ctx: Id) -> Result<(), CUresult> {
        let c = self
            .contexts
            .remove(&ctx)
            .ok_or(CUDA_ERROR_INVALID_CONTEXT)?;
        self.streams.retain(|_, s| s.ctx != ctx);
        self.events.retain(|_, e| e.ctx != ctx);
        let modules: Vec<Id> = self
            .modules
            .iter()
            .filter(|(_, m)| m.ctx == ctx)
            .map(|(&id, _)| id)
            .collect();
        for m in modules {
            self.modules.remove(&m);
            self.functions.retain(|_, f| f.module != m);
        }
        let allocs: Vec<u64> = self
            .allocs
            .iter()
            .filter(|(_, a)| a.ctx == ctx)
            .map(|(&p, _)| p)
            .collect();
        for p in allocs {
            self.release(p);
        }
        if let Some(d) = self.devices.get_mut(c.device as usize) {
            if d.primary == Some(ctx) {
                d.primary = None;
                d.refcount = 0;
            }
        }
        Ok(())
    }

    pub fn primary_retain(&mut self, device: i32) -> Result<Id, CUresult> {
        let d = self.check_device(device)?;
        let ctx = match self.devices[d].primary {
            Some(ctx) => ctx,
            None => {
                let ctx = self.create_context(device)?;
                self.devices[d].primary = Some(ctx);
                ctx
            }
        };
        self.devices[d].refcount += 1;
        Ok(ctx)
    }

    /// The primary context of `device` if releasing it now would destroy it (its last
    /// reference), with its device.
    pub fn primary_release_destroys(&self, device: i32) -> Option<(i32, Id)> {
        let d = self.check_device(device).ok()?;
        let dev = &self.devices[d];
        dev.primary
            .filter(|_| dev.refcount == 1)
            .map(|ctx| (device, ctx))
    }

    /// Drops one reference; the last one destroys the primary context (a later retain makes a
    /// new one, with a new handle).
    pub fn primary_release(&mut self, device: i32) -> Result<(), CUresult> {
        let d = self.check_device(device)?;
        let dev = &mut self.devices[d];
        let Some(ctx) = dev.primary.filter(|_| dev.refcount > 0) else {
            return Err(CUDA_ERROR_INVALID_CONTEXT);
        };
        dev.refcount -= 1;
        if dev.refcount == 0 {
            self.destroy_context(ctx)?;
        }
        Ok(())
    }

    // ---- streams and the virtual clock

    pub fn create_stream(&mut self, ctx: Id, flags: u32) -> Result<Id, CUresult> {
        let kind = match flags {
            0 => StreamKind::Blocking,
            CU_STREAM_NON_BLOCKING => StreamKind::NonBlocking,
            _ => return Err(CUDA_ERROR_INVALID_VALUE),
        };
        let id = self.id();
        self.streams.insert(id, Stream { ctx, kind, end: 0 });
        Ok(id)
    }

    pub fn destroy_stream(&mut self, h: usize) -> Result<(), CUresult> {
        let id = decode(Kind::Stream, h).ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        match self.streams.get(&id) {
            Some(s) if matches!(s.kind, StreamKind::Blocking | StreamKind::NonBlocking) => {}
            _ => return Err(CUDA_ERROR_INVALID_HANDLE),
        }
        let s = self.streams.remove(&id).ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        if let Some(c) = self.contexts.get_mut(&s.ctx) {
            c.retired_end = c.retired_end.max(s.end);
            if s.kind == StreamKind::Blocking {
                c.retired_blocking_end = c.retired_blocking_end.max(s.end);
            }
        }
        Ok(())
    }

    fn legacy_of(&self, ctx: Id) -> Result<Id, CUresult> {
        self.contexts
            .get(&ctx)
            .map(|c| c.legacy)
            .ok_or(CUDA_ERROR_INVALID_CONTEXT)
    }

    fn per_thread_of(&mut self, ctx: Id, thread: u64) -> Result<Id, CUresult> {
        if let Some(&id) = self
            .contexts
            .get(&ctx)
            .ok_or(CUDA_ERROR_INVALID_CONTEXT)?
            .per_thread
            .get(&thread)
        {
            return Ok(id);
        }
        let id = self.id();
        self.streams.insert(
            id,
            Stream {
                ctx,
                kind: StreamKind::PerThread,
                end: 0,
            },
        );
        if let Some(c) = self.contexts.get_mut(&ctx) {
            c.per_thread.insert(thread, id);
        }
        Ok(id)
    }

    /// The stream a `CUstream` argument names. `ptsz` is true for the `_ptsz`/`_ptds` entry
    /// points, where the NULL stream is the calling thread's per-thread default stream.
    pub fn resolve_stream(
        &mut self,
        h: usize,
        ptsz: bool,
        caller: &Caller,
    ) -> Result<Id, CUresult> {
        match h {
            0 if ptsz => self.per_thread_of(self.current(caller)?, caller.thread),
            0 | CU_STREAM_LEGACY => self.legacy_of(self.current(caller)?),
            CU_STREAM_PER_THREAD => self.per_thread_of(self.current(caller)?, caller.thread),
            _ => decode(Kind::Stream, h)
                .filter(|id| self.streams.contains_key(id))
                .ok_or(CUDA_ERROR_INVALID_HANDLE),
        }
    }

    /// The earliest time new work on stream `sid` may start, before the host clock: the stream's
    /// own end, plus the legacy default stream's implicit synchronisation.
    fn ready(&self, sid: Id) -> u64 {
        let s = &self.streams[&sid];
        match s.kind {
            StreamKind::NonBlocking => s.end,
            StreamKind::Blocking | StreamKind::PerThread => {
                let legacy = self
                    .contexts
                    .get(&s.ctx)
                    .map(|c| self.streams[&c.legacy].end);
                max_opt(s.end, legacy)
            }
            StreamKind::Legacy => {
                let retired = self.contexts.get(&s.ctx).map(|c| c.retired_blocking_end);
                self.streams
                    .values()
                    .filter(|o| {
                        o.ctx == s.ctx
                            && matches!(o.kind, StreamKind::Blocking | StreamKind::PerThread)
                    })
                    .fold(max_opt(s.end, retired), |t, o| t.max(o.end))
            }
        }
    }

    /// Enqueues `duration` ns of work on stream `sid`; returns its `(start, end)`.
    pub fn issue(&mut self, sid: Id, duration: u64) -> (u64, u64) {
        let start = self.host_now.max(self.ready(sid));
        let end = start.saturating_add(duration);
        if let Some(s) = self.streams.get_mut(&sid) {
            s.end = end;
        }
        self.last_op = Some((start, end));
        (start, end)
    }

    /// A new grid id, for a kernel launch that is being queued.
    pub fn grid_id(&mut self) -> u64 {
        let id = self.next_grid_id;
        self.next_grid_id += 1;
        id
    }

    /// Where stream `sid` is, for activity records: `(device ordinal, context id, stream id)`,
    /// the ids being simcuda's object ids.
    pub fn stream_place(&self, sid: Id) -> (u32, u32, u32) {
        let ctx = self.streams.get(&sid).map_or(0, |s| s.ctx);
        let device = self.contexts.get(&ctx).map_or(0, |c| c.device);
        (device as u32, ctx as u32, sid as u32)
    }

    /// Where context `ctx` is, for activity records: `(device ordinal, context id)`.
    pub fn context_place(&self, ctx: Id) -> (u32, u32) {
        let device = self.contexts.get(&ctx).map_or(0, |c| c.device);
        (device as u32, ctx as u32)
    }

    /// Where event `h` is, for activity records: `(device ordinal, context id, event id)`.
    pub fn event_place(&self, h: usize) -> Result<(u32, u32, u32), CUresult> {
        let ctx = self.event(h)?.ctx;
        let (device, ctx) = self.context_place(ctx);
        let id = decode(Kind::Event, h).unwrap_or(0);
        Ok((device, ctx, id as u32))
    }

    /// The live allocation at base address `addr`, for activity records:
    /// `((device ordinal, context id), size, CUPTI memory kind)`.
    pub fn alloc_place(&self, addr: u64) -> Option<((u32, u32), u64, u32)> {
        let a = self.allocs.get(&addr)?;
        Some((
            (a.device as u32, a.ctx as u32),
            a.size,
            self.memory_kind(addr),
        ))
    }

    /// `cuptiGetStreamIdEx(ctx, stream, perThreadStream)`: the stream's id, or a CUPTI error
    /// code (`CUPTI_ERROR_INVALID_CONTEXT` for an unknown context, `CUPTI_ERROR_INVALID_STREAM`
    /// for an unknown stream, one of another context, or a default-stream handle without a
    /// context). A NULL stream is the legacy stream, or with `per_thread` the calling thread's
    /// per-thread stream (created if needed, as its first use would).
    pub fn cupti_stream_id(
        &mut self,
        ctx: usize,
        stream: usize,
        per_thread: bool,
        caller: &Caller,
    ) -> Result<u32, u32> {
        use crate::cupti::{CUPTI_ERROR_INVALID_CONTEXT, CUPTI_ERROR_INVALID_STREAM};
        let ctx = match ctx {
            0 => None,
            h => Some(
                self.context_of(h)
                    .map_err(|_| CUPTI_ERROR_INVALID_CONTEXT)?,
            ),
        };
        let sid = match stream {
            0 | CU_STREAM_LEGACY | CU_STREAM_PER_THREAD => {
                let ctx = ctx.ok_or(CUPTI_ERROR_INVALID_STREAM)?;
                if stream == CU_STREAM_PER_THREAD || (stream == 0 && per_thread) {
                    self.per_thread_of(ctx, caller.thread)
                } else {
                    self.legacy_of(ctx)
                }
                .map_err(|_| CUPTI_ERROR_INVALID_STREAM)?
            }
            h => {
                let id = decode(Kind::Stream, h)
                    .filter(|id| self.streams.contains_key(id))
                    .ok_or(CUPTI_ERROR_INVALID_STREAM)?;
                if ctx.is_some_and(|c| self.streams[&id].ctx != c) {
                    return Err(CUPTI_ERROR_INVALID_STREAM);
                }
                id
            }
        };
        Ok(sid as u32)
    }

    pub fn stream_end(&self, sid: Id) -> u64 {
        self.streams.get(&sid).map_or(0, |s| s.end)
    }

    /// The end of all work in context `ctx`, destroyed streams included.
    pub fn context_end(&self, ctx: Id) -> u64 {
        let retired = self.contexts.get(&ctx).map_or(0, |c| c.retired_end);
        self.streams
            .values()
            .filter(|s| s.ctx == ctx)
            .fold(retired, |t, s| t.max(s.end))
    }

    /// The host waits until virtual time `t`.
    pub fn wait_until(&mut self, t: u64) {
        self.host_now = self.host_now.max(t);
    }

    pub fn wait_event(&mut self, sid: Id, event: usize) -> Result<(), CUresult> {
        let time = self.event(event)?.time;
        if let (Some(t), Some(s)) = (time, self.streams.get_mut(&sid)) {
            s.end = s.end.max(t);
        }
        Ok(())
    }

    /// Virtual duration of moving `bytes` bytes (copies and memsets).
    pub fn transfer_ns(&self, bytes: u64) -> u64 {
        let rate = u128::from(self.copy_bytes_per_us);
        ((u128::from(bytes) * 1000 + rate / 2) / rate).min(u128::from(u64::MAX)) as u64
    }

    // ---- events

    pub fn create_event(&mut self, ctx: Id, flags: u32) -> Result<Id, CUresult> {
        let all = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
        if flags & !all != 0
            || (flags & CU_EVENT_INTERPROCESS != 0 && flags & CU_EVENT_DISABLE_TIMING == 0)
        {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let id = self.id();
        self.events.insert(
            id,
            Event {
                ctx,
                flags,
                time: None,
            },
        );
        Ok(id)
    }

    fn event(&self, h: usize) -> Result<&Event, CUresult> {
        decode(Kind::Event, h)
            .and_then(|id| self.events.get(&id))
            .ok_or(CUDA_ERROR_INVALID_HANDLE)
    }

    pub fn destroy_event(&mut self, h: usize) -> Result<(), CUresult> {
        let id = decode(Kind::Event, h).ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        self.events
            .remove(&id)
            .map(|_| ())
            .ok_or(CUDA_ERROR_INVALID_HANDLE)
    }

    /// Records event `h` on stream `sid`: a zero-length operation; the event's time is its start.
    pub fn record_event(&mut self, h: usize, sid: Id) -> Result<u64, CUresult> {
        let id = decode(Kind::Event, h)
            .filter(|id| self.events.contains_key(id))
            .ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        let (t, _) = self.issue(sid, 0);
        if let Some(e) = self.events.get_mut(&id) {
            e.time = Some(t);
        }
        Ok(t)
    }

    /// `cuEventQuery`: done once the host clock has reached the event (an event never recorded
    /// counts as done).
    pub fn query_event(&self, h: usize) -> Result<(), CUresult> {
        match self.event(h)?.time {
            Some(t) if t > self.host_now => Err(CUDA_ERROR_NOT_READY),
            _ => Ok(()),
        }
    }

    pub fn event_time(&self, h: usize) -> Result<Option<u64>, CUresult> {
        Ok(self.event(h)?.time)
    }

    /// `cuEventElapsedTime`, in ms.
    pub fn elapsed(&self, start: usize, end: usize) -> Result<f32, CUresult> {
        let (a, b) = (self.event(start)?, self.event(end)?);
        if (a.flags | b.flags) & CU_EVENT_DISABLE_TIMING != 0 {
            return Err(CUDA_ERROR_INVALID_HANDLE);
        }
        let (Some(ta), Some(tb)) = (a.time, b.time) else {
            return Err(CUDA_ERROR_INVALID_HANDLE);
        };
        if ta > self.host_now || tb > self.host_now {
            return Err(CUDA_ERROR_NOT_READY);
        }
        Ok(((tb as f64 - ta as f64) / 1e6) as f32)
    }

    // ---- memory

    pub fn allocate(&mut self, ctx: Id, kind: AllocKind, size: u64) -> Result<u64, CUresult> {
        let device = self.context_device(ctx)?;
        if size == 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let on_device = kind != AllocKind::Host;
        let dev = &mut self.devices[device as usize];
        if on_device && dev.allocated.saturating_add(size) > TOTAL_MEM {
            return Err(CUDA_ERROR_OUT_OF_MEMORY);
        }
        let bytes = usize::try_from(size).map_err(|_| CUDA_ERROR_OUT_OF_MEMORY)?;
        let addr = memory::allocate(kind, bytes).ok_or(CUDA_ERROR_OUT_OF_MEMORY)?;
        if on_device {
            dev.allocated += size;
        }
        self.allocs.insert(
            addr,
            Alloc {
                size,
                kind,
                ctx,
                device,
            },
        );
        Ok(addr)
    }

    /// Frees the allocation at base address `addr`, which must be device memory (`host` false)
    /// or page-locked host memory (`host` true).
    pub fn free(&mut self, addr: u64, host: bool) -> Result<(), CUresult> {
        match self.allocs.get(&addr) {
            Some(a) if (a.kind == AllocKind::Host) == host => {
                self.release(addr);
                Ok(())
            }
            _ => Err(CUDA_ERROR_INVALID_VALUE),
        }
    }

    fn release(&mut self, addr: u64) {
        if let Some(a) = self.allocs.remove(&addr) {
            if a.kind != AllocKind::Host {
                if let Some(d) = self.devices.get_mut(a.device as usize) {
                    d.allocated -= a.size;
                }
            }
            // SAFETY: `addr` came from memory::allocate(a.kind, a.size) in `allocate` and was
            // just removed from the table, so it is released once.
            unsafe { memory::release(a.kind, addr, a.size as usize) };
        }
    }

    /// CUPTI's memory kind of the memory at `addr`: `CUPTI_ACTIVITY_MEMORY_KIND_DEVICE` inside a
    /// device allocation, `_PINNED` inside a `cuMemAllocHost` block, `_PAGEABLE` elsewhere.
    pub fn memory_kind(&self, addr: u64) -> u32 {
        use crate::cupti::*;
        match self.allocs.range(..=addr).next_back() {
            Some((&base, a)) if addr < base + a.size => match a.kind {
                AllocKind::Host => CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
                AllocKind::Device | AllocKind::DeviceLow => CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
            },
            _ => CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
        }
    }

    /// Checks that `[addr, addr + len)` lies inside one live allocation (device or page-locked
    /// host memory).
    pub fn check_range(&self, addr: u64, len: u64) -> Result<(), CUresult> {
        let (&base, a) = self
            .allocs
            .range(..=addr)
            .next_back()
            .ok_or(CUDA_ERROR_INVALID_VALUE)?;
        let end = addr.checked_add(len).ok_or(CUDA_ERROR_INVALID_VALUE)?;
        if addr >= base && end <= base + a.size && (len > 0 || addr < base + a.size) {
            Ok(())
        } else {
            Err(CUDA_ERROR_INVALID_VALUE)
        }
    }

    // ---- modules and functions

    pub fn load_module(&mut self, ctx: Id, kernels: Vec<(String, u64)>) -> Result<Id, CUresult> {
        let id = self.id();
        self.modules.insert(id, Module { ctx });
        for (name, ns) in kernels {
            let builtin = Builtin::by_name(&name);
            let name = CString::new(name).map_err(|_| CUDA_ERROR_INVALID_IMAGE)?;
            let fid = self.id();
            self.functions.insert(
                fid,
                Function {
                    module: id,
                    name,
                    ns,
                    builtin,
                },
            );
        }
        Ok(id)
    }

    /// The functions of module `id`, `(object id, name)` in image order.
    pub fn module_functions(&self, id: Id) -> Vec<(Id, CString)> {
        self.functions
            .iter()
            .filter(|(_, f)| f.module == id)
            .map(|(&fid, f)| (fid, f.name.clone()))
            .collect()
    }

    /// Unloads the module with handle `h`; returns the context it was loaded into.
    pub fn unload_module(&mut self, h: usize) -> Result<Id, CUresult> {
        let id = decode(Kind::Module, h).ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        let module = self.modules.remove(&id).ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        self.functions.retain(|_, f| f.module != id);
        Ok(module.ctx)
    }

    pub fn get_function(&self, module: usize, name: &[u8]) -> Result<Id, CUresult> {
        let m = decode(Kind::Module, module)
            .filter(|id| self.modules.contains_key(id))
            .ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        self.functions
            .iter()
            .find(|(_, f)| f.module == m && f.name.as_bytes() == name)
            .map(|(&id, _)| id)
            .ok_or(CUDA_ERROR_NOT_FOUND)
    }

    pub fn function(&self, h: usize) -> Result<&Function, CUresult> {
        decode(Kind::Function, h)
            .and_then(|id| self.functions.get(&id))
            .ok_or(CUDA_ERROR_INVALID_HANDLE)
    }
}

impl Drop for State {
    fn drop(&mut self) {
        let addrs: Vec<u64> = self.allocs.keys().copied().collect();
        for a in addrs {
            self.release(a);
        }
    }
}

#[cfg(test)]
mod tests;
