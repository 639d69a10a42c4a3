//! The posture machine and its owner. Source: `DESIGN.md` §3 "Posture"; seed 000 §6.

use fleet::posture::{
    Posture, PostureCause, PostureMachine, PostureOwner, PosturePolicy, PosturePolicyPatch,
    PostureRetuneError, ThrottleSample,
};
use std::sync::Arc;

fn ev(events: u64) -> ThrottleSample {
    ThrottleSample {
        events,
        throttled_us: 0,
    }
}
const CLEAN: ThrottleSample = ThrottleSample {
    events: 0,
    throttled_us: 0,
};

#[test]
fn defaults_are_the_design_defaults() {
    let p = PosturePolicy::default();
    assert_eq!(p.cordon_enter_events, 2);
    assert_eq!(p.cordon_enter_window_ms, 1000);
    assert_eq!(p.cordon_duty_percent, 2.0);
    assert_eq!(p.cordon_duty_window_ms, 5000);
    assert_eq!(p.cordon_exit_clean_ms, 10_000);
    assert_eq!(p.cordon_sim_intake_floor, None);
    p.validate().unwrap();
}

#[test]
fn enters_on_an_event_burst() {
    let mut m = PostureMachine::new(PosturePolicy::default());
    assert_eq!(m.observe(ev(1), 100), None);
    let t = m.observe(ev(1), 900).expect("2 events within 1000 ms");
    assert_eq!(
        (t.from, t.to, t.at_ms),
        (Posture::Nominal, Posture::Cordoned, 900)
    );
    assert_eq!(
        t.cause,
        PostureCause::ThrottleEvents {
            events: 2,
            window_ms: 1000
        }
    );
    assert_eq!(m.posture(), Posture::Cordoned);
}

#[test]
fn events_further_apart_than_the_window_do_not_enter() {
    let mut m = PostureMachine::new(PosturePolicy::default());
    assert_eq!(m.observe(ev(1), 0), None);
    assert_eq!(
        m.observe(ev(1), 1000),
        None,
        "the first event left the 1000 ms window"
    );
    assert_eq!(m.posture(), Posture::Nominal);
}

#[test]
fn enters_on_duty() {
    let mut m = PostureMachine::new(PosturePolicy::default());
    // 100 ms throttled over a 5000 ms window is exactly 2.0 %: not above.
    assert_eq!(
        m.observe(
            ThrottleSample {
                events: 1,
                throttled_us: 100_000
            },
            1000
        ),
        None
    );
    let t = m
        .observe(
            ThrottleSample {
                events: 0,
                throttled_us: 10_000,
            },
            3000,
        )
        .expect("2.2 % > 2 %");
    match t.cause {
        PostureCause::ThrottleDuty {
            duty_percent,
            window_ms,
        } => {
            assert!((duty_percent - 2.2).abs() < 1e-9, "{duty_percent}");
            assert_eq!(window_ms, 5000);
        }
        other => panic!("expected duty, got {other:?}"),
    }
}

#[test]
fn no_exit_before_the_clean_window_and_exit_after() {
    let mut m = PostureMachine::new(PosturePolicy::default());
    m.observe(ev(2), 1000).expect("enter");
    for now in (2000..11_000).step_by(250) {
        assert_eq!(m.observe(CLEAN, now), None, "still cordoned at {now}");
    }
    let t = m.observe(CLEAN, 11_000).expect("10 s clean");
    assert_eq!((t.from, t.to), (Posture::Cordoned, Posture::Nominal));
    assert_eq!(t.cause, PostureCause::CleanWindow { clean_ms: 10_000 });
}

#[test]
fn a_throttle_event_restarts_the_clean_window() {
    let mut m = PostureMachine::new(PosturePolicy::default());
    m.observe(ev(2), 0).expect("enter");
    assert_eq!(
        m.observe(ev(1), 9_000),
        None,
        "one event does not exit and resets the clean time"
    );
    assert_eq!(m.observe(CLEAN, 10_500), None);
    assert_eq!(m.observe(CLEAN, 18_999), None);
    assert!(m.observe(CLEAN, 19_000).is_some());
}

#[test]
fn each_invalid_key_has_its_own_error_and_is_never_clamped() {
    let base = PosturePolicy::default();
    let cases: [(PosturePolicyPatch, PostureRetuneError); 8] = [
        (
            PosturePolicyPatch::default(),
            PostureRetuneError::EmptyPatch,
        ),
        (
            PosturePolicyPatch {
                cordon_enter_events: Some(0),
                ..Default::default()
            },
            PostureRetuneError::EnterEventsBelowOne { value: 0 },
        ),
        (
            PosturePolicyPatch {
                cordon_enter_window_ms: Some(0),
                ..Default::default()
            },
            PostureRetuneError::EnterWindowZero,
        ),
        (
            PosturePolicyPatch {
                cordon_duty_percent: Some(0.0),
                ..Default::default()
            },
            PostureRetuneError::DutyPercentOutOfRange { value: 0.0 },
        ),
        (
            PosturePolicyPatch {
                cordon_duty_percent: Some(100.5),
                ..Default::default()
            },
            PostureRetuneError::DutyPercentOutOfRange { value: 100.5 },
        ),
        (
            PosturePolicyPatch {
                cordon_duty_window_ms: Some(0),
                ..Default::default()
            },
            PostureRetuneError::DutyWindowZero,
        ),
        (
            PosturePolicyPatch {
                cordon_exit_clean_ms: Some(0),
                ..Default::default()
            },
            PostureRetuneError::ExitCleanZero,
        ),
        (
            PosturePolicyPatch {
                cordon_sim_intake_floor: Some(Some(0)),
                ..Default::default()
            },
            PostureRetuneError::SimIntakeFloorZero,
        ),
    ];
    let owner = PostureOwner::new(base, 4);
    for (patch, err) in cases {
        assert_eq!(owner.retune(patch), Err(err.clone()));
        assert_eq!(
            owner.policy(),
            base,
            "a rejected retune changes nothing ({err})"
        );
    }
    let nan = PosturePolicyPatch {
        cordon_duty_percent: Some(f64::NAN),
        ..Default::default()
    };
    assert!(matches!(
        owner.retune(nan),
        Err(PostureRetuneError::DutyPercentOutOfRange { .. })
    ));
}

#[test]
fn each_valid_key_retunes_alone() {
    let owner = PostureOwner::new(PosturePolicy::default(), 4);
    let p = owner
        .retune(PosturePolicyPatch {
            cordon_enter_events: Some(5),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(p.cordon_enter_events, 5);
    let p = owner
        .retune(PosturePolicyPatch {
            cordon_enter_window_ms: Some(2000),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        (p.cordon_enter_events, p.cordon_enter_window_ms),
        (5, 2000),
        "absent keys keep the live value"
    );
    let p = owner
        .retune(PosturePolicyPatch {
            cordon_duty_percent: Some(100.0),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(p.cordon_duty_percent, 100.0);
    let p = owner
        .retune(PosturePolicyPatch {
            cordon_duty_window_ms: Some(7000),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(p.cordon_duty_window_ms, 7000);
    let p = owner
        .retune(PosturePolicyPatch {
            cordon_exit_clean_ms: Some(3000),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(p.cordon_exit_clean_ms, 3000);
    let p = owner
        .retune(PosturePolicyPatch {
            cordon_sim_intake_floor: Some(Some(3)),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(p.cordon_sim_intake_floor, Some(3));
    let p = owner
        .retune(PosturePolicyPatch {
            cordon_sim_intake_floor: Some(None),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        p.cordon_sim_intake_floor, None,
        "null restores half the slot cap"
    );
    assert_eq!(owner.policy(), p);
}

#[test]
fn retune_keeps_state_and_window() {
    let owner = PostureOwner::new(PosturePolicy::default(), 4);
    assert_eq!(owner.observe(ev(1), 100), None);
    owner
        .retune(PosturePolicyPatch {
            cordon_enter_events: Some(3),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(owner.observe(ev(1), 200), None, "2 < 3 events");
    let t = owner
        .observe(ev(1), 300)
        .expect("the pre-retune event still counts");
    assert_eq!(
        t.cause,
        PostureCause::ThrottleEvents {
            events: 3,
            window_ms: 1000
        }
    );
    owner
        .retune(PosturePolicyPatch {
            cordon_exit_clean_ms: Some(2000),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        owner.posture(),
        Posture::Cordoned,
        "a retune never flips the posture"
    );
    assert_eq!(owner.observe(CLEAN, 2299), None);
    assert!(
        owner.observe(CLEAN, 2300).is_some(),
        "the new clean window applies to the running cordon"
    );
}

#[test]
fn lane_death_is_sticky() {
    let owner = PostureOwner::new(PosturePolicy::default(), 4);
    owner.observe(CLEAN, 50);
    let t = owner.mark_lane_death().expect("cordons");
    assert_eq!(
        (t.to, t.cause, t.at_ms),
        (Posture::Cordoned, PostureCause::LaneDeath, 50)
    );
    for now in (1000..3_600_000).step_by(60_000) {
        assert_eq!(owner.observe(CLEAN, now), None);
    }
    assert_eq!(owner.posture(), Posture::Cordoned);
    let g = owner.guard();
    assert!(g.cordoned && g.lane_dead);
    assert_eq!(owner.mark_lane_death(), None, "already cordoned");
    // A lane death during a throttle cordon keeps it past the clean window.
    let owner = PostureOwner::new(PosturePolicy::default(), 4);
    owner.observe(ev(2), 0).unwrap();
    assert_eq!(owner.mark_lane_death(), None);
    assert_eq!(owner.observe(CLEAN, 60_000), None);
    assert!(owner.guard().lane_dead);
}

#[test]
fn guard_floors_sim_intake_when_cordoned() {
    let owner = PostureOwner::new(PosturePolicy::default(), 4);
    assert_eq!(owner.guard(), fleet::GuardSnapshot::nominal(4));
    owner.observe(ev(2), 10).unwrap();
    assert_eq!(owner.guard().sim_intake_cap, 2, "half the slot cap");
    owner
        .retune(PosturePolicyPatch {
            cordon_sim_intake_floor: Some(Some(1)),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(owner.guard().sim_intake_cap, 1, "the configured floor");
    assert!(owner.guard().cordoned && !owner.guard().lane_dead);
    let one = PostureOwner::new(PosturePolicy::default(), 1);
    one.observe(ev(2), 0).unwrap();
    assert_eq!(one.guard().sim_intake_cap, 1, "never below one seat");
}

#[test]
fn seq_and_counters_follow_the_edges() {
    let owner = Arc::new(PostureOwner::new(PosturePolicy::default(), 4));
    assert_eq!(owner.seq(), 0);
    owner.observe(ev(2), 1000).unwrap();
    assert_eq!(owner.seq(), 1);
    owner.observe(CLEAN, 6000);
    assert_eq!(
        owner.counters().cordoned_dwell_ms,
        5000,
        "the open cordon counts up to the last observation"
    );
    owner.observe(CLEAN, 11_000).unwrap();
    assert_eq!(owner.seq(), 2);
    owner.observe(ev(3), 20_000).unwrap();
    owner.note_intake_suppressed();
    owner.note_intake_suppressed();
    owner.observe(CLEAN, 21_000);
    let c = owner.counters();
    assert_eq!((c.enters, c.exits, c.intake_suppressions), (2, 1, 2));
    assert_eq!(c.cordoned_dwell_ms, 10_000 + 1_000);
    assert_eq!(owner.seq(), 3);
}

#[test]
fn owner_is_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<PostureOwner>();
    let owner = Arc::new(PostureOwner::new(PosturePolicy::default(), 4));
    let hs: Vec<_> = (0..4u64)
        .map(|i| {
            let o = Arc::clone(&owner);
            std::thread::spawn(move || {
                for k in 0..100 {
                    o.observe(CLEAN, i * 1000 + k);
                    let _ = o.guard();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(owner.posture(), Posture::Nominal);
}

#[test]
fn patch_wire_shape() {
    let p: PosturePolicyPatch =
        serde_json::from_str(r#"{"cordon_sim_intake_floor": null}"#).unwrap();
    assert_eq!(p.cordon_sim_intake_floor, Some(None));
    let p: PosturePolicyPatch = serde_json::from_str(r#"{"cordon_enter_events": 4}"#).unwrap();
    assert_eq!(
        (p.cordon_enter_events, p.cordon_sim_intake_floor),
        (Some(4), None)
    );
    let e = serde_json::from_str::<PosturePolicyPatch>(r#"{"cordon_enter_evnts": 4}"#).unwrap_err();
    assert!(e.to_string().contains("cordon_enter_evnts"), "{e}");
}

#[test]
fn lane_death_at_a_given_time_stamps_the_edge_and_the_dwell() {
    let owner = PostureOwner::new(PosturePolicy::default(), 4);
    let t = owner.mark_lane_death_at(7_000).expect("cordons");
    assert_eq!((t.at_ms, t.cause), (7_000, PostureCause::LaneDeath));
    owner.observe(CLEAN, 9_000);
    assert_eq!(owner.counters().cordoned_dwell_ms, 2_000);
    assert_eq!(owner.seq(), 1);
}

#[test]
fn a_lane_death_is_reported_as_a_degradation_with_its_first_cause() {
    use fleet::posture::LaneDeathCause;
    use fleet::WorkerRole;
    let owner = PostureOwner::new(PosturePolicy::default(), 4);
    assert_eq!(owner.degraded(), None, "healthy");
    owner.observe(CLEAN, 500);
    // An unrecorded latch is replaced by the first recorded cause, which then sticks.
    owner.mark_lane_death();
    let panicked = LaneDeathCause::UnitPanicked {
        role: WorkerRole::Solver,
        seat: 3,
        message: "boom".into(),
    };
    owner.mark_lane_death_because(panicked.clone());
    owner.mark_lane_death_because(LaneDeathCause::SeatLost {
        role: WorkerRole::SimDriver,
        seat: 0,
    });
    let d = owner.degraded().expect("degraded after a lane death");
    assert_eq!(d.cause, panicked);
    assert_eq!(d.since_ms, 500);
    assert_eq!(
        d.held_roles,
        vec![
            WorkerRole::PoolStateUpdater,
            WorkerRole::Registrar,
            WorkerRole::Verifier
        ]
    );
    assert!(d.action.contains("restart"), "{}", d.action);
    assert_eq!(owner.posture(), Posture::Cordoned);
    let json = serde_json::to_value(&d).unwrap();
    assert_eq!(json["cause"]["kind"], "unit_panicked");
    assert_eq!(json["cause"]["message"], "boom");
}
