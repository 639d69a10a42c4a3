//! Posture: `Nominal ⇄ Cordoned`, fed by throttle samples.
//!
//! Source: `DESIGN.md` §3 "Posture"; seed 000 §6. [`PostureMachine`] is
//! pure; [`PostureOwner`] is the thread-safe holder a process shares via
//! `Arc`, which hands the host pump a [`crate::GuardSnapshot`] each step.
//! Solver admission never depends on posture.

mod machine;
mod owner;
mod policy;

pub use machine::PostureMachine;
pub use owner::{PostureCounters, PostureOwner};
pub use policy::{PosturePolicy, PosturePolicyPatch, PostureRetuneError};

use crate::quota::ThrottleReading;
use serde::{Deserialize, Serialize};

/// The process-level fleet posture.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Posture {
    /// Normal intake.
    #[default]
    Nominal,
    /// Deferrable intake held, sim intake floored.
    Cordoned,
}

/// Why a posture edge happened.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PostureCause {
    /// `events` throttle events fell within `window_ms` (enter).
    ThrottleEvents {
        /// Events counted in the window.
        events: u64,
        /// The enter window, ms.
        window_ms: u64,
    },
    /// Throttled duty above the threshold over `window_ms` (enter).
    ThrottleDuty {
        /// Measured duty, percent of wall time.
        duty_percent: f64,
        /// The duty window, ms.
        window_ms: u64,
    },
    /// A lane died; sticky until a fresh process (enter).
    LaneDeath,
    /// No throttling for `clean_ms` (exit).
    CleanWindow {
        /// Clean time observed, ms.
        clean_ms: u64,
    },
}

/// What latched a lane death (the first cause sticks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LaneDeathCause {
    /// A unit panicked on its seat (`Terminal(Panicked)`).
    UnitPanicked {
        /// The unit's role.
        role: crate::WorkerRole,
        /// The seat's index among its role's seats.
        seat: u32,
        /// The panic payload as text.
        message: String,
    },
    /// A seat's thread died outside its unit and left the layout
    /// (`Terminal(SeatLost)`).
    SeatLost {
        /// The seat's role.
        role: crate::WorkerRole,
        /// The seat's index among its role's seats.
        seat: u32,
    },
    /// Latched without a recorded cause ([`PostureOwner::mark_lane_death`]).
    Unrecorded,
}

/// The fleet runs degraded: a lane death latched the sticky cordon, so the
/// deferrable roles (pool state updates, registration, verification) are
/// held until a fresh process. `DESIGN.md` §3 "Posture" (the lane death is
/// sticky) and "Census and status"; reported by `runtime_status()`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Degradation {
    /// What latched the lane death (the first cause).
    pub cause: LaneDeathCause,
    /// The roles whose intake is held until a restart (the deferrable ones).
    pub held_roles: Vec<crate::WorkerRole>,
    /// When it latched, ms on the posture feeder's monotonic clock.
    pub since_ms: u64,
    /// What to do about it.
    pub action: String,
}

/// A posture edge.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    /// Posture before.
    pub from: Posture,
    /// Posture after.
    pub to: Posture,
    /// Why.
    pub cause: PostureCause,
    /// When, ms on the caller's monotonic clock.
    pub at_ms: u64,
}

/// Throttling seen since the previous sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThrottleSample {
    /// Throttle events (periods throttled).
    pub events: u64,
    /// Time throttled, µs.
    pub throttled_us: u64,
}

impl ThrottleSample {
    /// Any throttling at all.
    pub fn is_throttled(&self) -> bool {
        self.events > 0 || self.throttled_us > 0
    }
}

impl From<ThrottleReading> for ThrottleSample {
    /// Events from the limiting cgroup's `cpu.stat`; the throttled time from
    /// the leaf's own `cpu.stat.local` where present (this process's share
    /// of the throttling), else from the limiting cgroup.
    fn from(r: ThrottleReading) -> Self {
        ThrottleSample {
            events: r.nr_throttled,
            throttled_us: r.local_throttled_us.unwrap_or(r.throttled_us),
        }
    }
}
