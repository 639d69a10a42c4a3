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
//! A seat that dies outside a unit (its settle panics: a unit value or a
//! panic payload whose `Drop` panics) is a lost seat: a [`SeatWatch`] armed
//! for the whole delivery latches the lane death, resolves the unit's
//! receipt `Terminal(SeatLost)` if it is still owed, and reports
//! `SeatLost` to the pump, which retires the seat and resolves every unit
//! that needed it (`docs/decisions/0002-lost-seats-retire.md`).
//!
//! Every unit runs inside a `debug`-level `unit` span (role, seat index,
//! unit id, `thread`: the seat's thread name, `work-fleet-solver-3` or
//! `work-fleet-serial-0`), entered on the seat's own thread, so a timeline
//! viewer shows one lane per seat thread with the unit bodies' spans
//! (`solve.bin`, `sim`, `resolve`) nested inside (`DESIGN.md` §3
//! "Telemetry"; seed 000 §7).

use crate::handle::{FleetHandle, Job, SeatCtx};
use fleet::posture::{LaneDeathCause, PostureOwner};
use fleet::pump::SeatId;
use fleet::receipt::{ReceiptSender, TerminalReason, UnitValue};
use fleet::sink::Delivery;
use fleet::waker::PostureWaker;
use fleet::WorkerRole;
use futures::FutureExt;
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use tracing::Instrument;

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

/// Armed for one delivery, from grant to `SeatDone`. Dropped armed (the
/// seat's thread or task unwound out of the settle, or the unit's future
/// was dropped unfinished), it reports the seat lost: nothing waits on a
/// seat that will never report.
struct SeatWatch {
    lane: Lane,
    seat: SeatId,
    unit: fleet::unit::UnitId,
    /// The unit's receipt until the settle resolves it.
    receipt: Option<ReceiptSender>,
    armed: bool,
}

impl SeatWatch {
    fn new(lane: Lane, seat: SeatId, unit: fleet::unit::UnitId, receipt: ReceiptSender) -> Self {
        SeatWatch {
            lane,
            seat,
            unit,
            receipt: Some(receipt),
            armed: true,
        }
    }

    /// The unit ran and its receipt resolved: report the seat done.
    fn done(mut self) {
        self.armed = false;
        self.lane.fleet.inner.host.seat_done(self.seat, self.unit);
    }
}

impl Drop for SeatWatch {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let seat = self.seat;
        tracing::error!(
            target: "fleet::lane",
            role = %seat.role, seat = seat.index, unit = self.unit,
            "lane death: a seat died outside its unit; the seat leaves the layout, the posture cordons until a fresh process"
        );
        // Latch first: the pump step that retires the seat sees the fault.
        self.lane
            .posture
            .mark_lane_death_because(LaneDeathCause::SeatLost {
                role: seat.role,
                seat: seat.index,
            });
        self.lane.waker.notify(self.lane.posture.seq());
        if let Some(receipt) = self.receipt.take() {
            receipt.terminal(TerminalReason::SeatLost {
                role: seat.role,
                index: seat.index,
            });
        }
        self.lane.fleet.inner.host.seat_lost(seat);
    }
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
        let watch = SeatWatch::new(self.clone(), seat, meta.id, receipt);
        let out = catch_unwind(AssertUnwindSafe(|| rt.block_on(body(ctx))));
        self.settle(watch, meta, out);
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
        let watch = SeatWatch::new(self.clone(), seat, meta.id, receipt);
        let out = AssertUnwindSafe(crate::checkpoint::Sliced::new(
            async move { body(ctx).await },
        ))
        .catch_unwind()
        .instrument(span.clone())
        .await;
        let _entered = span.enter();
        self.settle(watch, meta, out);
    }

    /// Resolves the unit's receipt and reports the seat done. Runs outside
    /// `catch_unwind`: a panic here (a value or payload whose `Drop` panics)
    /// unwinds through `watch`, which reports the seat lost.
    fn settle(
        &self,
        mut watch: SeatWatch,
        meta: fleet::unit::UnitMeta,
        out: Result<UnitValue, Box<dyn Any + Send>>,
    ) {
        let seat = watch.seat;
        match out {
            Ok(value) => {
                if let Some(receipt) = watch.receipt.take() {
                    receipt.complete(value);
                }
            }
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
                self.posture
                    .mark_lane_death_because(LaneDeathCause::UnitPanicked {
                        role: seat.role,
                        seat: seat.index,
                        message: message.clone(),
                    });
                self.waker.notify(self.posture.seq());
                if let Some(receipt) = watch.receipt.take() {
                    receipt.terminal(TerminalReason::Panicked { message });
                }
            }
        }
        watch.done();
    }
}

/// The seats the pump retired, as the step hook last published them (the
/// census and the shutdown report read it).
pub(crate) type LostSeats = Arc<parking_lot::Mutex<Vec<SeatId>>>;

/// The shell's step hook both bindings install: after every pump step,
/// publish the intake backlog gauge (when it changed), the lost seats, and
/// feed the posture's intake-suppression counter with the pump's new
/// suppressions.
pub(crate) fn step_hook(
    posture: Arc<PostureOwner>,
    lost: LostSeats,
) -> impl FnMut(&fleet::pump::HostPump<Job>) + Send + 'static {
    let mut seen = 0u64;
    let mut lost_seen = 0usize;
    let mut last_backlog: Vec<(WorkerRole, u32)> = Vec::new();
    move |pump| {
        let now = pump.suppressed();
        for _ in seen..now {
            posture.note_intake_suppressed();
        }
        seen = now;
        let now_lost = pump.lost_seats();
        if now_lost.len() != lost_seen {
            lost_seen = now_lost.len();
            *lost.lock() = now_lost;
        }
        let backlog = pump.backlog_by_role();
        if backlog != last_backlog {
            fleet::telemetry::record_intake_backlog(&backlog);
            last_backlog = backlog;
        }
    }
}
