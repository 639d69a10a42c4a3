//! The submit side of a running fleet: [`FleetHandle`], unit bodies and the
//! context a body runs with.
//!
//! A unit is a body (a closure that builds a future) plus its role and an
//! optional pin key. The host pump decides when and on which seat it runs
//! (`DESIGN.md` §3 "Lanes, hosts and the pump"); the binding decides on which
//! thread (§4). A walk submits its sims through the [`SeatCtx::fleet`] handle
//! and awaits their receipts: the pinned binding blocks the walk's own seat
//! thread, the serial binding yields the seat's cycle thread to other units.

use fleet::admission::AdmissionError;
use fleet::plan::Binding;
use fleet::pump::SeatId;
use fleet::receipt::{receipt_pair, Receipt, ReceiptSender, UnitValue};
use fleet::shell::Refused;
use fleet::unit::{PinKey, UnitId, UnitMeta};
use fleet::WorkerRole;
use futures::future::BoxFuture;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A unit's work: builds the future the seat runs. The future's value goes to
/// the unit's [`Receipt`]. Sim bodies do their I/O wait with
/// `tokio::time::sleep` (a Tokio handle is current on both bindings).
pub type UnitBody = Box<dyn FnOnce(SeatCtx) -> BoxFuture<'static, UnitValue> + Send>;

/// Boxes an `async` closure as a [`UnitBody`].
pub fn unit_body<F, Fut>(f: F) -> UnitBody
where
    F: FnOnce(SeatCtx) -> Fut + Send + 'static,
    Fut: Future<Output = UnitValue> + Send + 'static,
{
    Box::new(move |ctx| Box::pin(f(ctx)))
}

/// Awaits `receipt` for at most `deadline`: the unit's answer, or past the
/// deadline `Err(TerminalReason::Overrun)`. The overrun is counted
/// (`fleet::receipt::overruns_total`, the `degenbot_fleet_receipt_overruns_total`
/// metric labelled with `role`), the receipt is abandoned (a late answer is
/// dropped), and the caller accounts the paths it owed as
/// `Failed(Overrun)` (`TerminalReason::fail_reason`), so the ledger stays
/// exact while a hung unit cannot hang its walk (`DESIGN.md` §3 "Outcome
/// ledger").
///
/// Inside a unit body the deadline runs on the seat's Tokio timer (both
/// bindings have one) and the seat is yielded while waiting; outside any
/// Tokio runtime it blocks the calling thread instead.
pub async fn within(
    receipt: Receipt,
    deadline: std::time::Duration,
    role: Option<WorkerRole>,
) -> fleet::receipt::ReceiptResult {
    if tokio::runtime::Handle::try_current().is_err() {
        return receipt.wait_deadline(deadline, role);
    }
    let mut receipt = receipt;
    match tokio::time::timeout(deadline, &mut receipt).await {
        Ok(answer) => answer,
        Err(_) => receipt.give_up(deadline, role),
    }
}

/// What a running unit knows about where it runs.
///
/// Inside a body, await receipts (`receipt.await`); never call
/// `Receipt::wait` there: on the serial binding that would block the one
/// thread the awaited unit needs. `FleetHandle::submit` itself never waits
/// for another thread: it steps the host's pump on the calling thread (one
/// short lock) and is fine on either binding.
#[derive(Clone, Debug)]
pub struct SeatCtx {
    /// The seat the pump granted (role and index).
    pub seat: SeatId,
    /// The seat's thread name from the plan's seat layout
    /// (`work-fleet-solver-3`; the cycle thread it rides, `work-fleet-serial-1`,
    /// on the serial binding).
    pub thread_name: String,
    /// The fleet, to submit follow-up units (a walk's sims) and await them.
    pub fleet: FleetHandle,
}

/// The pump payload: the body and the sender of the unit's receipt.
pub(crate) struct Job {
    pub(crate) body: UnitBody,
    pub(crate) receipt: ReceiptSender,
}

impl fmt::Debug for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job")
            .field("receipt", &self.receipt)
            .finish_non_exhaustive()
    }
}

/// A refused submission. The body comes back: nothing is lost, the caller
/// decides (retry later, account the unit's paths as failed).
#[derive(thiserror::Error)]
pub enum SubmitError {
    /// The pump refused the unit (a full role queue, a Solver unit without a
    /// key, a role this fleet does not host, a closed host).
    #[error("unit of role {role} refused: {error}; the body is handed back")]
    Refused {
        /// The unit's role.
        role: WorkerRole,
        /// The pump's reason.
        error: AdmissionError,
        /// The body, unrun.
        body: UnitBody,
    },
    /// The fleet has shut down; nothing takes units any more.
    #[error("unit of role {role} refused: the fleet is shut down; the body is handed back")]
    Closed {
        /// The unit's role.
        role: WorkerRole,
        /// The body, unrun.
        body: UnitBody,
    },
}

impl SubmitError {
    /// Takes the unrun body back.
    pub fn into_body(self) -> UnitBody {
        match self {
            SubmitError::Refused { body, .. } | SubmitError::Closed { body, .. } => body,
        }
    }
}

impl fmt::Debug for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::Refused { role, error, .. } => f
                .debug_struct("Refused")
                .field("role", role)
                .field("error", error)
                .finish_non_exhaustive(),
            SubmitError::Closed { role, .. } => f
                .debug_struct("Closed")
                .field("role", role)
                .finish_non_exhaustive(),
        }
    }
}

/// How a handle reaches its host: the shell's handle.
pub(crate) type Host = fleet::shell::HostHandle<Job>;

pub(crate) struct HandleInner {
    pub(crate) host: Host,
    pub(crate) next_id: AtomicU64,
    pub(crate) binding: Binding,
}

/// Where a host's unfinished units wait ([`FleetHandle::backlog`]), units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Backlog {
    /// Held back by the cordon (deferrable roles while Cordoned).
    pub held: u32,
    /// Admitted and waiting for a seat.
    pub queued: u32,
    /// Running on a seat.
    pub running: u32,
}

impl Backlog {
    /// Nothing held, queued or running.
    pub fn is_idle(&self) -> bool {
        self.held == 0 && self.queued == 0 && self.running == 0
    }
}

/// Submits units to a running fleet. `Clone + Send + Sync`; cheap to clone.
/// Outlives the fleet harmlessly: after shutdown every submit is refused with
/// the body handed back.
#[derive(Clone)]
pub struct FleetHandle {
    pub(crate) inner: Arc<HandleInner>,
}

impl fmt::Debug for FleetHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetHandle")
            .field("binding", &self.inner.binding)
            .finish_non_exhaustive()
    }
}

impl FleetHandle {
    pub(crate) fn new(host: Host, binding: Binding) -> Self {
        FleetHandle {
            inner: Arc::new(HandleInner {
                host,
                next_id: AtomicU64::new(1),
                binding,
            }),
        }
    }

    /// The binding the fleet runs.
    pub fn binding(&self) -> Binding {
        self.inner.binding
    }

    /// Hands the host a re-derived budget's bounds (a changed quota,
    /// [`fleet::plan::Plan::replan`]): they take effect at the next
    /// [`FleetHandle::epoch_boundary`], never mid-cycle, and pins are
    /// re-keyed there (release, then lease). `DESIGN.md` §3 "Quota detection".
    pub fn rebudget(&self, bounds: fleet::pump::PumpBounds) {
        self.inner.host.rebudget(bounds);
    }

    /// Units the host has not finished yet, by where they wait: held back by
    /// a cordon (the intake backlog), queued for a seat, running on a seat.
    /// A snapshot under the pump's lock. All zero once a cordon's backlog
    /// has drained and the host is idle, which is when a host may hand its
    /// allocator's free memory back (`DESIGN.md` §3 "Posture").
    pub fn backlog(&self) -> Backlog {
        self.inner.host.with_pump(|p| Backlog {
            held: p.backlog_by_role().iter().map(|(_, n)| *n).sum(),
            queued: p.queued().len() as u32,
            running: p.in_flight().len() as u32,
        })
    }

    /// Marks an epoch (cycle) boundary: call it between cycles, before the
    /// next cycle's first unit. A pending re-budget takes effect here.
    pub fn epoch_boundary(&self, epoch: u64) {
        self.inner.host.epoch_boundary(epoch);
    }

    /// Submits a unit of `role` (with `key` for keyed roles: the bin index for
    /// Solver, 0 or `None` for Merge) and returns its receipt, which resolves
    /// with the body's value or a typed terminal reason.
    ///
    /// Errors: [`SubmitError`] with the body handed back.
    ///
    /// Admission is decided on the calling thread: the host's pump is
    /// stepped under its lock (no hop to the pump thread), and when a seat
    /// is free the grant is delivered from here, so the answer comes back
    /// in one pump step (`DESIGN.md` §3 "Lanes, hosts and the pump").
    ///
    /// A walk submits its sim from inside its own body and awaits it (never
    /// a blocking wait inside a unit):
    ///
    /// ```
    /// use fleet::plan::{Plan, Profile};
    /// use fleet::WorkerRole;
    /// use fleet_bindings::{boot, unit_body, BootOptions};
    ///
    /// let plan = Plan::resolve(2.0, Profile::Auto, &Default::default()).unwrap();
    /// let fleet = boot(&plan, BootOptions::for_plan(&plan)).unwrap();
    /// let walk = unit_body(|ctx| async move {
    ///     let sim = ctx
    ///         .fleet
    ///         .submit(WorkerRole::SimDriver, None, unit_body(|_| async { Box::new(7u64) as _ }))
    ///         .expect("sim admitted");
    ///     let seen = *sim.await.unwrap().downcast::<u64>().unwrap();
    ///     Box::new(seen * 6) as _
    /// });
    /// // Solver units are keyed: the key (a bin index) picks the seat.
    /// let receipt = fleet.handle().submit(WorkerRole::Solver, Some(0), walk).unwrap();
    /// assert_eq!(receipt.wait().unwrap().downcast_ref::<u64>(), Some(&42));
    /// fleet.shutdown().unwrap();
    /// ```
    pub fn submit(
        &self,
        role: WorkerRole,
        key: Option<PinKey>,
        body: UnitBody,
    ) -> Result<Receipt, SubmitError> {
        let id: UnitId = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let meta = UnitMeta { id, role, key };
        let (sender, receipt) = receipt_pair();
        match self.inner.host.enqueue(
            meta,
            Job {
                body,
                receipt: sender,
            },
        ) {
            Ok(_) => Ok(receipt),
            Err(refused) => Err(refusal(role, refused)),
        }
    }
}

/// Turns the shell's refusal into the caller's error, body handed back.
fn refusal(role: WorkerRole, refused: Refused<Job>) -> SubmitError {
    let body = refused.payload.body;
    match refused.error {
        AdmissionError::HostClosed => SubmitError::Closed { role, body },
        error => SubmitError::Refused { role, error, body },
    }
}
