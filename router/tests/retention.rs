//! Retention (docs/router.md "Threat model"): nothing used to be pruned, so
//! deposits and devices grew for ever. Now the deposit log keeps what a
//! written snapshot covers for `deposit_retention_s`, and a device not
//! registered for `device_retention_s` is forgotten; a restart after
//! either loses nothing the router decides by. The core in process on a
//! real SQLite file, its clock injected.

use crate::support;

use router::api::{DepositRequest, LeaseRequest, Outcome, RegisterRequest};
use router::config::{Facts, RouterConfig};
use router::store::{SqliteStore, Table};
use router::Router;

fn cfg() -> RouterConfig {
    RouterConfig {
        deposit_retention_s: 60.0,
        device_retention_s: 100.0,
        ..RouterConfig::default()
    }
}

fn open(dir: &std::path::Path, now: f64) -> Router {
    let store = SqliteStore::open_dir(dir).unwrap();
    Router::open(cfg(), Box::new(store), now).unwrap()
}

fn facts(n: usize) -> Facts {
    support::core::board_facts(n, 1000.0)
}

/// Registers (or renews, with its secret) `id` at `now`; returns the secret.
fn register(r: &mut Router, id: &str, secret: Option<&str>, now: f64) -> String {
    r.register(
        &RegisterRequest {
            device_id: id.into(),
            archetype: "browser".into(),
            capabilities: vec![],
            adapter_version: "1.0".into(),
            registration_token: cfg().registration_token,
            device_secret: secret.map(str::to_string),
        },
        now,
    )
    .unwrap()
    .device_secret
}

/// Leases up to 4 items for `id` and deposits each; returns the deposits.
fn work(r: &mut Router, id: &str, secret: &str, now: f64) -> usize {
    let l = r
        .lease(
            &LeaseRequest {
                device_id: id.into(),
                device_secret: secret.into(),
                max_items: 4,
                wait_s: None,
            },
            now,
        )
        .unwrap();
    for item in &l.items {
        let req = DepositRequest {
            device_id: id.into(),
            device_secret: secret.into(),
            lease_id: l.lease_id.clone(),
            target: item.target.clone(),
            deposit_token: item.deposit_token.clone(),
            receipt_revision: 0,
            adapter_id: "html".into(),
            adapter_version: "1.0".into(),
            outcome: Outcome {
                ok: true,
                content_hash: Some(format!("h-{}", item.target)),
                latency_ms: Some(800.0),
                error_class: None,
                retry_after_s: None,
                crawl_delay_s: None,
            },
            discovered: vec![],
        };
        r.deposit(&req, now).unwrap();
    }
    l.items.len()
}

fn logged(r: &Router) -> usize {
    r.store_handle().lock().deposits_after(0).unwrap().len()
}

#[test]
fn the_deposit_log_is_pruned_after_its_retention_and_a_restart_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = open(dir.path(), 0.0);
    r.put_facts(&facts(40), 0.0).unwrap();
    let a = register(&mut r, "dev-a", None, 0.0);
    r.tick(1.0).unwrap();
    let mut deposited = 0;
    let mut now = 2.0;
    while deposited < 12 {
        deposited += work(&mut r, "dev-a", &a, now);
        now += 1.0;
        r.tick(now).unwrap();
    }
    assert_eq!(
        logged(&r),
        deposited,
        "nothing is pruned within the retention"
    );
    // Past the retention of the snapshots that covered them (ticking, and
    // renewing the device's live scope, every 5 s).
    while now < 150.0 {
        now += 5.0;
        register(&mut r, "dev-a", Some(&a), now);
        r.tick(now).unwrap();
    }
    assert_eq!(logged(&r), 1, "all but the highest are pruned");
    assert_eq!(r.counters().deposits_pruned, deposited as u64 - 1);
    let trust = r.trust("dev-a");
    let rows = r.settled_rows();
    let last = r.store_handle().lock().last_seq().unwrap();
    drop(r);
    // Reopened: the snapshot holds every pruned deposit's effect, and new
    // deposits take seqs after the pruned ones.
    let mut r = open(dir.path(), now + 1.0);
    assert_eq!(r.trust("dev-a"), trust);
    assert_eq!(r.settled_rows(), rows);
    register(&mut r, "dev-a", Some(&a), now + 1.0);
    r.tick(now + 2.0).unwrap();
    assert!(work(&mut r, "dev-a", &a, now + 3.0) > 0);
    assert!(r.store_handle().lock().last_seq().unwrap() > last);
}

#[test]
fn a_departed_device_is_forgotten_with_its_row_and_a_suspended_one_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = open(dir.path(), 0.0);
    register(&mut r, "gone", None, 0.0);
    register(&mut r, "held", None, 0.0);
    let stays = register(&mut r, "stays", None, 0.0);
    let mut f = facts(1);
    f.device_states.insert("held".into(), "suspended".into());
    r.put_facts(&f, 0.5).unwrap();
    let mut now = 1.0;
    r.tick(now).unwrap();
    // 200 s on, renewing only `stays`: `gone` is past its 100 s.
    while now < 200.0 {
        now += 10.0;
        register(&mut r, "stays", Some(&stays), now);
        r.tick(now).unwrap();
    }
    assert_eq!(r.trust("gone"), None);
    assert!(
        r.trust("held").is_some(),
        "an operator's state never lapses"
    );
    assert!(r.trust("stays").is_some());
    assert_eq!(r.counters().devices_departed, 1);
    let rows: Vec<String> = r
        .store_handle()
        .lock()
        .load(Table::Devices)
        .unwrap()
        .into_iter()
        .map(|row| row.key)
        .collect();
    assert_eq!(rows, vec!["held".to_string(), "stays".to_string()]);
    drop(r);
    let mut r = open(dir.path(), now + 1.0);
    assert_eq!(r.trust("gone"), None, "forgotten for good");
    // Coming back, it is a new identity.
    register(&mut r, "gone", None, now + 2.0);
    assert_eq!(r.trust("gone"), Some(0.5));
}

/// The same over HTTP on routerd's manual clock: past the retentions the
/// deposit log is pruned and a departed device's id registers afresh
/// (before, a known id without its secret was refused for ever).
#[test]
fn routerd_prunes_its_log_and_forgets_departed_devices() {
    use support::routerd::{deposit_body, lease, registration, Routerd, CLOCK_START_S, TOKEN};
    let dir = tempfile::tempdir().unwrap();
    let r = Routerd::start_manual(
        dir.path(),
        CLOCK_START_S,
        &["--deposit-retention-s", "60", "--device-retention-s", "60"],
    );
    let (s, _) = r.send(
        "PUT",
        "/v1/facts",
        &support::routerd::facts(8).to_string(),
        true,
    );
    assert_eq!(s, 200);
    let a = r.register("dev-a", "browser");
    r.ticks(4, 0.05);
    let l = lease(&r, "dev-a", &a, 4);
    let lid = l["lease_id"].as_str().unwrap();
    let items = l["items"].as_array().unwrap();
    assert!(items.len() >= 2, "{l}");
    for it in items {
        let (s, v) = r.post("/v1/deposit", &deposit_body("dev-a", &a, lid, it, "h"));
        assert_eq!(s, 200, "{v}");
    }
    // 300 s in 10 s ticks: snapshots every 5 s, the log's retention 60 s,
    // dev-a's live scope ends at 60 s and its retention 60 s after.
    r.ticks(30, 10.0);
    assert_eq!(
        r.metric("deposits_pruned_total"),
        Some(items.len() as f64 - 1.0)
    );
    assert_eq!(r.metric("devices_departed_total"), Some(1.0));
    assert_eq!(r.metric("known_devices"), Some(0.0));
    let (s, v) = r.post("/v1/register", &registration("dev-a", TOKEN, None));
    assert_eq!(s, 200, "a departed id registers as a new identity: {v}");
    assert_ne!(v["device_secret"].as_str(), Some(a.as_str()));
    r.stop();
}
