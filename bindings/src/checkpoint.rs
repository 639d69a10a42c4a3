//! The cooperative checkpoint: a long CPU unit on the serial binding yields
//! its cycle thread once per slice, so a ready unit (a sim whose timer
//! fired, a grant just delivered) waits a bounded time.
//!
//! The serial binding drives every unit of a cycle thread as a task of one
//! current-thread runtime: a unit that computes without awaiting holds the
//! thread, and nothing else on it runs until it awaits (`DESIGN.md` §4: a
//! running walk is never preempted). [`checkpoint`] is the await a CPU loop
//! inserts between batches of work: it costs one clock read while the
//! unit's current run is shorter than [`CHECKPOINT_SLICE`], and yields the
//! thread (the scheduler polls its timers and every other ready unit, then
//! resumes this one) once it is longer — like Tokio's cooperative budget,
//! measured in time rather than operations.
//!
//! **Bound.** On a cycle thread, a unit that became ready waits at most
//! `k × (CHECKPOINT_SLICE + g)` before it is polled, where `k` is the
//! number of units on that thread computing at once (each runs at most one
//! slice plus `g` before its next checkpoint yields) and `g` is the longest
//! stretch of work between two checkpoint calls (the CPU burner of
//! `fleet-workloads` calls it every batch of 32 evaluations, a few µs).
//! One CPU unit beside a 5 ms sim: the sim completes within
//! 5 ms + 1 slice + `g` of its grant, not after the CPU unit.
//!
//! On the pinned binding every unit has its own seat thread, there is
//! nothing to yield to, and [`checkpoint`] returns at once; outside any unit
//! it returns at once too.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// How long a unit on a serial cycle thread runs between yields when it
/// calls [`checkpoint`] (1 ms).
pub const CHECKPOINT_SLICE: Duration = Duration::from_millis(1);

thread_local! {
    /// When the unit being polled on this thread was (re)entered; `None`
    /// outside a serial unit's poll.
    static RESUMED_AT: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Yields the cycle thread when the calling unit has run longer than
/// [`CHECKPOINT_SLICE`] since it was last resumed; otherwise returns at
/// once. Call it between batches of CPU work inside a unit body (see the
/// module docs for the bound it gives). Never blocks; never fails.
///
/// ```
/// use fleet::plan::{Plan, Profile};
/// use fleet::WorkerRole;
/// use fleet_bindings::{boot, checkpoint, unit_body, BootOptions};
///
/// let plan = Plan::resolve(2.0, Profile::Auto, &Default::default()).unwrap();
/// let fleet = boot(&plan, BootOptions::for_plan(&plan)).unwrap();
/// let body = unit_body(|_ctx| async {
///     let mut acc = 0u64;
///     for i in 0..10_000u64 {
///         acc = acc.wrapping_mul(31).wrapping_add(i);
///         if i % 256 == 0 {
///             checkpoint().await; // lets a ready unit run every slice
///         }
///     }
///     Box::new(acc) as _
/// });
/// let receipt = fleet.handle().submit(WorkerRole::Resolve, None, body).unwrap();
/// assert!(receipt.wait().is_ok());
/// fleet.shutdown().unwrap();
/// ```
pub async fn checkpoint() {
    let over = RESUMED_AT.with(|r| r.get().is_some_and(|t| t.elapsed() >= CHECKPOINT_SLICE));
    if over {
        tokio::task::yield_now().await;
    }
}

/// Polls the wrapped unit future with its resume time recorded, so
/// [`checkpoint`] can measure the current run (serial binding only).
pub(crate) struct Sliced<F> {
    inner: Pin<Box<F>>,
}

impl<F> Sliced<F> {
    pub(crate) fn new(inner: F) -> Self {
        Sliced {
            inner: Box::pin(inner),
        }
    }
}

/// Restores the previous resume time when a poll ends (or unwinds).
struct Resumed(Option<Instant>);

impl Drop for Resumed {
    fn drop(&mut self) {
        let prev = self.0;
        RESUMED_AT.with(|r| r.set(prev));
    }
}

impl<F: Future> Future for Sliced<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _restore = Resumed(RESUMED_AT.with(|r| r.replace(Some(Instant::now()))));
        self.inner.as_mut().poll(cx)
    }
}
