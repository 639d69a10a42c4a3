//! What the replicas' tests' devices do and see: rounds of lease and
//! deposit, the ledger of every grant and acknowledgement, load in
//! threads, and the invariants checked over a run.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{BUCKET, GIVE_UP, LEASE_TTL_S};
use crate::support::pg::PgServer;
use crate::support::routerd::{deposit_body, network_for, registration, Routerd, TOKEN};

/// What the devices saw: every grant and every acknowledged deposit.
#[derive(Default)]
pub struct Ledger {
    /// (host, grant time on the leader's clock) per item granted.
    pub grants: Vec<(String, f64)>,
    /// Deposit tokens granted, to check none is granted twice.
    pub tokens: BTreeSet<String>,
    /// First observations outstanding: target → device.
    pub outstanding: BTreeMap<String, String>,
    /// Failures of the invariants, one line each.
    pub failures: Vec<String>,
    /// Acknowledged deposits: token → seq.
    pub acked: BTreeMap<String, u64>,
    /// Refusals by `STATUS kind`.
    pub refusals: BTreeMap<String, u64>,
}

impl Ledger {
    pub fn granted(&mut self, device: &str, lease: &Value) {
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

    pub fn refused(&mut self, status: u16, v: &Value) {
        let kind = v["error"].as_str().unwrap_or("?");
        *self.refusals.entry(format!("{status} {kind}")).or_default() += 1;
    }
}

/// Every host's grants over any interval stay within its bucket: at most
/// capacity + rate × the interval's length.
pub fn politeness_failures(grants: &[(String, f64)]) -> Vec<String> {
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
pub fn round(entry: &Routerd, depositor: &Routerd, id: &str, secret: &str, ledger: &Mutex<Ledger>) {
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

/// Every acknowledged token is in the store's deposit log.
pub fn missing_from_store(
    pg: &PgServer,
    schema: &str,
    acked: &BTreeMap<String, u64>,
) -> Vec<String> {
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

/// Devices' loops in threads of their own, each through one entry and
/// one depositing replica, until stopped.
pub struct Load {
    pub ledger: Arc<Mutex<Ledger>>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    /// One thread per (devices, entry, depositor).
    pub fn start(parts: Vec<(Vec<(String, String)>, Routerd, Routerd)>) -> Load {
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let threads = parts
            .into_iter()
            .map(|(devices, entry, depositor)| {
                let (ledger, stop) = (ledger.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut k = 0;
                    while !stop.load(Ordering::SeqCst) {
                        let (id, secret) = &devices[k % devices.len()];
                        round(&entry, &depositor, id, secret, &ledger);
                        k += 1;
                    }
                })
            })
            .collect();
        Load {
            ledger,
            stop,
            threads,
        }
    }

    pub fn acked(&self) -> usize {
        self.ledger.lock().unwrap().acked.len()
    }

    /// Waits until `n` deposits in all are acknowledged.
    pub fn wait_acked(&self, n: usize, what: &str) {
        let start = Instant::now();
        while self.acked() < n {
            if start.elapsed() > GIVE_UP {
                let l = self.ledger.lock().unwrap();
                panic!(
                    "{what}: {} of {n} acknowledged, refusals {:?}, failures {:?}",
                    l.acked.len(),
                    l.refusals,
                    l.failures
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the threads; returns what they saw.
    pub fn finish(self) -> Ledger {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            t.join().unwrap();
        }
        Arc::try_unwrap(self.ledger)
            .ok()
            .unwrap()
            .into_inner()
            .unwrap()
    }
}

/// A lease with items for device `id`, long-polled through `entry`.
pub fn held_lease(entry: &Routerd, id: &str, secret: &str) -> Value {
    let body = json!({"device_id": id, "device_secret": secret, "max_items": 2, "wait_s": 20.0});
    let (s, held) = entry.post("/v1/lease", &body);
    assert_eq!(s, 200, "{held}");
    assert!(!held["items"].as_array().unwrap().is_empty(), "{held}");
    held
}

/// Deposits every item of `held` at `a`, then again at `b`: the first
/// acknowledged, the retry answered the same. Records the acks.
pub fn deposit_held(
    a: &Routerd,
    b: &Routerd,
    id: &str,
    secret: &str,
    held: &Value,
    l: &mut Ledger,
) {
    let lease_id = held["lease_id"].as_str().unwrap();
    for it in held["items"].as_array().unwrap() {
        let dep = deposit_body(id, secret, lease_id, it, "h-held");
        let (s, first) = a.post("/v1/deposit", &dep);
        assert_eq!(s, 200, "{first}");
        let (s, again) = b.post("/v1/deposit", &dep);
        assert_eq!(
            (s, &again),
            (200, &first),
            "a retried deposit is answered the same"
        );
        l.acked.insert(
            it["deposit_token"].as_str().unwrap().into(),
            first["seq"].as_u64().unwrap(),
        );
    }
}

/// The invariants over a whole run: no failure, politeness kept, every
/// acknowledged deposit in the store, every refusal typed.
pub fn check_run(pg: &PgServer, schema: &str, l: &Ledger) {
    assert!(l.failures.is_empty(), "{:?}", l.failures);
    assert_eq!(politeness_failures(&l.grants), Vec::<String>::new());
    assert_eq!(
        missing_from_store(pg, schema, &l.acked),
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
    eprintln!("refusals over the run: {:?}", l.refusals);
}
