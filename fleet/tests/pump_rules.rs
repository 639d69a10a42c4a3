//! The pump's rules, one scenario each: grant order, full queue, start after
//! a cordon flip, faulted and closed hosts, the backlog gauge, huge config
//! values (`DESIGN.md` §3 "Lanes, hosts and the pump", "Priority").

use crate::pump_support::{seat, CORDONED, DEAD, NOMINAL};
use fleet::admission::AdmissionError;
use fleet::guard::GuardSnapshot;
use fleet::pump::{
    Effect, FailureKind, HostLayout, HostPump, Placement, Progress, PumpConfig, PumpInput,
};
use fleet::receipt::TerminalReason;
use fleet::slot::SlotState;
use fleet::unit::{UnitId, UnitMeta};
use fleet::WorkerRole::{self, *};

fn layout(seats: Vec<(WorkerRole, u32)>, queue_capacity: u32, walk_admission: u32) -> HostLayout {
    HostLayout {
        host: "test-host".into(),
        seats,
        queue_capacity,
        walk_admission,
        sim_slot_cap: 2,
    }
}

fn enq(p: &mut HostPump<UnitId>, meta: UnitMeta, g: GuardSnapshot) -> Vec<Effect<UnitId>> {
    p.step(
        PumpInput::Enqueue {
            meta,
            payload: meta.id,
        },
        g,
    )
}

fn grants(fx: &[Effect<UnitId>]) -> Vec<(UnitId, u32)> {
    fx.iter()
        .filter_map(|e| {
            if let Effect::Grant { meta, seat, .. } = e {
                Some((meta.id, seat.index))
            } else {
                None
            }
        })
        .collect()
}

fn placement(fx: &[Effect<UnitId>]) -> Option<Placement> {
    fx.iter().find_map(|e| {
        if let Effect::Admitted { placement, .. } = e {
            Some(*placement)
        } else {
            None
        }
    })
}

#[test]
fn a_queued_sim_is_granted_before_new_solver_intake_and_continuations_before_both() {
    // S = 1 walk at a time, 3 solver seats; 2 sim seats under a cap of 1.
    let mut p = HostPump::new(
        layout(vec![(Solver, 3), (SimDriver, 2)], 4, 1),
        PumpConfig::default(),
    );
    let cap1 = GuardSnapshot::nominal(1);
    assert_eq!(
        grants(&enq(&mut p, UnitMeta::keyed(1, Solver, 0), cap1)),
        vec![(1, 0)]
    );
    assert_eq!(
        grants(&enq(&mut p, UnitMeta::pooled(2, SimDriver), cap1)),
        vec![(2, 0)]
    );
    // Blocked: a new key (walk admission full), a sim (cap full), a continuation of key 0.
    assert!(grants(&enq(&mut p, UnitMeta::keyed(3, Solver, 1), cap1)).is_empty());
    assert!(grants(&enq(&mut p, UnitMeta::pooled(4, SimDriver), cap1)).is_empty());
    assert!(grants(&enq(&mut p, UnitMeta::keyed(5, Solver, 0), cap1)).is_empty());
    // Key 0's walk finishes with the cap raised: continuation first, then the sim;
    // the new key waits (the continuation counts toward S).
    let fx = p.step(
        PumpInput::SeatDone {
            seat: seat(Solver, 0),
            unit: 1,
        },
        GuardSnapshot::nominal(2),
    );
    assert_eq!(grants(&fx), vec![(5, 0), (4, 1)]);
    // The next walk completion admits the new key on its own seat.
    let fx = p.step(
        PumpInput::SeatDone {
            seat: seat(Solver, 0),
            unit: 5,
        },
        NOMINAL,
    );
    assert_eq!(grants(&fx), vec![(3, 1)]);
    assert_eq!(
        p.seats()[0].1,
        SlotState::Pinned {
            role: Solver,
            key: 0
        }
    );
}

#[test]
fn a_queued_sim_is_granted_before_a_new_solver_key_in_the_same_step() {
    let mut p = HostPump::new(
        layout(vec![(Solver, 2), (SimDriver, 2)], 4, 1),
        PumpConfig::default(),
    );
    let cap1 = GuardSnapshot::nominal(1);
    enq(&mut p, UnitMeta::keyed(1, Solver, 0), cap1);
    enq(&mut p, UnitMeta::pooled(2, SimDriver), cap1);
    enq(&mut p, UnitMeta::keyed(3, Solver, 1), cap1);
    enq(&mut p, UnitMeta::pooled(4, SimDriver), cap1);
    let fx = p.step(
        PumpInput::SeatDone {
            seat: seat(Solver, 0),
            unit: 1,
        },
        GuardSnapshot::nominal(2),
    );
    assert_eq!(
        grants(&fx),
        vec![(4, 1), (3, 1)],
        "sim first, then the new solver key"
    );
}

#[test]
fn a_running_walk_is_never_preempted_and_a_key_never_takes_two_seats() {
    let mut p = HostPump::new(layout(vec![(Solver, 2)], 4, 2), PumpConfig::default());
    enq(&mut p, UnitMeta::keyed(1, Solver, 0), NOMINAL);
    // Same key again, and key 2 (same seat): both wait although seat 1 is free.
    assert!(grants(&enq(&mut p, UnitMeta::keyed(2, Solver, 0), NOMINAL)).is_empty());
    assert!(grants(&enq(&mut p, UnitMeta::keyed(3, Solver, 2), NOMINAL)).is_empty());
    assert_eq!(p.seats()[1].1, SlotState::Idle);
    assert_eq!(p.in_flight(), vec![(seat(Solver, 0), 1)]);
    // Completion: key 0 continues (warm pin) ahead of key 2.
    let fx = p.step(
        PumpInput::SeatDone {
            seat: seat(Solver, 0),
            unit: 1,
        },
        NOMINAL,
    );
    assert_eq!(grants(&fx), vec![(2, 0)]);
    // Then key 2 re-keys seat 0 (pin released, then leased): nothing else of key 0 is queued.
    let fx = p.step(
        PumpInput::SeatDone {
            seat: seat(Solver, 0),
            unit: 2,
        },
        NOMINAL,
    );
    assert_eq!(grants(&fx), vec![(3, 0)]);
    assert_eq!(
        p.seats()[0].1,
        SlotState::Running {
            role: Solver,
            unit: 3,
            key: Some(2)
        }
    );
}

#[test]
fn a_full_queue_returns_a_typed_error_and_the_unit() {
    let mut p = HostPump::new(layout(vec![(Resolve, 1)], 2, 1), PumpConfig::default());
    for id in 1..=3 {
        assert_eq!(
            placement(&enq(&mut p, UnitMeta::pooled(id, Resolve), NOMINAL)),
            Some(Placement::Queued)
        );
    }
    let fx = enq(&mut p, UnitMeta::pooled(4, Resolve), NOMINAL);
    match &fx[..] {
        [Effect::Refused {
            meta,
            payload,
            error,
        }] => {
            assert_eq!((meta.id, *payload), (4, 4));
            assert_eq!(
                *error,
                AdmissionError::QueueFull {
                    role: Resolve,
                    capacity: 2
                }
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let c = p.counts();
    assert_eq!((c.submitted, c.in_flight, c.queued), (3, 1, 2));
}

#[test]
fn a_unit_granted_just_before_a_cordon_flip_starts_and_resolves() {
    let mut p = HostPump::new(layout(vec![(Registrar, 1)], 4, 1), PumpConfig::default());
    let fx = enq(&mut p, UnitMeta::pooled(1, Registrar), NOMINAL);
    assert_eq!(grants(&fx), vec![(1, 0)]);
    // The cordon flips: the running unit drains (T7), it is not cancelled.
    enq(&mut p, UnitMeta::pooled(2, Registrar), CORDONED);
    assert_eq!(
        p.seats()[0].1,
        SlotState::Draining {
            role: Registrar,
            unit: 1
        }
    );
    assert_eq!(p.progress(), Progress::Backed);
    p.step(
        PumpInput::SeatDone {
            seat: seat(Registrar, 0),
            unit: 1,
        },
        CORDONED,
    );
    assert_eq!(p.seats()[0].1, SlotState::Idle);
    assert_eq!(p.counts().resolved, 1);
    assert_eq!(
        p.backlog_by_role()
            .iter()
            .find(|(r, _)| *r == Registrar)
            .unwrap()
            .1,
        1
    );
}

#[test]
fn held_units_wait_in_a_gauged_backlog_and_a_tick_drains_them_after_the_cordon_lifts() {
    let mut p = HostPump::new(layout(vec![(Verifier, 1)], 8, 1), PumpConfig::default());
    let mut fx = Vec::new();
    for id in 1..=3 {
        fx.extend(enq(&mut p, UnitMeta::pooled(id, Verifier), CORDONED));
    }
    assert!(matches!(
        fx.iter().find(|e| matches!(e, Effect::ArmBackstop { .. })),
        Some(Effect::ArmBackstop { after_ms: 250 })
    ));
    assert_eq!(
        fx.iter()
            .filter(|e| matches!(e, Effect::ArmBackstop { .. }))
            .count(),
        1,
        "armed once"
    );
    assert!(grants(&fx).is_empty());
    let gauge: Vec<_> = p
        .backlog_by_role()
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect();
    assert_eq!(gauge, vec![(Verifier, 3)]);
    // A tick with the posture still cordoned moves nothing and is no stall.
    p.step(PumpInput::BackstopTick, CORDONED);
    assert_eq!(p.counts().backlog, 3);
    // The posture lifts with no message: the next tick drains, FIFO, and disarms.
    let fx = p.step(PumpInput::BackstopTick, NOMINAL);
    assert_eq!(grants(&fx), vec![(1, 0)]);
    assert!(fx.iter().any(|e| matches!(e, Effect::DisarmBackstop)));
    assert_eq!(
        p.queued().iter().map(|m| m.id).collect::<Vec<_>>(),
        vec![2, 3]
    );
    assert_eq!(p.progress(), Progress::Idle);
}

/// A cordon that held thousands of units grew the backlog's buffer; once
/// the backlog drains the buffer is handed back (at most
/// `BACKLOG_RETAINED` slots per role stay), so memory does not step up
/// with every cordon. Before, the 5,000 slots stayed allocated for good.
#[test]
fn a_drained_backlog_hands_back_the_buffer_a_cordon_grew() {
    let n: u32 = 5_000;
    let mut p = HostPump::new(layout(vec![(Verifier, 1)], n + 8, 1), PumpConfig::default());
    for id in 1..=u64::from(n) {
        enq(&mut p, UnitMeta::pooled(id, Verifier), CORDONED);
    }
    assert_eq!(p.counts().backlog, u64::from(n));
    assert!(p.backlog_capacity() >= n as usize);
    // The cordon lifts: the tick moves every held unit to the queue.
    p.step(PumpInput::BackstopTick, NOMINAL);
    assert_eq!(p.counts().backlog, 0);
    let most = fleet::pump::BACKLOG_RETAINED * fleet::role::ALL_ROLES.len();
    assert!(
        p.backlog_capacity() <= most,
        "{} slots still allocated (at most {most})",
        p.backlog_capacity()
    );
    assert!(p.counts().conserved());
}

#[test]
fn queued_units_of_a_held_role_return_to_the_backlog_under_cordon() {
    let mut p = HostPump::new(
        layout(vec![(PoolStateUpdater, 1)], 8, 1),
        PumpConfig::default(),
    );
    for id in 1..=3 {
        enq(&mut p, UnitMeta::pooled(id, PoolStateUpdater), NOMINAL);
    }
    assert_eq!(p.counts().queued, 2);
    let fx = p.step(PumpInput::PostureEdge { seq: 7 }, CORDONED);
    assert_eq!(
        p.backlogged().iter().map(|m| m.id).collect::<Vec<_>>(),
        vec![2, 3]
    );
    assert!(fx.iter().any(|e| matches!(e, Effect::ArmBackstop { .. })));
    assert_eq!(p.last_edge_seq(), 7);
}

#[path = "pump_rules/faults.rs"]
mod faults;
