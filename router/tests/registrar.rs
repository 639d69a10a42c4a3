//! New identities' durable writes (docs/router.md "Durability and
//! restart"): a registration waiting for the store holds up no one else,
//! registrations waiting together share one write, and a refused write
//! keeps nothing. routerd in process over real loopback HTTP on a memory
//! store the test holds or makes refuse.

use crate::support;
use crate::support::in_process::InProcess;
use crate::support::routerd::{registration, TOKEN};

use serde_json::json;

/// A new identity's durable write held the router's lock: with the store
/// slow, every lease and `/metrics` waited behind one registration. Now
/// the write happens outside the lock: with the store held, the
/// registration waits (`router_registrations_pending` 1) while another
/// device's lease and `/metrics` answer; freed, the registration answers
/// and the identity is known, while a second registration of the same id
/// during the wait is refused.
#[test]
fn a_registration_waiting_for_the_store_holds_up_no_one_else() {
    let r = InProcess::start(16);
    let f = support::routerd::facts(3);
    assert_eq!(r.send("/v1/facts", &f).0, 200);
    let (s, v, _) = r.send("/v1/register", &registration("dev-a", TOKEN, None));
    assert_eq!(s, 200, "{v}");
    let secret = v["device_secret"].as_str().unwrap().to_string();
    let held = r.store.lock();
    let (s, v) = std::thread::scope(|scope| {
        let new = scope.spawn(|| r.send("/v1/register", &registration("dev-b", TOKEN, None)));
        // Wait on the event: the registration is waiting for the store.
        while r.metric("registrations_pending") < 1.0 {
            std::thread::yield_now();
        }
        let (s, l, _) = r.send(
            "/v1/lease",
            &json!({"device_id": "dev-a", "device_secret": secret, "max_items": 1}),
        );
        assert_eq!(s, 200, "a lease answers while a registration waits: {l}");
        let (s, v, _) = r.send("/v1/register", &registration("dev-b", TOKEN, None));
        assert_eq!((s, v["error"].as_str()), (401, Some("unauthorized")), "{v}");
        drop(held);
        let (s, v, _) = new.join().unwrap();
        (s, v)
    });
    assert_eq!(s, 200, "{v}");
    assert_eq!(r.metric("registrations_pending"), 0.0);
    let b = v["device_secret"].as_str().unwrap();
    let (s, v, _) = r.send("/v1/register", &registration("dev-b", TOKEN, Some(b)));
    assert_eq!(s, 200, "the identity is known: {v}");
}

/// Every registration of a new identity was its own durable write, so a
/// fleet registering at once queued one commit (one fsync) per device.
/// Now the registrar writes every identity waiting in one write: with the
/// store held while five devices register, the five wait
/// (`router_registrations_pending` 5); freed, they take at most two
/// writes (the one the registrar was holding when the store was taken,
/// then the rest at once), each is answered, and each identity is known.
#[test]
fn registrations_waiting_together_share_one_durable_write() {
    let r = InProcess::start(16);
    assert_eq!(r.send("/v1/facts", &support::routerd::facts(3)).0, 200);
    let before = r.metric("registration_writes_total");
    let ids: Vec<String> = (0..5).map(|i| format!("dev-{i}")).collect();
    let answers = register_together(&r, &ids, || {
        assert_eq!(r.metric("registration_writes_total"), before);
    });
    for (id, (s, v, _)) in ids.iter().zip(&answers) {
        assert_eq!(*s, 200, "{id}: {v}");
        let secret = v["device_secret"].as_str().unwrap();
        let (s, v, _) = r.send("/v1/register", &registration(id, TOKEN, Some(secret)));
        assert_eq!(s, 200, "{id} is known: {v}");
    }
    let writes = r.metric("registration_writes_total") - before;
    assert!(
        (1.0..=2.0).contains(&writes),
        "five registrations waiting took {writes} writes"
    );
    assert_eq!(r.metric("registrations_pending"), 0.0);
}

/// A failed write of a group of new identities keeps nothing of any of
/// them: with the devices' table refusing writes, three devices
/// waiting together are each refused `store_unavailable`, none is
/// pending or known afterwards, and once the store takes writes again each
/// registers as new (no secret asked for).
#[test]
fn a_group_of_registrations_the_store_refused_keeps_nothing() {
    let store = support::core::RefusingTable::new(router::store::Table::Devices);
    let r = InProcess::start_on(16, Box::new(store.clone()));
    assert_eq!(r.send("/v1/facts", &support::routerd::facts(3)).0, 200);
    store.fail.store(true, std::sync::atomic::Ordering::SeqCst);
    let ids: Vec<String> = (0..3).map(|i| format!("dev-{i}")).collect();
    let answers = register_together(&r, &ids, || ());
    for (id, (s, v, _)) in ids.iter().zip(&answers) {
        assert_eq!(
            (*s, v["error"].as_str()),
            (503, Some("store_unavailable")),
            "{id}: {v}"
        );
    }
    assert_eq!(r.metric("registrations_pending"), 0.0);
    store.fail.store(false, std::sync::atomic::Ordering::SeqCst);
    for id in &ids {
        let (s, v, _) = r.send("/v1/register", &registration(id, TOKEN, None));
        assert_eq!(s, 200, "{id} registers as new: {v}");
    }
}

/// Registers `ids` as new devices at once while the store is held, so all
/// of them wait together (`router_registrations_pending` reaches their
/// number, waited for as an event); runs `meanwhile`, frees the store and
/// returns each answer (status, body, Retry-After) in `ids`' order.
fn register_together(
    r: &InProcess,
    ids: &[String],
    meanwhile: impl FnOnce(),
) -> Vec<(u16, serde_json::Value, Option<String>)> {
    let held = r.store.lock();
    std::thread::scope(|scope| {
        let sent: Vec<_> = ids
            .iter()
            .map(|id| scope.spawn(move || r.send("/v1/register", &registration(id, TOKEN, None))))
            .collect();
        while r.metric("registrations_pending") < ids.len() as f64 {
            std::thread::yield_now();
        }
        meanwhile();
        drop(held);
        sent.into_iter().map(|h| h.join().unwrap()).collect()
    })
}
