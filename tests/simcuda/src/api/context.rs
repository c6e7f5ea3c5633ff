//! Contexts and the per-thread context stack.

use std::os::raw::{c_int, c_uint, c_void};
use std::sync::atomic::Ordering;

use super::{h, need, ptr, put};
use crate::activity;
use crate::entry::{self, locked};
use crate::errors::*;
use crate::state::{handle, Kind, State};
use crate::types::*;

/// `CU_CTX_FLAGS_MASK`
const CTX_FLAGS_MASK: c_uint = 0xff;

/// Creates a context on `dev`, pushes it on the caller's stack and stores its handle.
fn create(pctx: *mut CUcontext, flags: c_uint, dev: CUdevice) -> Result<(), CUresult> {
    let ctx = locked(|st, _| {
        st.require_init()?;
        need(pctx)?;
        if flags & !CTX_FLAGS_MASK != 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        st.create_context(dev)
    })?;
    entry::push(ctx);
    // SAFETY: checked non-NULL inside the lock.
    unsafe { put(pctx, ptr(handle(Kind::Context, ctx))) };
    Ok(())
}

/// Destroys a context created with `cuCtxCreate*`; a primary context is refused with
/// `CUDA_ERROR_INVALID_CONTEXT`. Pops it if it is the top of the caller's stack.
fn destroy(ctx: CUcontext) -> Result<(), CUresult> {
    if activity::wants_op() {
        // Tell a simulated CUPTI while the context is still alive (outside the lock).
        let doomed = entry::with_state(|st, _| {
            let id = st
                .context_of(h(ctx))
                .ok()
                .filter(|&id| !st.is_primary(id))?;
            Some((st.context_device(id).ok()? as u32, id as u32))
        });
        if let Some(place) = doomed {
            activity::report_context_destroy(place);
        }
    }
    let id = locked(|st, _| {
        st.require_init()?;
        let id = st.context_of(h(ctx))?;
        if st.is_primary(id) {
            return Err(CUDA_ERROR_INVALID_CONTEXT);
        }
        st.destroy_context(id)?;
        Ok(id)
    })?;
    if entry::current() == Some(id) {
        entry::pop();
    }
    Ok(())
}

fn push(ctx: CUcontext) -> Result<(), CUresult> {
    let id = locked(|st, _| {
        st.require_init()?;
        st.context_of(h(ctx))
    })?;
    entry::push(id);
    Ok(())
}

fn pop(pctx: *mut CUcontext) -> Result<(), CUresult> {
    locked(|st, _| st.require_init())?;
    let id = entry::pop().ok_or(CUDA_ERROR_INVALID_CONTEXT)?;
    if !pctx.is_null() {
        // SAFETY: non-NULL out-parameter.
        unsafe { put(pctx, ptr(handle(Kind::Context, id))) };
    }
    Ok(())
}

/// The context an optional `CUcontext` argument names (NULL: the current one).
fn ctx_arg(st: &State, ctx: CUcontext, caller: &crate::state::Caller) -> Result<u64, CUresult> {
    if ctx.is_null() {
        st.current(caller)
    } else {
        st.context_of(h(ctx))
    }
}

fn synchronize(ctx: CUcontext) -> Result<(), CUresult> {
    locked(|st, caller| {
        st.require_init()?;
        let id = ctx_arg(st, ctx, caller)?;
        let before = st.host_now;
        st.wait_until(st.context_end(id));
        let (device, ctx) = st.context_place(id);
        crate::activity::report_sync(
            crate::cupti::CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE,
            (device, ctx, crate::activity::SIM_ID_NONE),
            crate::activity::SIM_ID_NONE,
            (before, st.host_now),
        );
        Ok(())
    })
}

fn get_device(device: *mut CUdevice, ctx: CUcontext) -> Result<(), CUresult> {
    locked(|st, caller| {
        st.require_init()?;
        need(device)?;
        let id = ctx_arg(st, ctx, caller)?;
        let dev = st.context_device(id)?;
        // SAFETY: checked non-NULL.
        unsafe { put(device, dev) };
        Ok(())
    })
}

api! {
    fn cuCtxCreate(pctx: *mut CUcontext, flags: c_uint, dev: CUdevice) {
        create(pctx, flags, dev)
    }

    fn cuCtxCreate_v2(pctx: *mut CUcontext, flags: c_uint, dev: CUdevice) {
        create(pctx, flags, dev)
    }

    /// The execution-affinity parameters are accepted and ignored.
    fn cuCtxCreate_v3(
        pctx: *mut CUcontext,
        paramsArray: *mut c_void,
        numParams: c_int,
        flags: c_uint,
        dev: CUdevice,
    ) {
        let _ = (paramsArray, numParams);
        create(pctx, flags, dev)
    }

    /// `ctxCreateParams` (`CUctxCreateParams *`, may be NULL) is accepted and ignored.
    fn cuCtxCreate_v4(
        pctx: *mut CUcontext,
        ctxCreateParams: *mut c_void,
        flags: c_uint,
        dev: CUdevice,
    ) {
        let _ = ctxCreateParams;
        create(pctx, flags, dev)
    }

    fn cuCtxDestroy_v2(ctx: CUcontext) {
        destroy(ctx)
    }

    fn cuCtxDestroy(ctx: CUcontext) {
        destroy(ctx)
    }

    fn cuCtxSetCurrent(ctx: CUcontext) {
        let id = locked(|st, _| {
            st.require_init()?;
            if ctx.is_null() {
                Ok(None)
            } else {
                st.context_of(h(ctx)).map(Some)
            }
        })?;
        entry::set_current(id);
        Ok(())
    }

    /// Lock-free: reads the calling thread's stack.
    fn cuCtxGetCurrent(pctx: *mut CUcontext) {
        if !entry::INITIALIZED.load(Ordering::Acquire) {
            return Err(CUDA_ERROR_NOT_INITIALIZED);
        }
        need(pctx)?;
        let cur = entry::current()
            .map_or(std::ptr::null_mut(), |id| ptr(handle(Kind::Context, id)));
        // SAFETY: checked non-NULL.
        unsafe { put(pctx, cur) };
        Ok(())
    }

    fn cuCtxGetDevice(device: *mut CUdevice) {
        get_device(device, std::ptr::null_mut())
    }

    fn cuCtxGetDevice_v2(device: *mut CUdevice, ctx: CUcontext) {
        get_device(device, ctx)
    }

    fn cuCtxSynchronize() {
        synchronize(std::ptr::null_mut())
    }

    fn cuCtxSynchronize_v2(ctx: CUcontext) {
        synchronize(ctx)
    }

    fn cuCtxPushCurrent_v2(ctx: CUcontext) {
        push(ctx)
    }

    fn cuCtxPushCurrent(ctx: CUcontext) {
        push(ctx)
    }

    fn cuCtxPopCurrent_v2(pctx: *mut CUcontext) {
        pop(pctx)
    }

    fn cuCtxPopCurrent(pctx: *mut CUcontext) {
        pop(pctx)
    }
}
