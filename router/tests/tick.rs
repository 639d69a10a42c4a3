//! The tick's work: outside the router's lock (`core/aging.rs`), the
//! field aged on a clone while deposits fold into the field itself, and a
//! superseded tick's aging dropped; under it, open verifications lapsed at
//! their TTL (`core/due.rs`).

use crate::router_core::{cfg, deposit_req, facts, lease, register, Dev};
use router::store::MemoryStore;
use router::Router;

/// A router with facts, three devices and evidence in the field, at 10 s.
fn with_evidence() -> (Router, Dev) {
    let mut r = Router::open(cfg(), Box::new(MemoryStore::default()), 0.0).unwrap();
    r.put_facts(&facts(), 0.0).unwrap();
    let a = register(&mut r, "dev-a", "browser", 0.0);
    r.tick(1.0).unwrap();
    let l = lease(&mut r, &a, 2, 2.0);
    r.deposit(&deposit_req(&a, &l.lease_id, &l.items[0], "h1"), 3.0)
        .unwrap();
    r.tick(10.0).unwrap();
    (r, a)
}

/// The tick ages the field on a clone outside the lock: a deposit folded
/// between the tick's begin and its finish is kept, and the field is
/// exactly the one aging first and folding after makes.
#[test]
fn a_deposit_folded_while_the_tick_ages_the_field_is_kept_and_aged_as_if_after() {
    let (mut off_lock, dev_off) = with_evidence();
    let (mut in_order, dev_in) = with_evidence();
    let now = 50.0;
    let lease_off = lease(&mut off_lock, &dev_off, 1, now - 5.0);
    let lease_in = lease(&mut in_order, &dev_in, 1, now - 5.0);
    assert_eq!(lease_off.items[0].target, lease_in.items[0].target);
    let before = off_lock.field().clone();
    let deposit = |r: &mut Router, d: &Dev, l: &router::api::LeaseResponse| {
        r.deposit(&deposit_req(d, &l.lease_id, &l.items[0], "h2"), now)
            .unwrap()
    };

    // Off the lock: begin, the deposit meanwhile, then the finish.
    let (mut rep, inputs) = off_lock.tick_begin(now);
    let work = inputs.expect("a finite time").run();
    deposit(&mut off_lock, &dev_off, &lease_off);
    drop(off_lock.tick_finish(&mut rep, work, now));

    // In order: the whole tick (aging under the lock), then the deposit.
    in_order.tick_state(now);
    deposit(&mut in_order, &dev_in, &lease_in);

    let json = |r: &Router| serde_json::to_string(r.field()).unwrap();
    assert_eq!(json(&off_lock), json(&in_order));
    assert_eq!(off_lock.field().revision(), in_order.field().revision());
    assert_ne!(json(&off_lock), serde_json::to_string(&before).unwrap());
    assert_eq!(off_lock.counters().aging_in_place, 0);
}

/// Two ticks begun before either finished (the shell never does this): the
/// first one's aged clone is dropped, not put in place over the second's
/// journal; the second ages the field over both ticks' time.
#[test]
fn an_aged_clone_from_a_superseded_tick_is_not_put_in_place() {
    let (mut r, _) = with_evidence();
    let revision = r.field().revision();
    let (mut rep1, first) = r.tick_begin(20.0);
    let first = first.unwrap().run();
    let (mut rep2, second) = r.tick_begin(30.0);
    let second = second.unwrap().run();
    drop(r.tick_finish(&mut rep1, first, 20.0));
    assert_eq!(r.field().revision(), revision, "the first aging is dropped");
    drop(r.tick_finish(&mut rep2, second, 30.0));
    assert_eq!(r.field().revision(), revision + 1, "one aging, 10 s → 30 s");
    assert_eq!(r.counters().aging_in_place, 0);
    let (mut twice, _) = with_evidence();
    twice.tick_state(30.0);
    assert_eq!(
        serde_json::to_string(r.field()).unwrap(),
        serde_json::to_string(twice.field()).unwrap(),
        "the same as one tick at 30 s"
    );
}

/// The expiries the events report for `target` since the last drain.
fn expired(r: &mut Router, target: &str) -> usize {
    r.drain_events()
        .into_iter()
        .filter_map(|e| match e {
            router::events::Event::VerificationExpired {
                target: t, count, ..
            } if t == target => Some(count),
            _ => None,
        })
        .sum()
}

/// Two verifications of one row opened 7 s apart and never answered
/// lapse each at its own TTL, before their leases do: the tick that takes
/// the row due for the first arms it again for the second (one entry per
/// target, not one per verification: docs/router.md, "The small box").
#[test]
fn unanswered_verifications_lapse_each_at_its_own_ttl() {
    let mut config = cfg();
    config.verify.ttl_s = 20.0;
    let mut r = Router::open(config, Box::new(MemoryStore::default()), 0.0).unwrap();
    r.put_facts(&facts(), 0.0).unwrap();
    let a = register(&mut r, "dev-a", "browser", 0.0);
    let b = register(&mut r, "dev-b", "desktop", 0.0);
    let c = register(&mut r, "dev-c", "container_plain", 0.0);
    r.tick(1.0).unwrap();
    let la = lease(&mut r, &a, 1, 2.0);
    let item = la.items[0].clone();
    r.deposit(&deposit_req(&a, &la.lease_id, &item, "h1"), 3.0)
        .unwrap();
    r.tick(4.0).unwrap();
    let granted = |r: &mut Router, d: &Dev, now: f64| {
        let l = lease(r, d, 8, now);
        l.items.iter().any(|i| i.target == item.target)
    };
    assert!(granted(&mut r, &b, 5.0), "b is asked to verify the row");
    assert!(granted(&mut r, &c, 12.0), "c is asked too, later");
    assert_eq!(r.target_view(&item.target).unwrap().open_verifications, 2);
    drop(r.drain_events());
    let mut lapsed = Vec::new();
    for t in [24.0, 25.0, 31.0, 32.0] {
        r.tick(t).unwrap();
        let open = r.target_view(&item.target).unwrap().open_verifications;
        lapsed.push((t, expired(&mut r, &item.target), open));
    }
    assert_eq!(
        lapsed,
        [(24.0, 0, 2), (25.0, 1, 1), (31.0, 0, 1), (32.0, 1, 0)],
        "(tick, lapsed, still open): b's at 5 + 20 s, c's at 12 + 20 s"
    );
}
