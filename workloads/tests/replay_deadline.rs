//! The replay's receipt waits have deadlines: a walk that cannot answer (its
//! solver seat is held by a hung unit) overruns instead of hanging the
//! replay; its owed paths are `Failed(Overrun)`, exactly once; the overrun is
//! counted in the result; the ledger closes every cycle exact (no fuse trip),
//! and every other path keeps its golden outcome. Both bindings.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fleet::ledger::{ExactnessFuse, FuseTrip};
use fleet::plan::{Plan, Profile};
use fleet::{FailReason, PathOutcome, WorkerRole};
use fleet_bindings::{boot, unit_body, BootOptions};
use fleet_workloads::replay::{replay, FleetHost, ReplayOptions, ReplayResult};
use fleet_workloads::Corpus;

/// No wait in this test may hang: a missing answer fails it instead.
const NO_HANG: Duration = Duration::from_secs(60);

fn corpus() -> Corpus {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../corpus/golden-v1.txt");
    Corpus::load(&path).expect("the golden corpus loads")
}

/// Replays `cycles` cycles while a hung unit holds solver seat 0, with every
/// receipt wait bounded by `deadline`; returns the result and the fuse trips.
fn replay_with_seat_0_hung(
    quota: f64,
    profile: Profile,
    cycles: u32,
    deadline: Duration,
) -> (ReplayResult, Vec<FuseTrip>) {
    let plan = Plan::resolve(quota, profile, &Default::default()).expect("a plan");
    let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
    let handle = fleet.handle();
    // The hung unit waits (asynchronously: the serial thread stays free)
    // until the test releases it after the replay.
    let (release_tx, release_rx) = futures::channel::oneshot::channel::<()>();
    let hung = handle
        .submit(
            WorkerRole::Solver,
            Some(0),
            unit_body(move |_| async move {
                let _ = tokio::time::timeout(NO_HANG, release_rx).await;
                Box::new(()) as _
            }),
        )
        .expect("the hung unit is admitted");
    let trips = Arc::new(Mutex::new(Vec::new()));
    let sink = trips.clone();
    let mut opts = ReplayOptions::new(0.02);
    opts.cycles = Some(cycles);
    opts.crawl_units_per_cycle = 0;
    opts.unit_deadline = Some(deadline);
    opts.fuse = Some(ExactnessFuse::with_hook(move |t| {
        sink.lock().unwrap().push(t.clone())
    }));
    let corpus = corpus();
    let (tx, rx) = std::sync::mpsc::channel();
    let driver = std::thread::spawn(move || {
        let host = FleetHost::new(handle);
        let _ = tx.send(replay(&host, &corpus, opts));
    });
    let result = rx
        .recv_timeout(NO_HANG)
        .expect("the replay does not hang behind the hung unit")
        .expect("the replay finishes");
    driver.join().expect("the driver thread");
    // Released late: the walks queued behind it run and their answers are
    // dropped, never counted twice.
    let _ = release_tx.send(());
    let _ = hung.wait_timeout(NO_HANG).expect("the hung unit ends");
    fleet.shutdown().expect("clean shutdown");
    let trips = trips.lock().unwrap().clone();
    (result, trips)
}

#[test]
fn a_walk_that_cannot_answer_overruns_its_paths_fail_as_overrun_and_the_ledger_stays_exact() {
    let corpus = corpus();
    let cycles = 2u32;
    for (quota, profile) in [(8.0, Profile::Pinned), (4.0, Profile::Auto)] {
        let (result, trips) =
            replay_with_seat_0_hung(quota, profile, cycles, Duration::from_millis(1500));
        assert!(
            trips.is_empty(),
            "{profile:?}: the ledger stays exact: {trips:?}"
        );
        assert_eq!(result.cycles.len(), cycles as usize, "{profile:?}");
        assert_eq!(
            result.outcomes.len() as u64,
            result.paths,
            "{profile:?}: every path has exactly one outcome"
        );
        // Bin 0 of each cycle sat behind the hung unit: its walk overran and
        // each of its paths is Failed(Overrun); every other path is golden.
        let overrun = PathOutcome::Failed {
            reason: FailReason::Overrun,
        };
        let mut bin0 = 0u64;
        for case in corpus.cycles.iter().take(cycles as usize) {
            let in_bin0: Vec<u32> = case.bins[0]
                .iter()
                .map(|&pi| case.paths[pi as usize].id)
                .collect();
            bin0 += in_bin0.len() as u64;
            for p in &case.paths {
                let got = result
                    .outcomes
                    .iter()
                    .find(|r| r.cycle == case.index && r.path == p.id)
                    .expect("an outcome for every path")
                    .outcome;
                if in_bin0.contains(&p.id) {
                    assert_eq!(
                        got, overrun,
                        "{profile:?} cycle {} path {}",
                        case.index, p.id
                    );
                } else {
                    assert_eq!(
                        got, p.expected,
                        "{profile:?} cycle {} path {}",
                        case.index, p.id
                    );
                }
            }
        }
        let o = result.overruns;
        assert_eq!(o.walk, u64::from(cycles), "{profile:?}: {o:?}");
        assert_eq!(o.paths, bin0, "{profile:?}: {o:?}");
        assert_eq!(
            (o.resolve, o.merge, o.background),
            (0, 0, 0),
            "{profile:?}: {o:?}"
        );
        assert_eq!(o.deadline_ms, 1500);
        assert!(
            !result.parity,
            "{profile:?}: overrun paths differ from golden"
        );
        assert!(
            result.cycles.iter().all(|c| c.bins[0].walk_us == 0),
            "{profile:?}: the overrun bins have no walk record"
        );
    }
}

#[test]
fn the_unit_deadline_is_derived_from_the_cycle_budget_with_a_floor() {
    use fleet_workloads::replay::{unit_deadline, UNIT_DEADLINE_CYCLES, UNIT_DEADLINE_FLOOR};
    // 1 s cycles at scale 1: ten budgets.
    assert_eq!(
        unit_deadline(1_000_000, 1.0),
        Duration::from_secs(u64::from(UNIT_DEADLINE_CYCLES))
    );
    // A fast replay never gets a deadline below the floor.
    assert_eq!(unit_deadline(1_000_000, 0.01), UNIT_DEADLINE_FLOOR);
    // Bad input gives the floor, never a panic.
    for scale in [f64::NAN, f64::INFINITY, -1.0, 0.0] {
        assert_eq!(
            unit_deadline(1_000_000, scale),
            UNIT_DEADLINE_FLOOR,
            "{scale}"
        );
    }
    assert_eq!(
        unit_deadline(u64::MAX, 1e300),
        Duration::from_micros(u64::MAX)
    );
}
