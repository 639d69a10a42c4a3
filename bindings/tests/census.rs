//! Thread census from `/proc/self/task`: a fleet driven for 200 cycles has
//! the same threads after cycle 1 and after cycle 200 (no per-unit or
//! per-cycle thread creation), they match the census rows, and shutdown
//! leaves no fleet thread behind. One test per binary: other tests' fleets
//! would share `/proc/self/task`.
//!
//! Linux keeps 15 bytes of a thread name (`comm`): `work-fleet-solver-3`
//! reads back as `work-fleet-solv`, so the six solver seats share one comm
//! name; the comparison is on that multiset.

use crate::common::*;
use fleet::census::CensusBinding;
use fleet::ledger::SharedLedger;
use fleet::plan::{Binding, Profile};
use fleet_bindings::{boot, BootOptions, Fleet};

/// The comm names the census promises: one thread per `pinned` row, `count`
/// numbered workers for the ambient runtime, nothing for `logical` rows or
/// the reserve (host threads that are not the fleet's).
fn expected_threads(fleet: &Fleet) -> Vec<String> {
    let mut names = Vec::new();
    for row in fleet.census() {
        match (row.binding, row.name.as_str()) {
            (CensusBinding::Logical, _) | (_, "reserve") => {}
            (CensusBinding::Shared, "ambient_io") => {
                names.extend((0..row.count).map(|i| comm(&format!("{}-{i}", row.thread_name))))
            }
            (CensusBinding::Pinned, _) => names.push(comm(&row.thread_name)),
            (b, n) => panic!("unexpected census row {n} ({b:?})"),
        }
    }
    names.sort();
    names
}

fn drive(quota: f64, profile: Profile, binding: Binding) {
    assert!(
        fleet_threads().is_empty(),
        "no fleet thread before boot: {:?}",
        fleet_threads()
    );
    let plan = plan(quota, profile);
    assert_eq!(plan.binding, binding);
    let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
    let (fuse, trips) = recording_fuse();
    let ledger = SharedLedger::new(fuse);
    let handle = fleet.handle();
    let light = CycleOpts {
        background: false,
        ..CycleOpts::default()
    };
    run_cycle(&handle, &ledger, 1, CycleOpts::default())
        .merged
        .expect("cycle 1 exact");
    let after_1 = fleet_threads();
    let all_after_1 = thread_count();
    for c in 2..=200 {
        let opts = if c % 10 == 0 {
            CycleOpts::default()
        } else {
            light
        };
        run_cycle(&handle, &ledger, c, opts)
            .merged
            .expect("exact cycle");
    }
    let after_200 = fleet_threads();
    assert_eq!(
        after_1, after_200,
        "{binding}: the fleet's threads changed between cycle 1 and 200"
    );
    assert_eq!(
        all_after_1,
        thread_count(),
        "{binding}: the process thread count changed"
    );
    assert_eq!(
        after_1,
        expected_threads(&fleet),
        "{binding}: /proc/self/task vs the census"
    );
    match binding {
        Binding::Pinned => {
            let seats = plan.seat_layout().seats.len();
            let io = plan.seat_layout().ambient_workers as usize;
            assert_eq!(after_1.len(), seats + io + 1, "seats + io workers + pump");
            assert_eq!(
                after_1.iter().filter(|n| *n == "work-fleet-solv").count(),
                6
            );
        }
        Binding::Serial => {
            // One cycle thread per core beside the reserve (decision 0003).
            let cycle = plan.seat_layout().cycle_threads as usize;
            assert_eq!(cycle, quota as usize - 1);
            let mut want = vec!["work-fleet-pump".to_string()];
            want.extend(std::iter::repeat_n("work-fleet-seri".to_string(), cycle));
            assert_eq!(after_1, want);
        }
    }
    assert!(trips.lock().unwrap().is_empty());
    drop(handle);
    let report = fleet.shutdown().expect("clean shutdown");
    assert!(report.pump.conserved());
    // Every thread was joined; the kernel may list a joined thread in
    // /proc/self/task for a moment after it exits, so allow it to be reaped.
    let gone = (0..500).any(|_| {
        let none = fleet_threads().is_empty();
        if !none {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        none
    });
    assert!(
        gone,
        "{binding}: fleet threads left 5 s after shutdown: {:?}",
        fleet_threads()
    );
}

#[test]
fn threads_are_stable_across_200_cycles_and_gone_after_shutdown() {
    drive(8.0, Profile::Pinned, Binding::Pinned);
    drive(4.0, Profile::Auto, Binding::Serial);
}
