//! `FleetHandle::backlog`: where a host's unfinished units wait, on both
//! bindings. A cordon holds a deferrable unit (held 1), the cordon lifts and
//! it runs (running 1 while its body blocks), and once it has finished the
//! host is idle: the moment a host may hand its allocator's free memory back.

use std::sync::mpsc;
use std::time::Duration;

use crate::common::*;
use fleet::plan::{Binding, Profile};
use fleet::posture::{Posture, ThrottleSample};
use fleet::WorkerRole;
use fleet_bindings::{boot, unit_body, Backlog, BootOptions};

#[test]
fn a_cordoned_deferrable_unit_is_held_then_runs_then_the_host_is_idle() {
    for (quota, profile, binding) in [
        (8.0, Profile::Pinned, Binding::Pinned),
        (2.0, Profile::Auto, Binding::Serial),
    ] {
        let plan = plan(quota, profile);
        let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
        let handle = fleet.handle();
        assert_eq!(handle.binding(), binding);
        assert!(
            handle.backlog().is_idle(),
            "{binding}: a fresh host is idle"
        );

        let owner = fleet.posture();
        let hit = ThrottleSample {
            events: 1,
            throttled_us: 100,
        };
        owner.observe(hit, 0);
        owner
            .observe(hit, 10)
            .expect("two throttle events in 1 s cordon");
        fleet.waker().notify(owner.seq());
        assert_eq!(owner.posture(), Posture::Cordoned);

        let (started_tx, started) = mpsc::channel::<()>();
        let (release, gate) = mpsc::channel::<()>();
        let body = unit_body(move |_| async move {
            let _ = started_tx.send(());
            let _ = gate.recv_timeout(Duration::from_secs(10));
            Box::new(1u8) as _
        });
        let receipt = handle
            .submit(WorkerRole::PoolStateUpdater, None, body)
            .expect("a cordon holds a deferrable unit, never refuses it");
        assert_eq!(
            handle.backlog(),
            Backlog {
                held: 1,
                queued: 0,
                running: 0
            },
            "{binding}: held by the cordon"
        );
        assert!(
            started.recv_timeout(Duration::from_millis(300)).is_err(),
            "{binding}: a held unit must not start while cordoned"
        );

        owner
            .observe(ThrottleSample::default(), 20_000)
            .expect("a clean window lifts the cordon");
        fleet.waker().notify(owner.seq());
        started
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("{binding}: the held unit starts once the cordon lifts"));
        assert_eq!(
            handle.backlog(),
            Backlog {
                held: 0,
                queued: 0,
                running: 1
            },
            "{binding}: running on its seat"
        );
        release.send(()).expect("the unit waits for its gate");
        wait(receipt).expect("the unit completes");
        let idle = (0..500).any(|_| {
            std::thread::sleep(Duration::from_millis(2));
            handle.backlog().is_idle()
        });
        assert!(
            idle,
            "{binding}: idle after the unit finished: {:?}",
            handle.backlog()
        );
        fleet.shutdown().expect("shutdown");
    }
}
