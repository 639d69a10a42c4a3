//! Device reports are evidence, not commands (docs/router.md "Threat
//! model"): one device's `retry_after_s`, `crawl_delay_s` or `antibot`
//! failure used to pause a host or shut a source for a whole archetype.
//! Now it holds only the reporter's own work until another device
//! corroborates it; a corroborated pause is capped. Real HTTP on loopback,
//! a real SQLite store, a manual clock.

use crate::support;

use serde_json::{json, Value};

use crate::support::routerd::{Routerd, CLOCK_START_S};

/// Facts: source `board` on `jobs.example` with `n` targets and source
/// `forum` on `forum.example` with `m`, both with roomy buckets.
fn two_sources(n: usize, m: usize) -> Value {
    let mut targets: Vec<Value> = (0..n)
        .map(|i| json!({"target": format!("ad-{i}"), "source": "board"}))
        .collect();
    targets.extend((0..m).map(|i| json!({"target": format!("post-{i}"), "source": "forum"})));
    json!({
        "sources": [
            {"source": "board", "host": "jobs.example", "binding": "html-v1", "bucket": [1000.0, 1000.0]},
            {"source": "forum", "host": "forum.example", "binding": "html-v1", "bucket": [1000.0, 1000.0]},
        ],
        "targets": targets,
    })
}

fn start(facts: &Value) -> (tempfile::TempDir, Routerd) {
    let dir = tempfile::tempdir().unwrap();
    // Honest devices on networks of their own, registered in one instant:
    // the burst rule (identities.rs) is off here.
    let r = Routerd::start_manual(
        dir.path(),
        CLOCK_START_S,
        &["--device-rate", "1000,1000", "--burst-s", "0"],
    );
    assert_eq!(r.send("PUT", "/v1/facts", &facts.to_string(), true).0, 200);
    (dir, r)
}

/// The targets a lease of up to `n` items gave `id`.
fn leased(r: &Routerd, id: &str, secret: &str, n: usize) -> (String, Vec<Value>) {
    let l = support::routerd::lease(r, id, secret, n);
    (
        l["lease_id"].as_str().unwrap_or("").to_string(),
        l["items"].as_array().unwrap().clone(),
    )
}

fn on(items: &[Value], prefix: &str) -> usize {
    items
        .iter()
        .filter(|i| i["target"].as_str().unwrap().starts_with(prefix))
        .count()
}

/// A failed deposit of `item` reporting `extra` (`retry_after_s`,
/// `crawl_delay_s`, `error_class`).
fn report(r: &Routerd, id: &str, secret: &str, lease: &str, item: &Value, extra: Value) {
    let mut outcome = json!({"ok": false, "latency_ms": 900.0});
    for (k, v) in extra.as_object().unwrap() {
        outcome[k] = v.clone();
    }
    let body = json!({
        "device_id": id, "device_secret": secret, "lease_id": lease,
        "target": item["target"], "deposit_token": item["deposit_token"],
        "receipt_revision": 0, "adapter_id": "html", "adapter_version": "1.0",
        "outcome": outcome,
    });
    let (s, v) = r.post("/v1/deposit", &body);
    assert_eq!(s, 200, "{v}");
}

/// A board item of one of `id`'s next four leases (the lease's id and the item).
fn board_item(r: &Routerd, id: &str, secret: &str) -> (String, Value) {
    for _ in 0..4 {
        let (lid, items) = leased(r, id, secret, 8);
        if let Some(item) = items
            .iter()
            .find(|i| i["target"].as_str().unwrap().starts_with("ad-"))
        {
            return (lid, item.clone());
        }
    }
    panic!("{id} got no board item in four leases")
}

/// `id` leases a board item and reports `extra` on it.
fn report_on_board(r: &Routerd, id: &str, secret: &str, extra: Value) {
    let (lid, item) = board_item(r, id, secret);
    report(r, id, secret, &lid, &item, extra);
}

/// Every item of `id`'s next four leases.
fn four_leases(r: &Routerd, id: &str, secret: &str) -> Vec<Value> {
    (0..4).flat_map(|_| leased(r, id, secret, 8).1).collect()
}

#[test]
fn one_device_reporting_a_day_long_retry_after_holds_back_only_itself() {
    let (_dir, r) = start(&two_sources(64, 64));
    let a = r.register("dev-a", "browser");
    let b = r.register("dev-b", "browser");
    r.ticks(4, 0.05);
    report_on_board(
        &r,
        "dev-a",
        &a,
        json!({"retry_after_s": 86_400.0, "crawl_delay_s": 86_400.0}),
    );
    assert_eq!(r.metric("reports_waiting"), Some(2.0));
    r.ticks(4, 0.05);
    // Every other device of the archetype still gets the host's work.
    let items = four_leases(&r, "dev-b", &b);
    assert!(
        on(&items, "ad-") > 0,
        "dev-b was paused by dev-a: {items:?}"
    );
    // The reporter itself is held off that host, not off the other one.
    let items = four_leases(&r, "dev-a", &a);
    assert_eq!(on(&items, "ad-"), 0, "{items:?}");
    assert!(on(&items, "post-") > 0, "{items:?}");
}

#[test]
fn one_antibot_report_shuts_the_source_for_nobody_else_and_two_shut_it() {
    let (_dir, r) = start(&two_sources(64, 64));
    let a = r.register("dev-a", "browser");
    let b = r.register("dev-b", "browser");
    let c = r.register("dev-c", "browser");
    r.ticks(4, 0.05);
    report_on_board(&r, "dev-a", &a, json!({"error_class": "antibot"}));
    r.ticks(4, 0.05);
    let items = four_leases(&r, "dev-c", &c);
    assert!(
        on(&items, "ad-") > 0,
        "one report shut the source: {items:?}"
    );
    let items = four_leases(&r, "dev-a", &a);
    assert_eq!(
        on(&items, "ad-"),
        0,
        "the reporter is held off it: {items:?}"
    );
    // A second device's wall corroborates: the gate shuts for the archetype.
    report_on_board(&r, "dev-b", &b, json!({"error_class": "antibot"}));
    r.ticks(4, 0.05);
    let items = four_leases(&r, "dev-c", &c);
    assert_eq!(
        on(&items, "ad-"),
        0,
        "corroborated, the gate is shut: {items:?}"
    );
}

#[test]
fn a_corroborated_pause_is_capped_and_leaves_other_hosts_leasable() {
    let (_dir, r) = start(&two_sources(48, 8));
    let a = r.register("dev-a", "browser");
    let b = r.register("dev-b", "browser");
    let c = r.register("dev-c", "browser");
    r.ticks(4, 0.05);
    for (id, secret) in [("dev-a", &a), ("dev-b", &b)] {
        report_on_board(&r, id, secret, json!({"retry_after_s": 86_400.0}));
    }
    r.ticks(4, 0.05);
    // Shared now: nobody gets the paused host, and the other host's work
    // still reaches the lease however much of the queue the paused one fills.
    let items = four_leases(&r, "dev-c", &c);
    assert_eq!(on(&items, "ad-"), 0, "{items:?}");
    assert!(on(&items, "post-") > 0, "{items:?}");
    // Capped at 300 s, not the day both reported.
    r.advance(301.0);
    let (s, v) = r.post(
        "/v1/register",
        &json!({"device_id": "dev-c", "archetype": "browser", "adapter_version": "1.0",
                "registration_token": support::routerd::TOKEN, "device_secret": c}),
    );
    assert_eq!(s, 200, "{v}");
    r.ticks(2, 0.05);
    let items = four_leases(&r, "dev-c", &c);
    assert!(
        on(&items, "ad-") > 0,
        "the pause outlived its cap: {items:?}"
    );
}

/// Two identities one credential's holder registered from one network
/// are one reporter: their two `antibot` reports do not corroborate each
/// other, and the source stays open to the rest of the archetype.
#[test]
fn two_identities_from_one_network_do_not_corroborate_each_other() {
    let (_dir, r) = start(&two_sources(64, 64));
    let home = support::routerd::network_for("dev-a");
    let register = |id: &str| {
        let body = json!({"device_id": id, "archetype": "browser", "adapter_version": "1.0",
            "registration_token": support::routerd::TOKEN});
        let (s, v) = r.register_from(&body, home);
        assert_eq!(s, 200, "{v}");
        v["device_secret"].as_str().unwrap().to_string()
    };
    let a = register("dev-a");
    let a2 = register("dev-a2");
    let c = r.register("dev-c", "browser");
    r.ticks(4, 0.05);
    report_on_board(&r, "dev-a", &a, json!({"error_class": "antibot"}));
    report_on_board(&r, "dev-a2", &a2, json!({"error_class": "antibot"}));
    r.ticks(4, 0.05);
    let items = four_leases(&r, "dev-c", &c);
    assert!(
        on(&items, "ad-") > 0,
        "one network's two identities shut the source: {items:?}"
    );
    let items = four_leases(&r, "dev-a2", &a2);
    assert_eq!(
        on(&items, "ad-"),
        0,
        "each reporter is held off it: {items:?}"
    );
}
