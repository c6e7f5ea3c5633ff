//! Reading several traces at once: [`map_ordered`] runs a function over a list of inputs on a
//! few threads and hands the results back in input order, so that what is folded from them
//! afterwards, in that order, is the same as a read one after the other ([`Jobs`]: how many
//! threads).

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// [`Jobs::new`]`(0)` reads at most this many traces at once, however many cores there are.
pub const DEFAULT_MOST: usize = 8;

/// How many traces are read at once: 1 reads them one after the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Jobs(pub NonZeroUsize);

impl Jobs {
    /// One at a time.
    pub const ONE: Jobs = Jobs(NonZeroUsize::MIN);

    /// As many as the machine has cores (`std::thread::available_parallelism`; 1 when
    /// unknown).
    pub fn all_cores() -> Jobs {
        Jobs(std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN))
    }

    /// `n` at once; 0: as many as the machine has cores, at most [`DEFAULT_MOST`] (each
    /// trace being read holds its own tables: `rtrace report`'s join holds up to about
    /// 120 MiB for a large trace).
    pub fn new(n: usize) -> Jobs {
        NonZeroUsize::new(n)
            .unwrap_or_else(|| {
                let cores = Jobs::all_cores().0;
                cores.min(NonZeroUsize::new(DEFAULT_MOST).unwrap_or(NonZeroUsize::MIN))
            })
            .into()
    }
}

impl From<NonZeroUsize> for Jobs {
    fn from(n: NonZeroUsize) -> Jobs {
        Jobs(n)
    }
}

impl Default for Jobs {
    fn default() -> Jobs {
        Jobs::all_cores()
    }
}

/// `f` of each of `items`, in their order, computed by at most `jobs` threads taking the next
/// item as they finish one. With one job, or one item, on the calling thread. Stops taking
/// items once one's result is an error (the items in flight finish): the error of the first
/// failed item in input order is returned, as a sequential read would have returned it.
pub fn map_ordered<T: Sync, R: Send, E: Send>(
    items: &[T],
    jobs: Jobs,
    f: impl Fn(usize, &T) -> Result<R, E> + Sync,
) -> Result<Vec<R>, E> {
    let threads = jobs.0.get().min(items.len());
    if threads <= 1 {
        return items.iter().enumerate().map(|(i, t)| f(i, t)).collect();
    }
    let next = AtomicUsize::new(0);
    // The first item (in input order) that failed: nothing past it is started.
    let stop = AtomicUsize::new(usize::MAX);
    let results: Vec<Mutex<Option<Result<R, E>>>> =
        items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= items.len() || i > stop.load(Ordering::Relaxed) {
                    break;
                }
                let r = f(i, &items[i]);
                if r.is_err() {
                    stop.fetch_min(i, Ordering::Relaxed);
                }
                if let Ok(mut slot) = results[i].lock() {
                    *slot = Some(r);
                }
            });
        }
    });
    let mut out = Vec::with_capacity(items.len());
    for slot in results {
        match slot.into_inner().ok().flatten() {
            Some(Ok(r)) => out.push(r),
            Some(Err(e)) => return Err(e),
            // Not started: an earlier item failed (and was returned above).
            None => break,
        }
    }
    Ok(out)
}

/// `f(acc, item)` for each of `items`, by at most `jobs` threads taking the next item as they
/// finish one, each with an accumulator of its own (`init()`); returns the accumulators (as
/// many as threads ran). With one job, or one item, on the calling thread. Stops taking items
/// once one fails: the error of the first failed item in input order is returned.
pub fn fold_each<T: Sync, A: Send, E: Send>(
    items: &[T],
    jobs: Jobs,
    init: impl Fn() -> A + Sync,
    f: impl Fn(&mut A, &T) -> Result<(), E> + Sync,
) -> Result<Vec<A>, E> {
    let threads = jobs.0.get().min(items.len()).max(1);
    let next = AtomicUsize::new(0);
    let stop = AtomicUsize::new(usize::MAX);
    let work = || {
        let mut acc = init();
        let mut failed = None;
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= items.len() || i > stop.load(Ordering::Relaxed) {
                break;
            }
            if let Err(e) = f(&mut acc, &items[i]) {
                stop.fetch_min(i, Ordering::Relaxed);
                failed = Some((i, e));
                break;
            }
        }
        (acc, failed)
    };
    let done: Vec<(A, Option<(usize, E)>)> = if threads == 1 {
        vec![work()]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads).map(|_| s.spawn(work)).collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        })
    };
    let mut accs = Vec::with_capacity(done.len());
    let mut first: Option<(usize, E)> = None;
    for (acc, failed) in done {
        accs.push(acc);
        if let Some((i, e)) = failed {
            if first.as_ref().is_none_or(|(j, _)| i < *j) {
                first = Some((i, e));
            }
        }
    }
    match first {
        Some((_, e)) => Err(e),
        None => Ok(accs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_in_input_order_and_the_first_error_wins() {
        let items: Vec<u64> = (0..100).collect();
        for jobs in [1, 2, 7] {
            let jobs = Jobs::new(jobs);
            let out = map_ordered(&items, jobs, |i, &v| Ok::<_, ()>((i as u64, v * v))).unwrap();
            assert_eq!(out, (0..100).map(|v| (v, v * v)).collect::<Vec<_>>());
            let err = map_ordered(
                &items,
                jobs,
                |_, &v| if v % 10 == 3 { Err(v) } else { Ok(v) },
            );
            assert_eq!(err, Err(3));
        }
        assert_eq!(
            map_ordered(&[] as &[u8], Jobs::new(4), |_, _| Ok::<u8, ()>(0)),
            Ok(vec![])
        );
    }

    #[test]
    fn each_thread_folds_into_its_own_and_the_first_error_wins() {
        let items: Vec<u64> = (1..=100).collect();
        for jobs in [1, 2, 7] {
            let accs = fold_each(
                &items,
                Jobs::new(jobs),
                || 0u64,
                |a, &v| {
                    *a += v;
                    Ok::<_, ()>(())
                },
            )
            .unwrap();
            assert!(accs.len() <= jobs);
            assert_eq!(accs.iter().sum::<u64>(), 5050);
            let err = fold_each(
                &items,
                Jobs::new(jobs),
                || (),
                |_, &v| match v % 10 {
                    3 => Err(v),
                    _ => Ok(()),
                },
            );
            assert_eq!(err, Err(3));
        }
        let none = fold_each(&[] as &[u8], Jobs::new(4), || 1u8, |_, _| Ok::<(), ()>(()));
        assert_eq!(none, Ok(vec![1]));
    }
}
