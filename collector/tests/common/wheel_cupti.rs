//! The real CUPTI 13.0 host library of the nvidia-cuda-cupti wheel (tools/setup-cuda.sh) the
//! tests evaluate with, no GPU needed: `$CUDA_INCLUDE/../lib/libcupti.so.13`, else the
//! workspace's .venv.

use std::path::{Path, PathBuf};

pub fn cupti_path() -> PathBuf {
    let lib = "libcupti.so.13";
    if let Some(inc) = std::env::var_os("CUDA_INCLUDE") {
        let p = Path::new(&inc).join("../lib").join(lib);
        if p.is_file() {
            return p;
        }
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../.venv/lib/python3.11/site-packages/nvidia/cu13/lib")
        .join(lib);
    assert!(
        venv.is_file(),
        "no {lib}: set CUDA_INCLUDE to the wheel's include directory (tools/setup-cuda.sh)"
    );
    venv
}
