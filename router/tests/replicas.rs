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

use serde_json::{json, Value};

mod ledger;

use ledger::{
    check_run, deposit_held, held_lease, missing_from_store, politeness_failures, round, Ledger,
    Load,
};

use crate::support;
use crate::support::routerd::{network_for, registration, Routerd, TOKEN};

/// The lead's TTL the tests run with, seconds (a campaign every third).
const LEAD_TTL_S: &str = "2";
/// routerd's lease TTL (the default), seconds: a grant's time is its
/// `expires_at` less this.
const LEASE_TTL_S: f64 = 60.0;
/// Politeness of each source's host: a bucket of 3 refilled at 4 a second.
const BUCKET: (f64, f64) = (3.0, 4.0);
/// The longest any awaited event may take before the test gives up.
const GIVE_UP: Duration = Duration::from_secs(60);

fn facts() -> Value {
    let mut sources = Vec::new();
    let mut targets = Vec::new();
    for s in ["alpha", "beta"] {
        sources.push(json!({"source": s, "host": format!("{s}.example"), "binding": "html-v1", "bucket": [BUCKET.0, BUCKET.1]}));
        for i in 0..40 {
            targets.push(json!({"target": format!("{s}-{i}"), "source": s}));
        }
    }
    json!({"sources": sources, "targets": targets})
}

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
    let args = [
        "--replica-id",
        name,
        "--store",
        url,
        "--store-schema",
        schema,
        "--lead-ttl-s",
        LEAD_TTL_S,
        "--store-timeout-s",
        "1",
        "--store-connect-timeout-s",
        "1",
        "--device-rate",
        "1000,1000",
        "--tick-ms",
        "200",
    ];
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
/// lease and deposit at a different one, until 60 deposits are
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
    let start = Instant::now();
    let mut k = 0;
    while ledger.lock().unwrap().acked.len() < 60 {
        assert!(start.elapsed() < GIVE_UP, "too little work done");
        let (id, secret) = &devices[k % devices.len()];
        round(&rs[k % 3], &rs[(k / 3 + 1) % 3], id, secret, &ledger);
        k += 1;
    }
    let l = ledger.into_inner().unwrap();
    assert!(l.failures.is_empty(), "{:?}", l.failures);
    assert_eq!(politeness_failures(&l.grants), Vec::<String>::new());
    assert_eq!(
        missing_from_store(pg, g.name(), &l.acked),
        Vec::<String>::new()
    );
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

/// SIGKILL of the leader under load: a survivor leads within the lead's
/// TTL (plus the store's call bound), the lease a device holds from the
/// dead leader is deposited on at a survivor exactly once, and over the
/// whole run no deposit is lost, no token or first observation is granted
/// twice and no host gets more than its politeness allows.
#[test]
fn killing_the_leader_moves_the_lead_and_loses_nothing() {
    let Some(pg) = support::pg::shared() else {
        return;
    };
    let g = pg.schema("replicas_kill");
    let d = dirs(3);
    let mut rs: Vec<Option<Routerd>> = (0..3)
        .map(|i| Some(replica(pg.url(), g.name(), &format!("k{i}"), &d[i])))
        .collect();
    let (leader, term) = agreed_lead(&rs.iter().flatten().collect::<Vec<_>>());
    let bases: Vec<String> = rs.iter().flatten().map(|r| r.base.clone()).collect();
    let at = |i: usize| -> Routerd { Routerd::attach(&bases[i]) };
    let survivors: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let (s, v) = at(survivors[0]).send("PUT", "/v1/facts", &facts().to_string(), true);
    assert_eq!(s, 200, "{v}");
    let all: Vec<Routerd> = (0..3).map(at).collect();
    let devices = register(&all.iter().collect::<Vec<_>>(), "kd", 7);
    // Held: granted by the leader (through a follower's long poll), not
    // deposited before the kill.
    let (held_id, held_secret) = devices[6].clone();
    let held = held_lease(&at(survivors[0]), &held_id, &held_secret);
    let load = Load::start(
        (0..2)
            .map(|t| {
                let part = devices[t * 3..t * 3 + 3].to_vec();
                (part, at(survivors[t]), at(survivors[1 - t]))
            })
            .collect(),
    );
    load.ledger.lock().unwrap().granted(&held_id, &held);
    load.wait_acked(20, "before the kill");
    rs[leader].take().unwrap().kill();
    let killed = Instant::now();
    let alive: Vec<Routerd> = survivors.iter().map(|&i| at(i)).collect();
    let (new_leader, new_term) = agreed_lead(&alive.iter().collect::<Vec<_>>());
    let takeover = killed.elapsed();
    assert!(new_term > term, "term {new_term} after {term}");
    eprintln!(
        "lead moved to k{} (term {new_term}) {:.2} s after the SIGKILL",
        survivors[new_leader],
        takeover.as_secs_f64()
    );
    assert!(
        takeover.as_secs_f64() < LEASE_TTL_S,
        "takeover took {takeover:?}"
    );
    let before = load.acked();
    load.wait_acked(before + 20, "after the takeover");
    let mut l = load.finish();
    deposit_held(&alive[0], &alive[1], &held_id, &held_secret, &held, &mut l);
    check_run(pg, g.name(), &l);
}
