//! The host pump: a pure state machine over the complete input alphabet.
//!
//! Each host runs one [`HostPump`]. Inputs (`Enqueue`, `SeatDone`,
//! `BackstopTick`, `PostureEdge`, `SeatLost`, `Rebudget`, `EpochBoundary`,
//! `Close`) come in with a fresh
//! [`GuardSnapshot`]; [`Effect`]s come out. No clock, thread or I/O inside:
//! the shell ([`crate::shell`]) turns effects into deliveries and timers.
//! `DESIGN.md` §3 "Lanes, hosts and the pump" and "Priority"; seed 003
//! (the liveness decision); seed 000 §4 (queues and precedence).
//!
//! Rules this pump keeps:
//! - **Admission** is the pure predicate of [`crate::admission`]; a unit the
//!   posture holds waits in the backlog (FIFO per role, never dropped), a
//!   full queue hands the unit back.
//! - **Held work is backlog.** Under a cordon, queued units of a held role
//!   move back to the front of their backlog (a queued unit the posture holds
//!   must not wait where no timer watches it), and running ones drain (T7).
//! - **Backstop.** `ArmBackstop` is emitted iff the backlog becomes non-empty
//!   and `DisarmBackstop` iff it empties: an idle host costs nothing.
//! - **Every step re-reads every guard** and settles (fault, hold, drain the
//!   backlog, grant, to a fixpoint) after applying the input; an `Enqueue`
//!   also settles before admission, so admission sees current queues. Grants
//!   unblocked by one input come out in precedence order.
//! - **Faulted** comes only from the sticky lane-death latch: held units get
//!   `Terminal(LaneDeath)`, queued and in-flight units still run.
//! - **Re-budget at epoch boundaries only.** A `Rebudget` (a changed quota's
//!   re-derived bounds) waits for the next `EpochBoundary`; there the bounds
//!   change and pins are released (T9) so the next units lease afresh (T1).
//! - **Stall.** K consecutive ticks on which admitted work waits beside idle
//!   capacity (a free seat that could run it, its role under its running
//!   limit) and nothing moved (no backlog move, grant or completion) emit
//!   one `LoudFailure`; the pump then takes nothing new. Busy seats are not
//!   a stall: a long unit under a full queue is healthy.

mod dispatch;
mod stall;
mod types;
mod view;

pub use crate::admission::AdmissionError;
pub use types::{
    Effect, FailureKind, HostLayout, Placement, Progress, PumpBounds, PumpConfig, PumpCounts,
    PumpFailure, PumpInput, SeatId,
};

use crate::admission::admission;
use crate::guard::GuardSnapshot;
use crate::receipt::TerminalReason;
use crate::role::{Hosting, WorkerRole, ALL_ROLES};
use crate::slot::{SlotInput, SlotState};
use crate::unit::{UnitId, UnitMeta};
use std::collections::VecDeque;

const ROLES: usize = ALL_ROLES.len();

/// Slots a role's backlog keeps allocated once it has drained. A cordon can
/// hold thousands of units (one soak's 300 s cordon held about 8,000); the
/// buffer they grew is handed back when the backlog empties, so memory
/// does not step up with every cordon.
pub const BACKLOG_RETAINED: usize = 64;

/// A unit waiting in a queue or the backlog.
#[derive(Debug, Clone)]
struct Held<P> {
    meta: UnitMeta,
    payload: P,
}

/// One host's pump. `P` is the opaque payload (work plus receipt sender).
/// Cloneable when `P` is (the exhaustive exploration clones states).
#[derive(Debug, Clone)]
pub struct HostPump<P> {
    layout: HostLayout,
    config: PumpConfig,
    /// Seats per role, indexed by `WorkerRole::index()`.
    seats: [Vec<SlotState>; ROLES],
    queues: [VecDeque<Held<P>>; ROLES],
    backlog: [VecDeque<Held<P>>; ROLES],
    submitted: u64,
    resolved: u64,
    progress: Progress,
    armed: bool,
    stall: u32,
    moved_since_tick: bool,
    failed: bool,
    last_edge_seq: u64,
    suppressed: u64,
    /// The highest sim unit id already counted as held by the floor.
    floored_upto: Option<crate::unit::UnitId>,
    /// Seats lost per role (indexed like `seats`): never granted again.
    lost: [Vec<bool>; ROLES],
    /// A re-budget waiting for the next epoch boundary.
    pending_bounds: Option<PumpBounds>,
    /// Keyed seats whose pin a re-budget released while they ran: released
    /// at the first boundary that finds them pinned.
    stale_pins: [Vec<bool>; ROLES],
    /// The last epoch boundary seen.
    epoch: u64,
}

impl<P> HostPump<P> {
    /// A pump for `layout`: every seat Idle, nothing queued, backstop disarmed.
    pub fn new(layout: HostLayout, config: PumpConfig) -> Self {
        let mut seats: [Vec<SlotState>; ROLES] = Default::default();
        let mut lost: [Vec<bool>; ROLES] = Default::default();
        for role in ALL_ROLES {
            seats[role.index()] = vec![SlotState::Idle; layout.seat_count(role) as usize];
            lost[role.index()] = vec![false; layout.seat_count(role) as usize];
        }
        HostPump {
            layout,
            config,
            seats,
            queues: Default::default(),
            backlog: Default::default(),
            submitted: 0,
            resolved: 0,
            progress: Progress::Idle,
            armed: false,
            stall: 0,
            moved_since_tick: false,
            failed: false,
            last_edge_seq: 0,
            suppressed: 0,
            floored_upto: None,
            stale_pins: lost.clone(),
            lost,
            pending_bounds: None,
            epoch: 0,
        }
    }

    /// Applies one input under a fresh guard read; returns the effects to
    /// apply, in order. Pure: same state, input and guard → same effects.
    pub fn step(&mut self, input: PumpInput<P>, guard: GuardSnapshot) -> Vec<Effect<P>> {
        let mut fx = Vec::new();
        let mut tick = false;
        match input {
            PumpInput::Enqueue { meta, payload } => {
                // Admission sees the queues as the current guard leaves them.
                self.settle(&guard, &mut fx);
                self.enqueue(meta, payload, &guard, &mut fx)
            }
            PumpInput::SeatDone { seat, unit } => self.seat_done(seat, unit, &guard, &mut fx),
            PumpInput::SeatLost { seat } => self.seat_lost(seat, &mut fx),
            PumpInput::BackstopTick => tick = true,
            PumpInput::PostureEdge { seq } => self.last_edge_seq = self.last_edge_seq.max(seq),
            PumpInput::Rebudget { bounds } => self.pending_bounds = Some(bounds),
            PumpInput::EpochBoundary { epoch } => self.epoch_boundary(epoch, &guard, &mut fx),
            PumpInput::Close => self.close(&mut fx),
        }
        self.settle(&guard, &mut fx);
        if tick {
            self.account_tick(&guard, &mut fx);
        }
        self.finish_step(&mut fx);
        fx
    }

    fn closed(&self) -> bool {
        self.progress == Progress::Closed
    }

    fn enqueue(
        &mut self,
        meta: UnitMeta,
        payload: P,
        guard: &GuardSnapshot,
        fx: &mut Vec<Effect<P>>,
    ) {
        let role = meta.role;
        let error = if self.closed() {
            Some(AdmissionError::HostClosed)
        } else if self.failed {
            Some(AdmissionError::PumpFailed)
        } else if self.layout.seat_count(role) == 0 {
            Some(AdmissionError::NoSeats { role })
        } else if role.hosting() == Hosting::Keyed && meta.pin_key().is_none() {
            Some(AdmissionError::MissingKey { role })
        } else {
            self.stranded(&meta).map(|seat| AdmissionError::SeatLost {
                role,
                index: seat.index,
            })
        };
        if let Some(error) = error {
            fx.push(Effect::Refused {
                meta,
                payload,
                error,
            });
            return;
        }
        let ri = role.index();
        let answer = admission(
            self.queues[ri].len() as u32,
            self.layout.queue_capacity,
            guard.admits(role),
        );
        let placement = if answer.posture_holds() {
            if self.progress == Progress::Faulted {
                fx.push(Effect::Refused {
                    meta,
                    payload,
                    error: AdmissionError::LaneDead { role },
                });
                return;
            }
            self.backlog[ri].push_back(Held { meta, payload });
            self.suppressed += 1;
            Placement::Backlogged
        } else if answer == crate::admission::Admission::Admit && self.backlog[ri].is_empty() {
            self.queues[ri].push_back(Held { meta, payload });
            Placement::Queued
        } else {
            // The posture admits the role but the queue is full (after the
            // settle, a non-empty backlog of an admitted role means a full queue).
            let error = AdmissionError::QueueFull {
                role,
                capacity: self.layout.queue_capacity,
            };
            fx.push(Effect::Refused {
                meta,
                payload,
                error,
            });
            return;
        };
        self.submitted += 1;
        fx.push(Effect::Admitted {
            unit: meta.id,
            placement,
        });
    }

    fn seat_done(
        &mut self,
        seat: SeatId,
        unit: UnitId,
        guard: &GuardSnapshot,
        fx: &mut Vec<Effect<P>>,
    ) {
        if self.lost[seat.role.index()]
            .get(seat.index as usize)
            .is_some_and(|l| *l)
        {
            // A late report from a seat already retired: its unit was counted.
            return;
        }
        let state = self.seats[seat.role.index()]
            .get(seat.index as usize)
            .copied();
        let input = match state {
            Some(SlotState::Running { role, unit: u, .. }) if u == unit => match role {
                WorkerRole::Solver => SlotInput::PinSolver,
                WorkerRole::Merge => SlotInput::PinMerge,
                _ => SlotInput::ReleasePooled,
            },
            Some(SlotState::Draining { unit: u, .. }) if u == unit => SlotInput::FinishDrain,
            _ => {
                self.fail(
                    crate::pump::FailureKind::UnknownCompletion { seat, unit },
                    fx,
                );
                return;
            }
        };
        let slot = &mut self.seats[seat.role.index()][seat.index as usize];
        *slot = slot
            .apply(input, guard)
            .expect("completion transitions follow the slot table");
        self.resolved += 1;
        self.moved_since_tick = true;
    }

    fn seat_lost(&mut self, seat: SeatId, fx: &mut Vec<Effect<P>>) {
        let (ri, i) = (seat.role.index(), seat.index as usize);
        if !self.seat_live(seat.role, i) {
            return;
        }
        self.lost[ri][i] = true;
        // The seat leaves the layout: whatever it ran is resolved (the
        // binding resolved or dropped its receipt) and it is never granted.
        let unit = self.seats[ri][i].unit();
        if unit.is_some() {
            self.resolved += 1;
        }
        self.seats[ri][i] = SlotState::Idle;
        self.moved_since_tick = true;
        fx.push(Effect::SeatRetired { seat, unit });
        for from_backlog in [false, true] {
            let held = if from_backlog {
                std::mem::take(&mut self.backlog[ri])
            } else {
                std::mem::take(&mut self.queues[ri])
            };
            let mut keep = VecDeque::with_capacity(held.len());
            for h in held {
                match self.stranded(&h.meta) {
                    Some(lost) => {
                        self.resolved += 1;
                        fx.push(Effect::Terminal {
                            meta: h.meta,
                            payload: h.payload,
                            reason: TerminalReason::SeatLost {
                                role: lost.role,
                                index: lost.index,
                            },
                        });
                    }
                    None => keep.push_back(h),
                }
            }
            if from_backlog {
                self.backlog[ri] = keep;
            } else {
                self.queues[ri] = keep;
            }
        }
        debug_assert!(self.counts().conserved(), "{}", self.counts());
    }

    /// Applies a pending re-budget at the boundary: the new bounds, and T9
    /// for every pinned keyed seat (running ones are marked and released at
    /// a later boundary that finds them pinned).
    fn epoch_boundary(&mut self, epoch: u64, guard: &GuardSnapshot, fx: &mut Vec<Effect<P>>) {
        self.epoch = self.epoch.max(epoch);
        let pending = self.pending_bounds.take();
        if pending.is_some() {
            for role in ALL_ROLES {
                if role.hosting() == Hosting::Keyed {
                    self.stale_pins[role.index()].fill(true);
                }
            }
        }
        let mut released = Vec::new();
        for role in ALL_ROLES {
            let ri = role.index();
            for i in 0..self.seats[ri].len() {
                if !self.stale_pins[ri][i] {
                    continue;
                }
                match self.seats[ri][i] {
                    SlotState::Pinned { .. } => {
                        self.seats[ri][i] = self.seats[ri][i]
                            .apply(SlotInput::ReleasePin, guard)
                            .expect("T9 from Pinned");
                        self.stale_pins[ri][i] = false;
                        released.push(SeatId {
                            role,
                            index: i as u32,
                        });
                    }
                    SlotState::Idle => self.stale_pins[ri][i] = false,
                    _ => {}
                }
            }
        }
        if let Some(to) = pending {
            let from = self.bounds();
            self.layout.walk_admission = to.walk_admission;
            self.layout.sim_slot_cap = to.sim_slot_cap;
            fx.push(Effect::Rebudgeted {
                epoch,
                from,
                to,
                released,
            });
        }
    }

    fn close(&mut self, fx: &mut Vec<Effect<P>>) {
        if self.closed() {
            return;
        }
        self.progress = Progress::Closed;
        let reason = if self.failed {
            TerminalReason::PumpFailed
        } else {
            TerminalReason::HostClosed
        };
        for ri in 0..ROLES {
            let held: Vec<_> = self.queues[ri]
                .drain(..)
                .chain(self.backlog[ri].drain(..))
                .collect();
            for h in held {
                self.resolved += 1;
                fx.push(Effect::Terminal {
                    meta: h.meta,
                    payload: h.payload,
                    reason: reason.clone(),
                });
            }
        }
    }

    /// Re-reads the guard: fault latch, cordon hold and drain, backlog → queue,
    /// grants, to a fixpoint.
    fn settle(&mut self, guard: &GuardSnapshot, fx: &mut Vec<Effect<P>>) {
        if self.closed() {
            return;
        }
        if guard.lane_dead {
            self.progress = Progress::Faulted;
        }
        for role in ALL_ROLES {
            if guard.admits(role) {
                continue;
            }
            let ri = role.index();
            for slot in self.seats[ri].iter_mut() {
                if let SlotState::Running { .. } = slot {
                    *slot = slot
                        .apply(SlotInput::Drain, guard)
                        .expect("T7 applies to every running seat");
                }
            }
            while let Some(h) = self.queues[ri].pop_back() {
                self.backlog[ri].push_front(h);
                self.suppressed += 1;
            }
        }
        if self.progress == Progress::Faulted {
            for ri in 0..ROLES {
                for h in self.backlog[ri].drain(..) {
                    self.resolved += 1;
                    fx.push(Effect::Terminal {
                        meta: h.meta,
                        payload: h.payload,
                        reason: TerminalReason::LaneDeath,
                    });
                }
            }
        }
        loop {
            let moved = self.drain_backlog(guard);
            let granted = self.dispatch(guard, fx);
            if !(moved || granted) {
                break;
            }
        }
    }

    fn drain_backlog(&mut self, guard: &GuardSnapshot) -> bool {
        let mut moved = false;
        for role in ALL_ROLES {
            let ri = role.index();
            while !self.backlog[ri].is_empty()
                && admission(
                    self.queues[ri].len() as u32,
                    self.layout.queue_capacity,
                    guard.admits(role),
                ) == crate::admission::Admission::Admit
            {
                let h = self.backlog[ri].pop_front().expect("non-empty");
                self.queues[ri].push_back(h);
                moved = true;
            }
            if self.backlog[ri].is_empty() && self.backlog[ri].capacity() > BACKLOG_RETAINED {
                self.backlog[ri].shrink_to(BACKLOG_RETAINED);
            }
        }
        self.moved_since_tick |= moved;
        moved
    }

    fn finish_step(&mut self, fx: &mut Vec<Effect<P>>) {
        let backed = self.backlog.iter().any(|q| !q.is_empty());
        if !matches!(self.progress, Progress::Closed | Progress::Faulted) {
            self.progress = if backed {
                Progress::Backed
            } else {
                Progress::Idle
            };
        }
        let want = backed && self.config.backstop_enabled && !self.failed && !self.closed();
        if want && !self.armed {
            self.armed = true;
            fx.push(Effect::ArmBackstop {
                after_ms: self.config.backstop_interval_ms,
            });
        } else if !want && self.armed {
            self.armed = false;
            fx.push(Effect::DisarmBackstop);
        }
    }
}
