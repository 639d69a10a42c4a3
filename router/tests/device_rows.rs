//! Device rows written when changed (docs/router.md "Durability and
//! restart"): the state row no longer holds the devices; each device has a
//! row of its own, written at registration and then by the snapshot after
//! it changed, in one atomic batch with the state row, so a snapshot's
//! size follows the devices that worked, not the population. The core in
//! process on a real SQLite file, its clock injected; a second `Router`
//! opened on the same file is the restart.

use std::collections::BTreeMap;

use router::api::{LeaseRequest, RegisterRequest};
use router::config::RouterConfig;
use router::load::{population_facts, register_in_process, success_deposit};
use router::store::{Row, SqliteStore, Store, Table};
use router::Router;

fn cfg() -> RouterConfig {
    RouterConfig {
        device_rate: (1e9, 1e9),
        registration_rate: (1e9, 1e9),
        device_retention_s: 100.0,
        ..RouterConfig::default()
    }
}

fn open(dir: &std::path::Path, now: f64) -> Router {
    let store = SqliteStore::open_dir(dir).unwrap();
    Router::open(cfg(), Box::new(store), now).unwrap()
}

/// A router with 100 targets on 4 sources and `n` devices, its queues
/// refilled, its first snapshot written; the devices' ids and secrets.
fn seeded(dir: &std::path::Path, n: usize) -> (Router, Vec<(String, String)>) {
    let mut r = open(dir, 0.0);
    r.put_facts(&population_facts(100, 4), 0.0).unwrap();
    let devices = register_in_process(&mut r, n, 0.5).unwrap();
    r.tick(1.0).unwrap();
    r.persist(2.0).unwrap();
    (r, devices)
}

/// One lease for `device` at `now`, every item deposited; how many.
fn work(r: &mut Router, (id, secret): &(String, String), now: f64) -> usize {
    let req = LeaseRequest {
        device_id: id.clone(),
        device_secret: secret.clone(),
        max_items: 3,
        wait_s: None,
    };
    let l = r.lease(&req, now).unwrap();
    for it in &l.items {
        let dep = success_deposit(id, secret, &l.lease_id, it, &format!("h-{}", it.target));
        r.deposit(&dep, now).unwrap();
    }
    l.items.len()
}

/// The device rows: key → (version, payload).
fn rows(r: &Router) -> BTreeMap<String, (u64, serde_json::Value)> {
    r.store_handle()
        .lock()
        .load(Table::Devices)
        .unwrap()
        .into_iter()
        .map(|row| {
            let v = serde_json::from_str(&row.payload).unwrap();
            (row.key, (row.version, v))
        })
        .collect()
}

fn state_row(r: &Router) -> serde_json::Value {
    let row = r.store_handle().lock().get(Table::Meta, "snapshot");
    serde_json::from_str(&row.unwrap().expect("a state row").payload).unwrap()
}

#[test]
fn a_snapshot_writes_the_devices_that_changed_only_and_a_restart_reads_them_back() {
    let dir = tempfile::tempdir().unwrap();
    let (mut r, devices) = seeded(dir.path(), 8);
    assert!(state_row(&r).get("devices").is_none());
    let first = rows(&r);
    assert_eq!(first.len(), 8);
    for (id, (_, v)) in &first {
        // The whole record, beside the operator's summary.
        let rec = &v["identity"];
        assert_eq!(rec["archetype"], v["archetype"], "{id}");
        assert!(rec["secret_digest"].is_string(), "{id}: {v}");
        assert_eq!(v["state"], "normal");
    }
    let v1 = first.values().map(|(v, _)| *v).max().unwrap();

    // Three devices ask for work; the other five change nothing.
    let granted: Vec<&String> = devices[..3]
        .iter()
        .filter(|d| work(&mut r, d, 3.0) > 0)
        .map(|d| &d.0)
        .collect();
    assert!(!granted.is_empty(), "the devices were granted nothing");
    let snap = r.take_snapshot_now(4.0).expect("changed");
    let carried = snap.changed_devices();
    for id in &granted {
        assert!(carried.contains(id), "{id} deposited but is not carried");
    }
    for (id, _) in &devices[3..] {
        assert!(!carried.contains(id), "{id} did nothing but is carried");
    }
    Router::write_snapshot(&r.store_handle(), &snap).unwrap();
    r.snapshot_written(&snap, 4.0);
    let second = rows(&r);
    for (id, (version, v)) in &second {
        let deposits = v["identity"]["deposits"].as_u64().unwrap();
        assert_eq!(*version > v1, carried.contains(id), "{id}");
        assert_eq!(deposits > 0, granted.contains(&id), "{id}");
    }

    // A restart reads every device back as it was.
    let want = r.devices_table();
    drop(r);
    assert_eq!(open(dir.path(), 5.0).devices_table(), want);
}

#[test]
fn a_failed_snapshot_write_leaves_its_devices_for_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let (mut r, devices) = seeded(dir.path(), 4);
    let worked: usize = devices.iter().map(|d| work(&mut r, d, 3.0)).sum();
    assert!(worked > 0, "the devices were granted nothing");
    let s1 = r.take_snapshot_now(3.5).expect("changed");
    assert!(!s1.changed_devices().is_empty());
    r.snapshot_failed(&s1);
    // The next snapshot, with nothing changed since, carries them again.
    let s2 = r.take_snapshot_now(4.0).expect("still dirty");
    let mut want_ids = s1.changed_devices().to_vec();
    let mut got_ids = s2.changed_devices().to_vec();
    want_ids.sort();
    got_ids.sort();
    assert_eq!(got_ids, want_ids);
    Router::write_snapshot(&r.store_handle(), &s2).unwrap();
    let want = r.devices_table();
    drop(r);
    assert_eq!(open(dir.path(), 5.0).devices_table(), want);
}

#[test]
fn a_state_row_that_holds_the_devices_is_read_and_its_devices_written_as_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (mut r, devices) = seeded(dir.path(), 6);
    let worked: usize = devices.iter().map(|d| work(&mut r, d, 3.0)).sum();
    assert!(worked > 0, "the devices were granted nothing");
    r.persist(4.0).unwrap();
    let want = r.devices_table();
    drop(r);

    // The layout written before devices had rows: the state row holds
    // them, and each device's row is the operator's summary alone.
    let mut st = SqliteStore::open_dir(dir.path()).unwrap();
    let meta = st.get(Table::Meta, "snapshot").unwrap().unwrap();
    let mut state: serde_json::Value = serde_json::from_str(&meta.payload).unwrap();
    state["devices"] = serde_json::to_value(&want).unwrap();
    let version = meta.version;
    st.upsert(
        Table::Meta,
        &[Row {
            payload: state.to_string(),
            ..meta
        }],
    )
    .unwrap();
    let keys: Vec<String> = want.keys().cloned().collect();
    st.delete(Table::Devices, &keys).unwrap();
    let summaries: Vec<Row> = want
        .iter()
        .map(|(k, d)| Row {
            key: k.clone(),
            version,
            payload: serde_json::json!({"archetype": d.archetype, "trust": 0.123}).to_string(),
        })
        .collect();
    st.upsert(Table::Devices, &summaries).unwrap();
    drop(st);

    let mut r = open(dir.path(), 5.0);
    // The state row's records win over the summaries.
    assert_eq!(r.devices_table(), want);
    // Its next snapshot writes every device as a row of its own.
    r.persist(6.0).unwrap();
    assert!(state_row(&r).get("devices").is_none());
    let written = rows(&r);
    assert_eq!(written.len(), 6);
    assert!(written.values().all(|(_, v)| v["identity"].is_object()));
    drop(r);
    assert_eq!(open(dir.path(), 7.0).devices_table(), want);
}

/// Registers `id` anew at `now` (no secret); its secret.
fn register(r: &mut Router, id: &str, now: f64) -> String {
    let req = RegisterRequest {
        device_id: id.into(),
        archetype: "browser".into(),
        capabilities: vec![],
        adapter_version: "1.0".into(),
        registration_token: cfg().registration_token,
        device_secret: None,
    };
    r.register(&req, now).unwrap().device_secret
}

#[test]
fn a_departed_id_registered_anew_before_the_next_snapshot_keeps_its_new_row() {
    let dir = tempfile::tempdir().unwrap();
    // Snapshots only when asked, so the sweep's deletion waits for one.
    let cfg = RouterConfig {
        snapshot_period_s: 1e9,
        ..cfg()
    };
    let store = SqliteStore::open_dir(dir.path()).unwrap();
    let mut r = Router::open(cfg, Box::new(store), 0.0).unwrap();
    register(&mut r, "comes-back", 0.0);
    r.persist(1.0).unwrap();
    // Past its retention, the sweep forgets it; it registers again before
    // the snapshot that would delete its old row.
    let mut now = 1.0;
    while r.counters().devices_departed == 0 {
        now += 10.0;
        assert!(now < 1_000.0, "never swept");
        r.tick(now).unwrap();
    }
    assert_eq!(r.trust("comes-back"), None);
    let secret = register(&mut r, "comes-back", now);
    assert_eq!(rows(&r)["comes-back"].0, 0, "its new identity row");
    r.persist(now + 1.0).unwrap();
    let want = r.devices_table();
    assert!(want.contains_key("comes-back"));
    drop(r);
    let r = open(dir.path(), now + 2.0);
    assert_eq!(r.devices_table(), want);
    let digest = &r.devices_table()["comes-back"].secret_digest;
    assert_eq!(digest, &want["comes-back"].secret_digest);
    assert!(!secret.is_empty());
}

/// The names records repeat (a device's credential, network, archetype,
/// capabilities and adapter version, an observation's device, adapter and
/// version) are one copy each, before
/// and after a restart: the restart shares what it reads
/// (docs/router.md, "The small box").
#[test]
fn records_share_their_names_and_a_restart_shares_them_again() {
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let (mut r, devices) = seeded(dir.path(), 8);
    let mut t = 3.0;
    while r
        .targets_table()
        .values()
        .filter(|rec| rec.observations.iter().any(|o| *o.device == *devices[0].0))
        .count()
        < 2
    {
        assert!(t < 100.0, "the device was never granted two targets");
        work(&mut r, &devices[0], t);
        t += 1.0;
    }
    r.persist(t).unwrap();
    let check = |r: &Router| {
        let targets = r.targets_table();
        let mine: Vec<_> = targets
            .values()
            .flat_map(|rec| rec.observations.iter())
            .filter(|o| *o.device == *devices[0].0)
            .collect();
        assert!(mine.len() >= 2);
        for o in &mine[1..] {
            assert!(Arc::ptr_eq(&o.device, &mine[0].device), "one device id");
            assert!(Arc::ptr_eq(&o.adapter, &mine[0].adapter), "one adapter");
            assert!(Arc::ptr_eq(&o.adapter_version, &mine[0].adapter_version));
        }
        let table = r.devices_table();
        let recs: Vec<_> = table.values().collect();
        for d in &recs[1..] {
            assert!(
                Arc::ptr_eq(&d.credential, &recs[0].credential),
                "one credential"
            );
            assert!(
                Arc::ptr_eq(&d.adapter_version, &recs[0].adapter_version),
                "one adapter version"
            );
        }
        // Devices of one archetype share its name and their capabilities.
        let mut shared = 0;
        for (i, d) in recs.iter().enumerate() {
            for e in recs[..i].iter().filter(|e| *e.archetype == *d.archetype) {
                assert!(Arc::ptr_eq(&d.archetype, &e.archetype), "one archetype");
                assert_eq!(d.capabilities, e.capabilities);
                assert!(
                    Arc::ptr_eq(&d.capabilities, &e.capabilities),
                    "one list of capabilities"
                );
                shared += 1;
            }
        }
        assert!(shared > 0, "no two devices of one archetype to compare");
    };
    check(&r);
    drop(r);
    check(&open(dir.path(), t + 1.0));
}
