use super::*;
use crate::archetype::BROWSER;
use crate::scenario::{Scenario, SimSpec};
use crate::World;

/// The example of docs/routing-lab.md ("Worlds as files"), written from
/// scratch: the docs quote this text.
pub(crate) const EXAMPLE: &str = r#"
name = "flaky-night"
description = "liars among the browsers, and the browsers gone for the last quarter"

[sources]
count = 40
targets_per_source = 10
arrival_waves = 2

[population]
liar_share_of_browsers = 0.1

[events.drought]
from = 0.75
to = 1.0

[budget]
caps_share_of_demand = 0.8
"#;

#[test]
fn every_shipped_world_parses_and_is_its_scenario() {
    for s in Scenario::ALL {
        let p = s.plan().unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(p.name, s.name());
        assert_eq!(
            p.description,
            s.describe(),
            "{s}: the file and the help text agree"
        );
    }
}

#[test]
fn the_shipped_worlds_place_their_events_where_the_scenarios_did() {
    // The formulas the scenarios were built with before they were files,
    // to the last bit: the figures stay the same.
    for hours in [0.25, 1.5, 2.0, 4.0, 6.0, 7.0] {
        let end = hours * 3600.0;
        let world = |s: Scenario| World::build(&SimSpec::new(s, 60, hours, 9)).unwrap();
        let w = world(Scenario::Drought);
        assert_eq!(w.drought, Some((end / 3.0, end * 7.0 / 12.0)));
        let w = world(Scenario::RegimeChange);
        assert_eq!(w.regime, Some((0, BROWSER, end / 3.0)));
        let w = world(Scenario::AdapterBug);
        assert_eq!(w.bug, Some((1, end / 3.0)));
        let up: Vec<_> = w.devices.iter().filter_map(|d| d.upgrade_at).collect();
        assert_eq!(up.len(), 18, "30 % of 60");
        assert!(up.iter().all(|&t| t == end / 3.0));
        let w = world(Scenario::Liars);
        let browsers = w.devices.iter().filter(|d| d.archetype == BROWSER).count();
        let liars = w.devices.iter().filter(|d| d.liar).count();
        assert_eq!(liars, (browsers as f64 * 0.2).round() as usize);
        let w = world(Scenario::ColdStart);
        assert_eq!((w.sources.len(), w.targets.len()), (480, 480));
        for (s, src) in w.sources.iter().enumerate() {
            assert_eq!(src.arrives_s, (s * 8 / 480) as f64 * end / 8.0);
        }
        assert!(!world(Scenario::BudgetSaturation).caps.is_empty());
        let w = world(Scenario::Steady);
        assert!(w.caps.is_empty() && w.drought.is_none() && w.regime.is_none() && w.bug.is_none());
        assert_eq!((w.sources.len(), w.targets.len()), (24, 960));
        assert!(w.devices.iter().all(|d| !d.liar && d.upgrade_at.is_none()));
    }
}

#[test]
fn a_world_written_from_scratch_builds() {
    let plan = WorldPlan::parse(EXAMPLE).unwrap();
    let mut spec = SimSpec::new(Scenario::Steady, 80, 2.0, 3);
    spec.world = Some(plan);
    let w = World::build(&spec).unwrap();
    assert_eq!((w.sources.len(), w.targets.len()), (40, 400));
    assert_eq!(w.drought, Some((5400.0, 7200.0)));
    assert!(w.devices.iter().any(|d| d.liar));
    assert!(w.sources.iter().any(|s| s.arrives_s == 3600.0));
    assert!(!w.caps.is_empty() && w.bug.is_none() && w.regime.is_none());
    // The same plan, written back and read again, is the same plan.
    let again = WorldPlan::parse(&toml::to_string(&spec.world.clone().unwrap()).unwrap()).unwrap();
    assert_eq!(Some(again), spec.world);
}

fn refused(text: &str) -> PlanError {
    WorldPlan::parse(text).expect_err(text)
}

#[test]
fn a_bad_world_file_is_refused_naming_the_key() {
    let base = "name = \"x\"\ndescription = \"d\"\n[sources]\ncount = 10\ntargets_per_source = 2\n";
    // Unknown keys and wrong types: the parser names them.
    for (extra, needle) in [
        ("colour = 3\n", "colour"),
        ("[population]\nliars = 0.2\n", "liars"),
        ("[events.drought]\nfrom = \"1/3\"\n", "to"),
        (
            "[events.drought]\nfrom = \"third\"\nto = 0.5\n",
            "not a fraction",
        ),
        (
            "[budget]\ncaps_share_of_demand = \"half\"\n",
            "caps_share_of_demand",
        ),
    ] {
        match refused(&format!("{base}{extra}")) {
            PlanError::Parse(m) => assert!(m.contains(needle), "{extra:?}: {m}"),
            e => panic!("{extra:?}: {e}"),
        }
    }
    assert!(matches!(refused("name = [\n"), PlanError::Parse(_)));
    // Values out of range or contradicting each other: the key is named.
    for (text, key) in [
        (base.replace("count = 10", "count = 1"), "sources.count"),
        (base.replace("count = 10", "count = 20000"), "sources.count"),
        (
            base.replace("targets_per_source = 2", "targets_per_source = 0"),
            "sources.targets_per_source",
        ),
        (
            format!("{base}arrival_waves = 11\n"),
            "sources.arrival_waves",
        ),
        (
            format!("{base}[population]\nliar_share_of_browsers = 1.5\n"),
            "population.liar_share_of_browsers",
        ),
        (
            format!("{base}[events.drought]\nfrom = 0.5\nto = 0.25\n"),
            "events.drought.to",
        ),
        (
            format!("{base}[events.drought]\nfrom = \"1/0\"\nto = 0.5\n"),
            "events.drought.from",
        ),
        (
            format!("{base}[events.drought]\nfrom = 0.1\nto = 2.0\n"),
            "events.drought.to",
        ),
        (
            format!(
                "{base}[events.regime_change]\nsource = 10\narchetype = \"browser\"\nat = 0.5\n"
            ),
            "events.regime_change.source",
        ),
        (
            format!("{base}[events.regime_change]\nsource = 0\narchetype = \"phone\"\nat = 0.5\n"),
            "events.regime_change.archetype",
        ),
        (
            format!("{base}[events.adapter_bug]\nsource = 1\nat = 0.5\nupgrade_share = 0\n"),
            "events.adapter_bug.upgrade_share",
        ),
        (
            format!("{base}[budget]\ncaps_share_of_demand = 0\n"),
            "budget.caps_share_of_demand",
        ),
        (base.replace("name = \"x\"", "name = \" \""), "name"),
    ] {
        match refused(&text) {
            PlanError::Key { key: k, .. } => assert_eq!(k, key, "{text}"),
            e => panic!("{text}: {e}"),
        }
    }
}
