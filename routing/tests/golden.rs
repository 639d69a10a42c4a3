//! The golden vectors of `ROUTING.md` §6, read from `tests/vectors.toml`.

use routing::field::{Field, Layer};
use routing::politeness::Bucket;
use routing::prices::Pool;
use routing::trust;
use toml::Value;

const TOL: f64 = 1e-12;

fn vectors() -> Value {
    let text = include_str!("vectors.toml");
    text.parse::<Value>().expect("vectors.toml parses")
}

fn f(v: &Value) -> f64 {
    v.as_float()
        .or_else(|| v.as_integer().map(|i| i as f64))
        .expect("number")
}

fn s(v: &Value) -> &str {
    v.as_str().expect("string")
}

fn layers(v: &Value) -> Vec<Layer> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|l| Layer::new(s(l)))
        .collect()
}

#[test]
fn field_vectors() {
    let all = vectors();
    for case in all["field"].as_array().unwrap() {
        let mut field =
            Field::new(layers(&case["layers"]), 1.0, &["browser"], &["reliability"]).unwrap();
        let o = &case["observe"];
        let a = field.parse(s(&o["address"])).unwrap();
        field
            .observe(
                &a,
                s(&o["option"]),
                "reliability",
                f(&o["x"]),
                f(&o["variance"]),
            )
            .unwrap();
        for e in case["expect"].as_array().unwrap() {
            let at = field.parse(s(&e["address"])).unwrap();
            let p = field.posterior(&at, "browser", "reliability").unwrap();
            assert!(
                (p.mean - f(&e["mean"])).abs() < TOL,
                "{at}: {} vs {}",
                p.mean,
                f(&e["mean"])
            );
        }
    }
}

#[test]
fn compaction_vector() {
    let all = vectors();
    let c = &all["compaction"];
    let mut field = Field::new(
        layers(&c["layers"]),
        1.0,
        &["browser", "container"],
        &["reliability"],
    )
    .unwrap();
    let root = field.parse("").unwrap();
    field
        .set_prior(
            &root,
            "container",
            "reliability",
            f(&c["container_root_prior"]),
        )
        .unwrap();
    let o = &c["observe"];
    let a = field.parse(s(&o["address"])).unwrap();
    field
        .observe(
            &a,
            s(&o["option"]),
            "reliability",
            f(&o["x"]),
            f(&o["variance"]),
        )
        .unwrap();
    let at = field.parse(s(&c["at"])).unwrap();
    let before = field.posterior(&at, "browser", "reliability").unwrap();
    field
        .compact(&field.parse(s(&c["compact"])).unwrap())
        .unwrap();
    let after = field.posterior(&at, "browser", "reliability").unwrap();
    let want = f(&c["browser_mean"]);
    assert!((before.mean - want).abs() < TOL);
    assert!((after.mean - want).abs() < TOL);
    assert!((after.variance - before.variance).abs() < TOL);
    let r = field.decide(&at, 0.0, &["browser", "container"]).unwrap();
    let ranking: Vec<&str> = r.alternatives.iter().map(|a| a.option.as_str()).collect();
    let want: Vec<&str> = c["ranking"].as_array().unwrap().iter().map(s).collect();
    assert_eq!(ranking, want);
    assert_eq!(r.selected.as_deref(), Some(want[0]));
    // The receipt keeps the full address decided at.
    assert_eq!(r.address, at);
}

#[test]
fn trust_vectors() {
    let all = vectors();
    for case in all["trust"].as_array().unwrap() {
        let (a, b) = trust::pairwise(
            f(&case["a"]),
            f(&case["b"]),
            case["agree"].as_bool().unwrap(),
            0.0,
            f(&case["volatility"]),
        );
        let e = case["expect"].as_array().unwrap();
        assert!((a - f(&e[0])).abs() < TOL, "{a} vs {}", f(&e[0]));
        assert!((b - f(&e[1])).abs() < TOL, "{b} vs {}", f(&e[1]));
    }
}

#[test]
fn price_vectors() {
    let all = vectors();
    for case in all["prices"].as_array().unwrap() {
        let mut pool = Pool::new(f(&case["cap"]), f(&case["alpha"]), 1e6).unwrap();
        let windows = case["windows"].as_array().unwrap();
        let expect = case["expect"].as_array().unwrap();
        for (w, e) in windows.iter().zip(expect) {
            let u = f(w);
            let usages: Vec<f64> = if u == 0.0 { vec![] } else { vec![u] };
            let lambda = pool.tick(&usages);
            assert!((lambda - f(e)).abs() < 1e-9, "{lambda} vs {}", f(e));
        }
    }
}

#[test]
fn bucket_vectors() {
    let all = vectors();
    for case in all["bucket"].as_array().unwrap() {
        let mut b = Bucket::new(f(&case["capacity"]), f(&case["rate"])).unwrap();
        let got: Vec<bool> = case["times"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| b.admit(f(t)).unwrap())
            .collect();
        let want: Vec<bool> = case["expect"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_bool().unwrap())
            .collect();
        assert_eq!(got, want);
    }
}
