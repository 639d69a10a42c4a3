//! The failover drills: K `routerd` replicas over one PostgreSQL schema,
//! devices leasing and depositing through any of them, and one fault
//! under that load (decision 0020, docs/router.md "Replicas"):
//!
//! - [`Fault::Kill`]: the leader is killed with SIGKILL; a survivor must
//!   lead again, with a higher term;
//! - [`Fault::Cut`]: the leader's link to PostgreSQL is cut (it dials
//!   through a [`crate::netcut`] proxy that stops forwarding); it must stop
//!   serving on its own clock and answer 503 `no_leader`, the others must
//!   take the lead, and after the link heals it must follow them without
//!   a restart;
//! - [`Fault::Stop`]: the PostgreSQL server is stopped for a while and
//!   started again; every replica answers typed 503s meanwhile and the
//!   replicas lead and serve again without a restart.
//!
//! Over the whole run ([`ledger::Ledger::check`]): no deposit token or
//! first observation granted twice, no host over its politeness, every
//! acknowledged deposit in the store, every refusal typed; and a lease a
//! device held through the fault is deposited on afterwards at two
//! replicas, accepted once and answered the same twice.
//!
//! Used by the `failover_drill` example (`ci/pg-suite.sh`) and the
//! replicas' tests.

pub mod ledger;
pub mod replicas;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;
use serde_json::{json, Value};

use crate::load::{agent, post};
use crate::outage::Command;
use ledger::{facts, registration, Device, Load};
use replicas::Replicas;

/// The fault a drill injects.
pub enum Fault<'a> {
    /// SIGKILL of the leader.
    Kill,
    /// The leader's link to the store cut, then healed.
    Cut,
    /// The store's server stopped for `outage_s` seconds, then started.
    Stop {
        /// Seconds the server stays down (0.5..=600).
        outage_s: f64,
        /// Stops the server.
        stop: Command<'a>,
        /// Starts it again.
        start: Command<'a>,
    },
}

impl Fault<'_> {
    fn name(&self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::Cut => "cut",
            Fault::Stop { .. } => "stop",
        }
    }
}

/// A drill's setup.
#[derive(Debug, Clone)]
pub struct FailoverSpec {
    /// The `routerd` binary.
    pub routerd: PathBuf,
    /// The store (`postgres://…`, TLS keys and all).
    pub url: String,
    /// The schema the replicas share (created by the first).
    pub schema: String,
    /// Where the replicas' data directories go.
    pub data: PathBuf,
    /// Replicas (2..=9).
    pub replicas: usize,
    /// Devices driven (3..=1,000); the last holds a lease through the fault.
    pub devices: usize,
    /// Deposits acknowledged before the fault, and again after it (1..=100,000).
    pub work: usize,
    /// The replicas' `--lead-ttl-s` (1..=60).
    pub lead_ttl_s: f64,
}

/// What a drill saw. It passes when [`FailoverReport::failures`] is empty.
#[derive(Debug, Default, Serialize)]
pub struct FailoverReport {
    /// `kill`, `cut` or `stop`.
    pub fault: String,
    /// Replicas started.
    pub replicas: usize,
    /// Devices driven.
    pub devices: usize,
    /// The lead before the fault: replica and term.
    pub lead_before: (String, i64),
    /// The lead after it.
    pub lead_after: (String, i64),
    /// Seconds from the fault to the faulty leader (cut) or every replica
    /// (stop) no longer leading; NaN for a kill.
    pub stopped_s: f64,
    /// Seconds from the fault (kill, cut) or the server's start (stop) to
    /// every live replica agreeing on a lead again.
    pub lead_again_s: f64,
    /// Seconds from the heal to the cut replica following (cut only; NaN otherwise).
    pub rejoined_s: f64,
    /// Items granted over the run.
    pub grants: usize,
    /// Deposits acknowledged over the run (every one checked in the store).
    pub acknowledged: usize,
    /// Items of the lease held through the fault, accepted after it.
    pub held_accepted: usize,
    /// Refusals the devices met, by `STATUS kind` (`0 transport`: no answer).
    pub refusals: BTreeMap<String, u64>,
    /// What failed, one line each; empty when the drill passed.
    pub failures: Vec<String>,
}

/// Checks a spec's ranges.
fn check(spec: &FailoverSpec, fault: &Fault) -> Result<(), String> {
    let ok = (2..=9).contains(&spec.replicas)
        && (3..=1000).contains(&spec.devices)
        && (1..=100_000).contains(&spec.work)
        && spec.lead_ttl_s.is_finite()
        && (1.0..=60.0).contains(&spec.lead_ttl_s);
    if !ok {
        return Err("replicas 2..=9, devices 3..=1000, work 1..=100000, lead ttl [1, 60] s".into());
    }
    if let Fault::Stop { outage_s, .. } = fault {
        if !(outage_s.is_finite() && (0.5..=600.0).contains(outage_s)) {
            return Err(format!("outage {outage_s} s outside [0.5, 600]"));
        }
    }
    Ok(())
}

/// Runs one drill: starts the replicas (for a cut, the first through the
/// proxy and alone until it leads), seeds facts and devices, drives them,
/// injects `fault`, drives them again, and checks the run.
///
/// Errors: a replica did not start, the setup was refused, or an awaited
/// event did not come within [`ledger::GIVE_UP`] (the text says which).
pub fn run(spec: &FailoverSpec, fault: &Fault) -> Result<FailoverReport, String> {
    check(spec, fault)?;
    let mut rs = Replicas::start(spec, matches!(fault, Fault::Cut))?;
    let mut rep = FailoverReport {
        fault: fault.name().into(),
        replicas: spec.replicas,
        devices: spec.devices,
        stopped_s: f64::NAN,
        rejoined_s: f64::NAN,
        ..FailoverReport::default()
    };
    let (leader, term, name) = rs.agreed_lead(&rs.live())?;
    rep.lead_before = (name, term);
    let a = agent();
    let some_follower = rs.base((leader + 1) % spec.replicas);
    let (s, v) = rs.put_facts(&some_follower, &facts())?;
    if s != 200 {
        return Err(format!("facts refused: {s} {v}"));
    }
    let devices = register(&rs, spec.devices)?;
    let (held_dev, load_devs) = devices.split_last().ok_or("no devices")?;
    let held = held_lease(&a, &some_follower, held_dev)?;
    // The load goes through the replicas the fault spares.
    let spared: Vec<usize> = match fault {
        Fault::Kill | Fault::Cut => (0..spec.replicas).filter(|&i| i != leader).collect(),
        Fault::Stop { .. } => (0..spec.replicas).collect(),
    };
    let parts = load_devs
        .chunks(load_devs.len().div_ceil(2).max(1))
        .enumerate()
        .map(|(t, c)| {
            let entry = rs.base(spared[t % spared.len()]);
            let dep = rs.base(spared[(t + 1) % spared.len()]);
            (c.to_vec(), entry, dep)
        })
        .collect();
    let load = Load::start(parts, &rs.token);
    load.ledger
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .granted(&held_dev.0, &held);
    load.wait_acked(spec.work, "before the fault")?;
    let injected = inject(&mut rs, fault, leader, &load_devs[0], &mut rep);
    let after = load.acked() + spec.work;
    let worked = injected.and_then(|()| load.wait_acked(after, "after the fault"));
    let mut l = load.finish();
    worked?;
    let (_, term_after, name_after) = rs.agreed_lead(&rs.live())?;
    rep.lead_after = (name_after, term_after);
    if term_after <= term {
        rep.failures.push(format!(
            "term {term_after} after {term}: the lead did not move"
        ));
    }
    let live = rs.live();
    rep.held_accepted = deposit_held(
        &a,
        &rs.base(live[0]),
        &rs.base(live[live.len() - 1]),
        held_dev,
        &held,
        &mut l,
        &mut rep.failures,
    );
    let mut store = rs.open_store()?;
    rep.failures.extend(l.check(store.as_mut()));
    rep.grants = l.grants.len();
    rep.acknowledged = l.acked.len();
    rep.refusals = l.refusals;
    Ok(rep)
}

/// Registers `n` devices, device i through replica i mod K, under ids of
/// this run (a schema used before keeps its devices).
fn register(rs: &Replicas, n: usize) -> Result<Vec<Device>, String> {
    let a = agent();
    let live = rs.live();
    let run = &crate::ids::token()[..8];
    (0..n)
        .map(|i| {
            let id = format!("fd-{run}-{i}");
            let url = format!("{}/v1/register", rs.base(live[i % live.len()]));
            match post(&a, &url, &registration(&id, &rs.token, None), None)? {
                (200, v) => Ok((id, v["device_secret"].as_str().unwrap_or("").to_string())),
                (s, v) => Err(format!("registration refused: {s} {v}")),
            }
        })
        .collect()
}

/// A lease with items for `d`, long-polled through `base`.
fn held_lease(a: &ureq::Agent, base: &str, d: &Device) -> Result<Value, String> {
    let body = json!({"device_id": d.0, "device_secret": d.1, "max_items": 2, "wait_s": 20.0});
    match post(a, &format!("{base}/v1/lease"), &body, None)? {
        (200, v) if v["items"].as_array().is_some_and(|i| !i.is_empty()) => Ok(v),
        (s, v) => Err(format!("the held lease got no items: {s} {v}")),
    }
}

/// Deposits every item of `held` at `first`, then again at `second`: the
/// first must be acknowledged and the retry answered the same. Returns
/// the items accepted.
fn deposit_held(
    a: &ureq::Agent,
    first: &str,
    second: &str,
    d: &Device,
    held: &Value,
    l: &mut ledger::Ledger,
    failures: &mut Vec<String>,
) -> usize {
    let lease_id = held["lease_id"].as_str().unwrap_or("");
    let mut accepted = 0;
    for it in held["items"].as_array().into_iter().flatten() {
        let dep = ledger::deposit_body(d, lease_id, it);
        let once = post(a, &format!("{first}/v1/deposit"), &dep, None);
        let again = post(a, &format!("{second}/v1/deposit"), &dep, None);
        match (once, again) {
            (Ok((200, v)), Ok((200, w))) if v == w => {
                accepted += 1;
                let token = it["deposit_token"].as_str().unwrap_or("").to_string();
                l.acked.insert(token, v["seq"].as_u64().unwrap_or(0));
            }
            (x, y) => failures.push(format!("held item: deposit {x:?}, retried {y:?}")),
        }
    }
    accepted
}

/// Injects `fault` on the lead held by replica `leader` and waits for its
/// events, filling the report's times.
fn inject(
    rs: &mut Replicas,
    fault: &Fault,
    leader: usize,
    probe: &Device,
    rep: &mut FailoverReport,
) -> Result<(), String> {
    let t0 = Instant::now();
    match fault {
        Fault::Kill => {
            rs.kill(leader);
            rs.agreed_lead(&rs.live())?;
            rep.lead_again_s = t0.elapsed().as_secs_f64();
        }
        Fault::Cut => {
            rs.cut(true);
            rs.wait_not_leading(&[leader])?;
            rep.stopped_s = t0.elapsed().as_secs_f64();
            match rs.lease_probe(leader, probe) {
                (503, kind) if kind == "no_leader" => {}
                other => rep.failures.push(format!(
                    "the cut leader answered {other:?}, not 503 no_leader"
                )),
            }
            let others: Vec<usize> = rs.live().into_iter().filter(|&i| i != leader).collect();
            rs.agreed_lead(&others)?;
            rep.lead_again_s = t0.elapsed().as_secs_f64();
            rs.cut(false);
            let healed = Instant::now();
            rs.agreed_lead(&rs.live())?;
            rep.rejoined_s = healed.elapsed().as_secs_f64();
        }
        Fault::Stop {
            outage_s,
            stop,
            start,
        } => {
            stop()?;
            let down = Instant::now();
            rs.wait_not_leading(&rs.live())?;
            rep.stopped_s = t0.elapsed().as_secs_f64();
            while down.elapsed().as_secs_f64() < *outage_s {
                for i in rs.live() {
                    match rs.lease_probe(i, probe) {
                        (503, _) | (0, _) => {}
                        other => rep.failures.push(format!(
                            "replica {i} answered {other:?} while the store was down"
                        )),
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            start()?;
            let up = Instant::now();
            rs.agreed_lead(&rs.live())?;
            rep.lead_again_s = up.elapsed().as_secs_f64();
        }
    }
    Ok(())
}
