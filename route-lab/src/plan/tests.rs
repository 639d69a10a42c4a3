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

const BASE: &str =
    "name = \"x\"\ndescription = \"d\"\n[sources]\ncount = 10\ntargets_per_source = 2\n";

#[test]
fn population_and_event_keys_out_of_range_are_refused_naming_the_key() {
    let base = BASE;
    for (text, key) in [
        (
            format!("{base}[population.shares]\nbrowser = 0.5\ndesktop = 0.5\ncontainer_render = 0.5\ncontainer_plain = 0\n"),
            "population.shares",
        ),
        (
            format!("{base}[population.sessions]\nbrowser = {{ on_h = 0, off_h = 1 }}\ndesktop = {{ on_h = 1, off_h = 1 }}\ncontainer_render = {{ on_h = 1, off_h = 0 }}\ncontainer_plain = {{ on_h = 1, off_h = 0 }}\n"),
            "population.sessions",
        ),
        (
            format!("{base}[[events.dropout]]\narchetype = \"tablet\"\nfrom = 0.1\nto = 0.2\n"),
            "events.dropout.archetype",
        ),
        (
            format!("{base}[[events.dropout]]\narchetype = \"desktop\"\nfrom = 0.3\nto = 0.2\n"),
            "events.dropout.to",
        ),
        (
            format!("{base}[[events.dropout]]\narchetype = \"desktop\"\nfrom = 0.1\nto = 0.2\nshare = 0\n"),
            "events.dropout.share",
        ),
        (
            format!("{base}[[events.burst]]\narchetype = \"browser\"\ncount = 0\nat = 0.5\n"),
            "events.burst.count",
        ),
        (
            format!("{base}[[events.burst]]\narchetype = \"browser\"\ncount = 5\nat = 1.5\n"),
            "events.burst.at",
        ),
        (
            format!("{base}[[events.burst]]\narchetype = \"browser\"\ncount = 5\nat = 0.5\nwithin_s = -1\n"),
            "events.burst.within_s",
        ),
        (
            format!("{base}[[events.burst]]\narchetype = \"browser\"\ncount = 5\nat = 0.5\nliar_share = 2\n"),
            "events.burst.liar_share",
        ),
        (
            format!("{base}[events.adapter_bug]\nsource = 1\nat = 0.75\nupgrade_share = 0.5\nover = 0.5\n"),
            "events.adapter_bug.over",
        ),
    ] {
        match refused(&text) {
            PlanError::Key { key: k, .. } => assert_eq!(k, key, "{text}"),
            e => panic!("{text}: {e}"),
        }
    }
}

#[test]
fn a_bad_world_file_is_refused_naming_the_key() {
    let base = BASE;
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

/// A world with every population key: shares, sessions, a gradual
/// rollout, a dropout and a burst (docs/routing-lab.md quotes it).
pub(crate) const POPULATIONS: &str = r#"
name = "newcomers"
description = "desktops drop out for a while, a burst of browsers registers, an adapter rolls out gradually"

[sources]
count = 12
targets_per_source = 10

[population.shares]
browser = 0.5
desktop = 0.3
container_render = 0.1
container_plain = 0.1

[population.sessions]
browser = { on_h = 2.0, off_h = 0.5 }
desktop = { on_h = 6.0, off_h = 0.0 }
container_render = { on_h = 1.0, off_h = 0.0 }
container_plain = { on_h = 1.0, off_h = 0.0 }

[events.adapter_bug]
source = 1
at = "1/4"
upgrade_share = 0.5
over = "1/4"

[[events.dropout]]
archetype = "desktop"
from = "1/2"
to = "3/4"
share = 0.5

[[events.burst]]
archetype = "browser"
count = 30
at = "1/3"
within_s = 120
liar_share = 0.2
"#;

#[test]
fn population_keys_shape_the_devices() {
    use crate::archetype::ARCHETYPES;
    let plan = WorldPlan::parse(POPULATIONS).unwrap();
    let mut spec = SimSpec::new(Scenario::Steady, 100, 4.0, 3);
    spec.world = Some(plan);
    let w = World::build(&spec).unwrap();
    let end = spec.end_s();
    let kind = |a: &str| ARCHETYPES.iter().position(|x| *x == a).unwrap();
    let (browser, desktop) = (kind("browser"), kind("desktop"));
    assert_eq!(w.devices.len(), 130, "100 from the start, 30 in the burst");
    let start: Vec<_> = w.devices[..100].iter().map(|d| d.archetype).collect();
    for (a, n) in [(browser, 50), (desktop, 30), (2, 10), (3, 10)] {
        assert_eq!(
            start.iter().filter(|x| **x == a).count(),
            n,
            "{}",
            ARCHETYPES[a]
        );
    }
    // The burst: browsers online on arrival within two minutes of 1/3, not before.
    let at = end / 3.0;
    for d in &w.devices[100..] {
        assert_eq!(d.archetype, browser);
        let first = d.sessions.first().expect("a burst device comes online");
        assert!(first.0 >= at && first.0 <= at + 120.0, "{:?}", d.sessions);
    }
    let burst_liars = w.devices[100..].iter().filter(|d| d.liar).count();
    assert_eq!(burst_liars, 6, "20 % of 30");
    assert!(
        w.devices[..100].iter().all(|d| !d.liar),
        "no liars from the start"
    );
    // The dropout: half the desktops (always online otherwise) offline in [1/2, 3/4).
    let mid = end * 5.0 / 8.0;
    let desktops: Vec<usize> = (0..w.devices.len())
        .filter(|&i| w.devices[i].archetype == desktop)
        .collect();
    let off = desktops.iter().filter(|&&i| !w.online(i, mid)).count();
    assert_eq!(off, 15, "half of 30 desktops");
    assert!(
        desktops.iter().all(|&i| w.online(i, end * 0.8)),
        "back after 3/4"
    );
    // The rollout: 50 of the 100 upgrade, evenly from 1/4 to 1/2.
    let mut up: Vec<f64> = w.devices.iter().filter_map(|d| d.upgrade_at).collect();
    up.sort_by(f64::total_cmp);
    assert_eq!(up.len(), 50);
    assert_eq!(up[0], end / 4.0);
    for (j, t) in up.iter().enumerate() {
        assert!(
            (t - (end / 4.0 + end / 4.0 * j as f64 / 50.0)).abs() < 1e-6,
            "{j}: {t}"
        );
    }
    assert!(*up.last().unwrap() < end / 2.0);
}

/// The driver follows the population keys: the burst registers and works,
/// the dropped-out desktops stop working and come back.
#[test]
fn a_world_with_a_burst_and_a_dropout_runs() {
    let mut spec = SimSpec::new(Scenario::Steady, 60, 1.0, 4);
    spec.world = Some(WorldPlan::parse(POPULATIONS).unwrap());
    let r = crate::simulate(&spec, &[crate::Contender::Router], &|_, _| {}).unwrap();
    let end = spec.end_s();
    let series = &r.contenders[0].series;
    let online = |t: f64, a: &str| {
        let s = series.iter().rev().find(|s| s.t_s <= t).expect("a sample");
        s.online[a]
    };
    let before = online(end / 3.0 - 1.0, "browser");
    let after = online(end / 3.0 + 150.0, "browser");
    assert!(
        after >= before + 25,
        "the burst came online: {before} → {after}"
    );
    assert_eq!(
        r.world.devices["browser"],
        30 + 30,
        "30 from the start, 30 in the burst"
    );
    let desktops = r.world.devices["desktop"];
    assert_eq!(online(end * 0.6, "desktop"), desktops - desktops / 2);
    assert_eq!(online(end * 0.9, "desktop"), desktops);
    assert_eq!(r.world.liars, 6);
    assert!(r.contenders[0].attempts > 0);
}

#[test]
fn a_correct_adapter_rollout_is_the_bugs_control_and_costs_nothing() {
    let rollout = "[[events.adapter_rollout]]\nat = \"1/4\"\nupgrade_share = 0.5\nover = \"1/4\"\n";
    let mut spec = SimSpec::new(Scenario::Steady, 40, 2.0, 6);
    spec.world = Some(WorldPlan::parse(&format!("{BASE}{rollout}")).unwrap());
    let w = World::build(&spec).unwrap();
    let end = spec.end_s();
    assert!(w.devices.iter().all(|d| d.upgrade_at.is_none()));
    let upgrades: Vec<f64> = w
        .devices
        .iter()
        .flat_map(|d| d.rollouts.iter().map(|&(t, _)| t))
        .collect();
    assert_eq!(upgrades.len(), 20, "half of the 40 devices");
    assert!(upgrades
        .iter()
        .all(|t| (end / 4.0..=end / 2.0 + 1e-9).contains(t)));
    assert!(w.bug_fixed && w.bug == Some((0, end / 4.0)));
    // Every hash the upgraded adapter writes is genuine.
    for d in 0..w.devices.len() {
        let version = w.adapter_at(d, end);
        for k in 0..w.targets.len() {
            if !w.devices[d].liar {
                assert_eq!(w.hash_kind(d, k, version), crate::world::HashKind::Genuine);
            }
        }
    }
    let r = crate::simulate(&spec, &[crate::Contender::Router], &|_, _| {}).unwrap();
    assert!(r.control.is_none(), "a correct rollout is its own control");
    let ev = &r.contenders[0].event;
    assert!(
        ev.devices_before.is_some_and(|n| n > 0),
        "trust is traced from the start of the rollout"
    );
    let bug_losses = ev
        .lower_devices
        .iter()
        .flat_map(|d| &d.losses)
        .filter(|l| matches!(l.cause, crate::driver::Cause::Bug))
        .count();
    assert_eq!(bug_losses, 0);
    assert!(ev.adapter_events.is_empty(), "{:?}", ev.adapter_events);
    for (bad_text, key) in [
        (
            "[[events.adapter_rollout]]\nat = 0.5\nupgrade_share = 0\n",
            "events.adapter_rollout.upgrade_share",
        ),
        (
            "[[events.adapter_rollout]]\nat = 0.75\nupgrade_share = 1\nover = 0.5\n",
            "events.adapter_rollout.over",
        ),
        (
            "[[events.adapter_rollout]]\nat = 1.5\nupgrade_share = 1\n",
            "events.adapter_rollout.at",
        ),
        (
            "[[events.adapter_rollout]]\nat = 0.5\nupgrade_share = 1\n[[events.adapter_rollout]]\nat = \"1/2\"\nupgrade_share = 0.5\n",
            "events.adapter_rollout.at",
        ),
        (
            &"[[events.adapter_rollout]]\nat = 0.5\nupgrade_share = 1\n".repeat(9),
            "events.adapter_rollout",
        ),
    ] {
        match WorldPlan::parse(&format!("{BASE}{bad_text}")) {
            Err(PlanError::Key { key: k, .. }) => assert_eq!(k, key, "{bad_text}"),
            other => panic!("{bad_text}: {other:?}"),
        }
    }
    // The old single-table form is refused by the parser, naming the key.
    let table = format!("{BASE}[events.adapter_rollout]\nat = 0.5\nupgrade_share = 1\n");
    assert!(
        matches!(WorldPlan::parse(&table), Err(PlanError::Parse(m)) if m.contains("adapter_rollout"))
    );
}

#[test]
fn a_later_rollout_fixes_the_bug_on_the_devices_it_reaches() {
    // The bug reaches half the devices at 1/4; a correct version reaches
    // every device at 1/2; another a third of them at 3/4 (written first:
    // the entries are taken in time order).
    let text = format!(
        "{BASE}[events.adapter_bug]\nsource = 1\nat = \"1/4\"\nupgrade_share = 0.5\n\
         [[events.adapter_rollout]]\nat = 0.75\nupgrade_share = 0.3\n\
         [[events.adapter_rollout]]\nat = 0.5\nupgrade_share = 1\n"
    );
    let mut spec = SimSpec::new(Scenario::Steady, 40, 2.0, 7);
    spec.world = Some(WorldPlan::parse(&text).unwrap());
    let w = World::build(&spec).unwrap();
    let end = spec.end_s();
    assert!(!w.bug_fixed && w.bug == Some((1, end / 4.0)));
    let on_src1 = w.sources[1].targets.start;
    let (mut buggy, mut later) = (0, 0);
    for (d, dev) in w.devices.iter().enumerate() {
        assert_eq!(
            w.adapter_at(d, end / 4.0 - 1.0),
            crate::archetype::ADAPTER_OK
        );
        assert_eq!(w.adapter_at(d, end / 2.0), "3.4", "every device at 1/2");
        let at_3q = w.adapter_at(d, end);
        assert!(at_3q == "3.4" || at_3q == "3.5");
        later += usize::from(at_3q == "3.5");
        if dev.upgrade_at.is_some() && !dev.liar {
            buggy += 1;
            let v = w.adapter_at(d, end * 3.0 / 8.0);
            assert_eq!(v, crate::archetype::ADAPTER_BUGGY);
            assert_eq!(w.hash_kind(d, on_src1, v), crate::world::HashKind::Buggy);
            let v = w.adapter_at(d, end / 2.0);
            assert_eq!(w.hash_kind(d, on_src1, v), crate::world::HashKind::Genuine);
        }
    }
    assert_eq!(later, 12, "three tenths of 40");
    assert!(buggy > 0);
    let r = crate::simulate(&spec, &[crate::Contender::Router], &|_, _| {}).unwrap();
    let ev = &r.contenders[0].event;
    // The bug is found (its disagreement names the buggy version), and
    // neither correct version is ever part of an adapter event.
    assert!(
        ev.adapter_events.iter().any(|(_, _, v, _)| v == "3.3"),
        "{:?}",
        ev.adapter_events
    );
    assert!(
        ev.adapter_events
            .iter()
            .all(|(_, _, v, _)| v != "3.4" && v != "3.5"),
        "{:?}",
        ev.adapter_events
    );
}

#[test]
fn an_event_on_a_missing_source_names_the_count_it_broke() {
    for (text, key) in [
        (
            "[events.adapter_bug]\nsource = 10\nat = 0.5\nupgrade_share = 1\n",
            "events.adapter_bug.source",
        ),
        (
            "[events.regime_change]\nsource = 12\narchetype = \"browser\"\nat = 0.5\n",
            "events.regime_change.source",
        ),
    ] {
        match WorldPlan::parse(&format!("{BASE}{text}")) {
            Err(PlanError::Key { key: k, reason }) => {
                assert_eq!(k, key);
                assert!(reason.ends_with("but sources.count is 10"), "{reason}");
            }
            other => panic!("{text}: {other:?}"),
        }
    }
}
