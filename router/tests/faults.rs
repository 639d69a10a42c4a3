//! Faults that lose nothing (docs/router.md "Threat model"): a retried
//! deposit, a crash right after a registration, a stop with requests
//! open, a silent connection. Real HTTP on loopback, a real SQLite store
//! (and PostgreSQL for the crash, `…_on_postgres`); each test names the
//! fault it once lost work to.

use crate::support;
use crate::support::in_process::InProcess;

use serde_json::json;

use crate::support::routerd::{registration, Routerd, CLOCK_START_S, OPERATOR_KEY, TOKEN};

/// A deposit retried after its answer was lost got 404 once its lease
/// had finished, so the device could not know it had been accepted. Now
/// the same deposit gets the same acknowledgement; another body under the
/// used token is still a replay.
#[test]
fn a_deposit_retried_after_a_lost_answer_gets_the_same_acknowledgement() {
    let dir = tempfile::tempdir().unwrap();
    let r = Routerd::start_manual(dir.path(), CLOCK_START_S, &[]);
    let mut f = support::routerd::facts(1);
    f["sources"][0]["bucket"] = json!([10.0, 10.0]);
    assert_eq!(r.send("PUT", "/v1/facts", &f.to_string(), true).0, 200);
    let (s, v) = r.post("/v1/register", &registration("dev-a", TOKEN, None));
    assert_eq!(s, 200, "{v}");
    let secret = v["device_secret"].as_str().unwrap().to_string();
    r.ticks(4, 0.05);
    let l = support::routerd::lease(&r, "dev-a", &secret, 1);
    let items = l["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{l}");
    let lid = l["lease_id"].as_str().unwrap();
    let body = support::routerd::deposit_body("dev-a", &secret, lid, &items[0], "h1");
    let (s, first) = r.post("/v1/deposit", &body);
    assert_eq!(s, 200, "{first}");
    assert_eq!(
        r.metric("outstanding_leases"),
        Some(0.0),
        "the lease finished"
    );
    for _ in 0..3 {
        let (s, again) = r.post("/v1/deposit", &body);
        assert_eq!((s, &again), (200, &first), "the same answer again");
    }
    assert_eq!(r.metric("deposits_total"), Some(1.0), "folded once");
    assert_eq!(r.metric("deposits_answered_again_total"), Some(3.0));
    let other = support::routerd::deposit_body("dev-a", &secret, lid, &items[0], "h2");
    let (s, v) = r.post("/v1/deposit", &other);
    assert_eq!((s, v["error"].as_str()), (409, Some("replayed")), "{v}");
    // A token that was never logged, on the finished lease, is unknown.
    let mut stranger = items[0].clone();
    stranger["deposit_token"] = json!("never-issued");
    let body = support::routerd::deposit_body("dev-a", &secret, lid, &stranger, "h1");
    let (s, v) = r.post("/v1/deposit", &body);
    assert_eq!(
        (s, v["error"].as_str()),
        (404, Some("unknown_lease")),
        "{v}"
    );
    r.stop();
}

/// SIGTERM was not handled (the process died without its final snapshot)
/// and two half-sent requests kept routerd alive after SIGINT. Now either
/// signal stops it cleanly, and the drain is bounded (`--drain-s`): it
/// exits with success and writes its final snapshot with the requests
/// still open.
#[test]
fn sigterm_stops_routerd_cleanly_with_half_sent_requests_open() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_routerd"))
        .arg("--data")
        .arg(dir.path())
        .args([
            "--listen",
            "127.0.0.1:0",
            "--operator-key",
            "k",
            "--registration-token",
            TOKEN,
        ])
        .args(["--drain-s", "0.5"])
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("routerd listening on http://")
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    // A registration: state the final snapshot must keep.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let resp = agent
        .post(&format!("http://{addr}/v1/register"))
        .header("content-type", "application/json")
        .send(registration("dev-a", TOKEN, None).to_string())
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    // Two requests that never finish their headers.
    let mut open = Vec::new();
    for _ in 0..2 {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.write_all(b"POST /v1/lease HTTP/1.1\r\nHost: x\r\nContent-Len")
            .unwrap();
        open.push(s);
    }
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "stopped by the signal, not cleanly: {:?} {err}",
        out.status
    );
    drop(open);
    let mut store = router::store::SqliteStore::open_dir(dir.path()).unwrap();
    use router::store::Store;
    assert!(
        store
            .get(router::store::Table::Meta, router::core::SNAPSHOT_KEY)
            .unwrap()
            .is_some(),
        "the final snapshot was written"
    );
}

/// HTTP had no read, header or idle timeout: half-sent requests stayed
/// open as long as their senders liked. Now a connection that sends
/// nothing for `--idle-s` is closed, and routerd goes on serving.
#[test]
fn a_connection_that_sends_nothing_is_closed_after_the_idle_timeout() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let r = Routerd::start_manual(dir.path(), CLOCK_START_S, &["--idle-s", "0.5"]);
    let addr = r.base.trim_start_matches("http://").to_string();
    let mut half = std::net::TcpStream::connect(&addr).unwrap();
    half.write_all(b"POST /v1/register HTTP/1.1\r\nHost: x\r\nContent-Len")
        .unwrap();
    // Wait on the event: routerd closes the connection (end of stream or a
    // reset), whatever the headers would have said.
    let mut buf = [0u8; 256];
    let closed = loop {
        match half.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(_) => break true,
        }
    };
    assert!(closed);
    let (s, v) = r.post("/v1/register", &registration("dev-a", TOKEN, None));
    assert_eq!(s, 200, "still serving: {v}");
    r.stop();
}

/// A kept-alive connection left idle after its answer is closed after
/// `--keep-alive-s` (its slot under the connection cap given back), and
/// routerd goes on serving; an out-of-range value is refused at start.
#[test]
fn a_connection_left_idle_after_its_answer_is_closed_after_the_keep_alive() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let r = Routerd::start_manual(dir.path(), CLOCK_START_S, &["--keep-alive-s", "0.3"]);
    let addr = r.base.trim_start_matches("http://").to_string();
    let mut kept = std::net::TcpStream::connect(&addr).unwrap();
    kept.write_all(b"GET /v1/none HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    // Wait on the event: the answer, then the end of stream (a reset
    // counts too), whatever the answer's length.
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        match kept.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.starts_with("HTTP/1.1 404"),
        "answered, then closed: {text}"
    );
    let (s, v) = r.post("/v1/register", &registration("dev-a", TOKEN, None));
    assert_eq!(s, 200, "still serving: {v}");
    r.stop();
    for bad in ["0", "-1", "nan", "3601"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_routerd"))
            .arg("--data")
            .arg(dir.path())
            .args(["--listen", "127.0.0.1:0", "--operator-key", OPERATOR_KEY])
            .args(["--registration-token", TOKEN])
            .arg(format!("--keep-alive-s={bad}"))
            .output()
            .unwrap();
        assert!(!out.status.success(), "--keep-alive-s {bad} was taken");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--keep-alive-s"), "{bad}: {err}");
    }
}

/// Registration was answered before it was saved: a SIGKILL before the
/// next snapshot forgot the identity, and registering again handed out a
/// new secret. On a manual clock that never ticks no snapshot is ever
/// written, so only the registration's own write can keep it.
#[test]
fn a_registration_survives_sigkill_right_after_its_answer() {
    let dir = tempfile::tempdir().unwrap();
    registration_survives_sigkill(dir.path(), &[]);
}

/// The same on PostgreSQL.
#[test]
fn a_registration_survives_sigkill_right_after_its_answer_on_postgres() {
    let Some(server) = support::pg::shared() else {
        return;
    };
    let schema = server.schema("reg_kill");
    let dir = tempfile::tempdir().unwrap();
    registration_survives_sigkill(
        dir.path(),
        &["--store", server.url(), "--store-schema", schema.name()],
    );
}

fn registration_survives_sigkill(data: &std::path::Path, store_args: &[&str]) {
    let r = Routerd::start_manual(data, CLOCK_START_S, store_args);
    let (s, v) = r.post("/v1/register", &registration("dev-a", TOKEN, None));
    assert_eq!(s, 200, "{v}");
    let secret = v["device_secret"].as_str().unwrap().to_string();
    r.kill();
    let r = Routerd::start_manual(data, CLOCK_START_S, store_args);
    let (s, v) = r.post("/v1/register", &registration("dev-a", TOKEN, None));
    assert_eq!(
        (s, v["error"].as_str()),
        (401, Some("unauthorized")),
        "the identity is known after the crash: {v}"
    );
    let (s, v) = r.post("/v1/register", &registration("dev-a", TOKEN, Some(&secret)));
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["device_secret"].as_str(), Some(secret.as_str()));
    r.stop();
}

/// The deposit channel was unbounded: a store slower than the deposits
/// grew routerd's memory without limit. Now deposits waiting for the store
/// are capped: with the store held, the cap's worth wait, the next is
/// refused with 503 `overloaded` and `Retry-After` and nothing of it is
/// kept; once the store is free every waiting deposit is acknowledged and
/// the refused one, sent again, is too.
#[test]
fn a_full_deposit_queue_answers_503_with_retry_after_and_loses_nothing() {
    let r = InProcess::start(2);
    let mut f = support::routerd::facts(3);
    f["sources"][0]["bucket"] = json!([10.0, 10.0]);
    assert_eq!(r.send("/v1/facts", &f).0, 200);
    let (s, v, _) = r.send("/v1/register", &registration("dev-a", TOKEN, None));
    assert_eq!(s, 200, "{v}");
    let secret = v["device_secret"].as_str().unwrap().to_string();
    for _ in 0..4 {
        assert_eq!(r.send("/v1/clock", &json!({"advance_s": 0.05})).0, 200);
    }
    let (s, l, _) = r.send(
        "/v1/lease",
        &json!({"device_id": "dev-a", "device_secret": secret, "max_items": 3}),
    );
    assert_eq!(s, 200, "{l}");
    let items = l["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 3, "{l}");
    let lid = l["lease_id"].as_str().unwrap().to_string();
    let bodies: Vec<serde_json::Value> = items
        .iter()
        .map(|it| support::routerd::deposit_body("dev-a", &secret, &lid, it, "h"))
        .collect();
    assert_eq!(r.metric("deposit_queue_cap"), 2.0);

    let held = r.store.lock();
    let answers = std::thread::scope(|scope| {
        let waiting: Vec<_> = bodies[..2]
            .iter()
            .map(|b| scope.spawn(|| r.send("/v1/deposit", b)))
            .collect();
        // Wait on the event: both deposits accepted and waiting.
        while r.metric("deposits_pending") < 2.0 {
            std::thread::yield_now();
        }
        let (s, v, retry) = r.send("/v1/deposit", &bodies[2]);
        assert_eq!((s, v["error"].as_str()), (503, Some("overloaded")), "{v}");
        assert_eq!(retry.as_deref(), Some("1"), "Retry-After in whole seconds");
        assert_eq!(
            r.metric("deposits_pending"),
            2.0,
            "the refused one is not kept"
        );
        drop(held);
        waiting
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    for (s, v, _) in &answers {
        assert_eq!(*s, 200, "{v}");
    }
    // Refused, not lost: the same body is accepted now.
    let (s, v, _) = r.send("/v1/deposit", &bodies[2]);
    assert_eq!(s, 200, "{v}");
    assert_eq!(r.metric("deposits_pending"), 0.0);
    let mut store = r.store.lock();
    for it in &items {
        assert!(store
            .has_deposit(it["deposit_token"].as_str().unwrap())
            .unwrap());
    }
    drop(store);
    // What an operator sees: the refusal by kind.
    let mut resp = r.agent.get(format!("{}/metrics", r.base)).call().unwrap();
    let text = resp.body_mut().read_to_string().unwrap();
    assert!(
        text.contains("router_refused_total{kind=\"overloaded\"} 1"),
        "{text}"
    );
}

/// Every lease and deposit held the router's lock from a thread of the
/// blocking pool, two context switches a request. Now the hold runs on
/// the request's own task when the lock is free, and only a request that
/// must wait for it goes to the pool, so a wait blocks no async worker:
/// with the router's lock held, four leases wait (`Shell::lock_waits` 4,
/// more than the runtime's two workers), and the operator page, which
/// needs no lock, still answers; freed, every lease is answered.
#[test]
fn leases_waiting_for_the_routers_lock_hold_up_no_async_worker() {
    let r = InProcess::start(16);
    assert_eq!(r.send("/v1/facts", &support::routerd::facts(3)).0, 200);
    let (s, v, _) = r.send("/v1/register", &registration("dev-a", TOKEN, None));
    assert_eq!(s, 200, "{v}");
    let secret = v["device_secret"].as_str().unwrap().to_string();
    let lease = json!({"device_id": "dev-a", "device_secret": secret, "max_items": 1});
    let before = r.shell.lock_waits();
    let (s, _, _) = r.send("/v1/lease", &lease);
    assert_eq!(s, 200);
    assert_eq!(
        r.shell.lock_waits(),
        before,
        "a free lock is taken on the task"
    );
    let held = r.shell.router.lock();
    let answers: Vec<u16> = std::thread::scope(|scope| {
        let sent: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| r.send("/v1/lease", &lease).0))
            .collect();
        // Wait on the event: every lease is waiting for the lock.
        while r.shell.lock_waits() < before + 4 {
            std::thread::yield_now();
        }
        let mut page = r.agent.get(&r.base).call().expect("the page answers");
        assert_eq!(page.status().as_u16(), 200);
        assert!(page.body_mut().read_to_string().unwrap().contains("<html"));
        drop(held);
        sent.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(answers, [200; 4]);
}

/// The registrar and the deposit writer answered each handler while
/// still holding the router's lock (and a deposit before it was counted
/// off the pending ones), so a client that sent its next request on the
/// answer could find the lock held: a lease after a registration waited
/// on the blocking pool, once in a CI run. Now each answer goes after the
/// lock is released and the count settled: after every answer here the
/// test takes the lock at once and no deposit is pending.
#[test]
fn an_answer_comes_after_the_routers_lock_is_released() {
    let r = InProcess::start(16);
    let mut f = support::routerd::facts(3);
    f["sources"][0]["bucket"] = json!([10.0, 10.0]);
    assert_eq!(r.send("/v1/facts", &f).0, 200);
    let free = |what: &str| {
        assert!(
            r.shell.router.try_lock().is_some(),
            "{what}: the lock is free once answered"
        );
    };
    let mut devices = Vec::new();
    for i in 0..20 {
        let id = format!("dev-{i}");
        let (s, v, _) = r.send("/v1/register", &registration(&id, TOKEN, None));
        assert_eq!(s, 200, "{v}");
        free("a new identity");
        devices.push((id, v["device_secret"].as_str().unwrap().to_string()));
    }
    for _ in 0..4 {
        assert_eq!(r.send("/v1/clock", &json!({"advance_s": 0.05})).0, 200);
    }
    let before = r.shell.lock_waits();
    let (id, secret) = &devices[0];
    let (s, l, _) = r.send(
        "/v1/lease",
        &json!({"device_id": id, "device_secret": secret, "max_items": 3}),
    );
    assert_eq!(s, 200, "{l}");
    free("a lease");
    let lid = l["lease_id"].as_str().unwrap().to_string();
    for it in l["items"].as_array().unwrap() {
        let body = support::routerd::deposit_body(id, secret, &lid, it, "h");
        let (s, v, _) = r.send("/v1/deposit", &body);
        assert_eq!(s, 200, "{v}");
        free("a deposit");
        assert_eq!(r.metric("deposits_pending"), 0.0, "counted off first");
    }
    assert_eq!(
        r.shell.lock_waits(),
        before,
        "nothing here waits for the lock"
    );
}
