//! rtrace's external correlation ids: pushed and popped by the program on a thread, and
//! recorded there as NVTX events.

use super::events::{guard, record, Attributes};
use rtrace_format::NvtxKind;
use std::cell::RefCell;

thread_local! {
    /// The external ids pushed on this thread, innermost last, with their kind.
    static EXTERNAL: RefCell<Vec<(u32, u64)>> = const { RefCell::new(Vec::new()) };
}

/// Pushes external correlation id `id` of kind `kind` on the calling thread (like CUPTI's
/// `cuptiActivityPushExternalCorrelationId`): every driver call the thread makes until the
/// matching pop is linked to the innermost id of each kind, and through the call so is the
/// GPU work it launched. Returns 0.
#[no_mangle]
pub extern "C" fn rtrace_push_external_correlation(kind: u32, id: u64) -> i32 {
    guard(0, || {
        let _ = EXTERNAL.try_with(|s| s.borrow_mut().push((kind, id)));
        let a = Attributes {
            category: kind,
            ..Default::default()
        };
        record(NvtxKind::ExternalPush, 0, &a, id);
        0
    })
}

/// Pops the innermost external id of kind `kind` on the calling thread and stores it in
/// `*id` (when `id` is not NULL). Returns 0, or -1 when no id of that kind was pushed on this
/// thread (then `*id` is left alone).
///
/// # Safety
/// `id` is NULL or points at a writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn rtrace_pop_external_correlation(kind: u32, id: *mut u64) -> i32 {
    guard(-1, || {
        let popped = EXTERNAL
            .try_with(|s| {
                let mut s = s.borrow_mut();
                let at = s.iter().rposition(|&(k, _)| k == kind)?;
                Some(s.remove(at).1)
            })
            .ok()
            .flatten();
        let Some(value) = popped else {
            return -1;
        };
        if !id.is_null() {
            // SAFETY: the caller's contract.
            unsafe { id.write(value) };
        }
        let a = Attributes {
            category: kind,
            ..Default::default()
        };
        record(NvtxKind::ExternalPop, 0, &a, value);
        0
    })
}
