//! A seat whose thread dies outside its unit (the unit's panic payload has a
//! `Drop` that panics, and the settle drops it outside `catch_unwind`), on
//! both bindings: the seat leaves the layout, every unit keyed to it gets a
//! typed terminal answer, the lane-death latch and its cordon fire, the
//! census and the shutdown report show it, and nothing hangs.

use crate::common::plan;
use fleet::admission::AdmissionError;
use fleet::plan::{Binding, Profile};
use fleet::posture::Posture;
use fleet::pump::SeatId;
use fleet::receipt::TerminalReason;
use fleet::WorkerRole::Solver;
use fleet_bindings::{boot, unit_body, BootOptions, Fleet, FleetHandle, SubmitError};
use std::time::Duration;

/// No wait in this test may hang: a missing answer fails it instead.
const NO_HANG: Duration = Duration::from_secs(30);

/// A panic payload whose `Drop` panics.
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("the panic payload's drop panics");
    }
}

/// After the loss: a unit keyed to the lost seat comes back with its body;
/// other seats still run.
fn later_units(h: &FleetHandle, binding: Binding) {
    // A later unit keyed to the lost seat comes back with its body.
    match h.submit(
        Solver,
        Some(0),
        unit_body(|_| async { Box::new(2u32) as _ }),
    ) {
        Err(SubmitError::Refused {
            error:
                AdmissionError::SeatLost {
                    role: Solver,
                    index: 0,
                },
            ..
        }) => {}
        other => panic!("{binding}: expected a SeatLost refusal, got {other:?}"),
    }
    // Other seats still run.
    let alive = h
        .submit(
            Solver,
            Some(1),
            unit_body(|_| async { Box::new(3u32) as _ }),
        )
        .expect("a live seat admits");
    let value = alive.wait_timeout(NO_HANG).expect("a live seat answers");
    assert_eq!(value.unwrap().downcast_ref::<u32>(), Some(&3), "{binding}");
}

/// The lane-death latch and its cordon fired; the status and the census
/// show the lost seat.
fn check_latched(fleet: &Fleet, binding: Binding) {
    // The lane-death latch and its cordon fired; the census shows the seat.
    assert_eq!(fleet.posture().posture(), Posture::Cordoned, "{binding}");
    assert!(fleet.posture().guard().lane_dead, "{binding}");
    let seat0 = SeatId {
        role: Solver,
        index: 0,
    };
    assert_eq!(fleet.lost_seats(), vec![seat0], "{binding}");
    let degraded = fleet.status(&fleet::quota::detect_live()).degraded;
    assert_eq!(
        degraded.map(|d| d.cause),
        Some(fleet::posture::LaneDeathCause::SeatLost {
            role: Solver,
            seat: 0
        }),
        "{binding}"
    );
    let lost_rows: Vec<_> = fleet
        .census()
        .into_iter()
        .filter(|r| r.lost)
        .map(|r| r.name)
        .collect();
    assert_eq!(lost_rows, vec!["solver-0".to_string()], "{binding}");
}

#[test]
fn a_seat_lost_outside_its_unit_resolves_everything_keyed_to_it() {
    for (quota, profile, binding) in [
        (8.0, Profile::Pinned, Binding::Pinned),
        (4.0, Profile::Auto, Binding::Serial),
    ] {
        let plan = plan(quota, profile);
        let solver_seats = plan
            .seat_layout()
            .seats
            .iter()
            .filter(|s| s.role == Solver)
            .count() as u32;
        assert!(solver_seats >= 2, "{binding}: two solver seats needed");
        let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
        let h = fleet.handle();

        // The dying unit waits for a go, so a second unit of the same seat queues behind it.
        let (go_tx, go_rx) = crossbeam_channel::bounded::<()>(1);
        let dying = h
            .submit(
                Solver,
                Some(0),
                unit_body(move |_| async move {
                    let _ = go_rx.recv_timeout(NO_HANG);
                    std::panic::panic_any(PanicOnDrop)
                }),
            )
            .expect("admitted");
        let behind = h
            .submit(
                Solver,
                Some(solver_seats),
                unit_body(|_| async { Box::new(1u32) as _ }),
            )
            .expect("admitted behind the dying unit");
        go_tx.send(()).unwrap();

        let lost = TerminalReason::SeatLost {
            role: Solver,
            index: 0,
        };
        let dying = dying
            .wait_timeout(NO_HANG)
            .expect("the dying unit resolves");
        assert_eq!(dying.unwrap_err(), lost, "{binding}");
        let behind = behind
            .wait_timeout(NO_HANG)
            .expect("the unit keyed to the lost seat resolves");
        assert_eq!(behind.unwrap_err(), lost, "{binding}");

        later_units(&h, binding);
        check_latched(&fleet, binding);
        let seat0 = SeatId {
            role: Solver,
            index: 0,
        };
        drop(h);
        let (tx, rx) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || {
            let _ = tx.send(fleet.shutdown());
        });
        let report = rx
            .recv_timeout(NO_HANG)
            .expect("shutdown returns")
            .expect("a lost seat is accounted for, not a binding bug");
        assert_eq!(report.lost_seats, vec![seat0], "{binding}");
        assert!(report.pump.conserved(), "{binding}: {}", report.pump);
        assert_eq!(report.pump.in_flight, 0, "{binding}: {}", report.pump);
        if binding == Binding::Pinned {
            assert_eq!(report.lost_threads.len(), 1, "{binding}");
        }
    }
}
