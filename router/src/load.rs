//! A bounded load generator for a running `routerd`: N registered devices
//! driven by T client threads for a fixed time, each lease followed by the
//! deposits of its items, and one more thread reading `/metrics` every
//! 50 ms as a monitor would. Reports leases/s and the latency percentiles
//! of leases and of `/metrics`. Used by the `lease_load` example and the
//! lab's `route load`.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// Base URL, e.g. `http://127.0.0.1:8080`.
    pub base: String,
    /// Operator key (to seed the facts).
    pub operator_key: String,
    /// Registration token.
    pub registration_token: String,
    /// Devices to register (1..=100,000).
    pub devices: usize,
    /// Client threads (1..=256).
    pub threads: usize,
    /// How long to drive, seconds (0.1..=3,600).
    pub seconds: f64,
    /// Targets to seed.
    pub targets: usize,
    /// The routerd process and data directory to measure after the setup
    /// and at the end (resident set, bytes on disk), if any.
    pub watch: Option<(u32, std::path::PathBuf)>,
}

/// A process's resident set in KiB (`VmRSS` of `/proc/PID/status`), 0
/// where it cannot be read.
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// Bytes of the files directly in `dir` (the store, its WAL, the event
/// log), 0 where it cannot be read.
pub fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Measured figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LoadReport {
    /// Devices registered.
    pub devices: usize,
    /// Client threads.
    pub threads: usize,
    /// Seconds driven.
    pub seconds: f64,
    /// Leases answered 200.
    pub leases: u64,
    /// Leases per second.
    pub leases_per_s: f64,
    /// Items granted.
    pub items: u64,
    /// Deposits acknowledged.
    pub deposits: u64,
    /// Requests refused (4xx/5xx) or failed.
    pub errors: u64,
    /// Lease latency percentiles, microseconds: p50, p90, p99, max.
    pub lease_us: [u64; 4],
    /// `/metrics` reads during the run.
    pub metrics_reads: u64,
    /// `/metrics` latency percentiles, microseconds: p50, p90, p99, max.
    pub metrics_us: [u64; 4],
    /// routerd's resident set after the setup and at the end, KiB (with
    /// [`LoadSpec::watch`]).
    pub rss_kib: [u64; 2],
    /// Bytes in routerd's data directory after the setup and at the end.
    pub store_bytes: [u64; 2],
}

/// p50, p90, p99 and max of `lat` (sorted in place), 0s when empty.
fn percentiles(lat: &mut [u64]) -> [u64; 4] {
    lat.sort_unstable();
    let pct = |p: f64| -> u64 {
        if lat.is_empty() {
            0
        } else {
            lat[((lat.len() as f64 - 1.0) * p).round() as usize]
        }
    };
    [
        pct(0.5),
        pct(0.9),
        pct(0.99),
        lat.last().copied().unwrap_or(0),
    ]
}

/// Reads `/metrics` every 50 ms until `deadline`; returns each read's
/// latency in microseconds (failed reads are left out).
fn probe_metrics(base: &str, deadline: Instant) -> Vec<u64> {
    let a = agent();
    let mut lat = Vec::new();
    while Instant::now() < deadline {
        let t0 = Instant::now();
        let ok = a
            .get(format!("{base}/metrics"))
            .call()
            .ok()
            .and_then(|mut r| r.body_mut().read_to_string().ok())
            .is_some();
        if ok {
            lat.push(t0.elapsed().as_micros() as u64);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    lat
}

/// Starts the `routerd` binary at `routerd` on a free loopback port with
/// data in `data`, the given operator key and registration token and
/// `extra` arguments, and waits for its first line. Returns the child and
/// its base URL (`http://127.0.0.1:PORT`). The caller kills the child.
/// Errors: the binary cannot start, or its first line is not the listening line.
pub fn spawn_routerd(
    routerd: &std::path::Path,
    data: &std::path::Path,
    operator_key: &str,
    registration_token: &str,
    extra: &[&str],
) -> Result<(std::process::Child, String), String> {
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new(routerd)
        .args(["--listen", "127.0.0.1:0", "--operator-key", operator_key])
        .args(["--registration-token", registration_token])
        // Every load device registers from loopback, at once.
        .args(["--registration-address-rate", "100000,1000"])
        .arg("--data")
        .arg(data)
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", routerd.display()))?;
    let mut line = String::new();
    let read = match child.stdout.take() {
        Some(out) => BufReader::new(out)
            .read_line(&mut line)
            .map_err(|e| e.to_string()),
        None => Err("no standard output".into()),
    };
    match (read, line.trim().strip_prefix("routerd listening on ")) {
        (Ok(_), Some(base)) => Ok((child, base.to_string())),
        (r, _) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(format!(
                "routerd did not start: its first line was {:?} ({})",
                line.trim(),
                r.err().unwrap_or_default()
            ))
        }
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

fn post(
    agent: &ureq::Agent,
    url: &str,
    body: &Value,
    key: Option<&str>,
) -> Result<(u16, Value), String> {
    let mut r = agent.post(url).header("content-type", "application/json");
    if let Some(k) = key {
        r = r.header("x-operator-key", k);
    }
    let mut resp = r.send(body.to_string()).map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let text = resp
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
}

/// Declares the load's sources and targets and registers its devices:
/// their ids and secrets.
///
/// Errors: routerd refused the facts or a registration.
fn seed(spec: &LoadSpec) -> Result<Vec<(String, String)>, String> {
    let a = agent();
    let targets: Vec<Value> = (0..spec.targets)
        .map(|i| json!({"target": format!("load-{i}"), "source": format!("src-{}", i % 50)}))
        .collect();
    let sources: Vec<Value> = (0..50)
        .map(|i| json!({"source": format!("src-{i}"), "host": format!("host-{i}.example"), "binding": "html", "bucket": [1e6, 1e6], "change_timescale_s": 3600.0}))
        .collect();
    let facts = json!({"sources": sources, "targets": targets});
    let mut resp = a
        .put(format!("{}/v1/facts", spec.base))
        .header("content-type", "application/json")
        .header("x-operator-key", &spec.operator_key)
        .send(facts.to_string())
        .map_err(|e| e.to_string())?;
    if resp.status().as_u16() != 200 {
        return Err(format!(
            "facts refused: {}",
            resp.body_mut().read_to_string().unwrap_or_default()
        ));
    }
    let archetypes = ["browser", "desktop", "container_render", "container_plain"];
    let mut devices = Vec::with_capacity(spec.devices);
    for i in 0..spec.devices {
        let id = format!("load-dev-{i}");
        let body = json!({"device_id": id, "archetype": archetypes[i % 4], "adapter_version": "1", "registration_token": spec.registration_token});
        let (s, v) = post(&a, &format!("{}/v1/register", spec.base), &body, None)?;
        if s != 200 {
            return Err(format!("registration refused: {v}"));
        }
        devices.push((id, v["device_secret"].as_str().unwrap_or("").to_string()));
    }
    Ok(devices)
}

/// One load thread: leases for its devices in turn until `deadline`,
/// depositing every item granted; returns the lease latencies (µs), the
/// items, the deposits acknowledged and the errors.
fn drive(mine: &[(String, String)], base: &str, deadline: Instant) -> (Vec<u64>, u64, u64, u64) {
    let a = agent();
    let (mut lat, mut items, mut deps, mut errs) = (Vec::new(), 0u64, 0u64, 0u64);
    let mut i = 0usize;
    while Instant::now() < deadline {
        let (id, secret) = &mine[i % mine.len()];
        i += 1;
        let t0 = Instant::now();
        let r = post(
            &a,
            &format!("{base}/v1/lease"),
            &json!({"device_id": id, "device_secret": secret, "max_items": 2}),
            None,
        );
        let us = t0.elapsed().as_micros() as u64;
        let Ok((200, l)) = r else {
            errs += 1;
            continue;
        };
        lat.push(us);
        for it in l["items"].as_array().cloned().unwrap_or_default() {
            items += 1;
            let body = json!({"device_id": id, "device_secret": secret, "lease_id": l["lease_id"], "target": it["target"], "deposit_token": it["deposit_token"], "receipt_revision": 0, "adapter_id": "html", "adapter_version": "1", "outcome": {"ok": true, "content_hash": "h", "latency_ms": 500.0}});
            match post(&a, &format!("{base}/v1/deposit"), &body, None) {
                Ok((200, _)) => deps += 1,
                _ => errs += 1,
            }
        }
    }
    (lat, items, deps, errs)
}

/// Registers the devices, seeds the targets, drives the load. Errors: a
/// spec out of range, or routerd refusing the setup.
pub fn run(spec: &LoadSpec) -> Result<LoadReport, String> {
    if !(1..=100_000).contains(&spec.devices) || !(1..=256).contains(&spec.threads) {
        return Err("devices must be in 1..=100000 and threads in 1..=256".into());
    }
    if !(spec.seconds.is_finite() && (0.1..=3600.0).contains(&spec.seconds)) {
        return Err("seconds must be in [0.1, 3600]".into());
    }
    let devices = seed(spec)?;
    // Let one tick refill the queues.
    std::thread::sleep(Duration::from_millis(1500));
    let sample = || {
        spec.watch
            .as_ref()
            .map_or((0, 0), |(pid, dir)| (rss_kib(*pid), dir_bytes(dir)))
    };
    let at_start = sample();
    let deadline = Instant::now() + Duration::from_secs_f64(spec.seconds);
    let chunk = devices.len().div_ceil(spec.threads);
    let (results, mut metrics_lat) = std::thread::scope(|scope| {
        let probe = scope.spawn(|| probe_metrics(&spec.base, deadline));
        let handles: Vec<_> = devices
            .chunks(chunk)
            .map(|mine| {
                let base = spec.base.clone();
                scope.spawn(move || drive(mine, &base, deadline))
            })
            .collect();
        let results: Vec<(Vec<u64>, u64, u64, u64)> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect();
        (results, probe.join().unwrap_or_default())
    });
    let at_end = sample();
    let mut lat: Vec<u64> = results.iter().flat_map(|r| r.0.iter().copied()).collect();
    let leases = lat.len() as u64;
    Ok(LoadReport {
        devices: spec.devices,
        threads: spec.threads,
        seconds: spec.seconds,
        leases,
        leases_per_s: leases as f64 / spec.seconds,
        items: results.iter().map(|r| r.1).sum(),
        deposits: results.iter().map(|r| r.2).sum(),
        errors: results.iter().map(|r| r.3).sum(),
        lease_us: percentiles(&mut lat),
        metrics_reads: metrics_lat.len() as u64,
        metrics_us: percentiles(&mut metrics_lat),
        rss_kib: [at_start.0, at_end.0],
        store_bytes: [at_start.1, at_end.1],
    })
}
