use super::super::WorldPlan;
use super::*;
use crate::archetype::{BROWSER, DESKTOP, PLAIN, RENDER};
use crate::scenario::{Scenario, SimSpec};
use crate::World;

const BASE: &str =
    "name = \"x\"\ndescription = \"d\"\n[sources]\ncount = 10\ntargets_per_source = 4\n";

/// Source 6 written out whole; host-2 (sources 2 and 3) given a crawl
/// delay and a Retry-After through source 3.
const WRITTEN: &str = r#"
[[sources.set]]
source = 6
success = { browser = 0.9, desktop = 0.5, container_render = 0.25, container_plain = 0.1 }
latency_s = { browser = 4.0, desktop = 3.0, container_render = 6.0, container_plain = 1.5 }
needs_js = false
cors_closed = false
antibot = false
residential = false
change_timescale_h = 2.0
bucket = { capacity = 4, per_s = 0.5 }

[[sources.set]]
source = 3
crawl_delay_s = 30
retry_after_s = 120
"#;

fn world(extra: &str, seed: u64) -> World {
    let mut spec = SimSpec::new(Scenario::Steady, 40, 1.0, seed);
    spec.world = Some(WorldPlan::parse(&format!("{BASE}{extra}")).expect("parses"));
    World::build(&spec).expect("builds")
}

#[test]
fn a_written_source_replaces_its_draw_and_nothing_else() {
    let drawn = world("", 5);
    let w = world(WRITTEN, 5);
    let s = &w.sources[6];
    for (a, p) in [(BROWSER, 0.9), (DESKTOP, 0.5), (RENDER, 0.25), (PLAIN, 0.1)] {
        assert!((w.p_success(6, a, 0.0) - p).abs() < 1e-12, "{a}");
        assert!(w.gate_class(6, a, 0.0).is_none());
    }
    for (a, l) in [
        (BROWSER, 4.0f64),
        (DESKTOP, 3.0),
        (RENDER, 6.0),
        (PLAIN, 1.5),
    ] {
        assert!((s.ln_latency[a] - l.ln()).abs() < 1e-12);
    }
    assert_eq!(s.change_timescale_s, 7200.0);
    assert_eq!((s.bucket, s.true_bucket()), ((4.0, 0.5), (4.0, 0.5)));
    // Each target keeps its drawn spread around the new timescale.
    let ratio = 7200.0 / drawn.sources[6].change_timescale_s;
    for k in s.targets.clone() {
        let want = drawn.targets[k].period_s * ratio;
        assert!((w.targets[k].period_s - want).abs() < 1e-6 * want);
        assert!((0.7 * 7200.0..=1.3 * 7200.0).contains(&w.targets[k].period_s));
    }
    // The crawl delay and Retry-After reach both sources of host-2; the
    // operator still declares the drawn bucket, the truth is stricter.
    for i in [2, 3] {
        let h = &w.sources[i];
        assert_eq!(
            (h.crawl_delay_s, h.retry_after_s),
            (Some(30.0), Some(120.0))
        );
        assert_eq!(h.bucket, drawn.sources[i].bucket);
        assert_eq!(h.true_bucket(), (1.0, 1.0 / 30.0));
    }
    let throttled = w.throttled(w.sources[2].targets.start, 0.0).expect("a 429");
    assert_eq!(
        (throttled.error_class, throttled.retry_after_s),
        (Some("http_429"), Some(120.0))
    );
    assert!(w.throttled(w.sources[6].targets.start, 0.0).is_none());
    // Every other source, every target elsewhere and every device: the draw.
    for i in [0, 1, 4, 5, 7, 8, 9] {
        assert_eq!(w.sources[i], drawn.sources[i], "source {i}");
    }
    assert_eq!(w.devices, drawn.devices);
    for k in 0..w.targets.len() {
        if !s.targets.contains(&k) {
            assert_eq!(w.targets[k], drawn.targets[k]);
        }
    }
}

#[test]
fn a_looser_crawl_delay_leaves_the_declared_bucket_as_the_truth() {
    let w = world("[[sources.set]]\nsource = 7\nbucket = { capacity = 2, per_s = 0.01 }\ncrawl_delay_s = 10\n", 1);
    assert_eq!(w.sources[7].true_bucket(), (2.0, 0.01));
}

#[test]
fn bad_written_sources_are_refused_naming_the_key() {
    let set = |body: &str| format!("{BASE}[[sources.set]]\n{body}\n");
    for (body, key) in [
        ("source = 10", "sources.set.source"),
        ("source = 1\nsuccess = { browser = 1.5, desktop = 0.5, container_render = 0.5, container_plain = 0.5 }", "sources.set.success"),
        ("source = 1\nlatency_s = { browser = 0.0, desktop = 1, container_render = 1, container_plain = 1 }", "sources.set.latency_s"),
        ("source = 1\nchange_timescale_h = -1", "sources.set.change_timescale_h"),
        ("source = 1\nchange_timescale_h = nan", "sources.set.change_timescale_h"),
        ("source = 1\nbucket = { capacity = 0.5, per_s = 1 }", "sources.set.bucket"),
        ("source = 1\nbucket = { capacity = 3, per_s = inf }", "sources.set.bucket"),
        ("source = 1\ncrawl_delay_s = 301", "sources.set.crawl_delay_s"),
        ("source = 1\nretry_after_s = 0", "sources.set.retry_after_s"),
    ] {
        match WorldPlan::parse(&set(body)) {
            Err(PlanError::Key { key: k, .. }) => assert_eq!(k, key, "{body}"),
            other => panic!("{body}: {other:?}"),
        }
    }
    let twice = format!("{BASE}[[sources.set]]\nsource = 4\n[[sources.set]]\nsource = 4\n");
    assert!(matches!(
        WorldPlan::parse(&twice),
        Err(PlanError::Key {
            key: "sources.set.source",
            ..
        })
    ));
    // Sources 4 and 5 share host-4: its politeness is written once.
    let host = format!("{BASE}[[sources.set]]\nsource = 4\ncrawl_delay_s = 5\n[[sources.set]]\nsource = 5\nretry_after_s = 5\n");
    match WorldPlan::parse(&host) {
        Err(PlanError::Key { key, reason }) => {
            assert_eq!(key, "sources.set.bucket");
            assert!(reason.contains("host-4.example"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // Two sources on different hosts each set theirs.
    assert!(WorldPlan::parse(&format!("{BASE}[[sources.set]]\nsource = 4\ncrawl_delay_s = 5\n[[sources.set]]\nsource = 6\nretry_after_s = 5\n")).is_ok());
    let unknown = set("source = 1\nrobots = true");
    assert!(matches!(WorldPlan::parse(&unknown), Err(PlanError::Parse(m)) if m.contains("robots")));
}

#[test]
fn the_router_learns_a_crawl_delay_it_was_not_told() {
    // host-8 declares 5 requests and 2 per second; its robots.txt asks for
    // one per 20 s and it answers excess with 429, Retry-After 60 s.
    let text = format!(
        "{BASE}[[sources.set]]\nsource = 8\nbucket = {{ capacity = 5, per_s = 2 }}\ncrawl_delay_s = 20\nretry_after_s = 60\n"
    );
    let mut spec = SimSpec::new(Scenario::Steady, 40, 2.0, 3);
    spec.world = Some(WorldPlan::parse(&text).unwrap());
    let r = crate::simulate(&spec, &[crate::Contender::Router], &|_, _| {}).unwrap();
    let c = &r.contenders[0];
    let at = |t: f64| {
        c.series
            .iter()
            .rev()
            .find(|s| s.t_s <= t)
            .map_or(0, |s| s.violations)
    };
    let end = spec.end_s();
    let first_half = at(end / 2.0);
    let second_half = c.politeness_violations - first_half;
    assert!(
        first_half > 0,
        "the declared bucket is looser than the truth"
    );
    assert!(
        second_half * 4 <= first_half,
        "reported, the delay is kept: {first_half} violations in the first hour, {second_half} in the second"
    );
    // The same world without the crawl delay: nothing to learn, no violation.
    let mut plain = spec.clone();
    plain.world = Some(WorldPlan::parse(BASE).unwrap());
    let p = crate::simulate(&plain, &[crate::Contender::Router], &|_, _| {}).unwrap();
    assert_eq!(p.contenders[0].politeness_violations, 0);
}
