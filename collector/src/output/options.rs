//! What `rtrace report` is asked for: the format, the table `--format csv` prints, and the
//! options of the table report, as one value the command line builds.

use crate::report::Needs;
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

/// A section of the report, as `--section` names it (several may be chosen in every format;
/// `--format csv` prints one). The names of `nsys stats`' reports are aliases of theirs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Section {
    /// The process sections, one per trace (table and JSON only).
    Processes,
    /// The API summary, one line per function: runtime calls, and driver calls made outside
    /// them (then the driver calls made inside them).
    #[default]
    #[value(alias = "cuda_api_sum")]
    Api,
    /// NVTX ranges, one line per range name and domain.
    #[value(alias = "nvtx_sum")]
    Nvtx,
    /// External correlation ids (table and JSON only).
    External,
    /// Devices, contexts, streams, modules and functions (table and JSON only).
    Resources,
    /// The GPU kernel summary, one line per kernel name.
    #[value(alias = "cuda_gpu_kern_sum")]
    Kernels,
    /// Memory copies, one line per copy kind (with their sizes).
    #[value(alias = "cuda_gpu_mem_time_sum", alias = "cuda_gpu_mem_size_sum")]
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
    /// Kernel launch and execution times: each launch split into the call (API), the wait
    /// for the GPU (queue) and the kernel, per kernel name and launching function.
    #[value(alias = "cuda_kern_exec_sum")]
    KernExec,
    /// Occupancy per kernel and launch configuration (table and JSON only).
    Occupancy,
    /// Allocations and frees, one line per memory kind.
    Memory,
    /// Host synchronizations, one line per kind of synchronization.
    Sync,
    /// The processes compared as ranks of one job, one line per rank: GPU busy and idle
    /// time, steps, collective (NCCL) kernel time and wait (two or more processes).
    Ranks,
    /// Steps (NVTX ranges matching `--steps`) compared across ranks, one line per step and
    /// occurrence: fastest, median and slowest rank, lag (two or more processes).
    Steps,
    /// Kernel profiles: one line per profiled kernel and metric (mean, min, max over its
    /// launches).
    Profiles,
    /// PC sampling (table and JSON only).
    Pcsamp,
    /// Source counters: per kernel, Nsight Compute's Uncoalesced Global and Shared Accesses
    /// findings with the lines that cause them (CSV: one line per kernel, finding and place).
    SourceCounters,
    /// GPU metrics over time: per GPU, process, kernel and NVTX range, each metric's average
    /// over the time its work ran.
    GpuMetrics,
}

impl Section {
    /// The sections `--format csv` can print, in the order the table report prints them.
    pub const CSV: [Section; 16] = [
        Section::Api,
        Section::Nvtx,
        Section::Kernels,
        Section::Memcpy,
        Section::Memset,
        Section::Utilisation,
        Section::Shared,
        Section::Latency,
        Section::KernExec,
        Section::Memory,
        Section::Sync,
        Section::Ranks,
        Section::Steps,
        Section::Profiles,
        Section::SourceCounters,
        Section::GpuMetrics,
    ];

    /// Whether `--format csv` has a table for this section.
    pub fn has_csv(self) -> bool {
        Section::CSV.contains(&self)
    }
}

/// The widest line `--format table` lays its tables out for unless told otherwise
/// (`--width`, or the terminal's width).
pub const TABLE_WIDTH: usize = 120;

/// How to render a report: the options `rtrace report` was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderOptions {
    pub format: Format,
    /// The sections to print; empty: every section for [`Format::Table`] and
    /// [`Format::Json`], the API summary for [`Format::Csv`] (which prints the first only).
    pub sections: Vec<Section>,
    /// The widest line [`Format::Table`] lays its tables out for: the first column of a
    /// table is cut to fit, the others never are.
    pub width: usize,
    /// The nvdisasm that names PC samples' instructions and source lines; `None`: the one on
    /// `PATH`.
    pub nvdisasm: Option<PathBuf>,
    /// The report's filter, described (`None`: no filter): where a section is empty, it may be
    /// the filter that emptied it.
    pub filter: Option<String>,
}

impl Default for RenderOptions {
    /// A table [`TABLE_WIDTH`] wide, every section (the API summary for CSV), nvdisasm from
    /// `PATH`.
    fn default() -> Self {
        RenderOptions {
            format: Format::default(),
            sections: Vec::new(),
            width: TABLE_WIDTH,
            nvdisasm: None,
            filter: None,
        }
    }
}

impl RenderOptions {
    /// Whether the report holds `section`.
    pub fn wants(&self, section: Section) -> bool {
        self.sections.is_empty() || self.sections.contains(&section)
    }

    /// The table [`Format::Csv`] prints.
    pub fn csv_section(&self) -> Section {
        self.sections.first().copied().unwrap_or_default()
    }

    /// The parts of the report its sections need computed: a report of chosen sections
    /// (CSV's one table) skips the passes only the others need.
    pub fn needs(&self) -> Needs {
        let chosen = match self.format {
            Format::Csv => vec![self.csv_section()],
            _ if self.sections.is_empty() => return Needs::ALL,
            _ => self.sections.clone(),
        };
        let mut n = Needs::FIRST_PASS;
        for section in chosen {
            match section {
                Section::Api => n.medians.api = true,
                Section::Kernels => n.medians.kernels = true,
                // Either one's table is followed by the sizes of both.
                Section::Memcpy | Section::Memset => {
                    (n.medians.memcpys, n.medians.memsets) = (true, true);
                }
                Section::Nvtx | Section::External => n.nvtx_medians = true,
                Section::Utilisation | Section::Latency | Section::Sync => n.join = true,
                Section::Shared => (n.join, n.shared) = (true, true),
                Section::KernExec => (n.join, n.kern_exec) = (true, true),
                Section::Ranks | Section::Steps => (n.join, n.steps) = (true, true),
                Section::Memory => n.memory = true,
                Section::Profiles => n.profiles = true,
                Section::GpuMetrics => n.gpu_metrics = true,
                Section::Processes
                | Section::Resources
                | Section::Occupancy
                | Section::Pcsamp
                | Section::SourceCounters => {}
            }
        }
        n
    }
}
