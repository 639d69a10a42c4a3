//! Receipt deadlines on both bindings: a walk whose sim hangs past the
//! deadline does not hang; the path it owed becomes `Failed(Overrun)`,
//! exactly once, the overrun is counted, the ledger closes exact, and the
//! sim's late answer is dropped.

use crate::common::{plan, recording_fuse};
use fleet::ledger::{BinWitness, SharedLedger};
use fleet::plan::{Binding, Profile};
use fleet::receipt::overruns_total;
use fleet::WorkerRole::{SimDriver, Solver};
use fleet::{FailReason, PathOutcome};
use fleet_bindings::{boot, unit_body, within, BootOptions};
use std::time::Duration;

/// No wait in this test may hang: a missing answer fails it instead.
const NO_HANG: Duration = Duration::from_secs(30);

#[test]
fn a_sim_past_its_deadline_fails_its_path_as_overrun_and_the_ledger_stays_exact() {
    for (quota, profile, binding) in [
        (8.0, Profile::Pinned, Binding::Pinned),
        (4.0, Profile::Auto, Binding::Serial),
    ] {
        let plan = plan(quota, profile);
        let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
        let (fuse, trips) = recording_fuse();
        let ledger = SharedLedger::new(fuse);
        let (sender, merge) = ledger.open_cycle(1, &[0, 1]).expect("open");
        let before = overruns_total();

        // The sim hangs (asynchronously, so the serial thread stays free)
        // until the test releases it after the cycle has closed.
        let (release_tx, release_rx) = futures::channel::oneshot::channel::<()>();
        let walk = unit_body(move |ctx| async move {
            let mut witness = BinWitness::new(sender, [0, 1]);
            witness
                .deliver(0, PathOutcome::Suppressed)
                .expect("merge open");
            let sim = ctx
                .fleet
                .submit(
                    SimDriver,
                    None,
                    unit_body(move |_| async move {
                        let _ = tokio::time::timeout(NO_HANG, release_rx).await;
                        Box::new(9u32) as _
                    }),
                )
                .expect("sim admitted");
            let outcome = match within(sim, Duration::from_millis(50), Some(SimDriver)).await {
                Ok(_) => PathOutcome::Suppressed,
                Err(reason) => PathOutcome::Failed {
                    reason: reason.fail_reason(),
                },
            };
            witness.deliver(1, outcome).expect("merge open");
            Box::new(outcome) as _
        });
        let walk = fleet
            .handle()
            .submit(Solver, Some(0), walk)
            .expect("walk admitted");
        let outcome = walk
            .wait_timeout(NO_HANG)
            .expect("the walk is not hung by its sim")
            .expect("the walk answers");
        let overrun = PathOutcome::Failed {
            reason: FailReason::Overrun,
        };
        assert_eq!(
            outcome.downcast_ref::<PathOutcome>(),
            Some(&overrun),
            "{binding}"
        );
        let record = merge.wait().expect("the ledger closes exact");
        assert_eq!(record.outcomes[&1], overrun, "{binding}");
        assert_eq!(record.outcomes[&0], PathOutcome::Suppressed, "{binding}");
        assert_eq!(record.tally.received(), record.tally.submitted, "{binding}");
        assert!(
            trips.lock().unwrap().is_empty(),
            "{binding}: {:?}",
            trips.lock().unwrap()
        );
        assert!(
            overruns_total() > before,
            "{binding}: the overrun is counted"
        );

        // The sim finishes late: its answer is dropped, nothing is counted twice.
        let _ = release_tx.send(());
        fleet.shutdown().expect("clean shutdown");
        assert!(trips.lock().unwrap().is_empty(), "{binding}");
    }
}
