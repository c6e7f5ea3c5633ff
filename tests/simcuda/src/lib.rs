//! simcuda: a simulated CUDA driver (`libcuda.so.1`) for testing rtrace without a GPU.
//!
//! It exports a subset of the CUDA 13.0 driver API with the exact C ABI of `cuda.h`, backed by
//! a deterministic virtual GPU: device memory is host memory (copies and memsets move real
//! data), and every operation gets virtual start and end times from the rules in `README.md`,
//! which tests rely on to check exact numbers. Behaviour is tuned through `SIMCUDA_*`
//! environment variables (also in `README.md`), including fault injection.
//!
//! Layout: `api/` holds the exported functions (thin, `unsafe`, C ABI); `entry` wraps each of
//! them (fault injection, panic catching, errno); `state` is the safe virtual GPU behind one lock;
//! `procaddr` is the `cuGetProcAddress` table; `config` reads the environment; `activity` reports
//! every call and the GPU work it queued to a simulated CUPTI (`tests/simcupti`) through the
//! private interface of `activity_abi`.

#![deny(unsafe_op_in_unsafe_fn)]

mod activity;
mod activity_abi;
#[macro_use]
mod api;
mod config;
/// CUPTI's constants (generated from the CUPTI headers by tools/gen-cupti).
#[allow(dead_code)]
#[path = "../../../inject/src/generated/cupti.rs"]
mod cupti;
mod entry;
mod errors;
mod lock;
mod memory;
mod module;
mod procaddr;
mod state;
mod types;
