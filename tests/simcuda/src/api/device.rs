//! Initialisation and devices.

use std::os::raw::{c_char, c_int, c_uint};
use std::sync::atomic::Ordering;

use super::{need, put};
use crate::config;
use crate::entry::{self, locked};
use crate::errors::*;
use crate::state::{handle, Kind, TOTAL_MEM};
use crate::types::*;

/// The value of `cuDriverGetVersion`.
pub const DRIVER_VERSION: c_int = 13000;
/// The name every device reports.
pub const DEVICE_NAME: &str = "NVIDIA H100 80GB HBM3 (simcuda)";
/// One past the last `CUdevice_attribute` of CUDA 13.0 (`CU_DEVICE_ATTRIBUTE_MAX`).
pub const DEVICE_ATTRIBUTE_MAX: c_int = 148;

/// The attributes that have a value other than 0 (an H100 SXM's).
pub fn device_attribute(attrib: c_int, dev: c_int) -> Option<c_int> {
    let v = match attrib {
        1 => 1024,        // MAX_THREADS_PER_BLOCK
        2 | 3 => 1024,    // MAX_BLOCK_DIM_X, _Y
        4 => 64,          // MAX_BLOCK_DIM_Z
        5 => i32::MAX,    // MAX_GRID_DIM_X
        6 | 7 => 65535,   // MAX_GRID_DIM_Y, _Z
        8 => 49152,       // MAX_SHARED_MEMORY_PER_BLOCK
        9 => 65536,       // TOTAL_CONSTANT_MEMORY
        10 => 32,         // WARP_SIZE
        11 => i32::MAX,   // MAX_PITCH
        12 => 65536,      // MAX_REGISTERS_PER_BLOCK
        13 => 1_980_000,  // CLOCK_RATE (kHz)
        15 => 1,          // GPU_OVERLAP
        16 => 132,        // MULTIPROCESSOR_COUNT
        19 => 1,          // CAN_MAP_HOST_MEMORY
        31 => 1,          // CONCURRENT_KERNELS
        32 => 1,          // ECC_ENABLED
        33 => 0x18 + dev, // PCI_BUS_ID
        36 => 2_619_000,  // MEMORY_CLOCK_RATE (kHz)
        37 => 5120,       // GLOBAL_MEMORY_BUS_WIDTH
        38 => 52_428_800, // L2_CACHE_SIZE
        39 => 2048,       // MAX_THREADS_PER_MULTIPROCESSOR
        40 => 3,          // ASYNC_ENGINE_COUNT
        41 => 1,          // UNIFIED_ADDRESSING
        75 => 9,          // COMPUTE_CAPABILITY_MAJOR
        76 => 0,          // COMPUTE_CAPABILITY_MINOR
        78 => 1,          // STREAM_PRIORITIES_SUPPORTED
        81 => 233_472,    // MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
        82 => 65536,      // MAX_REGISTERS_PER_MULTIPROCESSOR
        83 => 1,          // MANAGED_MEMORY
        97 => 232_448,    // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
        106 => 32,        // MAX_BLOCKS_PER_MULTIPROCESSOR
        0..DEVICE_ATTRIBUTE_MAX => 0,
        _ => return None,
    };
    Some(v)
}

api! {
    fn cuInit(Flags: c_uint) {
        locked(|st, _| {
            if Flags != 0 || config::get().error.is_some() {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            st.init()?;
            entry::INITIALIZED.store(true, Ordering::Release);
            Ok(())
        })
    }

    /// Lock-free.
    fn cuDriverGetVersion(driverVersion: *mut c_int) {
        need(driverVersion)?;
        // SAFETY: checked non-NULL; the caller passes an int out-parameter.
        unsafe { put(driverVersion, DRIVER_VERSION) };
        Ok(())
    }

    fn cuDeviceGetCount(count: *mut c_int) {
        locked(|st, _| {
            st.require_init()?;
            need(count)?;
            // SAFETY: checked non-NULL.
            unsafe { put(count, st.device_count()) };
            Ok(())
        })
    }

    fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int) {
        locked(|st, _| {
            st.require_init()?;
            need(device)?;
            st.check_device(ordinal)?;
            // SAFETY: checked non-NULL.
            unsafe { put(device, ordinal) };
            Ok(())
        })
    }

    fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) {
        locked(|st, _| {
            st.require_init()?;
            need(name)?;
            if len <= 0 {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            st.check_device(dev)?;
            let n = DEVICE_NAME.len().min(len as usize - 1);
            // SAFETY: the caller's buffer holds `len` bytes; we write n + 1 <= len.
            unsafe {
                std::ptr::copy_nonoverlapping(DEVICE_NAME.as_ptr().cast::<c_char>(), name, n);
                *name.add(n) = 0;
            }
            Ok(())
        })
    }

    fn cuDeviceGetAttribute(pi: *mut c_int, attrib: CUenum, dev: CUdevice) {
        locked(|st, _| {
            st.require_init()?;
            need(pi)?;
            st.check_device(dev)?;
            let v = device_attribute(attrib, dev).ok_or(CUDA_ERROR_INVALID_VALUE)?;
            // SAFETY: checked non-NULL.
            unsafe { put(pi, v) };
            Ok(())
        })
    }

    fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice) {
        locked(|st, _| {
            st.require_init()?;
            need(bytes)?;
            st.check_device(dev)?;
            // SAFETY: checked non-NULL.
            unsafe { put(bytes, TOTAL_MEM as usize) };
            Ok(())
        })
    }

    /// Legacy 32-bit variant: the total is clamped to `UINT_MAX`.
    fn cuDeviceTotalMem(bytes: *mut c_uint, dev: CUdevice) {
        locked(|st, _| {
            st.require_init()?;
            need(bytes)?;
            st.check_device(dev)?;
            // SAFETY: checked non-NULL.
            unsafe { put(bytes, TOTAL_MEM.min(u64::from(u32::MAX)) as c_uint) };
            Ok(())
        })
    }

    fn cuDevicePrimaryCtxRetain(pctx: *mut CUcontext, dev: CUdevice) {
        locked(|st, _| {
            st.require_init()?;
            need(pctx)?;
            let ctx = st.primary_retain(dev)?;
            // SAFETY: checked non-NULL.
            unsafe { put(pctx, super::ptr(handle(Kind::Context, ctx))) };
            Ok(())
        })
    }

    fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice) {
        primary_release(dev)
    }

    fn cuDevicePrimaryCtxRelease(dev: CUdevice) {
        primary_release(dev)
    }
}

/// Drops a reference to `dev`'s primary context; before the last one destroys it, tells a
/// simulated CUPTI while it is still alive (outside the lock).
fn primary_release(dev: CUdevice) -> Result<(), CUresult> {
    if crate::activity::wants_op() {
        let doomed = crate::entry::with_state(|st, _| st.primary_release_destroys(dev));
        if let Some((device, ctx)) = doomed {
            crate::activity::report_context_destroy((device as u32, ctx as u32));
        }
    }
    locked(|st, _| {
        st.require_init()?;
        st.primary_release(dev)
    })
}
