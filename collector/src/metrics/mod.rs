//! `rtrace metrics`: Nsight Compute-like metric sets, and what a choice of them costs on a
//! chip, with no GPU, through CUPTI's Profiler Host API.
//!
//! The files read top-down: `render` (table and JSON) over `choice` (a LIST resolved for a
//! chip: sets expanded, each metric checked against the chip, the replay passes counted; the
//! sets' costs; the chip's base metrics) and `evaluate` (metrics evaluated from a trace's
//! counter data, `rtrace report --metrics`) over `host` (the FFI); the named sets are the format crate's (`rtrace_format::metric_sets`).
//!
//! ```no_run
//! use rtrace_collector::metrics::{choose, Cupti};
//! let cupti = Cupti::load(None).unwrap();
//! let c = choose(&cupti, "GH100", "SpeedOfLight").unwrap();
//! println!("{} passes", c.passes);
//! ```

mod choice;
mod evaluate;
mod host;
pub mod render;

pub use choice::{base_metrics, chip, choose, set_costs, Choice, Chosen, SetCost};
pub use evaluate::Evaluator;
pub use host::pm::MetricNames;
pub use host::{library_path, Cupti, Host};
pub use rtrace_format::metric_sets::{self as sets, resolve};
