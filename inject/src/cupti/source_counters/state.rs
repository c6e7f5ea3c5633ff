//! Source counters' state, a field of CUPTI's state (`Cupti::sc`): below `state.rs`, which
//! holds it.

use super::choose::Chooser;
use super::collect::Collector;
use rtrace_format::ChunkKind;
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, OnceLock};

/// Source counters' state, in CUPTI's state (`Cupti::sc`).
pub(crate) struct ScState {
    /// Source counters are on: the flag a launch wrapper reads (one relaxed load).
    pub on: AtomicBool,
    /// The kernel controls, built at start-up.
    pub(super) chooser: OnceLock<Chooser>,
    /// What the chosen launches share; their collection is serialized under it.
    pub(super) collector: Mutex<Option<Collector>>,
    /// Chunks for the worker to write, in order.
    pub(super) pending: Mutex<Vec<(ChunkKind, Vec<u8>)>>,
}

impl ScState {
    pub(crate) const fn new() -> ScState {
        ScState {
            on: AtomicBool::new(false),
            chooser: OnceLock::new(),
            collector: Mutex::new(None),
            pending: Mutex::new(Vec::new()),
        }
    }
}
