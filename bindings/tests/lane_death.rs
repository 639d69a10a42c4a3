//! Lane death and the exactness fuse, on both bindings.
//!
//! A unit that panics mid-bin: exactly the paths it still owed become
//! `Failed(LaneDeath)`, its receipt resolves terminally, the posture is
//! cordoned with the sticky lane-death latch, later cycles still complete
//! and the ledger stays exact; the process lives. A double-emitting bin and a
//! path no bin owns trip the fuse, observed through its hook.

use crate::common::*;
use fleet::ledger::{FuseTrip, SharedLedger};
use fleet::plan::{Binding, Profile};
use fleet::posture::{LaneDeathCause, Posture};
use fleet::receipt::TerminalReason;
use fleet::{FailReason, PathOutcome};
use fleet_bindings::{boot, BootOptions, FleetHandle};

fn both() -> [(f64, Profile, Binding); 2] {
    [
        (8.0, Profile::Pinned, Binding::Pinned),
        (4.0, Profile::Auto, Binding::Serial),
    ]
}

#[test]
fn a_walk_that_panics_mid_bin_fails_exactly_its_owed_paths() {
    for (quota, profile, binding) in both() {
        let plan = plan(quota, profile);
        let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
        let (fuse, trips) = recording_fuse();
        let ledger = SharedLedger::new(fuse);
        let h = fleet.handle();
        let first = run_cycle(&h, &ledger, 1, CycleOpts::default());
        assert!(first.merged.is_ok());
        assert_eq!(fleet.posture().posture(), Posture::Nominal);
        let quota = fleet::quota::detect_live();
        assert!(
            fleet.status(&quota).degraded.is_none(),
            "{binding}: healthy"
        );

        dying_bin_cycle(&h, &ledger, binding);
        check_lane_death_degradation(&fleet, &quota, binding);
        later_cycles_complete(&h, &ledger, binding);
        assert!(
            trips.lock().unwrap().is_empty(),
            "{binding}: {:?}",
            trips.lock().unwrap()
        );
        assert_eq!(fleet.posture().posture(), Posture::Cordoned);
        drop(h);
        fleet.shutdown().expect("clean shutdown after a lane death");
    }
}

/// Cycle 2: bin 3 delivers one path, then panics; exactly the paths it
/// still owed fail, the one it delivered stands, the healthy bins are
/// exact, and the dying bin's receipt says it panicked.
fn dying_bin_cycle(h: &FleetHandle, ledger: &SharedLedger, binding: Binding) {
    // Cycle 2: bin 3 delivers one path, then panics.
    let c = 2;
    let dying_bin = 3;
    let owned: Vec<u32> = (0..path_count(c))
        .filter(|p| bin_of(*p) == dying_bin)
        .collect();
    assert!(owned.len() >= 2);
    let opts = CycleOpts {
        fault: Some((dying_bin, Fault::PanicAfter(1))),
        ..CycleOpts::default()
    };
    let run = run_cycle(h, ledger, c, opts);
    let rec = run
        .merged
        .expect("the ledger stays exact through a lane death");
    assert_eq!(rec.tally.received(), rec.tally.submitted);
    let death = PathOutcome::Failed {
        reason: FailReason::LaneDeath,
    };
    let dead: Vec<u32> = rec
        .outcomes
        .iter()
        .filter(|(_, o)| **o == death)
        .map(|(p, _)| *p)
        .collect();
    assert_eq!(
        dead,
        owned[1..].to_vec(),
        "{binding}: exactly the owed paths"
    );
    let delivered = rec.outcomes[&owned[0]];
    assert_eq!(
        delivered,
        expected(c, owned[0]),
        "{binding}: the path delivered before the panic stands"
    );
    for (p, o) in &rec.outcomes {
        if bin_of(*p) != dying_bin {
            assert_eq!(*o, expected(c, *p), "{binding}: path {p} of a healthy bin");
        }
    }
    match &run.bins[&dying_bin] {
        Err(TerminalReason::Panicked { message }) => {
            assert!(message.contains("synthetic walk death"))
        }
        other => panic!("{binding}: dying bin's receipt: {other:?}"),
    }
}

/// A sticky cordon with the lane-death latch, visible as a degradation in
/// the status (and its JSON).
fn check_lane_death_degradation(
    fleet: &fleet_bindings::Fleet,
    quota: &fleet::quota::QuotaReport,
    binding: Binding,
) {
    // Sticky cordon with the lane-death latch, visible as a degradation.
    assert_eq!(fleet.posture().posture(), Posture::Cordoned, "{binding}");
    assert!(fleet.posture().guard().lane_dead, "{binding}");
    let status = fleet.status(quota);
    match status.degraded.as_ref().map(|d| &d.cause) {
        Some(LaneDeathCause::UnitPanicked { role, message, .. }) => {
            assert_eq!(*role, fleet::WorkerRole::Solver, "{binding}");
            assert!(
                message.contains("synthetic walk death"),
                "{binding}: {message}"
            );
        }
        other => panic!("{binding}: expected a unit-panic degradation, got {other:?}"),
    }
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(
        json["degraded"]["cause"]["kind"], "unit_panicked",
        "{binding}"
    );
}

/// Later cycles complete (without deferrable intake, which the cordon now
/// holds and the faulted host resolves terminally); the submitter is never
/// held.
fn later_cycles_complete(h: &FleetHandle, ledger: &SharedLedger, binding: Binding) {
    // Later cycles complete (without deferrable intake, which the cordon
    // now holds and the faulted host resolves terminally).
    for c in 3..=6 {
        let run = run_cycle(
            h,
            ledger,
            c,
            CycleOpts {
                background: false,
                ..CycleOpts::default()
            },
        );
        let rec = run.merged.expect("later cycles exact");
        for (p, o) in &rec.outcomes {
            assert_eq!(*o, expected(c, *p), "{binding}: cycle {c} path {p}");
        }
    }
    let held = run_cycle(h, ledger, 7, CycleOpts::default());
    assert!(held.merged.is_ok());
    for role in ["pool_state_updater", "registrar", "verifier"] {
        assert!(
            held.side[role].is_err(),
            "{binding}: {role} is held and resolved terminally: {:?}",
            held.side[role]
        );
    }
    assert!(
        held.side["submitter"].is_ok(),
        "{binding}: submitter is never held"
    );
}

/// The outcome a healthy walk gives a path.
fn expected(c: u64, p: u32) -> PathOutcome {
    solve(c, p, needs_sim(c, p) && sim_reverts(c, p))
}

#[test]
fn the_fuse_trips_on_a_duplicate_and_on_a_shortfall() {
    for (quota, profile, binding) in both() {
        let plan = plan(quota, profile);
        let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
        let (fuse, trips) = recording_fuse();
        let ledger = SharedLedger::new(fuse);
        let h = fleet.handle();

        let dup = CycleOpts {
            fault: Some((2, Fault::DoubleEmit)),
            background: false,
            ..CycleOpts::default()
        };
        let run = run_cycle(&h, &ledger, 1, dup);
        match run.merged {
            Err(FuseTrip::Duplicate {
                cycle: 1, path: 2, ..
            }) => {}
            other => panic!("{binding}: expected a duplicate trip, got {other:?}"),
        }
        assert_eq!(
            trips.lock().unwrap().len(),
            1,
            "{binding}: the hook saw the trip"
        );

        let short = CycleOpts {
            orphan: Some(4),
            background: false,
            ..CycleOpts::default()
        };
        let run = run_cycle(&h, &ledger, 2, short);
        match &run.merged {
            Err(FuseTrip::Shortfall {
                cycle: 2, missing, ..
            }) => assert_eq!(missing, &vec![4]),
            other => panic!("{binding}: expected a shortfall trip, got {other:?}"),
        }
        assert_eq!(trips.lock().unwrap().len(), 2, "{binding}");
        assert!(matches!(
            trips.lock().unwrap()[1],
            FuseTrip::Shortfall { .. }
        ));

        // The fleet itself is fine: the next cycle is exact.
        assert!(run_cycle(&h, &ledger, 3, CycleOpts::default())
            .merged
            .is_ok());
        assert_eq!(trips.lock().unwrap().len(), 2);
        drop(h);
        fleet.shutdown().expect("clean shutdown");
    }
}
