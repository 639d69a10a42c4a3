//! The routing lab at a small scale: determinism, each scenario's headline
//! property where it is robust at this size, and typed refusals of bad specs.
//! No timed assertions: wall-clock figures are left out.

use route_lab::driver::Cause;
use route_lab::report::{EventFigures, Timing};
use route_lab::{simulate, Contender, ContenderReport, Scenario, SimError, SimReport, SimSpec};

fn spec(scenario: Scenario, devices: usize, hours: f64) -> SimSpec {
    SimSpec::new(scenario, devices, hours, 7)
}

fn run(s: &SimSpec, contenders: &[Contender]) -> SimReport {
    simulate(s, contenders, &|_, _| {}).expect("the simulation runs")
}

fn without_timing(mut r: SimReport) -> SimReport {
    for c in &mut r.contenders {
        c.timing = Timing::default();
    }
    r
}

fn router(r: &SimReport) -> &ContenderReport {
    r.contenders
        .iter()
        .find(|c| c.name == "router")
        .expect("the router ran")
}

#[test]
fn same_seed_same_figures() {
    let s = spec(Scenario::Liars, 24, 0.5);
    let cs = [Contender::Router, Contender::FlatThompson];
    let a = without_timing(run(&s, &cs));
    let b = without_timing(run(&s, &cs));
    assert!(a.contenders[0].attempts > 0, "work was done");
    assert!(a.control.is_none(), "only adapter-bug runs a control");
    assert_eq!(a, b);
    let mut other = s.clone();
    other.seed = 8;
    let c = without_timing(run(&other, &cs));
    assert_ne!(a.contenders[0].series, c.contenders[0].series);
}

#[test]
fn regret_by_work_kind_adds_up_to_the_regret() {
    let r = run(
        &spec(Scenario::Steady, 24, 0.5),
        &[Contender::Router, Contender::Greedy],
    );
    for c in &r.contenders {
        let kinds: Vec<&String> = c.regret_by_kind.keys().collect();
        // Every kind attempted but verification has its parts, and no other.
        let attempted: Vec<&String> = c
            .attempts_by_kind
            .keys()
            .filter(|k| k.as_str() != "verification")
            .collect();
        assert_eq!(kinds, attempted, "{}", c.name);
        assert!(kinds.iter().any(|k| k.as_str() == "first_observation"));
        let failures: f64 = c.regret_by_kind.values().map(|p| p.failures).sum();
        let cost: f64 = c.regret_by_kind.values().map(|p| p.cost).sum();
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs()));
        assert!(
            close(failures, c.regret_failures),
            "{}: {failures} against {}",
            c.name,
            c.regret_failures
        );
        assert!(
            close(cost, c.regret_cost),
            "{}: {cost} against {}",
            c.name,
            c.regret_cost
        );
        assert!(
            c.regret_failures != 0.0,
            "{}: some choice was not the oracle's",
            c.name
        );
    }
}

#[test]
fn the_router_never_outruns_a_host_in_any_scenario() {
    for scenario in Scenario::ALL {
        let r = run(&spec(scenario, 20, 0.25), &[Contender::Router]);
        let c = router(&r);
        assert!(c.attempts > 0, "{scenario}: work was done");
        assert_eq!(c.politeness_violations, 0, "{scenario}");
    }
}

#[test]
fn a_saturated_budget_is_never_overspent_in_any_window() {
    let r = run(
        &spec(Scenario::BudgetSaturation, 60, 1.0),
        &[Contender::Router],
    );
    let b = &router(&r).budget;
    assert!(!b.caps.is_empty(), "the scenario caps its pools");
    for (pool, cap) in &b.caps {
        let windows: Vec<f64> = b
            .windows
            .iter()
            .filter(|(_, p, _)| p == pool)
            .map(|(_, _, u)| *u)
            .collect();
        // Every closed window is reported, whether or not its price moved.
        assert!(windows.len() >= 50, "{pool}: {} windows", windows.len());
        for u in &windows {
            assert!(*u <= cap + 1e-9, "{pool}: usage {u} over cap {cap}");
        }
        assert_eq!(b.over_cap[pool], 0);
        // The cap binds: the scenario's caps are below what the fleet would spend.
        assert!(b.max_ratio[pool] > 0.5, "{pool}: {:?}", b.max_ratio);
    }
}

#[test]
fn liars_are_separated_and_rows_stay_correct() {
    let r = run(
        &spec(Scenario::Liars, 40, 1.0),
        &[Contender::Router, Contender::FixedQuorum],
    );
    let c = router(&r);
    assert!(r.world.liars > 0);
    let auc = c.trust_auc.expect("liars and honest devices deposited");
    assert!(auc >= 0.9, "AUC {auc}");
    assert!(c.correct_fraction >= 0.98, "{}", c.correct_fraction);
    let fq = &r.contenders[1];
    assert_eq!(fq.name, "fixed-quorum");
    assert_eq!(fq.trust_auc, Some(0.5), "no trust moves without trust");
}

#[test]
fn a_drought_reroutes_within_one_tick_of_the_browsers_leaving() {
    let s = spec(Scenario::Drought, 40, 1.5);
    let r = run(&s, &[Contender::Router]);
    let c = router(&r);
    let (from, _) = r.world.event_s.expect("a drought has a span");
    let gone = c.event.browsers_gone_s.expect("browsers left");
    // Live scope ends with the lease TTL (60 s); the next tick prunes.
    assert!(
        gone - from <= 60.0 + s.tick_s,
        "gone {gone}, drought from {from}"
    );
    let delay = c
        .event
        .reroute_delay_s
        .expect("browser work went elsewhere");
    assert!(
        delay <= s.tick_s,
        "re-routed {delay} s after the browsers left"
    );
    assert_eq!(c.event.browser_grants_while_gone.unwrap_or(0), 0);
    // Devices long-poll their leases: an idle device gets work when it
    // becomes admissible, so the drought keeps the containers busy
    // (ROUTING.md §5: occupancy ≥ 99 % whenever admissible work existed).
    let during = c
        .event
        .occupancy_during
        .expect("occupancy over the drought");
    assert!(during >= 0.99, "occupancy during the drought {during}");
    assert!(
        c.occupancy >= 0.99,
        "occupancy over the run {}",
        c.occupancy
    );
}

#[test]
fn an_adapter_bug_is_recognised_and_its_trust_moves_do_not_stack() {
    let r = run(&spec(Scenario::AdapterBug, 40, 1.5), &[Contender::Router]);
    let c = router(&r);
    assert!(
        c.event.adapter_events.iter().any(|e| e.1 == "src-1"),
        "{:?}",
        c.event.adapter_events
    );
    // Trust the bug's disagreements moved is given back when its cluster is
    // confirmed (`ROUTING.md` §3 Trust). What can remain below its value at
    // the bug's start is an ordinary disagreement the run ended before an
    // agreement won back: by the world's truth, a content change between two
    // honest observations (or a liar's forgery), never the bug's.
    // The ledger's mirror follows the router: every side it read moved the
    // way its cause says.
    only_ordinary_losses(&c.event);
    // The control: the same world with the upgrade scraping correctly. No
    // cluster may be confirmed there (cross-version comparisons without a
    // bug are churn), and what ends lower is ordinary too.
    let control = r.control.as_ref().expect("the router's control ran");
    assert!(
        control.adapter_events.is_empty(),
        "{:?}",
        control.adapter_events
    );
    only_ordinary_losses(control);
}

/// The ledger's mirror follows the router (every side it read moved the way
/// its cause says), and each device that ended below its trust at the bug's
/// start carries only losses from a content change or a liar.
fn only_ordinary_losses(e: &EventFigures) {
    let (sides, wrong) = e.ledger_checks.expect("the ledger ran");
    assert!(sides > 1_000, "{sides} sides checked");
    assert_eq!(wrong, 0, "of {sides}");
    let lower = &e.lower_devices;
    assert_eq!(lower.len(), e.devices_lower_than_before.unwrap_or(0));
    for d in lower {
        assert!(!d.losses.is_empty(), "{d:?}");
        for l in &d.losses {
            assert!(
                matches!(l.cause, Cause::ContentChange | Cause::Liar),
                "{} ended at {} below its {} with a loss the bug caused or nothing explains: {l:?}",
                d.device,
                d.after,
                d.before
            );
        }
    }
}

#[test]
fn a_regime_change_is_detected_on_its_cell() {
    let r = run(&spec(Scenario::RegimeChange, 40, 1.5), &[Contender::Router]);
    let c = router(&r);
    assert!(c.drift.iter().any(|m| !m.false_alarm), "{:?}", c.drift);
    assert!(c.event.drift_delay_s.is_some());
}

#[test]
fn bad_specs_are_typed_errors() {
    assert!(matches!(
        Scenario::parse("monsoon"),
        Err(SimError::UnknownScenario(_))
    ));
    for bad in [
        SimSpec::new(Scenario::Steady, 0, 1.0, 1),
        SimSpec::new(Scenario::Steady, 100_001, 1.0, 1),
        SimSpec::new(Scenario::Steady, 10, 0.0, 1),
        SimSpec::new(Scenario::Steady, 10, f64::NAN, 1),
        SimSpec::new(Scenario::Steady, 10, 169.0, 1),
        SimSpec {
            tick_s: 0.5,
            ..SimSpec::new(Scenario::Steady, 10, 1.0, 1)
        },
        SimSpec {
            sample_s: 10.0,
            ..SimSpec::new(Scenario::Steady, 10, 1.0, 1)
        },
    ] {
        let e = simulate(&bad, &[Contender::Router], &|_, _| {}).unwrap_err();
        assert!(matches!(e, SimError::BadSpec(_)), "{e}");
    }
}
