//! Which launches get source counters: the kernel controls (`RTRACE_KERNEL_REGEX`, `_SKIP`,
//! `_COUNT`, judged by the one [`KernelFilter`]) without a lock or an allocation for a launch
//! they leave out. The regex's verdict is kept per function handle in a fixed table of atomics
//! (the first launch of a function fetches its name and judges it: a cold path); the matching
//! launches are counted with one atomic add; once the count is used up, every launch passes
//! with one relaxed load.

use crate::capture::KernelFilter;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// Slots of the verdict table (a power of two), and how many a lookup probes.
const SLOTS: usize = 4096;
const PROBES: usize = 16;
/// A slot's verdict: not written yet, no match, match.
const UNKNOWN: u8 = 0;
const NO: u8 = 1;
const YES: u8 = 2;

/// The kernel controls for source counters.
pub(crate) struct Chooser {
    /// `None`: every launch is chosen.
    filter: Option<KernelFilter>,
    keys: [AtomicUsize; SLOTS],
    verdicts: [AtomicU8; SLOTS],
    /// Matching launches so far.
    seen: AtomicU64,
    /// The count is used up: no launch is chosen any more.
    done: AtomicBool,
}

impl Chooser {
    pub(crate) fn new(filter: Option<KernelFilter>) -> Chooser {
        Chooser {
            filter,
            keys: [const { AtomicUsize::new(0) }; SLOTS],
            verdicts: [const { AtomicU8::new(UNKNOWN) }; SLOTS],
            seen: AtomicU64::new(0),
            done: AtomicBool::new(false),
        }
    }

    /// Whether the launch of function handle `f` is chosen; `name` fetches its name (called
    /// at most once per handle while the table has room).
    #[inline]
    pub(crate) fn choose(&self, f: usize, name: impl FnOnce() -> String) -> bool {
        if self.done.load(Ordering::Relaxed) {
            return false;
        }
        let Some(filter) = &self.filter else {
            return true;
        };
        if filter.has_regex() && !self.matches(filter, f, name) {
            return false;
        }
        let n = self.seen.fetch_add(1, Ordering::Relaxed);
        if filter.used_up(n) {
            self.done.store(true, Ordering::Relaxed);
            return false;
        }
        filter.kept(n)
    }

    /// The regex's verdict for handle `f`: from the table, else judged (and kept when a slot
    /// is free).
    fn matches(&self, filter: &KernelFilter, f: usize, name: impl FnOnce() -> String) -> bool {
        if f == 0 {
            return filter.name_matches(&name());
        }
        let start = (f >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (usize::BITS - 12);
        for i in 0..PROBES {
            let slot = (start + i) & (SLOTS - 1);
            let key = self.keys[slot].load(Ordering::Acquire);
            if key == f {
                match self.verdicts[slot].load(Ordering::Acquire) {
                    NO => return false,
                    YES => return true,
                    // Being written by another thread: judge it here too.
                    _ => return filter.name_matches(&name()),
                }
            }
            if key == 0 {
                let verdict = filter.name_matches(&name());
                if self.keys[slot]
                    .compare_exchange(0, f, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    self.verdicts[slot].store(if verdict { YES } else { NO }, Ordering::Release);
                }
                return verdict;
            }
        }
        // No room near its place: judged each time (a cold path, rare).
        filter.name_matches(&name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(regex: Option<&str>, skip: u64, count: Option<u64>) -> KernelFilter {
        KernelFilter::for_test(regex, skip, count)
    }

    #[test]
    fn the_regex_is_judged_once_per_function_and_launches_are_counted() {
        let c = Chooser::new(Some(filter(Some("^vec"), 1, Some(2))));
        let asked = std::cell::Cell::new(0);
        let name = |n: &str| {
            asked.set(asked.get() + 1);
            n.to_string()
        };
        // vecadd at 0x1000, fill at 0x2000: the first vecadd launch is skipped, the next two
        // chosen, then the count is used up; fill never matches.
        let picks: Vec<bool> = [0x1000, 0x2000, 0x1000, 0x2000, 0x1000, 0x1000]
            .iter()
            .map(|&f| c.choose(f, || name(if f == 0x1000 { "vecadd" } else { "fill" })))
            .collect();
        assert_eq!(picks, [false, false, true, false, true, false]);
        assert_eq!(asked.get(), 2);
        assert!(c.done.load(Ordering::Relaxed));
        // Without controls every launch is chosen and no name is fetched.
        let all = Chooser::new(None);
        assert!(all.choose(0x1000, || unreachable!()));
    }
}
