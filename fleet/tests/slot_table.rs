//! The slot state machine against its table: every (state, transition) pair
//! for every role, legal ones succeed and all others fail with the right
//! typed reason (seed 000 §3.3; `DESIGN.md` §3 "Slot state machine").

use fleet::guard::GuardSnapshot;
use fleet::slot::{
    SlotError, SlotInput, SlotState, StateKind, TransitionId, ALL_STATE_KINDS, ALL_TRANSITIONS,
};
use fleet::{CordonClass, Hosting, WorkerRole, ALL_ROLES};

const NOMINAL: GuardSnapshot = GuardSnapshot::nominal(4);
const CORDONED: GuardSnapshot = GuardSnapshot {
    cordoned: true,
    sim_intake_cap: 2,
    lane_dead: false,
};

/// The legal (from, transition, role) triples, written out from seed 000
/// §3.3 independently of `fleet::slot::TABLE`.
fn legal(from: StateKind, t: TransitionId, role: WorkerRole) -> Option<StateKind> {
    use StateKind::*;
    use TransitionId::*;
    let keyed = matches!(role, WorkerRole::Solver | WorkerRole::Merge);
    match (from, t) {
        (Idle, T1Lease) => Some(Leased),
        (Leased, T2Start) => Some(Running),
        (Running, T3PinSolver) if role == WorkerRole::Solver => Some(Pinned),
        (Running, T4PinMerge) if role == WorkerRole::Merge => Some(Pinned),
        (Running, T5ReleasePooled) if !keyed => Some(Idle),
        (Pinned, T6Resume) if keyed => Some(Running),
        (Running, T7Drain) => Some(Draining),
        (Draining, T8FinishDrain) => Some(Idle),
        (Pinned, T9ReleasePin) if keyed => Some(Idle),
        _ => None,
    }
}

/// The transition's source state in the seed table (for the WrongState reason).
fn source(t: TransitionId) -> StateKind {
    use StateKind::*;
    use TransitionId::*;
    match t {
        T1Lease => Idle,
        T2Start => Leased,
        T3PinSolver | T4PinMerge | T5ReleasePooled | T7Drain => Running,
        T6Resume | T9ReleasePin => Pinned,
        T8FinishDrain => Draining,
    }
}

fn state(kind: StateKind, role: WorkerRole) -> SlotState {
    let key = (role.hosting() == Hosting::Keyed).then_some(3);
    match kind {
        StateKind::Idle => SlotState::Idle,
        StateKind::Leased => SlotState::Leased(role),
        StateKind::Running => SlotState::Running {
            role,
            unit: 11,
            key,
        },
        StateKind::Pinned => SlotState::Pinned { role, key: 3 },
        StateKind::Draining => SlotState::Draining { role, unit: 11 },
    }
}

fn input(t: TransitionId, role: WorkerRole) -> SlotInput {
    match t {
        TransitionId::T1Lease => SlotInput::Lease { role },
        TransitionId::T2Start => SlotInput::Start {
            unit: 12,
            key: Some(3),
        },
        TransitionId::T3PinSolver => SlotInput::PinSolver,
        TransitionId::T4PinMerge => SlotInput::PinMerge,
        TransitionId::T5ReleasePooled => SlotInput::ReleasePooled,
        TransitionId::T6Resume => SlotInput::Resume { unit: 12, key: 3 },
        TransitionId::T7Drain => SlotInput::Drain,
        TransitionId::T8FinishDrain => SlotInput::FinishDrain,
        TransitionId::T9ReleasePin => SlotInput::ReleasePin,
    }
}

#[test]
fn every_state_transition_pair_matches_the_table_for_every_role() {
    let mut checked = 0;
    let mut legal_count = 0;
    for role in ALL_ROLES {
        for kind in ALL_STATE_KINDS {
            for t in ALL_TRANSITIONS {
                for guard in [NOMINAL, CORDONED] {
                    let s = state(kind, role);
                    let got = s.apply(input(t, role), &guard);
                    checked += 1;
                    let held = t == TransitionId::T1Lease
                        && guard.cordoned
                        && role.cordon_class() == CordonClass::Deferrable;
                    match legal(kind, t, role) {
                        Some(to) if !held => {
                            let next = got.unwrap_or_else(|e| panic!("{role} {kind:?} {t:?}: {e}"));
                            assert_eq!(next.kind(), to, "{role} {kind:?} {t:?}");
                            assert_eq!(next.role(), Some(role).filter(|_| to != StateKind::Idle));
                            legal_count += 1;
                        }
                        Some(_) => assert_eq!(got, Err(SlotError::PostureHolds { role })),
                        None if kind != source(t) => assert_eq!(
                            got,
                            Err(SlotError::WrongState {
                                transition: t,
                                expected: source(t),
                                actual: kind
                            }),
                            "{role} {kind:?} {t:?}"
                        ),
                        None => assert_eq!(
                            got,
                            Err(SlotError::RoleNotAllowed {
                                transition: t,
                                role
                            }),
                            "{role} {kind:?} {t:?}"
                        ),
                    }
                }
            }
        }
    }
    assert_eq!(checked, 8 * 5 * 9 * 2);
    // T1, T2, T7, T8 for 8 roles; T3 solver; T4 merge; T5 six pooled; T6, T9 two keyed;
    // twice (two guards) less the three deferrable leases under cordon.
    assert_eq!(legal_count, (8 * 4 + 1 + 1 + 6 + 2 * 2) * 2 - 3);
}

#[test]
fn the_named_illegal_moves_are_refused_with_their_reasons() {
    // Idle → Running: a lease is required.
    assert!(matches!(
        SlotState::Idle.apply(SlotInput::Start { unit: 1, key: None }, &NOMINAL),
        Err(SlotError::WrongState {
            expected: StateKind::Leased,
            actual: StateKind::Idle,
            ..
        })
    ));
    // Running → Idle mid-unit for a keyed walk.
    let walk = SlotState::Running {
        role: WorkerRole::Solver,
        unit: 1,
        key: Some(2),
    };
    assert!(matches!(
        walk.apply(SlotInput::ReleasePooled, &NOMINAL),
        Err(SlotError::RoleNotAllowed { .. })
    ));
    assert!(matches!(
        walk.apply(SlotInput::ReleasePin, &NOMINAL),
        Err(SlotError::WrongState { .. })
    ));
    // Re-keying a pin without releasing it.
    let pin = SlotState::Pinned {
        role: WorkerRole::Solver,
        key: 2,
    };
    assert_eq!(
        pin.apply(SlotInput::Resume { unit: 5, key: 4 }, &NOMINAL),
        Err(SlotError::KeyMismatch {
            pinned: 2,
            requested: 4
        })
    );
    // Draining → Leased.
    let draining = SlotState::Draining {
        role: WorkerRole::Registrar,
        unit: 1,
    };
    assert!(matches!(
        draining.apply(
            SlotInput::Lease {
                role: WorkerRole::Registrar
            },
            &NOMINAL
        ),
        Err(SlotError::WrongState {
            expected: StateKind::Idle,
            actual: StateKind::Draining,
            ..
        })
    ));
    // A keyed unit cannot start without its key.
    let leased = SlotState::Leased(WorkerRole::Solver);
    assert_eq!(
        leased.apply(SlotInput::Start { unit: 1, key: None }, &NOMINAL),
        Err(SlotError::MissingKey {
            role: WorkerRole::Solver
        })
    );
}

#[test]
fn a_unit_leased_before_a_cordon_flip_still_starts() {
    for role in ALL_ROLES {
        let leased = SlotState::Idle
            .apply(SlotInput::Lease { role }, &NOMINAL)
            .unwrap();
        let running = leased.apply(
            SlotInput::Start {
                unit: 7,
                key: Some(1),
            },
            &CORDONED,
        );
        assert_eq!(running.map(|s| s.kind()), Ok(StateKind::Running), "{role}");
    }
    let pin = SlotState::Pinned {
        role: WorkerRole::Solver,
        key: 1,
    };
    assert!(pin
        .apply(SlotInput::Resume { unit: 8, key: 1 }, &CORDONED)
        .is_ok());
}

#[test]
fn every_role_walks_every_legal_path() {
    for role in ALL_ROLES {
        let keyed = role.hosting() == Hosting::Keyed;
        let key = keyed.then_some(5);
        let g = &NOMINAL;
        let leased = SlotState::Idle.apply(SlotInput::Lease { role }, g).unwrap();
        let running = leased.apply(SlotInput::Start { unit: 1, key }, g).unwrap();
        assert_eq!(running, SlotState::Running { role, unit: 1, key });
        // Drain path: T7 then T8.
        let draining = running.apply(SlotInput::Drain, g).unwrap();
        assert_eq!(
            draining.apply(SlotInput::FinishDrain, g).unwrap(),
            SlotState::Idle
        );
        // Completion path.
        let done = match role {
            WorkerRole::Solver => SlotInput::PinSolver,
            WorkerRole::Merge => SlotInput::PinMerge,
            _ => SlotInput::ReleasePooled,
        };
        let after = running.apply(done, g).unwrap();
        if keyed {
            assert_eq!(after, SlotState::Pinned { role, key: 5 });
            let again = after
                .apply(SlotInput::Resume { unit: 2, key: 5 }, g)
                .unwrap();
            assert_eq!(
                again,
                SlotState::Running {
                    role,
                    unit: 2,
                    key: Some(5)
                }
            );
            assert_eq!(
                after.apply(SlotInput::ReleasePin, g).unwrap(),
                SlotState::Idle
            );
        } else {
            assert_eq!(after, SlotState::Idle);
        }
    }
}

#[test]
fn the_table_is_nine_rows_with_the_posture_guard_on_the_lease_only() {
    assert_eq!(fleet::slot::TABLE.len(), 9);
    for rule in fleet::slot::TABLE {
        assert_eq!(
            rule.posture_guard,
            rule.id == TransitionId::T1Lease,
            "{:?}",
            rule.id
        );
        assert_eq!(rule.from, source(rule.id));
    }
}
