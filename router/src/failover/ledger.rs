//! What the failover drill's devices do and see: rounds of lease and
//! deposit through any replica, the ledger of every grant and
//! acknowledgement, load in threads, and the invariants a run is checked
//! against (decision 0020): no deposit token granted twice, no target's
//! first observation granted to a second device while the first holds it,
//! no host granted more than its politeness bucket allows, every
//! acknowledged deposit in the store, every refusal typed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::load::{agent, post};
use crate::store::Store;

/// routerd's lease TTL (its default), seconds: a grant's time on the
/// leader's clock is its `expires_at` less this.
pub const LEASE_TTL_S: f64 = 60.0;

/// Politeness of each drill source's host: a bucket of 3 refilled at 10 a
/// second (`ROUTING.md` §4, per-host token buckets).
pub const BUCKET: (f64, f64) = (3.0, 10.0);

/// The longest any awaited event of a drill may take before it fails.
pub const GIVE_UP: Duration = Duration::from_secs(60);

/// The drill's facts: sources `alpha` and `beta` on hosts of their own,
/// 40 targets each, politeness [`BUCKET`].
pub fn facts() -> Value {
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

/// One device: its id and secret.
pub type Device = (String, String);

/// Everything the devices saw.
#[derive(Debug, Default)]
pub struct Ledger {
    /// (host, grant time on the leader's clock) per item granted.
    pub grants: Vec<(String, f64)>,
    /// Deposit tokens granted.
    pub tokens: BTreeSet<String>,
    /// First observations outstanding: target → device.
    pub outstanding: BTreeMap<String, String>,
    /// Broken invariants, one line each.
    pub failures: Vec<String>,
    /// Acknowledged deposits: token → seq.
    pub acked: BTreeMap<String, u64>,
    /// Refusals by `STATUS kind` (`0 transport`: no answer).
    pub refusals: BTreeMap<String, u64>,
}

impl Ledger {
    /// Records the grants of `lease` to `device`, checking tokens and
    /// first observations.
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

    /// Counts a refusal.
    pub fn refused(&mut self, status: u16, v: &Value) {
        let kind = v["error"].as_str().unwrap_or("?");
        *self.refusals.entry(format!("{status} {kind}")).or_default() += 1;
    }

    /// The invariants over the run, with `store` (the shared schema) for
    /// the acknowledged deposits: one line per broken one.
    pub fn check(&self, store: &mut dyn Store) -> Vec<String> {
        let mut out = self.failures.clone();
        out.extend(politeness_failures(&self.grants));
        for token in self.acked.keys() {
            match store.has_deposit(token) {
                Ok(true) => {}
                Ok(false) => out.push(format!("acknowledged deposit {token} not in the store")),
                Err(e) => out.push(format!("store: {e}")),
            }
        }
        let typed = |k: &String| {
            k == "0 transport"
                || k.starts_with("503 ")
                || k == "404 unknown_device"
                || k == "429 rate_limited"
        };
        for (k, n) in self.refusals.iter().filter(|(k, _)| !typed(k)) {
            out.push(format!("{n} refusals {k} (not a typed, retryable one)"));
        }
        out
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

/// A registration body for device `id` (`secret`: resume it).
pub fn registration(id: &str, token: &str, secret: Option<&str>) -> Value {
    let mut v = json!({"device_id": id, "archetype": "browser", "adapter_version": "1.0", "registration_token": token});
    if let Some(s) = secret {
        v["device_secret"] = json!(s);
    }
    v
}

/// The deposit of `item` of lease `lease` by `device`.
pub fn deposit_body(device: &Device, lease: &str, item: &Value) -> Value {
    json!({"device_id": device.0, "device_secret": device.1, "lease_id": lease,
           "target": item["target"], "deposit_token": item["deposit_token"],
           "receipt_revision": 0, "adapter_id": "html", "adapter_version": "1.0",
           "outcome": {"ok": true, "content_hash": format!("h-{}", item["target"]), "latency_ms": 900.0}})
}

/// One device's round: a long-polled lease through `entry`, then each
/// item deposited through `depositor`, retried (after a short pause) on
/// a typed 503 or 429 until acknowledged. A device the leader does not
/// know live registers again with its secret through `entry` (live scopes
/// are the leader's memory: after a change of lead, as after a restart).
pub fn round(
    a: &ureq::Agent,
    entry: &str,
    depositor: &str,
    d: &Device,
    token: &str,
    ledger: &Mutex<Ledger>,
) {
    let pause = || std::thread::sleep(Duration::from_millis(50));
    let body = json!({"device_id": d.0, "device_secret": d.1, "max_items": 2, "wait_s": 1.0});
    let (s, lease) = match post(a, &format!("{entry}/v1/lease"), &body, None) {
        Ok(r) => r,
        Err(_) => {
            ledger
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .refused(0, &json!({"error": "transport"}));
            return pause();
        }
    };
    let l = || ledger.lock().unwrap_or_else(|p| p.into_inner());
    if s != 200 {
        l().refused(s, &lease);
        if lease["error"] == "unknown_device" {
            let reg = registration(&d.0, token, Some(&d.1));
            if let Ok((s, v)) = post(a, &format!("{entry}/v1/register"), &reg, None) {
                if s != 200 {
                    l().refused(s, &v);
                }
            }
        }
        return pause();
    }
    l().granted(&d.0, &lease);
    let lease_id = lease["lease_id"].as_str().unwrap_or("");
    for it in lease["items"].as_array().into_iter().flatten() {
        let token = it["deposit_token"].as_str().unwrap_or("").to_string();
        let dep = deposit_body(d, lease_id, it);
        let start = Instant::now();
        loop {
            match post(a, &format!("{depositor}/v1/deposit"), &dep, None) {
                Ok((200, v)) => {
                    let mut g = l();
                    g.acked
                        .insert(token.clone(), v["seq"].as_u64().unwrap_or(0));
                    if it["kind"] == "first_observation" {
                        g.outstanding.remove(it["target"].as_str().unwrap_or(""));
                    }
                    break;
                }
                Ok((s, v)) if s == 503 || s == 429 => l().refused(s, &v),
                Ok((s, v)) => {
                    l().failures.push(format!("deposit refused {s}: {v}"));
                    break;
                }
                Err(_) => l().refused(0, &json!({"error": "transport"})),
            }
            if start.elapsed() > GIVE_UP {
                l().failures
                    .push(format!("deposit {token} never acknowledged"));
                break;
            }
            pause();
        }
    }
}

/// Devices' loops in threads of their own until stopped.
pub struct Load {
    /// What they saw so far.
    pub ledger: Arc<Mutex<Ledger>>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    /// One thread per (devices, entry URL, depositing URL).
    pub fn start(parts: Vec<(Vec<Device>, String, String)>, token: &str) -> Load {
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let threads = parts
            .into_iter()
            .map(|(devices, entry, depositor)| {
                let (ledger, stop, token) = (ledger.clone(), stop.clone(), token.to_string());
                std::thread::spawn(move || {
                    let a = agent();
                    let mut k = 0;
                    while !stop.load(Ordering::SeqCst) && !devices.is_empty() {
                        let d = &devices[k % devices.len()];
                        round(&a, &entry, &depositor, d, &token, &ledger);
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

    /// Deposits acknowledged so far.
    pub fn acked(&self) -> usize {
        self.ledger
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .acked
            .len()
    }

    /// Waits until `n` deposits in all are acknowledged.
    ///
    /// Errors: not within [`GIVE_UP`] (`what` names the phase).
    pub fn wait_acked(&self, n: usize, what: &str) -> Result<(), String> {
        let start = Instant::now();
        while self.acked() < n {
            if start.elapsed() > GIVE_UP {
                let l = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
                return Err(format!(
                    "{what}: {} of {n} deposits acknowledged in {GIVE_UP:?}; refusals {:?}",
                    l.acked.len(),
                    l.refusals
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Stops the threads; returns what they saw.
    pub fn finish(self) -> Ledger {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            let _ = t.join();
        }
        let mut l = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *l)
    }
}
