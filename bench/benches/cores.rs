//! Micro-benches of the fleet's pure cores and the solver math (criterion).
//!
//! One pump step, the admission predicate, slot transitions, posture
//! observe, budget derive, ledger record (`DESIGN.md` §3), and the solver
//! walk on the shipped corpus (§5). Each figure is wall time per call on
//! this host; the deterministic twin of these benches is `instructions.rs`.
//!
//! ```text
//! cargo bench -p fleet-bench --bench cores
//! cargo bench -p fleet-bench --bench cores -- --profile-time 2   # flamegraphs
//! ```
//!
//! With `--profile-time`, each bench writes
//! `target/criterion/<group>/<bench>/profile/flamegraph.svg`.

mod fixtures;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use fixtures::*;
use fleet::admission::admission;
use fleet::budget::{BudgetOverrides, FleetBudget};
use fleet::posture::ThrottleSample;
use fleet::pump::PumpInput;
use fleet::slot::{SlotInput, SlotState};
use fleet::WorkerRole;
#[allow(dead_code)]
#[path = "support/profiler.rs"]
mod profiler;
use fleet_workloads::math;
use fleet_workloads::paths::hop_reserves;
use profiler::FlamegraphProfiler;
use std::hint::black_box;

fn slot(c: &mut Criterion) {
    let mut g = c.benchmark_group("slot");
    let guard = nominal();
    g.bench_function("t1_lease", |b| {
        b.iter(|| {
            black_box(SlotState::Idle).apply(
                black_box(SlotInput::Lease {
                    role: WorkerRole::SimDriver,
                }),
                &guard,
            )
        })
    });
    g.bench_function("t2_start_keyed", |b| {
        let leased = SlotState::Leased(WorkerRole::Solver);
        let input = SlotInput::Start {
            unit: 7,
            key: Some(3),
        };
        b.iter(|| black_box(leased).apply(black_box(input), &guard))
    });
    g.bench_function("t6_resume", |b| {
        let pinned = SlotState::Pinned {
            role: WorkerRole::Solver,
            key: 3,
        };
        let input = SlotInput::Resume { unit: 8, key: 3 };
        b.iter(|| black_box(pinned).apply(black_box(input), &guard))
    });
    g.bench_function("refused_idle_start", |b| {
        let input = SlotInput::Start { unit: 7, key: None };
        b.iter(|| black_box(SlotState::Idle).apply(black_box(input), &guard))
    });
    g.finish();
}

fn admission_predicate(c: &mut Criterion) {
    let mut g = c.benchmark_group("admission");
    g.bench_function("predicate", |b| {
        let mut len = 0u32;
        b.iter(|| {
            len = (len + 1) & 7;
            admission(black_box(len), black_box(4), black_box(len & 1 == 0))
        })
    });
    g.finish();
}

fn pump(c: &mut Criterion) {
    let mut g = c.benchmark_group("pump");
    let idle = idle_pump();
    g.bench_function("enqueue_grant", |b| {
        b.iter_batched(
            || idle.clone(),
            |mut p| {
                let fx = p.step(sim_unit(2), nominal());
                (p, fx)
            },
            BatchSize::SmallInput,
        )
    });
    let (running, done) = pump_with_running_sim();
    let PumpInput::SeatDone { seat, unit } = done else {
        unreachable!("the fixture returns a SeatDone")
    };
    g.bench_function("seat_done", |b| {
        b.iter_batched(
            || running.clone(),
            |mut p| {
                let fx = p.step(PumpInput::SeatDone { seat, unit }, nominal());
                (p, fx)
            },
            BatchSize::SmallInput,
        )
    });
    let backed = backed_pump();
    g.bench_function("backstop_tick_backed", |b| {
        b.iter_batched(
            || backed.clone(),
            |mut p| {
                let fx = p.step(PumpInput::BackstopTick, cordoned());
                (p, fx)
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn posture(c: &mut Criterion) {
    let mut g = c.benchmark_group("posture");
    g.bench_function("observe_clean", |b| {
        let mut m = posture_machine();
        let mut now = 0u64;
        b.iter(|| {
            now += 100;
            m.observe(black_box(ThrottleSample::default()), now)
        })
    });
    let one_in = posture_one_event_in();
    g.bench_function("observe_enters_cordon", |b| {
        b.iter_batched(
            || one_in.clone(),
            |mut m| {
                let edge = m.observe(black_box(throttled()), 100);
                (m, edge)
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn budget(c: &mut Criterion) {
    let mut g = c.benchmark_group("budget");
    let none = BudgetOverrides::default();
    for (name, q) in [
        ("derive_q8", 8.0),
        ("derive_q6_5", 6.5),
        ("derive_q16", 16.0),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| FleetBudget::derive(black_box(q), &none))
        });
    }
    g.bench_function("derive_refused_q4_5", |b| {
        b.iter(|| FleetBudget::derive(black_box(4.5), &none))
    });
    g.finish();
}

fn ledger(c: &mut Criterion) {
    let mut g = c.benchmark_group("ledger");
    g.bench_function("record", |b| {
        b.iter_batched(
            open_ledger,
            |mut l| {
                let r = l.record(LEDGER_CYCLE, black_box(42), SOLVED);
                (l, r)
            },
            BatchSize::SmallInput,
        )
    });
    g.bench_function("cycle_100_paths", |b| {
        b.iter_batched(
            || {
                let l = open_ledger();
                (l, (0..LEDGER_PATHS).collect::<Vec<_>>())
            },
            |(mut l, paths)| {
                for &p in &paths {
                    l.record(LEDGER_CYCLE, p, SOLVED).expect("legal outcome");
                }
                let rec = l.close(LEDGER_CYCLE);
                (l, rec)
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn solve(c: &mut Criterion) {
    let input = walk_input();
    let bin = heaviest_bin(&input);
    check_walk_is_golden(&input, bin);
    let mut g = c.benchmark_group("solve");
    g.bench_function("walk_heaviest_bin", |b| {
        b.iter(|| walk_bin(black_box(&input), bin))
    });
    let path = &input.cycle.paths[input.cycle.bins[bin][0] as usize];
    g.bench_function("path", |b| {
        b.iter(|| fleet_workloads::solve_path(&input.pools, black_box(path), input.threshold))
    });
    let three = input
        .cycle
        .paths
        .iter()
        .find(|p| p.hops.len() == 3)
        .unwrap_or(path);
    let reserves = hop_reserves(&input.pools, &three.hops);
    g.bench_function("optimal_input", |b| {
        b.iter(|| math::optimal_input(black_box(&reserves)))
    });
    let (r_in, r_out) = reserves[0];
    g.bench_function("amount_out", |b| {
        b.iter(|| math::amount_out(black_box(r_in / 1000), black_box(r_in), black_box(r_out)))
    });
    g.finish();
}

criterion_group! {
    name = cores;
    config = Criterion::default().with_profiler(FlamegraphProfiler::default());
    targets = slot, admission_predicate, pump, posture, budget, ledger, solve
}
criterion_main!(cores);
