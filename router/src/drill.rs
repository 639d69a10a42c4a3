//! The restart drill: devices lease and deposit against a running
//! `routerd`, each holding back one item of its latest lease, until
//! routerd is killed with SIGKILL under that load; then routerd is started
//! again on the same store and the drill checks what a device relies on
//! (decision 0018, docs/router.md "Durability and restart"):
//!
//! - every deposit acknowledged before the kill is in the store;
//! - every held item is accepted after the restart, exactly once (its
//!   deposit sent again gets the same answer, never a second fold);
//! - a deposit whose answer the kill cut off is accepted at most once;
//! - no acknowledged deposit is accepted again;
//! - routerd says how many leases it restored, and its deposit counter
//!   matches what the drill saw accepted.
//!
//! Used by the `restart_drill` example; `ci/pg-suite.sh` runs it on SQLite
//! and on PostgreSQL.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

use crate::load::{agent, post, seed, LoadSpec};
use crate::store::{Store, StoreError};

/// Starts routerd on the drill's store: the child and its base URL.
pub type Start<'a> = &'a dyn Fn() -> Result<(std::process::Child, String), String>;

/// Opens the drill's store directly (routerd stopped).
pub type OpenStore<'a> = &'a dyn Fn() -> Result<Box<dyn Store>, StoreError>;

/// What the drill saw. The drill passes when [`DrillReport::failures`] is empty.
#[derive(Debug, Default, Serialize)]
pub struct DrillReport {
    /// Devices driven.
    pub devices: usize,
    /// Leases with items granted before the kill.
    pub leases: u64,
    /// Deposits acknowledged before the kill.
    pub acknowledged: u64,
    /// Of those, found in the store after the kill (must be all).
    pub acknowledged_in_store: u64,
    /// Items held back by their devices at the kill.
    pub held: u64,
    /// Deposits sent when routerd was killed (no answer came).
    pub cut_off: u64,
    /// Seconds from the kill to the restarted routerd listening.
    pub restart_s: f64,
    /// `router_leases_restored_total` after the restart.
    pub leases_restored: f64,
    /// Held items accepted after the restart (must be all).
    pub held_accepted: u64,
    /// Cut-off deposits accepted after the restart (not logged before).
    pub cut_off_accepted: u64,
    /// Cut-off deposits refused as `replayed` (logged before the kill).
    pub cut_off_replayed: u64,
    /// Acknowledged deposits sent again after the restart and accepted
    /// (must be 0).
    pub acknowledged_accepted_again: u64,
    /// Acknowledged deposits sent again and refused, by error kind.
    pub acknowledged_refused: std::collections::BTreeMap<String, u64>,
    /// `router_deposits_total` after the drill (must equal the accepted ones).
    pub deposits_after_restart: f64,
    /// What failed, one line each; empty when the drill passed.
    pub failures: Vec<String>,
}

/// One device's state in the drill.
struct Device {
    id: String,
    secret: String,
    /// (lease id, item) held back from its latest lease.
    held: Option<(String, Value)>,
}

/// What one load thread left at the kill.
#[derive(Default)]
struct Left {
    devices: Vec<Device>,
    acknowledged: Vec<Value>,
    cut_off: Vec<Value>,
    leases: u64,
}

fn deposit_body(d: &Device, lease: &str, item: &Value) -> Value {
    json!({"device_id": d.id, "device_secret": d.secret, "lease_id": lease,
           "target": item["target"], "deposit_token": item["deposit_token"],
           "receipt_revision": 0, "adapter_id": "html", "adapter_version": "1",
           "outcome": {"ok": true, "content_hash": "h", "latency_ms": 500.0}})
}

/// Drives `devices` until a request fails (routerd was killed): each
/// lease's items are deposited but the last, which is held until the
/// device's next lease.
fn drive(base: &str, mut devices: Vec<Device>) -> Left {
    let a = agent();
    let mut left = Left::default();
    let n = devices.len();
    'outer: for i in 0.. {
        let d = &mut devices[i % n];
        let lease = json!({"device_id": d.id, "device_secret": d.secret, "max_items": 3});
        let Ok((status, l)) = post(&a, &format!("{base}/v1/lease"), &lease, None) else {
            break;
        };
        let items = l["items"].as_array().cloned().unwrap_or_default();
        if status != 200 || items.is_empty() {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        left.leases += 1;
        let lease_id = l["lease_id"].as_str().unwrap_or("").to_string();
        let mut to_send: Vec<Value> = items[..items.len() - 1]
            .iter()
            .map(|it| deposit_body(d, &lease_id, it))
            .collect();
        if let Some((lid, it)) = d.held.take() {
            to_send.push(deposit_body(d, &lid, &it));
        }
        d.held = Some((lease_id, items[items.len() - 1].clone()));
        for (k, body) in to_send.iter().enumerate() {
            match post(&a, &format!("{base}/v1/deposit"), body, None) {
                Ok((200, _)) => left.acknowledged.push(body.clone()),
                Ok(_) => {}
                Err(_) => {
                    left.cut_off.extend(to_send[k..].iter().cloned());
                    break 'outer;
                }
            }
        }
    }
    left.devices = devices;
    left
}

/// Sends `body` to `/v1/deposit`: (status, body), status 0 when no
/// answer came. A device holding a restored lease is live again, so none
/// registers first.
fn deposit_after(a: &ureq::Agent, base: &str, body: &Value) -> (u16, Value) {
    post(a, &format!("{base}/v1/deposit"), body, None).unwrap_or((0, Value::Null))
}

/// A counter of routerd's `/metrics` (`router_` + `name`).
fn metric(base: &str, name: &str) -> f64 {
    let text = agent()
        .get(format!("{base}/metrics"))
        .call()
        .ok()
        .and_then(|mut r| r.body_mut().read_to_string().ok())
        .unwrap_or_default();
    let key = format!("router_{name} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&key))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(f64::NAN)
}

/// Runs the drill: starts routerd with `start`, seeds `spec`'s facts and
/// devices, drives them for `spec.seconds`, kills routerd with SIGKILL,
/// checks the store with `open_store`, starts routerd again and checks
/// the deposits. Errors: routerd did not start or refused the setup.
pub fn run(
    spec: &LoadSpec,
    start: Start<'_>,
    open_store: OpenStore<'_>,
) -> Result<DrillReport, String> {
    let (mut child, base) = start()?;
    let spec = LoadSpec {
        base: base.clone(),
        ..spec.clone()
    };
    let (ids, _) = seed(&spec)?;
    std::thread::sleep(Duration::from_millis(1500)); // a tick refills the queues
    let devices: Vec<Device> = ids
        .into_iter()
        .map(|(id, secret)| Device {
            id,
            secret,
            held: None,
        })
        .collect();
    let threads = spec.threads.clamp(1, devices.len().max(1));
    let mut groups: Vec<Vec<Device>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, d) in devices.into_iter().enumerate() {
        groups[i % threads].push(d);
    }
    let (lefts, killed_at) = std::thread::scope(|scope| {
        let handles: Vec<_> = groups
            .into_iter()
            .filter(|g| !g.is_empty())
            .map(|g| {
                let base = base.clone();
                scope.spawn(move || drive(&base, g))
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(spec.seconds));
        let _ = child.kill();
        let _ = child.wait();
        let killed_at = Instant::now();
        let lefts: Vec<Left> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect();
        (lefts, killed_at)
    });
    let mut rep = DrillReport {
        devices: spec.devices,
        ..DrillReport::default()
    };
    check_store(&lefts, open_store, &mut rep)?;
    let (mut child, base) = start()?;
    rep.restart_s = killed_at.elapsed().as_secs_f64();
    rep.leases_restored = metric(&base, "leases_restored_total");
    after_restart(&base, &lefts, &mut rep);
    rep.deposits_after_restart = metric(&base, "deposits_total");
    let accepted = (rep.held_accepted + rep.cut_off_accepted) as f64;
    if rep.deposits_after_restart != accepted {
        rep.failures.push(format!(
            "routerd folded {} deposits after the restart, the drill saw {accepted} accepted",
            rep.deposits_after_restart
        ));
    }
    if !(rep.leases_restored >= 1.0) {
        rep.failures
            .push(format!("routerd restored {} leases", rep.leases_restored));
    }
    let _ = child.kill();
    let _ = child.wait();
    Ok(rep)
}

/// Counts what the load left and finds every acknowledged token in the store.
fn check_store(
    lefts: &[Left],
    open_store: OpenStore<'_>,
    rep: &mut DrillReport,
) -> Result<(), String> {
    let mut store = open_store().map_err(|e| format!("the store after the kill: {e}"))?;
    for l in lefts {
        rep.leases += l.leases;
        rep.cut_off += l.cut_off.len() as u64;
        rep.held += l.devices.iter().filter(|d| d.held.is_some()).count() as u64;
        for body in &l.acknowledged {
            rep.acknowledged += 1;
            let token = body["deposit_token"].as_str().unwrap_or("");
            match store.has_deposit(token) {
                Ok(true) => rep.acknowledged_in_store += 1,
                Ok(false) => rep
                    .failures
                    .push(format!("acknowledged deposit {token} lost")),
                Err(e) => return Err(format!("reading the store: {e}")),
            }
        }
    }
    Ok(())
}

/// Deposits every held item twice (accepted once, then the same answer),
/// every cut-off deposit once (accepted or `replayed`), and every
/// acknowledged deposit again (never accepted).
fn after_restart(base: &str, lefts: &[Left], rep: &mut DrillReport) {
    let a = agent();
    for l in lefts {
        for d in &l.devices {
            let Some((lid, it)) = &d.held else { continue };
            let body = deposit_body(d, lid, it);
            let first = deposit_after(&a, base, &body);
            if first.0 != 200 {
                rep.failures
                    .push(format!("held item refused after the restart: {}", first.1));
                continue;
            }
            rep.held_accepted += 1;
            let again = deposit_after(&a, base, &body);
            if again != first {
                rep.failures.push(format!(
                    "a held item's deposit sent again got {} {}, not its first answer",
                    again.0, again.1
                ));
            }
        }
        for body in &l.cut_off {
            match deposit_after(&a, base, body) {
                (200, _) => rep.cut_off_accepted += 1,
                (409, _) => rep.cut_off_replayed += 1,
                (s, v) => rep.failures.push(format!("a cut-off deposit got {s} {v}")),
            }
        }
        for body in &l.acknowledged {
            match deposit_after(&a, base, body) {
                (200, _) => {
                    rep.acknowledged_accepted_again += 1;
                    rep.failures.push(format!(
                        "acknowledged deposit {} accepted again",
                        body["deposit_token"]
                    ));
                }
                (_, v) => {
                    let kind = v["error"].as_str().unwrap_or("no answer").to_string();
                    *rep.acknowledged_refused.entry(kind).or_default() += 1;
                }
            }
        }
    }
}

/// Runs an operator's command with `sh -c` (a drill's server stop or
/// start).
///
/// Errors: it could not run, or it exited unsuccessfully (its status).
pub fn shell(cmd: &str) -> Result<(), String> {
    let s = std::process::Command::new("sh")
        .args(["-c", cmd])
        .status()
        .map_err(|e| e.to_string())?;
    if s.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} exited with {s}"))
    }
}

/// Ends a drill's program: prints `report` as JSON and `PASS`, or a
/// `FAIL: …` line for each of its `failures`, and exits 0 on a pass, 1 on
/// a failure or when the drill could not run (`Err`, printed to stderr).
pub fn conclude<R: Serialize>(report: Result<R, String>, failures: fn(&R) -> &Vec<String>) -> ! {
    match report {
        Ok(r) => {
            println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
            let failed = failures(&r);
            if failed.is_empty() {
                println!("PASS");
                std::process::exit(0);
            }
            for f in failed {
                println!("FAIL: {f}");
            }
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("drill failed: {e}");
            std::process::exit(1);
        }
    }
}
