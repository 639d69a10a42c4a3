//! The cooperative checkpoint on the serial binding: a long CPU unit that
//! calls `checkpoint()` between batches lets a ready unit run within a slice,
//! and a walk's sim starts while the walk computes. Two cores: one cycle
//! thread carries every seat, so without the checkpoint nothing else runs
//! until the CPU unit ends.
//!
//! Assertions compare against the CPU unit's own length with wide margins
//! (a loaded machine stretches every figure), never against tight numbers.

mod common;

use common::*;
use fleet::plan::{Binding, Profile};
use fleet::receipt::UnitValue;
use fleet::WorkerRole;
use fleet_bindings::{boot, checkpoint, unit_body, BootOptions, CHECKPOINT_SLICE};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Busy for `wall` of wall time, calling `checkpoint()` every ~50 µs of work.
async fn spin(wall: Duration) -> u64 {
    let until = Instant::now() + wall;
    let mut acc = 0u64;
    while Instant::now() < until {
        let batch = Instant::now() + Duration::from_micros(50);
        while Instant::now() < batch {
            acc = std::hint::black_box(acc.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        checkpoint().await;
    }
    acc
}

/// A 5 ms sim granted after a 400 ms CPU unit on the same cycle thread
/// completes long before the CPU unit: within its own 5 ms, one slice, and
/// scheduling noise (asserted with a wide margin: under 100 ms, a quarter
/// of the CPU unit). Without the checkpoint (the old binding) it completed
/// after the CPU unit, at ≈ 405 ms.
#[test]
fn a_sim_granted_behind_a_long_cpu_unit_completes_within_the_slice_bound() {
    let plan = plan(2.0, Profile::Auto);
    assert_eq!(plan.binding, Binding::Serial);
    assert_eq!(
        plan.seat_layout().cycle_threads,
        1,
        "one thread: they share it"
    );
    let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
    let h = fleet.handle();
    let cpu_len = Duration::from_millis(400);
    let sim_len = Duration::from_millis(5);
    let t0 = Instant::now();
    let cpu = h
        .submit(
            WorkerRole::Resolve,
            None,
            unit_body(move |_ctx| async move {
                let v = spin(cpu_len).await;
                Box::new((Instant::now(), v)) as UnitValue
            }),
        )
        .unwrap();
    // Let the CPU unit start first: the sim is granted while it computes.
    std::thread::sleep(Duration::from_millis(20));
    let granted = Instant::now();
    let sim = h
        .submit(
            WorkerRole::SimDriver,
            None,
            unit_body(move |_ctx| async move {
                tokio::time::sleep(sim_len).await;
                Box::new(Instant::now()) as UnitValue
            }),
        )
        .unwrap();
    let sim_done = *wait(sim).unwrap().downcast::<Instant>().unwrap();
    let (cpu_done, _) = *wait(cpu).unwrap().downcast::<(Instant, u64)>().unwrap();
    assert!(
        sim_done < cpu_done,
        "the sim finished after the CPU unit it was granted behind"
    );
    let waited = sim_done - granted;
    // The bound: sim_len + one slice + the longest stretch between
    // checkpoints (50 µs here); a wide margin for a loaded machine.
    let bound = sim_len + CHECKPOINT_SLICE + Duration::from_micros(50);
    assert!(
        waited < bound + Duration::from_millis(95),
        "sim took {waited:?} after its grant (bound {bound:?} + margin); CPU unit ran {:?}",
        cpu_done - t0
    );
    drop(h);
    fleet.shutdown().unwrap();
}

/// A walk submits its sim, then computes (with checkpoints) before awaiting
/// it: the sim starts during the walk's computation and its I/O overlaps
/// it, so the walk's total is its CPU, not CPU + I/O. On the old binding
/// the sim started only when the walk awaited it.
#[test]
fn a_walks_sim_starts_while_the_walk_computes() {
    let plan = plan(2.0, Profile::Auto);
    let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
    let h = fleet.handle();
    let cpu_len = Duration::from_millis(150);
    let sim_len = Duration::from_millis(60);
    let marks = Arc::new(Mutex::new(Vec::<(&'static str, Instant)>::new()));
    let m = marks.clone();
    let walk = unit_body(move |ctx| async move {
        let m2 = m.clone();
        let sim = ctx
            .fleet
            .submit(
                WorkerRole::SimDriver,
                None,
                unit_body(move |_ctx| async move {
                    m2.lock().unwrap().push(("sim_start", Instant::now()));
                    tokio::time::sleep(sim_len).await;
                    m2.lock().unwrap().push(("sim_end", Instant::now()));
                    Box::new(1u64) as UnitValue
                }),
            )
            .expect("sim admitted");
        m.lock().unwrap().push(("cpu_start", Instant::now()));
        spin(cpu_len).await;
        m.lock().unwrap().push(("cpu_end", Instant::now()));
        let v = *sim.await.unwrap().downcast::<u64>().unwrap();
        m.lock().unwrap().push(("walk_end", Instant::now()));
        Box::new(v) as UnitValue
    });
    let r = h.submit(WorkerRole::Solver, Some(0), walk).unwrap();
    assert_eq!(*wait(r).unwrap().downcast::<u64>().unwrap(), 1);
    let marks = marks.lock().unwrap().clone();
    let at = |name: &str| {
        marks
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| *t)
            .unwrap_or_else(|| panic!("no {name} mark in {marks:?}"))
    };
    assert!(
        at("sim_start") < at("cpu_end"),
        "the sim started only after the walk's computation: {marks:?}"
    );
    // Its I/O overlapped the computation: it ended before the computation
    // did plus half the sim's wait (the old binding: CPU end + the full wait).
    assert!(
        at("sim_end") < at("cpu_end") + sim_len / 2,
        "the sim's wait did not overlap the walk's computation: {marks:?}"
    );
    drop(h);
    fleet.shutdown().unwrap();
}

/// The other order: a 5 ms sim granted just before a 400 ms CPU unit (its
/// timer armed, then the CPU unit takes the thread) completes when its
/// timer fires plus at most a slice, not when the CPU unit ends (the old
/// binding: ≈ 407 ms).
#[test]
fn a_sim_granted_before_a_long_cpu_unit_completes_when_its_timer_fires() {
    let plan = plan(2.0, Profile::Auto);
    let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
    let h = fleet.handle();
    let sim_len = Duration::from_millis(5);
    let granted = Instant::now();
    let sim = h
        .submit(
            WorkerRole::SimDriver,
            None,
            unit_body(move |_ctx| async move {
                tokio::time::sleep(sim_len).await;
                Box::new(Instant::now()) as UnitValue
            }),
        )
        .unwrap();
    let cpu = h
        .submit(
            WorkerRole::Resolve,
            None,
            unit_body(move |_ctx| async move {
                spin(Duration::from_millis(400)).await;
                Box::new(Instant::now()) as UnitValue
            }),
        )
        .unwrap();
    let sim_done = *wait(sim).unwrap().downcast::<Instant>().unwrap();
    let cpu_done = *wait(cpu).unwrap().downcast::<Instant>().unwrap();
    assert!(sim_done < cpu_done, "the sim waited for the CPU unit");
    let waited = sim_done - granted;
    assert!(
        waited < sim_len + CHECKPOINT_SLICE + Duration::from_millis(95),
        "sim took {waited:?} from its grant"
    );
    drop(h);
    fleet.shutdown().unwrap();
}

/// Outside a unit and on the pinned binding `checkpoint()` returns at once.
#[test]
fn checkpoint_outside_a_serial_unit_returns_at_once() {
    futures::executor::block_on(checkpoint());
    let plan = plan(8.0, Profile::Pinned);
    let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
    let r = fleet
        .handle()
        .submit(
            WorkerRole::Resolve,
            None,
            unit_body(|_ctx| async {
                let v = spin(Duration::from_millis(5)).await;
                Box::new(v) as UnitValue
            }),
        )
        .unwrap();
    assert!(wait(r).is_ok());
    fleet.shutdown().unwrap();
}
