//! The rtrace collector: reads the `trace.bin` files that `librtrace.so`
//! writes, summarises them, and runs programs under the tracer.
//!
//! The parts, each usable on its own:
//! - [`model`]: a trace in memory ([`Trace`]);
//! - [`read`]: the reading layer: inputs, the first read of a file ([`load_trace`],
//!   [`load_inputs`]), chunk rereads, the records as one enum, the time-ordered merge, the
//!   call-to-GPU-work links; the report and the export both read through it;
//! - [`report`]: `rtrace report`'s sections, computed as the traces stream by;
//! - [`summary`]: per-function statistics ([`api_summary`]);
//! - [`gpu_summary`]: GPU kernels, copies, memsets, utilisation and
//!   launch-to-start latency ([`kernel_summary`], [`memcpy_summary`],
//!   [`memset_summary`], [`utilisation`], [`launch_latency`]);
//! - [`clocks`]: traces from several hosts put on one clock;
//! - [`demangle`]: kernel names for display;
//! - [`nvtx`]: NVTX ranges rebuilt from a trace's NVTX events, and their statistics;
//! - [`filter`]: what a report or export keeps (time window, processes, devices, streams,
//!   kernel names);
//! - [`output`]: the report as a table, CSV or JSON ([`render_report`]);
//! - [`text`]: byte counts, durations, dates, command lines and JSON strings as text;
//! - [`export`]: traces as timelines for Perfetto or Chrome's trace viewer;
//! - [`record`]: running a program with librtrace.so preloaded;
//! - [`nvdisasm`]: kernels' SASS and source lines from a module image, through nvdisasm;
//! - [`sass`]: the SASS of the kernels in stored module images, with source lines;
//! - [`metrics`]: metric sets and their replay passes for a chip, through CUPTI's host API;
//! - [`cli`]: the `rtrace` command line on top of them.
//!
//! ```no_run
//! use rtrace_collector::{load_trace, render_report, Format};
//! let trace = load_trace("rtrace-1234.bin".as_ref()).unwrap();
//! if let Some(damage) = &trace.damage {
//!     eprintln!("warning: {damage}");
//! }
//! print!("{}", render_report(&[trace], Format::Csv));
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(unsafe_code)]

pub mod cli;
pub mod clocks;
pub mod cubin;
pub mod demangle;
pub mod export;
pub mod filter;
pub mod gpu_metrics;
pub mod gpu_summary;
pub mod images;
pub mod metrics;
pub mod model;
pub mod nvdisasm;
pub mod nvtx;
pub mod occupancy;
pub mod output;
pub mod pcsamp;
pub mod profiles;
pub mod progress;
pub mod read;
pub mod record;
pub mod record_replay;
pub mod report;
pub mod sampler;
pub mod sass;
pub mod source_counters;
pub mod spool;
pub mod summary;
mod sys;
pub mod text;

pub use gpu_summary::{
    kernel_summary, launch_latency, memcpy_summary, memset_summary, utilisation, Activity,
    Hundredths, KernelSummary, Latencies, LaunchLatency, MemcpySummary, MemsetSummary, Utilisation,
    LATENCY_ROWS,
};
pub use model::{ThreadTrace, Trace};
pub use output::{render_report, render_report_section, Format, Section};
pub use read::{load_inputs, load_trace, LoadError, Loaded};
pub use summary::{api_summary, FunctionSummary};

#[cfg(test)]
mod tests;
