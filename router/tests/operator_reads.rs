//! The operator's reads of one record over real HTTP (`GET /v1/device`,
//! `GET /v1/target`), the field's price window, and a clock moved to a
//! time without a tick: what a replay that stamps each request with its
//! own time needs (docs/router.md, "A manual clock"). routerd runs on a
//! manual clock, so nothing here depends on the host's speed.

use serde_json::{json, Value};

use crate::support::routerd::{deposit_body, facts, lease, Routerd, CLOCK_START_S};

fn step(r: &Routerd, body: Value) -> (u16, Value) {
    r.send("POST", "/v1/clock", &body.to_string(), true)
}

#[test]
fn the_operator_reads_one_device_and_one_target() {
    let dir = tempfile::tempdir().unwrap();
    let r = Routerd::start_manual(dir.path(), CLOCK_START_S, &[]);
    let (s, v) = r.send("PUT", "/v1/facts", &facts(3).to_string(), true);
    assert_eq!(s, 200, "{v}");
    let secret = r.register("dev-a", "browser");
    r.ticks(2, 0.05);

    // Operator only: without the key, 401 and nothing revealed.
    let (s, v) = r.get("/v1/device?id=dev-a");
    assert_eq!((s, v["error"].as_str()), (401, Some("unauthorized")), "{v}");
    let (s, v) = r.send("GET", "/v1/device?id=dev-a", "", true);
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["archetype"], "browser");
    assert_eq!(v["live"], true);
    assert_eq!(v["deposits"], 0);
    let tau0 = v["trust"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&tau0), "{v}");
    assert!(
        v.get("secret_digest").is_none(),
        "no secret, not even its digest"
    );

    let l = lease(&r, "dev-a", &secret, 1);
    let item = l["items"][0].clone();
    let target = item["target"].as_str().unwrap().to_string();
    let (s, v) = r.post(
        "/v1/deposit",
        &deposit_body(
            "dev-a",
            &secret,
            l["lease_id"].as_str().unwrap(),
            &item,
            "h1",
        ),
    );
    assert_eq!(s, 200, "{v}");
    let (s, v) = r.send("GET", &format!("/v1/target?name={target}"), "", true);
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        (v["target"].as_str(), v["source"].as_str()),
        (Some(target.as_str()), Some("board"))
    );
    assert_eq!(v["observations"], 1, "{v}");
    assert!(v["last_attempt_s"].as_f64().is_some(), "{v}");
    let (_, v) = r.send("GET", "/v1/device?id=dev-a", "", true);
    assert_eq!(v["deposits"], 1, "{v}");

    // The settled rows a page at a time: three targets, one per page.
    let (s, v) = r.get("/v1/settled");
    assert_eq!((s, v["error"].as_str()), (401, Some("unauthorized")), "{v}");
    let mut after = String::new();
    for want in ["ad-0", "ad-1"] {
        let (s, v) = r.send("GET", &format!("/v1/settled?limit=1{after}"), "", true);
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["next_after"].as_str(), Some(want), "{v}");
        after = format!("&after={want}");
    }
    let (_, v) = r.send("GET", &format!("/v1/settled?limit=1{after}"), "", true);
    assert!(v["next_after"].is_null(), "the walk ends: {v}");
    assert!(
        v["rows"].as_array().unwrap().is_empty(),
        "one observation settles nothing: {v}"
    );

    // Unknown records are 404 not_found; a bad query is a typed 400.
    for path in ["/v1/device?id=nobody", "/v1/target?name=nothing"] {
        let (s, v) = r.send("GET", path, "", true);
        assert_eq!(
            (s, v["error"].as_str()),
            (404, Some("not_found")),
            "{path}: {v}"
        );
    }
    for (path, kind) in [
        ("/v1/device", "malformed"),
        ("/v1/device?id=dev-a&x=1", "unknown_field"),
        ("/v1/target?id=x", "unknown_field"),
        ("/v1/settled?limit=many", "malformed"),
    ] {
        let (s, v) = r.send("GET", path, "", true);
        assert_eq!((s, v["error"].as_str()), (400, Some(kind)), "{path}: {v}");
    }
    let (s, v) = r.send("POST", "/v1/device?id=dev-a", "{}", true);
    assert_eq!(
        (s, v["error"].as_str()),
        (405, Some("method_not_allowed")),
        "{v}"
    );
    r.stop();
}

#[test]
fn the_clock_moves_to_a_time_without_a_tick_and_the_field_shows_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let r = Routerd::start_manual(dir.path(), CLOCK_START_S, &[]);
    let ticks = r.metric("ticks_total").unwrap();
    let to = CLOCK_START_S + 0.3;
    let (s, v) = step(&r, json!({"to_s": to, "tick": false}));
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["now_s"].as_f64(), Some(to), "exactly the time asked");
    assert_eq!(r.metric("ticks_total").unwrap(), ticks, "no tick");
    for bad in [
        json!({"to_s": to - 0.1}),
        json!({"to_s": to + 1e6}),
        json!({"advance_s": 1, "to_s": to + 1.0}),
        json!({}),
    ] {
        let (s, v) = step(&r, bad.clone());
        assert_eq!(
            (s, v["error"].as_str()),
            (422, Some("bad_value")),
            "{bad}: {v}"
        );
    }
    let (s, v) = step(&r, json!({"to_s": to + 1.0}));
    assert_eq!((s, v["now_s"].as_f64()), (200, Some(to + 1.0)), "{v}");
    assert_eq!(
        r.metric("ticks_total").unwrap(),
        ticks + 1.0,
        "a tick by default"
    );
    let (s, v) = r.get("/v1/field");
    assert_eq!(s, 200, "{v}");
    let start = v["window_start_s"].as_f64().expect("the window's start");
    assert!(start <= to + 1.0, "{v}");
    assert!(v["window_usage"].is_object(), "{v}");
    r.stop();
}
