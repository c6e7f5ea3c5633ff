//! Where CUPTI is looked for when neither the program nor the user named one: the same places
//! for the library (GPU activity, PC sampling) and the collector (`rtrace metrics`).

/// CUPTI's shared library, by the name the loader's search path is asked for first.
pub const CUPTI_SONAME: &str = "libcupti.so.13";

/// Then these folders of a CUDA toolkit, in order, each for [`CUPTI_SONAME`].
pub const CUPTI_DIRS: [&str; 3] = [
    "/usr/local/cuda/extras/CUPTI/lib64",
    "/usr/local/cuda/targets/x86_64-linux/lib",
    "/usr/local/cuda-13.0/targets/x86_64-linux/lib",
];

/// The start of the notice librtrace.so writes when GPU activity started (`GPU activity on:
/// kernels, ... through CUPTI`).
pub const GPU_ACTIVITY_ON: &str = "GPU activity on";
/// The start of the notice librtrace.so writes when GPU activity could not start (`GPU
/// activity off: why`: CUPTI not found, held by another tool, ...).
pub const GPU_ACTIVITY_OFF: &str = "GPU activity off";
