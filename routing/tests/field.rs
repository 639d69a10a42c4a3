//! Behaviour of the field beyond the golden vectors: typed errors, gates,
//! ties, temperature, work counters, compaction and snapshots.

use routing::field::{Field, FieldError, Layer, LossReason};

fn field() -> Field {
    let layers = vec![
        Layer::new("source"),
        Layer::new("binding"),
        Layer::new("task"),
        Layer::new("environment"),
    ];
    Field::new(
        layers,
        1.0,
        &["browser", "container", "desktop"],
        &["reliability", "latency"],
    )
    .unwrap()
}

#[test]
fn addresses_are_gap_free_prefixes() {
    let f = field();
    assert!(f.address(&[("source", "a"), ("binding", "api")]).is_ok());
    assert_eq!(
        f.address(&[("source", "a"), ("task", "t")]),
        Err(FieldError::Gap {
            missing: "binding".into(),
            found: "task".into()
        })
    );
    assert_eq!(
        f.address(&[("planet", "x")]),
        Err(FieldError::UnknownLayer("planet".into()))
    );
    assert!(matches!(
        f.parse("a/b/c/d/e"),
        Err(FieldError::TooDeep { .. })
    ));
}

#[test]
fn bad_arguments_get_typed_errors() {
    let mut f = field();
    let a = f.parse("a").unwrap();
    assert!(
        matches!(f.observe(&a, "browser", "reliability", 1.0, f64::NAN), Err(FieldError::BadVariance(v)) if v.is_nan())
    );
    assert!(matches!(
        f.observe(&a, "browser", "reliability", 1.0, 0.0),
        Err(FieldError::BadVariance(_))
    ));
    assert!(matches!(
        f.observe(&a, "browser", "reliability", f64::INFINITY, 1.0),
        Err(FieldError::NonFinite(_))
    ));
    assert_eq!(
        f.observe(&a, "robot", "reliability", 1.0, 1.0),
        Err(FieldError::UnknownOption("robot".into()))
    );
    assert_eq!(
        f.observe(&a, "browser", "beauty", 1.0, 1.0),
        Err(FieldError::UnknownDimension("beauty".into()))
    );
    assert_eq!(
        f.discount(&a, "browser", "reliability", 1.5),
        Err(FieldError::BadFactor(1.5))
    );
    assert!(matches!(
        f.discount(&a, "browser", "reliability", f64::NAN),
        Err(FieldError::BadFactor(_))
    ));
    assert!(matches!(
        f.set_weight(&a, "browser", "latency", f64::INFINITY),
        Err(FieldError::NonFinite(_))
    ));
    assert_eq!(
        f.compact(&f.parse("").unwrap()),
        Err(FieldError::CompactRoot)
    );
    assert!(matches!(
        f.decide(&a, 0.0, &["robot"]),
        Err(FieldError::UnknownOption(_))
    ));
    assert!(matches!(
        Field::new(vec![Layer::with_variance("s", -1.0)], 1.0, &["o"], &["d"]),
        Err(FieldError::BadVariance(_))
    ));
    assert!(matches!(
        Field::new(vec![], 1.0, &["o", "o"], &["d"]),
        Err(FieldError::Duplicate(_))
    ));
    // Nothing was written by the refused calls.
    assert_eq!(f.revision(), 0);
}

#[test]
fn gates_veto_and_ties_break_by_name() {
    let mut f = field();
    let a = f.parse("a/api/t1/x").unwrap();
    // No evidence: every option ties at score 0; name bytes decide.
    let r = f
        .decide(&a, 0.0, &["desktop", "container", "browser"])
        .unwrap();
    assert_eq!(r.selected.as_deref(), Some("browser"));
    // A false gate at the source prefix vetoes browser below it.
    f.set_gate(&f.parse("a").unwrap(), "browser", Some(false))
        .unwrap();
    let r = f.decide(&a, 0.0, &["browser", "container"]).unwrap();
    assert_eq!(r.selected.as_deref(), Some("container"));
    let b = r
        .alternatives
        .iter()
        .find(|x| x.option == "browser")
        .unwrap();
    assert_eq!(b.reason, LossReason::Gate(f.parse("a").unwrap()));
    // A later success clears it.
    f.set_gate(&f.parse("a").unwrap(), "browser", None).unwrap();
    assert_eq!(
        f.decide(&a, 0.0, &["browser", "container"])
            .unwrap()
            .selected
            .as_deref(),
        Some("browser")
    );
    // Everything vetoed: no winner.
    f.set_gate(&f.parse("").unwrap(), "browser", Some(false))
        .unwrap();
    assert_eq!(f.decide(&a, 0.0, &["browser"]).unwrap().selected, None);
}

#[test]
fn temperature_prefers_uncertainty_and_bad_values_are_zero() {
    let mut f = field();
    let a = f.parse("a/api/t1/x").unwrap();
    // Browser is well known at cost 0.1; container unknown (mean 0, large variance).
    for _ in 0..50 {
        f.observe(&a, "browser", "reliability", 0.1, 0.25).unwrap();
        f.observe(&a, "browser", "latency", 0.0, 0.5).unwrap();
        f.observe(&a, "container", "reliability", 0.2, 0.25)
            .unwrap();
        f.observe(&a, "container", "latency", 0.0, 0.5).unwrap();
    }
    let b = f.parse("b").unwrap();
    let r0 = f.decide(&b, 0.0, &["browser", "container"]).unwrap();
    assert_eq!(r0.temperature, 0.0);
    for t in [-1.0, f64::NAN, f64::INFINITY] {
        let r = f.decide(&b, t, &["browser", "container"]).unwrap();
        assert_eq!(r.temperature, 0.0);
        assert_eq!(r.selected, r0.selected);
    }
    // At the known address, T = 0 prefers the lower mean.
    assert_eq!(
        f.decide(&a, 0.0, &["browser", "container"])
            .unwrap()
            .selected
            .as_deref(),
        Some("browser")
    );
    // score = expected − T·√variance, per the receipt's own numbers.
    let r = f.decide(&a, 2.0, &["browser", "container"]).unwrap();
    for alt in &r.alternatives {
        assert!((alt.score - (alt.mean - 2.0 * alt.variance.sqrt())).abs() < 1e-12);
    }
}

#[test]
fn weights_add_along_the_path() {
    let mut f = field();
    let a = f.parse("a/api").unwrap();
    f.observe(&a, "browser", "latency", 2.0, 0.01).unwrap();
    f.set_weight(&f.parse("").unwrap(), "browser", "latency", 3.0)
        .unwrap();
    f.set_weight(&f.parse("a").unwrap(), "browser", "latency", -1.0)
        .unwrap();
    let p = f.posterior(&a, "browser", "latency").unwrap();
    assert_eq!(p.weight, 2.0);
    let r = f.decide(&a, 0.0, &["browser"]).unwrap();
    let alt = &r.alternatives[0];
    // Contributions per prefix (root, a, a/api) add up to the expected cost.
    assert_eq!(alt.contributions.len(), 3);
    assert!((alt.contributions.iter().sum::<f64>() - alt.mean).abs() < 1e-12);
    let rel = f.posterior(&a, "browser", "reliability").unwrap();
    assert!((alt.mean - (2.0 * p.mean + rel.mean)).abs() < 1e-12);
    assert!((alt.variance - (4.0 * p.variance + rel.variance)).abs() < 1e-12);
}

#[test]
fn decide_work_does_not_grow_with_unrelated_branches() {
    let mut f = field();
    let a = f.parse("a/api/t1/x").unwrap();
    f.observe(&a, "browser", "reliability", 1.0, 0.25).unwrap();
    let before = f.decide(&a, 1.0, &["browser", "container"]).unwrap();
    let mut observe_work = Vec::new();
    for i in 0..10_000 {
        let b = f.parse(&format!("s{i}/api/t/x")).unwrap();
        observe_work.push(f.observe(&b, "browser", "reliability", 0.0, 0.25).unwrap());
    }
    let after = f.decide(&a, 1.0, &["browser", "container"]).unwrap();
    assert_eq!(before.work, after.work);
    assert_eq!(before.selected, after.selected);
    // Observe at depth 4 touches the path only: 5 cells, 4 messages.
    assert!(observe_work
        .iter()
        .all(|w| w.cells_visited == 5 && w.messages_recomputed == 4));
}

#[test]
fn compaction_keeps_ancestors_and_siblings() {
    let mut f = field();
    let obs = [
        ("a/api/t1/x", 1.0),
        ("a/api/t2/x", 0.5),
        ("a/api/t1/y", 2.0),
        ("a/html", -1.0),
        ("b", 3.0),
    ];
    for (p, x) in obs {
        f.observe(&f.parse(p).unwrap(), "browser", "reliability", x, 0.3)
            .unwrap();
    }
    let keep = [
        "",
        "a",
        "a/api",
        "a/api/t2",
        "a/api/t2/x",
        "a/html",
        "b",
        "a/api/t9/z",
    ];
    let before: Vec<_> = keep
        .iter()
        .map(|p| {
            f.posterior(&f.parse(p).unwrap(), "browser", "reliability")
                .unwrap()
        })
        .collect();
    f.compact(&f.parse("a/api/t1").unwrap()).unwrap();
    for (p, b) in keep.iter().zip(before) {
        let after = f
            .posterior(&f.parse(p).unwrap(), "browser", "reliability")
            .unwrap();
        assert!((after.mean - b.mean).abs() < 1e-12, "{p}");
        assert!((after.variance - b.variance).abs() < 1e-12, "{p}");
    }
}

#[test]
fn discount_moves_toward_the_rest_of_the_tree() {
    let mut f = field();
    let a = f.parse("a").unwrap();
    f.observe(&a, "browser", "reliability", 1.0, 0.1).unwrap();
    let full = f.posterior(&a, "browser", "reliability").unwrap();
    f.discount(&a, "browser", "reliability", 0.5).unwrap();
    let half = f.posterior(&a, "browser", "reliability").unwrap();
    assert!(half.variance > full.variance && half.mean < full.mean);
    f.discount(&a, "browser", "reliability", 0.0).unwrap();
    let none = f.posterior(&a, "browser", "reliability").unwrap();
    assert!(none.mean.abs() < 1e-12 && (none.variance - 2.0).abs() < 1e-12);
}

#[test]
fn snapshot_round_trips_through_serde() {
    let mut f = field();
    f.observe(
        &f.parse("a/api/t1/x").unwrap(),
        "browser",
        "reliability",
        1.0,
        0.25,
    )
    .unwrap();
    f.set_prior(&f.parse("").unwrap(), "container", "latency", 0.7)
        .unwrap();
    f.set_gate(&f.parse("a").unwrap(), "desktop", Some(false))
        .unwrap();
    let json = serde_json::to_string(&f.snapshot()).unwrap();
    let g = Field::restore(serde_json::from_str(&json).unwrap()).unwrap();
    let a = f.parse("a/api/t1/x").unwrap();
    let before = f
        .decide(&a, 1.0, &["browser", "container", "desktop"])
        .unwrap();
    let after = g
        .decide(&a, 1.0, &["browser", "container", "desktop"])
        .unwrap();
    assert_eq!(format!("{before:?}"), format!("{after:?}"));
    assert_eq!(g.revision(), f.revision());
}

#[test]
fn prices_become_budget_weights_and_aging_halves_evidence() {
    let layers = vec![Layer::new("source")];
    let mut f = Field::new(
        layers,
        1.0,
        &["browser", "container"],
        &["reliability", "budget:store"],
    )
    .unwrap();
    let a = f.parse("s").unwrap();
    f.observe(&a, "container", "budget:store", 1.0, 0.01)
        .unwrap();
    f.set_price("budget:store", 5.0).unwrap();
    assert_eq!(
        f.posterior(&a, "browser", "budget:store").unwrap().weight,
        5.0
    );
    assert_eq!(
        f.decide(&a, 0.0, &["browser", "container"])
            .unwrap()
            .selected
            .as_deref(),
        Some("browser")
    );
    assert!(f.set_price("budget:store", -1.0).is_err());
    assert!(f.set_price("budget:none", 1.0).is_err());
    // Aging 48 h equals discounting by 1/2.
    let mut g = f.clone();
    f.age(&a, "container", "budget:store", 48.0).unwrap();
    g.discount(&a, "container", "budget:store", 0.5).unwrap();
    let (pf, pg) = (
        f.posterior(&a, "container", "budget:store").unwrap(),
        g.posterior(&a, "container", "budget:store").unwrap(),
    );
    assert!((pf.mean - pg.mean).abs() < 1e-12 && (pf.variance - pg.variance).abs() < 1e-12);
    assert!(f.age(&a, "container", "budget:store", f64::NAN).is_err());
}

#[test]
fn a_receipt_with_a_vetoed_option_round_trips_through_json() {
    let mut f = field();
    let a = f.parse("s/api/t/browser").unwrap();
    f.set_gate(&f.parse("s").unwrap(), "desktop", Some(false))
        .unwrap();
    let r = f.decide(&a, 1.0, &["browser", "desktop"]).unwrap();
    assert_eq!(r.alternatives[1].score, f64::INFINITY);
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.contains("\"inf\""), "{json}");
    let back: routing::field::Receipt = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
    assert!(
        serde_json::from_str::<routing::field::Receipt>(&json.replace("\"inf\"", "\"lots\""))
            .is_err()
    );
}

#[test]
fn a_snapshot_writes_no_caches_or_defaults_and_an_older_one_with_them_still_reads() {
    let mut f = field();
    let at = f.parse("a/api/t1").unwrap();
    f.observe(&at, "browser", "reliability", 1.0, 0.25).unwrap();
    let json = serde_json::to_string(&f.snapshot()).unwrap();
    assert!(!json.contains("\"inner\"") && !json.contains("\"message\""));
    assert!(!json.contains("\"weight\":null") && !json.contains("\"prior_residual\":0.0"));
    // A snapshot of the older shape: every field of every cell written.
    let mut older: serde_json::Value = serde_json::from_str(&json).unwrap();
    fn fill(v: &mut serde_json::Value) {
        if let Some(m) = v.as_object_mut() {
            for c in m.values_mut() {
                fill(c);
            }
            if m.contains_key("children") || m.contains_key("own") || m.is_empty() {
                let flat = serde_json::json!({"precision": 0.0, "information": 0.0});
                m.entry("prior_residual").or_insert(0.0.into());
                m.entry("weight").or_insert(serde_json::Value::Null);
                m.entry("own").or_insert(flat.clone());
                m.insert(
                    "inner".into(),
                    serde_json::json!({"precision": 9.0, "information": 9.0}),
                );
                m.insert("message".into(), flat);
                m.entry("children").or_insert(serde_json::json!({}));
            }
        }
    }
    fill(older.get_mut("trees").unwrap());
    assert!(older.to_string().contains("\"inner\""));
    let g = Field::restore(serde_json::from_value(older).unwrap()).unwrap();
    let h = Field::restore(serde_json::from_str(&json).unwrap()).unwrap();
    assert!(
        g == h,
        "the caches read are recomputed, the rest is the same"
    );
    let p = |x: &Field| x.posterior(&at, "browser", "reliability").unwrap();
    assert_eq!(p(&g), p(&f));
}
