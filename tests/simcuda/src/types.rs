//! C types of `cuda.h` used in the exported signatures.

#![allow(non_camel_case_types)]

use std::os::raw::{c_int, c_uint, c_ulonglong, c_void};

pub type CUdevice = c_int;
/// `CUdeviceptr` (`CUdeviceptr_v2`): `unsigned long long`.
pub type CUdeviceptr = c_ulonglong;
/// The 32-bit device pointer of the legacy (pre-3.2) entry points.
pub type CUdeviceptr_v1 = c_uint;
pub type CUcontext = *mut c_void;
pub type CUmodule = *mut c_void;
pub type CUfunction = *mut c_void;
pub type CUstream = *mut c_void;
pub type CUevent = *mut c_void;
/// `CUdevice_attribute`, `CUfunction_attribute`, `CUdriverProcAddressQueryResult`: C enums.
pub type CUenum = c_int;
pub type cuuint64_t = u64;
