//! Three routerd replicas over one PostgreSQL schema, as real processes
//! on the test server (TLS on where it has it): one leads, the others
//! forward, and the guarantees of decision 0020 hold whichever replica a
//! device calls, across a SIGKILL of the leader and across a leader cut
//! off from the store. Each test waits on events (a replica's own status),
//! never on a sleep; the bounds below are ten times what the events take
//! here and only end a test that would otherwise hang.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use router::failover::ledger::{facts, round, Ledger, GIVE_UP};
use router::failover::{run, FailoverReport, FailoverSpec, Fault};
use router::store::{PgStore, Store};
use serde_json::{json, Value};

use crate::support;
use crate::support::pg::PgServer;
use crate::support::routerd::{network_for, registration, Routerd, TOKEN};

/// The lead's TTL the tests run with, seconds (a campaign every third).
const LEAD_TTL_S: f64 = 2.0;

/// Starts replica `name` on `url`'s schema `schema`.
fn replica(url: &str, schema: &str, name: &str, dir: &tempfile::TempDir) -> Routerd {
    replica_with(url, schema, name, dir, &[])
}

/// Starts replica `name` with `extra` arguments.
fn replica_with(
    url: &str,
    schema: &str,
    name: &str,
    dir: &tempfile::TempDir,
    extra: &[&str],
) -> Routerd {
    let flags = router::failover::replicas::drill_flags(LEAD_TTL_S);
    let mut args = vec![
        "--replica-id",
        name,
        "--store",
        url,
        "--store-schema",
        schema,
    ];
    args.extend(flags.iter().map(String::as_str));
    Routerd::start(dir.path(), &[&args[..], extra].concat())
}

fn status(r: &Routerd) -> Option<Value> {
    r.try_send("GET", "/v1/replica", "", false)
        .filter(|(s, _)| *s == 200)
        .map(|(_, v)| v)
}

/// Waits until every replica in `live` reports the same lead: one leads,
/// the others follow it. Returns the leader's index in `live` and the term.
fn agreed_lead(live: &[&Routerd]) -> (usize, i64) {
    let start = Instant::now();
    loop {
        let st: Vec<Option<Value>> = live.iter().map(|r| status(r)).collect();
        let leaders: Vec<usize> = (0..st.len())
            .filter(|&i| st[i].as_ref().is_some_and(|v| v["role"] == "leading"))
            .collect();
        if let [l] = leaders[..] {
            let term = st[l].as_ref().unwrap()["term"].as_i64().unwrap();
            let name = st[l].as_ref().unwrap()["replica"].clone();
            let all = st.iter().all(|v| {
                v.as_ref()
                    .is_some_and(|v| v["term"].as_i64() == Some(term) && v["leader"] == name)
            });
            if all {
                return (l, term);
            }
        }
        assert!(start.elapsed() < GIVE_UP, "no agreed lead: {st:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Registers `n` devices named `prefix-i`, each through replica i mod 3
/// from a network of its own; returns (id, secret).
fn register(rs: &[&Routerd], prefix: &str, n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| {
            let id = format!("{prefix}-{i}");
            let r = rs[i % rs.len()];
            let (s, v) = r.register_from(&registration(&id, TOKEN, None), network_for(&id));
            assert_eq!(s, 200, "{v}");
            (id, v["device_secret"].as_str().unwrap().to_string())
        })
        .collect()
}

fn dirs(n: usize) -> Vec<tempfile::TempDir> {
    (0..n).map(|_| tempfile::tempdir().unwrap()).collect()
}

/// Any replica serves any request: rounds spread over the three, each
/// lease and deposit at a different one, until 40 deposits are
/// acknowledged; then the invariants.
#[test]
fn three_replicas_serve_as_one_router_whichever_a_device_calls() {
    let Some(pg) = support::pg::shared() else {
        return;
    };
    let g = pg.schema("replicas_one");
    let d = dirs(3);
    let rs: Vec<Routerd> = (0..3)
        .map(|i| replica(pg.url(), g.name(), &format!("r{i}"), &d[i]))
        .collect();
    let all: Vec<&Routerd> = rs.iter().collect();
    let (leader, term) = agreed_lead(&all);
    let (s, v) = rs[(leader + 1) % 3].send("PUT", "/v1/facts", &facts().to_string(), true);
    assert_eq!(s, 200, "{v}");
    let devices = register(&all, "dev", 9);
    let ledger = Mutex::new(Ledger::default());
    let a = router::load::agent();
    let start = Instant::now();
    let mut k = 0;
    while ledger.lock().unwrap().acked.len() < 40 {
        assert!(start.elapsed() < GIVE_UP, "too little work done");
        let d = &devices[k % devices.len()];
        let (entry, depositor) = (&rs[k % 3].base, &rs[(k / 3 + 1) % 3].base);
        round(&a, entry, depositor, d, TOKEN, &ledger);
        k += 1;
    }
    let l = ledger.into_inner().unwrap();
    let mut store = PgStore::connect_with_schema(pg.url(), g.name()).unwrap();
    assert_eq!(l.check(&mut store as &mut dyn Store), Vec::<String>::new());
    assert!(
        l.refusals.is_empty(),
        "no refusal expected with a steady lead: {:?}",
        l.refusals
    );
    // Every replica answers the same field, device and settled rows: the
    // leader's, named, with every acknowledged deposit folded.
    let top = *l.acked.values().max().unwrap();
    let leader_name = format!("r{leader}");
    let mut bodies = BTreeSet::new();
    for (i, r) in rs.iter().enumerate() {
        let (s, f, answered) = r.try_get_header("/v1/field", "x-routerd-replica").unwrap();
        assert_eq!(s, 200);
        assert_eq!(
            f["replica"],
            json!({"name": leader_name, "term": term}),
            "via r{i}"
        );
        assert_eq!(answered.as_deref(), Some(leader_name.as_str()), "via r{i}");
        assert!(
            f["applied_seq"].as_u64().unwrap() >= top,
            "via r{i}: {}",
            f["applied_seq"]
        );
        let (_, dev, _) = r.try_get_header("/v1/devices/dev-0", "x").unwrap();
        let (_, settled, _) = r.try_get_header("/v1/settled", "x").unwrap();
        bodies.insert((dev.to_string(), settled.to_string()));
        let (_, m) = r.get("/metrics");
        let want = format!("router_replica_term{{replica=\"{leader_name}\"}} {term}");
        assert!(m.as_str().unwrap().contains(&want), "via r{i}: no {want}");
    }
    assert_eq!(bodies.len(), 1, "replicas answered differently: {bodies:?}");
}

/// Registrations through a follower are budgeted by the device's own
/// address, which the follower vouches for; a device's forged forwarding
/// headers are not believed (its socket's address counts).
#[test]
fn a_follower_vouches_for_the_address_and_a_device_cannot_forge_one() {
    let Some(pg) = support::pg::shared() else {
        return;
    };
    let g = pg.schema("replicas_forge");
    let d = dirs(2);
    // One registration per source address, refilled once in 1,000 s.
    let limit = ["--registration-address-rate", "1,0.001"];
    let rs: Vec<Routerd> = (0..2)
        .map(|i| replica_with(pg.url(), g.name(), &format!("f{i}"), &d[i], &limit))
        .collect();
    let (leader, _) = agreed_lead(&[&rs[0], &rs[1]]);
    let follower = &rs[1 - leader];
    let (a, b) = (network_for("net-a"), network_for("net-b"));
    // Two networks through one follower: two addresses, both served.
    for (id, net) in [("dev-a", a), ("dev-b", b)] {
        let (s, v) = follower.register_from(&registration(id, TOKEN, None), net);
        assert_eq!(s, 200, "{id}: {v}");
    }
    // Network a again, claiming another address with a forged key: the
    // claim is dropped, network a's budget is spent.
    let forged = "x-routerd-forward-key: forged\r\nx-routerd-client: 10.9.9.9:1\r\n";
    let (s, v) = follower.register_from_with(&registration("dev-c", TOKEN, None), a, forged);
    assert_eq!(
        (s, v["error"].as_str()),
        (429, Some("registration_limited")),
        "{v}"
    );
    // Straight at the leader, the same.
    let (s, v) = rs[leader].register_from_with(&registration("dev-d", TOKEN, None), b, forged);
    assert_eq!(
        (s, v["error"].as_str()),
        (429, Some("registration_limited")),
        "{v}"
    );
}

/// Runs the failover drill with `fault` on the test server.
fn drill(pg: &PgServer, schema: &str, fault: &Fault) -> FailoverReport {
    let dir = tempfile::tempdir().unwrap();
    let spec = FailoverSpec {
        routerd: env!("CARGO_BIN_EXE_routerd").into(),
        url: pg.url().into(),
        schema: schema.into(),
        data: dir.path().into(),
        replicas: 3,
        devices: 7,
        work: 15,
        lead_ttl_s: LEAD_TTL_S,
    };
    let rep = run(&spec, fault).unwrap();
    eprintln!("{}", serde_json::to_string(&rep).unwrap());
    assert_eq!(rep.failures, Vec::<String>::new());
    assert!(rep.lead_after.1 > rep.lead_before.1, "{rep:?}");
    assert_eq!(rep.held_accepted, 2, "{rep:?}");
    assert!(rep.acknowledged >= 30, "{rep:?}");
    rep
}

/// SIGKILL of the leader under load: a survivor leads with a higher term
/// before the lease a device held could lapse (it takes about the lead's TTL), the lease a
/// device held from the dead leader is deposited on at a survivor exactly
/// once, and over the whole run no deposit is lost, no token or first
/// observation is granted twice and no host gets more than its
/// politeness allows (`router::failover`).
#[test]
fn killing_the_leader_moves_the_lead_and_loses_nothing() {
    let Some(pg) = support::pg::shared() else {
        return;
    };
    let g = pg.schema("replicas_kill");
    let rep = drill(pg, g.name(), &Fault::Kill);
    // Within one lease TTL, shown by the event rather than a clock: the
    // lease held through the kill was still deposited on, accepted
    // (`drill` checks both items), so it had not lapsed.
    assert_ne!(rep.lead_after.0, rep.lead_before.0, "{rep:?}");
}

/// The leader cut off from PostgreSQL (a proxy that stops forwarding,
/// nothing closed): it stops serving on its own clock and answers 503
/// `no_leader`, the others take the lead with a higher term, nothing it
/// granted is granted again, no acknowledged deposit is lost, and when the
/// link heals it follows the new leader without a restart.
#[test]
fn a_leader_cut_off_from_the_store_stops_and_rejoins_without_a_restart() {
    let Some(pg) = support::pg::shared() else {
        return;
    };
    let g = pg.schema("replicas_cut");
    let rep = drill(pg, g.name(), &Fault::Cut);
    assert!(
        rep.stopped_s.is_finite() && rep.rejoined_s.is_finite(),
        "{rep:?}"
    );
    assert_ne!(rep.lead_after.0, rep.lead_before.0, "{rep:?}");
}

/// Replica mode refuses, at start and with a message naming the flag,
/// what it cannot serve: no PostgreSQL store, a bad name, a bad
/// `--advertise`, a manual clock, keys left to per-directory files.
#[test]
fn replica_mode_refuses_what_it_cannot_serve() {
    let pg = "postgres://nobody@127.0.0.1:1/none";
    let keys = ["--operator-key", "k", "--registration-token", "t"];
    let cases: [(&[&str], &str); 6] = [
        (&["--replica-id", "a"], "needs --store postgres"),
        (&["--replica-id", "a b", "--store", pg], "replica name"),
        (
            &[
                "--replica-id",
                "a",
                "--store",
                pg,
                "--advertise",
                "10.0.0.1:80",
            ],
            "--advertise",
        ),
        (
            &[
                "--replica-id",
                "a",
                "--store",
                pg,
                "--advertise",
                "http://h:1/x",
            ],
            "--advertise",
        ),
        (
            &["--replica-id", "a", "--store", pg, "--manual-clock", "0"],
            "wall clock",
        ),
        (
            &["--replica-id", "a", "--store", pg, "--lead-ttl-s", "0.5"],
            "--lead-ttl-s",
        ),
    ];
    for (args, says) in cases {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_routerd"))
            .arg("--data")
            .arg(dir.path())
            .args(keys)
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} started");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(
            !err.contains("nobody@"),
            "{args:?} repeated the store URL: {err}"
        );
    }
    // Replica flags without --replica-id: refused, not ignored.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_routerd"))
        .args(["--advertise", "http://h:1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--replica-id"));
    // Without the keys: refused, whatever else is right.
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_routerd"))
        .arg("--data")
        .arg(dir.path())
        .args(["--replica-id", "a", "--store", pg])
        .env_remove("ROUTERD_OPERATOR_KEY")
        .env_remove("ROUTERD_REGISTRATION_TOKEN")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--operator-key and --registration-token")
    );
}

/// A capped pool's window holds across a change of lead: the leader
/// grants until the cap binds, is killed with SIGKILL, and the new leader
/// (in the same price window, restored from the store) grants nothing
/// more in it. A lease with items stamps one unit of `database` and each
/// item charges one more when deposited (decision 0006), so over one
/// window the grants' Σ (items + 1) stays within the cap.
#[test]
fn a_capped_window_holds_across_a_change_of_lead() {
    let Some(pg) = support::pg::shared() else {
        return;
    };
    let g = pg.schema("replicas_cap");
    let d = dirs(2);
    let mut rs: Vec<Option<Routerd>> = (0..2)
        .map(|i| Some(replica(pg.url(), g.name(), &format!("p{i}"), &d[i])))
        .collect();
    let (leader, _) = agreed_lead(&rs.iter().flatten().collect::<Vec<_>>());
    let other = Routerd::attach(&rs[1 - leader].as_ref().unwrap().base);
    const CAP: f64 = 20.0;
    let targets: Vec<Value> = (0..200)
        .map(|i| json!({"target": format!("c-{i}"), "source": "wide"}))
        .collect();
    let facts = json!({
        "sources": [{"source": "wide", "host": "wide.example", "binding": "html-v1", "bucket": [1000.0, 1000.0]}],
        "targets": targets, "caps": {"database": CAP},
    });
    let (s, v) = other.send("PUT", "/v1/facts", &facts.to_string(), true);
    assert_eq!(s, 200, "{v}");
    let devices = register(&[&other], "cap", 6);
    let window = || other.get("/v1/field").1["window_start_s"].as_f64().unwrap();
    let w0 = window();
    let lease = |k: usize| {
        let (id, secret) = &devices[k % devices.len()];
        let body = json!({"device_id": id, "device_secret": secret, "max_items": 4, "wait_s": 0.3});
        let (mut s, mut v) = other.post("/v1/lease", &body);
        if v["error"] == "unknown_device" {
            // After the change of lead, as after a restart.
            let reg = registration(id, TOKEN, Some(secret));
            assert_eq!(other.register_from(&reg, network_for(id)).0, 200);
            (s, v) = other.post("/v1/lease", &body);
        }
        assert_eq!(s, 200, "{v}");
        v["items"].as_array().map_or(0, Vec::len)
    };
    // Until the cap binds: six empty answers in a row after some grants.
    let (mut charged, mut empty, mut k) = (0usize, 0, 0);
    let start = Instant::now();
    while charged == 0 || empty < 6 {
        assert!(
            start.elapsed() < GIVE_UP,
            "the cap never bound: {charged} charged"
        );
        match lease(k) {
            0 => empty += 1,
            n => (charged, empty) = (charged + n + 1, 0),
        }
        k += 1;
    }
    assert!(
        charged as f64 >= CAP - 1.0,
        "the cap did not bind ({charged} of {CAP})"
    );
    assert!(
        charged as f64 <= CAP,
        "over the cap before the kill: {charged}"
    );
    rs[leader].take().unwrap().kill();
    agreed_lead(&[&other]);
    let after: usize = (0..8).map(|i| lease(k + i)).sum();
    assert_eq!(
        window(),
        w0,
        "the price window rolled during the test: the check is void"
    );
    assert_eq!(
        after, 0,
        "the new leader granted {after} items past the cap"
    );
    let used = other.get("/v1/field").1["window_usage"]["database"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(used <= CAP, "window usage {used} over the cap");
}

/// A routerd without `--replica-id` writes unfenced: it refuses, at start,
/// a schema whose replicas lead now, naming the way to join them.
#[test]
fn a_lone_routerd_refuses_a_schema_replicas_serve() {
    let Some(pg) = support::pg::shared() else {
        return;
    };
    let g = pg.schema("replicas_lone");
    let d = dirs(2);
    let r = replica(pg.url(), g.name(), "only", &d[0]);
    agreed_lead(&[&r]);
    let mut lone = std::process::Command::new(env!("CARGO_BIN_EXE_routerd"))
        .arg("--data")
        .arg(d[1].path())
        .args(["--listen", "127.0.0.1:0", "--operator-key", "k"])
        .args(["--registration-token", "t", "--store", pg.url()])
        .args(["--store-schema", g.name()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = lone.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > GIVE_UP {
            let _ = lone.kill();
            panic!("a lone routerd started on the replicas' schema");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut lone.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success());
    assert!(
        err.contains("replicas serve the schema") && err.contains("--replica-id"),
        "{err}"
    );
}
