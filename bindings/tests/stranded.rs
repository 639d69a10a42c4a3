//! The merge pipe is never stranded silently (seed 000 §10.3): on both
//! bindings, a merge whose host dies mid-drain (its body panics with the
//! merge in hand) trips the exactness fuse with `Stranded` — the loud stop —
//! and the lane's next send is told the pipe is closed.

use crate::common::{plan, recording_fuse};
use fleet::ledger::{BinWitness, FuseTrip, SharedLedger};
use fleet::plan::{Binding, Profile};
use fleet::receipt::TerminalReason;
use fleet::PathOutcome;
use fleet::WorkerRole::Merge;
use fleet_bindings::{boot, unit_body, BootOptions};
use std::time::Duration;

/// No wait in this test may hang: a missing answer fails it instead.
const NO_HANG: Duration = Duration::from_secs(30);

#[test]
fn a_merge_whose_host_dies_mid_drain_trips_the_fuse_loudly() {
    for (quota, profile, binding) in [
        (8.0, Profile::Pinned, Binding::Pinned),
        (4.0, Profile::Auto, Binding::Serial),
    ] {
        let plan = plan(quota, profile);
        let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
        let (fuse, trips) = recording_fuse();
        let ledger = SharedLedger::new(fuse);
        let (sender, merge) = ledger.open_cycle(3, &[0, 1]).expect("open");
        let mut walk = BinWitness::new(sender, [0, 1]);
        walk.deliver(0, PathOutcome::Suppressed)
            .expect("merge open");
        let body = unit_body(move |_| async move {
            let mut run = Box::pin(merge.run());
            // Drain what has arrived, then die with the merge in hand.
            assert!(futures::poll!(run.as_mut()).is_pending());
            panic!("the merge's host died mid-drain");
        });
        let receipt = fleet
            .handle()
            .submit(Merge, Some(0), body)
            .expect("merge admitted");
        let answer = receipt.wait_timeout(NO_HANG).expect("the merge answers");
        assert!(
            matches!(answer, Err(TerminalReason::Panicked { .. })),
            "{binding}: {answer:?}"
        );
        assert_eq!(
            *trips.lock().unwrap(),
            vec![FuseTrip::Stranded {
                cycle: 3,
                received: 1,
                submitted: 2
            }],
            "{binding}: the stranded pipe is a loud stop"
        );
        assert!(
            walk.deliver(1, PathOutcome::Suppressed).is_err(),
            "{binding}"
        );
        drop(walk);
        let _ = fleet.shutdown();
    }
}
