//! The slot (seat) state machine, its transition table as data.
//!
//! A slot is a persistent seat. States `Idle`, `Leased(role)`,
//! `Running(role, unit)`, `Pinned(role, key)`, `Draining(role)`; the nine
//! legal transitions of seed 000 §3.3 are the rows of [`TABLE`]; every other
//! (state, transition) pair is refused with a typed [`SlotError`].
//! The posture guard sits on the lease (T1) only: a unit leased before a
//! cordon began always starts (T2 and T6 carry no posture guard), so a grant
//! made in the instant a cordon flips never strands its receipt
//! (`DESIGN.md` §3 "Slot state machine").

use crate::guard::GuardSnapshot;
use crate::role::WorkerRole;
use crate::unit::{PinKey, UnitId};
use serde::{Deserialize, Serialize};

/// A seat's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SlotState {
    /// Parked; no lease; zero CPU.
    Idle,
    /// Dispatch granted a unit (or a pin claim) of this role.
    Leased(WorkerRole),
    /// Executing `unit`; `key` is its pin key for keyed roles.
    Running {
        /// The role.
        role: WorkerRole,
        /// The running unit.
        unit: UnitId,
        /// The pin key (keyed roles only).
        key: Option<PinKey>,
    },
    /// A steady keyed lease held across cycles (Solver per bin, Merge).
    Pinned {
        /// The keyed role.
        role: WorkerRole,
        /// The pin key.
        key: PinKey,
    },
    /// Finishing its in-flight `unit` under cordon or resize; takes nothing new.
    Draining {
        /// The role.
        role: WorkerRole,
        /// The in-flight unit that still completes.
        unit: UnitId,
    },
}

/// The state's kind, without its data (the table's vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StateKind {
    /// [`SlotState::Idle`].
    Idle,
    /// [`SlotState::Leased`].
    Leased,
    /// [`SlotState::Running`].
    Running,
    /// [`SlotState::Pinned`].
    Pinned,
    /// [`SlotState::Draining`].
    Draining,
}

/// Every state kind.
pub const ALL_STATE_KINDS: [StateKind; 5] = [
    StateKind::Idle,
    StateKind::Leased,
    StateKind::Running,
    StateKind::Pinned,
    StateKind::Draining,
];

/// The nine legal transitions of seed 000 §3.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TransitionId {
    /// `Idle → Leased(r)`: posture must admit r.
    T1Lease,
    /// `Leased(r) → Running(r, unit)`: the seat takes the unit (no posture guard).
    T2Start,
    /// `Running(Solver, k) → Pinned(Solver, k)`: a walk completes; the pin survives.
    T3PinSolver,
    /// `Running(Merge) → Pinned(Merge)`: the one merge pin.
    T4PinMerge,
    /// `Running(pooled r) → Idle`: a pooled unit completes.
    T5ReleasePooled,
    /// `Pinned(r, k) → Running(r, k)`: the next unit of the same key only.
    T6Resume,
    /// `Running(r) → Draining(r)`: cordon onset or resize; the unit completes.
    T7Drain,
    /// `Draining(r) → Idle`: the in-flight unit is done; nothing taken.
    T8FinishDrain,
    /// `Pinned(r) → Idle`: pin release at an epoch boundary only.
    T9ReleasePin,
}

/// Every transition, in table order.
pub const ALL_TRANSITIONS: [TransitionId; 9] = [
    TransitionId::T1Lease,
    TransitionId::T2Start,
    TransitionId::T3PinSolver,
    TransitionId::T4PinMerge,
    TransitionId::T5ReleasePooled,
    TransitionId::T6Resume,
    TransitionId::T7Drain,
    TransitionId::T8FinishDrain,
    TransitionId::T9ReleasePin,
];

/// Which roles a transition applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleSet {
    /// Every role.
    Any,
    /// Exactly this role.
    Only(WorkerRole),
    /// Keyed roles (Solver, Merge).
    Keyed,
    /// Pooled roles (everything but Solver and Merge).
    Pooled,
}

impl RoleSet {
    /// Whether `role` is in the set.
    pub fn contains(self, role: WorkerRole) -> bool {
        use crate::role::Hosting;
        match self {
            RoleSet::Any => true,
            RoleSet::Only(r) => r == role,
            RoleSet::Keyed => role.hosting() == Hosting::Keyed,
            RoleSet::Pooled => role.hosting() == Hosting::Pooled,
        }
    }
}

/// One row of the transition table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// The transition.
    pub id: TransitionId,
    /// The state kind it leaves.
    pub from: StateKind,
    /// The state kind it enters.
    pub to: StateKind,
    /// The roles it applies to.
    pub roles: RoleSet,
    /// Whether the posture must admit the role (T1 only).
    pub posture_guard: bool,
}

const fn rule(
    id: TransitionId,
    from: StateKind,
    to: StateKind,
    roles: RoleSet,
    posture_guard: bool,
) -> Rule {
    Rule {
        id,
        from,
        to,
        roles,
        posture_guard,
    }
}

/// The transition table (seed 000 §3.3), one row per legal transition.
pub const TABLE: [Rule; 9] = {
    use StateKind::*;
    use TransitionId::*;
    [
        rule(T1Lease, Idle, Leased, RoleSet::Any, true),
        rule(T2Start, Leased, Running, RoleSet::Any, false),
        rule(
            T3PinSolver,
            Running,
            Pinned,
            RoleSet::Only(WorkerRole::Solver),
            false,
        ),
        rule(
            T4PinMerge,
            Running,
            Pinned,
            RoleSet::Only(WorkerRole::Merge),
            false,
        ),
        rule(T5ReleasePooled, Running, Idle, RoleSet::Pooled, false),
        rule(T6Resume, Pinned, Running, RoleSet::Keyed, false),
        rule(T7Drain, Running, Draining, RoleSet::Any, false),
        rule(T8FinishDrain, Draining, Idle, RoleSet::Any, false),
        rule(T9ReleasePin, Pinned, Idle, RoleSet::Keyed, false),
    ]
};

impl TransitionId {
    /// This transition's row in [`TABLE`].
    pub fn rule(self) -> &'static Rule {
        TABLE
            .iter()
            .find(|r| r.id == self)
            .expect("every transition has a row")
    }
}

/// A transition request with its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SlotInput {
    /// T1: lease the idle seat for `role`.
    Lease {
        /// The role to lease for.
        role: WorkerRole,
    },
    /// T2: start `unit` on the leased seat (`key` required for keyed roles).
    Start {
        /// The unit.
        unit: UnitId,
        /// Its pin key (keyed roles).
        key: Option<PinKey>,
    },
    /// T3: a Solver walk completes; pin its key.
    PinSolver,
    /// T4: the Merge unit completes; keep the merge pin.
    PinMerge,
    /// T5: a pooled unit completes; back to the pooled set.
    ReleasePooled,
    /// T6: resume the pin with the next unit of the same key.
    Resume {
        /// The unit.
        unit: UnitId,
        /// Its pin key (must equal the pinned key).
        key: PinKey,
    },
    /// T7: drain (cordon onset or resize); the unit still completes.
    Drain,
    /// T8: the draining unit is done.
    FinishDrain,
    /// T9: release the pin (epoch boundary).
    ReleasePin,
}

impl SlotInput {
    /// The transition this input requests.
    pub const fn id(&self) -> TransitionId {
        match self {
            SlotInput::Lease { .. } => TransitionId::T1Lease,
            SlotInput::Start { .. } => TransitionId::T2Start,
            SlotInput::PinSolver => TransitionId::T3PinSolver,
            SlotInput::PinMerge => TransitionId::T4PinMerge,
            SlotInput::ReleasePooled => TransitionId::T5ReleasePooled,
            SlotInput::Resume { .. } => TransitionId::T6Resume,
            SlotInput::Drain => TransitionId::T7Drain,
            SlotInput::FinishDrain => TransitionId::T8FinishDrain,
            SlotInput::ReleasePin => TransitionId::T9ReleasePin,
        }
    }
}

/// Why a transition was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SlotError {
    /// The seat is not in the state the transition leaves (e.g. `Idle →
    /// Running` without a lease, `Draining → Leased`, `Running → Idle` by a
    /// pin release). Follow the table: lease before start, finish a drain
    /// before leasing again.
    #[error("{transition:?} leaves {expected:?}, but the seat is {actual:?}: follow the slot table (seed 000 §3.3)")]
    WrongState {
        /// The requested transition.
        transition: TransitionId,
        /// The state kind it requires.
        expected: StateKind,
        /// The seat's state kind.
        actual: StateKind,
    },
    /// The transition does not apply to the seat's role (e.g. a pooled
    /// release of a keyed Solver unit, i.e. `Running → Idle` mid-pin).
    #[error("{transition:?} does not apply to role {role}: keyed roles pin on completion, pooled roles release")]
    RoleNotAllowed {
        /// The requested transition.
        transition: TransitionId,
        /// The seat's (or requested) role.
        role: WorkerRole,
    },
    /// The posture holds this deferrable role: leases wait for the cordon
    /// to lift (the unit waits in the backlog).
    #[error("the posture holds role {role} (cordoned): lease it after the cordon lifts")]
    PostureHolds {
        /// The refused role.
        role: WorkerRole,
    },
    /// A pin resumes only for its own key; re-keying is T9 then T1.
    #[error("seat is pinned to key {pinned}, not {requested}: release the pin (T9) and lease again (T1)")]
    KeyMismatch {
        /// The pinned key.
        pinned: PinKey,
        /// The requested key.
        requested: PinKey,
    },
    /// A keyed role's unit started without a pin key.
    #[error("a {role} unit needs a pin key to start")]
    MissingKey {
        /// The keyed role.
        role: WorkerRole,
    },
}

impl SlotState {
    /// The state's kind.
    pub const fn kind(&self) -> StateKind {
        match self {
            SlotState::Idle => StateKind::Idle,
            SlotState::Leased(_) => StateKind::Leased,
            SlotState::Running { .. } => StateKind::Running,
            SlotState::Pinned { .. } => StateKind::Pinned,
            SlotState::Draining { .. } => StateKind::Draining,
        }
    }

    /// The seat's current role (`None` when idle).
    pub const fn role(&self) -> Option<WorkerRole> {
        match *self {
            SlotState::Idle => None,
            SlotState::Leased(r) => Some(r),
            SlotState::Running { role, .. }
            | SlotState::Pinned { role, .. }
            | SlotState::Draining { role, .. } => Some(role),
        }
    }

    /// The unit in flight on the seat (Running or Draining).
    pub const fn unit(&self) -> Option<UnitId> {
        match *self {
            SlotState::Running { unit, .. } | SlotState::Draining { unit, .. } => Some(unit),
            _ => None,
        }
    }

    /// Applies `input` under `guard`, returning the next state or the typed
    /// refusal. Checks, in order: the source state ([`SlotError::WrongState`]),
    /// the role ([`SlotError::RoleNotAllowed`]), then the guard (posture on
    /// T1 only, the key on T2/T6).
    pub fn apply(&self, input: SlotInput, guard: &GuardSnapshot) -> Result<SlotState, SlotError> {
        let rule = input.id().rule();
        if self.kind() != rule.from {
            return Err(SlotError::WrongState {
                transition: rule.id,
                expected: rule.from,
                actual: self.kind(),
            });
        }
        let role = match (input, self.role()) {
            (SlotInput::Lease { role }, _) => role,
            (_, Some(role)) => role,
            (_, None) => unreachable!("only Idle has no role and only T1 leaves Idle"),
        };
        if !rule.roles.contains(role) {
            return Err(SlotError::RoleNotAllowed {
                transition: rule.id,
                role,
            });
        }
        if rule.posture_guard && !guard.admits(role) {
            return Err(SlotError::PostureHolds { role });
        }
        let keyed = crate::role::Hosting::Keyed == role.hosting();
        Ok(match (input, *self) {
            (SlotInput::Lease { role }, _) => SlotState::Leased(role),
            (SlotInput::Start { unit, key }, _) => {
                if keyed && key.is_none() {
                    return Err(SlotError::MissingKey { role });
                }
                SlotState::Running {
                    role,
                    unit,
                    key: if keyed { key } else { None },
                }
            }
            (SlotInput::PinSolver | SlotInput::PinMerge, SlotState::Running { key, .. }) => {
                SlotState::Pinned {
                    role,
                    key: key.expect("a keyed unit runs with its key"),
                }
            }
            (SlotInput::ReleasePooled | SlotInput::FinishDrain | SlotInput::ReleasePin, _) => {
                SlotState::Idle
            }
            (SlotInput::Resume { unit, key }, SlotState::Pinned { key: pinned, .. }) => {
                if key != pinned {
                    return Err(SlotError::KeyMismatch {
                        pinned,
                        requested: key,
                    });
                }
                SlotState::Running {
                    role,
                    unit,
                    key: Some(key),
                }
            }
            (SlotInput::Drain, SlotState::Running { unit, .. }) => {
                SlotState::Draining { role, unit }
            }
            _ => unreachable!("the table's from-state check covers every other pair"),
        })
    }
}
