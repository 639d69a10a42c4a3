//! The cooperative checkpoint on the serial binding: a long CPU unit that
//! calls `checkpoint()` between batches lets a ready unit run while it
//! computes, and a walk's sim starts while the walk computes. Two cores:
//! one cycle thread carries every seat, so without the checkpoint nothing
//! else runs until the CPU unit ends.
//!
//! No assertion reads a clock. Each CPU unit computes until the event it
//! waits for has happened (the other unit finished) and reports whether it
//! saw it; without the checkpoint the other unit cannot run on the shared
//! thread, so the CPU unit runs to its safety cap and reports that it did
//! not. The cap (30 s) only bounds a failing run.

use crate::common::*;
use fleet::plan::{Binding, Profile};
use fleet::receipt::UnitValue;
use fleet::WorkerRole;
use fleet_bindings::{boot, checkpoint, unit_body, BootOptions};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// How long a CPU unit computes at most while it waits for its event.
const SAFETY_CAP: Duration = Duration::from_secs(30);

/// Computes in ~50 µs batches, calling `checkpoint()` between them, until
/// `done` is set (true) or the safety cap runs out (false).
async fn compute_until(done: &AtomicBool) -> bool {
    let cap = Instant::now() + SAFETY_CAP;
    let mut acc = 0u64;
    while !done.load(Ordering::Acquire) {
        if Instant::now() >= cap {
            return false;
        }
        for _ in 0..20_000 {
            acc = std::hint::black_box(acc.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        checkpoint().await;
    }
    std::hint::black_box(acc);
    true
}

/// A sim granted while a CPU unit computes on the same cycle thread runs
/// and completes before the CPU unit ends: the CPU unit computes until the
/// sim is done, and sees it done. Without the checkpoint (the old binding)
/// the sim could only run after the CPU unit, which would then end at its
/// cap without seeing it.
#[test]
fn a_sim_granted_behind_a_long_cpu_unit_completes_while_it_computes() {
    let plan = plan(2.0, Profile::Auto);
    assert_eq!(plan.binding, Binding::Serial);
    assert_eq!(
        plan.seat_layout().cycle_threads,
        1,
        "one thread: they share it"
    );
    let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
    let h = fleet.handle();
    let sim_done = Arc::new(AtomicBool::new(false));
    let (started_tx, started) = mpsc::channel();
    let seen = sim_done.clone();
    let cpu = h
        .submit(
            WorkerRole::Resolve,
            None,
            unit_body(move |_ctx| async move {
                let _ = started_tx.send(());
                Box::new(compute_until(&seen).await) as UnitValue
            }),
        )
        .unwrap();
    // The sim is granted once the CPU unit computes (its start is the event).
    started.recv().expect("the CPU unit started");
    let flag = sim_done.clone();
    let sim = h
        .submit(
            WorkerRole::SimDriver,
            None,
            unit_body(move |_ctx| async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                flag.store(true, Ordering::Release);
                Box::new(()) as UnitValue
            }),
        )
        .unwrap();
    assert!(wait(sim).is_ok());
    let saw = *wait(cpu).unwrap().downcast::<bool>().unwrap();
    assert!(
        saw,
        "the CPU unit ran to its cap: the sim did not run while it computed"
    );
    drop(h);
    fleet.shutdown().unwrap();
}

/// A walk submits its sim, then computes (with checkpoints) before awaiting
/// it: the sim starts and its I/O completes during the walk's computation,
/// so the walk's total is its CPU, not CPU + I/O. On the old binding the
/// sim started only when the walk awaited it. The walk computes until the
/// sim has ended and counts the checkpoints at which the sim had started.
#[test]
fn a_walks_sim_starts_and_ends_while_the_walk_computes() {
    let plan = plan(2.0, Profile::Auto);
    let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
    let h = fleet.handle();
    let sim_started = Arc::new(AtomicU32::new(0));
    let sim_ended = Arc::new(AtomicBool::new(false));
    let (s2, e2) = (sim_started.clone(), sim_ended.clone());
    let walk = unit_body(move |ctx| async move {
        let (s3, e3) = (s2.clone(), e2.clone());
        let sim = ctx
            .fleet
            .submit(
                WorkerRole::SimDriver,
                None,
                unit_body(move |_ctx| async move {
                    s3.store(1, Ordering::Release);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    e3.store(true, Ordering::Release);
                    Box::new(1u64) as UnitValue
                }),
            )
            .expect("sim admitted");
        let saw_end = compute_until(&e2).await;
        let v = *sim.await.unwrap().downcast::<u64>().unwrap();
        Box::new((saw_end, v)) as UnitValue
    });
    let r = h.submit(WorkerRole::Solver, Some(0), walk).unwrap();
    let (saw_end, v) = *wait(r).unwrap().downcast::<(bool, u64)>().unwrap();
    assert_eq!(v, 1);
    assert_eq!(sim_started.load(Ordering::Acquire), 1, "the sim ran");
    assert!(
        saw_end,
        "the walk computed to its cap: its sim did not start and end while it computed"
    );
    drop(h);
    fleet.shutdown().unwrap();
}

/// The other order: a sim granted just before a CPU unit (its timer armed,
/// then the CPU unit takes the thread) completes while the CPU unit still
/// computes, not when the CPU unit ends.
#[test]
fn a_sim_granted_before_a_long_cpu_unit_completes_while_it_computes() {
    let plan = plan(2.0, Profile::Auto);
    let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
    let h = fleet.handle();
    let sim_done = Arc::new(AtomicBool::new(false));
    let flag = sim_done.clone();
    let sim = h
        .submit(
            WorkerRole::SimDriver,
            None,
            unit_body(move |_ctx| async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                flag.store(true, Ordering::Release);
                Box::new(()) as UnitValue
            }),
        )
        .unwrap();
    let seen = sim_done.clone();
    let cpu = h
        .submit(
            WorkerRole::Resolve,
            None,
            unit_body(move |_ctx| async move { Box::new(compute_until(&seen).await) as UnitValue }),
        )
        .unwrap();
    assert!(wait(sim).is_ok());
    let saw = *wait(cpu).unwrap().downcast::<bool>().unwrap();
    assert!(saw, "the CPU unit ran to its cap: the sim waited for it");
    drop(h);
    fleet.shutdown().unwrap();
}

/// Outside a unit and on the pinned binding `checkpoint()` returns at once:
/// a unit of a fixed number of checkpoints completes.
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
                for _ in 0..100 {
                    checkpoint().await;
                }
                Box::new(100u32) as UnitValue
            }),
        )
        .unwrap();
    assert_eq!(*wait(r).unwrap().downcast::<u32>().unwrap(), 100);
    fleet.shutdown().unwrap();
}
