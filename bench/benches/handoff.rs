//! The unit hand-off round trip per binding (criterion): submit a unit
//! through `FleetHandle::submit`, the pump admits and grants it, a seat
//! starts it, its receipt resolves, the submitting thread wakes.
//!
//! The unit body does nothing, so the figure is the fleet's own overhead
//! per unit: pump enqueue, grant, the seat's wake-up, the body's future, the
//! receipt, the submitter's wake-up (`DESIGN.md` §3 "Lanes, hosts and the
//! pump", §4 for the bindings). Both bindings are booted from a plan for an
//! 8-core quota (`pinned`: one thread per seat; `serial`: its cycle
//! threads), without core pinning, on whatever this host has.
//!
//! `handoff/bare_crossbeam` is the floor the fleet is measured against: the
//! same round trip between two threads with nothing but two crossbeam
//! `bounded(1)` channels (the submitter sends, an echo thread answers). The
//! target is pinned ≤ 1.5× and serial ≤ 2× that floor.
//!
//! Criterion reports means; a round trip's mean on a shared machine is
//! mostly futex wake-ups, so after the criterion group a plain timing loop
//! records every round trip of each contender in an HdrHistogram and prints
//! mean, p50, p99 and p99.9 (µs) side by side (`HANDOFF_TAIL_N` round trips
//! each, default 20 000).
//!
//! ```text
//! cargo bench -p fleet-bench --bench handoff
//! ```

use criterion::{criterion_group, criterion_main, Criterion};
use fleet::plan::{Plan, Profile};
use fleet::receipt::UnitValue;
use fleet::WorkerRole;
#[allow(dead_code)]
#[path = "support/profiler.rs"]
mod profiler;
use fleet_bindings::{boot, unit_body, BootOptions, FleetHandle, PinCores};
use profiler::FlamegraphProfiler;
use std::hint::black_box;
use std::time::Instant;

/// The quota both fleets are planned for, cores.
const QUOTA_CPUS: f64 = 8.0;

/// Submits one empty unit of `role` (with `key`) and waits for its value.
fn round_trip(fleet: &FleetHandle, role: WorkerRole, key: Option<u32>) -> UnitValue {
    let body = unit_body(|_ctx| async { Box::new(7u64) as UnitValue });
    let receipt = fleet
        .submit(role, key, body)
        .unwrap_or_else(|e| panic!("the fleet refused a {role} unit: {e}"));
    receipt
        .wait()
        .unwrap_or_else(|r| panic!("the {role} unit resolved terminally: {r}"))
}

/// An echo thread over two `bounded(1)` channels: the bare round trip.
struct Echo {
    to: crossbeam_channel::Sender<u64>,
    back: crossbeam_channel::Receiver<u64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Echo {
    fn start() -> Echo {
        let (to, rx) = crossbeam_channel::bounded::<u64>(1);
        let (tx, back) = crossbeam_channel::bounded::<u64>(1);
        let thread = std::thread::Builder::new()
            .name("handoff-echo".into())
            .spawn(move || {
                while let Ok(v) = rx.recv() {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn the echo thread");
        Echo {
            to,
            back,
            thread: Some(thread),
        }
    }

    fn round_trip(&self, v: u64) -> u64 {
        self.to.send(v).expect("echo thread alive");
        self.back.recv().expect("echo thread answers")
    }

    fn stop(mut self) {
        let (dead, _) = crossbeam_channel::bounded(1);
        self.to = dead;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Boots the fleet of `profile` for the bench's quota, unpinned.
fn boot_fleet(name: &str, profile: Profile) -> fleet_bindings::Fleet {
    let plan = Plan::resolve(QUOTA_CPUS, profile, &Default::default()).expect("a plan for Q = 8");
    let mut opts = BootOptions::for_plan(&plan);
    opts.pin_cores = PinCores::Off;
    opts.host_name = format!("bench-{name}");
    boot(&plan, opts).unwrap_or_else(|e| panic!("boot {name}: {e}"))
}

fn handoff(c: &mut Criterion) {
    let mut g = c.benchmark_group("handoff");
    let echo = Echo::start();
    g.bench_function("bare_crossbeam", |b| {
        let mut n = 0u64;
        b.iter(|| {
            n += 1;
            black_box(echo.round_trip(n))
        })
    });
    echo.stop();
    for (name, profile) in [("pinned", Profile::Pinned), ("serial", Profile::Serial)] {
        let fleet = boot_fleet(name, profile);
        let handle = fleet.handle();
        // A first unit proves the wiring before anything is timed.
        let v = round_trip(&handle, WorkerRole::Resolve, None);
        assert_eq!(
            v.downcast_ref::<u64>(),
            Some(&7),
            "{name}: the body's value comes back"
        );
        g.bench_function(format!("{name}/resolve"), |b| {
            b.iter(|| black_box(round_trip(&handle, WorkerRole::Resolve, None)))
        });
        g.bench_function(format!("{name}/solver_bin_3"), |b| {
            b.iter(|| black_box(round_trip(&handle, WorkerRole::Solver, Some(3))))
        });
        drop(handle);
        fleet
            .shutdown()
            .unwrap_or_else(|e| panic!("shutdown {name}: {e}"));
    }
    g.finish();
}

/// Times `n` round trips of `one` (after `n / 10` warm-up trips) into a
/// histogram of nanoseconds.
fn record(n: u64, mut one: impl FnMut(u64)) -> hdrhistogram::Histogram<u64> {
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3)
        .expect("valid histogram bounds");
    for i in 0..n / 10 {
        one(i);
    }
    for i in 0..n {
        let t0 = Instant::now();
        one(i);
        let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        h.saturating_record(ns.max(1));
    }
    h
}

/// Prints mean and percentiles (µs) of every contender's round trip, and
/// each fleet binding's ratio to the bare round trip.
fn tails(_c: &mut Criterion) {
    let n: u64 = std::env::var("HANDOFF_TAIL_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(20_000);
    let mut rows = Vec::new();
    let echo = Echo::start();
    rows.push((
        "bare_crossbeam",
        record(n, |i| {
            black_box(echo.round_trip(i));
        }),
    ));
    echo.stop();
    for (name, profile) in [("pinned", Profile::Pinned), ("serial", Profile::Serial)] {
        let fleet = boot_fleet(name, profile);
        let handle = fleet.handle();
        let h = record(n, |_| {
            black_box(round_trip(&handle, WorkerRole::Resolve, None));
        });
        rows.push((name, h));
        drop(handle);
        fleet
            .shutdown()
            .unwrap_or_else(|e| panic!("shutdown {name}: {e}"));
    }
    let us = |ns: f64| ns / 1_000.0;
    let bare_mean = rows[0].1.mean();
    println!("\nhand-off round trip, {n} trips each (µs; resolve units for the bindings)");
    println!(
        "{:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "contender", "mean", "p50", "p99", "p99.9", "max", "×bare"
    );
    for (name, h) in &rows {
        println!(
            "{:<16} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>8.2}",
            name,
            us(h.mean()),
            us(h.value_at_quantile(0.50) as f64),
            us(h.value_at_quantile(0.99) as f64),
            us(h.value_at_quantile(0.999) as f64),
            us(h.max() as f64),
            h.mean() / bare_mean,
        );
    }
}

criterion_group! {
    name = handoffs;
    config = Criterion::default().with_profiler(FlamegraphProfiler::default());
    targets = handoff, tails
}
criterion_main!(handoffs);
