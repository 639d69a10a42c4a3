//! What every seat does with a granted unit, on either binding: run the body
//! with panics caught, resolve the receipt, report the seat done.
//!
//! A panicking unit is a lane death (`DESIGN.md` §3 "Outcome ledger"; seed
//! 000 §14 "lane-death terminal receipts"): its receipt resolves
//! `Terminal(Panicked)`, the posture owner latches the sticky lane-death
//! cause (cordoned until a fresh process), every registered host gets a
//! posture edge, and the seat reports done and lives on. The unit's own
//! [`fleet::ledger::BinWitness`], dropped with the unit's future, delivers
//! `Failed(LaneDeath)` for each path it still owed.
//!
//! Every unit runs inside a `debug`-level `unit` span (role, seat index,
//! unit id, `thread`: the seat's thread name, `work-fleet-solver-3` or
//! `work-fleet-serial-0`), entered on the seat's own thread, so a timeline
//! viewer shows one lane per seat thread with the unit bodies' spans
//! (`solve.bin`, `sim`, `resolve`) nested inside (`DESIGN.md` §3
//! "Telemetry"; seed 000 §7).

use crate::handle::{FleetHandle, Job, SeatCtx, SubmitError};
use fleet::admission::AdmissionError;
use fleet::posture::PostureOwner;
use fleet::receipt::{ReceiptSender, TerminalReason, UnitValue};
use fleet::shell::Refused;
use fleet::sink::Delivery;
use fleet::waker::PostureWaker;
use fleet::WorkerRole;
use futures::FutureExt;
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use tracing::Instrument;

/// Turns the shell's refusal into the caller's error, body handed back.
pub(crate) fn refusal(role: WorkerRole, refused: Refused<Job>) -> SubmitError {
    let body = refused.payload.body;
    match refused.error {
        AdmissionError::HostClosed => SubmitError::Closed { role, body },
        error => SubmitError::Refused { role, error, body },
    }
}

/// A panic payload as text.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-text panic payload".to_string()
    }
}

/// Everything a seat needs to settle a unit. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Lane {
    pub(crate) fleet: FleetHandle,
    pub(crate) posture: Arc<PostureOwner>,
    pub(crate) waker: Arc<PostureWaker>,
}

impl Lane {
    fn ctx(&self, d: &Delivery<Job>, thread_name: &str) -> SeatCtx {
        SeatCtx {
            seat: d.seat,
            thread_name: thread_name.to_string(),
            fleet: self.fleet.clone(),
        }
    }

    /// The `unit` span of one delivery (see the module docs).
    fn unit_span(d: &Delivery<Job>, thread_name: &str) -> tracing::Span {
        tracing::debug_span!(
            "unit",
            role = %d.seat.role,
            seat = d.seat.index,
            unit = d.meta.id,
            thread = thread_name
        )
    }

    /// Runs a unit to completion on the calling (dedicated seat) thread with
    /// `rt` current: an awaited sim receipt blocks this seat (pinned binding).
    pub(crate) fn run_blocking(
        &self,
        rt: &tokio::runtime::Handle,
        thread_name: &str,
        d: Delivery<Job>,
    ) {
        let ctx = self.ctx(&d, thread_name);
        let span = Self::unit_span(&d, thread_name);
        let _entered = span.enter();
        let Delivery {
            seat,
            meta,
            payload: Job { body, receipt },
        } = d;
        let out = catch_unwind(AssertUnwindSafe(|| rt.block_on(body(ctx))));
        self.settle(seat, meta, receipt, out);
    }

    /// Runs a unit as a future (serial binding): it yields the thread at
    /// every pending await; a panic in any poll is caught there.
    pub(crate) async fn run_async(self, thread_name: Arc<str>, d: Delivery<Job>) {
        let ctx = self.ctx(&d, &thread_name);
        let span = Self::unit_span(&d, &thread_name);
        let Delivery {
            seat,
            meta,
            payload: Job { body, receipt },
        } = d;
        let out = AssertUnwindSafe(async move { body(ctx).await })
            .catch_unwind()
            .instrument(span.clone())
            .await;
        let _entered = span.enter();
        self.settle(seat, meta, receipt, out);
    }

    fn settle(
        &self,
        seat: fleet::pump::SeatId,
        meta: fleet::unit::UnitMeta,
        receipt: ReceiptSender,
        out: Result<UnitValue, Box<dyn Any + Send>>,
    ) {
        match out {
            Ok(value) => receipt.complete(value),
            Err(panic) => {
                let message = panic_message(panic.as_ref());
                drop(panic);
                tracing::error!(
                    target: "fleet::lane",
                    role = %seat.role, seat = seat.index, unit = meta.id, %message,
                    "lane death: a unit panicked; its owed paths are failed, the posture cordons until a fresh process"
                );
                // Latch first: whoever sees the terminal receipt already
                // sees the cordon.
                self.posture.mark_lane_death();
                self.waker.notify(self.posture.seq());
                receipt.terminal(TerminalReason::Panicked { message });
            }
        }
        self.fleet.inner.host.seat_done(seat, meta.id);
    }
}

/// The shell's step hook both bindings install: after every pump step,
/// publish the intake backlog gauge (when it changed) and feed the posture's
/// intake-suppression counter with the pump's new suppressions.
pub(crate) fn step_hook(
    posture: Arc<PostureOwner>,
) -> impl FnMut(&fleet::pump::HostPump<Job>) + Send + 'static {
    let mut seen = 0u64;
    let mut last_backlog: Vec<(WorkerRole, u32)> = Vec::new();
    move |pump| {
        let now = pump.suppressed();
        for _ in seen..now {
            posture.note_intake_suppressed();
        }
        seen = now;
        let backlog = pump.backlog_by_role();
        if backlog != last_backlog {
            fleet::telemetry::record_intake_backlog(&backlog);
            last_backlog = backlog;
        }
    }
}
