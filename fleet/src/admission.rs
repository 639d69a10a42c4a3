//! Admission: the pure predicate a host pump applies to every intake.
//!
//! Admission is a function of (queue length, queue capacity, posture admits
//! role) only, with four answers (seed 003 decision 5; `DESIGN.md` §3 "Lanes,
//! hosts and the pump"). The pump maps them to placements: admit → the
//! role's queue; wait for posture (or both) → the backlog, FIFO, never
//! dropped; wait for capacity alone → the unit is handed back with
//! [`AdmissionError::QueueFull`] (bounded queues fail loudly, seed 000 §4).

use crate::role::WorkerRole;

/// The predicate's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Admission {
    /// The queue has room and the posture admits the role.
    Admit,
    /// The posture admits the role but the queue is full.
    WaitCapacity,
    /// The queue has room but the posture holds the role.
    WaitPosture,
    /// The queue is full and the posture holds the role.
    WaitBoth,
}

/// The admission predicate: pure, total, no side effects.
pub const fn admission(queue_len: u32, queue_cap: u32, posture_admits: bool) -> Admission {
    match (queue_len < queue_cap, posture_admits) {
        (true, true) => Admission::Admit,
        (false, true) => Admission::WaitCapacity,
        (true, false) => Admission::WaitPosture,
        (false, false) => Admission::WaitBoth,
    }
}

impl Admission {
    /// Whether the posture holds the unit (it belongs in the backlog).
    pub const fn posture_holds(self) -> bool {
        matches!(self, Admission::WaitPosture | Admission::WaitBoth)
    }
}

/// Why an enqueue was refused; the unit comes back with it, nothing is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum AdmissionError {
    /// The role's bounded queue is full while the posture admits the role.
    /// Back off and resubmit, or raise `queue_capacity`; never drop silently.
    #[error("the {role} queue is full ({capacity} units): back off and resubmit, or raise the queue capacity")]
    QueueFull {
        /// The role.
        role: WorkerRole,
        /// The queue capacity (units).
        capacity: u32,
    },
    /// The host is closed; submit to a live host.
    #[error("the host is closed: submit to a live host")]
    HostClosed,
    /// The host is faulted (the sticky lane-death latch is set) and the
    /// posture holds this role, so the unit would never run in this process.
    #[error("lane death: the host is faulted and would hold this {role} unit forever; account it as failed")]
    LaneDead {
        /// The role.
        role: WorkerRole,
    },
    /// The host failed loudly and takes nothing new.
    #[error("the host pump failed loudly and takes nothing new")]
    PumpFailed,
    /// The host has no seat of this role; route the unit to a host that does.
    #[error("this host has no {role} seat: route the unit to the host that hosts {role}")]
    NoSeats {
        /// The role.
        role: WorkerRole,
    },
    /// The seat this unit needs was lost (its thread died outside a unit):
    /// the seat of its key for a keyed role, or every seat of a pooled role
    /// (`index` then names seat 0). The host will not run it in this
    /// process; account it as failed (`DESIGN.md` §3 "Outcome ledger").
    #[error("seat {index} of role {role} was lost: this unit cannot run in this process; account it as failed")]
    SeatLost {
        /// The role.
        role: WorkerRole,
        /// The lost seat's index.
        index: u32,
    },
    /// A Solver unit needs a pin key (its bin index).
    #[error("a {role} unit needs a pin key (its bin index)")]
    MissingKey {
        /// The keyed role.
        role: WorkerRole,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_predicate_has_four_answers_over_its_three_inputs() {
        for cap in 0..4u32 {
            for len in 0..=cap + 1 {
                for admits in [false, true] {
                    let got = admission(len, cap, admits);
                    let room = len < cap;
                    let want = match (room, admits) {
                        (true, true) => Admission::Admit,
                        (false, true) => Admission::WaitCapacity,
                        (true, false) => Admission::WaitPosture,
                        (false, false) => Admission::WaitBoth,
                    };
                    assert_eq!(got, want, "len {len} cap {cap} admits {admits}");
                    assert_eq!(got.posture_holds(), !admits);
                }
            }
        }
    }
}
