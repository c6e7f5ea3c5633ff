//! A mutex built on `pthread_mutex_t` so that `fork` can be made safe with `pthread_atfork`:
//! the state lock is taken before `fork` and released on both sides, so a child never inherits
//! it held by a thread that no longer exists.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};

pub struct Locked<T> {
    mutex: UnsafeCell<libc::pthread_mutex_t>,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is only reached through a `Guard`, which holds the mutex.
unsafe impl<T: Send> Sync for Locked<T> {}

impl<T> Locked<T> {
    pub const fn new(value: T) -> Self {
        Locked {
            mutex: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
            value: UnsafeCell::new(value),
        }
    }

    pub fn lock(&self) -> Guard<'_, T> {
        self.raw_lock();
        Guard { lock: self }
    }

    /// Takes the mutex without a guard (for the `pthread_atfork` prepare handler).
    pub fn raw_lock(&self) {
        // SAFETY: the mutex is statically initialised and never moved (it lives in a static).
        unsafe { libc::pthread_mutex_lock(self.mutex.get()) };
    }

    /// Releases a mutex taken by `raw_lock` on this thread.
    ///
    /// # Safety
    /// The calling thread must hold the mutex through `raw_lock`, with no `Guard` alive.
    pub unsafe fn raw_unlock(&self) {
        // SAFETY: the caller holds the mutex.
        unsafe { libc::pthread_mutex_unlock(self.mutex.get()) };
    }
}

pub struct Guard<'a, T> {
    lock: &'a Locked<T>,
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the mutex, so no other reference to the value exists.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`, and `&mut self` makes this the only borrow of the guard.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the guard was created by `lock`, which took the mutex on this thread.
        unsafe { self.lock.raw_unlock() };
    }
}
