//! The live guards a host pump re-reads on every step.
//!
//! Posture is a live guard owned elsewhere (the posture owner); the pump never
//! mirrors it. Each pump step takes a fresh [`GuardSnapshot`] as an argument,
//! which keeps the pump pure (`DESIGN.md` §3 "Lanes, hosts and the pump";
//! seed 003 "Guard vs input").

use crate::role::{CordonClass, WorkerRole};
use serde::{Deserialize, Serialize};

/// One read of the guards that decide admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GuardSnapshot {
    /// The posture is `Cordoned`.
    pub cordoned: bool,
    /// How many sims may be in flight at once right now: the sim slot cap when
    /// nominal, the sim intake floor when cordoned. Counts seats, not cores.
    pub sim_intake_cap: u32,
    /// The sticky lane-death latch is set (a lane died in this process).
    pub lane_dead: bool,
}

impl GuardSnapshot {
    /// Nominal posture with the given sim slot cap and no lane death.
    pub const fn nominal(sim_slot_cap: u32) -> Self {
        GuardSnapshot {
            cordoned: false,
            sim_intake_cap: sim_slot_cap,
            lane_dead: false,
        }
    }

    /// Whether the posture admits new intake of `role` (cordon holds only
    /// deferrable roles; the sim floor is a cap, applied by the dispatcher).
    pub const fn admits(&self, role: WorkerRole) -> bool {
        !(self.cordoned && matches!(role.cordon_class(), CordonClass::Deferrable))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::role::ALL_ROLES;

    #[test]
    fn cordon_holds_exactly_the_deferrable_roles() {
        let nominal = GuardSnapshot::nominal(4);
        let cordoned = GuardSnapshot {
            cordoned: true,
            sim_intake_cap: 2,
            lane_dead: false,
        };
        for role in ALL_ROLES {
            assert!(nominal.admits(role), "{role}");
            assert_eq!(
                cordoned.admits(role),
                role.cordon_class() != CordonClass::Deferrable,
                "{role}"
            );
        }
    }
}
