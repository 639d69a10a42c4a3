//! Churn cooldown, adapter-disagreement clustering and the fleet cap.

use routing::trust::{treated_as_limited, AdapterKey, Churn, Clusters};

#[test]
fn six_changes_in_a_day_cool_down_for_a_day() {
    let mut c = Churn::default();
    for i in 0..5 {
        assert!(!c.record_change(i as f64));
    }
    assert!(c.record_change(5.0));
    assert!(c.cooling(28.9));
    assert!(!c.cooling(29.0));
    // Changes spread over more than 24 h never cool down.
    let mut d = Churn::default();
    assert!((0..20).all(|i| !d.record_change(i as f64 * 5.0)));
}

#[test]
fn confirmed_adapter_cluster_restores_trust_once() {
    let key = |v: &str| AdapterKey {
        source: "s".into(),
        adapter: "html".into(),
        version: v.into(),
    };
    let mut c = Clusters::new(0.6, 3);
    assert!(c.record(&key("2"), "d1", -0.02).is_empty());
    assert!(c.record(&key("1"), "d2", -0.02).is_empty());
    assert!(c.record(&key("2"), "d1", -0.01).is_empty());
    // v2 now holds 3 of 4 = 0.75 ≥ 0.6 of the source's disagreements.
    let r = c.record(&key("2"), "d3", -0.02);
    assert_eq!(r.len(), 2);
    assert!((r[0].delta - 0.03).abs() < 1e-12 && r[0].device == "d1");
    assert!(!c.moves_trust(&key("2")));
    assert!(c.moves_trust(&key("1")));
    assert!(c.record(&key("2"), "d1", -0.02).is_empty());
}

#[test]
fn fleet_cap_limits_the_demoted_share() {
    let taus = [0.1, 0.9, 0.2, 0.05, 0.5, 0.29, 0.6, 0.7, 0.8, f64::NAN];
    assert_eq!(treated_as_limited(&taus, 0.2), vec![0, 3]);
    assert_eq!(treated_as_limited(&taus, 1.0), vec![0, 2, 3, 5]);
    assert!(treated_as_limited(&taus, f64::NAN).is_empty());
}

#[test]
fn clusters_round_trip_through_json() {
    use routing::trust::{AdapterKey, Clusters};
    let mut c = Clusters::new(0.5, 2);
    let k = AdapterKey {
        source: "s".into(),
        adapter: "html".into(),
        version: "v2".into(),
    };
    c.record(&k, "d1", -0.02);
    c.record(&k, "d2", -0.03);
    assert_eq!(c.confirmed(), vec![(k, 2)]);
    let back: Clusters = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
    assert_eq!(back, c);
}
