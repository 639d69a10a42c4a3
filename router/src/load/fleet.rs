//! The load's devices as a crawling fleet runs them, instead of client
//! threads asking as fast as answers come: every device is a task of its
//! own that asks for a lease with a long poll (`wait_s`), works each item
//! it is granted for the device's latency, deposits it, and asks again;
//! a refusal with `Retry-After` (429 `rate_limited`, 503) is waited out
//! before the device sends again, as a well-behaved device does
//! (docs/router.md "Threat model", the per-device budget), and after no
//! answer at all (a connection refused or reset) it backs off
//! exponentially with jitter, from 1 s to 30 s. Each device
//! has its own HTTP/1.1 connection, kept alive between its requests;
//! nothing is asked for, held or worked past the run's end, and an answer
//! is waited for at most 5 s past it.
//!
//! Latency per item is drawn log-normal around the routing lab's world:
//! medians 4.0 s (browser), 3.0 s (desktop), 5.0 s (rendering container)
//! and 1.5 s (plain container), each ln-latency with σ 0.62
//! (`route-lab/src/archetype.rs` and `world.rs`: the per-archetype mean,
//! the per-source spread 0.3 and 0.2, the per-attempt jitter 0.5),
//! scaled by [`FleetSpec::latency_scale`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use serde_json::{json, Value};

use super::measure::Pick;
use super::Driven;

/// How the fleet's devices behave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FleetSpec {
    /// Longest hold of a lease asked for, seconds (the API's `wait_s`,
    /// 0..=30).
    pub wait_s: f64,
    /// Items asked for per lease (1..=64).
    pub max_items: u32,
    /// The world's latencies multiplied by this (0: items are deposited
    /// at once), 0..=100.
    pub latency_scale: f64,
}

impl Default for FleetSpec {
    fn default() -> Self {
        FleetSpec {
            wait_s: 20.0,
            max_items: 2,
            latency_scale: 1.0,
        }
    }
}

/// Median latency per item of the load's archetypes ([`super::LOAD_ARCHETYPES`]
/// order), seconds: the routing lab's world (see the module).
pub const MEDIAN_LATENCY_S: [f64; 4] = [4.0, 3.0, 5.0, 1.5];

/// σ of an item's ln-latency (see the module).
pub const LN_LATENCY_SIGMA: f64 = 0.62;

type Http = Client<HttpConnector, Body>;

/// How long after the run's end an answer is still waited for.
const GRACE: Duration = Duration::from_secs(5);

/// One device's client: its own connection, kept alive, no Nagle delay
/// (a fleet's devices do not share connections).
fn client() -> Http {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_max_idle_per_host(1)
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector)
}

/// POSTs JSON; (status, body as JSON or `null`, `Retry-After` seconds).
/// Errors: no answer, or none by `give_up`.
async fn post(
    http: &Http,
    url: &str,
    body: &Value,
    give_up: Instant,
) -> Result<(u16, Value, f64), String> {
    let req = hyper::Request::post(url)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .map_err(|e| e.to_string())?;
    let resp = tokio::time::timeout_at(give_up.into(), http.request(req))
        .await
        .map_err(|_| "no answer in time".to_string())?
        .map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let retry = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    let bytes = tokio::time::timeout_at(
        give_up.into(),
        axum::body::to_bytes(Body::new(resp.into_body()), 1 << 20),
    )
    .await
    .map_err(|_| "no answer in time".to_string())?
    .map_err(|e| e.to_string())?;
    Ok((
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        retry,
    ))
}

/// What answered, for the tally's refusals.
fn kind(r: &Result<(u16, Value, f64), String>) -> String {
    match r {
        Ok((s, v, _)) => format!("{s} {}", v["error"].as_str().unwrap_or("?")),
        Err(_) => "transport".into(),
    }
}

/// Longest wait after failed connections, seconds.
const MAX_TRANSPORT_BACKOFF_S: f64 = 30.0;

/// The wait a refusal asks for: its `Retry-After` (header or body), at
/// least 0.1 s, at most the time left. After no answer at all (the
/// `failures`-th in a row: a connection refused or reset), a device backs
/// off as a well-behaved client does, exponentially with jitter: 1 s
/// doubled per failure up to [`MAX_TRANSPORT_BACKOFF_S`], times a factor
/// in [0.5, 1) from `jitter` ∈ [0, 1), so a fleet turned away at once
/// does not come back at once.
fn backoff(
    r: &Result<(u16, Value, f64), String>,
    (failures, jitter): (u32, f64),
    left: Duration,
) -> Duration {
    let s = match r {
        Ok((_, v, h)) => v["retry_after_s"].as_f64().unwrap_or(0.0).max(*h),
        Err(_) => {
            let doubled = 2f64.powi(failures.clamp(1, 16) as i32 - 1);
            doubled.min(MAX_TRANSPORT_BACKOFF_S) * (0.5 + 0.5 * jitter.clamp(0.0, 1.0))
        }
    };
    Duration::from_secs_f64(s.clamp(0.1, 3600.0)).min(left)
}

/// One device until `deadline`: long-polls for work, works and deposits
/// each item, waits out refusals.
async fn device(
    http: Http,
    (base, token): (Arc<str>, Arc<str>),
    (index, id, secret): (usize, String, String),
    spec: FleetSpec,
    deadline: Instant,
) -> Driven {
    let archetype = index % 4;
    let mut t = Driven::default();
    let mut rng = Pick::new(
        id.bytes()
            .fold(archetype as u64, |h, b| h.rotate_left(5) ^ b as u64),
    );
    let mut failures = 0u32;
    let lease_url = format!("{base}/v1/lease");
    let deposit_url = format!("{base}/v1/deposit");
    // Nothing is asked for, held or worked past the deadline: a poll waits
    // at most the time left, and an item whose work would end after it is
    // dropped with the rest of its lease.
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let wait = spec.wait_s.min(left.as_secs_f64()).max(0.0);
        let lease_body = json!({"device_id": id, "device_secret": secret,
            "max_items": spec.max_items, "wait_s": wait});
        let t0 = Instant::now();
        let r = post(&http, &lease_url, &lease_body, deadline + GRACE).await;
        failures = if r.is_err() { failures + 1 } else { 0 };
        let l = match &r {
            Ok((200, l, _)) => l,
            _ => {
                *t.errors.entry(kind(&r)).or_default() += 1;
                if let Ok((status, body, _)) = &r {
                    if super::lapsed(*status, body) {
                        // Not live: register again, with the secret kept.
                        let again = super::registration_body(index, &token, Some(&secret));
                        let url = format!("{base}/v1/register");
                        match post(&http, &url, &again, deadline + GRACE).await {
                            Ok((200, _, _)) => t.registered_again += 1,
                            r => *t.errors.entry(kind(&r)).or_default() += 1,
                        }
                        continue;
                    }
                }
                tokio::time::sleep(backoff(&r, (failures, rng.unit()), left)).await;
                continue;
            }
        };
        let items = l["items"].as_array().cloned().unwrap_or_default();
        if items.is_empty() {
            t.empty += 1;
            let hint = l["retry_after_s"].as_f64().unwrap_or(0.0);
            tokio::time::sleep(Duration::from_secs_f64(hint.clamp(0.0, 3600.0)).min(left)).await;
            continue;
        }
        t.leases.push(t0.elapsed().as_micros() as u64);
        for it in items {
            t.items += 1;
            let work = MEDIAN_LATENCY_S[archetype] * (LN_LATENCY_SIGMA * rng.normal()).exp();
            let work_for = Duration::from_secs_f64(work * spec.latency_scale);
            if Instant::now() + work_for >= deadline {
                break;
            }
            tokio::time::sleep(work_for).await;
            let body = json!({"device_id": id, "device_secret": secret, "lease_id": l["lease_id"],
                "target": it["target"], "deposit_token": it["deposit_token"], "receipt_revision": 0,
                "adapter_id": "html", "adapter_version": "1",
                "outcome": {"ok": true, "content_hash": "h", "latency_ms": work * 1000.0}});
            // A deposit refused for a moment (its queue full, the budget)
            // is sent again after the wait it asks for, until the run ends.
            loop {
                let t0 = Instant::now();
                let r = post(&http, &deposit_url, &body, deadline + GRACE).await;
                match &r {
                    Ok((200, _, _)) => {
                        t.deposits.push(t0.elapsed().as_micros() as u64);
                        t.acked
                            .push(it["deposit_token"].as_str().unwrap_or("").to_string());
                    }
                    Ok((429 | 503, _, _)) => {
                        *t.errors.entry(kind(&r)).or_default() += 1;
                        if let Some(left) = deadline.checked_duration_since(Instant::now()) {
                            tokio::time::sleep(backoff(&r, (0, rng.unit()), left)).await;
                            continue;
                        }
                    }
                    _ => *t.errors.entry(kind(&r)).or_default() += 1,
                }
                break;
            }
        }
    }
    t
}

/// Runs every device of `devices` (id, secret; archetype `i % 4`) against
/// `base` until `deadline` on a runtime of `threads` workers (a device
/// told it is not live registers again with `token`); their tallies.
/// Errors: the runtime cannot start.
pub(super) fn run_fleet(
    (base, token): (&str, &str),
    devices: &[(String, String)],
    spec: FleetSpec,
    threads: usize,
    deadline: Instant,
) -> Result<Vec<Driven>, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build()
        .map_err(|e| format!("the fleet's runtime: {e}"))?;
    let (base, token): (Arc<str>, Arc<str>) = (Arc::from(base), Arc::from(token));
    rt.block_on(async move {
        let tasks: Vec<_> = devices
            .iter()
            .enumerate()
            .map(|(i, (id, secret))| {
                tokio::spawn(device(
                    client(),
                    (base.clone(), token.clone()),
                    (i, id.clone(), secret.clone()),
                    spec,
                    deadline,
                ))
            })
            .collect();
        let mut out = Vec::with_capacity(tasks.len());
        for t in tasks {
            out.push(t.await.unwrap_or_default());
        }
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latency_draw_has_the_worlds_median_and_spread() {
        let mut rng = Pick::new(12345);
        let mut ln: Vec<f64> = (0..20_000)
            .map(|_| LN_LATENCY_SIGMA * rng.normal())
            .collect();
        ln.sort_by(|a, b| a.total_cmp(b));
        let median = ln[ln.len() / 2];
        let mean = ln.iter().sum::<f64>() / ln.len() as f64;
        let sd = (ln.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / ln.len() as f64).sqrt();
        assert!(median.abs() < 0.03, "median ln-factor {median}");
        assert!((sd - LN_LATENCY_SIGMA).abs() < 0.02, "σ {sd}");
    }

    #[test]
    fn a_refusal_is_waited_out_for_what_it_asks_within_the_time_left() {
        let left = Duration::from_secs(10);
        let r: Result<(u16, Value, f64), String> = Ok((
            429,
            json!({"error": "rate_limited", "retry_after_s": 0.5}),
            0.0,
        ));
        assert_eq!(backoff(&r, (0, 0.9), left), Duration::from_millis(500));
        // The header counts where it asks for more.
        let r = Ok((503, json!({"error": "overloaded"}), 2.0));
        assert_eq!(backoff(&r, (0, 0.9), left), Duration::from_secs(2));
        // Never a spin, never past the run's end.
        let r = Ok((429, json!({"retry_after_s": 0.0}), 0.0));
        assert_eq!(backoff(&r, (0, 0.9), left), Duration::from_millis(100));
        let r = Ok((503, json!({"retry_after_s": 60.0}), 0.0));
        assert_eq!(backoff(&r, (0, 0.9), left), left);
        assert_eq!(kind(&r), "503 ?");
        assert_eq!(kind(&Err("reset".into())), "transport");
    }

    #[test]
    fn no_answer_backs_off_doubling_with_jitter_up_to_its_cap() {
        let left = Duration::from_secs(3600);
        let r: Result<(u16, Value, f64), String> = Err("refused".into());
        let secs = |n: u32, j: f64| backoff(&r, (n, j), left).as_secs_f64();
        // 1, 2, 4, 8, 16 s, then the 30 s cap; each between half and all.
        for (n, full) in [
            (1, 1.0),
            (2, 2.0),
            (3, 4.0),
            (4, 8.0),
            (5, 16.0),
            (6, 30.0),
            (40, 30.0),
        ] {
            assert_eq!(secs(n, 0.0), full / 2.0, "failure {n}, least");
            assert!(
                secs(n, 0.999) < full && secs(n, 0.999) > full * 0.99,
                "failure {n}, most"
            );
        }
        // Never past the run's end.
        assert_eq!(
            backoff(&r, (6, 0.5), Duration::from_secs(3)),
            Duration::from_secs(3)
        );
    }
}
