//! The lease decision (`ROUTING.md` §3 Assignment policy): the preference
//! table, batch sizes, tiers, feasibility, verification rules, prices and
//! politeness admission.

use std::collections::BTreeMap;

use routing::field::{Address, Field, Layer, LossReason};
use routing::policy::{
    batch_size, lease, preference, schedule_priority, Band, Candidate, DeviceView, Pass,
    PolicyConfig, PolicyError, Tier, PREFERENCE,
};
use routing::politeness::Bucket;
use routing::verify::{Verification, VerifyConfig, VerifyError};

pub(crate) fn field() -> Field {
    let layers = vec![
        Layer::new("source"),
        Layer::new("binding"),
        Layer::new("task"),
    ];
    Field::new(
        layers,
        1.0,
        &["browser", "container", "desktop"],
        &["reliability", "latency"],
    )
    .unwrap()
}

const LIVE: &[&str] = &["browser", "container", "desktop"];

pub(crate) fn device<'a>(
    id: &'a str,
    tau: f64,
    limited: bool,
    caps: &'a [String],
) -> DeviceView<'a> {
    DeviceView {
        id,
        archetype: "browser",
        trust: tau,
        limited,
        capabilities: caps,
        max_items: 8,
        origin: None,
    }
}

pub(crate) fn cand<'a>(
    target: &'a str,
    host: &'a str,
    address: &'a Address,
    tier: Tier,
) -> Candidate<'a> {
    Candidate {
        target,
        host,
        address,
        tier,
        priority: 1.0,
        value: 10.0,
        requires: &[],
        verification: None,
        live: LIVE,
        receipt: None,
    }
}

pub(crate) fn config(batch: usize) -> PolicyConfig {
    PolicyConfig {
        batch_base: batch,
        bucket_capacity: 100.0,
        ..PolicyConfig::default()
    }
}

#[test]
fn preference_table_is_a_permutation_with_filler_last_in_every_band() {
    for band in Band::ALL {
        let mut ranks: Vec<u8> = Tier::ALL.iter().map(|t| preference(band, *t)).collect();
        assert_eq!(preference(band, Tier::Filler), 4, "{band:?}");
        ranks.sort();
        assert_eq!(ranks, vec![0, 1, 2, 3, 4], "{band:?}");
    }
    assert_eq!(PREFERENCE.len(), Band::ALL.len());
}

#[test]
fn preference_table_encodes_the_trust_inversion() {
    // Low trust breaks new ground before anything else and avoids re-observing settled rows.
    assert_eq!(preference(Band::Low, Tier::FirstObservation), 0);
    assert!(preference(Band::Low, Tier::Reobservation) > preference(Band::Low, Tier::Discovery));
    // High trust certifies first and breaks new ground last (of the non-filler tiers).
    assert_eq!(preference(Band::High, Tier::Verification), 0);
    assert_eq!(preference(Band::High, Tier::FirstObservation), 3);
    // Re-observation is preferred more the higher the trust.
    let r: Vec<u8> = Band::ALL
        .iter()
        .map(|b| preference(*b, Tier::Reobservation))
        .collect();
    assert!(r[0] > r[1] && r[1] > r[2], "{r:?}");
    // Discovery goes to mid/high before low.
    assert!(preference(Band::Low, Tier::Discovery) >= preference(Band::Mid, Tier::Discovery));
}

#[test]
fn band_follows_trust_and_the_fleet_cap() {
    assert_eq!(Band::of(0.9, true, 0.8), Band::High);
    assert_eq!(Band::of(0.8, false, 0.8), Band::High);
    assert_eq!(Band::of(0.1, true, 0.8), Band::Low);
    // The cap did not let the policy treat it as limited: mid.
    assert_eq!(Band::of(0.1, false, 0.8), Band::Mid);
    assert_eq!(Band::of(f64::NAN, false, 0.8), Band::Mid);
}

#[test]
fn batch_size_grows_with_the_stamp_price_within_max_items() {
    let table = [
        // (base, λ, max, expected)
        (1, 0.0, 8, 1),
        (4, 0.0, 8, 4),
        (4, 0.5, 8, 6),
        (4, 1.0, 8, 8),
        (4, 10.0, 8, 8),
        (4, f64::NAN, 8, 4),
        (4, -3.0, 8, 4),
        (0, 0.0, 8, 1),
        (4, 0.0, 0, 0),
        (3, f64::INFINITY, 5, 3),
    ];
    for (base, l, max, want) in table {
        assert_eq!(
            batch_size(base, l, max),
            want,
            "base {base} λ {l} max {max}"
        );
    }
}

#[test]
fn schedule_priority_is_staleness_times_trust_factor_times_volatility() {
    // 100 s stale, last observer τ 0.5 → factor 1.5, volatility 0.2 → 30.
    assert!((schedule_priority(100.0, 0.5, 0.2) - 30.0).abs() < 1e-12);
    // A fully trusted last observer halves the urgency of an untrusted one.
    assert!(
        (schedule_priority(10.0, 1.0, 1.0) * 2.0 - schedule_priority(10.0, 0.0, 1.0)).abs() < 1e-12
    );
    assert_eq!(schedule_priority(f64::NAN, 0.5, 1.0), 0.0);
    assert_eq!(schedule_priority(-5.0, 0.5, 1.0), 0.0);
    assert!((schedule_priority(10.0, f64::NAN, 1.0) - 15.0).abs() < 1e-12);
}

#[test]
fn low_trust_breaks_new_ground_and_high_trust_verifies() {
    let f = field();
    let a = f.parse("s/api/t1").unwrap();
    let b = f.parse("s/api/t2").unwrap();
    let cands = vec![
        cand("verify-me", "h1", &a, Tier::Verification),
        cand("new", "h2", &b, Tier::FirstObservation),
    ];
    let caps: Vec<String> = vec![];
    let mut buckets = BTreeMap::new();
    let low = lease(
        &f,
        &device("d-low", 0.1, true, &caps),
        &cands,
        &mut buckets,
        0.0,
        &config(1),
    )
    .unwrap();
    assert_eq!(low.band, Band::Low);
    assert_eq!(low.grants.len(), 1);
    assert_eq!(low.grants[0].target, "new");
    assert_eq!(low.passed, vec![("verify-me".to_string(), Pass::BatchFull)]);
    let high = lease(
        &f,
        &device("d-high", 0.9, false, &caps),
        &cands,
        &mut buckets,
        0.0,
        &config(1),
    )
    .unwrap();
    assert_eq!(high.grants[0].target, "verify-me");
    assert_eq!(high.grants[0].tier, Tier::Verification);
    // Every grant carries the decision at its address among the live archetypes.
    let r = &high.grants[0].receipt;
    assert_eq!(r.address, a);
    assert_eq!(r.alternatives.len(), 3);
    assert!(high.work.cells_visited > 0);
}

#[test]
fn verification_cap_involvement_and_ttl_are_enforced() {
    let f = field();
    let a = f.parse("s/api/t1").unwrap();
    let vc = VerifyConfig::default();
    let mut v = Verification::new();
    v.vote("first", "h", 0.2, &vc).unwrap();
    v.begin("v1", 0.0, &vc).unwrap();
    v.begin("v2", 0.0, &vc).unwrap();
    let caps: Vec<String> = vec![];
    let mut c = cand("row", "h1", &a, Tier::Verification);
    c.verification = Some(&v);
    let cands = vec![c];
    let mut buckets = BTreeMap::new();
    let d = lease(
        &f,
        &device("v3", 0.9, false, &caps),
        &cands,
        &mut buckets,
        10.0,
        &config(2),
    )
    .unwrap();
    assert!(d.grants.is_empty());
    assert_eq!(
        d.passed,
        vec![("row".to_string(), Pass::Verify(VerifyError::Full))]
    );
    // The first observer may not verify its own observation.
    let d = lease(
        &f,
        &device("first", 0.9, false, &caps),
        &cands,
        &mut buckets,
        10.0,
        &config(2),
    )
    .unwrap();
    assert_eq!(
        d.passed,
        vec![(
            "row".to_string(),
            Pass::Verify(VerifyError::AlreadyInvolved)
        )]
    );
    // After the TTL the open verifications no longer count.
    let d = lease(
        &f,
        &device("v3", 0.9, false, &caps),
        &cands,
        &mut buckets,
        3600.0,
        &config(2),
    )
    .unwrap();
    assert_eq!(d.grants.len(), 1);
}

#[test]
fn gates_and_capabilities_make_a_candidate_infeasible() {
    let mut f = field();
    let a = f.parse("s/api/t1").unwrap();
    let b = f.parse("r/api/t2").unwrap();
    f.set_gate(&f.parse("s").unwrap(), "browser", Some(false))
        .unwrap();
    let needs = vec!["residential".to_string()];
    let mut c2 = cand("needs-res", "h2", &b, Tier::FirstObservation);
    c2.requires = &needs;
    let cands = vec![cand("gated", "h1", &a, Tier::FirstObservation), c2];
    let none: Vec<String> = vec![];
    let mut buckets = BTreeMap::new();
    let d = lease(
        &f,
        &device("d", 0.5, false, &none),
        &cands,
        &mut buckets,
        0.0,
        &config(4),
    )
    .unwrap();
    assert!(d.grants.is_empty());
    assert_eq!(
        d.passed,
        vec![
            (
                "gated".to_string(),
                Pass::Infeasible(LossReason::Gate(f.parse("s").unwrap()))
            ),
            (
                "needs-res".to_string(),
                Pass::MissingCapability("residential".into())
            ),
        ]
    );
    let d = lease(
        &f,
        &device("d", 0.5, false, &needs),
        &cands,
        &mut buckets,
        0.0,
        &config(4),
    )
    .unwrap();
    assert_eq!(d.grants.len(), 1);
    assert_eq!(d.grants[0].target, "needs-res");
}

#[test]
fn low_value_work_needs_value_above_its_priced_cost_and_filler_waits() {
    let f = field();
    let a = f.parse("s/api/t1").unwrap();
    let b = f.parse("s/api/t2").unwrap();
    let c = f.parse("s/api/t3").unwrap();
    let mut re = cand("reobs", "h1", &a, Tier::Reobservation);
    re.value = 2.0;
    let mut fill = cand("fill", "h2", &b, Tier::Filler);
    fill.value = 5.0;
    let first = cand("first", "h3", &c, Tier::FirstObservation);
    let caps: Vec<String> = vec![];
    let dev = device("d", 0.9, false, &caps);
    let mut cfg = config(4);
    cfg.item_cost = 3.0;
    let mut buckets = BTreeMap::new();
    let d = lease(
        &f,
        &dev,
        &[re.clone(), fill.clone(), first.clone()],
        &mut buckets,
        0.0,
        &cfg,
    )
    .unwrap();
    let granted: Vec<&str> = d.grants.iter().map(|g| g.target.as_str()).collect();
    assert_eq!(granted, vec!["first"]);
    assert!(d.passed.contains(&(
        "reobs".to_string(),
        Pass::NotWorthCost {
            value: 2.0,
            cost: 3.0
        }
    )));
    assert!(d
        .passed
        .contains(&("fill".to_string(), Pass::FillerNotNeeded)));
    // Nothing else admissible: the filler is granted when worth its cost ...
    let d = lease(
        &f,
        &dev,
        &[re.clone(), fill.clone()],
        &mut buckets,
        0.0,
        &cfg,
    )
    .unwrap();
    assert_eq!(
        d.grants
            .iter()
            .map(|g| g.target.as_str())
            .collect::<Vec<_>>(),
        vec!["fill"]
    );
    // ... and not once the price rises above its value.
    cfg.item_cost = 6.0;
    let d = lease(&f, &dev, &[re, fill], &mut buckets, 0.0, &cfg).unwrap();
    assert!(d.grants.is_empty());
}

#[test]
fn politeness_admits_one_token_per_grant_per_host() {
    let f = field();
    let addrs: Vec<Address> = (0..4)
        .map(|i| f.parse(&format!("s/api/t{i}")).unwrap())
        .collect();
    let names = ["t0", "t1", "t2", "t3"];
    let cands: Vec<Candidate> = (0..4)
        .map(|i| cand(names[i], "same-host", &addrs[i], Tier::FirstObservation))
        .collect();
    let caps: Vec<String> = vec![];
    let mut cfg = config(4);
    cfg.bucket_capacity = 2.0;
    cfg.bucket_rate = 1.0;
    let mut buckets = BTreeMap::new();
    let d = lease(
        &f,
        &device("d", 0.5, false, &caps),
        &cands,
        &mut buckets,
        0.0,
        &cfg,
    )
    .unwrap();
    assert_eq!(d.grants.len(), 2);
    assert_eq!(
        d.passed
            .iter()
            .filter(|(_, p)| *p == Pass::Politeness)
            .count(),
        2
    );
    // An existing bucket is used as is (a paused host admits nothing).
    let mut paused = BTreeMap::new();
    let mut b = Bucket::new(5.0, 1.0).unwrap();
    b.pause(0.0, 60.0).unwrap();
    paused.insert("same-host".to_string(), b);
    let d = lease(
        &f,
        &device("d", 0.5, false, &caps),
        &cands,
        &mut paused,
        1.0,
        &cfg,
    )
    .unwrap();
    assert!(d.grants.is_empty());
}

#[test]
fn bad_arguments_are_typed_errors_and_spend_no_token() {
    let f = field();
    let a = f.parse("s/api/t1").unwrap();
    let cands = vec![cand("t", "h", &a, Tier::FirstObservation)];
    let caps: Vec<String> = vec![];
    let mut buckets = BTreeMap::new();
    let cfg = config(1);
    assert!(matches!(
        lease(&f, &device("d", 0.5, false, &caps), &cands, &mut buckets, f64::NAN, &cfg),
        Err(PolicyError::BadTime(t)) if t.is_nan()
    ));
    let mut alien = device("d", 0.5, false, &caps);
    alien.archetype = "smart-fridge";
    assert!(matches!(
        lease(&f, &alien, &cands, &mut buckets, 0.0, &cfg),
        Err(PolicyError::Field(_))
    ));
    let mut bad = cfg.clone();
    bad.item_cost = f64::NAN;
    assert!(matches!(
        lease(
            &f,
            &device("d", 0.5, false, &caps),
            &cands,
            &mut buckets,
            0.0,
            &bad
        ),
        Err(PolicyError::BadConfig(_))
    ));
    bad = cfg.clone();
    bad.bucket_capacity = 0.0;
    assert!(matches!(
        lease(
            &f,
            &device("d", 0.5, false, &caps),
            &cands,
            &mut buckets,
            0.0,
            &bad
        ),
        Err(PolicyError::Politeness(_))
    ));
    assert!(buckets.is_empty(), "no bucket created or spent on error");
}

#[test]
fn the_decision_is_deterministic_and_ordered_by_priority_then_name() {
    let f = field();
    let addrs: Vec<Address> = (0..3)
        .map(|i| f.parse(&format!("s/api/t{i}")).unwrap())
        .collect();
    let mut c0 = cand("b-target", "h0", &addrs[0], Tier::FirstObservation);
    let mut c1 = cand("a-target", "h1", &addrs[1], Tier::FirstObservation);
    let mut c2 = cand("c-target", "h2", &addrs[2], Tier::FirstObservation);
    c0.priority = 1.0;
    c1.priority = 1.0;
    c2.priority = 7.0;
    let caps: Vec<String> = vec![];
    let cands = vec![c0, c1, c2];
    let run = || {
        let mut buckets = BTreeMap::new();
        lease(
            &f,
            &device("d", 0.5, false, &caps),
            &cands,
            &mut buckets,
            0.0,
            &config(3),
        )
        .unwrap()
    };
    let d = run();
    assert_eq!(
        d.grants
            .iter()
            .map(|g| g.target.as_str())
            .collect::<Vec<_>>(),
        vec!["c-target", "a-target", "b-target"]
    );
    assert_eq!(d, run());
}

#[test]
fn a_refill_receipt_is_reused_but_current_gates_still_veto() {
    let mut f = field();
    let a = f.parse("s/api/t1").unwrap();
    let before = f.decide(&a, 1.0, LIVE).unwrap();
    let caps: Vec<String> = vec![];
    let mut c = cand("t1", "h", &a, Tier::FirstObservation);
    c.receipt = Some(&before);
    let mut buckets = BTreeMap::new();
    let d = lease(
        &f,
        &device("d", 0.5, false, &caps),
        &[c.clone()],
        &mut buckets,
        0.0,
        &config(1),
    )
    .unwrap();
    assert_eq!(d.grants.len(), 1);
    assert_eq!(d.grants[0].receipt, before);
    assert_eq!(d.work.cells_visited, 0, "no decision was made again");
    // A gate written after the refill decided vetoes the reused receipt.
    f.set_gate(&f.parse("s").unwrap(), "browser", Some(false))
        .unwrap();
    let d = lease(
        &f,
        &device("d", 0.5, false, &caps),
        &[c],
        &mut buckets,
        0.0,
        &config(1),
    )
    .unwrap();
    assert!(d.grants.is_empty());
    assert_eq!(
        d.passed[0].1,
        Pass::Infeasible(LossReason::Gate(f.parse("s").unwrap()))
    );
}
