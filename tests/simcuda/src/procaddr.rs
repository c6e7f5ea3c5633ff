//! What `cuGetProcAddress[_v2]` returns for a base name, a `cudaVersion` and flags.
//!
//! Each base name has the ABI versions of `cudaTypedefs.h` (`PFN_<name>_v<version>`): the
//! highest version not above the requested `cudaVersion` wins. With
//! `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM` (2) and `cudaVersion >= 7000`, the
//! `_ptsz`/`_ptds` variant of that version is returned where one exists; flags 0 (default) and 1
//! (legacy stream) give the plain one.

use std::sync::OnceLock;

use crate::api::context::*;
use crate::api::device::*;
use crate::api::memory::*;
use crate::api::misc::*;
use crate::api::module::*;
use crate::api::stream::*;

/// `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM`
pub const PER_THREAD_DEFAULT_STREAM: u64 = 2;
/// The first CUDA version with per-thread default stream entry points.
pub const PTSZ_SINCE: i32 = 7000;

/// An exported symbol: its name and address.
type Sym = (&'static str, usize);

struct Version {
    since: i32,
    plain: Sym,
    ptsz: Option<Sym>,
}

struct Entry {
    base: &'static str,
    versions: Vec<Version>,
}

macro_rules! sym {
    ($f:ident) => {
        (stringify!($f), $f as *const () as usize)
    };
}

/// `base: since => symbol [| per-thread symbol], ...;` with versions in increasing order.
macro_rules! entries {
    ($($base:ident: $($since:literal => $plain:ident $(| $pt:ident)?),+;)*) => {
        vec![$(Entry {
            base: stringify!($base),
            versions: vec![$(Version {
                since: $since,
                plain: sym!($plain),
                ptsz: None $(.or(Some(sym!($pt))))?,
            }),+],
        }),*]
    };
}

fn table() -> &'static [Entry] {
    static TABLE: OnceLock<Vec<Entry>> = OnceLock::new();
    TABLE.get_or_init(|| {
        entries! {
            cuInit: 2000 => cuInit;
            cuDriverGetVersion: 2020 => cuDriverGetVersion;
            cuDeviceGet: 2000 => cuDeviceGet;
            cuDeviceGetCount: 2000 => cuDeviceGetCount;
            cuDeviceGetName: 2000 => cuDeviceGetName;
            cuDeviceGetAttribute: 2000 => cuDeviceGetAttribute;
            cuDeviceTotalMem: 2000 => cuDeviceTotalMem, 3020 => cuDeviceTotalMem_v2;
            cuDevicePrimaryCtxRetain: 7000 => cuDevicePrimaryCtxRetain;
            cuDevicePrimaryCtxRelease:
                7000 => cuDevicePrimaryCtxRelease, 11000 => cuDevicePrimaryCtxRelease_v2;
            cuCtxCreate: 2000 => cuCtxCreate, 3020 => cuCtxCreate_v2, 11040 => cuCtxCreate_v3,
                12050 => cuCtxCreate_v4;
            cuCtxDestroy: 2000 => cuCtxDestroy, 4000 => cuCtxDestroy_v2;
            cuCtxSetCurrent: 4000 => cuCtxSetCurrent;
            cuCtxGetCurrent: 4000 => cuCtxGetCurrent;
            cuCtxGetDevice: 2000 => cuCtxGetDevice, 13000 => cuCtxGetDevice_v2;
            cuCtxSynchronize: 2000 => cuCtxSynchronize, 13000 => cuCtxSynchronize_v2;
            cuCtxPushCurrent: 2000 => cuCtxPushCurrent, 4000 => cuCtxPushCurrent_v2;
            cuCtxPopCurrent: 2000 => cuCtxPopCurrent, 4000 => cuCtxPopCurrent_v2;
            cuMemAlloc: 2000 => cuMemAlloc, 3020 => cuMemAlloc_v2;
            cuMemFree: 2000 => cuMemFree, 3020 => cuMemFree_v2;
            cuMemAllocHost: 2000 => cuMemAllocHost, 3020 => cuMemAllocHost_v2;
            cuMemFreeHost: 2000 => cuMemFreeHost;
            cuMemcpyHtoD: 2000 => cuMemcpyHtoD, 3020 => cuMemcpyHtoD_v2 | cuMemcpyHtoD_v2_ptds;
            cuMemcpyDtoH: 2000 => cuMemcpyDtoH, 3020 => cuMemcpyDtoH_v2 | cuMemcpyDtoH_v2_ptds;
            cuMemcpyDtoD: 2000 => cuMemcpyDtoD, 3020 => cuMemcpyDtoD_v2 | cuMemcpyDtoD_v2_ptds;
            cuMemcpyHtoDAsync: 2000 => cuMemcpyHtoDAsync,
                3020 => cuMemcpyHtoDAsync_v2 | cuMemcpyHtoDAsync_v2_ptsz;
            cuMemcpyDtoHAsync: 2000 => cuMemcpyDtoHAsync,
                3020 => cuMemcpyDtoHAsync_v2 | cuMemcpyDtoHAsync_v2_ptsz;
            cuMemcpyAsync: 4000 => cuMemcpyAsync | cuMemcpyAsync_ptsz;
            cuMemsetD8: 2000 => cuMemsetD8, 3020 => cuMemsetD8_v2 | cuMemsetD8_v2_ptds;
            cuMemsetD32: 2000 => cuMemsetD32, 3020 => cuMemsetD32_v2 | cuMemsetD32_v2_ptds;
            cuMemsetD8Async: 3020 => cuMemsetD8Async | cuMemsetD8Async_ptsz;
            cuMemsetD32Async: 3020 => cuMemsetD32Async | cuMemsetD32Async_ptsz;
            cuStreamCreate: 2000 => cuStreamCreate;
            cuStreamCreateWithPriority: 5050 => cuStreamCreateWithPriority;
            cuStreamDestroy: 2000 => cuStreamDestroy, 4000 => cuStreamDestroy_v2;
            cuStreamSynchronize: 2000 => cuStreamSynchronize | cuStreamSynchronize_ptsz;
            cuStreamQuery: 2000 => cuStreamQuery | cuStreamQuery_ptsz;
            cuStreamWaitEvent: 3020 => cuStreamWaitEvent | cuStreamWaitEvent_ptsz;
            cuEventCreate: 2000 => cuEventCreate;
            cuEventRecord: 2000 => cuEventRecord | cuEventRecord_ptsz;
            cuEventQuery: 2000 => cuEventQuery;
            cuEventSynchronize: 2000 => cuEventSynchronize;
            cuEventElapsedTime: 2000 => cuEventElapsedTime, 12080 => cuEventElapsedTime_v2;
            cuEventDestroy: 2000 => cuEventDestroy, 4000 => cuEventDestroy_v2;
            cuProfilerStart: 4000 => cuProfilerStart;
            cuProfilerStop: 4000 => cuProfilerStop;
            cuModuleLoadData: 2000 => cuModuleLoadData;
            cuModuleUnload: 2000 => cuModuleUnload;
            cuModuleGetFunction: 2000 => cuModuleGetFunction;
            cuLaunchKernel: 4000 => cuLaunchKernel | cuLaunchKernel_ptsz;
            cuFuncGetAttribute: 2020 => cuFuncGetAttribute;
            cuFuncGetName: 12030 => cuFuncGetName;
            cuGetErrorString: 6000 => cuGetErrorString;
            cuGetErrorName: 6000 => cuGetErrorName;
            cuGetExportTable: 3000 => cuGetExportTable;
            cuGetProcAddress: 11030 => cuGetProcAddress, 12000 => cuGetProcAddress_v2;
        }
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The address of the exported function.
    Found(usize),
    /// No such base name (names with a `_v2`/`_ptsz` suffix are not base names).
    NotFound,
    /// The name exists, but not in any version `<= cudaVersion`.
    VersionTooLow,
}

/// The symbol name `cuGetProcAddress` resolves to, or why none.
pub fn resolve_name(base: &[u8], cuda_version: i32, flags: u64) -> Result<&'static str, Lookup> {
    let entry = table()
        .iter()
        .find(|e| e.base.as_bytes() == base)
        .ok_or(Lookup::NotFound)?;
    let v = entry
        .versions
        .iter()
        .rev()
        .find(|v| v.since <= cuda_version)
        .ok_or(Lookup::VersionTooLow)?;
    let per_thread = flags == PER_THREAD_DEFAULT_STREAM && cuda_version >= PTSZ_SINCE;
    Ok(match (per_thread, v.ptsz) {
        (true, Some(pt)) => pt.0,
        _ => v.plain.0,
    })
}

pub fn resolve(base: &[u8], cuda_version: i32, flags: u64) -> Lookup {
    match resolve_name(base, cuda_version, flags) {
        Ok(name) => Lookup::Found(address(name).unwrap_or(0)),
        Err(e) => e,
    }
}

fn symbols() -> impl Iterator<Item = Sym> {
    table().iter().flat_map(|e| {
        e.versions
            .iter()
            .flat_map(|v| std::iter::once(v.plain).chain(v.ptsz))
    })
}

fn address(name: &str) -> Option<usize> {
    symbols().find(|s| s.0 == name).map(|s| s.1)
}

/// Every function the library exports (each is reachable through `cuGetProcAddress`).
pub fn exports() -> impl Iterator<Item = &'static str> {
    symbols().map(|s| s.0)
}

pub fn is_export(name: &str) -> bool {
    exports().any(|s| s == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(name: &str, v: i32, flags: u64) -> Result<&'static str, Lookup> {
        resolve_name(name.as_bytes(), v, flags)
    }

    #[test]
    fn versions_and_flags() {
        assert_eq!(r("cuMemAlloc", 13000, 0), Ok("cuMemAlloc_v2"));
        assert_eq!(r("cuMemAlloc", 3020, 0), Ok("cuMemAlloc_v2"));
        assert_eq!(r("cuMemAlloc", 3010, 0), Ok("cuMemAlloc"));
        assert_eq!(r("cuMemAlloc", 2000, 2), Ok("cuMemAlloc"));
        assert_eq!(r("cuMemcpyAsync", 13000, 0), Ok("cuMemcpyAsync"));
        assert_eq!(r("cuMemcpyAsync", 13000, 1), Ok("cuMemcpyAsync"));
        assert_eq!(r("cuMemcpyAsync", 13000, 2), Ok("cuMemcpyAsync_ptsz"));
        assert_eq!(r("cuMemcpyAsync", 6050, 2), Ok("cuMemcpyAsync"));
        assert_eq!(r("cuMemcpyHtoD", 13000, 2), Ok("cuMemcpyHtoD_v2_ptds"));
        assert_eq!(r("cuMemcpyHtoD", 3000, 2), Ok("cuMemcpyHtoD"));
        assert_eq!(r("cuLaunchKernel", 13000, 2), Ok("cuLaunchKernel_ptsz"));
        assert_eq!(r("cuCtxCreate", 13000, 0), Ok("cuCtxCreate_v4"));
        assert_eq!(r("cuCtxCreate", 12000, 0), Ok("cuCtxCreate_v3"));
        assert_eq!(r("cuCtxSynchronize", 12090, 0), Ok("cuCtxSynchronize"));
        assert_eq!(r("cuCtxSynchronize", 13000, 0), Ok("cuCtxSynchronize_v2"));
        assert_eq!(
            r("cuEventElapsedTime", 12080, 0),
            Ok("cuEventElapsedTime_v2")
        );
        assert_eq!(r("cuEventElapsedTime", 12060, 0), Ok("cuEventElapsedTime"));
        assert_eq!(r("cuGetProcAddress", 12000, 0), Ok("cuGetProcAddress_v2"));
        assert_eq!(r("cuGetProcAddress", 11030, 0), Ok("cuGetProcAddress"));
        assert_eq!(r("cuGetProcAddress", 11020, 0), Err(Lookup::VersionTooLow));
        assert_eq!(
            r("cuStreamCreateWithPriority", 5000, 0),
            Err(Lookup::VersionTooLow)
        );
        assert_eq!(r("cuMemAlloc_v2", 13000, 0), Err(Lookup::NotFound));
        assert_eq!(r("cuNope", 13000, 0), Err(Lookup::NotFound));
    }

    #[test]
    fn exports_are_unique_and_resolvable() {
        let mut names: Vec<_> = exports().collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
        assert!(is_export("cuMemsetD8Async_ptsz") && !is_export("cuMemsetD8Async_v2"));
        assert!(names.iter().all(|n| address(n).is_some_and(|a| a != 0)));
    }
}
