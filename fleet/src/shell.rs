//! The thin shell: runs one [`HostPump`] on a thread the binding spawns.
//!
//! The shell loops on its inbox: an untimed receive while the backstop is
//! disarmed (an idle host costs nothing), a receive with a timeout while it
//! is armed (the backlog is non-empty); a timeout steps the pump with
//! `BackstopTick`. Every step reads a fresh guard from `guard_source`, and
//! the shell applies the effects in order: grants to the [`SeatSink`],
//! terminal units to `on_terminal`, admission answers to the submitter, and
//! a loud failure to the loud hook (default: log at error, then
//! `std::process::abort`, seed 000 §10 item 3). `DESIGN.md` §3 "Lanes, hosts
//! and the pump"; seed 003 decision 3.
//!
//! `fleet` spawns no threads: the binding calls [`HostShell::run`] on its own.

use crate::guard::GuardSnapshot;
use crate::pump::{AdmissionError, Effect, HostPump, Placement, PumpFailure, PumpInput, SeatId};
use crate::receipt::TerminalReason;
use crate::sink::SeatSink;
use crate::unit::{UnitId, UnitMeta};
use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// A refused unit, handed back whole.
#[derive(Debug)]
pub struct Refused<P> {
    /// The unit.
    pub meta: UnitMeta,
    /// Its payload, returned.
    pub payload: P,
    /// Why.
    pub error: AdmissionError,
}

/// The answer to an enqueue.
pub type EnqueueAnswer<P> = Result<Placement, Refused<P>>;

/// An enqueue in transit. If it is dropped unanswered (a shell that closed
/// or went away), it answers `Refused(HostClosed)` with the unit: a unit sent
/// to a host is always answered, never silently lost.
pub struct PendingEnqueue<P> {
    meta: UnitMeta,
    payload: Option<P>,
    reply: Option<Box<dyn FnOnce(EnqueueAnswer<P>) + Send>>,
}

impl<P> PendingEnqueue<P> {
    /// An enqueue of (`meta`, `payload`) whose answer goes to `reply`.
    pub fn new(
        meta: UnitMeta,
        payload: P,
        reply: impl FnOnce(EnqueueAnswer<P>) + Send + 'static,
    ) -> Self {
        PendingEnqueue {
            meta,
            payload: Some(payload),
            reply: Some(Box::new(reply)),
        }
    }

    fn answer(mut self, answer: EnqueueAnswer<P>) {
        self.payload = None;
        if let Some(reply) = self.reply.take() {
            reply(answer);
        }
    }
}

impl<P> Drop for PendingEnqueue<P> {
    fn drop(&mut self) {
        if let (Some(payload), Some(reply)) = (self.payload.take(), self.reply.take()) {
            reply(Err(Refused {
                meta: self.meta,
                payload,
                error: AdmissionError::HostClosed,
            }));
        }
    }
}

/// A message to a host shell.
pub enum ShellMsg<P> {
    /// Submit a unit; the answer goes back through the pending enqueue.
    Enqueue(PendingEnqueue<P>),
    /// A seat finished a unit.
    SeatDone {
        /// The seat.
        seat: SeatId,
        /// The unit.
        unit: UnitId,
    },
    /// A seat's thread died outside a unit: the seat leaves the layout.
    SeatLost {
        /// The seat.
        seat: SeatId,
    },
    /// A posture change was observed (a hint: re-read the guard).
    PostureEdge {
        /// The feeder's sequence number.
        seq: u64,
    },
    /// The budget was re-derived (a changed quota): new bounds at the next
    /// epoch boundary.
    Rebudget {
        /// The re-derived bounds.
        bounds: crate::pump::PumpBounds,
    },
    /// An epoch (cycle) boundary.
    EpochBoundary {
        /// The epoch that begins.
        epoch: u64,
    },
    /// Close the host.
    Close,
}

/// What an inbox receive produced.
#[derive(Debug)]
pub enum InboxRecv<M> {
    /// A message.
    Msg(M),
    /// The timeout passed with no message.
    Timeout,
    /// Every sender is gone.
    Disconnected,
}

/// The shell's message source: `timeout` `None` blocks until a message.
/// Implemented for crossbeam receivers; a model checker supplies its own.
pub trait ShellInbox<M>: Send {
    /// Receives one message, waiting at most `timeout` when given.
    fn recv(&mut self, timeout: Option<Duration>) -> InboxRecv<M>;
}

impl<M: Send> ShellInbox<M> for Receiver<M> {
    fn recv(&mut self, timeout: Option<Duration>) -> InboxRecv<M> {
        match timeout {
            None => Receiver::recv(self).map_or(InboxRecv::Disconnected, InboxRecv::Msg),
            Some(t) => match self.recv_timeout(t) {
                Ok(m) => InboxRecv::Msg(m),
                Err(RecvTimeoutError::Timeout) => InboxRecv::Timeout,
                Err(RecvTimeoutError::Disconnected) => InboxRecv::Disconnected,
            },
        }
    }
}

type Terminal<P> = Box<dyn FnMut(UnitMeta, P, TerminalReason) + Send>;
type LoudHook = Box<dyn FnMut(&PumpFailure) + Send>;
type StepHook<P> = Box<dyn FnMut(&HostPump<P>) + Send>;

/// The shell around one pump. Build with [`HostShell::new`], run with
/// [`HostShell::run`] on a thread the binding owns.
pub struct HostShell<P> {
    pump: HostPump<P>,
    inbox: Box<dyn ShellInbox<ShellMsg<P>>>,
    guard_source: Box<dyn Fn() -> GuardSnapshot + Send>,
    sink: Box<dyn SeatSink<P>>,
    on_terminal: Terminal<P>,
    on_loud: LoudHook,
    on_step: Option<StepHook<P>>,
    /// `Some(deadline)` while armed; `None` inside means "beyond the clock".
    armed: Option<(Duration, Option<Instant>)>,
    /// How long a closed host waits for its in-flight units' `SeatDone`.
    drain_deadline: Duration,
}

/// The default drain deadline of a closed host (see
/// [`HostShell::with_drain_deadline`]).
pub const DEFAULT_DRAIN_DEADLINE: Duration = Duration::from_secs(10);

/// A cheap, cloneable handle to a running shell.
pub struct HostHandle<P> {
    tx: Sender<ShellMsg<P>>,
}

impl<P> Clone for HostHandle<P> {
    fn clone(&self) -> Self {
        HostHandle {
            tx: self.tx.clone(),
        }
    }
}

fn default_loud(failure: &PumpFailure) {
    tracing::error!(%failure, "host pump failed loudly; aborting the process");
    std::process::abort();
}

impl<P: Send + 'static> HostShell<P> {
    /// A shell over a crossbeam channel, and its handle.
    pub fn new(
        pump: HostPump<P>,
        guard_source: impl Fn() -> GuardSnapshot + Send + 'static,
        sink: impl SeatSink<P> + 'static,
        on_terminal: impl FnMut(UnitMeta, P, TerminalReason) + Send + 'static,
    ) -> (HostShell<P>, HostHandle<P>) {
        let (tx, rx) = unbounded();
        (
            Self::with_inbox(pump, rx, guard_source, sink, on_terminal),
            HostHandle { tx },
        )
    }

    /// A shell over any inbox (a model checker's channel, for instance).
    pub fn with_inbox(
        pump: HostPump<P>,
        inbox: impl ShellInbox<ShellMsg<P>> + 'static,
        guard_source: impl Fn() -> GuardSnapshot + Send + 'static,
        sink: impl SeatSink<P> + 'static,
        on_terminal: impl FnMut(UnitMeta, P, TerminalReason) + Send + 'static,
    ) -> HostShell<P> {
        HostShell {
            pump,
            inbox: Box::new(inbox),
            guard_source: Box::new(guard_source),
            sink: Box::new(sink),
            on_terminal: Box::new(on_terminal),
            on_loud: Box::new(default_loud),
            on_step: None,
            armed: None,
            drain_deadline: DEFAULT_DRAIN_DEADLINE,
        }
    }

    /// How long [`HostShell::run`] keeps taking `SeatDone` (and
    /// `SeatLost`) after `Close` while units are still in flight, so the
    /// returned pump's counts include every unit that finished in time
    /// (default [`DEFAULT_DRAIN_DEADLINE`]; `Duration::ZERO` returns at
    /// once). Units still in flight at the deadline are the stuck ones:
    /// [`HostPump::in_flight`] on the returned pump names them and their
    /// seats. A huge value waits indefinitely.
    pub fn with_drain_deadline(mut self, deadline: Duration) -> Self {
        self.drain_deadline = deadline;
        self
    }

    /// Replaces the loud-failure hook (tests observe failures through it).
    /// After the hook returns, [`HostShell::run`] returns the failure.
    pub fn with_loud_hook(mut self, hook: impl FnMut(&PumpFailure) + Send + 'static) -> Self {
        self.on_loud = Box::new(hook);
        self
    }

    /// Installs a hook called after every pump step with the pump's state
    /// (the binding records the intake backlog gauge and feeds the
    /// posture's suppression counter from it). Keep it short: it runs on
    /// the shell's thread between messages.
    pub fn with_step_hook(mut self, hook: impl FnMut(&HostPump<P>) + Send + 'static) -> Self {
        self.on_step = Some(Box::new(hook));
        self
    }

    /// The pump (for gauges between runs, and tests).
    pub fn pump(&self) -> &HostPump<P> {
        &self.pump
    }

    /// Runs until `Close` (or every handle dropped: an implicit close) and
    /// the drain that follows it, or a loud failure (returned after the
    /// hook, when the hook returns). Held and queued units resolve
    /// terminally on close; the shell then keeps stepping `SeatDone` and
    /// `SeatLost` until nothing is in flight, the drain deadline passes
    /// (the units still in flight are stuck: logged, and named by
    /// [`HostPump::in_flight`] on the returned pump), or every sender is
    /// gone.
    pub fn run(mut self) -> Result<HostPump<P>, PumpFailure> {
        // `Some(deadline)` once closed; `None` inside means "beyond the clock".
        let mut drain: Option<Option<Instant>> = None;
        loop {
            if let Some(deadline) = drain {
                let in_flight = self.pump.counts().in_flight;
                if in_flight == 0 {
                    return Ok(self.pump);
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    tracing::warn!(
                        host = %self.pump.layout().host,
                        stuck = ?self.pump.in_flight(),
                        "shutdown drain deadline passed with units still in flight"
                    );
                    return Ok(self.pump);
                }
            }
            let timeout = match drain {
                Some(deadline) => deadline.map(|d| d.saturating_duration_since(Instant::now())),
                None => self
                    .armed
                    .and_then(|(_, deadline)| deadline)
                    .map(|d| d.saturating_duration_since(Instant::now())),
            };
            // A due tick goes first, so a steady stream of messages cannot
            // postpone the backstop (it fires at least once per interval).
            let due = drain.is_none() && timeout == Some(Duration::ZERO);
            let received = if due {
                InboxRecv::Timeout
            } else {
                self.inbox.recv(timeout)
            };
            if drain.is_some() {
                match received {
                    // Nobody is left to report: what is in flight is stuck.
                    InboxRecv::Disconnected => return Ok(self.pump),
                    InboxRecv::Timeout => continue,
                    InboxRecv::Msg(_) => {}
                }
            }
            let (input, pending) = match received {
                InboxRecv::Msg(ShellMsg::Enqueue(mut p)) => {
                    let payload = p
                        .payload
                        .take()
                        .expect("a pending enqueue carries its payload");
                    (
                        PumpInput::Enqueue {
                            meta: p.meta,
                            payload,
                        },
                        Some(p),
                    )
                }
                InboxRecv::Msg(ShellMsg::SeatDone { seat, unit }) => {
                    (PumpInput::SeatDone { seat, unit }, None)
                }
                InboxRecv::Msg(ShellMsg::SeatLost { seat }) => (PumpInput::SeatLost { seat }, None),
                InboxRecv::Msg(ShellMsg::PostureEdge { seq }) => {
                    (PumpInput::PostureEdge { seq }, None)
                }
                InboxRecv::Msg(ShellMsg::Rebudget { bounds }) => {
                    (PumpInput::Rebudget { bounds }, None)
                }
                InboxRecv::Msg(ShellMsg::EpochBoundary { epoch }) => {
                    (PumpInput::EpochBoundary { epoch }, None)
                }
                InboxRecv::Msg(ShellMsg::Close) | InboxRecv::Disconnected => {
                    (PumpInput::Close, None)
                }
                InboxRecv::Timeout => {
                    if let Some((interval, _)) = self.armed {
                        self.armed = Some((interval, Instant::now().checked_add(interval)));
                    }
                    (PumpInput::BackstopTick, None)
                }
            };
            let closing = matches!(input, PumpInput::Close);
            let effects = self.pump.step(input, (self.guard_source)());
            let grants = effects
                .iter()
                .filter(|e| matches!(e, Effect::Grant { .. }))
                .count();
            if grants > 0 {
                let span = tracing::debug_span!(
                    "pump.grant",
                    grants,
                    in_flight = self.pump.counts().in_flight
                );
                span.in_scope(|| self.apply(effects, pending))?;
            } else {
                self.apply(effects, pending)?;
            }
            if let Some(hook) = self.on_step.as_mut() {
                hook(&self.pump);
            }
            if closing && drain.is_none() {
                drain = Some(Instant::now().checked_add(self.drain_deadline));
            }
        }
    }

    fn apply(
        &mut self,
        effects: Vec<Effect<P>>,
        mut pending: Option<PendingEnqueue<P>>,
    ) -> Result<(), PumpFailure> {
        let mut loud = None;
        for effect in effects {
            match effect {
                Effect::Admitted { placement, .. } => {
                    if let Some(p) = pending.take() {
                        p.answer(Ok(placement));
                    }
                }
                Effect::Refused {
                    meta,
                    payload,
                    error,
                } => match pending.take() {
                    Some(p) => p.answer(Err(Refused {
                        meta,
                        payload,
                        error,
                    })),
                    None => (self.on_terminal)(meta, payload, TerminalReason::HostClosed),
                },
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
        match loud {
            Some(f) => {
                (self.on_loud)(&f);
                Err(f)
            }
            None => Ok(()),
        }
    }
}

impl<P: Send + 'static> HostHandle<P> {
    /// Submits a unit and waits for the pump's answer (a synchronous round
    /// trip): `Ok(Queued | Backlogged)`, or the unit handed back with the
    /// typed reason (`HostClosed` when the shell is gone).
    ///
    /// # Panics
    /// Only if the shell thread panicked while holding this unit (the unit is
    /// then lost with that thread: a lane death).
    pub fn enqueue(&self, meta: UnitMeta, payload: P) -> EnqueueAnswer<P> {
        let (rtx, rrx) = crossbeam_channel::bounded(1);
        let pending = PendingEnqueue::new(meta, payload, move |answer| {
            let _ = rtx.send(answer);
        });
        if let Err(crossbeam_channel::SendError(msg)) = self.tx.send(ShellMsg::Enqueue(pending)) {
            drop(msg); // answers Refused(HostClosed) into rtx
        }
        rrx.recv()
            .expect("the host shell died while holding this unit (lane death)")
    }

    /// Reports a finished unit (a no-op if the shell is gone).
    pub fn seat_done(&self, seat: SeatId, unit: UnitId) {
        let _ = self.tx.send(ShellMsg::SeatDone { seat, unit });
    }

    /// Reports that `seat`'s thread died outside a unit (a no-op if the
    /// shell is gone). Latch the lane death first, so the step that retires
    /// the seat already sees the fault.
    pub fn seat_lost(&self, seat: SeatId) {
        let _ = self.tx.send(ShellMsg::SeatLost { seat });
    }

    /// Sends a posture-edge hint (a no-op if the shell is gone).
    pub fn posture_edge(&self, seq: u64) {
        let _ = self.tx.send(ShellMsg::PostureEdge { seq });
    }

    /// Hands the shell re-derived bounds; they take effect at the next
    /// epoch boundary (a no-op if the shell is gone).
    pub fn rebudget(&self, bounds: crate::pump::PumpBounds) {
        let _ = self.tx.send(ShellMsg::Rebudget { bounds });
    }

    /// Tells the shell an epoch (cycle) boundary is reached (a no-op if the
    /// shell is gone).
    pub fn epoch_boundary(&self, epoch: u64) {
        let _ = self.tx.send(ShellMsg::EpochBoundary { epoch });
    }

    /// Asks the shell to close (a no-op if it is gone).
    pub fn close(&self) {
        let _ = self.tx.send(ShellMsg::Close);
    }
}
