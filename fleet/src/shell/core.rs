//! The shell's locked core: the pump and everything a step applies its
//! effects to. The shell thread and every [`super::HostHandle`] step the same
//! core under one lock, so a submit is admitted (and, with a free seat,
//! granted) on the submitting thread, with no hop to the shell thread.

use crate::guard::GuardSnapshot;
use crate::pump::{Effect, HostPump, Progress, PumpFailure, PumpInput};
use crate::receipt::TerminalReason;
use crate::sink::SeatSink;
use crate::unit::UnitMeta;
use std::time::{Duration, Instant};

use super::{EnqueueAnswer, Refused};

/// The core's lock: parking_lot's, or shuttle's under `--cfg fleet_model`,
/// so the shell's model checks explore the direct steps with the loop
/// (`tests/shell_direct_model.rs`; STYLE.md "Model checking beside the
/// primitive").
pub(super) struct CoreLock<T>(
    #[cfg(not(fleet_model))] parking_lot::Mutex<T>,
    #[cfg(fleet_model)] shuttle::sync::Mutex<T>,
);

impl<T> CoreLock<T> {
    pub(super) fn new(t: T) -> Self {
        #[cfg(not(fleet_model))]
        return CoreLock(parking_lot::Mutex::new(t));
        #[cfg(fleet_model)]
        return CoreLock(shuttle::sync::Mutex::new(t));
    }

    #[cfg(not(fleet_model))]
    pub(super) fn lock(&self) -> parking_lot::MutexGuard<'_, T> {
        self.0.lock()
    }

    #[cfg(fleet_model)]
    pub(super) fn lock(&self) -> shuttle::sync::MutexGuard<'_, T> {
        self.0.lock().expect("no poisoning in the model")
    }
}

pub(super) type Terminal<P> = Box<dyn FnMut(UnitMeta, P, TerminalReason) + Send>;
pub(super) type LoudHook = Box<dyn FnMut(&PumpFailure) + Send>;
pub(super) type StepHook<P> = Box<dyn FnMut(&HostPump<P>) + Send>;

/// The pump and the sinks its effects go to. Held under one lock; every
/// step (a message on the shell thread, or a handle's direct enqueue or
/// seat report) runs the pump and applies its effects before the lock is
/// released, so effects leave in the pump's order.
pub(super) struct Core<P> {
    pub(super) pump: HostPump<P>,
    pub(super) guard_source: Box<dyn Fn() -> GuardSnapshot + Send>,
    pub(super) sink: Box<dyn SeatSink<P>>,
    pub(super) on_terminal: Terminal<P>,
    pub(super) on_loud: LoudHook,
    pub(super) on_step: Option<StepHook<P>>,
    /// `Some(deadline)` while armed; `None` inside means "beyond the clock".
    pub(super) armed: Option<(Duration, Option<Instant>)>,
    /// A loud failure not yet returned by the shell's run.
    pub(super) failed: Option<PumpFailure>,
    /// The shell's run returned: the pump above is a closed stand-in and
    /// every later enqueue is refused `HostClosed`.
    pub(super) gone: bool,
}

/// What a handle's direct step needs from the shell thread afterwards.
#[derive(Clone, Copy)]
pub(super) struct Before {
    armed: bool,
}

impl<P: Send + 'static> Core<P> {
    /// The state a direct step compares against (see [`Core::needs_wake`]).
    pub(super) fn before(&self) -> Before {
        Before {
            armed: self.armed.is_some(),
        }
    }

    /// Whether the shell thread must re-read the core after a direct step:
    /// the backstop was armed or disarmed (its receive timeout changes), a
    /// loud failure waits to be returned, or the host is closed (its drain
    /// counts what is still in flight).
    pub(super) fn needs_wake(&self, before: Before) -> bool {
        !self.gone
            && (self.armed.is_some() != before.armed
                || self.failed.is_some()
                || self.pump.progress() == Progress::Closed)
    }

    /// Steps the pump with `input` under a fresh guard and applies the
    /// effects in order. With `answer`, the first admission answer
    /// (`Admitted` or `Refused`) is returned instead of applied: it belongs
    /// to the enqueued unit. A later `Refused` (none in practice) resolves
    /// terminally `HostClosed`.
    pub(super) fn step(&mut self, input: PumpInput<P>, answer: bool) -> Option<EnqueueAnswer<P>> {
        let effects = self.pump.step(input, (self.guard_source)());
        let grants = effects
            .iter()
            .filter(|e| matches!(e, Effect::Grant { .. }))
            .count();
        let out = if grants > 0 {
            let span = tracing::debug_span!(
                "pump.grant",
                grants,
                in_flight = self.pump.counts().in_flight
            );
            span.in_scope(|| self.apply(effects, answer))
        } else {
            self.apply(effects, answer)
        };
        if let Some(hook) = self.on_step.as_mut() {
            hook(&self.pump);
        }
        out
    }

    fn apply(&mut self, effects: Vec<Effect<P>>, mut wants: bool) -> Option<EnqueueAnswer<P>> {
        let mut out = None;
        let mut loud = None;
        for effect in effects {
            match effect {
                Effect::Admitted { placement, .. } => {
                    if std::mem::take(&mut wants) {
                        out = Some(Ok(placement));
                    }
                }
                Effect::Refused {
                    meta,
                    payload,
                    error,
                } => {
                    if std::mem::take(&mut wants) {
                        out = Some(Err(Refused {
                            meta,
                            payload,
                            error,
                        }));
                    } else {
                        (self.on_terminal)(meta, payload, TerminalReason::HostClosed);
                    }
                }
                Effect::Grant {
                    seat,
                    meta,
                    payload,
                } => self.sink.deliver(seat, meta, payload),
                Effect::Terminal {
                    meta,
                    payload,
                    reason,
                } => (self.on_terminal)(meta, payload, reason),
                Effect::ArmBackstop { after_ms } => {
                    let interval = Duration::from_millis(after_ms);
                    self.armed = Some((interval, Instant::now().checked_add(interval)));
                }
                Effect::DisarmBackstop => self.armed = None,
                Effect::SeatRetired { seat, unit } => tracing::error!(
                    target: "fleet::lane",
                    role = %seat.role, seat = seat.index, ?unit,
                    "lane death: a seat was lost outside a unit; it leaves the layout until a fresh process"
                ),
                Effect::Rebudgeted {
                    epoch,
                    from,
                    to,
                    released,
                } => tracing::info!(
                    target: "fleet::posture",
                    host = %self.pump.layout().host,
                    epoch, %from, %to, released = released.len(),
                    "re-derived budget in force from this epoch boundary; pins released for re-keying"
                ),
                Effect::LoudFailure(f) => loud = Some(f),
            }
        }
        if let Some(f) = loud {
            (self.on_loud)(&f);
            self.failed = Some(f);
        }
        out
    }

    /// Hands the pump to the shell's caller and leaves a closed stand-in
    /// over the same layout, so a late enqueue is refused `HostClosed` and a
    /// late seat report is ignored.
    pub(super) fn retire(&mut self) -> HostPump<P> {
        let mut stand_in = HostPump::new(self.pump.layout().clone(), *self.pump.config());
        let _ = stand_in.step(PumpInput::Close, GuardSnapshot::nominal(1));
        self.gone = true;
        self.armed = None;
        // The sink's senders go now: seats waiting on their mailboxes see
        // the host closed and end, as when the shell owned them.
        self.sink = Box::new(|_: crate::pump::SeatId, _: UnitMeta, _: P| {});
        std::mem::replace(&mut self.pump, stand_in)
    }
}
