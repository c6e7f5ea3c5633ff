//! The `CUresult` codes of CUDA 13.0 with the names and messages that `cuGetErrorName` and
//! `cuGetErrorString` return.
//!
//! Generated once from the `cudaError_enum` of `cuda.h` (13.0.88): a short driver-style message
//! for the common codes, the first sentence of the header's doc comment for the others.

use std::ffi::CStr;

/// `CUresult`: a C enum, passed as an `int`.
pub type CUresult = std::os::raw::c_int;

pub const CUDA_SUCCESS: CUresult = 0;
pub const CUDA_ERROR_INVALID_VALUE: CUresult = 1;
pub const CUDA_ERROR_OUT_OF_MEMORY: CUresult = 2;
pub const CUDA_ERROR_NOT_INITIALIZED: CUresult = 3;
pub const CUDA_ERROR_NO_DEVICE: CUresult = 100;
pub const CUDA_ERROR_INVALID_DEVICE: CUresult = 101;
pub const CUDA_ERROR_INVALID_IMAGE: CUresult = 200;
pub const CUDA_ERROR_INVALID_CONTEXT: CUresult = 201;
pub const CUDA_ERROR_INVALID_HANDLE: CUresult = 400;
pub const CUDA_ERROR_NOT_FOUND: CUresult = 500;
pub const CUDA_ERROR_NOT_READY: CUresult = 600;
pub const CUDA_ERROR_ILLEGAL_ADDRESS: CUresult = 700;
pub const CUDA_ERROR_NOT_SUPPORTED: CUresult = 801;
pub const CUDA_ERROR_UNKNOWN: CUresult = 999;

/// `(code, name, message)`, sorted by code.
pub static ERRORS: &[(CUresult, &CStr, &CStr)] = &[
    (0, c"CUDA_SUCCESS", c"no error"),
    (1, c"CUDA_ERROR_INVALID_VALUE", c"invalid argument"),
    (2, c"CUDA_ERROR_OUT_OF_MEMORY", c"out of memory"),
    (3, c"CUDA_ERROR_NOT_INITIALIZED", c"initialization error"),
    (4, c"CUDA_ERROR_DEINITIALIZED", c"driver shutting down"),
    (5, c"CUDA_ERROR_PROFILER_DISABLED", c"This indicates profiler is not initialized for this run"),
    (6, c"CUDA_ERROR_PROFILER_NOT_INITIALIZED", c"This error return is deprecated as of CUDA 5.0"),
    (7, c"CUDA_ERROR_PROFILER_ALREADY_STARTED", c"This error return is deprecated as of CUDA 5.0"),
    (8, c"CUDA_ERROR_PROFILER_ALREADY_STOPPED", c"This error return is deprecated as of CUDA 5.0"),
    (34, c"CUDA_ERROR_STUB_LIBRARY", c"This indicates that the CUDA driver that the application has loaded is a stub library"),
    (36, c"CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", c"This indicates that the API call requires a newer CUDA driver than the one currently installed"),
    (46, c"CUDA_ERROR_DEVICE_UNAVAILABLE", c"This indicates that requested CUDA device is unavailable at the current time"),
    (100, c"CUDA_ERROR_NO_DEVICE", c"no CUDA-capable device is detected"),
    (101, c"CUDA_ERROR_INVALID_DEVICE", c"invalid device ordinal"),
    (102, c"CUDA_ERROR_DEVICE_NOT_LICENSED", c"This error indicates that the Grid license is not applied"),
    (200, c"CUDA_ERROR_INVALID_IMAGE", c"device kernel image is invalid"),
    (201, c"CUDA_ERROR_INVALID_CONTEXT", c"invalid device context"),
    (202, c"CUDA_ERROR_CONTEXT_ALREADY_CURRENT", c"This indicated that the context being supplied as a parameter to the API call was already the active context"),
    (205, c"CUDA_ERROR_MAP_FAILED", c"This indicates that a map or register operation has failed"),
    (206, c"CUDA_ERROR_UNMAP_FAILED", c"This indicates that an unmap or unregister operation has failed"),
    (207, c"CUDA_ERROR_ARRAY_IS_MAPPED", c"This indicates that the specified array is currently mapped and thus cannot be destroyed"),
    (208, c"CUDA_ERROR_ALREADY_MAPPED", c"This indicates that the resource is already mapped"),
    (209, c"CUDA_ERROR_NO_BINARY_FOR_GPU", c"This indicates that there is no kernel image available that is suitable for the device"),
    (210, c"CUDA_ERROR_ALREADY_ACQUIRED", c"This indicates that a resource has already been acquired"),
    (211, c"CUDA_ERROR_NOT_MAPPED", c"This indicates that a resource is not mapped"),
    (212, c"CUDA_ERROR_NOT_MAPPED_AS_ARRAY", c"This indicates that a mapped resource is not available for access as an array"),
    (213, c"CUDA_ERROR_NOT_MAPPED_AS_POINTER", c"This indicates that a mapped resource is not available for access as a pointer"),
    (214, c"CUDA_ERROR_ECC_UNCORRECTABLE", c"This indicates that an uncorrectable ECC error was detected during execution"),
    (215, c"CUDA_ERROR_UNSUPPORTED_LIMIT", c"This indicates that the CUlimit passed to the API call is not supported by the active device"),
    (216, c"CUDA_ERROR_CONTEXT_ALREADY_IN_USE", c"exclusive-thread device already in use by a different thread"),
    (217, c"CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", c"This indicates that peer access is not supported across the given devices"),
    (218, c"CUDA_ERROR_INVALID_PTX", c"a PTX JIT compilation failed"),
    (219, c"CUDA_ERROR_INVALID_GRAPHICS_CONTEXT", c"This indicates an error with OpenGL or DirectX context"),
    (220, c"CUDA_ERROR_NVLINK_UNCORRECTABLE", c"This indicates that an uncorrectable NVLink error was detected during the execution"),
    (221, c"CUDA_ERROR_JIT_COMPILER_NOT_FOUND", c"This indicates that the PTX JIT compiler library was not found"),
    (222, c"CUDA_ERROR_UNSUPPORTED_PTX_VERSION", c"This indicates that the provided PTX was compiled with an unsupported toolchain"),
    (223, c"CUDA_ERROR_JIT_COMPILATION_DISABLED", c"This indicates that the PTX JIT compilation was disabled"),
    (224, c"CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY", c"This indicates that the CUexecAffinityType passed to the API call is not supported by the active device"),
    (225, c"CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC", c"This indicates that the code to be compiled by the PTX JIT contains unsupported call to cudaDeviceSynchronize"),
    (226, c"CUDA_ERROR_CONTAINED", c"This indicates that an exception occurred on the device that is now contained by the GPU's error containment capability"),
    (300, c"CUDA_ERROR_INVALID_SOURCE", c"This indicates that the device kernel source is invalid"),
    (301, c"CUDA_ERROR_FILE_NOT_FOUND", c"This indicates that the file specified was not found"),
    (302, c"CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", c"This indicates that a link to a shared object failed to resolve"),
    (303, c"CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", c"This indicates that initialization of a shared object failed"),
    (304, c"CUDA_ERROR_OPERATING_SYSTEM", c"OS call failed or operation not supported on this OS"),
    (400, c"CUDA_ERROR_INVALID_HANDLE", c"invalid resource handle"),
    (401, c"CUDA_ERROR_ILLEGAL_STATE", c"This indicates that a resource required by the API call is not in a valid state to perform the requested operation"),
    (402, c"CUDA_ERROR_LOSSY_QUERY", c"This indicates an attempt was made to introspect an object in a way that would discard semantically important information"),
    (500, c"CUDA_ERROR_NOT_FOUND", c"named symbol not found"),
    (600, c"CUDA_ERROR_NOT_READY", c"device not ready"),
    (700, c"CUDA_ERROR_ILLEGAL_ADDRESS", c"an illegal memory access was encountered"),
    (701, c"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", c"too many resources requested for launch"),
    (702, c"CUDA_ERROR_LAUNCH_TIMEOUT", c"This indicates that the device kernel took too long to execute"),
    (703, c"CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING", c"This error indicates a kernel launch that uses an incompatible texturing mode"),
    (704, c"CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", c"This error indicates that a call to cuCtxEnablePeerAccess() is trying to re-enable peer access to a context which has already had peer access to it enabled"),
    (705, c"CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", c"peer access is not enabled"),
    (708, c"CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", c"This error indicates that the primary context for the specified device has already been initialized"),
    (709, c"CUDA_ERROR_CONTEXT_IS_DESTROYED", c"This error indicates that the context current to the calling thread has been destroyed using cuCtxDestroy, or is a primary context which has not yet been initialized"),
    (710, c"CUDA_ERROR_ASSERT", c"A device-side assert triggered during kernel execution"),
    (711, c"CUDA_ERROR_TOO_MANY_PEERS", c"This error indicates that the hardware resources required to enable peer access have been exhausted for one or more of the devices passed to cuCtxEnablePeerAccess()"),
    (712, c"CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", c"This error indicates that the memory range passed to cuMemHostRegister() has already been registered"),
    (713, c"CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", c"This error indicates that the pointer passed to cuMemHostUnregister() does not correspond to any currently registered memory region"),
    (714, c"CUDA_ERROR_HARDWARE_STACK_ERROR", c"While executing a kernel, the device encountered a stack error"),
    (715, c"CUDA_ERROR_ILLEGAL_INSTRUCTION", c"While executing a kernel, the device encountered an illegal instruction"),
    (716, c"CUDA_ERROR_MISALIGNED_ADDRESS", c"While executing a kernel, the device encountered a load or store instruction on a memory address which is not aligned"),
    (717, c"CUDA_ERROR_INVALID_ADDRESS_SPACE", c"While executing a kernel, the device encountered an instruction which can only operate on memory locations in certain address spaces (global, shared, or local), but was supplied a memory address not belonging to an allowed address space"),
    (718, c"CUDA_ERROR_INVALID_PC", c"While executing a kernel, the device program counter wrapped its address space"),
    (719, c"CUDA_ERROR_LAUNCH_FAILED", c"unspecified launch failure"),
    (720, c"CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", c"This error indicates that the number of blocks launched per grid for a kernel that was launched via either cuLaunchCooperativeKernel or cuLaunchCooperativeKernelMultiDevice exceeds the maximum number of blocks as allowed by cuOccupancyMaxActiveBlocksPerMultiprocessor or cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags times the number of multiprocessors as specified by the device attribute CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
    (721, c"CUDA_ERROR_TENSOR_MEMORY_LEAK", c"An exception occurred on the device while exiting a kernel using tensor memory: the tensor memory was not completely deallocated"),
    (800, c"CUDA_ERROR_NOT_PERMITTED", c"This error indicates that the attempted operation is not permitted"),
    (801, c"CUDA_ERROR_NOT_SUPPORTED", c"operation not supported"),
    (802, c"CUDA_ERROR_SYSTEM_NOT_READY", c"This error indicates that the system is not yet ready to start any CUDA work"),
    (803, c"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", c"This error indicates that there is a mismatch between the versions of the display driver and the CUDA driver"),
    (804, c"CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", c"This error indicates that the system was upgraded to run with forward compatibility but the visible hardware detected by CUDA does not support this configuration"),
    (805, c"CUDA_ERROR_MPS_CONNECTION_FAILED", c"This error indicates that the MPS client failed to connect to the MPS control daemon or the MPS server"),
    (806, c"CUDA_ERROR_MPS_RPC_FAILURE", c"This error indicates that the remote procedural call between the MPS server and the MPS client failed"),
    (807, c"CUDA_ERROR_MPS_SERVER_NOT_READY", c"This error indicates that the MPS server is not ready to accept new MPS client requests"),
    (808, c"CUDA_ERROR_MPS_MAX_CLIENTS_REACHED", c"This error indicates that the hardware resources required to create MPS client have been exhausted"),
    (809, c"CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED", c"This error indicates the the hardware resources required to support device connections have been exhausted"),
    (810, c"CUDA_ERROR_MPS_CLIENT_TERMINATED", c"This error indicates that the MPS client has been terminated by the server"),
    (811, c"CUDA_ERROR_CDP_NOT_SUPPORTED", c"This error indicates that the module is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not support it"),
    (812, c"CUDA_ERROR_CDP_VERSION_MISMATCH", c"This error indicates that a module contains an unsupported interaction between different versions of CUDA Dynamic Parallelism"),
    (900, c"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", c"This error indicates that the operation is not permitted when the stream is capturing"),
    (901, c"CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", c"This error indicates that the current capture sequence on the stream has been invalidated due to a previous error"),
    (902, c"CUDA_ERROR_STREAM_CAPTURE_MERGE", c"This error indicates that the operation would have resulted in a merge of two independent capture sequences"),
    (903, c"CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", c"This error indicates that the capture was not initiated in this stream"),
    (904, c"CUDA_ERROR_STREAM_CAPTURE_UNJOINED", c"This error indicates that the capture sequence contains a fork that was not joined to the primary stream"),
    (905, c"CUDA_ERROR_STREAM_CAPTURE_ISOLATION", c"This error indicates that a dependency would have been created which crosses the capture sequence boundary"),
    (906, c"CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", c"This error indicates a disallowed implicit dependency on a current capture sequence from cudaStreamLegacy"),
    (907, c"CUDA_ERROR_CAPTURED_EVENT", c"This error indicates that the operation is not permitted on an event which was last recorded in a capturing stream"),
    (908, c"CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", c"A stream capture sequence not initiated with the CU_STREAM_CAPTURE_MODE_RELAXED argument to cuStreamBeginCapture was passed to cuStreamEndCapture in a different thread"),
    (909, c"CUDA_ERROR_TIMEOUT", c"This error indicates that the timeout specified for the wait operation has lapsed"),
    (910, c"CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", c"This error indicates that the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"),
    (911, c"CUDA_ERROR_EXTERNAL_DEVICE", c"This indicates that an async error has occurred in a device outside of CUDA"),
    (912, c"CUDA_ERROR_INVALID_CLUSTER_SIZE", c"Indicates a kernel launch error due to cluster misconfiguration"),
    (913, c"CUDA_ERROR_FUNCTION_NOT_LOADED", c"Indiciates a function handle is not loaded when calling an API that requires a loaded function"),
    (914, c"CUDA_ERROR_INVALID_RESOURCE_TYPE", c"This error indicates one or more resources passed in are not valid resource types for the operation"),
    (915, c"CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION", c"This error indicates one or more resources are insufficient or non-applicable for the operation"),
    (916, c"CUDA_ERROR_KEY_ROTATION", c"This error indicates that an error happened during the key rotation sequence"),
    (999, c"CUDA_ERROR_UNKNOWN", c"unknown error"),
];

/// The name and message of `code`, if `code` is a CUDA 13.0 `CUresult`.
pub fn lookup(code: CUresult) -> Option<(&'static CStr, &'static CStr)> {
    ERRORS
        .binary_search_by_key(&code, |e| e.0)
        .ok()
        .map(|i| (ERRORS[i].1, ERRORS[i].2))
}
