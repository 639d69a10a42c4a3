//! `routerd` over real HTTP on loopback: an end-to-end session with a
//! restart on the same store (SQLite and PostgreSQL), the bad-input table
//! of `docs/router.md`, the lease's long poll, and crash safety under
//! SIGKILL.
//!
//! Every test but the SIGKILL drill runs routerd on a manual clock
//! (`--manual-clock`): time moves, and ticks run, only when the test
//! advances it, so no outcome depends on how fast the host ran. The drill
//! needs the wall clock (its devices' request buckets refill with time);
//! it waits on its event (200 acknowledged deposits), bounded only so a
//! broken build fails instead of hanging.

use crate::support;

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::routerd::{deposit_body, facts, lease, Routerd, CLOCK_START_S};
use router::store::SqliteStore;

/// Four ticks 50 ms apart on the manual clock: queues refilled, prices
/// ticked, as four ticks of a 50 ms wall-clock ticker would.
fn settle_ticks(r: &Routerd) -> f64 {
    r.ticks(4, 0.05)
}

fn view(r: &Routerd) -> Value {
    let (s, v) = r.get("/v1/field");
    assert_eq!(s, 200);
    v
}

fn browser_reliability(v: &Value) -> f64 {
    v["sources"][0]["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["archetype"] == "browser")
        .unwrap()["reliability_mean"]
        .as_f64()
        .unwrap()
}

/// Register three archetypes, lease, deposit, protest, verify; restart on
/// the same store; trust, evidence and open verifications survive.
fn end_to_end(data: &std::path::Path, extra: &[&str]) {
    // Three honest devices on networks of their own, registered in one
    // instant: the burst rule would count them as one identity for an
    // hour; its own tests are in identities.rs.
    let extra = &[&["--burst-s", "0"], extra].concat();
    let r = Routerd::start_manual(data, CLOCK_START_S, extra);
    let (s, v) = r.send("PUT", "/v1/facts", &facts(6).to_string(), true);
    assert_eq!(s, 200, "{v}");
    let a = r.register("dev-a", "browser");
    let b = r.register("dev-b", "desktop");
    let c = r.register("dev-c", "container_plain");
    settle_ticks(&r);
    let la = lease(&r, "dev-a", &a, 4);
    let items = la["items"].as_array().unwrap().clone();
    assert!(items.len() >= 2, "{la}");
    assert_eq!(la["routing_trace"].as_array().unwrap().len(), items.len());
    let (s, v) = r.post(
        "/v1/deposit",
        &deposit_body(
            "dev-a",
            &a,
            la["lease_id"].as_str().unwrap(),
            &items[0],
            "h1",
        ),
    );
    assert_eq!(s, 200, "{v}");
    let (s, v) = r.post(
        "/v1/protest",
        &json!({"device_id": "dev-a", "device_secret": a, "lease_id": la["lease_id"], "target": items[1]["target"], "deposit_token": items[1]["deposit_token"], "reason": "blocked here"}),
    );
    assert_eq!(s, 200, "{v}");
    let stopped_at = settle_ticks(&r);
    // b verifies and deposits; c takes a verification and keeps it open.
    let target = items[0]["target"].clone();
    let lb = lease(&r, "dev-b", &b, 8);
    let vb = lb["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["target"] == target)
        .cloned()
        .expect("b verifies the row");
    assert_eq!(vb["kind"], "verification");
    let (s, _) = r.post(
        "/v1/deposit",
        &deposit_body("dev-b", &b, lb["lease_id"].as_str().unwrap(), &vb, "h1"),
    );
    assert_eq!(s, 200);
    let lc = lease(&r, "dev-c", &c, 8);
    assert!(
        lc["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["target"] == target),
        "{lc}"
    );
    let before = view(&r);
    assert_eq!(before["open_verifications"], 1, "{before}");
    let trust_a = {
        // Without its secret a known id is not resumed.
        let (s, v) = r.post("/v1/register", &json!({"device_id": "dev-a", "archetype": "browser", "adapter_version": "1.0", "registration_token": support::routerd::TOKEN}));
        assert_eq!((s, v["error"].as_str()), (401, Some("unauthorized")), "{v}");
        let (_, v) = r.post("/v1/register", &json!({"device_id": "dev-a", "archetype": "browser", "adapter_version": "1.0", "registration_token": support::routerd::TOKEN, "device_secret": a}));
        v["trust"].as_f64().unwrap()
    };
    assert!(trust_a > 0.5);
    r.stop();
    // The restart's clock reads one second after the last tick.
    let r = Routerd::start_manual(data, stopped_at + 1.0, extra);
    let after = view(&r);
    assert_eq!(after["open_verifications"], 1, "{after}");
    assert_eq!(after["targets"], before["targets"]);
    let (e0, e1) = (browser_reliability(&before), browser_reliability(&after));
    assert!(
        (e0 - e1).abs() < 1e-4,
        "evidence survives (aged by one second): {e0} vs {e1}"
    );
    let (_, v) = r.post("/v1/register", &json!({"device_id": "dev-a", "archetype": "browser", "adapter_version": "1.0", "registration_token": support::routerd::TOKEN, "device_secret": a}));
    assert_eq!(
        v["trust"].as_f64().unwrap(),
        trust_a,
        "a returning device resumes its trust"
    );
    r.stop();
}

#[test]
fn end_to_end_on_sqlite_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    end_to_end(dir.path(), &[]);
    assert!(dir.path().join("router.db").exists());
    // The deposit log and the leases' rows, beside it (decision 0030).
    assert!(dir.path().join("router-log.db").exists());
}

#[test]
fn end_to_end_on_postgres_survives_a_restart() {
    let Some(server) = support::pg::shared() else {
        return;
    };
    let schema = server.schema("e2e");
    let dir = tempfile::tempdir().unwrap();
    end_to_end(
        dir.path(),
        &["--store", server.url(), "--store-schema", schema.name()],
    );
}

/// What a refused request must not change: acknowledged deposits, rows,
/// verifications (the revision moves with aging on every tick).
fn refusable_state(r: &Routerd) -> (Option<String>, Value, Value, Value) {
    let v = view(r);
    let (_, m) = r.get("/metrics");
    let deposits = m
        .as_str()
        .unwrap_or("")
        .lines()
        .find(|l| l.starts_with("router_deposits_total "))
        .map(String::from);
    (
        deposits,
        v["settled"].clone(),
        v["targets"].clone(),
        v["open_verifications"].clone(),
    )
}

/// The bad-input table's last rows: a deposit on an expired lease is 410,
/// a burst beyond the device's bucket is 429; the replayed deposit of the
/// table is counted once.
fn expired_lease_and_rate_limit(r: &Routerd, a: &str, lid: &str, item: &Value) {
    // Expired lease: the device renews its liveness with a new lease, the
    // old one lapses (TTL 2 s; the table above ran at one instant).
    r.advance(1.2);
    lease(r, "dev-a", a, 1);
    r.advance(1.0);
    let (s, v) = r.post("/v1/deposit", &deposit_body("dev-a", a, lid, item, "h"));
    assert_eq!(
        (s, v["error"].as_str().unwrap_or("")),
        (410, "lease_expired"),
        "{v}"
    );
    // Rate limit: a burst beyond the device's bucket is refused with 429
    // (the clock stands still: the bucket cannot refill during it).
    let mut limited = 0;
    for _ in 0..40 {
        let (s, _) = r.post(
            "/v1/lease",
            &json!({"device_id": "dev-a", "device_secret": a, "max_items": 1}),
        );
        if s == 429 {
            limited += 1;
        }
    }
    assert!(limited > 0, "a burst of 40 leases hits the rate limit");
    let (_, m) = r.get("/metrics");
    let text = m.as_str().unwrap_or("").to_string();
    assert!(
        text.contains("router_refused_total{kind=\"replayed\"} 1"),
        "{text}"
    );
}

/// Each row of the bad-input table in `docs/router.md`: status, error kind,
/// and nothing changed (acknowledged deposits, rows, verifications).
#[test]
fn bad_input_table() {
    let dir = tempfile::tempdir().unwrap();
    let r = Routerd::start_manual(dir.path(), CLOCK_START_S, &["--lease-ttl-s", "2"]);
    assert_eq!(
        r.send("PUT", "/v1/facts", &facts(8).to_string(), true).0,
        200
    );
    let a = r.register("dev-a", "browser");
    let b = r.register("dev-b", "desktop");
    settle_ticks(&r);
    let la = lease(&r, "dev-a", &a, 4);
    let lid = la["lease_id"].as_str().unwrap().to_string();
    let items = la["items"].as_array().unwrap().clone();
    assert!(items.len() >= 3, "{la}");
    assert_eq!(
        r.post(
            "/v1/deposit",
            &deposit_body("dev-a", &a, &lid, &items[0], "h")
        )
        .0,
        200
    );
    // What a refused request must not change: acknowledged deposits, rows,
    // verifications (the revision moves with aging on every tick).
    let snapshot = refusable_state;
    let base = snapshot(&r);
    let good = deposit_body("dev-a", &a, &lid, &items[1], "h");
    let mut unknown = good.clone();
    unknown["surprise"] = json!(1);
    let mut foreign = deposit_body("dev-b", &b, &lid, &items[1], "h");
    foreign["device_id"] = json!("dev-b");
    let mut negative = good.clone();
    negative["outcome"]["latency_ms"] = json!(-5.0);
    let big = format!("{{\"device_id\": \"{}\"}}", "x".repeat(100_000));
    let rows: Vec<(&str, &str, String, bool, u16, &str)> = vec![
        ("malformed JSON", "/v1/deposit", "{\"lease_id\": ".into(), false, 400, "malformed"),
        ("unknown field", "/v1/deposit", unknown.to_string(), false, 400, "unknown_field"),
        ("oversized body", "/v1/register", big, false, 413, "too_large"),
        ("another device's lease", "/v1/deposit", foreign.to_string(), false, 404, "unknown_lease"),
        ("a used deposit token with another body", "/v1/deposit", deposit_body("dev-a", &a, &lid, &items[0], "h-other").to_string(), false, 409, "replayed"),
        ("unknown archetype", "/v1/register", json!({"device_id": "x", "archetype": "fridge", "adapter_version": "1", "registration_token": support::routerd::TOKEN}).to_string(), false, 422, "unknown_archetype"),
        ("NaN latency (not JSON)", "/v1/deposit", good.to_string().replace("900.0", "NaN"), false, 400, "malformed"),
        ("latency out of range", "/v1/deposit", negative.to_string(), false, 422, "bad_value"),
        ("wrong registration token", "/v1/register", json!({"device_id": "x", "archetype": "browser", "adapter_version": "1", "registration_token": "guess"}).to_string(), false, 401, "unauthorized"),
        ("operator endpoint without the key", "/v1/facts", facts(1).to_string(), false, 401, "unauthorized"),
    ];
    for (name, path, body, op, status, kind) in rows {
        let method = if path == "/v1/facts" { "PUT" } else { "POST" };
        let (s, v) = r.send(method, path, &body, op);
        assert_eq!(
            (s, v["error"].as_str().unwrap_or("")),
            (status, kind),
            "{name}: {v}"
        );
        assert!(
            v["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{name}"
        );
        assert_eq!(snapshot(&r), base, "{name} changed nothing");
    }
    expired_lease_and_rate_limit(&r, &a, &lid, &items[2]);
}

/// SIGKILL under load between deposits: every acknowledged deposit is in the
/// store afterwards, and the restarted routerd has folded them.
#[test]
fn every_acknowledged_deposit_survives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    survives_sigkill(dir.path(), &[], &move || {
        Box::new(SqliteStore::open_dir(&path).unwrap())
    });
}

/// The same on PostgreSQL.
#[test]
fn every_acknowledged_deposit_survives_sigkill_on_postgres() {
    let Some(server) = support::pg::shared() else {
        return;
    };
    let schema = server.schema("kill");
    let dir = tempfile::tempdir().unwrap();
    let (url, name) = (server.url().to_string(), schema.name().to_string());
    survives_sigkill(
        dir.path(),
        &["--store", server.url(), "--store-schema", schema.name()],
        &move || Box::new(router::store::PgStore::connect_with_schema(&url, &name).unwrap()),
    );
}

/// Drives four devices' leases and deposits against routerd (its store
/// `store_args`), kills it with SIGKILL after 200 acknowledged deposits,
/// finds every acknowledged token in the store `open_store` opens, and
/// restarts routerd on it.
fn survives_sigkill(
    data: &std::path::Path,
    store_args: &[&str],
    open_store: &dyn Fn() -> Box<dyn router::store::Store>,
) {
    let args = [&["--tick-ms", "20"], store_args].concat();
    let r = Routerd::start(data, &args);
    assert_eq!(
        r.send("PUT", "/v1/facts", &facts(400).to_string(), true).0,
        200
    );
    let ticks_before = r.metric("ticks_total").unwrap_or(0.0);
    let devices: Vec<(String, String)> = (0..4)
        .map(|i| {
            let id = format!("dev-{i}");
            let s = r.register(&id, "browser");
            (id, s)
        })
        .collect();
    // Wait on the event: a few ticks after the registrations.
    while r.metric("ticks_total").unwrap_or(0.0) < ticks_before + 4.0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let acked = std::sync::Mutex::new(Vec::new());
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        for (id, secret) in &devices {
            let (r, acked, stop) = (&r, &acked, &stop);
            scope.spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let body = json!({"device_id": id, "device_secret": secret, "max_items": 4});
                    let Some((s, l)) = r.try_send("POST", "/v1/lease", &body.to_string(), false)
                    else {
                        return;
                    };
                    if s != 200 {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                    for it in l["items"].as_array().unwrap() {
                        let body =
                            deposit_body(id, secret, l["lease_id"].as_str().unwrap(), it, "h");
                        loop {
                            match r.try_send("POST", "/v1/deposit", &body.to_string(), false) {
                                Some((200, _)) => {
                                    let token = it["deposit_token"].as_str().unwrap().to_string();
                                    acked.lock().unwrap().push(token);
                                    break;
                                }
                                // The device's request bucket: wait and retry.
                                Some((429, _)) => std::thread::sleep(Duration::from_millis(50)),
                                _ => return,
                            }
                        }
                    }
                }
            });
        }
        // Let deposits flow, then kill mid-stream. The bound only stops a
        // broken build from hanging the suite.
        let t0 = std::time::Instant::now();
        while acked.lock().unwrap().len() < 200 && t0.elapsed() < Duration::from_secs(300) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let pid = r.pid();
        let _ = std::process::Command::new("kill")
            .arg("-KILL")
            .arg(pid.to_string())
            .status();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    r.kill();
    let acked = acked.into_inner().unwrap();
    assert!(
        acked.len() >= 200,
        "load produced {} acknowledged deposits",
        acked.len()
    );
    let mut store = open_store();
    for t in &acked {
        assert!(
            store.has_deposit(t).unwrap(),
            "acknowledged deposit {t} lost"
        );
    }
    drop(store);
    let args = [&["--tick-ms", "50"], store_args].concat();
    let r = Routerd::start(data, &args);
    let (_, m) = r.get("/metrics");
    let text = m.as_str().unwrap_or("").to_string();
    assert!(text.contains("router_deposits_replayed_total"), "{text}");
    let v = view(&r);
    assert!(v["targets"].as_u64().unwrap() >= 400);
}

/// The lease's long poll over loopback, on a manual clock: with a host
/// whose bucket holds one token and refills two a second, a second lease
/// finds nothing and says when to come back (0.5 s); held with `wait_s` it
/// answers with the item once the clock reaches the token, whatever the
/// wall clock did; a short wait with the clock standing still answers
/// empty when its wait runs out; an out-of-range wait is refused (that
/// each try spends the device's request budget is in `hostile.rs`).
#[test]
fn a_long_poll_answers_when_the_politeness_token_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let r = Routerd::start_manual(dir.path(), CLOCK_START_S, &[]);
    let mut f = facts(8);
    f["sources"][0]["bucket"] = json!([1.0, 2.0]);
    assert_eq!(r.send("PUT", "/v1/facts", &f.to_string(), true).0, 200);
    let a = r.register("dev-a", "browser");
    settle_ticks(&r);
    let body = |max: usize, wait: Option<f64>| {
        let mut body = json!({"device_id": "dev-a", "device_secret": a, "max_items": max});
        if let Some(w) = wait {
            body["wait_s"] = json!(w);
        }
        body
    };
    let (s, first) = r.post("/v1/lease", &body(4, None));
    assert_eq!(s, 200, "{first}");
    assert_eq!(
        first["items"].as_array().unwrap().len(),
        1,
        "one token: one item {first}"
    );
    let (s, empty) = r.post("/v1/lease", &body(4, None));
    assert_eq!(s, 200);
    assert!(empty["items"].as_array().unwrap().is_empty(), "{empty}");
    let hint = empty["retry_after_s"]
        .as_f64()
        .expect("an empty answer carries its hint");
    assert!(
        hint > 0.0 && hint <= 0.5 + 1e-9,
        "the next token is 0.5 s away on the standing clock: {hint}"
    );

    // A short wait with the clock standing still: empty when it runs out.
    let t0 = std::time::Instant::now();
    let (s, short) = r.post("/v1/lease", &body(4, Some(0.2)));
    assert_eq!(s, 200, "{short}");
    assert!(short["items"].as_array().unwrap().is_empty(), "{short}");
    assert!(short["retry_after_s"].as_f64().is_some(), "{short}");
    assert!(
        t0.elapsed() >= Duration::from_millis(200),
        "held until its wait ran out"
    );

    // Held for up to 30 s, then the test moves the clock to the token:
    // the tick wakes the poll, whose next try (charged, docs/router.md
    // "Threat model") answers with the item.
    let tries_before = r.metric("leases_total").unwrap();
    let (s, held) = std::thread::scope(|scope| {
        let poll = scope.spawn(|| r.post("/v1/lease", &body(4, Some(30.0))));
        // Wait on the event: the poll's first try answered (empty: held).
        while r.metric("leases_total").unwrap() < tries_before + 1.0 {
            std::thread::yield_now();
        }
        assert!(
            !poll.is_finished(),
            "the poll answered before the token came back"
        );
        r.advance(0.5);
        poll.join().unwrap()
    });
    assert_eq!(s, 200, "{held}");
    assert_eq!(
        held["items"].as_array().unwrap().len(),
        1,
        "the token came back while held: {held}"
    );

    let (s, v) = r.post("/v1/lease", &body(1, Some(31.0)));
    assert_eq!((s, v["error"].as_str()), (422, Some("bad_value")), "{v}");
    let (s, v) = r.post("/v1/lease", &body(1, Some(-1.0)));
    assert_eq!((s, v["error"].as_str()), (422, Some("bad_value")), "{v}");
    r.stop();
}

/// The manual clock's endpoint: operator only, a bad step refused and
/// nothing moved; on the wall clock it does not exist.
#[test]
fn the_manual_clock_moves_only_by_the_operator() {
    let dir = tempfile::tempdir().unwrap();
    let r = Routerd::start_manual(dir.path(), CLOCK_START_S, &[]);
    let step = json!({"advance_s": 1.5}).to_string();
    let (s, v) = r.send("POST", "/v1/clock", &step, false);
    assert_eq!((s, v["error"].as_str()), (401, Some("unauthorized")), "{v}");
    for bad in [json!({"advance_s": -1.0}), json!({"advance_s": 1e9})] {
        let (s, v) = r.send("POST", "/v1/clock", &bad.to_string(), true);
        assert_eq!((s, v["error"].as_str()), (422, Some("bad_value")), "{v}");
    }
    let (s, v) = r.send(
        "POST",
        "/v1/clock",
        &json!({"advance_s": 1, "x": 2}).to_string(),
        true,
    );
    assert_eq!(
        (s, v["error"].as_str()),
        (400, Some("unknown_field")),
        "{v}"
    );
    let ticks = r.metric("ticks_total").unwrap();
    assert_eq!(
        r.advance(1.5),
        CLOCK_START_S + 1.5,
        "only the good step moved it"
    );
    assert_eq!(
        r.metric("ticks_total").unwrap(),
        ticks + 1.0,
        "one advance, one tick"
    );
    r.stop();
    let wall = tempfile::tempdir().unwrap();
    let r = Routerd::start(wall.path(), &[]);
    let (s, v) = r.send("POST", "/v1/clock", &step, true);
    assert_eq!((s, v["error"].as_str()), (404, Some("not_found")), "{v}");
    r.stop();
}
