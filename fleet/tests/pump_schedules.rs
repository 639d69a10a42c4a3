//! Randomized long schedules over a full-size host: every step keeps the
//! step invariants (safety S, keys, caps, backstop iff backlog), grants come
//! out in precedence order, and an independent tally of the effects shows
//! every admitted unit resolved exactly once after close and drain.

use crate::pump_support::{check_step, grant_class};
use fleet::guard::GuardSnapshot;
use fleet::pump::{Effect, HostLayout, HostPump, PumpConfig, PumpInput};
use fleet::slot::SlotState;
use fleet::unit::{UnitId, UnitMeta};
use fleet::WorkerRole::{self, *};
use fleet::ALL_ROLES;
use proptest::prelude::*;
use std::collections::HashMap;

fn layout() -> HostLayout {
    HostLayout {
        host: "schedules".into(),
        seats: vec![
            (Solver, 6),
            (SimDriver, 4),
            (Resolve, 1),
            (Merge, 1),
            (PoolStateUpdater, 1),
            (Registrar, 2),
            (Verifier, 1),
            (Submitter, 1),
        ],
        queue_capacity: 4,
        walk_admission: 3,
        sim_slot_cap: 4,
    }
}

#[derive(Debug, Clone)]
enum Op {
    Enqueue(usize, u32),
    Done(usize),
    Tick,
    Edge,
    Close,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..ALL_ROLES.len(), 0..8u32).prop_map(|(r, k)| Op::Enqueue(r, k)),
        5 => (0..16usize).prop_map(Op::Done),
        2 => Just(Op::Tick),
        1 => Just(Op::Edge),
        1 => Just(Op::Close).prop_filter("rare", |_| true),
    ]
}

fn guard() -> impl Strategy<Value = (bool, u32, bool)> {
    (any::<bool>(), 1..5u32, prop::bool::weighted(0.01))
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Fate {
    Waiting,
    Granted,
    Resolved,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn long_schedules_conserve_units_and_keep_grant_order(
        ops in prop::collection::vec((op(), guard()), 200..600),
        close_weight in 0..100u32,
    ) {
        let mut pump: HostPump<UnitId> = HostPump::new(layout(), PumpConfig { stall_ticks: 1000, ..PumpConfig::default() });
        let mut fate: HashMap<UnitId, Fate> = HashMap::new();
        let mut next_id = 0;
        let mut dead = false;
        let mut last = GuardSnapshot::nominal(4);
        for (op, (cordoned, cap, die)) in ops {
            dead |= die;
            let g = GuardSnapshot { cordoned: cordoned || dead, sim_intake_cap: cap, lane_dead: dead };
            last = g;
            // A solver grant is a continuation when its seat held the same key
            // before the step (pinned, or running a walk that completes in it).
            let keys_before: Vec<(u32, Option<u32>)> = pump
                .seats()
                .iter()
                .filter(|(id, _)| id.role == Solver)
                .map(|(id, s)| {
                    let key = match s {
                        SlotState::Pinned { key, .. } => Some(*key),
                        SlotState::Running { key, .. } => *key,
                        _ => None,
                    };
                    (id.index, key)
                })
                .collect();
            let input = match op {
                Op::Enqueue(r, k) => {
                    next_id += 1;
                    let role = ALL_ROLES[r];
                    PumpInput::Enqueue { meta: UnitMeta { id: next_id, role, key: Some(k) }, payload: next_id }
                }
                Op::Done(i) => {
                    let fl = pump.in_flight();
                    if fl.is_empty() { PumpInput::BackstopTick } else {
                        let (seat, unit) = fl[i % fl.len()];
                        prop_assert_eq!(fate.insert(unit, Fate::Resolved), Some(Fate::Granted));
                        PumpInput::SeatDone { seat, unit }
                    }
                }
                Op::Tick => PumpInput::BackstopTick,
                Op::Edge => PumpInput::PostureEdge { seq: next_id },
                Op::Close if close_weight < 10 => PumpInput::Close,
                Op::Close => PumpInput::PostureEdge { seq: 0 },
            };
            let enq = matches!(input, PumpInput::Enqueue { .. });
            let fx = pump.step(input, g);
            if let Err(v) = check_step(&pump, enq, &fx, &g) { prop_assert!(false, "{}", v); }
            let mut last_class = 0;
            for e in &fx {
                match e {
                    // An enqueue settles before and after admission: precedence holds per settle.
                    Effect::Admitted { unit, .. } => {
                        prop_assert!(fate.insert(*unit, Fate::Waiting).is_none());
                        last_class = 0;
                    }
                    Effect::Refused { .. } => last_class = 0,
                    Effect::Grant { meta, seat, .. } => {
                        prop_assert_eq!(fate.insert(meta.id, Fate::Granted), Some(Fate::Waiting));
                        let cont = meta.role == Solver
                            && keys_before.iter().any(|(i, k)| *i == seat.index && *k == meta.pin_key());
                        let class = grant_class(meta, cont);
                        prop_assert!(class >= last_class, "grant order broken: class {} after {} in {:?}", class, last_class, fx);
                        last_class = class;
                    }
                    Effect::Terminal { meta, .. } => {
                        prop_assert_eq!(fate.insert(meta.id, Fate::Resolved), Some(Fate::Waiting));
                    }
                    Effect::LoudFailure(f) => prop_assert!(false, "no stall expected with K = 1000: {}", f),
                    _ => {}
                }
            }
            let outstanding = fate.values().filter(|f| **f != Fate::Resolved).count() as u64;
            let c = pump.counts();
            prop_assert_eq!(outstanding, c.in_flight + c.queued + c.backlog);
            prop_assert_eq!(fate.len() as u64, c.submitted);
        }
        // Close, then let every in-flight unit finish: every admitted unit resolved once.
        for e in pump.step(PumpInput::Close, last) {
            if let Effect::Terminal { meta, .. } = e {
                prop_assert_eq!(fate.insert(meta.id, Fate::Resolved), Some(Fate::Waiting));
            }
        }
        for (seat, unit) in pump.in_flight() {
            prop_assert_eq!(fate.insert(unit, Fate::Resolved), Some(Fate::Granted));
            pump.step(PumpInput::SeatDone { seat, unit }, last);
        }
        prop_assert!(fate.values().all(|f| *f == Fate::Resolved));
        let c = pump.counts();
        prop_assert!(c.conserved() && c.resolved == c.submitted, "{}", c);
    }
}

#[test]
fn every_role_runs_on_its_own_seats() {
    let mut pump: HostPump<UnitId> = HostPump::new(layout(), PumpConfig::default());
    for (i, role) in ALL_ROLES.iter().enumerate() {
        let fx = pump.step(
            PumpInput::Enqueue {
                meta: UnitMeta {
                    id: i as u64,
                    role: *role,
                    key: Some(1),
                },
                payload: i as u64,
            },
            GuardSnapshot::nominal(4),
        );
        let granted: Vec<WorkerRole> = fx
            .iter()
            .filter_map(|e| {
                if let Effect::Grant { seat, .. } = e {
                    Some(seat.role)
                } else {
                    None
                }
            })
            .collect();
        assert_eq!(granted, vec![*role]);
    }
}
