//! The delivery thread: completed buffers go to the client's buffer-completed callback from a
//! thread of simcupti's own, as CUPTI's worker thread does, in the order they were completed.
//! `cuptiActivityFlushAll` waits until everything it completed has been delivered.
//!
//! Built on a `pthread_mutex_t` and a `pthread_cond_t` so that `fork` can be made safe: the
//! prepare handler takes the mutex, and a forked child (which has no delivery thread) starts a
//! new thread when it next needs one.

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::os::raw::c_void;

use crate::buffer::Buffer;
use crate::state::{in_client, CompleteFn};

struct Delivery {
    complete: CompleteFn,
    buffer: Buffer,
}

struct Queue {
    items: VecDeque<Delivery>,
    /// Deliveries queued and finished since the process started.
    queued: u64,
    delivered: u64,
    /// The process whose delivery thread is running (0: none).
    thread_pid: i32,
}

struct Shared {
    mutex: UnsafeCell<libc::pthread_mutex_t>,
    cond: UnsafeCell<libc::pthread_cond_t>,
    queue: UnsafeCell<Queue>,
}

// SAFETY: `queue` is only touched with `mutex` held.
unsafe impl Sync for Shared {}

static SHARED: Shared = Shared {
    mutex: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
    cond: UnsafeCell::new(libc::PTHREAD_COND_INITIALIZER),
    queue: UnsafeCell::new(Queue {
        items: VecDeque::new(),
        queued: 0,
        delivered: 0,
        thread_pid: 0,
    }),
};

fn lock() {
    // SAFETY: a statically initialised mutex that never moves.
    unsafe { libc::pthread_mutex_lock(SHARED.mutex.get()) };
}

fn unlock() {
    // SAFETY: only called by the thread that took the mutex.
    unsafe { libc::pthread_mutex_unlock(SHARED.mutex.get()) };
}

/// Runs `f` on the queue with the mutex held.
fn with_queue<R>(f: impl FnOnce(&mut Queue) -> R) -> R {
    lock();
    // SAFETY: the mutex is held, so this is the only reference.
    let r = f(unsafe { &mut *SHARED.queue.get() });
    unlock();
    r
}

/// Called by the fork handlers of `state` (prepare: lock; parent and child: unlock).
pub fn fork_prepare() {
    lock();
}

pub fn fork_parent() {
    unlock();
}

pub fn fork_child() {
    // SAFETY: the forking thread holds the mutex (fork_prepare); nothing else runs in the child.
    let q = unsafe { &mut *SHARED.queue.get() };
    // The parent's delivery thread does not exist here: a buffer it was delivering is gone.
    q.thread_pid = 0;
    q.delivered = q.queued - q.items.len() as u64;
    unlock();
}

/// Queues buffers for delivery, in order; returns the sequence number to wait for.
pub fn enqueue(items: Vec<(CompleteFn, Buffer)>) -> u64 {
    with_queue(|q| {
        for (complete, buffer) in items {
            q.items.push_back(Delivery { complete, buffer });
            q.queued += 1;
        }
        // SAFETY: getpid cannot fail.
        let pid = unsafe { libc::getpid() };
        if !q.items.is_empty()
            && q.thread_pid != pid
            && std::thread::Builder::new()
                .name("simcupti".into())
                .spawn(run)
                .is_ok()
        {
            q.thread_pid = pid;
        }
        // SAFETY: a statically initialised condition variable.
        unsafe { libc::pthread_cond_broadcast(SHARED.cond.get()) };
        q.queued
    })
}

thread_local! {
    /// This is the delivery thread.
    static IS_WORKER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Waits until every delivery up to sequence number `seq` has been made (at once on the
/// delivery thread itself: a flush from inside a buffer-completed callback must not wait for
/// that callback).
pub fn wait(seq: u64) {
    if IS_WORKER.try_with(std::cell::Cell::get).unwrap_or(true) {
        return;
    }
    lock();
    loop {
        // SAFETY: the mutex is held.
        let q = unsafe { &*SHARED.queue.get() };
        // A child whose queue lost its thread would wait forever: nothing is pending then.
        if q.delivered >= seq || q.items.is_empty() && q.thread_pid == 0 {
            break;
        }
        // SAFETY: the mutex is held by this thread; both are statically initialised.
        unsafe { libc::pthread_cond_wait(SHARED.cond.get(), SHARED.mutex.get()) };
    }
    unlock();
}

/// The delivery thread.
fn run() {
    let _ = IS_WORKER.try_with(|w| w.set(true));
    in_client(|| loop {
        lock();
        let item = loop {
            // SAFETY: the mutex is held.
            let q = unsafe { &mut *SHARED.queue.get() };
            if let Some(item) = q.items.pop_front() {
                break item;
            }
            // SAFETY: as in `wait`.
            unsafe { libc::pthread_cond_wait(SHARED.cond.get(), SHARED.mutex.get()) };
        };
        unlock();
        let b = &item.buffer;
        // The context and stream arguments are deprecated: CUPTI passes NULL and no stream.
        // SAFETY: the client's callback, with the buffer it gave us and the bytes written.
        unsafe { (item.complete)(std::ptr::null_mut::<c_void>(), 0, b.ptr, b.size, b.valid) };
        with_queue(|q| {
            q.delivered += 1;
            // SAFETY: a statically initialised condition variable.
            unsafe { libc::pthread_cond_broadcast(SHARED.cond.get()) };
        });
    });
}
