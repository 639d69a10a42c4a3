//! Shutdown on both bindings: units still running at close are drained and
//! counted before the report is taken, and a unit that never returns is
//! named (with its seat and thread) when the shutdown deadline passes,
//! instead of hanging the caller.

use crate::common::plan;
use fleet::plan::{Binding, Profile};
use fleet::WorkerRole::Resolve;
use fleet_bindings::{boot, unit_body, BootOptions, ShutdownError};
use std::time::Duration;

/// No wait in this test may hang: a missing answer fails it instead.
const NO_HANG: Duration = Duration::from_secs(30);

fn both() -> [(f64, Profile, Binding); 2] {
    [
        (8.0, Profile::Pinned, Binding::Pinned),
        (4.0, Profile::Auto, Binding::Serial),
    ]
}

#[test]
fn units_running_at_close_are_counted_in_the_shutdown_report() {
    for (quota, profile, binding) in both() {
        let plan = plan(quota, profile);
        let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
        let h = fleet.handle();
        let mut receipts = Vec::new();
        for _ in 0..5 {
            let r = h
                .submit(Resolve, None, unit_body(|_| async { Box::new(1u8) as _ }))
                .unwrap();
            assert!(r.wait_timeout(NO_HANG).expect("resolved").is_ok());
        }
        // One unit is still running when the host closes; it finishes later.
        let (go_tx, go_rx) = crossbeam_channel::bounded::<()>(1);
        let (started_tx, started_rx) = crossbeam_channel::bounded::<()>(1);
        receipts.push(
            h.submit(
                Resolve,
                None,
                unit_body(move |_| async move {
                    let _ = started_tx.send(());
                    let _ = go_rx.recv_timeout(NO_HANG);
                    Box::new(2u8) as _
                }),
            )
            .unwrap(),
        );
        started_rx
            .recv_timeout(NO_HANG)
            .expect("the late unit started");
        drop(h);
        let (tx, rx) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || {
            let _ = tx.send(fleet.shutdown());
        });
        // Give the close a head start over the late unit (the report must
        // count it either way).
        std::thread::sleep(Duration::from_millis(50));
        go_tx.send(()).unwrap();
        let report = rx
            .recv_timeout(NO_HANG)
            .expect("shutdown returns")
            .expect("clean shutdown");
        for r in receipts {
            assert!(
                r.wait_timeout(NO_HANG).expect("resolved").is_ok(),
                "{binding}"
            );
        }
        let c = report.pump;
        assert!(c.conserved(), "{binding}: {c}");
        assert_eq!(
            (c.submitted, c.in_flight, c.resolved),
            (6, 0, 6),
            "{binding}: {c}"
        );
    }
}

#[test]
fn a_unit_that_never_returns_is_named_when_the_shutdown_deadline_passes() {
    for (quota, profile, binding) in both() {
        let plan = plan(quota, profile);
        let mut opts = BootOptions::for_plan(&plan);
        opts.shutdown_deadline = Duration::from_millis(100);
        let fleet = boot(&plan, opts).expect("boot");
        let h = fleet.handle();
        let (go_tx, go_rx) = crossbeam_channel::bounded::<()>(1);
        let (started_tx, started_rx) = crossbeam_channel::bounded::<()>(1);
        let hung = h
            .submit(
                Resolve,
                None,
                unit_body(move |_| async move {
                    let _ = started_tx.send(());
                    // Blocks its thread (the serial one too) until released.
                    let _ = go_rx.recv_timeout(NO_HANG);
                    Box::new(0u8) as _
                }),
            )
            .unwrap();
        started_rx.recv_timeout(NO_HANG).expect("the unit started");
        drop(h);
        let (tx, rx) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || {
            let _ = tx.send(fleet.shutdown());
        });
        let result = rx
            .recv_timeout(NO_HANG)
            .expect("shutdown returns by its deadline");
        match result {
            Err(ShutdownError::Stuck {
                units,
                threads,
                pump,
                ..
            }) => {
                assert_eq!(units.len(), 1, "{binding}: {units:?}");
                assert_eq!(units[0].0.role, Resolve, "{binding}");
                assert!(!threads.is_empty(), "{binding}: the unit's thread is named");
                assert_eq!(pump.map(|c| c.in_flight), Some(1), "{binding}");
            }
            other => panic!("{binding}: expected Stuck, got {other:?}"),
        }
        // Release the detached thread; its receipt still resolves.
        go_tx.send(()).unwrap();
        assert!(hung.wait_timeout(NO_HANG).is_some(), "{binding}");
    }
}
