//! simcupti: a simulated CUPTI 13.0 (`libcupti.so.13`) for testing rtrace's CUPTI client
//! without a GPU.
//!
//! It exports the activity API (and the driver domain of the callback API) with the exact C ABI
//! of CUPTI 13.0's headers, and writes activity records byte-exactly as CUPTI 13.0 lays them out
//! (`layout`, generated from the headers by tools/gen-cupti) for the operations of simcuda's
//! virtual GPU. simcuda reports every driver call and the GPU work it queued through a private
//! interface (`sim`, shared with simcuda); the rules are in README.md, which tests rely on.
//!
//! Layout: `api` holds the exported functions; `state` the state behind one lock and what each
//! reported call becomes; `records` the record encoders; `buffer` the client's buffers and
//! record iteration; `worker` the thread that hands completed buffers back; `pcsampling` the
//! PC Sampling API; `profiler` the kernel profiler's rules and images, `profiling` its state,
//! `profiler_host` and `range_profiler` its exported functions.

#![deny(unsafe_op_in_unsafe_fn)]

mod api;
mod buffer;
/// CUPTI's constants and record layouts (generated from the CUPTI headers by tools/gen-cupti).
#[allow(dead_code)]
#[path = "../../../inject/src/generated/cupti.rs"]
mod layout;
/// The pthread mutex simcuda uses, fork-safe through `pthread_atfork`.
#[allow(dead_code)]
#[path = "../../simcuda/src/lock.rs"]
mod lock;
mod pcsampling;
mod pm_sampling;
mod profiler;
mod profiler_host;
mod profiling;
mod range_profiler;
mod records;
mod runtime;
mod sass_metrics;
/// The private interface to simcuda.
#[path = "../../simcuda/src/activity_abi.rs"]
mod sim;
mod state;
mod worker;
