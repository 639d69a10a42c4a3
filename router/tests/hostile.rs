//! What one registered device can do to `routerd` (docs/router.md "Threat
//! model"), over real HTTP on loopback and a real SQLite store, on a
//! manual clock: no outcome depends on how fast the host ran. Each test
//! tries one bypass of a limit and shows it closed (the faults that once
//! lost work are in `faults.rs`).

use crate::support;

use serde_json::{json, Value};

use crate::support::routerd::{lease_body, registration, Routerd, CLOCK_START_S, TOKEN};

/// A labelled sample of `/metrics` (`router_` + `name` + `{labels}`), 0 when absent.
fn labelled(r: &Routerd, name: &str, labels: &str) -> f64 {
    let (_, m) = r.get("/metrics");
    let key = format!("router_{name}{{{labels}}} ");
    m.as_str()
        .unwrap_or("")
        .lines()
        .find_map(|l| l.strip_prefix(&key))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Registering again used to hand the device a full request bucket: a
/// device that re-registered on every 429 was never limited.
#[test]
fn registering_again_does_not_refill_the_request_budget() {
    let dir = tempfile::tempdir().unwrap();
    let r = Routerd::start_manual(dir.path(), CLOCK_START_S, &["--device-rate", "3,1"]);
    let (s, v) = r.post("/v1/register", &registration("dev-a", TOKEN, None));
    assert_eq!(s, 200, "{v}");
    let secret = v["device_secret"].as_str().unwrap().to_string();
    for i in 0..3 {
        let (s, v) = r.post("/v1/lease", &lease_body("dev-a", &secret, None));
        assert_eq!(s, 200, "lease {i}: {v}");
    }
    let (s, v) = r.post("/v1/lease", &lease_body("dev-a", &secret, None));
    assert_eq!((s, v["error"].as_str()), (429, Some("rate_limited")), "{v}");
    for _ in 0..5 {
        let (s, v) = r.post("/v1/register", &registration("dev-a", TOKEN, Some(&secret)));
        assert_eq!(s, 200, "{v}");
        let (s, v) = r.post("/v1/lease", &lease_body("dev-a", &secret, None));
        assert_eq!(
            (s, v["error"].as_str()),
            (429, Some("rate_limited")),
            "registering again refilled the budget: {v}"
        );
    }
    // One second on the clock refills one request.
    r.advance(1.0);
    let (s, v) = r.post("/v1/lease", &lease_body("dev-a", &secret, None));
    assert_eq!(s, 200, "{v}");
    r.stop();
}

/// Registration had no limit: one address could mint identities (or
/// guess tokens) as fast as it could send.
#[test]
fn registrations_are_budgeted_per_source_address_every_attempt_counted() {
    let dir = tempfile::tempdir().unwrap();
    let r = Routerd::start_manual(
        dir.path(),
        CLOCK_START_S,
        &["--registration-address-rate", "3,1"],
    );
    for i in 0..3 {
        let (s, v) = r.post("/v1/register", &registration(&format!("d{i}"), TOKEN, None));
        assert_eq!(s, 200, "{v}");
    }
    let (s, v) = r.post("/v1/register", &registration("d3", TOKEN, None));
    assert_eq!(
        (s, v["error"].as_str()),
        (429, Some("registration_limited")),
        "{v}"
    );
    assert!(
        v["message"].as_str().unwrap().contains("source address"),
        "{v}"
    );
    // A guess is refused for the budget before the token is even read.
    let (s, v) = r.post("/v1/register", &registration("d3", "guess", None));
    assert_eq!(s, 429, "{v}");
    // A second later one attempt fits: a wrong token spends it.
    r.advance(1.0);
    let (s, v) = r.post("/v1/register", &registration("d3", "guess", None));
    assert_eq!((s, v["error"].as_str()), (401, Some("unauthorized")), "{v}");
    let (s, v) = r.post("/v1/register", &registration("d3", TOKEN, None));
    assert_eq!(s, 429, "the guess spent the second's registration: {v}");
    assert_eq!(
        labelled(&r, "refused_total", "kind=\"registration_limited\""),
        3.0
    );
    assert_eq!(r.metric("registrations_total"), Some(3.0));
    r.stop();
}

/// The credential's budget bounds registrations from every address
/// together; a wrong token does not spend it (it is no credential).
#[test]
fn registrations_are_budgeted_per_registration_credential() {
    let dir = tempfile::tempdir().unwrap();
    let r = Routerd::start_manual(dir.path(), CLOCK_START_S, &["--registration-rate", "2,0.5"]);
    let (s, v) = r.post("/v1/register", &registration("x", "guess", None));
    assert_eq!(s, 401, "{v}");
    for i in 0..2 {
        let (s, v) = r.post("/v1/register", &registration(&format!("d{i}"), TOKEN, None));
        assert_eq!(s, 200, "{v}");
    }
    let (s, v) = r.post("/v1/register", &registration("d2", TOKEN, None));
    assert_eq!(
        (s, v["error"].as_str()),
        (429, Some("registration_limited")),
        "{v}"
    );
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("registration credential"),
        "{v}"
    );
    r.advance(2.0);
    let (s, v) = r.post("/v1/register", &registration("d2", TOKEN, None));
    assert_eq!(s, 200, "0.5 a second: one after 2 s {v}");
    r.stop();
}

/// Long-poll retries were not charged: many polls held open by one device
/// retried on every tick without limit, each empty try storing a lease.
/// Now every try spends the device's budget: with 4 requests in the
/// bucket and the clock standing still, 12 concurrent polls make exactly 4
/// tries between them, however many ticks wake them.
#[test]
fn long_poll_retries_spend_the_device_budget() {
    let dir = tempfile::tempdir().unwrap();
    let r = Routerd::start_manual(dir.path(), CLOCK_START_S, &["--device-rate", "4,1"]);
    let (s, v) = r.post("/v1/register", &registration("dev-a", TOKEN, None));
    assert_eq!(s, 200, "{v}");
    let secret = v["device_secret"].as_str().unwrap().to_string();
    let answers: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let polls: Vec<_> = (0..12)
            .map(|_| scope.spawn(|| r.post("/v1/lease", &lease_body("dev-a", &secret, Some(30.0)))))
            .collect();
        // Wait on the event: every poll has made its first try (4 held,
        // 8 refused at once).
        while r.metric("leases_total").unwrap_or(0.0)
            + labelled(&r, "refused_total", "kind=\"rate_limited\"")
            < 12.0
        {
            std::thread::yield_now();
        }
        // Ticks wake the held polls: each retry finds the budget spent.
        for _ in 0..3 {
            r.advance(0.0);
        }
        polls.into_iter().map(|p| p.join().unwrap()).collect()
    });
    let held: Vec<&Value> = answers
        .iter()
        .filter(|(s, _)| *s == 200)
        .map(|(_, v)| v)
        .collect();
    assert_eq!(held.len(), 4, "{answers:?}");
    for v in &held {
        assert!(v["items"].as_array().unwrap().is_empty(), "{v}");
        let hint = v["retry_after_s"].as_f64().expect("a hint");
        assert!(hint >= 1.0 - 1e-9, "at least the budget's wait: {v}");
    }
    assert!(
        answers
            .iter()
            .filter(|(s, _)| *s != 200)
            .all(|(s, v)| *s == 429 && v["error"] == "rate_limited"),
        "{answers:?}"
    );
    assert_eq!(
        r.metric("leases_total"),
        Some(4.0),
        "tries beyond the budget were answered"
    );
    assert_eq!(r.metric("outstanding_leases"), Some(0.0));
    r.stop();
}

/// Every empty answer used to store a lease, kept an hour after it
/// expired: a device polling an empty queue grew the lease table.
#[test]
fn empty_leases_are_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    let r = Routerd::start_manual(dir.path(), CLOCK_START_S, &[]);
    let (s, v) = r.post("/v1/register", &registration("dev-a", TOKEN, None));
    assert_eq!(s, 200, "{v}");
    let secret = v["device_secret"].as_str().unwrap().to_string();
    let mut last = Value::Null;
    for _ in 0..10 {
        let (s, v) = r.post("/v1/lease", &lease_body("dev-a", &secret, None));
        assert_eq!(s, 200, "{v}");
        assert!(v["items"].as_array().unwrap().is_empty(), "{v}");
        last = v;
    }
    assert_eq!(r.metric("leases_total"), Some(10.0));
    assert_eq!(r.metric("outstanding_leases"), Some(0.0));
    let deposit = json!({
        "device_id": "dev-a", "device_secret": secret, "lease_id": last["lease_id"],
        "target": "ad-0", "deposit_token": "x", "receipt_revision": 0,
        "adapter_id": "html", "adapter_version": "1.0",
        "outcome": {"ok": true, "content_hash": "h", "latency_ms": 900.0},
    });
    let (s, v) = r.post("/v1/deposit", &deposit);
    assert_eq!(
        (s, v["error"].as_str()),
        (404, Some("unknown_lease")),
        "{v}"
    );
    r.stop();
}

/// A body not declared as JSON (curl's default form type, none, text) is
/// refused with 415 before it is read; every refusal, a 405 included, is
/// the documented `{error, message}` JSON.
#[test]
fn bodies_must_be_declared_json_and_every_refusal_is_json() {
    let dir = tempfile::tempdir().unwrap();
    let r = Routerd::start_manual(dir.path(), CLOCK_START_S, &[]);
    let body = registration("dev-a", TOKEN, None).to_string();
    for declared in [
        None,
        Some("application/x-www-form-urlencoded"),
        Some("text/plain"),
        Some("application/jsonx"),
    ] {
        let (s, v) = r.send_as("POST", "/v1/register", &body, declared);
        assert_eq!(
            (s, v["error"].as_str()),
            (415, Some("unsupported_media_type")),
            "{declared:?}: {v}"
        );
    }
    assert_eq!(
        r.metric("registrations_total"),
        Some(0.0),
        "nothing registered"
    );
    let (s, v) = r.send_as(
        "POST",
        "/v1/register",
        &body,
        Some("Application/JSON; charset=utf-8"),
    );
    assert_eq!(s, 200, "parameters and case are allowed: {v}");
    for (method, path, allow) in [
        ("GET", "/v1/register", "POST"),
        ("PUT", "/v1/lease", "POST"),
        ("POST", "/v1/field", "GET"),
    ] {
        let (s, v) = r.send(method, path, "{}", false);
        assert_eq!(
            (s, v["error"].as_str()),
            (405, Some("method_not_allowed")),
            "{method} {path}: {v}"
        );
        assert!(v["message"].as_str().unwrap().contains(allow), "{v}");
    }
    r.stop();
}

/// `--help` printed the operator key and registration token taken from the
/// environment.
#[test]
fn help_never_prints_a_secret_from_the_environment() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_routerd"))
        .arg("--help")
        .env("ROUTERD_OPERATOR_KEY", "key-sekrit-4711")
        .env("ROUTERD_REGISTRATION_TOKEN", "token-sekrit-4711")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("--operator-key"), "{text}");
    assert!(!text.contains("sekrit"), "{text}");
}

/// A key file that could not be read (here: not UTF-8) was replaced by a
/// new key, locking out every holder of the old one. Now routerd refuses
/// to start, names the file and leaves it as it was.
#[test]
fn a_key_file_that_cannot_be_read_is_never_overwritten() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("operator.key");
    let kept = [0xffu8, 0xfe, b'k', b'\n'];
    std::fs::write(&key, kept).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_routerd"))
        .arg("--data")
        .arg(dir.path())
        .args(["--listen", "127.0.0.1:0", "--registration-token", TOKEN])
        .env_remove("ROUTERD_OPERATOR_KEY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait on the event: the first line (routerd listening) or the end of
    // its output (it stopped).
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    if !line.is_empty() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        line.is_empty(),
        "routerd started over an unreadable key file: {line}"
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("operator.key"), "{err}");
    assert_eq!(std::fs::read(&key).unwrap(), kept, "the file is as it was");
}

/// One deposit could add 1,000 targets whatever its kind or outcome (a
/// failed verification deposit did). Now only a successful crawl of a
/// listing target discovers, within the device's budget per price window;
/// every refusal changes nothing.
#[test]
fn only_a_successful_listing_crawl_discovers_and_within_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let r = Routerd::start_manual(dir.path(), CLOCK_START_S, &["--discovery-per-window", "3"]);
    let f = json!({
        "sources": [{"source": "board", "host": "jobs.example", "binding": "html-v1", "bucket": [100.0, 100.0]}],
        "targets": [{"target": "board-list", "source": "board", "listing": true},
                    {"target": "ad-0", "source": "board"}],
    });
    assert_eq!(r.send("PUT", "/v1/facts", &f.to_string(), true).0, 200);
    let (s, v) = r.post("/v1/register", &registration("dev-a", TOKEN, None));
    assert_eq!(s, 200, "{v}");
    let secret = v["device_secret"].as_str().unwrap().to_string();
    r.ticks(4, 0.05);
    let l = support::routerd::lease(&r, "dev-a", &secret, 4);
    let lid = l["lease_id"].as_str().unwrap().to_string();
    let items = l["items"].as_array().unwrap().clone();
    let item = |t: &str| {
        items
            .iter()
            .find(|i| i["target"] == t)
            .unwrap_or_else(|| panic!("{t} in {l}"))
            .clone()
    };
    let targets = |r: &Routerd| r.get("/v1/field").1["targets"].as_u64().unwrap();
    let before = targets(&r);
    let with = |target: &str, ok: bool, found: &[&str]| {
        let mut b = support::routerd::deposit_body("dev-a", &secret, &lid, &item(target), "h");
        b["outcome"]["ok"] = json!(ok);
        if !ok {
            b["outcome"]["content_hash"] = json!(null);
            b["outcome"]["error_class"] = json!("timeout");
        }
        b["discovered"] = json!(found);
        b
    };
    // Not a listing: refused, nothing added.
    let (s, v) = r.post("/v1/deposit", &with("ad-0", true, &["new-1"]));
    assert_eq!((s, v["error"].as_str()), (422, Some("bad_value")), "{v}");
    // A failed listing crawl: refused.
    let (s, v) = r.post("/v1/deposit", &with("board-list", false, &["new-1"]));
    assert_eq!((s, v["error"].as_str()), (422, Some("bad_value")), "{v}");
    // Over the budget (3 per window): refused by name.
    let (s, v) = r.post(
        "/v1/deposit",
        &with("board-list", true, &["n1", "n2", "n3", "n4"]),
    );
    assert_eq!(
        (s, v["error"].as_str()),
        (429, Some("discovery_limited")),
        "{v}"
    );
    assert_eq!(targets(&r), before, "no refusal added a target");
    // Within it: accepted.
    let (s, v) = r.post(
        "/v1/deposit",
        &with("board-list", true, &["n1", "n2", "n3"]),
    );
    assert_eq!(s, 200, "{v}");
    assert_eq!(targets(&r), before + 3);
    r.stop();
}
