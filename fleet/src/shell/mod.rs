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
//! **Submits and seat reports step the pump on the caller.** The pump and
//! its sinks sit under one lock shared by the shell thread and every
//! [`HostHandle`]: [`HostHandle::enqueue`] and [`HostHandle::seat_done`]
//! step the pump on the calling thread (admission is answered there, a
//! grant is delivered from there), so a submit never waits for the shell
//! thread. The step is the same pure pump step with the same fresh guard;
//! only the thread differs. When such a step changes what the shell thread
//! waits on (the backstop armed or disarmed, a closed host's drain, a loud
//! failure), the handle sends it [`ShellMsg::Wake`]. The shell thread keeps
//! the timed backstop, posture edges, re-budgets, epoch boundaries, lost
//! seats and the close; a message [`ShellMsg::Enqueue`] is still served
//! there (the model checks drive the loop through it).
//!
//! `fleet` spawns no threads: the binding calls [`HostShell::run`] on its own.

mod core;
mod input;

use self::core::Core;
use self::core::CoreLock as Mutex;
use self::input::pump_input;
use crate::guard::GuardSnapshot;
use crate::pump::{AdmissionError, HostPump, Placement, PumpFailure, PumpInput, SeatId};
use crate::receipt::TerminalReason;
use crate::sink::SeatSink;
use crate::unit::{UnitId, UnitMeta};
use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
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
    /// A handle stepped the pump directly and changed what the shell waits
    /// on (the backstop armed or disarmed, a closed host's in-flight count,
    /// a loud failure): re-read the core. Steps nothing.
    Wake,
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

/// The shell around one pump. Build with [`HostShell::new`], run with
/// [`HostShell::run`] on a thread the binding owns.
pub struct HostShell<P> {
    core: Arc<Mutex<Core<P>>>,
    inbox: Box<dyn ShellInbox<ShellMsg<P>>>,
    /// How long a closed host waits for its in-flight units' `SeatDone`.
    drain_deadline: Duration,
}

/// The default drain deadline of a closed host (see
/// [`HostShell::with_drain_deadline`]).
pub const DEFAULT_DRAIN_DEADLINE: Duration = Duration::from_secs(10);

/// Where a handle's messages to the shell thread go: the sending side of
/// the shell's inbox. Implemented for crossbeam senders; a model checker
/// supplies its own.
pub trait ShellOutbox<M>: Send + Sync {
    /// Sends `msg`; `false` when the shell is gone (the message is dropped).
    fn send(&self, msg: M) -> bool;
}

impl<M: Send> ShellOutbox<M> for Sender<M> {
    fn send(&self, msg: M) -> bool {
        Sender::send(self, msg).is_ok()
    }
}

/// A cheap, cloneable handle to a running shell: steps its pump directly
/// for submits, seat reports, epoch boundaries and the close; messages its
/// thread for posture edges and wake-ups. The shell sees every handle gone
/// (an implicit close) when the last clone drops.
pub struct HostHandle<P> {
    tx: Arc<dyn ShellOutbox<ShellMsg<P>>>,
    core: Arc<Mutex<Core<P>>>,
}

impl<P> Clone for HostHandle<P> {
    fn clone(&self) -> Self {
        HostHandle {
            tx: self.tx.clone(),
            core: self.core.clone(),
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
        Self::with_outbox(pump, rx, tx, guard_source, sink, on_terminal)
    }

    /// A shell over any inbox and the outbox that feeds it, and its handle
    /// (a model checker's channel, for instance: the handle's direct steps
    /// and wake-ups are then explored with the shell loop).
    pub fn with_outbox(
        pump: HostPump<P>,
        inbox: impl ShellInbox<ShellMsg<P>> + 'static,
        outbox: impl ShellOutbox<ShellMsg<P>> + 'static,
        guard_source: impl Fn() -> GuardSnapshot + Send + 'static,
        sink: impl SeatSink<P> + 'static,
        on_terminal: impl FnMut(UnitMeta, P, TerminalReason) + Send + 'static,
    ) -> (HostShell<P>, HostHandle<P>) {
        let shell = Self::with_inbox(pump, inbox, guard_source, sink, on_terminal);
        let handle = HostHandle {
            tx: Arc::new(outbox),
            core: shell.core.clone(),
        };
        (shell, handle)
    }

    /// A shell over any inbox (a model checker's channel, for instance).
    /// Such a shell is driven by messages only: it has no [`HostHandle`]
    /// (see [`HostShell::with_outbox`] for one that has).
    pub fn with_inbox(
        pump: HostPump<P>,
        inbox: impl ShellInbox<ShellMsg<P>> + 'static,
        guard_source: impl Fn() -> GuardSnapshot + Send + 'static,
        sink: impl SeatSink<P> + 'static,
        on_terminal: impl FnMut(UnitMeta, P, TerminalReason) + Send + 'static,
    ) -> HostShell<P> {
        HostShell {
            core: Arc::new(Mutex::new(Core {
                pump,
                guard_source: Box::new(guard_source),
                sink: Box::new(sink),
                on_terminal: Box::new(on_terminal),
                on_loud: Box::new(default_loud),
                on_step: None,
                armed: None,
                failed: None,
                gone: false,
            })),
            inbox: Box::new(inbox),
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
    /// After the hook returns, [`HostShell::run`] returns the failure. The
    /// hook runs on whichever thread stepped the pump, under the core's lock.
    pub fn with_loud_hook(self, hook: impl FnMut(&PumpFailure) + Send + 'static) -> Self {
        self.core.lock().on_loud = Box::new(hook);
        self
    }

    /// Installs a hook called after every pump step with the pump's state
    /// (the binding records the intake backlog gauge and feeds the
    /// posture's suppression counter from it). Keep it short: it runs under
    /// the core's lock, on the shell's thread or a submitter's.
    pub fn with_step_hook(self, hook: impl FnMut(&HostPump<P>) + Send + 'static) -> Self {
        self.core.lock().on_step = Some(Box::new(hook));
        self
    }

    /// Reads the pump (for gauges between runs, and tests) under the core's
    /// lock.
    pub fn with_pump<R>(&self, read: impl FnOnce(&HostPump<P>) -> R) -> R {
        read(&self.core.lock().pump)
    }

    /// Runs until `Close` (or every handle dropped: an implicit close) and
    /// the drain that follows it, or a loud failure (returned after the
    /// hook, when the hook returns). Held and queued units resolve
    /// terminally on close; the shell then keeps stepping `SeatDone` and
    /// `SeatLost` until nothing is in flight, the drain deadline passes
    /// (the units still in flight are stuck: logged, and named by
    /// [`HostPump::in_flight`] on the returned pump), or every sender is
    /// gone. Once it returns, every handle's enqueue is refused
    /// `HostClosed` and seat reports are ignored.
    pub fn run(self) -> Result<HostPump<P>, PumpFailure> {
        let HostShell {
            core,
            mut inbox,
            drain_deadline,
        } = self;
        let out = run_loop(&core, inbox.as_mut(), drain_deadline);
        let pump = core.lock().retire();
        out.map(|()| pump)
    }
}

/// The shell thread's loop (see [`HostShell::run`]).
fn run_loop<P: Send + 'static>(
    core: &Mutex<Core<P>>,
    inbox: &mut dyn ShellInbox<ShellMsg<P>>,
    drain_deadline: Duration,
) -> Result<(), PumpFailure> {
    // `Some(deadline)` once closed; `None` inside means "beyond the clock".
    let mut drain: Option<Option<Instant>> = None;
    loop {
        let (in_flight, armed, closed) = {
            let mut c = core.lock();
            if let Some(f) = c.failed.take() {
                return Err(f);
            }
            let closed = c.pump.progress() == crate::pump::Progress::Closed;
            (c.pump.counts().in_flight, c.armed, closed)
        };
        if closed && drain.is_none() {
            // A handle closed the pump directly: drain from here.
            drain = Some(Instant::now().checked_add(drain_deadline));
        }
        if let Some(deadline) = drain {
            if in_flight == 0 {
                return Ok(());
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                let c = core.lock();
                tracing::warn!(
                    host = %c.pump.layout().host,
                    stuck = ?c.pump.in_flight(),
                    "shutdown drain deadline passed with units still in flight"
                );
                return Ok(());
            }
        }
        let timeout = match drain {
            Some(deadline) => deadline.map(|d| d.saturating_duration_since(Instant::now())),
            None => armed
                .and_then(|(_, deadline)| deadline)
                .map(|d| d.saturating_duration_since(Instant::now())),
        };
        // A due tick goes first, so a steady stream of messages cannot
        // postpone the backstop (it fires at least once per interval).
        let due = drain.is_none() && timeout == Some(Duration::ZERO);
        let received = if due {
            InboxRecv::Timeout
        } else {
            inbox.recv(timeout)
        };
        if drain.is_some() {
            match received {
                // Nobody is left to report: what is in flight is stuck.
                InboxRecv::Disconnected => return Ok(()),
                InboxRecv::Timeout => continue,
                InboxRecv::Msg(_) => {}
            }
        }
        let Some((input, pending)) = pump_input(received) else {
            continue;
        };
        let closing = matches!(input, PumpInput::Close);
        let answer = {
            let mut c = core.lock();
            if matches!(input, PumpInput::BackstopTick) {
                // A direct step may have disarmed the backstop while this
                // thread waited: then there is nothing to tick.
                match c.armed {
                    Some((interval, _)) => {
                        c.armed = Some((interval, Instant::now().checked_add(interval)));
                    }
                    None => continue,
                }
            }
            c.step(input, pending.is_some())
        };
        // Answered outside the lock: the reply may wake the submitter.
        if let (Some(p), Some(answer)) = (pending, answer) {
            p.answer(answer);
        }
        if closing && drain.is_none() {
            drain = Some(Instant::now().checked_add(drain_deadline));
        }
    }
}

impl<P: Send + 'static> HostHandle<P> {
    /// Submits a unit and returns the pump's answer: `Ok(Queued |
    /// Backlogged)`, or the unit handed back with the typed reason
    /// (`HostClosed` once the shell has returned).
    ///
    /// The pump is stepped on the calling thread under the core's lock (a
    /// grant this admission makes possible is delivered from here too);
    /// nothing waits for the shell thread. Never blocks longer than one
    /// pump step and its effects (channel sends), plus any step another
    /// thread holds the lock for.
    pub fn enqueue(&self, meta: UnitMeta, payload: P) -> EnqueueAnswer<P> {
        let (answer, wake) = {
            let mut c = self.core.lock();
            if c.gone {
                return Err(Refused {
                    meta,
                    payload,
                    error: AdmissionError::HostClosed,
                });
            }
            let before = c.before();
            let answer = c.step(PumpInput::Enqueue { meta, payload }, true);
            (answer, c.needs_wake(before))
        };
        if wake {
            let _ = self.tx.send(ShellMsg::Wake);
        }
        match answer {
            Some(answer) => answer,
            // The pump answers every enqueue (`Admitted` or `Refused`); this
            // arm only keeps the contract total.
            None => {
                tracing::error!(
                    unit = meta.id,
                    "the pump gave no admission answer; the unit is accounted by the pump"
                );
                Ok(Placement::Queued)
            }
        }
    }

    /// Reports a finished unit: the pump is stepped on the calling thread,
    /// so a unit waiting for that seat is granted from here (a no-op once
    /// the shell has returned).
    pub fn seat_done(&self, seat: SeatId, unit: UnitId) {
        self.direct(PumpInput::SeatDone { seat, unit });
    }

    /// Reports that `seat`'s thread died outside a unit (a no-op once the
    /// shell has returned). Latch the lane death first, so the step that
    /// retires the seat already sees the fault.
    pub fn seat_lost(&self, seat: SeatId) {
        self.direct(PumpInput::SeatLost { seat });
    }

    /// Steps `input` on the calling thread (ordered with this thread's
    /// submits) and wakes the shell thread when it must re-read the core.
    fn direct(&self, input: PumpInput<P>) {
        let wake = {
            let mut c = self.core.lock();
            if c.gone {
                return;
            }
            let before = c.before();
            let _ = c.step(input, false);
            c.needs_wake(before)
        };
        if wake {
            let _ = self.tx.send(ShellMsg::Wake);
        }
    }

    /// Reads the pump under the core's lock (a snapshot: the backlog, the
    /// queues, the seats). Holds the lock only while `read` runs: keep it
    /// short, submits on other threads wait for it.
    pub fn with_pump<R>(&self, read: impl FnOnce(&HostPump<P>) -> R) -> R {
        read(&self.core.lock().pump)
    }

    /// Sends a posture-edge hint (a no-op if the shell is gone).
    pub fn posture_edge(&self, seq: u64) {
        let _ = self.tx.send(ShellMsg::PostureEdge { seq });
    }

    /// Hands the pump re-derived bounds; they take effect at the next
    /// epoch boundary (a no-op once the shell has returned). Stepped on the
    /// calling thread, so it is ordered with this thread's submits.
    pub fn rebudget(&self, bounds: crate::pump::PumpBounds) {
        self.direct(PumpInput::Rebudget { bounds });
    }

    /// Tells the pump an epoch (cycle) boundary is reached (a no-op once the
    /// shell has returned). Stepped on the calling thread: a submit made
    /// after it on the same thread sees the new epoch's bounds.
    pub fn epoch_boundary(&self, epoch: u64) {
        self.direct(PumpInput::EpochBoundary { epoch });
    }

    /// Closes the host: the pump is closed on the calling thread (queued and
    /// held units resolve terminally now, later submits are refused
    /// `HostClosed`) and the shell thread starts its drain (a no-op once it
    /// has returned).
    pub fn close(&self) {
        self.direct(PumpInput::Close);
    }
}
