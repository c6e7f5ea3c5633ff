//! librtrace.so: records every CUDA driver API call of the process it is
//! preloaded into (`LD_PRELOAD=librtrace.so ./app`) and writes them to a
//! `trace.bin` file (see the `rtrace-format` crate).
//!
//! Layers, top-down; a module imports only modules below it (`tools/check-layers.py` checks):
//! - Shims (FFI, no policy): [`generated`] (one exported wrapper per driver entry point,
//!   generated from `cuda.h` by `tools/gen-wrappers/gen.py`; each calls [`hook::begin`], the
//!   real function and [`hook::end`]), [`generic`] (the assembly trampoline for the exports no
//!   header declares, and for `runtime_stubs`: one exported stub per libcudart function, the
//!   runtime API by interposition, [`runtime_api`]), [`cudart`] (the caller's libcudart behind a
//!   stub), [`procaddr`] (`cuGetProcAddress*`) and [`interpose`] (`dlsym`, `dlclose`, `_exit`,
//!   fatal signals, fork, NVTX's entry point, the ELF constructor and destructor).
//! - [`hook`]: the hot path: begin → real call → end; the token that ends a call once.
//! - [`got`]: libraries that bind the driver past rtrace (`RTLD_DEEPBIND`): their driver GOT
//!   slots, found with `dl_iterate_phdr`, rewritten to the wrappers (the hot path's cold
//!   resolution, `dlsym` and `cuGetProcAddress` ask it to look).
//! - [`session`]: start-up, the worker's loop, the one drain-and-finish sequence (exit,
//!   `_exit`, fatal signals, CUPTI going away) and the fork path.
//! - Sources and policies the session asks: [`nvtx`] (the injection tables), [`cupti`] (GPU
//!   activity, PC sampling), [`capture`] (capture ranges, kernel filters; the hot path and
//!   CUPTI's records read it too), [`devices`].
//! - [`drain`]: the drain pass from the rings to the writer. [`actions`]: what the hot path
//!   runs after particular functions, a table the session fills at start-up.
//! - [`driver`]: the real driver: libc's `dlsym`, the driver's handle, its functions by id.
//! - [`thread`]: each thread's state (reentrancy flag, ring, correlation ids), `internal`, and
//!   rtrace's own threads (`spawn_quiet`: named, every signal blocked, never traced).
//! - [`process`]: one process's rings, writer and worker; replaced in a forked child.
//! - Mechanisms with no knowledge of CUDA: [`output`] (the trace file's writer), [`gpu_batch`]
//!   (the worker's link table and GPU records waiting to become chunks), [`ring`] (the
//!   per-thread lock-free ring of [`ring::Entry`]), [`clock`].
//! - [`state`]: the atomic lifecycle state and the configuration ([`config`]), read once.
//! - [`files`]: the files rtrace creates: exclusively, beside a name that is taken; the
//!   status entries `rtrace record` reads.
//! - [`diag`]: diagnostics through raw `write(2)`.
//! - [`sys`]: the system calls. `unsafe` lives in the shims, `got`, `driver`, `devices`,
//!   `cupti`, `nvtx`, `sys` and `ring` (its module doc says why), plus one block in `hook`.
//! - The `rtrace-format` crate: records, chunks, codecs: the contract with the collector.
#![deny(unsafe_op_in_unsafe_fn)]

mod actions;
mod capture;
mod clock;
mod config;
mod cudart;
mod cupti;
mod devices;
mod diag;
mod drain;
mod driver;
mod files;
mod generated;
mod generic;
mod got;
mod gpu_batch;
mod hook;
mod interpose;
mod nvtx;
mod output;
mod procaddr;
mod process;
mod region;
mod ring;
mod runtime_api;
#[path = "generated/runtime_ids.rs"]
mod runtime_ids;
#[cfg(target_arch = "x86_64")]
#[path = "generated/runtime_stubs.rs"]
mod runtime_stubs;
mod session;
mod state;
mod sys;
mod thread;
mod trace_fd;
mod worker_cpu;
