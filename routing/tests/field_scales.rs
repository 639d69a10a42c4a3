//! Per-dimension variance scales (`docs/decisions/0005-field-variance-units.md`):
//! a scale multiplies every process variance of one dimension's trees, the
//! root's included, and nothing else.

use routing::field::{Field, FieldError, Layer};

const OPTIONS: [&str; 2] = ["browser", "container"];

fn field() -> Field {
    let layers = vec![
        Layer::with_variance("source", 0.4),
        Layer::with_variance("binding", 0.2),
        Layer::with_variance("task", 0.1),
    ];
    Field::new(
        layers,
        0.5,
        &OPTIONS,
        &["reliability", "latency", "financial"],
    )
    .unwrap()
}

fn observed(mut f: Field) -> Field {
    let a = f.parse("a/api/t1").unwrap();
    let b = f.parse("b/api/t9").unwrap();
    for (addr, x) in [(&a, 1.0), (&a, 0.0), (&b, 1.0), (&a, 0.0)] {
        f.observe(addr, "browser", "reliability", x, 0.25).unwrap();
        f.observe(addr, "browser", "latency", x + 0.5, 0.5).unwrap();
    }
    f
}

#[test]
fn an_unobserved_cell_has_the_scaled_sum_of_the_path_variances() {
    let mut f = field();
    let a = f.parse("a/api/t1").unwrap();
    let unscaled = f.posterior(&a, "container", "financial").unwrap().variance;
    assert!(
        (unscaled - (0.5 + 0.4 + 0.2 + 0.1)).abs() < 1e-12,
        "{unscaled}"
    );
    f.set_dimension_scale("financial", 0.01).unwrap();
    assert_eq!(f.dimension_scale("financial"), 0.01);
    let scaled = f.posterior(&a, "container", "financial").unwrap().variance;
    assert!((scaled - 0.01 * unscaled).abs() < 1e-12, "{scaled}");
    // The prior mean is untouched: a stated fact stays what was stated.
    f.set_prior(&f.parse("").unwrap(), "container", "financial", 0.12)
        .unwrap();
    let p = f.posterior(&a, "container", "financial").unwrap();
    assert!((p.mean - 0.12).abs() < 1e-12);
}

#[test]
fn scaling_one_dimension_leaves_the_others_unchanged() {
    let f = observed(field());
    let mut g = f.clone();
    g.set_dimension_scale("latency", 3.0).unwrap();
    for addr in ["a/api/t1", "b/api/t9", "c", ""] {
        let a = f.parse(addr).unwrap();
        for o in OPTIONS {
            let before = f.posterior(&a, o, "reliability").unwrap();
            let after = g.posterior(&a, o, "reliability").unwrap();
            assert_eq!(format!("{before:?}"), format!("{after:?}"));
        }
    }
    // ... while the scaled one moves: more process variance lets an
    // observed cell follow its own evidence more closely.
    let a = f.parse("a/api/t1").unwrap();
    let lat_f = f.posterior(&a, "browser", "latency").unwrap();
    let lat_g = g.posterior(&a, "browser", "latency").unwrap();
    assert!(lat_g.variance > lat_f.variance);
    assert!(g.revision() > f.revision());
}

#[test]
fn a_scale_of_one_is_the_unscaled_field_and_scaling_equals_scaling_every_layer() {
    let f = observed(field());
    let mut one = f.clone();
    one.set_dimension_scale("reliability", 1.0).unwrap();
    // The same field built with every variance multiplied by 2.5.
    let layers = vec![
        Layer::with_variance("source", 1.0),
        Layer::with_variance("binding", 0.5),
        Layer::with_variance("task", 0.25),
    ];
    let wide = observed(
        Field::new(
            layers,
            1.25,
            &OPTIONS,
            &["reliability", "latency", "financial"],
        )
        .unwrap(),
    );
    let mut scaled = f.clone();
    scaled.set_dimension_scale("reliability", 2.5).unwrap();
    for addr in ["a/api/t1", "a/api", "b/api/t9", "z/q/r", ""] {
        let a = f.parse(addr).unwrap();
        for o in OPTIONS {
            let p0 = f.posterior(&a, o, "reliability").unwrap();
            let p1 = one.posterior(&a, o, "reliability").unwrap();
            assert_eq!(p0.mean.to_bits(), p1.mean.to_bits());
            assert_eq!(p0.variance.to_bits(), p1.variance.to_bits());
            let w = wide.posterior(&a, o, "reliability").unwrap();
            let s = scaled.posterior(&a, o, "reliability").unwrap();
            assert!((w.mean - s.mean).abs() < 1e-12, "{addr} {o}");
            assert!((w.variance - s.variance).abs() < 1e-12, "{addr} {o}");
        }
    }
}

#[test]
fn a_known_dimension_adds_no_exploration_bonus() {
    let mut f = field();
    let root = f.parse("").unwrap();
    f.set_prior(&root, "container", "financial", 0.12).unwrap();
    let a = f.parse("new/api/t1").unwrap();
    let before = f.decide(&a, 1.0, &OPTIONS).unwrap();
    // Unscaled, the cost's made-up uncertainty dominates every score.
    assert!(before.alternatives.iter().all(|x| x.variance > 1.2));
    f.set_dimension_scale("financial", 1e-9).unwrap();
    let after = f.decide(&a, 1.0, &OPTIONS).unwrap();
    for alt in &after.alternatives {
        let (_, _, _, var) = alt
            .dimensions
            .iter()
            .find(|d| d.0 == "financial")
            .cloned()
            .unwrap();
        assert!(var < 1e-8, "{var}");
    }
    // Equal reliability and latency uncertainty: the cost decides.
    assert_eq!(after.selected.as_deref(), Some("browser"));
}

#[test]
fn bad_scales_are_refused_and_change_nothing() {
    let mut f = field();
    let rev = f.revision();
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            f.set_dimension_scale("latency", bad),
            Err(FieldError::BadVariance(_))
        ));
    }
    assert!(matches!(
        f.set_dimension_scale("speed", 2.0),
        Err(FieldError::UnknownDimension(_))
    ));
    assert_eq!(f.revision(), rev);
    assert_eq!(f.dimension_scale("latency"), 1.0);
}

#[test]
fn scales_survive_a_snapshot_and_a_bad_one_is_refused_on_restore() {
    let mut f = observed(field());
    f.set_dimension_scale("latency", 4.0).unwrap();
    let json = serde_json::to_string(&f.snapshot()).unwrap();
    let g = Field::restore(serde_json::from_str(&json).unwrap()).unwrap();
    assert_eq!(g.dimension_scale("latency"), 4.0);
    let a = f.parse("a/api/t1").unwrap();
    assert_eq!(
        format!("{:?}", f.decide(&a, 1.0, &OPTIONS).unwrap()),
        format!("{:?}", g.decide(&a, 1.0, &OPTIONS).unwrap())
    );
    // A snapshot written before scales existed reads as all 1.0.
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v.as_object_mut().unwrap().remove("scales");
    let old = Field::restore(serde_json::from_value(v.clone()).unwrap()).unwrap();
    assert_eq!(old.dimension_scale("latency"), 1.0);
    // A scale for an undeclared dimension, or a non-positive one, is refused.
    v["scales"] = serde_json::json!({ "speed": 2.0 });
    assert!(Field::restore(serde_json::from_value(v.clone()).unwrap()).is_err());
    v["scales"] = serde_json::json!({ "latency": 0.0 });
    assert!(Field::restore(serde_json::from_value(v).unwrap()).is_err());
}
