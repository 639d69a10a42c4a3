//! Instruction-count benches of the pure cores (gungraun over callgrind).
//!
//! Pump step, slot transition, admission, budget derive, posture observe,
//! ledger record (`DESIGN.md` §3), one solver walk on the shipped corpus
//! and one whole cycle of it on one thread with a fixed amount of work
//! (§5; `fixtures::cycle`). Counts are deterministic for a given build and toolchain, so CI can
//! gate on them: `ci/gungraun.sh` runs these benches and fails when a count
//! grows more than the allowed share over `ci/instructions-baseline.tsv`.
//! Fixture construction happens in the bench arguments and is not counted.
//!
//! ```text
//! ci/gungraun.sh                     # install the runner if needed, run, gate
//! cargo bench -p fleet-bench --bench instructions   # just run (runner on PATH)
//! ```

mod fixtures;

use fixtures::*;
use fleet::admission::{admission, Admission};
use fleet::budget::{BudgetError, BudgetOverrides, FleetBudget};
use fleet::ledger::{FuseTrip, OutcomeLedger};
use fleet::posture::{PostureMachine, ThrottleSample, Transition};
use fleet::pump::{Effect, HostPump, PumpInput};
use fleet::slot::{SlotError, SlotInput, SlotState};
use fleet::WorkerRole;
use gungraun::{library_benchmark, library_benchmark_group, main};
use std::hint::black_box;

type Stepped = (HostPump<()>, Vec<Effect<()>>);

#[library_benchmark]
#[bench::enqueue_grant(idle_pump())]
fn pump_enqueue(mut pump: HostPump<()>) -> Stepped {
    let fx = pump.step(black_box(sim_unit(2)), nominal());
    black_box((pump, fx))
}

#[library_benchmark]
#[bench::release(pump_with_running_sim())]
fn pump_seat_done((mut pump, done): (HostPump<()>, PumpInput<()>)) -> Stepped {
    let fx = pump.step(black_box(done), nominal());
    black_box((pump, fx))
}

#[library_benchmark]
#[bench::backed(backed_pump())]
fn pump_backstop_tick(mut pump: HostPump<()>) -> Stepped {
    let fx = pump.step(black_box(PumpInput::BackstopTick), cordoned());
    black_box((pump, fx))
}

#[library_benchmark]
#[bench::t1_lease(SlotState::Idle, SlotInput::Lease { role: WorkerRole::SimDriver })]
#[bench::t2_start_keyed(SlotState::Leased(WorkerRole::Solver), SlotInput::Start { unit: 7, key: Some(3) })]
#[bench::t6_resume(SlotState::Pinned { role: WorkerRole::Solver, key: 3 }, SlotInput::Resume { unit: 8, key: 3 })]
#[bench::refused_idle_start(SlotState::Idle, SlotInput::Start { unit: 7, key: None })]
fn slot_transition(state: SlotState, input: SlotInput) -> Result<SlotState, SlotError> {
    black_box(black_box(state).apply(black_box(input), &nominal()))
}

#[library_benchmark]
#[bench::admit(0, 4, true)]
#[bench::wait_both(4, 4, false)]
fn admission_predicate(len: u32, cap: u32, admits: bool) -> Admission {
    black_box(admission(black_box(len), black_box(cap), black_box(admits)))
}

#[library_benchmark]
#[bench::q8(8.0)]
#[bench::q6_5(6.5)]
#[bench::refused_q4_5(4.5)]
fn budget_derive(quota: f64) -> Result<FleetBudget, BudgetError> {
    black_box(FleetBudget::derive(
        black_box(quota),
        &BudgetOverrides::default(),
    ))
}

#[library_benchmark]
#[bench::clean(posture_machine(), ThrottleSample::default())]
#[bench::enters_cordon(posture_one_event_in(), throttled())]
fn posture_observe(
    mut m: PostureMachine,
    sample: ThrottleSample,
) -> (PostureMachine, Option<Transition>) {
    let edge = m.observe(black_box(sample), 100);
    black_box((m, edge))
}

#[library_benchmark]
#[bench::record(open_ledger())]
fn ledger_record(mut ledger: OutcomeLedger) -> (OutcomeLedger, Result<(), FuseTrip>) {
    let r = ledger.record(LEDGER_CYCLE, black_box(42), SOLVED);
    black_box((ledger, r))
}

/// The walk's input with its bin, checked against the golden outcomes.
fn heaviest_walk() -> (WalkInput, usize) {
    let input = walk_input();
    let bin = heaviest_bin(&input);
    check_walk_is_golden(&input, bin);
    (input, bin)
}

#[library_benchmark]
#[bench::heaviest_bin_cycle0(heaviest_walk())]
fn solver_walk((input, bin): (WalkInput, usize)) -> (WalkInput, usize) {
    let solved = walk_bin(black_box(&input), bin);
    black_box(solved);
    (input, bin)
}

library_benchmark_group!(
    name = pump;
    benchmarks = pump_enqueue, pump_seat_done, pump_backstop_tick
);
library_benchmark_group!(
    name = model;
    benchmarks = slot_transition, admission_predicate, budget_derive, posture_observe, ledger_record
);
// The whole of cycle 0 (resolve, every bin's walk with its sims, the
// merge) on one thread, with a fixed amount of work (`fixtures::cycle`).
#[library_benchmark]
#[bench::cycle0(fixtures::cycle::cycle_input())]
fn whole_cycle(input: fixtures::cycle::CycleInput) -> usize {
    let record = fixtures::cycle::one_thread_cycle(black_box(&input));
    black_box(record.outcomes.len())
}

library_benchmark_group!(
    name = solve;
    benchmarks = solver_walk, whole_cycle
);

main!(library_benchmark_groups = pump, model, solve);
