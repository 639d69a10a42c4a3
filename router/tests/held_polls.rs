//! The cap on held long polls (`--max-held-polls`, docs/router.md "The
//! small box"): a held poll keeps its connection's buffers, so past the
//! cap a long poll is answered at once, empty, with its `retry_after_s`,
//! and a place freed is taken by the next poll. Over loopback on a manual
//! clock; every wait waits on an event (a metric), never on the wall clock.

use serde_json::json;

use crate::support::routerd::{facts, Routerd, CLOCK_START_S};

#[test]
fn past_the_cap_a_long_poll_answers_at_once_and_a_freed_place_is_taken_again() {
    let dir = tempfile::tempdir().unwrap();
    let r = Routerd::start_manual(dir.path(), CLOCK_START_S, &["--max-held-polls", "1"]);
    // One politeness token, two a second: after the first item, nothing
    // is admissible until the clock moves.
    let mut f = facts(8);
    f["sources"][0]["bucket"] = json!([1.0, 2.0]);
    assert_eq!(r.send("PUT", "/v1/facts", &f.to_string(), true).0, 200);
    let a = r.register("dev-a", "browser");
    let b = r.register("dev-b", "browser");
    r.ticks(4, 0.05);
    assert_eq!(r.metric("held_polls_cap"), Some(1.0));
    let body = |id: &str, secret: &str, wait: f64| json!({"device_id": id, "device_secret": secret, "max_items": 4, "wait_s": wait});
    let (s, first) = r.post("/v1/lease", &body("dev-a", &a, 0.0));
    assert_eq!(s, 200);
    assert_eq!(first["items"].as_array().unwrap().len(), 1, "{first}");

    std::thread::scope(|scope| {
        // A's poll takes the one place.
        let poll_a = scope.spawn(|| r.post("/v1/lease", &body("dev-a", &a, 30.0)));
        while r.metric("held_polls") != Some(1.0) {
            std::thread::yield_now();
        }
        // B's poll finds the cap reached: answered at once, empty, with
        // its hint, while A's is still held.
        let (s, answered) = r.post("/v1/lease", &body("dev-b", &b, 30.0));
        assert_eq!(s, 200, "{answered}");
        assert!(
            answered["items"].as_array().unwrap().is_empty(),
            "{answered}"
        );
        assert!(answered["retry_after_s"].as_f64().is_some(), "{answered}");
        assert!(!poll_a.is_finished(), "B's poll was held past the cap");
        assert_eq!(r.metric("held_polls_refused_total"), Some(1.0));
        assert_eq!(r.metric("held_polls"), Some(1.0));
        // The token comes back: A's poll answers with the item, and its
        // place is free again.
        r.advance(0.5);
        let (s, got) = poll_a.join().unwrap();
        assert_eq!(s, 200);
        assert_eq!(got["items"].as_array().unwrap().len(), 1, "{got}");
    });
    assert_eq!(r.metric("held_polls"), Some(0.0));

    // The freed place is B's now: its poll is held until the clock moves.
    std::thread::scope(|scope| {
        let poll_b = scope.spawn(|| r.post("/v1/lease", &body("dev-b", &b, 30.0)));
        while r.metric("held_polls") != Some(1.0) {
            std::thread::yield_now();
        }
        r.advance(0.5);
        let (s, got) = poll_b.join().unwrap();
        assert_eq!(s, 200);
        assert_eq!(got["items"].as_array().unwrap().len(), 1, "{got}");
    });
    assert_eq!(r.metric("held_polls_refused_total"), Some(1.0));
}

/// Under a memory limit it does not fit in, routerd's connection cap
/// falls to its floor (64) and it serves on; with the limit off the cap
/// stays at `--max-connections`. Waits on the metric, however long the
/// host takes (a broken build is stopped by the runner's timeout).
#[test]
fn the_connection_cap_follows_the_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    let cap_flags = ["--max-connections", "500", "--memory-limit-mib"];
    let r = Routerd::start(dir.path(), &[&cap_flags[..], &["1"]].concat());
    while r.metric("connections_cap") != Some(64.0) {
        // Not a timing: each round asks again, so as not to spin.
        std::thread::yield_now();
    }
    assert!(r.metric("connections_open").is_some_and(|n| n >= 1.0));
    r.register("dev-a", "browser");
    drop(r);
    let dir = tempfile::tempdir().unwrap();
    let r = Routerd::start(dir.path(), &[&cap_flags[..], &["0"]].concat());
    assert_eq!(r.metric("connections_cap"), Some(500.0));
}
