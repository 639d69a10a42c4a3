//! Leases that outlive the process (decision 0018, docs/router.md
//! "Durability and restart"): a lease with items is in the store before it
//! is answered, so after a crash the device deposits on it and each item is
//! accepted exactly once; a lease that lapsed meanwhile is told
//! `lease_expired`; grants made after the last snapshot spend their hosts'
//! politeness again; a lease the store refused is undone. In process with
//! an injected clock, then routerd killed with SIGKILL over loopback on
//! SQLite and on PostgreSQL.

use std::sync::atomic::Ordering;

use serde_json::json;

use crate::router_core::{cfg, deposit_req, lease, register, Dev};
use crate::support;
use crate::support::core::{RefusingTable, SharedMemory};
use crate::support::routerd::{deposit_body, Routerd, CLOCK_START_S};
use router::api::{ApiError, LeaseRequest, ProtestRequest, RegisterRequest};
use router::store::{Store, Table};
use router::Router;

fn opened(store: &SharedMemory, now: f64) -> Router {
    Router::open(cfg(), Box::new(store.clone()), now).unwrap()
}

/// Registers `d` again with its secret (a device whose live scope ended
/// with the process resumes its identity).
fn resume(r: &mut Router, d: &Dev, now: f64) {
    r.register(
        &RegisterRequest {
            device_id: d.id.clone(),
            archetype: "browser".into(),
            capabilities: vec![],
            adapter_version: "1.0".into(),
            registration_token: cfg().registration_token,
            device_secret: Some(d.secret.clone()),
        },
        now,
    )
    .unwrap();
}

/// Leases' rows in the store.
fn stored_leases(store: &SharedMemory) -> usize {
    store.clone().load(Table::Leases).unwrap().len()
}

#[test]
fn an_outstanding_lease_is_deposited_on_exactly_once_after_a_crash() {
    let store = SharedMemory::default();
    let mut r = opened(&store, 0.0);
    r.put_facts(&support::core::board_facts(6, 100.0), 0.0)
        .unwrap();
    let a = register(&mut r, "dev-a", "browser", 0.0);
    r.tick(1.0).unwrap();
    let l = lease(&mut r, &a, 4, 2.0);
    assert_eq!(l.items.len(), 4, "{l:?}");
    assert_eq!(stored_leases(&store), 1, "written before it was answered");
    let first = r
        .deposit(&deposit_req(&a, &l.lease_id, &l.items[0], "h0"), 3.0)
        .unwrap();
    drop(r); // a crash: no final snapshot

    let mut r = opened(&store, 5.0);
    assert_eq!(r.counters().leases_restored, 1);
    // The item deposited before the crash is not accepted again.
    assert_eq!(
        r.deposit(&deposit_req(&a, &l.lease_id, &l.items[0], "h0"), 5.5),
        Err(ApiError::Replayed)
    );
    // The others are accepted, each once.
    let second = r
        .deposit(&deposit_req(&a, &l.lease_id, &l.items[1], "h1"), 6.0)
        .unwrap();
    assert!(second.seq > first.seq, "the log's sequence goes on");
    assert_eq!(
        r.deposit(&deposit_req(&a, &l.lease_id, &l.items[1], "h1"), 6.5),
        Ok(second.clone()),
        "a retry gets the same answer"
    );
    let protest = ProtestRequest {
        device_id: a.id.clone(),
        device_secret: a.secret.clone(),
        lease_id: l.lease_id.clone(),
        target: l.items[2].target.clone(),
        deposit_token: l.items[2].deposit_token.clone(),
        reason: "declined".into(),
    };
    assert!(r.protest(&protest, 7.0).unwrap().released);
    r.deposit(&deposit_req(&a, &l.lease_id, &l.items[3], "h3"), 7.5)
        .unwrap();
    assert_eq!(r.counters().deposits, 2, "two deposits after the restart");
    // The lease has ended; the next snapshot deletes its row.
    assert_eq!(stored_leases(&store), 1);
    r.persist(8.0).unwrap();
    assert_eq!(stored_leases(&store), 0, "an ended lease's row is deleted");
    drop(r);
    let r = opened(&store, 9.0);
    assert_eq!(r.counters().leases_restored, 0);
}

#[test]
fn a_lease_that_lapsed_while_routerd_was_down_is_told_lease_expired_and_its_items_go_back() {
    let store = SharedMemory::default();
    let mut r = opened(&store, 0.0);
    r.put_facts(&support::core::board_facts(2, 100.0), 0.0)
        .unwrap();
    let a = register(&mut r, "dev-a", "browser", 0.0);
    r.tick(1.0).unwrap();
    let l = lease(&mut r, &a, 2, 2.0);
    assert_eq!(l.items.len(), 2);
    drop(r);

    let later = l.expires_at + 10.0;
    let mut r = opened(&store, later);
    assert_eq!(r.counters().leases_restored, 0);
    // Its live scope lapsed with the lease: the device registers again.
    resume(&mut r, &a, later);
    assert_eq!(
        r.deposit(&deposit_req(&a, &l.lease_id, &l.items[0], "h0"), later),
        Err(ApiError::LeaseExpired(l.expires_at))
    );
    r.persist(later).unwrap();
    assert_eq!(
        stored_leases(&store),
        0,
        "the lapsed lease's row is deleted"
    );
    // Nothing is held in flight: the refill offers both targets again.
    let b = register(&mut r, "dev-b", "browser", later);
    r.tick(later + 1.0).unwrap();
    let again = lease(&mut r, &b, 4, later + 2.0);
    let mut targets: Vec<&str> = again.items.iter().map(|i| i.target.as_str()).collect();
    targets.sort();
    assert_eq!(targets, ["ad-0", "ad-1"], "{again:?}");
}

/// A host whose bucket holds one token and refills one in 100 s: a grant
/// made after the last snapshot spent it, so after a crash the host has
/// none to give until the refill (without the grant spent again, the
/// snapshot's full bucket would grant a second request at once).
#[test]
fn a_restart_gives_no_host_a_second_helping_of_politeness() {
    let store = SharedMemory::default();
    let mut r = opened(&store, 0.0);
    let mut facts = support::core::board_facts(4, 1.0);
    facts.sources[0].bucket = Some((1.0, 0.01));
    r.put_facts(&facts, 0.0).unwrap();
    let a = register(&mut r, "dev-a", "browser", 0.0);
    let b = register(&mut r, "dev-b", "browser", 0.0);
    r.tick(1.0).unwrap();
    r.persist(1.0).unwrap();
    let l = lease(&mut r, &a, 4, 2.0);
    assert_eq!(l.items.len(), 1, "one token, one item");
    drop(r);

    let mut r = opened(&store, 3.0);
    resume(&mut r, &b, 3.0);
    r.tick(3.0).unwrap();
    let other = lease(&mut r, &b, 4, 4.0);
    assert!(other.items.is_empty(), "{other:?}");
    let wait = other.retry_after_s.expect("told when to come back");
    // The token refills at 102 s; a hint is at most the lease TTL (60 s).
    assert_eq!(wait, 60.0, "told {wait}");
    // Once the token is back the host gives the next item.
    resume(&mut r, &b, 103.0);
    r.tick(103.0).unwrap();
    assert_eq!(lease(&mut r, &b, 4, 103.0).items.len(), 1);
}

#[test]
fn a_lease_the_store_refused_is_undone_and_its_items_are_offered_again() {
    let store = RefusingTable::new(Table::Leases);
    let mut r = Router::open(cfg(), Box::new(store.clone()), 0.0).unwrap();
    r.put_facts(&support::core::board_facts(3, 100.0), 0.0)
        .unwrap();
    let a = register(&mut r, "dev-a", "browser", 0.0);
    r.tick(1.0).unwrap();
    store.fail.store(true, Ordering::SeqCst);
    let req = LeaseRequest {
        device_id: a.id.clone(),
        device_secret: a.secret.clone(),
        max_items: 4,
        wait_s: None,
    };
    assert!(matches!(r.lease(&req, 2.0), Err(ApiError::Store(_))));
    assert_eq!(r.counters().refused.get("store_unavailable"), Some(&1));
    assert_eq!(stored_leases(&store.inner), 0);
    store.fail.store(false, Ordering::SeqCst);
    r.tick(3.0).unwrap();
    let l = lease(&mut r, &a, 4, 4.0);
    let mut targets: Vec<&str> = l.items.iter().map(|i| i.target.as_str()).collect();
    targets.sort();
    assert_eq!(
        targets,
        ["ad-0", "ad-1", "ad-2"],
        "nothing stayed in flight"
    );
}

/// routerd killed with SIGKILL while a device holds a lease with one item
/// deposited: restarted on the same store, it accepts the other items once
/// each, refuses the deposited one as a replay, and says how many leases
/// it restored.
fn a_lease_outlives_sigkill(data: &std::path::Path, store_args: &[&str]) {
    let r = Routerd::start_manual(data, CLOCK_START_S, store_args);
    let mut f = support::routerd::facts(3);
    f["sources"][0]["bucket"] = json!([10.0, 10.0]);
    assert_eq!(r.send("PUT", "/v1/facts", &f.to_string(), true).0, 200);
    let secret = r.register("dev-a", "browser");
    r.ticks(4, 0.05);
    let l = support::routerd::lease(&r, "dev-a", &secret, 3);
    let items = l["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 3, "{l}");
    let lid = l["lease_id"].as_str().unwrap().to_string();
    let body = |i: usize| deposit_body("dev-a", &secret, &lid, &items[i], "h");
    assert_eq!(r.post("/v1/deposit", &body(0)).0, 200);
    r.kill();

    let r = Routerd::start_manual(data, CLOCK_START_S + 1.0, store_args);
    assert_eq!(r.metric("leases_restored_total"), Some(1.0));
    let (s, v) = r.post("/v1/deposit", &body(0));
    assert_eq!((s, v["error"].as_str()), (409, Some("replayed")), "{v}");
    let (s, first) = r.post("/v1/deposit", &body(1));
    assert_eq!(s, 200, "{first}");
    assert_eq!(
        r.post("/v1/deposit", &body(1)),
        (200, first),
        "answered again"
    );
    assert_eq!(r.post("/v1/deposit", &body(2)).0, 200);
    assert_eq!(r.metric("deposits_total"), Some(2.0), "each item once");
    r.kill();

    // Killed again after the lease ended and before a snapshot deleted its
    // row: the row restores nothing, and a deposit on the ended lease is
    // not accepted again: its token is logged, so it is a replay.
    let r = Routerd::start_manual(data, CLOCK_START_S + 2.0, store_args);
    assert_eq!(r.metric("leases_restored_total"), Some(0.0));
    let (s, v) = r.post(
        "/v1/register",
        &support::routerd::registration("dev-a", support::routerd::TOKEN, Some(&secret)),
    );
    assert_eq!(s, 200, "{v}");
    let (s, v) = r.post("/v1/deposit", &body(2));
    assert_eq!((s, v["error"].as_str()), (409, Some("replayed")), "{v}");
    assert_eq!(r.metric("deposits_total"), Some(0.0));
    r.stop();
}

#[test]
fn a_lease_outlives_sigkill_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    a_lease_outlives_sigkill(dir.path(), &[]);
}

#[test]
fn a_lease_outlives_sigkill_on_postgres() {
    let Some(server) = support::pg::shared() else {
        return;
    };
    let schema = server.schema("lease_kill");
    let dir = tempfile::tempdir().unwrap();
    a_lease_outlives_sigkill(
        dir.path(),
        &["--store", server.url(), "--store-schema", schema.name()],
    );
}
