//! The pump's rules when things go wrong: a lane death, close, the stall
//! check (and what is not a stall), wiring faults, refusals, huge config
//! values and a lost seat.

use super::*;

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

/// Solver seats 0 and 1 running units 1 and 3 (unit 2 queued for seat 0),
/// the resolve seat running unit 4 (unit 5 queued).
fn lost_seat_host() -> HostPump<UnitId> {
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
    p
}

/// Solver seat 0 dies mid-unit: the unit keyed to it resolves typed, later
/// ones keyed to it are refused, other keys still run.
fn solver_seat_lost(p: &mut HostPump<UnitId>) {
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
        enq(p, UnitMeta::keyed(6, Solver, 4), DEAD)[..],
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
        placement(&enq(p, UnitMeta::keyed(7, Solver, 3), DEAD)),
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
}

/// A stale report from the lost seat, or a second loss, changes nothing.
fn stale_reports_change_nothing(p: &mut HostPump<UnitId>) {
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
}

/// The only resolve seat is lost: its queued unit resolves, new ones are
/// refused.
fn only_resolve_seat_lost(p: &mut HostPump<UnitId>) {
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
        enq(p, UnitMeta::pooled(8, Resolve), NOMINAL)[..],
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

#[test]
fn a_lost_seat_leaves_the_layout_and_every_unit_that_needed_it_resolves_typed() {
    let mut p = lost_seat_host();
    solver_seat_lost(&mut p);
    stale_reports_change_nothing(&mut p);
    only_resolve_seat_lost(&mut p);
}
