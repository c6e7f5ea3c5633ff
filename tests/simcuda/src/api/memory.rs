//! Allocation, copies and memsets. "Device" memory is host memory, so data really moves.

use std::os::raw::{c_uchar, c_uint, c_void};

use super::{h, need, put};
use crate::activity::{self, SimOp, SIMOP_ALLOC, SIMOP_FREE, SIMOP_MEMCPY, SIMOP_MEMSET};
use crate::entry::locked;
use crate::errors::*;
use crate::memory::AllocKind;
use crate::state::State;
use crate::types::*;

/// Where an operation is queued.
#[derive(Clone, Copy)]
enum On {
    /// The implicit default stream of a synchronous call: legacy, or per-thread for `_ptds`.
    /// `host_waits`: the call returns when the operation ends (virtual time).
    Default { ptds: bool, host_waits: bool },
    /// A `CUstream` argument; `ptsz`: NULL means the per-thread default stream.
    Stream { stream: CUstream, ptsz: bool },
}

const fn sync_copy(ptds: bool) -> On {
    On::Default {
        ptds,
        host_waits: true,
    }
}

/// Synchronous device-to-device copies and memsets do not block the host.
const fn sync_device_op(ptds: bool) -> On {
    On::Default {
        ptds,
        host_waits: false,
    }
}

/// How a pointer argument is checked.
#[derive(Clone, Copy)]
enum Side {
    /// Must lie inside a live allocation (device or page-locked host memory).
    Device,
    /// Any non-NULL host pointer.
    Host,
}

/// `pre`: the result of argument checks made before the call (applied after the init check, so
/// every call takes the lock once and advances the clock).
fn alloc(pre: Result<(), CUresult>, kind: AllocKind, size: u64) -> Result<u64, CUresult> {
    locked(|st, caller| {
        st.require_init()?;
        pre?;
        let ctx = st.current(caller)?;
        let addr = st.allocate(ctx, kind, size)?;
        if let Some((place, bytes, memory_kind)) = st.alloc_place(addr) {
            activity::report_memory(SIMOP_ALLOC, place, addr, bytes, memory_kind, st.host_now);
        }
        Ok(addr)
    })
}

fn free(addr: u64, host: bool) -> Result<(), CUresult> {
    locked(|st, _| {
        st.require_init()?;
        let freed = st.alloc_place(addr);
        st.free(addr, host)?;
        if let Some((place, bytes, memory_kind)) = freed {
            activity::report_memory(SIMOP_FREE, place, addr, bytes, memory_kind, st.host_now);
        }
        Ok(())
    })
}

/// What a transfer is, for activity reporting.
#[derive(Clone, Copy)]
enum What {
    /// A copy. `kind`: CUPTI's copy kind, or `None` to derive it from where the pointers lie
    /// (`cuMemcpyAsync`).
    Copy {
        dst: u64,
        src: u64,
        kind: Option<u32>,
    },
    /// A memset of `value` (the byte or the word).
    Memset { dst: u64, value: u32 },
}

/// Queues an operation of `bytes` bytes after checking its pointers, then runs `effect` (the
/// data movement) under the lock.
fn transfer(
    pre: Result<(), CUresult>,
    checks: &[(u64, Side)],
    bytes: u64,
    on: On,
    what: What,
    effect: impl FnOnce(),
) -> Result<(), CUresult> {
    locked(|st, caller| {
        st.require_init()?;
        pre?;
        st.current(caller)?;
        for &(p, side) in checks {
            match side {
                Side::Device => st.check_range(p, bytes)?,
                Side::Host if p == 0 => return Err(CUDA_ERROR_INVALID_VALUE),
                Side::Host => {}
            }
        }
        let (sid, host_waits) = match on {
            On::Default { ptds, host_waits } => (st.resolve_stream(0, ptds, caller)?, host_waits),
            On::Stream { stream, ptsz } => (st.resolve_stream(h(stream), ptsz, caller)?, false),
        };
        effect();
        let (start, end) = st.issue(sid, st.transfer_ns(bytes));
        if activity::wants_op() {
            let is_async = matches!(on, On::Stream { .. });
            activity::set_op(describe(st, sid, (start, end), bytes, what, is_async), None);
        }
        if host_waits {
            st.wait_until(end);
        }
        Ok(())
    })
}

/// The activity description of a copy or memset queued on stream `sid`.
fn describe(
    st: &State,
    sid: u64,
    (start, end): (u64, u64),
    bytes: u64,
    what: What,
    is_async: bool,
) -> SimOp {
    use crate::cupti::*;
    let (device, context_id, stream_id) = st.stream_place(sid);
    let mut op = SimOp::zeroed(SIMOP_MEMCPY);
    match what {
        What::Copy { dst, src, kind } => {
            let (src_kind, dst_kind) = (st.memory_kind(src), st.memory_kind(dst));
            let on_device = |k| k == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
            op.copy_kind = kind.unwrap_or(match (on_device(src_kind), on_device(dst_kind)) {
                (false, true) => CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
                (true, false) => CUPTI_ACTIVITY_MEMCPY_KIND_DTOH,
                (true, true) => CUPTI_ACTIVITY_MEMCPY_KIND_DTOD,
                (false, false) => CUPTI_ACTIVITY_MEMCPY_KIND_HTOH,
            });
            op.src_kind = src_kind;
            op.dst_kind = dst_kind;
        }
        What::Memset { dst, value } => {
            op.kind = SIMOP_MEMSET;
            op.src_kind = st.memory_kind(dst);
            op.dst_kind = op.src_kind;
            op.value = value;
        }
    }
    op.device = device;
    op.context_id = context_id;
    op.stream_id = stream_id;
    op.start_ns = start;
    op.end_ns = end;
    op.bytes = bytes;
    op.is_async = u32::from(is_async);
    op
}

fn copy(
    dst: (u64, Side),
    src: (u64, Side),
    n: usize,
    on: On,
    kind: Option<u32>,
) -> Result<(), CUresult> {
    let bytes = n as u64;
    let what = What::Copy {
        dst: dst.0,
        src: src.0,
        kind,
    };
    transfer(Ok(()), &[dst, src], bytes, on, what, || {
        // SAFETY: device sides were checked to lie in live allocations of at least `n` bytes;
        // host sides are the caller's buffers of `n` bytes (driver contract). ptr::copy
        // tolerates overlap.
        unsafe { std::ptr::copy(src.0 as *const u8, dst.0 as *mut u8, n) }
    })
}

fn htod(dst: u64, src: *const c_void, n: usize, on: On) -> Result<(), CUresult> {
    let kind = Some(crate::cupti::CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
    copy((dst, Side::Device), (src as u64, Side::Host), n, on, kind)
}

fn dtoh(dst: *mut c_void, src: u64, n: usize, on: On) -> Result<(), CUresult> {
    let kind = Some(crate::cupti::CUPTI_ACTIVITY_MEMCPY_KIND_DTOH);
    copy((dst as u64, Side::Host), (src, Side::Device), n, on, kind)
}

fn dtod(dst: u64, src: u64, n: usize, on: On) -> Result<(), CUresult> {
    let kind = Some(crate::cupti::CUPTI_ACTIVITY_MEMCPY_KIND_DTOD);
    copy((dst, Side::Device), (src, Side::Device), n, on, kind)
}

/// `cuMemcpyAsync` (unified addressing): each side may be device, page-locked or any host memory.
fn any(dst: u64, src: u64, n: usize, on: On) -> Result<(), CUresult> {
    copy((dst, Side::Host), (src, Side::Host), n, on, None)
}

fn memset8(dst: u64, v: u8, n: usize, on: On) -> Result<(), CUresult> {
    let what = What::Memset {
        dst,
        value: u32::from(v),
    };
    transfer(Ok(()), &[(dst, Side::Device)], n as u64, on, what, || {
        // SAFETY: checked to lie in a live allocation of at least n bytes.
        unsafe { std::ptr::write_bytes(dst as *mut u8, v, n) }
    })
}

fn memset32(dst: u64, v: u32, n: usize, on: On) -> Result<(), CUresult> {
    let bytes = (n as u64).checked_mul(4);
    let pre = if dst & 3 != 0 || bytes.is_none() {
        Err(CUDA_ERROR_INVALID_VALUE)
    } else {
        Ok(())
    };
    let what = What::Memset { dst, value: v };
    transfer(
        pre,
        &[(dst, Side::Device)],
        bytes.unwrap_or(0),
        on,
        what,
        || {
            let p = dst as *mut u32;
            for i in 0..n {
                // SAFETY: 4-byte aligned and checked to lie in a live allocation of 4n bytes.
                unsafe { p.add(i).write(v) }
            }
        },
    )
}

fn v1(p: CUdeviceptr_v1) -> u64 {
    u64::from(p)
}

fn stream(stream: CUstream) -> On {
    On::Stream {
        stream,
        ptsz: false,
    }
}

fn stream_ptsz(stream: CUstream) -> On {
    On::Stream { stream, ptsz: true }
}

api! {
    fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytesize: usize) {
        let p = alloc(need(dptr), AllocKind::Device, bytesize as u64)?;
        // SAFETY: checked non-NULL.
        unsafe { put(dptr, p) };
        Ok(())
    }

    /// Legacy 32-bit variant: the memory is mapped below 4 GiB (`MAP_32BIT`, x86-64 only);
    /// `CUDA_ERROR_OUT_OF_MEMORY` when no such address space is left.
    fn cuMemAlloc(dptr: *mut CUdeviceptr_v1, bytesize: c_uint) {
        let p = alloc(need(dptr), AllocKind::DeviceLow, u64::from(bytesize))?;
        // SAFETY: checked non-NULL; `p` < 4 GiB by construction.
        unsafe { put(dptr, p as CUdeviceptr_v1) };
        Ok(())
    }

    fn cuMemFree_v2(dptr: CUdeviceptr) {
        free(dptr, false)
    }

    fn cuMemFree(dptr: CUdeviceptr_v1) {
        free(v1(dptr), false)
    }

    fn cuMemAllocHost_v2(pp: *mut *mut c_void, bytesize: usize) {
        let p = alloc(need(pp), AllocKind::Host, bytesize as u64)?;
        // SAFETY: checked non-NULL.
        unsafe { put(pp, p as *mut c_void) };
        Ok(())
    }

    fn cuMemAllocHost(pp: *mut *mut c_void, bytesize: c_uint) {
        let p = alloc(need(pp), AllocKind::Host, u64::from(bytesize))?;
        // SAFETY: checked non-NULL.
        unsafe { put(pp, p as *mut c_void) };
        Ok(())
    }

    fn cuMemFreeHost(p: *mut c_void) {
        free(p as u64, true)
    }

    fn cuMemcpyHtoD_v2(dstDevice: CUdeviceptr, srcHost: *const c_void, ByteCount: usize) {
        htod(dstDevice, srcHost, ByteCount, sync_copy(false))
    }

    fn cuMemcpyHtoD_v2_ptds(dstDevice: CUdeviceptr, srcHost: *const c_void, ByteCount: usize) {
        htod(dstDevice, srcHost, ByteCount, sync_copy(true))
    }

    fn cuMemcpyHtoD(dstDevice: CUdeviceptr_v1, srcHost: *const c_void, ByteCount: c_uint) {
        htod(v1(dstDevice), srcHost, ByteCount as usize, sync_copy(false))
    }

    fn cuMemcpyDtoH_v2(dstHost: *mut c_void, srcDevice: CUdeviceptr, ByteCount: usize) {
        dtoh(dstHost, srcDevice, ByteCount, sync_copy(false))
    }

    fn cuMemcpyDtoH_v2_ptds(dstHost: *mut c_void, srcDevice: CUdeviceptr, ByteCount: usize) {
        dtoh(dstHost, srcDevice, ByteCount, sync_copy(true))
    }

    fn cuMemcpyDtoH(dstHost: *mut c_void, srcDevice: CUdeviceptr_v1, ByteCount: c_uint) {
        dtoh(dstHost, v1(srcDevice), ByteCount as usize, sync_copy(false))
    }

    fn cuMemcpyDtoD_v2(dstDevice: CUdeviceptr, srcDevice: CUdeviceptr, ByteCount: usize) {
        dtod(dstDevice, srcDevice, ByteCount, sync_device_op(false))
    }

    fn cuMemcpyDtoD_v2_ptds(dstDevice: CUdeviceptr, srcDevice: CUdeviceptr, ByteCount: usize) {
        dtod(dstDevice, srcDevice, ByteCount, sync_device_op(true))
    }

    fn cuMemcpyDtoD(dstDevice: CUdeviceptr_v1, srcDevice: CUdeviceptr_v1, ByteCount: c_uint) {
        dtod(v1(dstDevice), v1(srcDevice), ByteCount as usize, sync_device_op(false))
    }

    fn cuMemcpyHtoDAsync_v2(
        dstDevice: CUdeviceptr,
        srcHost: *const c_void,
        ByteCount: usize,
        hStream: CUstream,
    ) {
        htod(dstDevice, srcHost, ByteCount, stream(hStream))
    }

    fn cuMemcpyHtoDAsync_v2_ptsz(
        dstDevice: CUdeviceptr,
        srcHost: *const c_void,
        ByteCount: usize,
        hStream: CUstream,
    ) {
        htod(dstDevice, srcHost, ByteCount, stream_ptsz(hStream))
    }

    fn cuMemcpyHtoDAsync(
        dstDevice: CUdeviceptr_v1,
        srcHost: *const c_void,
        ByteCount: c_uint,
        hStream: CUstream,
    ) {
        htod(v1(dstDevice), srcHost, ByteCount as usize, stream(hStream))
    }

    fn cuMemcpyDtoHAsync_v2(
        dstHost: *mut c_void,
        srcDevice: CUdeviceptr,
        ByteCount: usize,
        hStream: CUstream,
    ) {
        dtoh(dstHost, srcDevice, ByteCount, stream(hStream))
    }

    fn cuMemcpyDtoHAsync_v2_ptsz(
        dstHost: *mut c_void,
        srcDevice: CUdeviceptr,
        ByteCount: usize,
        hStream: CUstream,
    ) {
        dtoh(dstHost, srcDevice, ByteCount, stream_ptsz(hStream))
    }

    fn cuMemcpyDtoHAsync(
        dstHost: *mut c_void,
        srcDevice: CUdeviceptr_v1,
        ByteCount: c_uint,
        hStream: CUstream,
    ) {
        dtoh(dstHost, v1(srcDevice), ByteCount as usize, stream(hStream))
    }

    fn cuMemcpyAsync(dst: CUdeviceptr, src: CUdeviceptr, ByteCount: usize, hStream: CUstream) {
        any(dst, src, ByteCount, stream(hStream))
    }

    fn cuMemcpyAsync_ptsz(dst: CUdeviceptr, src: CUdeviceptr, ByteCount: usize, hStream: CUstream) {
        any(dst, src, ByteCount, stream_ptsz(hStream))
    }

    fn cuMemsetD8_v2(dstDevice: CUdeviceptr, uc: c_uchar, N: usize) {
        memset8(dstDevice, uc, N, sync_device_op(false))
    }

    fn cuMemsetD8_v2_ptds(dstDevice: CUdeviceptr, uc: c_uchar, N: usize) {
        memset8(dstDevice, uc, N, sync_device_op(true))
    }

    fn cuMemsetD8(dstDevice: CUdeviceptr_v1, uc: c_uchar, N: c_uint) {
        memset8(v1(dstDevice), uc, N as usize, sync_device_op(false))
    }

    fn cuMemsetD32_v2(dstDevice: CUdeviceptr, ui: c_uint, N: usize) {
        memset32(dstDevice, ui, N, sync_device_op(false))
    }

    fn cuMemsetD32_v2_ptds(dstDevice: CUdeviceptr, ui: c_uint, N: usize) {
        memset32(dstDevice, ui, N, sync_device_op(true))
    }

    fn cuMemsetD32(dstDevice: CUdeviceptr_v1, ui: c_uint, N: c_uint) {
        memset32(v1(dstDevice), ui, N as usize, sync_device_op(false))
    }

    fn cuMemsetD8Async(dstDevice: CUdeviceptr, uc: c_uchar, N: usize, hStream: CUstream) {
        memset8(dstDevice, uc, N, stream(hStream))
    }

    fn cuMemsetD8Async_ptsz(dstDevice: CUdeviceptr, uc: c_uchar, N: usize, hStream: CUstream) {
        memset8(dstDevice, uc, N, stream_ptsz(hStream))
    }

    fn cuMemsetD32Async(dstDevice: CUdeviceptr, ui: c_uint, N: usize, hStream: CUstream) {
        memset32(dstDevice, ui, N, stream(hStream))
    }

    fn cuMemsetD32Async_ptsz(dstDevice: CUdeviceptr, ui: c_uint, N: usize, hStream: CUstream) {
        memset32(dstDevice, ui, N, stream_ptsz(hStream))
    }
}
