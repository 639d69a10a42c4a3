use super::*;
use crate::outcome::FailReason;
use futures::task::LocalSpawnExt;
use std::sync::Arc;
use std::sync::Mutex as StdMutex;

/// A fuse whose hook records every trip (the test observes instead of aborting).
fn recording_fuse() -> (ExactnessFuse, Arc<StdMutex<Vec<FuseTrip>>>) {
    let seen = Arc::new(StdMutex::new(Vec::new()));
    let sink = seen.clone();
    (
        ExactnessFuse::with_hook(move |t| sink.lock().unwrap().push(t.clone())),
        seen,
    )
}

const SOLVED: PathOutcome = PathOutcome::Solved {
    amount_in: 10,
    profit: 3,
};
const FAILED: PathOutcome = PathOutcome::Failed {
    reason: FailReason::SimReverted,
};

#[test]
fn an_exact_cycle_closes_with_its_tally() {
    let (fuse, trips) = recording_fuse();
    let mut l = OutcomeLedger::new(fuse);
    l.open(7, &[0, 1, 2, 3]).unwrap();
    l.record(7, 0, SOLVED).unwrap();
    l.record(7, 2, PathOutcome::Suppressed).unwrap();
    assert!(!l.is_complete(7));
    l.record(7, 1, FAILED).unwrap();
    l.record(7, 3, PathOutcome::Suppressed).unwrap();
    assert!(l.is_complete(7));
    let rec = l.close(7).unwrap();
    assert_eq!(
        rec.tally,
        CycleTally {
            submitted: 4,
            solved: 1,
            suppressed: 2,
            failed: 1
        }
    );
    assert_eq!(
        rec.outcomes.keys().copied().collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    assert_eq!(rec.outcomes[&1], FAILED);
    assert!(trips.lock().unwrap().is_empty());
    assert_eq!(l.open_cycles(), 0);
}

#[test]
fn a_duplicate_trips_the_fuse_through_the_hook() {
    let (fuse, trips) = recording_fuse();
    let mut l = OutcomeLedger::new(fuse);
    l.open(1, &[5, 6]).unwrap();
    l.record(1, 5, SOLVED).unwrap();
    let err = l.record(1, 5, PathOutcome::Suppressed).unwrap_err();
    let want = FuseTrip::Duplicate {
        cycle: 1,
        path: 5,
        first: Some(SOLVED),
        second: PathOutcome::Suppressed,
    };
    assert_eq!(err, want);
    assert_eq!(*trips.lock().unwrap(), vec![want]);
    assert_eq!(l.trips(), 1);
}

#[test]
fn a_duplicate_after_the_cycle_closed_still_trips() {
    let (fuse, trips) = recording_fuse();
    let mut l = OutcomeLedger::new(fuse);
    l.open(2, &[0]).unwrap();
    l.record(2, 0, SOLVED).unwrap();
    l.close(2).unwrap();
    let err = l.record(2, 0, SOLVED).unwrap_err();
    assert_eq!(
        err,
        FuseTrip::Duplicate {
            cycle: 2,
            path: 0,
            first: None,
            second: SOLVED
        }
    );
    assert_eq!(trips.lock().unwrap().len(), 1);
}

#[test]
fn a_shortfall_trips_the_fuse_naming_the_missing_paths() {
    let (fuse, trips) = recording_fuse();
    let mut l = OutcomeLedger::new(fuse);
    l.open(3, &[0, 1, 2, 9]).unwrap();
    l.record(3, 1, SOLVED).unwrap();
    l.record(3, 9, FAILED).unwrap();
    let err = l.close(3).unwrap_err();
    let tally = CycleTally {
        submitted: 4,
        solved: 1,
        suppressed: 0,
        failed: 1,
    };
    assert_eq!(
        err,
        FuseTrip::Shortfall {
            cycle: 3,
            tally,
            missing: vec![0, 2]
        }
    );
    assert_eq!(trips.lock().unwrap().len(), 1);
    assert!(err.to_string().contains("missing paths [0, 2]"), "{err}");
}

#[test]
fn stray_unknown_and_reopened_cycles_trip() {
    let (fuse, trips) = recording_fuse();
    let mut l = OutcomeLedger::new(fuse);
    l.open(4, &[0, 1]).unwrap();
    assert_eq!(
        l.record(4, 2, SOLVED).unwrap_err(),
        FuseTrip::Stray { cycle: 4, path: 2 }
    );
    assert_eq!(
        l.record(5, 0, SOLVED).unwrap_err(),
        FuseTrip::UnknownCycle { cycle: 5, path: 0 }
    );
    assert_eq!(
        l.open(4, &[0]).unwrap_err(),
        FuseTrip::CycleReopened { cycle: 4 }
    );
    assert_eq!(
        l.open(6, &[3, 3]).unwrap_err(),
        FuseTrip::DuplicateSubmission { cycle: 6, path: 3 }
    );
    assert_eq!(trips.lock().unwrap().len(), 4);
}

#[test]
fn the_merge_future_shares_one_thread_with_the_lanes() {
    // One thread, one local executor: the merge only yields while the pipe is
    // empty, so the senders spawned after it still run and it completes.
    let (fuse, trips) = recording_fuse();
    let ledger = SharedLedger::new(fuse);
    let (tx, merge) = ledger.open_cycle(10, &[0, 1, 2, 3, 4, 5]).unwrap();
    let mut pool = futures::executor::LocalPool::new();
    let spawner = pool.spawner();
    let result = Arc::new(StdMutex::new(None));
    let r = result.clone();
    spawner
        .spawn_local(async move { *r.lock().unwrap() = Some(merge.run().await) })
        .unwrap();
    for bin in 0..3u32 {
        let mut w = BinWitness::new(tx.clone(), [bin * 2, bin * 2 + 1]);
        spawner
            .spawn_local(async move {
                futures::future::ready(()).await;
                w.deliver(bin * 2, SOLVED).unwrap();
                w.deliver(bin * 2 + 1, PathOutcome::Suppressed).unwrap();
            })
            .unwrap();
    }
    drop(tx);
    pool.run();
    let rec = result.lock().unwrap().take().unwrap().unwrap();
    assert_eq!(
        rec.tally,
        CycleTally {
            submitted: 6,
            solved: 3,
            suppressed: 3,
            failed: 0
        }
    );
    assert!(trips.lock().unwrap().is_empty());
}

#[test]
fn a_dropped_witness_delivers_lane_death_for_exactly_the_owed_paths() {
    let (fuse, trips) = recording_fuse();
    let ledger = SharedLedger::new(fuse);
    let (tx, merge) = ledger.open_cycle(11, &[0, 1, 2, 3, 4]).unwrap();
    let mut a = BinWitness::new(tx.clone(), [0, 1, 2]);
    let mut b = BinWitness::new(tx, [3, 4]);
    b.deliver(3, SOLVED).unwrap();
    b.deliver(4, SOLVED).unwrap();
    drop(b);
    a.deliver(1, PathOutcome::Suppressed).unwrap();
    assert_eq!(a.owed(), vec![0, 2]);
    // A panic unwinding through the walk drops the witness.
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _w = a;
        panic!("walk died mid-bin");
    }));
    assert!(panicked.is_err());
    let rec = merge.wait().unwrap();
    let death = PathOutcome::Failed {
        reason: FailReason::LaneDeath,
    };
    assert_eq!(rec.outcomes[&0], death);
    assert_eq!(rec.outcomes[&2], death);
    assert_eq!(rec.outcomes[&1], PathOutcome::Suppressed);
    assert_eq!(
        rec.tally,
        CycleTally {
            submitted: 5,
            solved: 2,
            suppressed: 1,
            failed: 2
        }
    );
    assert!(trips.lock().unwrap().is_empty());
}

#[test]
fn a_double_emitting_bin_trips_at_the_merge_and_stops_it() {
    let (fuse, trips) = recording_fuse();
    let ledger = SharedLedger::new(fuse);
    let (tx, merge) = ledger.open_cycle(12, &[0, 1]).unwrap();
    let mut w = BinWitness::new(tx.clone(), [0, 1]);
    w.deliver(0, SOLVED).unwrap();
    w.deliver(0, SOLVED).unwrap();
    w.deliver(1, SOLVED).unwrap();
    drop(w);
    let err = merge.wait().unwrap_err();
    assert!(
        matches!(
            err,
            FuseTrip::Duplicate {
                cycle: 12,
                path: 0,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(trips.lock().unwrap().len(), 1);
    assert_eq!(tx.send(1, SOLVED), Err(PipeClosed { cycle: 12, path: 1 }));
}

#[test]
fn a_merge_whose_senders_vanish_early_reports_the_shortfall() {
    let (fuse, trips) = recording_fuse();
    let ledger = SharedLedger::new(fuse);
    let (tx, merge) = ledger.open_cycle(13, &[0, 1, 2]).unwrap();
    tx.send(1, SOLVED).unwrap();
    drop(tx);
    let err = merge.wait().unwrap_err();
    assert!(
        matches!(&err, FuseTrip::Shortfall { cycle: 13, missing, .. } if *missing == vec![0, 2]),
        "{err}"
    );
    assert_eq!(trips.lock().unwrap().len(), 1);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn outcome(seed: u8) -> PathOutcome {
        match seed % 3 {
            0 => SOLVED,
            1 => PathOutcome::Suppressed,
            _ => FAILED,
        }
    }

    proptest! {
        /// Any schedule of deliveries: the ledger trips iff some path is
        /// delivered twice (a `Duplicate` at the first repeat) or never (a
        /// `Shortfall` naming exactly the undelivered paths); an exact
        /// schedule closes with a tally that sums to the submitted count.
        #[test]
        fn trips_exactly_on_duplicates_and_shortfalls(
            times in proptest::collection::vec(0u8..3, 1..40),
            order_seed in any::<u64>(),
            kinds in proptest::collection::vec(any::<u8>(), 120),
        ) {
            let (fuse, trips) = recording_fuse();
            let mut l = OutcomeLedger::new(fuse);
            let paths: Vec<PathId> = (0..times.len() as u32).collect();
            l.open(1, &paths).unwrap();
            let mut schedule: Vec<PathId> =
                paths.iter().flat_map(|p| std::iter::repeat_n(*p, times[*p as usize] as usize)).collect();
            // A deterministic shuffle from the seed.
            let mut s = order_seed | 1;
            for i in (1..schedule.len()).rev() {
                s ^= s << 13; s ^= s >> 7; s ^= s << 17;
                schedule.swap(i, (s % (i as u64 + 1)) as usize);
            }
            let mut seen = std::collections::BTreeSet::new();
            let mut first_trip = None;
            for (i, p) in schedule.iter().enumerate() {
                let r = l.record(1, *p, outcome(kinds[i % kinds.len()]));
                if !seen.insert(*p) {
                    let dup_here = matches!(r, Err(FuseTrip::Duplicate { path, .. }) if path == *p);
                    prop_assert!(dup_here, "a repeat of path {} must trip as a duplicate", p);
                    first_trip.get_or_insert(*p);
                } else {
                    prop_assert!(r.is_ok());
                }
            }
            let missing: Vec<PathId> = paths.iter().copied().filter(|p| times[*p as usize] == 0).collect();
            match l.close(1) {
                Ok(rec) => {
                    prop_assert!(missing.is_empty());
                    prop_assert_eq!(rec.tally.received(), rec.tally.submitted);
                    prop_assert_eq!(rec.tally.submitted as usize, paths.len());
                }
                Err(FuseTrip::Shortfall { missing: m, .. }) => prop_assert_eq!(m, missing.clone()),
                Err(other) => prop_assert!(false, "unexpected trip {other}"),
            }
            let dups = times.iter().filter(|t| **t == 2).count();
            let expected_trips = dups + usize::from(!missing.is_empty());
            prop_assert_eq!(trips.lock().unwrap().len(), expected_trips);
            prop_assert_eq!(l.trips() as usize, expected_trips);
            prop_assert_eq!(first_trip.is_some(), dups > 0);
        }
    }
}

#[test]
fn a_witness_settled_from_outside_pays_its_owed_paths_once_and_lets_the_merge_close() {
    let (fuse, trips) = recording_fuse();
    let ledger = SharedLedger::new(fuse);
    let (tx, merge) = ledger.open_cycle(13, &[0, 1, 2]).unwrap();
    // The walk still holds its witness (it hangs); the waiter settles it.
    let mut hung = BinWitness::new(tx, [0, 1, 2]);
    hung.deliver(0, SOLVED).unwrap();
    let settle = hung.settler();
    assert_eq!(settle.settle_owed(FailReason::Overrun), 2);
    assert_eq!(
        settle.settle_owed(FailReason::Overrun),
        0,
        "a second settle pays nothing"
    );
    // The merge closes although the hung walk has not dropped its witness.
    let rec = merge.wait().unwrap();
    let overrun = PathOutcome::Failed {
        reason: FailReason::Overrun,
    };
    assert_eq!(rec.outcomes[&0], SOLVED);
    assert_eq!(rec.outcomes[&1], overrun);
    assert_eq!(rec.outcomes[&2], overrun);
    // The late walk's answer is dropped, not a duplicate.
    assert!(hung.deliver(1, SOLVED).is_err());
    assert!(hung.owed().is_empty());
    drop(hung);
    assert!(trips.lock().unwrap().is_empty());
    assert_eq!(ledger.with(|l| l.trips()), 0);
}
