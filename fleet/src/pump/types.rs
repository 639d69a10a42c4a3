//! The pump's vocabulary: layout, config, inputs, effects, counts.

use crate::admission::AdmissionError;
use crate::receipt::TerminalReason;
use crate::role::WorkerRole;
use crate::unit::{UnitId, UnitMeta};
use serde::{Deserialize, Serialize};

/// A seat of a host: its role and its index among that role's seats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SeatId {
    /// The seat's role.
    pub role: WorkerRole,
    /// Index among the role's seats (0-based).
    pub index: u32,
}

/// The seats and bounds of one host, frozen at boot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostLayout {
    /// The host's name (appears in loud failures and logs).
    pub host: String,
    /// Seat count per role. Keyed roles: key k sits on seat `k % count`
    /// (Solver: one seat per bin; Merge: one seat). Pooled roles take any free
    /// seat. A role listed twice counts once (the first entry).
    pub seats: Vec<(WorkerRole, u32)>,
    /// Bounded queue capacity per role (units).
    pub queue_capacity: u32,
    /// S: the most Solver units running at once (continuations included).
    pub walk_admission: u32,
    /// The sim slot cap: the most SimDriver units running at once (the live
    /// guard's `sim_intake_cap` may lower it, never raise it).
    pub sim_slot_cap: u32,
}

impl HostLayout {
    /// Seats of `role` on this host (0 when the role is not hosted here).
    pub fn seat_count(&self, role: WorkerRole) -> u32 {
        self.seats
            .iter()
            .find(|(r, _)| *r == role)
            .map_or(0, |(_, n)| *n)
    }
}

/// The bounds a re-derived budget changes on a running host: the walk
/// admission S and the sim slot cap (`DESIGN.md` §3 "Quota detection": a
/// changed quota re-derives the budget). The seats themselves are fixed at
/// boot; a cap above a role's seat count is bounded by the seats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PumpBounds {
    /// S: the most Solver units running at once.
    pub walk_admission: u32,
    /// The most SimDriver units running at once.
    pub sim_slot_cap: u32,
}

impl PumpBounds {
    /// The bounds a plan's seat layout gives.
    pub fn for_plan(plan: &crate::plan::Plan) -> Self {
        let layout = plan.seat_layout();
        PumpBounds {
            walk_admission: layout.walk_admission,
            sim_slot_cap: layout.sim_slot_cap,
        }
    }
}

impl std::fmt::Display for PumpBounds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "walk admission {}, sim slot cap {}",
            self.walk_admission, self.sim_slot_cap
        )
    }
}

/// Pump timing and failure policy (seed 003 decisions 3 and 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PumpConfig {
    /// The backstop interval (ms): while the backlog is non-empty the shell
    /// delivers a `BackstopTick` at least this often. Default 250. Any value
    /// is safe: a deadline that would overflow means "no timed wake".
    pub backstop_interval_ms: u64,
    /// K: consecutive ticks that find admitted work beside idle capacity
    /// and no progress before a loud failure (busy seats never count).
    /// Default 8. 0 behaves as 1.
    pub stall_ticks: u32,
    /// Test-only switch: `false` never arms the backstop (used to show the
    /// liveness checks fail without it). Default `true`.
    pub backstop_enabled: bool,
    /// Test-only fault injection: the dispatcher never grants this role
    /// (shows that the stall check catches a dispatcher that withholds work
    /// from idle seats). Default `None`; never set it in production.
    pub withhold_grants: Option<crate::role::WorkerRole>,
}

impl Default for PumpConfig {
    fn default() -> Self {
        PumpConfig {
            backstop_interval_ms: 250,
            stall_ticks: 8,
            backstop_enabled: true,
            withhold_grants: None,
        }
    }
}

/// An input to the pump: the complete alphabet (seed 003 "Decision").
#[derive(Debug)]
pub enum PumpInput<P> {
    /// A unit submitted to the host.
    Enqueue {
        /// The unit.
        meta: UnitMeta,
        /// Its payload (work and receipt sender).
        payload: P,
    },
    /// A seat finished `unit` (its value already went to its receipt).
    SeatDone {
        /// The seat.
        seat: SeatId,
        /// The finished unit.
        unit: UnitId,
    },
    /// The backstop timer fired: re-read every guard.
    BackstopTick,
    /// A posture change was observed somewhere: a hint to re-read the guard
    /// (sequence-stamped, never a value).
    PostureEdge {
        /// The feeder's edge sequence number.
        seq: u64,
    },
    /// A seat's thread died outside a unit (or a unit's settle): the seat
    /// leaves the layout for good. Its in-flight unit counts resolved (the
    /// binding resolved or dropped its receipt); queued and held units that
    /// no live seat can run get `Terminal(SeatLost)`. Unknown or already
    /// lost seats are ignored. `docs/decisions/0002-lost-seats-retire.md`.
    SeatLost {
        /// The lost seat.
        seat: SeatId,
    },
    /// The quota changed and the budget was re-derived: `bounds` take
    /// effect at the next [`PumpInput::EpochBoundary`], never mid-cycle;
    /// until then the bounds in force hold. A later re-budget before the
    /// boundary replaces this one.
    Rebudget {
        /// The re-derived bounds.
        bounds: PumpBounds,
    },
    /// An epoch (cycle) boundary: the driver is between cycles. A pending
    /// re-budget takes effect here and every pinned seat is released (T9)
    /// so its next unit leases afresh (T1): pins are re-keyed only here, a
    /// pin is released before its seat is leased again, and a seat never
    /// changes role, so no per-seat state crosses a role switch. A keyed
    /// seat still running is released at the first boundary that finds it
    /// pinned. Without a pending re-budget the boundary changes nothing
    /// (pins survive across cycles).
    EpochBoundary {
        /// The epoch (cycle) that begins.
        epoch: u64,
    },
    /// Close the host: held and queued units resolve terminally, in-flight
    /// units finish.
    Close,
}

/// Where an admitted unit went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Placement {
    /// Into the role's bounded queue (it may have been granted at once).
    Queued,
    /// Into the backlog: the posture holds its role; it waits, never dropped.
    Backlogged,
}

/// The intake progress state (seed 003 decision 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Progress {
    /// The backlog is empty.
    Idle,
    /// The backlog holds units; the backstop is armed.
    Backed,
    /// The lane-death latch is set: held units were resolved terminally;
    /// in-flight units finish. Sticky.
    Faulted,
    /// Closed: takes nothing new.
    Closed,
}

/// Unit counts. Safety S: `submitted == in_flight + queued + backlog + resolved`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct PumpCounts {
    /// Units ever admitted (refused units are not counted: they went back).
    pub submitted: u64,
    /// Units granted and not yet done (Running or Draining seats).
    pub in_flight: u64,
    /// Units in the bounded role queues.
    pub queued: u64,
    /// Units in the backlog (posture-held).
    pub backlog: u64,
    /// Units resolved: done on a seat, or given a terminal receipt.
    pub resolved: u64,
}

impl PumpCounts {
    /// Whether safety S holds.
    pub const fn conserved(&self) -> bool {
        self.submitted == self.in_flight + self.queued + self.backlog + self.resolved
    }
}

impl std::fmt::Display for PumpCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "submitted {} in_flight {} queued {} backlog {} resolved {}",
            self.submitted, self.in_flight, self.queued, self.backlog, self.resolved
        )
    }
}

/// What went wrong in a loud failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FailureKind {
    /// K consecutive backstop ticks found admitted work waiting beside
    /// idle capacity (a seat that could take it, under the role's running
    /// limit) and nothing moved. Busy seats are not a stall: a long unit
    /// under a full queue is healthy.
    Stalled {
        /// The consecutive no-progress ticks (≥ K).
        ticks: u32,
    },
    /// A seat reported a unit it is not running (a wiring fault).
    UnknownCompletion {
        /// The reporting seat.
        seat: SeatId,
        /// The reported unit.
        unit: UnitId,
    },
}

/// A loud failure: the host must stop (log at error, then abort in
/// production). Names the host and the counts at the time.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, thiserror::Error)]
#[error("host {host}: pump failed loudly ({kind:?}); counts: {counts}; stop the process and inspect the seats of this host")]
pub struct PumpFailure {
    /// The host's name.
    pub host: String,
    /// What went wrong.
    pub kind: FailureKind,
    /// The counts when it failed.
    pub counts: PumpCounts,
}

/// An effect the shell applies after a step, in order.
#[derive(Debug)]
pub enum Effect<P> {
    /// The unit was admitted (answer the submitter).
    Admitted {
        /// The unit.
        unit: UnitId,
        /// Where it went.
        placement: Placement,
    },
    /// The unit was refused and is handed back.
    Refused {
        /// The unit.
        meta: UnitMeta,
        /// Its payload, returned.
        payload: P,
        /// Why.
        error: AdmissionError,
    },
    /// Deliver the unit to the seat (it is now Running there).
    Grant {
        /// The seat.
        seat: SeatId,
        /// The unit.
        meta: UnitMeta,
        /// Its payload.
        payload: P,
    },
    /// A held or queued unit resolved terminally: resolve its receipt with `reason`.
    Terminal {
        /// The unit.
        meta: UnitMeta,
        /// Its payload (carrying its receipt sender).
        payload: P,
        /// Why.
        reason: TerminalReason,
    },
    /// Deliver `BackstopTick` every `after_ms` until disarmed.
    ArmBackstop {
        /// The interval (ms).
        after_ms: u64,
    },
    /// Stop delivering `BackstopTick`.
    DisarmBackstop,
    /// A seat left the layout (a `SeatLost` input): log it; the binding
    /// has latched the lane death.
    SeatRetired {
        /// The seat.
        seat: SeatId,
        /// The unit it was running, if any (counted resolved).
        unit: Option<UnitId>,
    },
    /// A re-budget took effect at an epoch boundary: log it (a posture
    /// event).
    Rebudgeted {
        /// The boundary's epoch.
        epoch: u64,
        /// The bounds before.
        from: PumpBounds,
        /// The bounds now in force.
        to: PumpBounds,
        /// Pinned seats released (T9) for re-keying.
        released: Vec<SeatId>,
    },
    /// Stop loudly.
    LoudFailure(PumpFailure),
}
