//! What kernel profiling hands on: chunks queued for the worker, notices.

use crate::cupti::state::CUPTI;
use rtrace_format::ChunkKind;

/// Writes `notices` as the trace's status lines.
pub(super) fn say(notices: Vec<String>) {
    for n in notices {
        CUPTI.notice(n);
    }
}

/// Queues a chunk for the worker's next drain.
pub(super) fn queue(kind: ChunkKind, bytes: Vec<u8>) {
    if let Ok(mut q) = CUPTI.prof.pending.lock() {
        q.push((kind, bytes));
    }
}
