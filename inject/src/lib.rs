//! librtrace.so: records every CUDA driver API call of the process it is
//! preloaded into (`LD_PRELOAD=librtrace.so ./app`) and writes them to a
//! `trace.bin` file (see the `rtrace-format` crate).
//!
//! Layers, top-down; each module imports only the ones below it:
//! - Shims (FFI, no policy): [`generated`] (one exported wrapper per driver entry point,
//!   generated from `cuda.h` by `tools/gen-wrappers/gen.py`; each calls [`hook::begin`], the
//!   real function and [`hook::end`]), [`generic`] (the assembly trampoline for variadic and
//!   unknown entry points), [`procaddr`] and [`interpose`] (`cuGetProcAddress*`, `dlsym`,
//!   `_exit`, fatal signals, fork, the ELF constructor and destructor), [`driver`] (the real
//!   driver and its functions by id).
//! - [`hook`]: the hot path: begin → real call → end, the token that ends a call once.
//! - [`session`]: start-up, the worker's loop, the one drain-and-finish sequence (exit,
//!   `_exit`, fatal signals, CUPTI going away) and the fork path.
//! - Policies and sources the session asks: [`capture`] (capture ranges, kernel filters),
//!   [`cupti`] (GPU activity, PC sampling), [`nvtx`] (the injection tables), [`devices`].
//! - [`actions`]: what the hot path runs after particular functions, a table the session
//!   fills at start-up.
//! - [`thread`]: each thread's state: reentrancy flag, ring, correlation ids; `internal`.
//! - [`worker`]: rtrace's own threads and the drain pass from rings to the writer.
//! - [`process`]: one process's rings, writer and worker; replaced in a forked child.
//! - Mechanisms with no knowledge of CUDA: [`ring`] (per-thread lock-free ring of
//!   [`ring::Entry`]), [`clock`], [`output`] (the trace file's writer).
//! - [`state`]: the atomic lifecycle state and the configuration ([`config`]), read once.
//! - [`diag`]: diagnostics through raw `write(2)`.
//! - [`sys`]: the system calls; with the FFI shims and the ring, the only `unsafe`.
//! - The `rtrace-format` crate: records, chunks, codecs: the contract with the collector.
#![deny(unsafe_op_in_unsafe_fn)]

mod actions;
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
mod nvtx;
mod output;
mod procaddr;
mod process;
mod ring;
mod session;
mod state;
mod sys;
mod thread;
mod worker;
