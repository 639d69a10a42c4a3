use super::super::WorldPlan;
use super::*;
use crate::archetype::{BROWSER, DESKTOP, PLAIN, RENDER};
use crate::report::ChangeFigures;
use crate::scenario::{Scenario, SimSpec};
use crate::{Contender, World};

const BASE: &str =
    "name = \"x\"\ndescription = \"d\"\n[sources]\ncount = 10\ntargets_per_source = 4\n";

/// The documented example: walls, a refusal and a crawl delay that come
/// and go.
const MOVING: &str = include_str!("../../../docs/worlds/moving-walls.toml");

fn spec(text: &str, hours: f64, seed: u64) -> SimSpec {
    let mut spec = SimSpec::new(Scenario::Steady, 150, hours, seed);
    spec.world = Some(WorldPlan::parse(text).expect("parses"));
    spec
}

fn change(body: &str) -> String {
    format!("{BASE}[[events.source_change]]\n{body}\n")
}

#[test]
fn a_bad_source_change_is_refused_naming_the_key() {
    for (body, key) in [
        ("source = 10\nat = 0.5\nantibot = true", "events.source_change.source"),
        ("source = 1\nat = 1.5\nantibot = true", "events.source_change.at"),
        ("source = 1\nat = 0.5", "events.source_change"),
        ("source = 1\nat = 0.5\nrefuses = [\"phone\"]", "events.source_change.refuses"),
        ("source = 1\nat = 0.5\nallows = [\"tablet\"]", "events.source_change.allows"),
        (
            "source = 1\nat = 0.5\nrefuses = [\"desktop\"]\nallows = [\"desktop\"]",
            "events.source_change.allows",
        ),
        (
            "source = 1\nat = 0.5\nsuccess = { browser = -0.1, desktop = 0.5, container_render = 0.5, container_plain = 0.5 }",
            "events.source_change.success",
        ),
        (
            "source = 1\nat = 0.5\nlatency_s = { browser = 1, desktop = 1, container_render = 1, container_plain = 4000 }",
            "events.source_change.latency_s",
        ),
        ("source = 1\nat = 0.5\ncrawl_delay_s = 301", "events.source_change.crawl_delay_s"),
        ("source = 1\nat = 0.5\ncrawl_delay_s = -1", "events.source_change.crawl_delay_s"),
        ("source = 1\nat = 0.5\nretry_after_s = nan", "events.source_change.retry_after_s"),
    ] {
        match WorldPlan::parse(&change(body)) {
            Err(PlanError::Key { key: k, .. }) => assert_eq!(k, key, "{body}"),
            other => panic!("{body}: {other:?}"),
        }
    }
    // One source, one time: one entry.
    let twice = change("source = 4\nat = \"1/2\"\nantibot = true\n[[events.source_change]]\nsource = 4\nat = 0.5\nresidential = true");
    assert!(matches!(
        WorldPlan::parse(&twice),
        Err(PlanError::Key {
            key: "events.source_change.at",
            ..
        })
    ));
    // Sources 4 and 5 share host-4: its politeness changes once at a time.
    let host = change("source = 4\nat = 0.5\ncrawl_delay_s = 5\n[[events.source_change]]\nsource = 5\nat = 0.5\nretry_after_s = 5");
    match WorldPlan::parse(&host) {
        Err(PlanError::Key { key, reason }) => {
            assert_eq!(key, "events.source_change.crawl_delay_s");
            assert!(reason.contains("host-4.example"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // At different times, or on different hosts, both stand.
    assert!(WorldPlan::parse(&change("source = 4\nat = 0.5\ncrawl_delay_s = 5\n[[events.source_change]]\nsource = 5\nat = 0.75\ncrawl_delay_s = 0")).is_ok());
    let unknown = change("source = 1\nat = 0.5\nrobots = true");
    assert!(matches!(WorldPlan::parse(&unknown), Err(PlanError::Parse(m)) if m.contains("robots")));
}

#[test]
fn changes_stack_in_time_and_reach_the_whole_host() {
    let text = format!(
        "{BASE}{}",
        r#"
[[sources.set]]
source = 6
success = { browser = 0.5, desktop = 0.9, container_render = 0.8, container_plain = 0.7 }
needs_js = false
cors_closed = false
antibot = false
residential = false

[[events.source_change]]
source = 6
at = "1/4"
antibot = true
refuses = ["desktop"]

[[events.source_change]]
source = 6
at = "1/2"
antibot = false
allows = ["desktop"]
cors_closed = true

[[events.source_change]]
source = 3
at = "1/2"
crawl_delay_s = 30
retry_after_s = 90

[[events.source_change]]
source = 2
at = "3/4"
crawl_delay_s = 0
"#
    );
    let s = spec(&text, 4.0, 5);
    let w = World::build(&s).unwrap();
    let end = s.end_s();
    // The start is the world without the changes, draw for draw.
    let mut plain = s.clone();
    plain.world = Some(
        WorldPlan::parse(&format!(
            "{BASE}{}",
            &text[BASE.len()..text.find("[[events").unwrap()]
        ))
        .unwrap(),
    );
    assert_eq!(World::build(&plain).unwrap().sources, w.sources);
    // src-6: open, then containers walled and desktops refused, then
    // browsers walled and the rest back.
    let (q1, mid, q3) = (end / 4.0, end / 2.0, end * 3.0 / 4.0);
    assert!((0..4).all(|a| w.gate_class(6, a, q1 - 1.0).is_none()));
    assert!((0..4).all(|a| w.p_success(6, a, q1 - 1.0) > 0.0));
    assert_eq!(w.gate_class(6, RENDER, q1), Some("antibot"));
    assert_eq!(w.gate_class(6, PLAIN, q1), Some("antibot"));
    assert_eq!(w.gate_class(6, DESKTOP, q1), None);
    assert_eq!(w.p_success(6, DESKTOP, q1), 0.0);
    assert!(w.p_success(6, BROWSER, q1) > 0.4);
    let t = w.targets.iter().position(|t| t.source == 6).unwrap();
    let desktop = w
        .devices
        .iter()
        .position(|d| d.archetype == DESKTOP && d.blocked.is_empty())
        .unwrap();
    let refused = w.attempt(desktop, t, q1 + 1.0, 0);
    assert_eq!((refused.ok, refused.error_class), (false, Some("http_403")));
    assert_eq!(w.gate_class(6, BROWSER, mid), Some("cors"));
    assert!((w.p_success(6, DESKTOP, mid) - 0.9).abs() < 1e-9);
    assert!((w.p_success(6, RENDER, mid) - 0.8).abs() < 1e-9);
    // host-2: the delay written through src-3 reaches src-2, then src-2
    // lifts it (the Retry-After stays).
    for src in [2, 3] {
        assert_eq!(w.source_at(src, mid - 1.0).crawl_delay_s, None);
        assert_eq!(w.source_at(src, mid).crawl_delay_s, Some(30.0));
        assert_eq!(w.source_at(src, mid).true_bucket(), (1.0, 1.0 / 30.0));
        assert_eq!(w.source_at(src, q3).crawl_delay_s, None);
        assert_eq!(w.source_at(src, q3).retry_after_s, Some(90.0));
    }
    let on_host = w.sources[2].targets.start;
    assert!(w.throttled(on_host, mid - 1.0).is_none());
    assert_eq!(
        w.throttled(on_host, mid).and_then(|a| a.retry_after_s),
        Some(90.0)
    );
    // Nothing else moved.
    for src in (0..10).filter(|s| ![2, 3, 6].contains(s)) {
        assert_eq!(w.source_at(src, end), &w.sources[src]);
    }
}

/// The figures of the change of `source` at `at_h` hours.
fn figures<'a>(c: &'a crate::ContenderReport, source: &str, at_h: f64) -> &'a ChangeFigures {
    c.event
        .changes
        .iter()
        .find(|f| f.source == source && (f.at_s - at_h * 3600.0).abs() < 1.0)
        .unwrap_or_else(|| panic!("{source} at {at_h} h: {:?}", c.event.changes))
}

fn sum(counts: [u64; 4], archetypes: &[usize]) -> u64 {
    archetypes.iter().map(|&a| counts[a]).sum()
}

#[test]
fn the_router_finds_walls_and_refusals_that_come_and_go() {
    let s = spec(MOVING, 4.0, 3);
    let r = crate::simulate(&s, &[Contender::Router], &|_, _| {}).unwrap();
    let c = &r.contenders[0];
    let containers = [RENDER, PLAIN];
    // The antibot wall (a gate class the devices report): shut within a
    // few attempts, and the containers back at once when it falls.
    let shut = figures(c, "src-6", 1.0);
    assert_eq!(shut.shut, ["container_render", "container_plain"]);
    let before = sum(shut.hour_before, &containers);
    assert!(before > 500, "the containers were src-6's choice: {shut:?}");
    assert!(
        sum(shut.first_hour_after, &containers) * 20 <= before,
        "{shut:?}"
    );
    let opened = figures(c, "src-6", 2.5);
    assert_eq!(opened.opened, ["container_render", "container_plain"]);
    assert!(
        sum(opened.first_hour_after, &containers) * 4 >= before,
        "{opened:?}"
    );
    // The plain refusal (403s, no gate class): found from the failures.
    let refusal = figures(c, "src-7", 4.0 / 3.0);
    assert_eq!(refusal.shut, ["desktop"]);
    let before = refusal.hour_before[DESKTOP];
    assert!(before > 200, "desktops were src-7's choice: {refusal:?}");
    assert!(refusal.after[DESKTOP] * 3 <= before, "{refusal:?}");
    let lifted = figures(c, "src-7", 8.0 / 3.0);
    assert_eq!(lifted.opened, ["desktop"]);
    // host-2's crawl delay, undeclared, from halfway: no violation before,
    // and it is learned (none in the last quarter).
    let at = |t: f64| {
        c.series
            .iter()
            .rev()
            .find(|x| x.t_s <= t)
            .map_or(0, |x| x.violations)
    };
    let end = s.end_s();
    assert_eq!(
        at(end / 2.0 - 1.0),
        0,
        "host-2 kept its declared limit until then"
    );
    assert_eq!(
        c.politeness_violations,
        at(end * 3.0 / 4.0),
        "the delay was learned"
    );
}
