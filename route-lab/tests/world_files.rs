//! World files written at random from every key, each value in or out of
//! its range: a file is a plan or a typed error naming what is wrong, never
//! a panic; a plan builds its world, and a short run of it completes.

use proptest::prelude::*;

use route_lab::plan::{PlanError, WorldPlan};
use route_lab::{simulate, Contender, Scenario, SimSpec, World};

/// A number as TOML writes it: in range, at an edge, out of range, or not
/// finite.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        80 => (0.01f64..1.0).prop_map(|x| format!("{x}")),
        1 => (-2.0f64..400.0).prop_map(|x| format!("{x}")),
        1 => Just("0".to_string()),
        1 => Just("1".to_string()),
        1 => Just("nan".to_string()),
        1 => Just("inf".to_string()),
        1 => Just("-1e300".to_string()),
    ]
}

/// A time: a number or `"a/b"`, a zero denominator included.
fn time() -> impl Strategy<Value = String> {
    prop_oneof![
        30 => number(),
        12 => (0u32..3, 1u32..9).prop_map(|(a, b)| format!("\"{a}/{b}\"")),
        1 => (0u32..5, 0u32..2).prop_map(|(a, b)| format!("\"{a}/{b}\"")),
        1 => Just("\"x/y\"".to_string()),
    ]
}

fn archetype() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just("browser"),
        4 => Just("desktop"),
        4 => Just("container_render"),
        4 => Just("container_plain"),
        1 => Just("phone"),
    ]
    .prop_map(|a| format!("\"{a}\""))
}

fn per_archetype() -> impl Strategy<Value = String> {
    (number(), number(), number(), number()).prop_map(|(a, b, c, d)| {
        format!("{{ browser = {a}, desktop = {b}, container_render = {c}, container_plain = {d} }}")
    })
}

/// One optional key of a source written out or changed.
fn truth_key() -> impl Strategy<Value = String> {
    prop_oneof![
        per_archetype().prop_map(|v| format!("success = {v}")),
        per_archetype().prop_map(|v| format!("latency_s = {v}")),
        any::<bool>().prop_map(|b| format!("needs_js = {b}")),
        any::<bool>().prop_map(|b| format!("cors_closed = {b}")),
        any::<bool>().prop_map(|b| format!("antibot = {b}")),
        any::<bool>().prop_map(|b| format!("residential = {b}")),
        number().prop_map(|v| format!("crawl_delay_s = {v}")),
        number().prop_map(|v| format!("retry_after_s = {v}")),
    ]
}

/// Keys as a TOML table's lines, each key once (the first kept).
fn lines(keys: Vec<String>) -> String {
    let mut seen = std::collections::BTreeSet::new();
    keys.into_iter()
        .filter(|k| seen.insert(k.split(' ').next().unwrap_or("").to_string()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One table or array entry of a world file.
fn entry() -> impl Strategy<Value = String> {
    let source = 0usize..14;
    prop_oneof![
        (source.clone(), prop::collection::vec(truth_key(), 0..4), number(), number()).prop_map(
            |(s, keys, cap, rate)| format!(
                "[[sources.set]]\nsource = {s}\nbucket = {{ capacity = {cap}, per_s = {rate} }}\n{}\n",
                lines(keys)
            )
        ),
        (
            source.clone(),
            time(),
            prop::collection::vec(truth_key(), 0..4),
            prop::collection::vec(archetype(), 0..2),
            prop::collection::vec(archetype(), 0..2),
        )
            .prop_map(|(s, at, keys, refuses, allows)| format!(
                "[[events.source_change]]\nsource = {s}\nat = {at}\nrefuses = [{}]\nallows = [{}]\n{}\n",
                refuses.join(", "),
                allows.join(", "),
                lines(keys)
            )),
        (time(), number(), time()).prop_map(|(at, share, over)| format!(
            "[[events.adapter_rollout]]\nat = {at}\nupgrade_share = {share}\nover = {over}\n"
        )),
        (archetype(), time(), time(), number()).prop_map(|(a, from, to, share)| format!(
            "[[events.dropout]]\narchetype = {a}\nfrom = {from}\nto = {to}\nshare = {share}\n"
        )),
        (archetype(), 0usize..30, time(), number(), number()).prop_map(
            |(a, count, at, within, liars)| format!(
                "[[events.burst]]\narchetype = {a}\ncount = {count}\nat = {at}\nwithin_s = {within}\nliar_share = {liars}\n"
            )
        ),
    ]
}

/// The tables that appear at most once.
fn singles() -> impl Strategy<Value = String> {
    (
        prop::option::of((time(), time())),
        prop::option::of((0usize..14, archetype(), time())),
        prop::option::of((0usize..14, time(), number())),
        prop::option::of(number()),
    )
        .prop_map(|(drought, regime, bug, caps)| {
            let mut s = String::new();
            if let Some((from, to)) = drought {
                s += &format!("[events.drought]\nfrom = {from}\nto = {to}\n");
            }
            if let Some((src, a, at)) = regime {
                s += &format!(
                    "[events.regime_change]\nsource = {src}\narchetype = {a}\nat = {at}\n"
                );
            }
            if let Some((src, at, share)) = bug {
                s += &format!(
                    "[events.adapter_bug]\nsource = {src}\nat = {at}\nupgrade_share = {share}\n"
                );
            }
            if let Some(c) = caps {
                s += &format!("[budget]\ncaps_share_of_demand = {c}\n");
            }
            s
        })
}

fn world_file() -> impl Strategy<Value = String> {
    (
        1usize..14,
        1usize..4,
        singles(),
        prop::collection::vec(entry(), 0..6),
    )
        .prop_map(|(count, per, singles, entries)| {
            format!(
                "name = \"random\"\ndescription = \"written at random\"\n\
                 [sources]\ncount = {count}\ntargets_per_source = {per}\n{singles}{}",
                entries.join("")
            )
        })
}

/// `n` world files drawn from a fixed seed (the same files every run).
fn files(n: usize) -> Vec<String> {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = world_file();
    (0..n)
        .map(|_| strategy.new_tree(&mut runner).expect("a file").current())
        .collect()
}

#[test]
fn any_world_file_is_a_plan_or_a_typed_error_and_a_plan_builds() {
    let (mut plans, mut keys, mut parses) = (0, 0, 0);
    for text in files(600) {
        match WorldPlan::parse(&text) {
            Ok(plan) => {
                plans += 1;
                let mut spec = SimSpec::new(Scenario::Steady, 12, 0.25, 3);
                spec.world = Some(plan);
                if let Err(e) = World::build(&spec) {
                    panic!("a checked plan fails to build: {e}\n{text}");
                }
            }
            Err(PlanError::Key { key, reason }) => {
                keys += 1;
                assert!(key.starts_with(|c: char| c.is_ascii_lowercase()), "{key}");
                assert!(!reason.is_empty(), "{key}: no reason\n{text}");
            }
            Err(PlanError::Parse(message)) => {
                parses += 1;
                assert!(message.contains("line"), "{message}");
            }
        }
    }
    // The files reach both sides of the check, and the parser's refusals.
    assert!(
        plans >= 40 && keys >= 100 && parses >= 20,
        "{plans} plans, {keys} key errors, {parses} parse errors"
    );
}

#[test]
fn random_plans_run_to_their_end() {
    let mut ran = 0;
    for text in files(200) {
        let Ok(plan) = WorldPlan::parse(&text) else {
            continue;
        };
        let mut spec = SimSpec::new(Scenario::Steady, 12, 0.25, 5);
        spec.world = Some(plan);
        let r = simulate(&spec, &[Contender::Router], &|_, _| {});
        assert!(r.is_ok(), "{text}\n{:?}", r.err());
        ran += 1;
        if ran == 12 {
            return;
        }
    }
    panic!("only {ran} of the files were plans");
}
