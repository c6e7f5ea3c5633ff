//! A thread's external correlation ids (`rtrace_push_external_correlation`), as the projector
//! follows them: per kind, the ids pushed, innermost last.

use crate::gpu_summary::fast_hash::FastMap;
use crate::model::Trace;
use std::collections::BTreeMap;

/// The calls capture control records even while it is not recording: the trace's function id
/// of [`rtrace_format::RECORDED_WHILE_PAUSED`], if it has one.
pub(super) struct PausedCall(Option<u32>);

impl PausedCall {
    pub fn of(t: &Trace) -> PausedCall {
        let named = |name: &String| name.as_str() == rtrace_format::RECORDED_WHILE_PAUSED;
        // The table also names a driver function's id with `IN_RUNTIME` set: either will do.
        let id = t
            .functions
            .iter()
            .find(|(_, n)| named(n))
            .map(|(&id, _)| id);
        PausedCall(id.map(rtrace_format::base_function))
    }

    /// Whether an API record's `function` is such a call (made inside a runtime call or not).
    pub fn is(&self, function: u32) -> bool {
        Some(rtrace_format::base_function(function)) == self.0
    }
}

/// One thread's external ids: per kind, those pushed in the window (innermost last), each
/// with whether it was pushed while capture control was not recording; and every push's kept
/// flag, so that a pop undoes what its push did.
#[derive(Default)]
pub(super) struct ExternalStacks {
    ids: BTreeMap<u32, Vec<(u64, bool)>>,
    kept: FastMap<u32, Vec<bool>>,
}

impl ExternalStacks {
    /// A push of `id` of `kind`, `kept` when in the window, `paused` when made while capture
    /// control was not recording. Returns whether the id is now on the stack.
    pub fn push(&mut self, kind: u32, id: u64, kept: bool, paused: bool) -> bool {
        self.kept.entry(kind).or_default().push(kept);
        if kept {
            self.ids.entry(kind).or_default().push((id, paused));
        }
        kept
    }

    /// A pop of `id` of `kind`: None when its push was not kept, else whether no id of the
    /// kind is left.
    pub fn pop(&mut self, kind: u32, id: u64) -> Option<bool> {
        if self.kept.get_mut(&kind).and_then(Vec::pop) != Some(true) {
            return None;
        }
        let stack = self.ids.entry(kind).or_default();
        if let Some(at) = stack.iter().rposition(|&(v, _)| v == id) {
            stack.remove(at);
        }
        Some(stack.is_empty())
    }

    /// Whether an id of `kind` is pushed.
    pub fn has(&self, kind: u32) -> bool {
        self.ids.get(&kind).is_some_and(|s| !s.is_empty())
    }

    /// The innermost id of `kind` that a call is credited to: none when it was pushed while
    /// paused and the call is one capture control records while paused (`paused_call`).
    pub fn top(&self, kind: u32, paused_call: bool) -> Option<u64> {
        let &(id, paused) = self.ids.get(&kind)?.last()?;
        (!paused || !paused_call).then_some(id)
    }

    /// The innermost id of each kind that a call is credited to (as [`ExternalStacks::top`]).
    pub fn tops(&self, paused_call: bool) -> impl Iterator<Item = (u32, u64)> + '_ {
        (self.ids.keys()).filter_map(move |&kind| Some((kind, self.top(kind, paused_call)?)))
    }
}
