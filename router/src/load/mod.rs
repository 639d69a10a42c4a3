//! A bounded load generator for a running `routerd`: N registered devices
//! driven by T client threads for a fixed time, each lease followed by the
//! deposits of its items, and one more thread reading `/metrics` every
//! 50 ms as a monitor would. Reports leases/s and the latency percentiles
//! of leases and of `/metrics`. Used by the `lease_load` example and the
//! lab's `route load`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

pub mod fleet;
mod measure;
mod population;
mod seed;
pub use fleet::FleetSpec;
pub use measure::{agent, check_durable, cpu_s, dir_bytes, group_cpu_s, rss_kib};
use measure::{percentiles, probe_field, probe_metrics, quantile, MetricsProbe, Pick};
pub use population::{
    lapsed, population_facts, population_facts_in_batches, register_in_process, registration_body,
    success_deposit, FACTS_BATCH, LOAD_ARCHETYPES,
};
pub use seed::{resume, seed};

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
    /// Targets to seed, spread over [`LoadSpec::sources`] round-robin.
    pub targets: usize,
    /// Sources (hosts) the targets are spread over (1..=100,000; the
    /// example's default is 50).
    pub sources: usize,
    /// The routerd process and data directory to measure after the setup
    /// and at the end (resident set, bytes on disk), if any.
    pub watch: Option<(u32, std::path::PathBuf)>,
    /// More base URLs of the same router (its other replicas): each
    /// lease, deposit and field read then goes to one of [`LoadSpec::base`]
    /// and these, at random, and a probe reads `GET /v1/field` every
    /// 50 ms to measure how far the field lags the acknowledged deposits.
    /// Empty: everything goes to `base`.
    pub spread: Vec<String>,
    /// Processes whose CPU time over the driven window is reported, one
    /// figure each ([`LoadReport::cpu_s`]): other replicas, the store's
    /// server.
    pub cpu_of: Vec<u32>,
    /// Control groups (their directories) whose CPU time over the driven
    /// window is reported, one figure each ([`LoadReport::group_cpu_s`]):
    /// a store's server with all its backends, put in a group of its own.
    pub cpu_groups: Vec<std::path::PathBuf>,
    /// `Some`: the devices behave as a fleet's do ([`fleet`]: one task
    /// each, long polls, the world's latency per item, refusals waited
    /// out) on a runtime of [`LoadSpec::threads`] workers, instead of
    /// client threads asking as fast as answers come.
    pub fleet: Option<FleetSpec>,
}

/// Measured figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LoadReport {
    /// Devices registered.
    pub devices: usize,
    /// Seconds the registration of every device took (one client, one
    /// request at a time, after the facts were seeded).
    pub registration_s: f64,
    /// Registrations per second over that time.
    pub registrations_per_s: f64,
    /// Client threads (with [`LoadSpec::fleet`], the runtime's workers).
    pub threads: usize,
    /// Leases answered empty (counted in fleet mode, where they are left
    /// out of `leases` and its latencies: an empty answer was held).
    pub empty_leases: u64,
    /// Whether the devices behaved as a fleet's ([`LoadSpec::fleet`]).
    pub fleet: bool,
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
    /// Registrations sent again during the run by devices told `404
    /// unknown_device` (their liveness lapsed, as it does when registering
    /// the population takes longer than the lease TTL), and answered 200.
    pub registered_again: u64,
    /// Deposits acknowledged per second.
    pub deposits_per_s: f64,
    /// Requests refused (4xx/5xx) or failed.
    pub errors: u64,
    /// `errors` by what answered: `STATUS kind` for a refusal (the error
    /// body's `error`), `transport` for a request that got no answer.
    pub errors_by_kind: std::collections::BTreeMap<String, u64>,
    /// Lease latency percentiles, microseconds: p50, p90, p99, max.
    pub lease_us: [u64; 4],
    /// Lease latency p99.9, microseconds.
    pub lease_p999_us: u64,
    /// Deposit latency percentiles (acknowledged deposits), microseconds:
    /// p50, p90, p99, max.
    pub deposit_us: [u64; 4],
    /// Deposit latency p99.9, microseconds.
    pub deposit_p999_us: u64,
    /// `/metrics` reads during the run.
    pub metrics_reads: u64,
    /// `/metrics` latency percentiles, microseconds: p50, p90, p99, max.
    pub metrics_us: [u64; 4],
    /// routerd's resident set after the setup and at the end, KiB (with
    /// [`LoadSpec::watch`]).
    pub rss_kib: [u64; 2],
    /// Bytes in routerd's data directory after the setup and at the end.
    pub store_bytes: [u64; 2],
    /// CPU seconds routerd spent while the load ran (with
    /// [`LoadSpec::watch`]; divided by `seconds`, the cores it used).
    pub routerd_cpu_s: f64,
    /// CPU seconds the load generator itself spent while the load ran
    /// (every thread of this process): divided by `seconds`, the cores it
    /// used, so a report says whether the client or routerd bounded the
    /// rate (the small box gives the client one core of its own).
    #[serde(default)]
    pub load_cpu_s: f64,
    /// The largest snapshot row routerd wrote during the run, bytes
    /// (`router_snapshot_bytes` of `/metrics`; 0 where none was read).
    pub snapshot_bytes: u64,
    /// routerd's longest store wait and hold by op, µs (`wait OP`, `hold OP`).
    #[serde(default)]
    pub store_max_us: std::collections::BTreeMap<String, u64>,
    /// The most connections open and the lowest connection cap routerd's
    /// `/metrics` showed during the run (`None` where it gives neither).
    #[serde(default)]
    pub connections: Option<(u64, u64)>,
    /// With [`LoadSpec::spread`]: field reads, the latency percentiles of
    /// the reads (µs: p50, p90, p99, max), and how many read an
    /// `applied_seq` below the highest deposit acknowledged before the
    /// read was sent (a field staler than the acknowledgements).
    pub field_reads: u64,
    /// Field read latency percentiles, microseconds: p50, p90, p99, max.
    pub field_us: [u64; 4],
    /// Field reads behind an acknowledged deposit.
    pub field_behind: u64,
    /// CPU seconds of each process of [`LoadSpec::cpu_of`] over the
    /// driven window, in its order.
    pub cpu_s: Vec<f64>,
    /// CPU seconds of each group of [`LoadSpec::cpu_groups`] over the
    /// driven window, in its order.
    pub group_cpu_s: Vec<f64>,
    /// The deposit token of every acknowledged deposit, for a check of
    /// the store after routerd is killed ([`check_durable`]); not in the
    /// JSON report.
    #[serde(skip)]
    pub acknowledged_tokens: Vec<String>,
    /// Acknowledged deposits looked for in the store after routerd was
    /// killed (0: not checked).
    pub acknowledged_checked: u64,
    /// Of those, not found in the store (must be 0: every acknowledged
    /// deposit is durable).
    pub acknowledged_lost: u64,
}

/// The `routerd` an example runs: `$ROUTERD` where set, else the binary
/// beside the running example's directory (`target/release/routerd` for
/// `target/release/examples/NAME`). Errors: the example's own path is
/// unknown.
pub fn routerd_path() -> Result<std::path::PathBuf, String> {
    if let Some(path) = std::env::var_os("ROUTERD") {
        return Ok(std::path::PathBuf::from(path));
    }
    let exe = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    exe.parent()
        .and_then(|p| p.parent())
        .map(|p| p.join("routerd"))
        .ok_or_else(|| format!("no target directory above {}", exe.display()))
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

/// POSTs `body` as JSON to `url` (with the operator key when given);
/// returns (status, JSON body, `null` when the body is not JSON).
/// Errors: the request did not complete (no answer).
pub fn post(
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

/// What one load thread (or, in fleet mode, one device) measured.
#[derive(Debug, Default)]
struct Driven {
    /// Lease latencies, µs (in fleet mode, of leases answered with items).
    leases: Vec<u64>,
    /// Leases answered empty (fleet mode only).
    empty: u64,
    /// Acknowledged deposits' latencies, µs.
    deposits: Vec<u64>,
    /// Acknowledged deposits' tokens.
    acked: Vec<String>,
    /// Items granted.
    items: u64,
    /// Registrations sent again after `404 unknown_device`, answered 200.
    registered_again: u64,
    /// Refusals and failures by kind (`STATUS kind` or `transport`).
    errors: std::collections::BTreeMap<String, u64>,
}

/// What refused or failed a request, for [`LoadReport::errors_by_kind`].
fn error_kind(r: &Result<(u16, Value), String>) -> String {
    match r {
        Ok((status, body)) => format!("{status} {}", body["error"].as_str().unwrap_or("?")),
        Err(_) => "transport".into(),
    }
}

/// One load thread: leases for its devices in turn until `deadline`,
/// depositing every item granted. `mine` are devices `first..` of the
/// population; one told it is not live registers again with its secret
/// (`token`: the registration token).
fn drive(
    (first, mine): (usize, &[(String, String)]),
    token: &str,
    bases: &[String],
    seen: &AtomicU64,
    deadline: Instant,
) -> Driven {
    let a = agent();
    let mut d = Driven::default();
    let mut i = 0usize;
    let mut pick = Pick::new(mine.len() as u64);
    while Instant::now() < deadline {
        let base = pick.of(bases);
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
            *d.errors.entry(error_kind(&r)).or_default() += 1;
            if let Ok((status, body)) = &r {
                if lapsed(*status, body) {
                    let index = first + (i - 1) % mine.len();
                    match resume(&a, base, token, index, secret) {
                        Ok((200, _)) => d.registered_again += 1,
                        r => *d.errors.entry(error_kind(&r)).or_default() += 1,
                    }
                }
            }
            continue;
        };
        d.leases.push(us);
        for it in l["items"].as_array().cloned().unwrap_or_default() {
            d.items += 1;
            let body = json!({"device_id": id, "device_secret": secret, "lease_id": l["lease_id"], "target": it["target"], "deposit_token": it["deposit_token"], "receipt_revision": 0, "adapter_id": "html", "adapter_version": "1", "outcome": {"ok": true, "content_hash": "h", "latency_ms": 500.0}});
            let t0 = Instant::now();
            match post(&a, &format!("{}/v1/deposit", pick.of(bases)), &body, None) {
                Ok((200, v)) => {
                    d.deposits.push(t0.elapsed().as_micros() as u64);
                    d.acked
                        .push(it["deposit_token"].as_str().unwrap_or("").to_string());
                    seen.fetch_max(v["seq"].as_u64().unwrap_or(0), Ordering::SeqCst);
                }
                r => *d.errors.entry(error_kind(&r)).or_default() += 1,
            }
        }
    }
    d
}

/// What the client threads and the probes of one run return.
type Drove = (Vec<Driven>, MetricsProbe, (Vec<u64>, u64));

/// Drives `devices` from `spec.threads` threads over `bases` until
/// `deadline`, with the `/metrics` probe and, with replicas, the field
/// probe beside them.
fn drive_all(
    spec: &LoadSpec,
    devices: &[(String, String)],
    bases: &[String],
    seen: &AtomicU64,
    deadline: Instant,
) -> Drove {
    if let Some(fleet) = spec.fleet {
        return std::thread::scope(|scope| {
            let probe = scope.spawn(|| probe_metrics(&spec.base, deadline));
            let results = fleet::run_fleet(
                (&spec.base, &spec.registration_token),
                devices,
                fleet,
                spec.threads,
                deadline,
            )
            .unwrap_or_default();
            (results, probe.join().unwrap_or_default(), (Vec::new(), 0))
        });
    }
    let chunk = devices.len().div_ceil(spec.threads);
    std::thread::scope(|scope| {
        let probe = scope.spawn(|| probe_metrics(&spec.base, deadline));
        let fields = scope.spawn(|| {
            if spec.spread.is_empty() {
                (Vec::new(), 0)
            } else {
                probe_field(bases, seen, deadline)
            }
        });
        let token = &spec.registration_token;
        let handles: Vec<_> = devices
            .chunks(chunk)
            .enumerate()
            .map(|(c, mine)| {
                scope.spawn(move || drive((c * chunk, mine), token, bases, seen, deadline))
            })
            .collect();
        let results: Vec<Driven> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect();
        (
            results,
            probe.join().unwrap_or_default(),
            fields.join().unwrap_or_default(),
        )
    })
}

/// Registers the devices, seeds the targets, drives the load. Errors: a
/// spec out of range, or routerd refusing the setup.
pub fn run(spec: &LoadSpec) -> Result<LoadReport, String> {
    if !(1..=100_000).contains(&spec.devices) || !(1..=256).contains(&spec.threads) {
        return Err("devices must be in 1..=100000 and threads in 1..=256".into());
    }
    if !(1..=100_000).contains(&spec.sources) {
        return Err("sources must be in 1..=100000".into());
    }
    if !(spec.seconds.is_finite() && (0.1..=3600.0).contains(&spec.seconds)) {
        return Err("seconds must be in [0.1, 3600]".into());
    }
    let (devices, registration_s) = seed(spec)?;
    // Let one tick refill the queues.
    std::thread::sleep(Duration::from_millis(1500));
    let sample = || {
        spec.watch.as_ref().map_or((0, 0, 0.0), |(pid, dir)| {
            (rss_kib(*pid), dir_bytes(dir), cpu_s(*pid))
        })
    };
    let at_start = sample();
    let load_cpu_start = cpu_s(std::process::id());
    let cpu_start: Vec<f64> = spec.cpu_of.iter().map(|&p| cpu_s(p)).collect();
    let group_start: Vec<f64> = spec.cpu_groups.iter().map(|g| group_cpu_s(g)).collect();
    let deadline = Instant::now() + Duration::from_secs_f64(spec.seconds);
    let bases: Vec<String> = std::iter::once(spec.base.clone())
        .chain(spec.spread.iter().cloned())
        .collect();
    let seen = AtomicU64::new(0);
    let (results, mut metrics, (mut field_lat, field_behind)) =
        drive_all(spec, &devices, &bases, &seen, deadline);
    let at_end = sample();
    let load_cpu = cpu_s(std::process::id()) - load_cpu_start;
    let cpu: Vec<f64> = spec
        .cpu_of
        .iter()
        .zip(&cpu_start)
        .map(|(&p, s0)| cpu_s(p) - s0)
        .collect();
    let group_cpu: Vec<f64> = spec
        .cpu_groups
        .iter()
        .zip(&group_start)
        .map(|(g, s0)| group_cpu_s(g) - s0)
        .collect();
    let mut lat: Vec<u64> = results
        .iter()
        .flat_map(|r| r.leases.iter().copied())
        .collect();
    let mut dep: Vec<u64> = results
        .iter()
        .flat_map(|r| r.deposits.iter().copied())
        .collect();
    let (leases, deposits) = (lat.len() as u64, dep.len() as u64);
    let lease_us = percentiles(&mut lat);
    let deposit_us = percentiles(&mut dep);
    Ok(LoadReport {
        devices: spec.devices,
        registration_s,
        registrations_per_s: spec.devices as f64 / registration_s.max(1e-9),
        threads: spec.threads,
        seconds: spec.seconds,
        leases,
        leases_per_s: leases as f64 / spec.seconds,
        items: results.iter().map(|r| r.items).sum(),
        empty_leases: results.iter().map(|r| r.empty).sum(),
        fleet: spec.fleet.is_some(),
        deposits,
        deposits_per_s: deposits as f64 / spec.seconds,
        registered_again: results.iter().map(|r| r.registered_again).sum(),
        errors: results.iter().flat_map(|r| r.errors.values()).sum(),
        errors_by_kind: results.iter().flat_map(|r| r.errors.iter()).fold(
            Default::default(),
            |mut all, (k, n)| {
                *all.entry(k.clone()).or_default() += n;
                all
            },
        ),
        lease_us,
        lease_p999_us: quantile(&lat, 0.999),
        deposit_us,
        deposit_p999_us: quantile(&dep, 0.999),
        metrics_reads: metrics.lat.len() as u64,
        metrics_us: percentiles(&mut metrics.lat),
        rss_kib: [at_start.0, at_end.0],
        store_bytes: [at_start.1, at_end.1],
        snapshot_bytes: metrics.snapshot_bytes,
        store_max_us: metrics.store_max_us,
        connections: metrics.connections,
        routerd_cpu_s: at_end.2 - at_start.2,
        load_cpu_s: load_cpu,
        field_reads: field_lat.len() as u64,
        field_us: percentiles(&mut field_lat),
        field_behind,
        cpu_s: cpu,
        group_cpu_s: group_cpu,
        acknowledged_tokens: results.into_iter().flat_map(|r| r.acked).collect(),
        acknowledged_checked: 0,
        acknowledged_lost: 0,
    })
}
