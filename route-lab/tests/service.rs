//! The router as a service: every scenario, small, run once in process and
//! once against a real `routerd` over loopback HTTP (SQLite), gives the
//! same figures, because routerd runs on its manual clock and the lab
//! moves it to each request's simulated time (docs/routing-lab.md, "The
//! service end to end"). Nothing here depends on the host's speed.
//!
//! routerd is the binary the workspace's test build puts in
//! `target/release` (or `target/debug`) beside the test's own `deps`
//! directory; `ROUTERD=PATH` names another.

use std::path::PathBuf;

use route_lab::report::Timing;
use route_lab::{
    simulate, simulate_over, Contender, Scenario, ServiceSpec, SimError, SimReport, SimSpec,
    Transport,
};

fn routerd() -> PathBuf {
    if let Some(p) = std::env::var_os("ROUTERD") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the test's path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let p = dir.join("routerd");
    assert!(
        p.is_file(),
        "no routerd at {}: build it with `cargo build --release -p router` (the workspace's test build does), or set ROUTERD",
        p.display()
    );
    p
}

fn service() -> Transport {
    Transport::Service(ServiceSpec {
        routerd: routerd(),
        store: None,
    })
}

/// The figures without wall-clock timing and without the transport's name.
fn figures(mut r: SimReport) -> SimReport {
    for c in &mut r.contenders {
        c.timing = Timing::default();
    }
    r.transport.clear();
    r
}

/// `scenario`, small, in process and over routerd: the same figures.
fn same_figures(scenario: Scenario) {
    let router = [Contender::Router];
    let spec = SimSpec::new(scenario, 16, 0.25, 5);
    let local = simulate(&spec, &router, &|_, _| {}).expect("in process");
    let served = simulate_over(&spec, &router, &service(), &|_, _| {}).expect("over routerd");
    assert_eq!(local.transport, "in-process");
    assert_eq!(served.transport, "routerd over HTTP (sqlite)");
    let (local, served) = (figures(local), figures(served));
    assert!(
        local.contenders[0].attempts > 0,
        "{scenario}: work was done"
    );
    assert_eq!(
        local.contenders[0].events, served.contenders[0].events,
        "{scenario}: the same events"
    );
    assert_eq!(local, served, "{scenario}");
}

#[test]
fn every_scenario_is_a_test_here() {
    assert_eq!(Scenario::ALL.len(), 7, "a new scenario gets its test below");
}

#[test]
fn steady_over_routerd() {
    same_figures(Scenario::Steady);
}

#[test]
fn drought_over_routerd() {
    same_figures(Scenario::Drought);
}

#[test]
fn regime_change_over_routerd() {
    same_figures(Scenario::RegimeChange);
}

#[test]
fn liars_over_routerd() {
    same_figures(Scenario::Liars);
}

#[test]
fn adapter_bug_over_routerd_with_its_control() {
    same_figures(Scenario::AdapterBug);
}

#[test]
fn budget_saturation_over_routerd() {
    same_figures(Scenario::BudgetSaturation);
}

#[test]
fn cold_start_over_routerd() {
    same_figures(Scenario::ColdStart);
}

#[test]
fn only_the_router_runs_over_routerd_and_a_missing_binary_is_a_typed_error() {
    let spec = SimSpec::new(Scenario::Steady, 8, 0.1, 1);
    let e = simulate_over(
        &spec,
        &[Contender::Router, Contender::Greedy],
        &service(),
        &|_, _| {},
    )
    .unwrap_err();
    assert!(
        matches!(&e, SimError::BadSpec(m) if m.contains("greedy")),
        "{e}"
    );
    let nowhere = Transport::Service(ServiceSpec {
        routerd: PathBuf::from("/nonexistent/routerd"),
        store: None,
    });
    let e = simulate_over(&spec, &[Contender::Router], &nowhere, &|_, _| {}).unwrap_err();
    assert!(
        matches!(&e, SimError::Service(m) if m.contains("/nonexistent/routerd")),
        "{e}"
    );
}

/// A routerd that answers nothing (here: a program that prints routerd's
/// first line and exits) ends the run with an error, never a report.
#[test]
fn a_routerd_that_stops_answering_is_an_error_not_a_report() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("routerd");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'routerd listening on http://127.0.0.1:9'\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let gone = Transport::Service(ServiceSpec {
        routerd: fake,
        store: None,
    });
    let spec = SimSpec::new(Scenario::Steady, 8, 0.1, 1);
    let e = simulate_over(&spec, &[Contender::Router], &gone, &|_, _| {}).unwrap_err();
    assert!(e.to_string().contains("unreachable"), "{e}");
}
