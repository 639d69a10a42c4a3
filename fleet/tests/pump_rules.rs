//! The pump's rules, one scenario each: grant order, full queue, start after
//! a cordon flip, faulted and closed hosts, the backlog gauge, huge config
//! values (`DESIGN.md` §3 "Lanes, hosts and the pump", "Priority").

mod pump_support;

use fleet::admission::AdmissionError;
use fleet::guard::GuardSnapshot;
use fleet::pump::{
    Effect, FailureKind, HostLayout, HostPump, Placement, Progress, PumpConfig, PumpInput,
};
use fleet::receipt::TerminalReason;
use fleet::slot::SlotState;
use fleet::unit::{UnitId, UnitMeta};
use fleet::WorkerRole::{self, *};
use pump_support::{seat, CORDONED, DEAD, NOMINAL};

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

#[test]
fn lane_death_faults_the_host_held_units_get_terminal_receipts_in_flight_finish() {
    let mut p = HostPump::new(
        layout(vec![(Registrar, 1), (Solver, 1)], 8, 1),
        PumpConfig::default(),
    );
    enq(&mut p, UnitMeta::pooled(1, Registrar), NOMINAL);
    enq(&mut p, UnitMeta::pooled(2, Registrar), CORDONED);
    enq(&mut p, UnitMeta::pooled(3, Registrar), CORDONED);
    let fx = p.step(PumpInput::BackstopTick, DEAD);
    let terminal: Vec<_> = fx
        .iter()
        .filter_map(|e| {
            if let Effect::Terminal { meta, reason, .. } = e {
                Some((meta.id, reason.clone()))
            } else {
                None
            }
        })
        .collect();
    assert_eq!(
        terminal,
        vec![
            (2, TerminalReason::LaneDeath),
            (3, TerminalReason::LaneDeath)
        ]
    );
    assert!(fx.iter().any(|e| matches!(e, Effect::DisarmBackstop)));
    assert_eq!(p.progress(), Progress::Faulted);
    // The in-flight unit finishes; never-held roles still run; held ones are refused typed.
    p.step(
        PumpInput::SeatDone {
            seat: seat(Registrar, 0),
            unit: 1,
        },
        DEAD,
    );
    assert_eq!(
        grants(&enq(&mut p, UnitMeta::keyed(4, Solver, 0), DEAD)),
        vec![(4, 0)]
    );
    let fx = enq(&mut p, UnitMeta::pooled(5, Registrar), DEAD);
    assert!(matches!(
        fx[..],
        [Effect::Refused {
            error: AdmissionError::LaneDead { role: Registrar },
            ..
        }]
    ));
    // Sticky: a later nominal read does not clear it.
    p.step(PumpInput::BackstopTick, NOMINAL);
    assert_eq!(p.progress(), Progress::Faulted);
    assert!(p.counts().conserved());
}

#[test]
fn close_resolves_held_and_queued_units_and_refuses_new_ones() {
    let mut p = HostPump::new(layout(vec![(Registrar, 1)], 8, 1), PumpConfig::default());
    enq(&mut p, UnitMeta::pooled(1, Registrar), NOMINAL);
    enq(&mut p, UnitMeta::pooled(2, Registrar), NOMINAL);
    enq(&mut p, UnitMeta::pooled(3, Registrar), CORDONED);
    let fx = p.step(PumpInput::Close, CORDONED);
    let closed = fx
        .iter()
        .filter(|e| {
            matches!(
                e,
                Effect::Terminal {
                    reason: TerminalReason::HostClosed,
                    ..
                }
            )
        })
        .count();
    assert_eq!(closed, 2);
    assert_eq!(p.progress(), Progress::Closed);
    assert!(!p.backstop_armed());
    let fx = enq(&mut p, UnitMeta::pooled(4, Registrar), NOMINAL);
    assert!(matches!(
        fx[..],
        [Effect::Refused {
            error: AdmissionError::HostClosed,
            ..
        }]
    ));
    p.step(
        PumpInput::SeatDone {
            seat: seat(Registrar, 0),
            unit: 1,
        },
        NOMINAL,
    );
    let c = p.counts();
    assert!(c.conserved() && c.resolved == 3 && c.in_flight == 0, "{c}");
}

#[test]
fn k_ticks_of_admitted_work_beside_an_idle_seat_fail_loudly_naming_the_host_and_counts() {
    // A dispatcher fault: the registrar seat stays Idle while its unit waits.
    let cfg = PumpConfig {
        stall_ticks: 3,
        withhold_grants: Some(Registrar),
        ..PumpConfig::default()
    };
    let mut p = HostPump::new(layout(vec![(Registrar, 1)], 1, 1), cfg);
    enq(&mut p, UnitMeta::pooled(1, Registrar), NOMINAL); // queued, never granted
    enq(&mut p, UnitMeta::pooled(2, Registrar), CORDONED); // held: the backstop ticks
    let mut loud = Vec::new();
    for _ in 0..4 {
        for e in p.step(PumpInput::BackstopTick, NOMINAL) {
            if let Effect::LoudFailure(f) = e {
                loud.push(f);
            }
        }
    }
    assert_eq!(loud.len(), 1);
    assert_eq!(loud[0].host, "test-host");
    assert_eq!(loud[0].kind, FailureKind::Stalled { ticks: 3 });
    assert_eq!(
        (
            loud[0].counts.in_flight,
            loud[0].counts.queued,
            loud[0].counts.backlog
        ),
        (0, 1, 1)
    );
    assert!(loud[0].to_string().contains("test-host"));
    assert!(p.has_failed() && !p.backstop_armed());
}

#[test]
fn a_long_unit_under_a_full_queue_is_not_a_stall() {
    let cfg = PumpConfig {
        stall_ticks: 3,
        ..PumpConfig::default()
    };
    let mut p = HostPump::new(layout(vec![(Registrar, 1)], 1, 1), cfg);
    enq(&mut p, UnitMeta::pooled(1, Registrar), NOMINAL); // running: a long unit
    enq(&mut p, UnitMeta::pooled(2, Registrar), NOMINAL); // queued: queue full
    enq(&mut p, UnitMeta::pooled(3, Registrar), CORDONED); // held
                                                           // Many more than K ticks while the one seat is busy: healthy, no abort.
    for _ in 0..100 {
        let fx = p.step(PumpInput::BackstopTick, NOMINAL);
        assert!(
            !fx.iter().any(|e| matches!(e, Effect::LoudFailure(_))),
            "a busy seat is not a stall"
        );
    }
    assert!(!p.has_failed());
    assert_eq!(p.stall_ticks(), 0);
    assert!(
        p.backstop_armed(),
        "the held unit still waits for queue room"
    );
    // The long unit finishes: the queued one starts, the held one moves up.
    let fx = p.step(
        PumpInput::SeatDone {
            seat: seat(Registrar, 0),
            unit: 1,
        },
        NOMINAL,
    );
    assert_eq!(grants(&fx), vec![(2, 0)]);
    assert_eq!(p.progress(), Progress::Idle);
    let counts = p.counts();
    assert_eq!((counts.in_flight, counts.queued, counts.backlog), (1, 1, 0));
    assert!(counts.conserved());
}

#[test]
fn an_unknown_completion_is_a_loud_wiring_fault() {
    let mut p = HostPump::<UnitId>::new(layout(vec![(Resolve, 1)], 1, 1), PumpConfig::default());
    let fx = p.step(
        PumpInput::SeatDone {
            seat: seat(Resolve, 0),
            unit: 9,
        },
        NOMINAL,
    );
    assert!(
        matches!(fx[..], [Effect::LoudFailure(ref f)] if matches!(f.kind, FailureKind::UnknownCompletion { unit: 9, .. }))
    );
}

#[test]
fn refusals_name_missing_seats_and_missing_keys() {
    let mut p = HostPump::new(layout(vec![(Solver, 1)], 1, 1), PumpConfig::default());
    assert!(matches!(
        enq(&mut p, UnitMeta::pooled(1, Resolve), NOMINAL)[..],
        [Effect::Refused {
            error: AdmissionError::NoSeats { role: Resolve },
            ..
        }]
    ));
    assert!(matches!(
        enq(&mut p, UnitMeta::pooled(2, Solver), NOMINAL)[..],
        [Effect::Refused {
            error: AdmissionError::MissingKey { role: Solver },
            ..
        }]
    ));
    assert_eq!(p.counts().submitted, 0);
}

#[test]
fn huge_config_values_are_carried_without_overflow() {
    let cfg = PumpConfig {
        backstop_interval_ms: u64::MAX,
        stall_ticks: u32::MAX,
        ..PumpConfig::default()
    };
    let mut p = HostPump::new(layout(vec![(Registrar, 1)], u32::MAX, u32::MAX), cfg);
    let fx = enq(&mut p, UnitMeta::pooled(1, Registrar), CORDONED);
    assert!(fx
        .iter()
        .any(|e| matches!(e, Effect::ArmBackstop { after_ms: u64::MAX })));
    for _ in 0..100 {
        p.step(PumpInput::BackstopTick, CORDONED);
    }
    assert!(!p.has_failed());
}

#[test]
fn a_lost_seat_leaves_the_layout_and_every_unit_that_needed_it_resolves_typed() {
    let mut p = HostPump::new(
        layout(vec![(Solver, 2), (Resolve, 1)], 4, 2),
        PumpConfig::default(),
    );
    assert_eq!(
        grants(&enq(&mut p, UnitMeta::keyed(1, Solver, 0), NOMINAL)),
        vec![(1, 0)]
    );
    assert_eq!(
        placement(&enq(&mut p, UnitMeta::keyed(2, Solver, 2), NOMINAL)),
        Some(Placement::Queued)
    );
    assert_eq!(
        grants(&enq(&mut p, UnitMeta::keyed(3, Solver, 1), NOMINAL)),
        vec![(3, 1)]
    );
    assert_eq!(
        grants(&enq(&mut p, UnitMeta::pooled(4, Resolve), NOMINAL)),
        vec![(4, 0)]
    );
    assert_eq!(
        placement(&enq(&mut p, UnitMeta::pooled(5, Resolve), NOMINAL)),
        Some(Placement::Queued)
    );

    // Solver seat 0 dies mid-unit; the binding latched the lane death first.
    let fx = p.step(
        PumpInput::SeatLost {
            seat: seat(Solver, 0),
        },
        DEAD,
    );
    assert!(fx.iter().any(
        |e| matches!(e, Effect::SeatRetired { seat: s, unit: Some(1) } if *s == seat(Solver, 0))
    ));
    let terminal: Vec<_> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::Terminal { meta, reason, .. } => Some((meta.id, reason.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        terminal,
        vec![(
            2,
            TerminalReason::SeatLost {
                role: Solver,
                index: 0
            }
        )],
        "the unit keyed to the lost seat resolves typed"
    );
    assert_eq!(p.lost_seats(), vec![seat(Solver, 0)]);
    assert_eq!(p.progress(), Progress::Faulted);
    assert!(p.counts().conserved(), "{}", p.counts());
    // A later unit keyed to the lost seat is refused with its payload; another key still runs.
    assert!(matches!(
        enq(&mut p, UnitMeta::keyed(6, Solver, 4), DEAD)[..],
        [Effect::Refused {
            error: AdmissionError::SeatLost {
                role: Solver,
                index: 0
            },
            payload: 6,
            ..
        }]
    ));
    assert_eq!(
        placement(&enq(&mut p, UnitMeta::keyed(7, Solver, 3), DEAD)),
        Some(Placement::Queued)
    );
    p.step(
        PumpInput::SeatDone {
            seat: seat(Solver, 1),
            unit: 3,
        },
        DEAD,
    );
    assert_eq!(
        p.in_flight(),
        vec![(seat(Solver, 1), 7), (seat(Resolve, 0), 4)]
    );
    // A stale report from the lost seat, or a second loss, changes nothing.
    assert!(p
        .step(
            PumpInput::SeatDone {
                seat: seat(Solver, 0),
                unit: 1
            },
            DEAD
        )
        .is_empty());
    assert!(p
        .step(
            PumpInput::SeatLost {
                seat: seat(Solver, 0)
            },
            DEAD
        )
        .is_empty());
    assert!(p
        .step(
            PumpInput::SeatLost {
                seat: seat(Merge, 9)
            },
            DEAD
        )
        .is_empty());
    assert!(!p.has_failed());

    // The only resolve seat is lost: its queued unit resolves, new ones are refused.
    let fx = p.step(
        PumpInput::SeatLost {
            seat: seat(Resolve, 0),
        },
        DEAD,
    );
    assert!(fx.iter().any(|e| matches!(
        e,
        Effect::Terminal { meta, reason: TerminalReason::SeatLost { role: Resolve, index: 0 }, .. } if meta.id == 5
    )));
    assert!(matches!(
        enq(&mut p, UnitMeta::pooled(8, Resolve), NOMINAL)[..],
        [Effect::Refused {
            error: AdmissionError::SeatLost {
                role: Resolve,
                index: 0
            },
            ..
        }]
    ));
    let c = p.counts();
    assert!(c.conserved(), "{c}");
    assert_eq!((c.in_flight, c.queued, c.backlog), (1, 0, 0));
    assert_eq!(p.lost_seats(), vec![seat(Solver, 0), seat(Resolve, 0)]);
}
