//! Streams and events.

use std::os::raw::{c_float, c_int, c_uint};

use super::{h, need, ptr, put};
use crate::activity::{self, SIM_ID_NONE};
use crate::cupti::{
    CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE as EVENT_SYNCHRONIZE,
    CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE as STREAM_SYNCHRONIZE,
    CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT as STREAM_WAIT_EVENT,
};
use crate::entry::locked;
use crate::errors::*;
use crate::state::{handle, Kind, GREATEST_PRIORITY, LEAST_PRIORITY};
use crate::types::*;

/// `CU_EVENT_WAIT_EXTERNAL`, the only flag of `cuStreamWaitEvent`.
const EVENT_WAIT_EXTERNAL: c_uint = 0x1;

fn create(phStream: *mut CUstream, flags: c_uint, priority: c_int) -> Result<(), CUresult> {
    locked(|st, caller| {
        st.require_init()?;
        need(phStream)?;
        let ctx = st.current(caller)?;
        // Out-of-range priorities are clamped, as the real driver does.
        let priority = priority.clamp(GREATEST_PRIORITY, LEAST_PRIORITY);
        let id = st.create_stream(ctx, flags)?;
        activity::report_stream(st.stream_place(id), flags, priority);
        // SAFETY: checked non-NULL.
        unsafe { put(phStream, ptr(handle(Kind::Stream, id))) };
        Ok(())
    })
}

fn destroy(hStream: CUstream) -> Result<(), CUresult> {
    locked(|st, _| {
        st.require_init()?;
        st.destroy_stream(h(hStream))
    })
}

/// The host waits for the stream's last operation.
fn synchronize(hStream: CUstream, ptsz: bool) -> Result<(), CUresult> {
    locked(|st, caller| {
        st.require_init()?;
        let sid = st.resolve_stream(h(hStream), ptsz, caller)?;
        let before = st.host_now;
        st.wait_until(st.stream_end(sid));
        let wait = (before, st.host_now);
        activity::report_sync(STREAM_SYNCHRONIZE, st.stream_place(sid), SIM_ID_NONE, wait);
        Ok(())
    })
}

fn query(hStream: CUstream, ptsz: bool) -> Result<(), CUresult> {
    locked(|st, caller| {
        st.require_init()?;
        let sid = st.resolve_stream(h(hStream), ptsz, caller)?;
        // CUPTI reports a query as a synchronization that does not wait.
        let now = (st.host_now, st.host_now);
        activity::report_sync(STREAM_SYNCHRONIZE, st.stream_place(sid), SIM_ID_NONE, now);
        if st.stream_end(sid) > st.host_now {
            Err(CUDA_ERROR_NOT_READY)
        } else {
            Ok(())
        }
    })
}

fn wait_event(
    hStream: CUstream,
    hEvent: CUevent,
    flags: c_uint,
    ptsz: bool,
) -> Result<(), CUresult> {
    locked(|st, caller| {
        st.require_init()?;
        if flags & !EVENT_WAIT_EXTERNAL != 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let sid = st.resolve_stream(h(hStream), ptsz, caller)?;
        st.wait_event(sid, h(hEvent))?;
        let (_, _, event) = st.event_place(h(hEvent))?;
        let now = (st.host_now, st.host_now);
        activity::report_sync(STREAM_WAIT_EVENT, st.stream_place(sid), event, now);
        Ok(())
    })
}

fn record(hEvent: CUevent, hStream: CUstream, ptsz: bool) -> Result<(), CUresult> {
    locked(|st, caller| {
        st.require_init()?;
        let sid = st.resolve_stream(h(hStream), ptsz, caller)?;
        st.record_event(h(hEvent), sid).map(|_| ())
    })
}

fn elapsed(pMilliseconds: *mut c_float, hStart: CUevent, hEnd: CUevent) -> Result<(), CUresult> {
    locked(|st, _| {
        st.require_init()?;
        need(pMilliseconds)?;
        let ms = st.elapsed(h(hStart), h(hEnd))?;
        // SAFETY: checked non-NULL.
        unsafe { put(pMilliseconds, ms) };
        Ok(())
    })
}

fn destroy_event(hEvent: CUevent) -> Result<(), CUresult> {
    locked(|st, _| {
        st.require_init()?;
        st.destroy_event(h(hEvent))
    })
}

api! {
    fn cuStreamCreate(phStream: *mut CUstream, Flags: c_uint) {
        create(phStream, Flags, 0)
    }

    fn cuStreamCreateWithPriority(phStream: *mut CUstream, flags: c_uint, priority: c_int) {
        create(phStream, flags, priority)
    }

    fn cuStreamDestroy_v2(hStream: CUstream) {
        destroy(hStream)
    }

    fn cuStreamDestroy(hStream: CUstream) {
        destroy(hStream)
    }

    fn cuStreamSynchronize(hStream: CUstream) {
        synchronize(hStream, false)
    }

    fn cuStreamSynchronize_ptsz(hStream: CUstream) {
        synchronize(hStream, true)
    }

    fn cuStreamQuery(hStream: CUstream) {
        query(hStream, false)
    }

    fn cuStreamQuery_ptsz(hStream: CUstream) {
        query(hStream, true)
    }

    fn cuStreamWaitEvent(hStream: CUstream, hEvent: CUevent, Flags: c_uint) {
        wait_event(hStream, hEvent, Flags, false)
    }

    fn cuStreamWaitEvent_ptsz(hStream: CUstream, hEvent: CUevent, Flags: c_uint) {
        wait_event(hStream, hEvent, Flags, true)
    }

    fn cuEventCreate(phEvent: *mut CUevent, Flags: c_uint) {
        locked(|st, caller| {
            st.require_init()?;
            need(phEvent)?;
            let ctx = st.current(caller)?;
            let id = st.create_event(ctx, Flags)?;
            // SAFETY: checked non-NULL.
            unsafe { put(phEvent, ptr(handle(Kind::Event, id))) };
            Ok(())
        })
    }

    fn cuEventRecord(hEvent: CUevent, hStream: CUstream) {
        record(hEvent, hStream, false)
    }

    fn cuEventRecord_ptsz(hEvent: CUevent, hStream: CUstream) {
        record(hEvent, hStream, true)
    }

    fn cuEventQuery(hEvent: CUevent) {
        locked(|st, _| {
            st.require_init()?;
            let (device, ctx, event) = st.event_place(h(hEvent))?;
            // CUPTI reports a query as a synchronization that does not wait.
            let now = (st.host_now, st.host_now);
            activity::report_sync(EVENT_SYNCHRONIZE, (device, ctx, SIM_ID_NONE), event, now);
            st.query_event(h(hEvent))
        })
    }

    fn cuEventSynchronize(hEvent: CUevent) {
        locked(|st, _| {
            st.require_init()?;
            let (device, ctx, event) = st.event_place(h(hEvent))?;
            let before = st.host_now;
            if let Some(t) = st.event_time(h(hEvent))? {
                st.wait_until(t);
            }
            let wait = (before, st.host_now);
            activity::report_sync(EVENT_SYNCHRONIZE, (device, ctx, SIM_ID_NONE), event, wait);
            Ok(())
        })
    }

    fn cuEventElapsedTime(pMilliseconds: *mut c_float, hStart: CUevent, hEnd: CUevent) {
        elapsed(pMilliseconds, hStart, hEnd)
    }

    fn cuEventElapsedTime_v2(pMilliseconds: *mut c_float, hStart: CUevent, hEnd: CUevent) {
        elapsed(pMilliseconds, hStart, hEnd)
    }

    fn cuEventDestroy_v2(hEvent: CUevent) {
        destroy_event(hEvent)
    }

    fn cuEventDestroy(hEvent: CUevent) {
        destroy_event(hEvent)
    }

    /// Profiling is a tool's business: both succeed once the driver is initialised.
    fn cuProfilerStart() {
        locked(|st, _| st.require_init())
    }

    fn cuProfilerStop() {
        locked(|st, _| st.require_init())
    }
}
