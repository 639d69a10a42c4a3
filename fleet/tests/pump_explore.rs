//! Exhaustive exploration of the host pump at small bounds: safety S (units
//! conserved) and liveness L (every reachable Backed state is drained,
//! faulted or loudly stopped within one backstop interval of its guard
//! changing), plus the negative check that L fails without the backstop.

use crate::pump_support::*;
use fleet::pump::PumpConfig;

const MAX_UNITS: u64 = 6;

fn config(backstop_enabled: bool) -> PumpConfig {
    PumpConfig {
        backstop_interval_ms: 250,
        stall_ticks: 2,
        backstop_enabled,
        ..PumpConfig::default()
    }
}

#[test]
fn safety_and_liveness_hold_over_every_interleaving() {
    let report = explore(small_layout(), config(true), MAX_UNITS);
    println!(
        "explored {} states, {} transitions; {} Backed states checked for liveness; {} faulted, {} loud",
        report.states, report.transitions, report.backed_checked, report.faulted_states, report.loud_states
    );
    assert!(
        report.safety.is_empty(),
        "safety violations: {:#?}",
        report.safety
    );
    assert!(
        report.liveness.is_empty(),
        "liveness violations: {:#?}",
        report.liveness
    );
    assert!(
        report.states > 1000,
        "the exploration is too small to mean anything: {}",
        report.states
    );
    assert!(
        report.backed_checked > 100,
        "few Backed states: {}",
        report.backed_checked
    );
    assert!(
        report.faulted_states > 0,
        "Faulted states must be reachable"
    );
    // Every seat here is healthy (it reports each unit it runs, in any
    // order and after any number of ticks): a loud stop must be unreachable.
    assert_eq!(
        report.loud_states, 0,
        "a loud stop is reachable with healthy seats"
    );
}

#[test]
fn safety_and_liveness_hold_when_a_seat_is_lost_at_any_point() {
    let report = explore_with(small_layout(), config(true), MAX_UNITS - 1, true);
    println!(
        "with seat loss: explored {} states, {} transitions; {} Backed checked; {} faulted, {} loud",
        report.states, report.transitions, report.backed_checked, report.faulted_states, report.loud_states
    );
    assert!(
        report.safety.is_empty(),
        "safety violations: {:#?}",
        report.safety
    );
    assert!(
        report.liveness.is_empty(),
        "liveness violations: {:#?}",
        report.liveness
    );
    assert_eq!(report.loud_states, 0, "a seat loss is never a loud stop");
    assert!(report.states > 1000, "too small: {}", report.states);
}

#[test]
fn safety_and_liveness_hold_across_rebudgets_and_epoch_boundaries() {
    // Walk admission 1 ⇄ 2 and the sim cap 2 ⇄ 1, re-budgeted and applied
    // at a boundary at any point, pins released there.
    let bounds = [
        fleet::pump::PumpBounds {
            walk_admission: 2,
            sim_slot_cap: 1,
        },
        fleet::pump::PumpBounds {
            walk_admission: 1,
            sim_slot_cap: 2,
        },
    ];
    let report = explore_alphabet(small_layout(), config(true), 3, false, Some(&bounds));
    assert!(
        report.safety.is_empty(),
        "safety violations: {:#?}",
        report.safety
    );
    assert!(
        report.liveness.is_empty(),
        "liveness violations: {:#?}",
        report.liveness
    );
    assert!(report.states > 1000, "explored {} states", report.states);
}

#[test]
fn a_dispatcher_that_never_grants_a_role_is_caught_by_the_stall_check() {
    let withheld = PumpConfig {
        withhold_grants: Some(fleet::WorkerRole::Registrar),
        ..config(true)
    };
    let report = explore(small_layout(), withheld, MAX_UNITS);
    println!(
        "registrar grants withheld: explored {} states; {} loud",
        report.states, report.loud_states
    );
    assert!(
        report.loud_states > 0,
        "the stall check must catch work waiting beside an idle seat"
    );
}

#[test]
fn without_the_backstop_the_exploration_reports_a_liveness_violation() {
    let report = explore(small_layout(), config(false), MAX_UNITS);
    println!(
        "backstop disabled: explored {} states; {} liveness violations, e.g. {:?}",
        report.states,
        report.liveness_count,
        report.liveness.first()
    );
    assert!(
        report.safety.is_empty(),
        "safety still holds without the backstop: {:#?}",
        report.safety
    );
    assert!(
        report.liveness_count > 0,
        "the exploration must catch the missing wake source"
    );
    assert!(
        report.liveness.iter().any(|v| v.contains("in flight 0")),
        "the crawl shape (held backlog, nothing in flight) is among the violations: {:#?}",
        report.liveness
    );
}

/// The larger bound: queue capacity 3, three solver seats (walk admission
/// 2), two sim and two registrar seats, up to 8 units (backlog ≤ 8). Runs in
/// release builds (the README's test command and `.ci/run` build the tests
/// in release, ≈ 20 s); a debug build would take minutes, so there it is
/// ignored.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "larger bound: minutes in a debug build; runs in release (.ci/run)"
)]
fn safety_and_liveness_hold_at_the_larger_bound() {
    let layout = fleet::pump::HostLayout {
        host: "explore-large".into(),
        seats: vec![
            (fleet::WorkerRole::Solver, 3),
            (fleet::WorkerRole::SimDriver, 2),
            (fleet::WorkerRole::Registrar, 2),
        ],
        queue_capacity: 3,
        walk_admission: 2,
        sim_slot_cap: 2,
    };
    let report = explore(layout, config(true), 8);
    println!(
        "larger bound: explored {} states, {} transitions; {} Backed states checked; {} faulted, {} loud",
        report.states, report.transitions, report.backed_checked, report.faulted_states, report.loud_states
    );
    assert!(
        report.safety.is_empty(),
        "safety violations: {:#?}",
        report.safety
    );
    assert!(
        report.liveness.is_empty(),
        "liveness violations: {:#?}",
        report.liveness
    );
}
