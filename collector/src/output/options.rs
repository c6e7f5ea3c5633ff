//! What `rtrace report` is asked for: the format, the table `--format csv` prints, and the
//! options of the table report, as one value the command line builds.

use std::path::PathBuf;

/// Output format of `rtrace report`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned text for a terminal: process sections, the API summary, then
    /// the GPU sections.
    #[default]
    Table,
    /// One table (the API summary unless `--section` picks another), one line
    /// per row, durations in integer ns.
    Csv,
    /// Processes and every summary as one JSON object, durations in integer ns.
    Json,
}

/// The table that `--format csv` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Section {
    /// The API summary, one line per driver function.
    #[default]
    Api,
    /// The GPU kernel summary, one line per kernel name.
    Kernels,
    /// Memory copies, one line per copy kind.
    Memcpy,
    /// Memsets, one line for all of them.
    Memset,
    /// GPU utilisation, one line per device and per stream of each process.
    #[value(alias = "utilization")]
    Utilisation,
    /// GPU utilisation across processes: one line per GPU that two or more traced processes
    /// of one host ran work on.
    Shared,
    /// The largest launch-to-start latencies.
    Latency,
    /// Allocations and frees, one line per memory kind.
    Memory,
    /// Host synchronizations, one line per kind of synchronization.
    Sync,
    /// Kernel profiles: one line per profiled kernel and metric (mean, min, max over its
    /// launches).
    Profiles,
}

impl Section {
    /// Every section, in the order the table report prints them.
    pub const ALL: [Section; 10] = [
        Section::Api,
        Section::Kernels,
        Section::Memcpy,
        Section::Memset,
        Section::Utilisation,
        Section::Shared,
        Section::Latency,
        Section::Memory,
        Section::Sync,
        Section::Profiles,
    ];
}

/// The widest line `--format table` lays its tables out for unless told otherwise
/// (`--width`, or the terminal's width).
pub const TABLE_WIDTH: usize = 120;

/// How to render a report: the options `rtrace report` was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderOptions {
    pub format: Format,
    /// The table [`Format::Csv`] prints (the other formats always hold every section).
    pub section: Section,
    /// The widest line [`Format::Table`] lays its tables out for: the first column of a
    /// table is cut to fit, the others never are.
    pub width: usize,
    /// The nvdisasm that names PC samples' instructions and source lines; `None`: the one on
    /// `PATH`.
    pub nvdisasm: Option<PathBuf>,
}

impl Default for RenderOptions {
    /// A table [`TABLE_WIDTH`] wide, the API summary for CSV, nvdisasm from `PATH`.
    fn default() -> Self {
        RenderOptions {
            format: Format::default(),
            section: Section::default(),
            width: TABLE_WIDTH,
            nvdisasm: None,
        }
    }
}
