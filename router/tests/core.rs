//! The application core in process, with an injected clock: registration,
//! leases, deposits, protests, verification, trust, learned gates, prices
//! and restart from the store (snapshot plus logged deposits).

use crate::support;

use crate::support::core::SharedMemory;
use router::api::{
    ApiError, DepositRequest, LeaseRequest, Outcome, ProtestRequest, RegisterRequest,
};
use router::config::{Facts, RouterConfig, TargetFact};
use router::store::{MemoryStore, Store, Table};
use router::Router;

pub(crate) fn cfg() -> RouterConfig {
    RouterConfig::default()
}

pub(crate) fn facts() -> Facts {
    support::core::board_facts(6, 100.0)
}

pub(crate) struct Dev {
    pub(crate) id: String,
    pub(crate) secret: String,
}

pub(crate) fn register(r: &mut Router, id: &str, archetype: &str, now: f64) -> Dev {
    let resp = r
        .register(
            &RegisterRequest {
                device_id: id.into(),
                archetype: archetype.into(),
                capabilities: vec![],
                adapter_version: "1.0".into(),
                registration_token: cfg().registration_token,
                device_secret: None,
            },
            now,
        )
        .unwrap();
    Dev {
        id: id.into(),
        secret: resp.device_secret,
    }
}

pub(crate) fn lease(r: &mut Router, d: &Dev, n: usize, now: f64) -> router::api::LeaseResponse {
    r.lease(
        &LeaseRequest {
            device_id: d.id.clone(),
            device_secret: d.secret.clone(),
            max_items: n,
            wait_s: None,
        },
        now,
    )
    .unwrap()
}

/// An executed failure of error class `class`.
fn failed(class: &str) -> Outcome {
    Outcome {
        ok: false,
        content_hash: None,
        latency_ms: Some(100.0),
        error_class: Some(class.into()),
        retry_after_s: None,
        crawl_delay_s: None,
    }
}

pub(crate) fn deposit_req(
    d: &Dev,
    lease_id: &str,
    item: &router::api::LeaseItem,
    hash: &str,
) -> DepositRequest {
    DepositRequest {
        device_id: d.id.clone(),
        device_secret: d.secret.clone(),
        lease_id: lease_id.into(),
        target: item.target.clone(),
        deposit_token: item.deposit_token.clone(),
        receipt_revision: 0,
        adapter_id: "html".into(),
        adapter_version: "1.0".into(),
        outcome: Outcome {
            ok: true,
            content_hash: Some(hash.into()),
            latency_ms: Some(800.0),
            error_class: None,
            retry_after_s: None,
            crawl_delay_s: None,
        },
        discovered: vec![],
    }
}

/// A protest: the item goes back and the field learns nothing.
fn protest_teaches_nothing(r: &mut Router, c: &Dev) {
    let revision = r.field().revision();
    let l = lease(r, c, 1, 7.0);
    if let Some(it) = l.items.first() {
        r.protest(
            &ProtestRequest {
                device_id: c.id.clone(),
                device_secret: c.secret.clone(),
                lease_id: l.lease_id.clone(),
                target: it.target.clone(),
                deposit_token: it.deposit_token.clone(),
                reason: "unreachable from here".into(),
            },
            7.5,
        )
        .unwrap();
        assert_eq!(
            r.field().revision(),
            revision,
            "a protest teaches the field nothing"
        );
    }
}

#[test]
fn a_first_observation_is_verified_by_others_and_survives_a_restart() {
    let store = SharedMemory::default();
    let mut r = Router::open(cfg(), Box::new(store.clone()), 0.0).unwrap();
    r.put_facts(&facts(), 0.0).unwrap();
    let a = register(&mut r, "dev-a", "browser", 0.0);
    let b = register(&mut r, "dev-b", "desktop", 0.0);
    let c = register(&mut r, "dev-c", "container_plain", 0.0);
    r.tick(1.0).unwrap();
    let la = lease(&mut r, &a, 4, 2.0);
    assert!(!la.items.is_empty(), "a browser gets work");
    assert_eq!(la.items.len(), la.routing_trace.len());
    let item = la.items[0].clone();
    assert_eq!(item.kind, "first_observation");
    let dep = r
        .deposit(&deposit_req(&a, &la.lease_id, &item, "h1"), 3.0)
        .unwrap();
    assert!(!dep.settled);
    // The same deposit again (its answer was lost) gets the same answer;
    // another body under the used token is a replay.
    assert_eq!(
        r.deposit(&deposit_req(&a, &la.lease_id, &item, "h1"), 3.5),
        Ok(dep.clone())
    );
    assert_eq!(
        r.deposit(&deposit_req(&a, &la.lease_id, &item, "h2"), 3.5),
        Err(ApiError::Replayed)
    );
    // Another device may not deposit on a's lease.
    let mut foreign = deposit_req(&b, &la.lease_id, &la.items[1], "h1");
    foreign.device_id = b.id.clone();
    assert_eq!(r.deposit(&foreign, 3.5), Err(ApiError::UnknownLease));
    // Verification of the observed row is offered to the others.
    r.tick(4.0).unwrap();
    let mut verified = 0;
    for d in [&b, &c] {
        let l = lease(&mut r, d, 8, 5.0);
        for it in l.items.iter().filter(|i| i.target == item.target) {
            assert_eq!(it.kind, "verification");
            r.deposit(&deposit_req(d, &l.lease_id, it, "h1"), 6.0)
                .unwrap();
            verified += 1;
        }
    }
    assert_eq!(verified, 2, "two verifications of the row were granted");
    assert_eq!(
        r.settled(&item.target),
        Some("h1"),
        "a quorum of 3 agreeing votes settles"
    );
    let trust_a = r.trust("dev-a").unwrap();
    assert!(trust_a > 0.5, "agreement raised a's trust: {trust_a}");
    let deposits = r.counters().deposits;
    assert_eq!(deposits, 3);
    protest_teaches_nothing(&mut r, &c);
    // Restart without a snapshot of the last deposits: the log replays them.
    r.tick(8.0).unwrap();
    // One of a's still-leased items, deposited after the last snapshot.
    let it = la.items[1].clone();
    r.deposit(&deposit_req(&a, &la.lease_id, &it, "h9"), 9.5)
        .unwrap();
    let before = (
        r.trust("dev-a"),
        r.trust("dev-b"),
        r.settled_rows(),
        r.open_verifications(),
    );
    drop(r);
    let r2 = Router::open(cfg(), Box::new(store.clone()), 10.0).unwrap();
    assert_eq!(
        r2.counters().replayed,
        1,
        "the deposit after the last snapshot was folded again"
    );
    assert_eq!(
        (
            r2.trust("dev-a"),
            r2.trust("dev-b"),
            r2.settled_rows(),
            r2.open_verifications()
        ),
        before
    );
    assert_eq!(r2.settled(&item.target), Some("h1"));
}

#[test]
fn bad_requests_are_typed_and_change_nothing() {
    let mut r = Router::open(cfg(), Box::new(MemoryStore::new()), 0.0).unwrap();
    r.put_facts(&facts(), 0.0).unwrap();
    let a = register(&mut r, "dev-a", "browser", 0.0);
    r.tick(1.0).unwrap();
    let l = lease(&mut r, &a, 1, 2.0);
    let it = l.items[0].clone();
    let revision = r.field().revision();
    let mut bad = deposit_req(&a, &l.lease_id, &it, "h");
    bad.outcome.latency_ms = Some(f64::NAN);
    assert!(matches!(
        r.deposit(&bad, 3.0),
        Err(ApiError::BadValue { .. })
    ));
    bad = deposit_req(&a, &l.lease_id, &it, "h");
    bad.device_secret = "wrong".into();
    assert!(matches!(
        r.deposit(&bad, 3.0),
        Err(ApiError::Unauthorized(_))
    ));
    bad = deposit_req(&a, &l.lease_id, &it, "h");
    bad.deposit_token = "guess".into();
    assert_eq!(r.deposit(&bad, 3.0), Err(ApiError::UnknownItem));
    assert_eq!(r.field().revision(), revision);
    // Expired lease.
    let late = r.deposit(&deposit_req(&a, &l.lease_id, &it, "h"), 2.0 + 61.0);
    assert!(
        matches!(
            late,
            Err(ApiError::UnknownDevice(_)) | Err(ApiError::LeaseExpired(_))
        ),
        "{late:?}"
    );
    // Unknown archetype and bad token at registration.
    let mut req = RegisterRequest {
        device_id: "x".into(),
        archetype: "fridge".into(),
        capabilities: vec![],
        adapter_version: "1".into(),
        registration_token: cfg().registration_token,
        device_secret: None,
    };
    assert_eq!(
        r.register(&req, 3.0).unwrap_err(),
        ApiError::UnknownArchetype("fridge".into())
    );
    req.archetype = "browser".into();
    req.registration_token = "nope".into();
    assert!(matches!(
        r.register(&req, 3.0),
        Err(ApiError::Unauthorized(_))
    ));
    // Facts are all or nothing.
    let mut f = facts();
    f.targets.push(TargetFact {
        target: "orphan".into(),
        source: "nowhere".into(),
        listing: false,
    });
    f.temperature = Some(3.0);
    assert!(r.put_facts(&f, 4.0).is_err());
    assert_eq!(r.get_facts().temperature, Some(1.0));
    assert_eq!(r.targets(), 6);
    assert!(r.counters().refused.values().sum::<u64>() >= 6);
}

#[test]
fn a_corroborated_cors_failure_closes_the_archetype_and_a_success_reopens_it() {
    let mut r = Router::open(cfg(), Box::new(MemoryStore::new()), 0.0).unwrap();
    r.put_facts(&facts(), 0.0).unwrap();
    let a = register(&mut r, "dev-a", "browser", 0.0);
    let b = register(&mut r, "dev-b", "browser", 0.0);
    let c = register(&mut r, "dev-c", "container_plain", 0.0);
    r.tick(1.0).unwrap();
    let l = lease(&mut r, &a, 1, 2.0);
    let lb = lease(&mut r, &b, 1, 2.0);
    let mut dep = deposit_req(&a, &l.lease_id, &l.items[0], "h");
    dep.outcome = failed("cors");
    let mut depb = deposit_req(&b, &lb.lease_id, &lb.items[0], "h");
    depb.outcome = failed("cors");
    let root = r.field().parse("").unwrap();
    let before = r
        .field()
        .posterior(&root, "browser", "reliability")
        .unwrap();
    r.deposit(&dep, 3.0).unwrap();
    let src = r.field().parse("board").unwrap();
    // One device's wall is its own (docs/router.md "Threat model")...
    assert_eq!(r.field().gate(&src, "browser"), None);
    // ...a second device's corroborates it: the gate shuts.
    r.deposit(&depb, 3.0).unwrap();
    assert_eq!(r.field().gate(&src, "browser"), Some(false));
    // The gate carries the failure: no reliability evidence is folded, so
    // the archetype's fleet-wide mean does not move for one source's wall.
    let after = r
        .field()
        .posterior(&root, "browser", "reliability")
        .unwrap();
    assert_eq!(format!("{before:?}"), format!("{after:?}"));

    // After the refill every target of the source goes to the container.
    r.tick(4.0).unwrap();
    assert!(
        lease(&mut r, &b, 4, 5.0).items.is_empty(),
        "browser is gated off the source"
    );
    let lc = lease(&mut r, &c, 1, 5.0);
    assert_eq!(lc.items.len(), 1);
    // An ordinary failure does fold (the contrast that makes the check bite).
    let mut dep2 = deposit_req(&c, &lc.lease_id, &lc.items[0], "h");
    dep2.outcome = failed("http_5xx");
    let root_c = r
        .field()
        .posterior(&root, "container_plain", "reliability")
        .unwrap();
    r.deposit(&dep2, 5.5).unwrap();
    let root_c2 = r
        .field()
        .posterior(&root, "container_plain", "reliability")
        .unwrap();
    assert!(root_c2.mean > root_c.mean, "{root_c:?} → {root_c2:?}");
    let view = r.field_view();
    assert!(view.sources[0]
        .cells
        .iter()
        .any(|c| c.archetype == "browser" && c.gated));
}

#[test]
fn a_capped_pool_is_never_overspent_and_the_demand_it_cut_raises_its_price() {
    let mut r = Router::open(cfg(), Box::new(MemoryStore::new()), 0.0).unwrap();
    let mut f = facts();
    // One lease stamp (1) plus one database copy per deposit (1 each): a
    // lease fits 3 items under a cap of 4.
    f.caps.insert("database".into(), 4.0);
    r.put_facts(&f, 0.0).unwrap();
    let a = register(&mut r, "dev-a", "browser", 0.0);
    let b = register(&mut r, "dev-b", "browser", 0.0);
    r.tick(1.0).unwrap();
    let l = lease(&mut r, &a, 4, 2.0);
    assert_eq!(l.items.len(), 3, "the cap leaves room for 3 of the 4 asked");
    assert_eq!(r.counters().budget_held, 1);
    // The 3 items in flight hold their deposits' charge: nothing is left.
    let lb = lease(&mut r, &b, 2, 2.5);
    assert!(lb.items.is_empty(), "{:?}", lb.items);
    for it in &l.items {
        r.deposit(&deposit_req(&a, &l.lease_id, it, "h"), 3.0)
            .unwrap();
        let used = r.price_window().1.get("database").copied().unwrap_or(0.0);
        assert!(used <= 4.0 + 1e-9, "usage {used} over the cap");
    }
    assert_eq!(r.price_window().1["database"], 4.0);
    // The window closes at the cap; the one item the cap cut from a full
    // grant is excess demand: λ = 0.1·(4 + 1 − 4). The device the cap left
    // no room for at all adds nothing (nothing measured it).
    r.tick(61.0).unwrap();
    let p = r.prices()["database"];
    assert!((p - 0.1).abs() < 1e-9, "λ {p}");
    let events: Vec<_> = r
        .drain_events()
        .into_iter()
        .filter(|e| e.kind() == "price_changed")
        .collect();
    assert_eq!(events.len(), 1);
    assert!(r.metrics_text().contains("router_price{pool=\"database\"}"));
    // Both leases were cut: a to 3 items, b to none.
    assert!(r.metrics_text().contains("router_budget_held_total 2"));
    // A new window has the whole cap again.
    assert_eq!(
        r.price_window().1.get("database").copied().unwrap_or(0.0),
        0.0
    );
    let l2 = lease(&mut r, &a, 2, 61.5);
    assert!(!l2.items.is_empty(), "the new window grants again");
}

#[test]
fn an_uncapped_pool_never_limits_a_lease() {
    let mut r = Router::open(cfg(), Box::new(MemoryStore::new()), 0.0).unwrap();
    r.put_facts(&facts(), 0.0).unwrap();
    let a = register(&mut r, "dev-a", "browser", 0.0);
    r.tick(1.0).unwrap();
    assert_eq!(lease(&mut r, &a, 4, 2.0).items.len(), 4);
    assert_eq!(r.counters().budget_held, 0);
}

#[test]
fn the_field_variances_come_from_the_configuration_and_bad_ones_are_refused() {
    let r = Router::open(cfg(), Box::new(MemoryStore::new()), 0.0).unwrap();
    let fv = router::config::FieldVariances::default();
    let f = r.field();
    let vars: Vec<f64> = f.layers().iter().map(|l| l.process_variance).collect();
    assert_eq!(vars, fv.layers.to_vec());
    assert_eq!(f.dimension_scale("reliability"), 1.0);
    assert_eq!(f.dimension_scale("latency"), fv.latency_scale);
    assert_eq!(
        f.dimension_scale("financial"),
        router::config::KNOWN_FACT_SCALE
    );
    assert_eq!(
        f.dimension_scale("budget:database"),
        router::config::KNOWN_FACT_SCALE
    );
    // A never-observed archetype at a new task: the sum of the path's
    // variances (root + four layers) in reliability units.
    let a = f.parse("new/html/t1/browser").unwrap();
    let p = f.posterior(&a, "browser", "reliability").unwrap();
    let sum = fv.root + fv.layers.iter().sum::<f64>();
    assert!((p.variance - sum).abs() < 1e-12, "{} vs {sum}", p.variance);
    for bad in [0.0, -0.1, f64::NAN, f64::INFINITY] {
        for i in 0..6 {
            let mut c = cfg();
            match i {
                0 => c.field_variances.root = bad,
                5 => c.field_variances.latency_scale = bad,
                k => c.field_variances.layers[k - 1] = bad,
            }
            let e = Router::open(c, Box::new(MemoryStore::new()), 0.0);
            assert!(
                matches!(e, Err(router::core::OpenError::BadConfig(_))),
                "{bad} at {i}"
            );
        }
    }
}

#[test]
fn facts_declared_again_do_not_refill_a_hosts_bucket() {
    let mut r = Router::open(cfg(), Box::new(MemoryStore::new()), 0.0).unwrap();
    let mut f = facts();
    // One token at a time, one every 2 s.
    f.sources[0].bucket = Some((1.0, 0.5));
    r.put_facts(&f, 0.0).unwrap();
    let devs: Vec<Dev> = (0..2)
        .map(|i| register(&mut r, &format!("dev-{i}"), "browser", 0.0))
        .collect();
    r.tick(1.0).unwrap();
    assert_eq!(lease(&mut r, &devs[0], 1, 1.0).items.len(), 1);
    // The operator sends the same facts again (a periodic sync): the host
    // got its one request; a new full bucket would grant a second at once.
    r.put_facts(&f, 1.0).unwrap();
    assert!(lease(&mut r, &devs[1], 1, 1.0).items.is_empty());
    assert_eq!(lease(&mut r, &devs[1], 1, 3.0).items.len(), 1);
}

#[test]
fn an_empty_lease_says_when_to_ask_again_and_promises_each_token_once() {
    let mut r = Router::open(cfg(), Box::new(MemoryStore::new()), 0.0).unwrap();
    let mut f = facts();
    // One token at a time, one every 2 s.
    f.sources[0].bucket = Some((1.0, 0.5));
    r.put_facts(&f, 0.0).unwrap();
    let devs: Vec<Dev> = (0..4)
        .map(|i| register(&mut r, &format!("dev-{i}"), "browser", 0.0))
        .collect();
    r.tick(1.0).unwrap();
    // Before a second tick the router cannot tell its cadence.
    let first = lease(&mut r, &devs[0], 1, 1.0);
    assert_eq!(first.items.len(), 1);
    assert_eq!(first.retry_after_s, None, "granted: no hint");
    let h1 = lease(&mut r, &devs[1], 1, 1.0);
    let h2 = lease(&mut r, &devs[2], 1, 1.0);
    assert!(h1.items.is_empty() && h2.items.is_empty());
    // The next token comes at t = 3; the one after it at t = 5.
    assert!((h1.retry_after_s.unwrap() - 2.0).abs() < 1e-9, "{h1:?}");
    assert!((h2.retry_after_s.unwrap() - 4.0).abs() < 1e-9, "{h2:?}");
    // The promised device gets the token when it comes back.
    assert_eq!(lease(&mut r, &devs[1], 1, 3.0).items.len(), 1);
    // Nothing queued at all: the hint is the next refill, from the cadence.
    let mut q = Router::open(cfg(), Box::new(MemoryStore::new()), 0.0).unwrap();
    let d = register(&mut q, "dev-q", "browser", 0.0);
    q.tick(1.0).unwrap();
    assert_eq!(
        lease(&mut q, &d, 1, 2.0).retry_after_s,
        None,
        "one tick: no cadence yet"
    );
    q.tick(31.0).unwrap();
    let idle = lease(&mut q, &d, 1, 40.0);
    assert!(idle.items.is_empty());
    assert!(
        (idle.retry_after_s.unwrap() - 21.0).abs() < 1e-9,
        "{idle:?}"
    );
    // A late tick reads as due now.
    assert_eq!(lease(&mut q, &d, 1, 70.0).retry_after_s, Some(0.0));
}

/// A tick takes its snapshot under the router's lock and writes it outside
/// it, so a snapshot taken earlier can reach the store after a later one
/// (here: the operator's facts, written before they were acknowledged).
/// The later snapshot wins whatever the order of the writes: the facts and
/// the registration survive a restart.
#[test]
fn a_snapshot_written_late_never_overwrites_a_newer_one() {
    let store = SharedMemory::default();
    let mut r = Router::open(cfg(), Box::new(store.clone()), 0.0).unwrap();
    register(&mut r, "dev-a", "browser", 0.0);
    let stale = r
        .take_snapshot_now(0.5)
        .expect("a registration dirties the state");
    r.put_facts(&facts(), 1.0).unwrap();
    Router::write_snapshot(&r.store_handle(), &stale).unwrap();
    let known = r.targets();
    assert_eq!(known, 6);
    drop(r);
    let r2 = Router::open(cfg(), Box::new(store), 10.0).unwrap();
    assert_eq!(r2.targets(), known, "the acknowledged facts were lost");
    assert!(r2.trust("dev-a").is_some());
}

/// Snapshot rows written before the snapshot sequence existed carry the
/// deposit seq as their version (here 1,000, with no `snapshot_seq` in the
/// payload): a reopened router's next snapshot still replaces them.
#[test]
fn an_older_snapshot_row_is_replaced_by_the_next_snapshot() {
    let store = SharedMemory::default();
    let mut r = Router::open(cfg(), Box::new(store.clone()), 0.0).unwrap();
    register(&mut r, "dev-a", "browser", 0.0);
    r.persist(0.5).unwrap();
    drop(r);
    let mut raw = store.clone();
    let mut row = raw
        .get(Table::Meta, "snapshot")
        .unwrap()
        .expect("a snapshot row");
    let mut payload: serde_json::Value = serde_json::from_str(&row.payload).unwrap();
    payload.as_object_mut().unwrap().remove("snapshot_seq");
    row.payload = payload.to_string();
    row.version = 1_000;
    raw.upsert(Table::Meta, &[row]).unwrap();
    let mut r = Router::open(cfg(), Box::new(store.clone()), 1.0).unwrap();
    r.put_facts(&facts(), 2.0).unwrap();
    drop(r);
    let r = Router::open(cfg(), Box::new(store), 3.0).unwrap();
    assert_eq!(r.targets(), 6, "the facts' snapshot replaced the older row");
}
