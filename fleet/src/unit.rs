//! Units: the work a host pump admits, queues, grants and resolves.
//!
//! A unit is identified by a caller-chosen [`UnitId`], has one
//! [`WorkerRole`] and, for keyed roles (Solver, Merge), a [`PinKey`] naming
//! the pin it belongs to (`DESIGN.md` §3 "Lanes, hosts and the pump"; seed 000
//! §3.4 "pin affinity is job → bin key"). The payload (the work itself and
//! its receipt sender) travels next to the meta, generic in the pump.

use crate::role::{Hosting, WorkerRole};
use serde::{Deserialize, Serialize};

/// A unit's identity, chosen by the submitter; unique among the units a host
/// holds at once (a pump matches `SeatDone` completions by it).
pub type UnitId = u64;

/// A pin key: the bin index for Solver units (0..bins), 0 for the single
/// Merge pin. Keyed roles are seated on seat `key % seat_count` of their role.
pub type PinKey = u32;

/// What the pump needs to know about a unit (the payload stays opaque).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UnitMeta {
    /// The unit's identity.
    pub id: UnitId,
    /// The role whose seats run it.
    pub role: WorkerRole,
    /// The pin key: required for Solver units; Merge units default to key 0;
    /// ignored for pooled roles.
    pub key: Option<PinKey>,
}

impl UnitMeta {
    /// A pooled-role unit (no key).
    pub const fn pooled(id: UnitId, role: WorkerRole) -> Self {
        UnitMeta {
            id,
            role,
            key: None,
        }
    }

    /// A keyed-role unit with its pin key.
    pub const fn keyed(id: UnitId, role: WorkerRole, key: PinKey) -> Self {
        UnitMeta {
            id,
            role,
            key: Some(key),
        }
    }

    /// The key the unit pins under, if its role is keyed: the given key, or 0
    /// for Merge (exactly one merge pin). `None` for pooled roles and for a
    /// Solver unit without a key (the pump refuses that with
    /// [`crate::admission::AdmissionError::MissingKey`]).
    pub fn pin_key(&self) -> Option<PinKey> {
        match (self.role.hosting(), self.role, self.key) {
            (Hosting::Pooled, _, _) => None,
            (Hosting::Keyed, WorkerRole::Merge, k) => Some(k.unwrap_or(0)),
            (Hosting::Keyed, _, k) => k,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_keys_follow_hosting() {
        assert_eq!(UnitMeta::keyed(1, WorkerRole::Solver, 4).pin_key(), Some(4));
        assert_eq!(UnitMeta::pooled(1, WorkerRole::Solver).pin_key(), None);
        assert_eq!(UnitMeta::pooled(1, WorkerRole::Merge).pin_key(), Some(0));
        assert_eq!(UnitMeta::keyed(1, WorkerRole::SimDriver, 4).pin_key(), None);
    }
}
