//! Receipts: the one-shot a unit's submitter waits on.
//!
//! A [`ReceiptSender`] travels with the unit (inside the pump payload); the
//! [`Receipt`] stays with the submitter. The receipt resolves exactly once:
//! with the unit's value, or with a typed [`TerminalReason`] (a held unit
//! drained by a lane death, a closed host, a loud pump failure, a panic, or a
//! sender dropped without answering — a receipt never hangs because its
//! sender vanished). `DESIGN.md` §3 "Lanes, hosts and the pump"; seed 003
//! decision 6 ("typed terminal receipts").
//!
//! A [`Receipt`] is a [`Future`] (no runtime needed: any executor, or
//! `futures::executor::block_on`) and can be waited on from a plain thread
//! with [`Receipt::wait`] / [`Receipt::wait_timeout`].

use crate::sync::{Condvar, Mutex};
use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// A unit's result value, type-erased (downcast it with `Box::downcast`).
pub type UnitValue = Box<dyn Any + Send>;

/// What a receipt resolves to.
pub type ReceiptResult = Result<UnitValue, TerminalReason>;

/// Why a receipt resolved without a value. Every variant means the unit will
/// never run (or never report): do not wait for it again, account it as failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TerminalReason {
    /// The lane died (sticky lane-death latch): the host drained its held
    /// units terminally. Account the unit as `Failed(LaneDeath)`; the latch
    /// holds until a fresh process.
    #[error("lane death: the host is faulted and drained this held unit; it will not run in this process")]
    LaneDeath,
    /// The host closed before the unit was granted. Resubmit to a live host
    /// if the work is still wanted.
    #[error("host closed before the unit was granted; resubmit to a live host if still wanted")]
    HostClosed,
    /// The host pump failed loudly (a stalled backlog or a wiring fault);
    /// the process is expected to stop.
    #[error("host pump failed loudly; the unit was abandoned")]
    PumpFailed,
    /// The unit panicked while running; the message is the panic payload.
    #[error("the unit panicked while running: {message}")]
    Panicked {
        /// The panic payload rendered as text.
        message: String,
    },
    /// The sender was dropped without completing: the unit was lost on the
    /// way (a seat thread gone, a payload dropped). Treat as a lane death.
    #[error("the receipt's sender was dropped without an answer: the unit was lost (treat as a lane death)")]
    SenderDropped,
    /// The seat the unit ran on, or the only seat it could run on, was lost:
    /// its thread died outside any unit (`DESIGN.md` §3 "Outcome ledger":
    /// a lane death). The seat left the host's layout; the lane-death latch
    /// is set. Account the unit as `Failed(LaneDeath)`.
    #[error("seat {index} of role {role} was lost (its thread died outside a unit): lane death; account the unit as failed")]
    SeatLost {
        /// The lost seat's role.
        role: crate::role::WorkerRole,
        /// The lost seat's index among its role's seats.
        index: u32,
    },
    /// The waiter's deadline passed before the unit answered (a hung
    /// unit); the receipt is abandoned and a late answer is dropped.
    /// Account the unit's owed paths as `Failed(Overrun)`. Counted
    /// ([`overruns_total`], `degenbot_fleet_receipt_overruns_total`).
    #[error("no answer within the {deadline_ms} ms deadline: the unit overran; account it as Failed(Overrun)")]
    Overrun {
        /// The deadline that passed, ms.
        deadline_ms: u64,
    },
    /// The receipt's result was already taken (polled after `Ready`).
    #[error("the receipt's result was already taken; a receipt resolves once")]
    AlreadyTaken,
}

impl TerminalReason {
    /// The path outcome reason for a path whose unit ended this way:
    /// `Overrun` for an overrun, `SimRefused` for a unit the host closed on
    /// before granting it, `LaneDeath` for everything else (a lost, dropped,
    /// panicked or faulted unit).
    pub const fn fail_reason(&self) -> crate::outcome::FailReason {
        use crate::outcome::FailReason;
        match self {
            TerminalReason::Overrun { .. } => FailReason::Overrun,
            TerminalReason::HostClosed => FailReason::SimRefused,
            _ => FailReason::LaneDeath,
        }
    }
}

/// Receipt waits that passed their deadline in this process.
static OVERRUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Receipt overruns so far in this process (monotonic; the report's figure;
/// the metric is `degenbot_fleet_receipt_overruns_total`).
pub fn overruns_total() -> u64 {
    OVERRUNS.load(std::sync::atomic::Ordering::Relaxed)
}

#[derive(Default)]
struct State {
    result: Option<ReceiptResult>,
    taken: bool,
    waker: Option<Waker>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    ready: Condvar,
}

impl Shared {
    /// Stores the result once; later calls are ignored. Returns whether it stored.
    fn resolve(&self, result: ReceiptResult) -> bool {
        let waker = {
            let mut st = self.state.lock();
            if st.result.is_some() || st.taken {
                return false;
            }
            st.result = Some(result);
            st.waker.take()
        };
        self.ready.notify_all();
        if let Some(w) = waker {
            w.wake();
        }
        true
    }
}

/// The sending half: resolves the receipt once. Dropping it unresolved
/// resolves the receipt with [`TerminalReason::SenderDropped`].
pub struct ReceiptSender {
    shared: Arc<Shared>,
    done: bool,
}

/// The waiting half: a future, or a blocking wait from a plain thread.
///
/// ```
/// use std::time::Duration;
/// use fleet::receipt::{receipt_pair, TerminalReason};
///
/// // A unit's sender answers once; the submitter waits with a deadline.
/// let (sender, receipt) = receipt_pair();
/// std::thread::spawn(move || sender.complete(Box::new(42_u64)));
/// let value = receipt.wait_deadline(Duration::from_secs(5), None).expect("answered in time");
/// assert_eq!(*value.downcast::<u64>().unwrap(), 42);
///
/// // A sender dropped without answering resolves the receipt: it never hangs.
/// let (sender, receipt) = receipt_pair();
/// drop(sender);
/// assert_eq!(receipt.wait().err(), Some(TerminalReason::SenderDropped));
///
/// // Past the deadline the wait gives up with a typed overrun (counted).
/// let (_sender, receipt) = receipt_pair();
/// let late = receipt.wait_deadline(Duration::from_millis(10), None);
/// assert!(matches!(late, Err(TerminalReason::Overrun { .. })));
/// ```
pub struct Receipt {
    shared: Arc<Shared>,
}

/// A fresh, connected sender/receipt pair.
pub fn receipt_pair() -> (ReceiptSender, Receipt) {
    let shared = Arc::new(Shared::default());
    (
        ReceiptSender {
            shared: shared.clone(),
            done: false,
        },
        Receipt { shared },
    )
}

impl ReceiptSender {
    /// Resolves the receipt with the unit's value.
    pub fn complete(mut self, value: UnitValue) {
        self.done = true;
        self.shared.resolve(Ok(value));
    }

    /// Resolves the receipt with a typed terminal reason.
    pub fn terminal(mut self, reason: TerminalReason) {
        self.done = true;
        self.shared.resolve(Err(reason));
    }
}

impl Drop for ReceiptSender {
    fn drop(&mut self) {
        if !self.done {
            self.shared.resolve(Err(TerminalReason::SenderDropped));
        }
    }
}

impl std::fmt::Debug for ReceiptSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceiptSender")
            .field("done", &self.done)
            .finish()
    }
}

impl std::fmt::Debug for Receipt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receipt")
            .field("ready", &self.is_ready())
            .finish()
    }
}

impl Receipt {
    /// Whether a result is waiting (does not take it).
    pub fn is_ready(&self) -> bool {
        self.shared.state.lock().result.is_some()
    }

    fn take(st: &mut State) -> Option<ReceiptResult> {
        if st.taken {
            return Some(Err(TerminalReason::AlreadyTaken));
        }
        let r = st.result.take();
        if r.is_some() {
            st.taken = true;
        }
        r
    }

    /// Blocks the calling thread until the receipt resolves.
    pub fn wait(self) -> ReceiptResult {
        let mut st = self.shared.state.lock();
        loop {
            if let Some(r) = Self::take(&mut st) {
                return r;
            }
            self.shared.ready.wait(&mut st);
        }
    }

    /// Blocks up to `timeout`; `None` when it has not resolved by then (the
    /// receipt stays usable). A huge timeout waits indefinitely.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<ReceiptResult> {
        let deadline = std::time::Instant::now().checked_add(timeout);
        let mut st = self.shared.state.lock();
        loop {
            if let Some(r) = Self::take(&mut st) {
                return Some(r);
            }
            match deadline {
                Some(d) => {
                    if self.shared.ready.wait_until(&mut st, d).timed_out() {
                        return Self::take(&mut st);
                    }
                }
                None => self.shared.ready.wait(&mut st),
            }
        }
    }
}

impl Receipt {
    /// Blocks up to `deadline` for the answer; past it, gives up
    /// ([`Receipt::give_up`]): `Err(Overrun)`, counted, and a late answer
    /// is dropped. A huge deadline waits indefinitely. `role`: the awaited
    /// unit's role, for the metric's label.
    pub fn wait_deadline(
        self,
        deadline: Duration,
        role: Option<crate::WorkerRole>,
    ) -> ReceiptResult {
        match self.wait_timeout(deadline) {
            Some(r) => r,
            None => self.give_up(deadline, role),
        }
    }

    /// Gives up waiting now: the answer if it already came, else
    /// `Err(Overrun { deadline_ms })`; the receipt is then abandoned (a late
    /// answer is dropped, later waits answer `AlreadyTaken`) and the overrun
    /// is counted. For waiters with their own timer (an async deadline).
    pub fn give_up(&self, deadline: Duration, role: Option<crate::WorkerRole>) -> ReceiptResult {
        let mut st = self.shared.state.lock();
        if let Some(r) = Self::take(&mut st) {
            return r;
        }
        // Abandon under the lock: a resolve after this sees `taken` and
        // drops its answer, so the unit is accounted exactly once.
        st.taken = true;
        st.waker = None;
        drop(st);
        OVERRUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        crate::telemetry::record_receipt_overrun(role);
        Err(TerminalReason::Overrun {
            deadline_ms: u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX),
        })
    }
}

impl Future for Receipt {
    type Output = ReceiptResult;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<ReceiptResult> {
        let mut st = self.shared.state.lock();
        match Self::take(&mut st) {
            Some(r) => Poll::Ready(r),
            None => {
                st.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(r: ReceiptResult) -> u32 {
        *r.expect("a value").downcast::<u32>().expect("a u32")
    }

    #[test]
    fn completes_across_threads_with_a_blocking_wait() {
        let (tx, rx) = receipt_pair();
        let t = std::thread::spawn(move || tx.complete(Box::new(7u32)));
        assert_eq!(value(rx.wait()), 7);
        t.join().unwrap();
    }

    #[test]
    fn a_dropped_sender_resolves_typed_never_hangs() {
        let (tx, rx) = receipt_pair();
        drop(tx);
        assert_eq!(
            rx.wait_timeout(Duration::from_secs(5))
                .unwrap()
                .unwrap_err(),
            TerminalReason::SenderDropped
        );
    }

    #[test]
    fn a_wait_past_its_deadline_is_a_counted_overrun_and_a_late_answer_is_dropped() {
        let (tx, rx) = receipt_pair();
        let before = overruns_total();
        let again = Receipt {
            shared: rx.shared.clone(),
        };
        let r = rx.wait_deadline(Duration::from_millis(1), Some(crate::WorkerRole::SimDriver));
        assert_eq!(r.unwrap_err(), TerminalReason::Overrun { deadline_ms: 1 });
        assert_eq!(
            TerminalReason::Overrun { deadline_ms: 1 }.fail_reason(),
            crate::outcome::FailReason::Overrun
        );
        assert!(overruns_total() > before);
        // The unit answers late: dropped, the receipt stays accounted once.
        tx.complete(Box::new(7u32));
        assert_eq!(
            again.wait_timeout(Duration::ZERO).unwrap().unwrap_err(),
            TerminalReason::AlreadyTaken
        );
        // An answer in time is returned, not an overrun.
        let (tx, rx) = receipt_pair();
        tx.complete(Box::new(3u32));
        assert_eq!(value(rx.wait_deadline(Duration::ZERO, None)), 3);
    }

    #[test]
    fn wait_timeout_returns_none_then_the_value() {
        let (tx, rx) = receipt_pair();
        assert!(rx.wait_timeout(Duration::from_millis(1)).is_none());
        tx.terminal(TerminalReason::HostClosed);
        assert_eq!(
            rx.wait_timeout(Duration::MAX).unwrap().unwrap_err(),
            TerminalReason::HostClosed
        );
        assert_eq!(
            rx.wait_timeout(Duration::ZERO).unwrap().unwrap_err(),
            TerminalReason::AlreadyTaken
        );
    }

    #[test]
    fn is_a_future_without_a_runtime() {
        let (tx, rx) = receipt_pair();
        let t = std::thread::spawn(move || tx.complete(Box::new(3u32)));
        assert_eq!(value(futures::executor::block_on(rx)), 3);
        t.join().unwrap();
    }
}
