//! The locks under the receipt one-shot: parking_lot's, or shuttle's under
//! `--cfg fleet_model`, so the same receipt code runs under the model checker
//! (`tests/receipt_model.rs`; STYLE.md "Model checking beside the primitive").
//!
//! Under the model, time is abstract: a timed wait yields once and reports a
//! timeout, so the checker explores an answer landing before, during and
//! after every deadline.

#[cfg(not(fleet_model))]
pub(crate) use parking_lot::{Condvar, Mutex};

#[cfg(fleet_model)]
pub(crate) use model::{Condvar, Mutex};

#[cfg(fleet_model)]
mod model {
    use std::ops::{Deref, DerefMut};
    use std::time::Instant;

    /// parking_lot's `Mutex` API over shuttle's.
    #[derive(Default)]
    pub(crate) struct Mutex<T>(shuttle::sync::Mutex<T>);

    /// A held lock; the inner guard is lent out while a condvar waits.
    pub(crate) struct MutexGuard<'a, T> {
        mutex: &'a shuttle::sync::Mutex<T>,
        inner: Option<shuttle::sync::MutexGuard<'a, T>>,
    }

    impl<T> Mutex<T> {
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard {
                mutex: &self.0,
                inner: Some(self.0.lock().expect("no poisoning in the model")),
            }
        }
    }

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.inner.as_ref().expect("held")
        }
    }

    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.inner.as_mut().expect("held")
        }
    }

    /// parking_lot's `WaitTimeoutResult`.
    pub(crate) struct WaitTimeout(bool);

    impl WaitTimeout {
        pub(crate) fn timed_out(&self) -> bool {
            self.0
        }
    }

    /// parking_lot's `Condvar` API over shuttle's.
    #[derive(Default)]
    pub(crate) struct Condvar(shuttle::sync::Condvar);

    impl Condvar {
        pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            let inner = guard.inner.take().expect("held");
            guard.inner = Some(self.0.wait(inner).expect("no poisoning in the model"));
        }

        /// Abstract time: release the lock, let others run, report a timeout.
        pub(crate) fn wait_until<T>(
            &self,
            guard: &mut MutexGuard<'_, T>,
            _deadline: Instant,
        ) -> WaitTimeout {
            drop(guard.inner.take());
            shuttle::thread::yield_now();
            guard.inner = Some(guard.mutex.lock().expect("no poisoning in the model"));
            WaitTimeout(true)
        }

        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }
}
