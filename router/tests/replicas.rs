//! Three routerd replicas over one PostgreSQL schema, as real processes
//! on the test server (TLS on where it has it): one leads, the others
//! forward, and the guarantees of decision 0020 hold whichever replica a
//! device calls, across a SIGKILL of the leader and across a leader cut
//! off from the store. Each test waits on events (a replica's own status),
//! never on a sleep; the bounds below are ten times what the events take
//! here and only end a test that would otherwise hang.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support;
use crate::support::pg::PgServer;
use crate::support::routerd::{deposit_body, network_for, registration, Routerd, TOKEN};

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

/// What the devices saw: every grant and every acknowledged deposit.
#[derive(Default)]
struct Ledger {
    /// (host, grant time on the leader's clock) per item granted.
    grants: Vec<(String, f64)>,
    /// Deposit tokens granted, to check none is granted twice.
    tokens: BTreeSet<String>,
    /// First observations outstanding: target → device.
    outstanding: BTreeMap<String, String>,
    /// Failures of the invariants, one line each.
    failures: Vec<String>,
    /// Acknowledged deposits: token → seq.
    acked: BTreeMap<String, u64>,
    /// Refusals by `STATUS kind`.
    refusals: BTreeMap<String, u64>,
}

impl Ledger {
    fn granted(&mut self, device: &str, lease: &Value) {
        let granted_s = lease["expires_at"].as_f64().unwrap_or(f64::NAN) - LEASE_TTL_S;
        for it in lease["items"].as_array().into_iter().flatten() {
            let target = it["target"].as_str().unwrap_or("").to_string();
            let host = format!("{}.example", it["source"].as_str().unwrap_or(""));
            self.grants.push((host, granted_s));
            let token = it["deposit_token"].as_str().unwrap_or("").to_string();
            if !self.tokens.insert(token.clone()) {
                self.failures.push(format!("token {token} granted twice"));
            }
            if it["kind"] == "first_observation" {
                if let Some(d) = self.outstanding.insert(target.clone(), device.into()) {
                    self.failures.push(format!(
                        "{target}'s first observation granted to {device} while {d} held it"
                    ));
                }
            }
        }
    }

    fn refused(&mut self, status: u16, v: &Value) {
        let kind = v["error"].as_str().unwrap_or("?");
        *self.refusals.entry(format!("{status} {kind}")).or_default() += 1;
    }
}

/// Every host's grants over any interval stay within its bucket: at most
/// capacity + rate × the interval's length.
fn politeness_failures(grants: &[(String, f64)]) -> Vec<String> {
    let mut by_host: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for (h, t) in grants {
        by_host.entry(h).or_default().push(*t);
    }
    let mut out = Vec::new();
    for (host, mut ts) in by_host {
        ts.sort_by(f64::total_cmp);
        for i in 0..ts.len() {
            for j in i..ts.len() {
                let n = (j - i + 1) as f64;
                let allowed = BUCKET.0 + BUCKET.1 * (ts[j] - ts[i]) + 1e-6;
                if n > allowed {
                    out.push(format!(
                        "{host}: {n} grants in {:.3} s (allowed {allowed:.2})",
                        ts[j] - ts[i]
                    ));
                    return out;
                }
            }
        }
    }
    out
}

/// One device's round through `entry` (lease) and `depositor` (deposits):
/// it leases up to two items and deposits each.
fn round(entry: &Routerd, depositor: &Routerd, id: &str, secret: &str, ledger: &Mutex<Ledger>) {
    // Long-polled, as a fleet's devices lease.
    let body = json!({"device_id": id, "device_secret": secret, "max_items": 2, "wait_s": 1.0});
    let Some((s, lease)) = entry.try_send("POST", "/v1/lease", &body.to_string(), false) else {
        ledger
            .lock()
            .unwrap()
            .refused(0, &json!({"error": "transport"}));
        return;
    };
    if s != 200 {
        ledger.lock().unwrap().refused(s, &lease);
        if lease["error"] == "unknown_device" {
            // Live scopes are the leader's memory: after a change of lead,
            // as after a restart, a device without an outstanding lease
            // registers again, resuming its identity with its secret.
            let body = registration(id, TOKEN, Some(secret));
            let (s, v) = entry.register_from(&body, network_for(id));
            if s != 200 {
                ledger.lock().unwrap().refused(s, &v);
            }
        }
        return;
    }
    ledger.lock().unwrap().granted(id, &lease);
    let lease_id = lease["lease_id"].as_str().unwrap_or("");
    for it in lease["items"].as_array().into_iter().flatten() {
        let token = it["deposit_token"].as_str().unwrap_or("").to_string();
        let target = it["target"].as_str().unwrap_or("").to_string();
        let d = deposit_body(id, secret, lease_id, it, &format!("h-{target}"));
        // Retried until acknowledged: a deposit must never be lost.
        let start = Instant::now();
        loop {
            match depositor.try_send("POST", "/v1/deposit", &d.to_string(), false) {
                Some((200, v)) => {
                    let mut l = ledger.lock().unwrap();
                    l.acked
                        .insert(token.clone(), v["seq"].as_u64().unwrap_or(0));
                    if it["kind"] == "first_observation" {
                        l.outstanding.remove(&target);
                    }
                    break;
                }
                // Typed refusals a device retries: no lead, the store, its budget.
                Some((s, v)) if s == 503 || s == 429 => ledger.lock().unwrap().refused(s, &v),
                Some((s, v)) => {
                    ledger
                        .lock()
                        .unwrap()
                        .failures
                        .push(format!("deposit refused {s}: {v}"));
                    break;
                }
                None => ledger
                    .lock()
                    .unwrap()
                    .refused(0, &json!({"error": "transport"})),
            }
            if start.elapsed() > GIVE_UP {
                ledger
                    .lock()
                    .unwrap()
                    .failures
                    .push(format!("deposit {token} never acknowledged"));
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
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

/// Every acknowledged token is in the store's deposit log.
fn missing_from_store(pg: &PgServer, schema: &str, acked: &BTreeMap<String, u64>) -> Vec<String> {
    let rows = pg
        .query_text(&format!("SELECT token FROM \"{schema}\".deposits"))
        .unwrap();
    let stored: BTreeSet<String> = rows
        .into_iter()
        .filter_map(|r| r.into_iter().next())
        .collect();
    acked
        .keys()
        .filter(|t| !stored.contains(*t))
        .cloned()
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
    let live =
        |rs: &[Option<Routerd>]| -> Vec<usize> { (0..3).filter(|&i| rs[i].is_some()).collect() };
    let (leader, term) = agreed_lead(&rs.iter().flatten().collect::<Vec<_>>());
    let follower = (leader + 1) % 3;
    let r = |rs: &[Option<Routerd>], i: usize| -> Routerd { clone(rs[i].as_ref().unwrap()) };
    let (s, v) = r(&rs, follower).send("PUT", "/v1/facts", &facts().to_string(), true);
    assert_eq!(s, 200, "{v}");
    let all: Vec<Routerd> = live(&rs).into_iter().map(|i| r(&rs, i)).collect();
    let devices = register(&all.iter().collect::<Vec<_>>(), "kd", 7);
    // The held lease: granted by the leader, not deposited before the kill.
    let (held_id, held_secret) = devices[6].clone();
    // A long poll through a follower: answered once the refill has items.
    let body =
        json!({"device_id": held_id, "device_secret": held_secret, "max_items": 2, "wait_s": 20.0});
    let (s, held) = r(&rs, follower).post("/v1/lease", &body);
    assert_eq!(s, 200, "{held}");
    assert!(!held["items"].as_array().unwrap().is_empty(), "{held}");
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    ledger.lock().unwrap().granted(&held_id, &held);
    // Load: two devices' loops through the two survivors-to-be.
    let stop = Arc::new(AtomicBool::new(false));
    let survivors: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let mut load = Vec::new();
    for (t, chunk) in devices[..6].chunks(3).enumerate() {
        let (chunk, ledger, stop) = (chunk.to_vec(), ledger.clone(), stop.clone());
        let entry = r(&rs, survivors[t % 2]);
        let depositor = r(&rs, survivors[(t + 1) % 2]);
        load.push(std::thread::spawn(move || {
            let mut k = 0;
            while !stop.load(Ordering::SeqCst) {
                let (id, secret) = &chunk[k % chunk.len()];
                round(&entry, &depositor, id, secret, &ledger);
                k += 1;
            }
        }));
    }
    // Some work before the kill, awaited as an event.
    let start = Instant::now();
    while ledger.lock().unwrap().acked.len() < 20 {
        assert!(start.elapsed() < GIVE_UP, "no load before the kill");
        std::thread::sleep(Duration::from_millis(20));
    }
    rs[leader].take().unwrap().kill();
    let killed = Instant::now();
    let survivors_r: Vec<Routerd> = survivors.iter().map(|&i| r(&rs, i)).collect();
    let (new_leader, new_term) = agreed_lead(&survivors_r.iter().collect::<Vec<_>>());
    let takeover = killed.elapsed();
    assert!(new_term > term, "term {new_term} after {term}");
    eprintln!(
        "lead moved to k{} (term {new_term}) {:.2} s after the SIGKILL",
        survivors[new_leader],
        takeover.as_secs_f64()
    );
    assert!(
        takeover.as_secs_f64() < LEASE_TTL_S,
        "takeover took {takeover:?}, over one lease TTL"
    );
    // More work under the new lead, then stop the load.
    let acked_at_kill = ledger.lock().unwrap().acked.len();
    let start = Instant::now();
    while ledger.lock().unwrap().acked.len() < acked_at_kill + 20 {
        if start.elapsed() > GIVE_UP {
            let l = ledger.lock().unwrap();
            panic!(
                "no work after the takeover: {} acked, refusals {:?}, failures {:?}",
                l.acked.len(),
                l.refusals,
                l.failures
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::SeqCst);
    for h in load {
        h.join().unwrap();
    }
    // The held lease, deposited at a survivor: accepted once, the retry
    // answered the same.
    let lease_id = held["lease_id"].as_str().unwrap();
    for it in held["items"].as_array().unwrap() {
        let dep = deposit_body(&held_id, &held_secret, lease_id, it, "h-held");
        let (s, first) = survivors_r[0].post("/v1/deposit", &dep);
        assert_eq!(s, 200, "{first}");
        let (s, again) = survivors_r[1].post("/v1/deposit", &dep);
        assert_eq!(
            (s, &again),
            (200, &first),
            "a retried deposit is answered the same"
        );
        let mut l = ledger.lock().unwrap();
        l.acked.insert(
            it["deposit_token"].as_str().unwrap().into(),
            first["seq"].as_u64().unwrap(),
        );
    }
    let l = Arc::try_unwrap(ledger).ok().unwrap().into_inner().unwrap();
    assert!(l.failures.is_empty(), "{:?}", l.failures);
    assert_eq!(politeness_failures(&l.grants), Vec::<String>::new());
    assert_eq!(
        missing_from_store(pg, g.name(), &l.acked),
        Vec::<String>::new()
    );
    let typed = |k: &String| {
        k == "0 transport"
            || k.starts_with("503 ")
            || k == "404 unknown_device"
            || k == "429 rate_limited"
    };
    assert!(
        l.refusals.keys().all(typed),
        "untyped refusals: {:?}",
        l.refusals
    );
    eprintln!("refusals around the kill: {:?}", l.refusals);
}

/// Another client on a running replica's address (the test's handle is
/// not `Clone`: this one shares the address, not the process).
fn clone(r: &Routerd) -> Routerd {
    Routerd::attach(&r.base)
}
