//! The GPUs of the process, as the driver describes them: name, memory and the
//! attributes ([`rtrace_format::DEVICE_ATTRIBUTES`]) that the collector needs for
//! theoretical occupancy and a profiler-style device description.
//!
//! Read through the real driver entry points ([`crate::driver::real`]) inside
//! [`crate::thread::internal`], so none of these calls is recorded. Needs an
//! initialised driver (`cuInit` done): before that, or without a driver, there
//! are no devices.
//!
//! The simulated driver (`tests/simcuda`) describes every device as an H100 SXM:
//! compute capability 9.0, 132 SMs, 1024 threads per block, 2048 threads and 32
//! blocks per SM, warp 32, 65536 registers per block and per SM, 48 KiB shared
//! memory per block (227 KiB opt-in), 228 KiB per SM, the clocks, bus width, L2,
//! grid and block limits, ECC on and PCI bus 0x18 + ordinal; every other
//! attribute reads 0 there, among them `RESERVED_SHARED_MEMORY_PER_BLOCK` (1 KiB
//! on a real H100), `PCI_DEVICE_ID`, `PCI_DOMAIN_ID`, `MULTI_GPU_BOARD` and
//! `COMPUTE_MODE` (0 is the default mode anyway).

use crate::generated::id;
use crate::{driver, thread};
use rtrace_format::{DeviceInfo, DEVICE_ATTRIBUTES};
use std::ffi::{c_char, c_int, c_void, CStr};

/// `CUDA_SUCCESS`.
const SUCCESS: u32 = 0;
/// Longest device name read (cuda.h's `cudaDeviceProp::name` is 256 bytes).
const NAME_LEN: usize = 256;

// The driver's ABI for these functions, as declared in cuda.h (`CUdevice` is an
// `int`, `CUdevice_attribute` a C enum).
type DeviceGetCountFn = unsafe extern "C" fn(*mut c_int) -> u32;
type DeviceGetFn = unsafe extern "C" fn(*mut c_int, c_int) -> u32;
type DeviceGetNameFn = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> u32;
type DeviceTotalMemFn = unsafe extern "C" fn(*mut usize, c_int) -> u32;
type DeviceGetAttributeFn = unsafe extern "C" fn(*mut c_int, u32, c_int) -> u32;

/// The real driver functions used here.
struct Driver {
    count: DeviceGetCountFn,
    get: DeviceGetFn,
    name: DeviceGetNameFn,
    total_mem: DeviceTotalMemFn,
    attribute: DeviceGetAttributeFn,
}

impl Driver {
    fn load() -> Option<Driver> {
        let real = |f: u32| {
            let p = driver::real(f);
            (!p.is_null()).then_some(p)
        };
        let (count, get, name, total_mem, attribute) = (
            real(id::cuDeviceGetCount)?,
            real(id::cuDeviceGet)?,
            real(id::cuDeviceGetName)?,
            real(id::cuDeviceTotalMem_v2)?,
            real(id::cuDeviceGetAttribute)?,
        );
        // SAFETY: each pointer is the driver's own entry point of that name (non-NULL), and
        // each type above is that function's signature in cuda.h.
        unsafe {
            Some(Driver {
                count: std::mem::transmute::<*mut c_void, DeviceGetCountFn>(count),
                get: std::mem::transmute::<*mut c_void, DeviceGetFn>(get),
                name: std::mem::transmute::<*mut c_void, DeviceGetNameFn>(name),
                total_mem: std::mem::transmute::<*mut c_void, DeviceTotalMemFn>(total_mem),
                attribute: std::mem::transmute::<*mut c_void, DeviceGetAttributeFn>(attribute),
            })
        }
    }

    fn count(&self) -> Option<c_int> {
        let mut n: c_int = 0;
        // SAFETY: `n` is a valid int out-parameter.
        (unsafe { (self.count)(&mut n) } == SUCCESS).then_some(n)
    }

    fn device(&self, ordinal: c_int) -> Option<c_int> {
        let mut dev: c_int = 0;
        // SAFETY: `dev` is a valid CUdevice out-parameter.
        (unsafe { (self.get)(&mut dev, ordinal) } == SUCCESS).then_some(dev)
    }

    fn name(&self, dev: c_int) -> String {
        let mut buf = [0 as c_char; NAME_LEN];
        // SAFETY: the buffer holds NAME_LEN bytes and the driver writes at most `len`,
        // NUL included.
        if unsafe { (self.name)(buf.as_mut_ptr(), NAME_LEN as c_int, dev) } != SUCCESS {
            return String::new();
        }
        buf[NAME_LEN - 1] = 0;
        // SAFETY: the buffer is NUL-terminated (its last byte at the latest).
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    fn total_memory(&self, dev: c_int) -> u64 {
        let mut bytes: usize = 0;
        // SAFETY: `bytes` is a valid size_t out-parameter.
        match unsafe { (self.total_mem)(&mut bytes, dev) } {
            SUCCESS => bytes as u64,
            _ => 0,
        }
    }

    fn attribute(&self, attrib: i32, dev: c_int) -> Option<i32> {
        let mut v: c_int = 0;
        // SAFETY: `v` is a valid int out-parameter; an attribute this driver does not
        // know is answered with an error, not undefined behaviour.
        (unsafe { (self.attribute)(&mut v, attrib as u32, dev) } == SUCCESS).then_some(v)
    }
}

/// One [`DeviceInfo`] per device the driver reports, in ordinal order; empty when
/// the driver is missing or not initialised. An attribute the driver refuses (an
/// older driver) is left out of [`DeviceInfo::attributes`]; a failed name or
/// memory query leaves `""` or 0. Nothing here is recorded in the trace.
// Called by the GPU activity code when it starts (one DeviceInfo chunk per device).
pub fn device_infos() -> Vec<DeviceInfo> {
    thread::internal(|| {
        thread::with_errno_saved(|| {
            let Some(driver) = Driver::load() else {
                return Vec::new();
            };
            let Some(count) = driver.count() else {
                return Vec::new();
            };
            (0..count.max(0))
                .filter_map(|ordinal| {
                    let dev = driver.device(ordinal)?;
                    Some(DeviceInfo {
                        ordinal: ordinal as u32,
                        name: driver.name(dev),
                        total_memory: driver.total_memory(dev),
                        attributes: DEVICE_ATTRIBUTES
                            .iter()
                            .filter_map(|&(a, _)| Some((a, driver.attribute(a, dev)?)))
                            .collect(),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtrace_format::attr;
    use std::process::Command;

    /// Set in the child process that runs [`reads_the_simulated_devices`].
    const CHILD: &str = "RTRACE_TEST_DEVICES_CHILD";

    /// Against the simulated driver (`target/<profile>/libcuda.so`, built with the
    /// workspace), in a child process so that `RTRACE_CUDA_LIBRARY` is read fresh.
    #[test]
    fn device_infos_of_the_simulated_driver() {
        let exe = std::env::current_exe().unwrap();
        let simcuda = exe.parent().unwrap().parent().unwrap().join("libcuda.so");
        if !simcuda.exists() {
            eprintln!("skipped: {} is not built", simcuda.display());
            return;
        }
        let out = Command::new(&exe)
            .args([
                "--exact",
                "devices::tests::reads_the_simulated_devices",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .env("RTRACE_CUDA_LIBRARY", &simcuda)
            .env("SIMCUDA_DEVICES", "2")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("1 passed"), "{text}");
    }

    #[test]
    #[ignore = "run by device_infos_of_the_simulated_driver in a child process"]
    fn reads_the_simulated_devices() {
        if std::env::var_os(CHILD).is_none() {
            return;
        }
        assert!(device_infos().is_empty(), "devices before cuInit");
        // SAFETY: the real cuInit(unsigned int), as declared in cuda.h.
        let init = unsafe {
            std::mem::transmute::<*mut c_void, unsafe extern "C" fn(u32) -> u32>(driver::real(
                id::cuInit,
            ))
        };
        // SAFETY: cuInit takes flags 0.
        assert_eq!(unsafe { init(0) }, SUCCESS);
        let devices = device_infos();
        assert_eq!(devices.len(), 2);
        for (i, d) in devices.iter().enumerate() {
            assert_eq!(d.ordinal, i as u32);
            assert_eq!(d.name, "NVIDIA H100 80GB HBM3 (simcuda)");
            assert!(d.total_memory > 0);
            assert_eq!(d.attributes.len(), DEVICE_ATTRIBUTES.len());
            assert_eq!(d.compute_capability(), Some((9, 0)));
            assert_eq!(d.attribute(attr::MULTIPROCESSOR_COUNT), Some(132));
            assert_eq!(
                d.attribute(attr::MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
                Some(233_472)
            );
            assert_eq!(d.attribute(attr::PCI_BUS_ID), Some(0x18 + i as i32));
            // Not simulated: reads 0.
            assert_eq!(d.attribute(attr::RESERVED_SHARED_MEMORY_PER_BLOCK), Some(0));
        }
        eprintln!("{} devices: {devices:?}", devices.len());
    }
}
