//! What application replay (`range.rs`) keeps in the state's `ranges`: the run's pass and
//! directory, the contexts seen, the range open.

use super::setup::Profiled;
use std::path::PathBuf;

/// Application replay's state, under the state's `ranges` lock.
pub(crate) struct Ranges {
    pub(super) pass: u32,
    pub(super) dir: PathBuf,
    /// `cuptiProfilerInitialize` succeeded (once per process).
    pub(super) initialized: bool,
    pub(super) contexts: Vec<Context>,
    pub(super) open: Option<Open>,
    /// `cuProfilerStart` ranges so far (they are named by number, from 1).
    pub(super) numbered: u32,
    /// The replay mode `SetConfig` took (`None`: not tried yet).
    pub(super) mode: Option<u32>,
    /// Notices said once: a range without a context, or before GPU activity.
    pub(super) said: Vec<&'static str>,
}

/// One context seen at a range's start.
pub(super) struct Context {
    pub(super) ctx: usize,
    pub(super) id: u32,
    /// `None`: profiling is off there (a notice said why).
    pub(super) profiled: Option<Profiled>,
    pub(super) passes: u32,
    /// Ranges profiled on it so far in this run: the next one's index in the image.
    pub(super) ranges: usize,
    /// `SetConfig` and `Start` were called in this run (`Stop` comes at its end).
    pub(super) started: bool,
    /// The run's ranges profiled on it, closed, in order.
    pub(super) done: Vec<Done>,
}

/// A range profiled and closed: its index in the context's image, name and host times.
pub(super) struct Done {
    pub(super) index: usize,
    pub(super) name: String,
    pub(super) start_ns: u64,
    pub(super) end_ns: u64,
}

/// The range open (profiled or not).
pub(super) struct Open {
    /// The context's index in `contexts` while the range is being profiled.
    pub(super) context: Option<usize>,
    /// CUPTI's id of the context it began on (0: none).
    pub(super) id: u32,
    pub(super) name: String,
    /// `range_launches` at its start.
    pub(super) launches: u64,
    pub(super) start_ns: u64,
}

impl Ranges {
    /// Pass `pass` of a replay sharing `dir`, before any range.
    pub(super) fn new(pass: u32, dir: PathBuf) -> Ranges {
        Ranges {
            pass,
            dir,
            initialized: false,
            contexts: Vec::new(),
            open: None,
            numbered: 0,
            mode: None,
            said: Vec::new(),
        }
    }
}
