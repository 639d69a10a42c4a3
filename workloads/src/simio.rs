//! The simulated I/O every contender's sims wait on: one process-wide timer
//! thread with microsecond resolution.
//!
//! A sim's I/O wait stands for a node's answer (`DESIGN.md` §5). For the
//! comparison to be fair every contender must get the same answers at the
//! same times: a Tokio timer rounds a wait up to its 1 ms wheel while a
//! blocked thread's `nanosleep` does not, so at scale 0.1 a 0.3 ms wait
//! became ≥ 1 ms for the async contenders and stayed 0.3 ms for the
//! thread-per-sim one. Here every wait — awaited ([`wait`]) or blocking
//! ([`wait_blocking`]) — is registered with the same timer thread
//! (`lab-sim-io`), which sleeps to the earliest deadline with a 1 µs timer
//! slack and wakes its waiter. The answer arrives the way a socket's would:
//! from another thread, as a wake-up.
//!
//! The thread starts on first use (or [`start`]) and lives as long as the
//! process; it is the lab's, not a contender's (its name starts with
//! `lab-`, so the lab's thread counts leave it out).

use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// The timer thread's name.
pub const THREAD_NAME: &str = "lab-sim-io";

/// Who waits on one deadline.
enum Waiter {
    /// An awaited wait: wake its task.
    Task(Option<Waker>),
    /// A blocking wait: unpark its thread.
    Thread(std::thread::Thread),
}

/// One registered wait.
struct Entry {
    done: AtomicBool,
    waiter: Mutex<Waiter>,
}

impl Entry {
    fn fire(&self) {
        self.done.store(true, Ordering::Release);
        match &mut *self.waiter.lock() {
            Waiter::Task(w) => {
                if let Some(w) = w.take() {
                    w.wake();
                }
            }
            Waiter::Thread(t) => t.unpark(),
        }
    }
}

/// A deadline in the heap (earliest first; ties in registration order).
struct Due {
    at: Instant,
    seq: u64,
    entry: Arc<Entry>,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // BinaryHeap is a max-heap: reverse for earliest first.
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// The process-wide timer.
struct Clock {
    heap: Mutex<BinaryHeap<Due>>,
    changed: Condvar,
    seq: AtomicU64,
    /// Sum and count of how late deadlines fired, ns (see [`lateness`]).
    late_ns: AtomicU64,
    fired: AtomicU64,
}

static CLOCK: OnceLock<Arc<Clock>> = OnceLock::new();

fn clock() -> &'static Arc<Clock> {
    CLOCK.get_or_init(|| {
        let c = Arc::new(Clock {
            heap: Mutex::new(BinaryHeap::new()),
            changed: Condvar::new(),
            seq: AtomicU64::new(0),
            late_ns: AtomicU64::new(0),
            fired: AtomicU64::new(0),
        });
        let run = c.clone();
        std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || run.run())
            // The lab cannot replay a corpus without its I/O.
            .expect("cannot start the simulated I/O timer thread");
        c
    })
}

impl Clock {
    fn run(&self) {
        // Like cyclictest: a 1 µs slack instead of the default 50 µs.
        // SAFETY: PR_SET_TIMERSLACK only changes this thread's slack.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1_000u64, 0, 0, 0) };
        let mut heap = self.heap.lock();
        loop {
            let now = Instant::now();
            match heap.peek() {
                None => self.changed.wait(&mut heap),
                Some(d) if d.at <= now => {
                    let due = heap.pop().expect("peeked");
                    let late = now.saturating_duration_since(due.at).as_nanos() as u64;
                    self.late_ns.fetch_add(late, Ordering::Relaxed);
                    self.fired.fetch_add(1, Ordering::Relaxed);
                    due.entry.fire();
                }
                Some(d) => {
                    let until = d.at;
                    self.changed.wait_until(&mut heap, until);
                }
            }
        }
    }

    fn register(&self, at: Instant, waiter: Waiter) -> Arc<Entry> {
        let entry = Arc::new(Entry {
            done: AtomicBool::new(false),
            waiter: Mutex::new(waiter),
        });
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let mut heap = self.heap.lock();
        let earliest = heap.peek().is_none_or(|d| at < d.at);
        heap.push(Due {
            at,
            seq,
            entry: entry.clone(),
        });
        drop(heap);
        if earliest {
            self.changed.notify_one();
        }
        entry
    }
}

/// Starts the timer thread now (it otherwise starts on the first wait), so
/// it exists before a run's thread counts begin.
pub fn start() {
    let _ = clock();
}

/// The total lateness of the deadlines fired so far (ns between each
/// deadline and the timer firing it) and how many fired: the difference of
/// two readings gives the mean resolution a run's sims got. `(0, 0)` before
/// the first.
pub fn lateness() -> (u64, u64) {
    let c = clock();
    (
        c.late_ns.load(Ordering::Relaxed),
        c.fired.load(Ordering::Relaxed),
    )
}

/// Whether the calling thread's waits are zero ([`crate::cpu::WorkMode::Fixed`]).
fn waits_are_zero() -> bool {
    crate::cpu::work_mode() != crate::cpu::WorkMode::ThreadCpu
}

/// Waits `d` on the shared timer, awaited (any executor). A zero wait is
/// ready at once, as is every wait of a thread in fixed-work mode.
pub fn wait(d: Duration) -> IoWait {
    IoWait {
        at: Instant::now() + d,
        zero: d.is_zero() || waits_are_zero(),
        entry: None,
    }
}

/// Waits `d` on the shared timer, blocking the calling thread (not at all
/// in fixed-work mode).
pub fn wait_blocking(d: Duration) {
    if d.is_zero() || waits_are_zero() {
        return;
    }
    let entry = clock().register(Instant::now() + d, Waiter::Thread(std::thread::current()));
    while !entry.done.load(Ordering::Acquire) {
        std::thread::park();
    }
}

/// The future of [`wait`].
pub struct IoWait {
    at: Instant,
    zero: bool,
    entry: Option<Arc<Entry>>,
}

impl Future for IoWait {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.zero {
            return Poll::Ready(());
        }
        match &self.entry {
            None => {
                let at = self.at;
                let entry = clock().register(at, Waiter::Task(Some(cx.waker().clone())));
                self.entry = Some(entry);
                Poll::Pending
            }
            Some(e) => {
                if e.done.load(Ordering::Acquire) {
                    return Poll::Ready(());
                }
                let mut w = e.waiter.lock();
                // Fired between the check and the lock: ready now.
                if e.done.load(Ordering::Acquire) {
                    return Poll::Ready(());
                }
                *w = Waiter::Task(Some(cx.waker().clone()));
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_awaited_wait_ends_after_its_deadline_never_before() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for us in [50u64, 300, 1_500] {
            let t = Instant::now();
            rt.block_on(wait(Duration::from_micros(us)));
            assert!(t.elapsed() >= Duration::from_micros(us), "{us} µs");
        }
        // No Tokio timer is needed (the runtime has none enabled).
        rt.block_on(wait(Duration::ZERO));
    }

    #[test]
    fn a_blocking_wait_ends_after_its_deadline_never_before() {
        for us in [50u64, 300, 1_500] {
            let t = Instant::now();
            wait_blocking(Duration::from_micros(us));
            assert!(t.elapsed() >= Duration::from_micros(us), "{us} µs");
        }
    }

    #[test]
    fn many_waits_from_many_threads_all_end_in_deadline_order_per_thread() {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                std::thread::spawn(move || {
                    for k in 0..20u64 {
                        let d = Duration::from_micros(100 + (k * 37 + i * 11) % 400);
                        let t = Instant::now();
                        wait_blocking(d);
                        assert!(t.elapsed() >= d);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let (_, fired) = lateness();
        assert!(fired >= 160);
    }

    #[test]
    fn an_earlier_deadline_registered_later_is_not_held_behind_a_later_one() {
        // A 120 s wait first, then a 1 ms one: the short one ends while the
        // long one still waits (no clock is read: the long thread's state is
        // the event). The pause only makes it likely the long wait
        // registers first; it decides nothing. The long thread is left to
        // end with the test's process.
        let long = std::thread::spawn(|| wait_blocking(Duration::from_secs(120)));
        std::thread::sleep(Duration::from_millis(20));
        wait_blocking(Duration::from_millis(1));
        assert!(
            !long.is_finished(),
            "the short wait was held behind the long one"
        );
    }
}
