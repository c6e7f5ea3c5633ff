//! librtrace.so: records every CUDA driver API call of the process it is
//! preloaded into (`LD_PRELOAD=librtrace.so ./app`) and writes them to a
//! `trace.bin` file (see the `rtrace-format` crate).
//!
//! Architecture (shims → guard → real function → record → core):
//! - [`generated`]: one exported wrapper per driver entry point, generated from
//!   `cuda.h` by `tools/gen-wrappers/gen.py`. Each calls [`hook::begin`], the real
//!   function ([`hook::real`]) and [`hook::end`].
//! - [`procaddr`] and [`interpose`]: the routes by which programs reach the driver
//!   other than direct binding (`cuGetProcAddress*`, `dlsym`), and the process
//!   lifecycle hooks (`_exit`, fatal signals, fork).
//! - [`hook`]: the hot path: a per-thread reentrancy guard and lock-free ring.
//! - [`worker`]: the named, never-traced thread that drains rings into the file.
//! - [`lifecycle`]: one atomic state, start-up, and the bounded final flush.
#![deny(unsafe_op_in_unsafe_fn)]

mod capture;
mod clock;
mod config;
mod cupti;
mod devices;
mod diag;
mod driver;

mod generated;
mod generic;
mod hook;
mod interpose;
mod lifecycle;
mod nvtx;
mod output;
mod procaddr;
mod ring;
mod worker;
