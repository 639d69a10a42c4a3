//! The store outage drill: devices lease and deposit against a running
//! `routerd` on PostgreSQL; the PostgreSQL server is stopped under that
//! load, kept down for a while, and started again, routerd running
//! throughout. The drill checks what an operator relies on
//! (decision 0019, docs/router.md "The PostgreSQL connection"):
//!
//! - while the server is down routerd keeps answering, and every answer
//!   is a lease with no items (200) or a typed 503 `store_unavailable`:
//!   no other refusal, no request left without an answer;
//! - every deposit acknowledged before, during or after the outage is in
//!   the store afterwards;
//! - routerd serves again without a restart: a deposit is acknowledged
//!   within [`OutageSpec::recover_bound_s`] of the server's start.
//!
//! Used by the `outage_drill` example; `ci/pg-suite.sh` runs it last.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

use crate::drill::{OpenStore, Start};
use crate::load::{agent, post, seed, LoadSpec};

/// Runs an operator's command (stopping or starting the server).
pub type Command<'a> = &'a dyn Fn() -> Result<(), String>;

/// The drill's timing.
#[derive(Debug, Clone)]
pub struct OutageSpec {
    /// The load: devices, threads, targets, sources (its `seconds` unused).
    pub load: LoadSpec,
    /// Seconds of load before the server is stopped (0.5..=600).
    pub before_s: f64,
    /// Seconds the server stays down (0.5..=600).
    pub outage_s: f64,
    /// Most seconds from the server's start to routerd's first
    /// acknowledged deposit (0.5..=600).
    pub recover_bound_s: f64,
    /// Most seconds any request sent and answered while the server is
    /// unreachable may take, when given: routerd's own bounds on a store
    /// call (a stalled network never answers on its own).
    pub answer_bound_s: Option<f64>,
}

/// What the drill saw. It passes when [`OutageReport::failures`] is empty.
#[derive(Debug, Default, Serialize)]
pub struct OutageReport {
    /// Devices driven.
    pub devices: usize,
    /// Deposits acknowledged before the server was stopped.
    pub acknowledged_before: u64,
    /// Deposits acknowledged while the server was down (answered from
    /// nothing durable: must be 0).
    pub acknowledged_during: u64,
    /// Deposits acknowledged after the server was started again.
    pub acknowledged_after: u64,
    /// Of all acknowledged deposits, found in the store at the end (must
    /// be all).
    pub acknowledged_in_store: u64,
    /// Answers to requests sent and answered while the server was down,
    /// by `STATUS kind` (`200 empty` for a lease with no items,
    /// `transport` for a request that got no answer).
    pub answers_during: BTreeMap<String, u64>,
    /// The slowest answer to a request sent and answered while the server
    /// was down, seconds.
    pub slowest_during_s: f64,
    /// Seconds the server was down (from the stop command's return to the
    /// start command's return).
    pub outage_s: f64,
    /// Seconds from the start command's return to the first deposit
    /// acknowledged again (NaN when none was).
    pub recovered_s: f64,
    /// What failed, one line each; empty when the drill passed.
    pub failures: Vec<String>,
}

/// The phases, as the drive threads read them: before the stop, while
/// the server is down, while its start command runs, after it returned.
const BEFORE: u8 = 0;
const DOWN: u8 = 1;
const STARTING: u8 = 2;
const AFTER: u8 = 3;

/// What the drive threads share.
struct Shared {
    phase: AtomicU8,
    stop: AtomicBool,
    /// When the first deposit sent after the server's start was
    /// acknowledged.
    recovered: Mutex<Option<Instant>>,
}

/// What one drive thread saw.
#[derive(Default)]
struct Seen {
    /// Acknowledged deposit tokens: sent before the stop; sent and
    /// answered while down; the rest (after).
    acknowledged: [Vec<String>; 3],
    answers_during: BTreeMap<String, u64>,
    slowest_during_s: f64,
}

fn answer_kind(r: &Result<(u16, Value), String>, empty_lease: bool) -> String {
    match r {
        Ok((200, _)) if empty_lease => "200 empty".into(),
        Ok((status, body)) => format!("{status} {}", body["error"].as_str().unwrap_or("?")),
        Err(_) => "transport".into(),
    }
}

/// Records an answer to a request sent (phase, when) as `sent` and
/// answered in phase `answered`: only requests both sent and answered
/// while the server was down count as the outage's.
fn note(seen: &mut Seen, sent: (u8, Instant), answered: u8, kind: String) {
    if sent.0 == DOWN && answered == DOWN {
        *seen.answers_during.entry(kind).or_default() += 1;
        seen.slowest_during_s = seen.slowest_during_s.max(sent.1.elapsed().as_secs_f64());
    }
}

/// Drives `mine` until told to stop: lease up to two items, deposit each.
fn drive(base: &str, mine: &[(String, String)], shared: &Shared) -> Seen {
    let a = agent();
    let mut seen = Seen::default();
    let mut i = 0usize;
    while !shared.stop.load(Ordering::SeqCst) {
        let (id, secret) = &mine[i % mine.len()];
        i += 1;
        let sent = (shared.phase.load(Ordering::SeqCst), Instant::now());
        let body = json!({"device_id": id, "device_secret": secret, "max_items": 2});
        let r = post(&a, &format!("{base}/v1/lease"), &body, None);
        let items = match &r {
            Ok((200, l)) => l["items"].as_array().cloned().unwrap_or_default(),
            _ => Vec::new(),
        };
        let answered = shared.phase.load(Ordering::SeqCst);
        note(&mut seen, sent, answered, answer_kind(&r, items.is_empty()));
        if items.is_empty() {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let lease = r
            .as_ref()
            .map(|(_, l)| l["lease_id"].clone())
            .unwrap_or_default();
        for it in items {
            let token = it["deposit_token"].as_str().unwrap_or("").to_string();
            let body = json!({"device_id": id, "device_secret": secret, "lease_id": lease,
                "target": it["target"], "deposit_token": token, "receipt_revision": 0,
                "adapter_id": "html", "adapter_version": "1",
                "outcome": {"ok": true, "content_hash": "h", "latency_ms": 500.0}});
            let at = (shared.phase.load(Ordering::SeqCst), Instant::now());
            let r = post(&a, &format!("{base}/v1/deposit"), &body, None);
            let now = shared.phase.load(Ordering::SeqCst);
            note(&mut seen, at, now, answer_kind(&r, false));
            let sent = at.0;
            if let Ok((200, _)) = r {
                let slot = match (sent, now) {
                    (BEFORE, _) => 0,
                    (DOWN, DOWN) => 1,
                    _ => 2,
                };
                seen.acknowledged[slot].push(token);
                if sent >= STARTING && now == AFTER {
                    let mut rec = shared.recovered.lock().unwrap_or_else(|p| p.into_inner());
                    rec.get_or_insert_with(Instant::now);
                }
            }
        }
    }
    seen
}

/// Runs the drill: starts routerd with `start`, seeds the devices, drives
/// them for `before_s`, stops the server with `stop_server`, keeps driving
/// for `outage_s`, starts it with `start_server`, drives until a deposit
/// is acknowledged again (at most `recover_bound_s`) and one second more,
/// then stops routerd and checks every acknowledged deposit in the store
/// opened with `open_store`.
///
/// Errors: a spec out of range, routerd did not start or refused the
/// setup, or a server command failed (the drill cannot judge then).
pub fn run(
    spec: &OutageSpec,
    start: Start<'_>,
    stop_server: Command<'_>,
    start_server: Command<'_>,
    open_store: OpenStore<'_>,
) -> Result<OutageReport, String> {
    for (what, s) in [
        ("before_s", spec.before_s),
        ("outage_s", spec.outage_s),
        ("recover_bound_s", spec.recover_bound_s),
    ] {
        if !(s.is_finite() && (0.5..=600.0).contains(&s)) {
            return Err(format!("{what} must be in [0.5, 600], got {s}"));
        }
    }
    let (mut child, base) = start()?;
    let load = LoadSpec {
        base: base.clone(),
        ..spec.load.clone()
    };
    let result = drive_through_outage(spec, &load, stop_server, start_server);
    let _ = child.kill();
    let _ = child.wait();
    let (mut rep, seen) = result?;
    for s in &seen {
        rep.acknowledged_before += s.acknowledged[0].len() as u64;
        rep.acknowledged_during += s.acknowledged[1].len() as u64;
        rep.acknowledged_after += s.acknowledged[2].len() as u64;
        for (k, n) in &s.answers_during {
            *rep.answers_during.entry(k.clone()).or_default() += n;
        }
        rep.slowest_during_s = rep.slowest_during_s.max(s.slowest_during_s);
    }
    let tokens: Vec<&String> = seen
        .iter()
        .flat_map(|s| s.acknowledged.iter().flatten())
        .collect();
    let mut store = open_store().map_err(|e| format!("opening the store after the drill: {e}"))?;
    for t in &tokens {
        if matches!(store.has_deposit(t), Ok(true)) {
            rep.acknowledged_in_store += 1;
        }
    }
    judge(&mut rep, spec);
    Ok(rep)
}

type Driven = (OutageReport, Vec<Seen>);

fn drive_through_outage(
    spec: &OutageSpec,
    load: &LoadSpec,
    stop_server: Command<'_>,
    start_server: Command<'_>,
) -> Result<Driven, String> {
    let (ids, _) = seed(load)?;
    std::thread::sleep(Duration::from_millis(1500)); // a tick refills the queues
    let shared = Shared {
        phase: AtomicU8::new(BEFORE),
        stop: AtomicBool::new(false),
        recovered: Mutex::new(None),
    };
    let per = ids.len().div_ceil(load.threads.max(1)).max(1);
    let mut rep = OutageReport {
        devices: ids.len(),
        recovered_s: f64::NAN,
        ..OutageReport::default()
    };
    let seen = std::thread::scope(|scope| -> Result<Vec<Seen>, String> {
        let handles: Vec<_> = ids
            .chunks(per)
            .map(|mine| {
                let (base, shared) = (&load.base, &shared);
                scope.spawn(move || drive(base, mine, shared))
            })
            .collect();
        let outcome = outage(spec, &shared, stop_server, start_server, &mut rep);
        shared.stop.store(true, Ordering::SeqCst);
        let seen = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect();
        outcome.map(|()| seen)
    })?;
    Ok((rep, seen))
}

/// The outage itself, while the threads drive.
fn outage(
    spec: &OutageSpec,
    shared: &Shared,
    stop_server: Command<'_>,
    start_server: Command<'_>,
    rep: &mut OutageReport,
) -> Result<(), String> {
    std::thread::sleep(Duration::from_secs_f64(spec.before_s));
    stop_server().map_err(|e| format!("stopping the server: {e}"))?;
    let down = Instant::now();
    shared.phase.store(DOWN, Ordering::SeqCst);
    std::thread::sleep(Duration::from_secs_f64(spec.outage_s));
    shared.phase.store(STARTING, Ordering::SeqCst);
    start_server().map_err(|e| format!("starting the server: {e}"))?;
    let up = Instant::now();
    rep.outage_s = (up - down).as_secs_f64();
    shared.phase.store(AFTER, Ordering::SeqCst);
    let bound = Duration::from_secs_f64(spec.recover_bound_s);
    while up.elapsed() < bound {
        let rec = *shared.recovered.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = rec {
            rep.recovered_s = (at - up).as_secs_f64();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_secs(1));
    Ok(())
}

/// Fills in the counts and the failures.
fn judge(rep: &mut OutageReport, spec: &OutageSpec) {
    let mut failures = Vec::new();
    if rep.acknowledged_before == 0 {
        failures.push("no deposit was acknowledged before the outage".into());
    }
    if rep.acknowledged_during > 0 {
        failures.push(format!(
            "{} deposits were acknowledged while the server was down",
            rep.acknowledged_during
        ));
    }
    let total = rep.acknowledged_before + rep.acknowledged_during + rep.acknowledged_after;
    if rep.acknowledged_in_store != total {
        failures.push(format!(
            "{} of {total} acknowledged deposits are in the store",
            rep.acknowledged_in_store
        ));
    }
    for (kind, n) in &rep.answers_during {
        if kind != "200 empty" && kind != "503 store_unavailable" {
            failures.push(format!("{n} answers during the outage were {kind:?}"));
        }
    }
    if let Some(bound) = spec.answer_bound_s {
        if rep.slowest_during_s > bound {
            failures.push(format!(
                "an answer while the server was down took {:.1} s (bound {bound} s)",
                rep.slowest_during_s
            ));
        }
    }
    if !rep.answers_during.contains_key("503 store_unavailable") {
        failures.push("no request met the outage (no 503 store_unavailable while down)".into());
    }
    if !(rep.recovered_s <= spec.recover_bound_s) {
        failures.push(format!(
            "no deposit was acknowledged within {} s of the server's start",
            spec.recover_bound_s
        ));
    }
    rep.failures = failures;
}
