//! The nvdisasm the SASS tests run (tests/sass.rs, tests/source_counters.rs): $NVDISASM, else
//! the one beside $CUDA_INCLUDE (tools/setup-cuda.sh installs the nvidia-cuda-nvdisasm wheel),
//! else the workspace's .venv's, else nvdisasm on PATH.

use std::path::{Path, PathBuf};

pub fn nvdisasm() -> PathBuf {
    if let Some(p) = std::env::var_os("NVDISASM") {
        return PathBuf::from(p);
    }
    if let Some(inc) = std::env::var_os("CUDA_INCLUDE") {
        let p = Path::new(&inc).join("../bin/nvdisasm");
        if p.is_file() {
            return p;
        }
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../.venv/lib/python3.11/site-packages/nvidia/cu13/bin/nvdisasm");
    if venv.is_file() {
        return venv;
    }
    PathBuf::from("nvdisasm")
}
