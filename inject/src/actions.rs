//! What the hot path runs after a recorded call of particular functions (GPU activity starts
//! after `cuInit`, a profiler-API capture range ends at `cuProfilerStop`): a table by function
//! id that the session fills once at start-up. The hot path reads one flag with a relaxed load
//! and calls out only when it is set: no function id is written into it.

use crate::generated::id::FUNCTION_COUNT;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

/// Per function id: 0, or 1 + the index of its action in [`ACTIONS`].
static FLAGS: [AtomicU8; FUNCTION_COUNT] = [const { AtomicU8::new(0) }; FUNCTION_COUNT];
static ACTIONS: OnceLock<Vec<Action>> = OnceLock::new();

#[derive(Clone, Copy)]
struct Action {
    function: u32,
    /// Only after a successful call (`CUDA_SUCCESS`).
    on_success_only: bool,
    run: fn(),
}

/// The actions the session registers, built before tracing starts.
#[derive(Default)]
pub struct EndActions {
    list: Vec<Action>,
}

impl EndActions {
    pub fn new() -> EndActions {
        EndActions::default()
    }

    /// Runs `run` after every successful recorded call of `function`.
    pub fn on_success(&mut self, function: u32, run: fn()) {
        self.list.push(Action {
            function,
            on_success_only: true,
            run,
        });
    }

    /// Runs `run` after every recorded call of `function`.
    pub fn always(&mut self, function: u32, run: fn()) {
        self.list.push(Action {
            function,
            on_success_only: false,
            run,
        });
    }
}

/// Installs `actions` (once; later calls are ignored). At most 255 actions, one per function.
pub fn install(actions: EndActions) {
    if ACTIONS.set(actions.list).is_err() {
        return;
    }
    let Some(list) = ACTIONS.get() else {
        return;
    };
    for (i, a) in list.iter().enumerate().take(usize::from(u8::MAX)) {
        if let Some(flag) = FLAGS.get(a.function as usize) {
            flag.store(i as u8 + 1, Ordering::Release);
        }
    }
}

/// Runs the action registered for `function`, if any, after a recorded call that returned
/// `result`. Hot path: one relaxed load when there is none.
#[inline(always)]
pub fn after_call(function: u32, result: u32) {
    let Some(flag) = FLAGS.get(function as usize) else {
        return;
    };
    let k = flag.load(Ordering::Relaxed);
    if k != 0 {
        run(k, result);
    }
}

#[cold]
fn run(k: u8, result: u32) {
    let Some(a) = ACTIONS.get().and_then(|l| l.get(usize::from(k) - 1)) else {
        return;
    };
    if !a.on_success_only || result == 0 {
        (a.run)();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    static RAN: AtomicU32 = AtomicU32::new(0);

    #[test]
    fn registered_actions_run_after_their_functions_only() {
        let mut a = EndActions::new();
        a.on_success(3, || {
            RAN.fetch_add(1, Ordering::Relaxed);
        });
        a.always(5, || {
            RAN.fetch_add(10, Ordering::Relaxed);
        });
        install(a);
        after_call(3, 1); // failed: not run
        after_call(3, 0);
        after_call(5, 7);
        after_call(4, 0);
        after_call(u32::MAX, 0);
        assert_eq!(RAN.load(Ordering::Relaxed), 11);
    }
}
