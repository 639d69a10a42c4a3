//! What the load generator measures besides its own requests: a
//! process's resident set and CPU time, a data directory's size, latency
//! percentiles, the `/metrics` probe, and whether every acknowledged
//! deposit is in the store after routerd was killed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::LoadReport;

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

/// A control group's CPU time in seconds, every process in it counted,
/// those that already exited included: `cpuacct.usage` (ns, cgroup v1's
/// cpuacct directory) or `usage_usec` of `cpu.stat` (v2). 0 where neither
/// can be read.
pub fn group_cpu_s(dir: &std::path::Path) -> f64 {
    if let Some(ns) = std::fs::read_to_string(dir.join("cpuacct.usage"))
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    {
        return ns as f64 / 1e9;
    }
    std::fs::read_to_string(dir.join("cpu.stat"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("usage_usec "))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .map_or(0.0, |us| us as f64 / 1e6)
}

/// A process's CPU time (user plus system) in seconds, from fields 14
/// and 15 of `/proc/PID/stat` at 100 ticks a second (Linux's `USER_HZ`);
/// 0 where it cannot be read.
pub fn cpu_s(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // The command name (field 2) may hold spaces: count from its ')'.
            let rest = s.get(s.rfind(')')? + 2..)?;
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
            Some(ticks as f64 / 100.0)
        })
        .unwrap_or(0.0)
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

/// Looks for every token of `report.acknowledged_tokens` in `store` (opened
/// after routerd was killed) and records how many were checked and how
/// many are missing. Errors: the store's.
pub fn check_durable(
    report: &mut LoadReport,
    store: &mut dyn crate::store::Store,
) -> Result<(), crate::store::StoreError> {
    let mut lost = 0;
    for token in &report.acknowledged_tokens {
        if !store.has_deposit(token)? {
            lost += 1;
        }
    }
    report.acknowledged_checked = report.acknowledged_tokens.len() as u64;
    report.acknowledged_lost = lost;
    Ok(())
}

/// The `p` quantile (0..=1) of sorted `lat`, 0 when empty.
pub(crate) fn quantile(lat: &[u64], p: f64) -> u64 {
    if lat.is_empty() {
        0
    } else {
        lat[((lat.len() as f64 - 1.0) * p).round() as usize]
    }
}

/// p50, p90, p99 and max of `lat` (sorted in place), 0s when empty.
pub(crate) fn percentiles(lat: &mut [u64]) -> [u64; 4] {
    lat.sort_unstable();
    [
        quantile(lat, 0.5),
        quantile(lat, 0.9),
        quantile(lat, 0.99),
        lat.last().copied().unwrap_or(0),
    ]
}

/// The value of the unlabelled gauge `name` in a `/metrics` body.
pub(crate) fn gauge(body: &str, name: &str) -> Option<u64> {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// A ureq agent that reports statuses as answers and gives up after 30 s.
pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

/// What the `/metrics` probe saw.
#[derive(Debug, Default)]
pub(crate) struct MetricsProbe {
    /// Each read's latency, µs (failed reads are left out).
    pub lat: Vec<u64>,
    /// The largest `router_snapshot_bytes` read.
    pub snapshot_bytes: u64,
    /// The last read's `router_store_hold_max_us` and
    /// `router_store_wait_max_us` by operation, keyed `hold OP` and
    /// `wait OP` (empty where routerd does not give them).
    pub store_max_us: std::collections::BTreeMap<String, u64>,
    /// The most `router_connections_open` read, and the least
    /// `router_connections_cap` (`None` where routerd does not give them).
    pub connections: Option<(u64, u64)>,
}

/// The labelled gauges `NAME{op="OP"} V` of `name` in a `/metrics` body,
/// keyed `KEY OP`.
pub(crate) fn by_op(body: &str, name: &str, key: &str) -> Vec<(String, u64)> {
    body.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix("{op=\"")?;
            let (op, value) = rest.split_once("\"} ")?;
            Some((format!("{key} {op}"), value.trim().parse().ok()?))
        })
        .collect()
}

/// Reads `/metrics` every 50 ms until `deadline` ([`MetricsProbe`]).
pub(crate) fn probe_metrics(base: &str, deadline: Instant) -> MetricsProbe {
    let a = agent();
    let mut probe = MetricsProbe::default();
    while Instant::now() < deadline {
        let t0 = Instant::now();
        let body = a
            .get(format!("{base}/metrics"))
            .call()
            .ok()
            .and_then(|mut r| r.body_mut().read_to_string().ok());
        if let Some(body) = body {
            probe.lat.push(t0.elapsed().as_micros() as u64);
            let bytes = gauge(&body, "router_snapshot_bytes").unwrap_or(0);
            probe.snapshot_bytes = probe.snapshot_bytes.max(bytes);
            let held = by_op(&body, "router_store_hold_max_us", "hold");
            let waited = by_op(&body, "router_store_wait_max_us", "wait");
            probe.store_max_us.extend(held.into_iter().chain(waited));
            let open = gauge(&body, "router_connections_open");
            if let (Some(open), Some(cap)) = (open, gauge(&body, "router_connections_cap")) {
                let (most, least) = probe.connections.unwrap_or((0, u64::MAX));
                probe.connections = Some((most.max(open), least.min(cap)));
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    probe
}

/// Reads `GET /v1/field` from one of `bases` (in turn) every 50 ms until
/// `deadline`; returns each read's latency in microseconds and how many
/// reads answered an `applied_seq` below `seen` as it was when the read
/// was sent (the highest deposit sequence number acknowledged by then).
pub(crate) fn probe_field(
    bases: &[String],
    seen: &AtomicU64,
    deadline: Instant,
) -> (Vec<u64>, u64) {
    let a = agent();
    let (mut lat, mut behind) = (Vec::new(), 0);
    let mut k = 0usize;
    while Instant::now() < deadline && !bases.is_empty() {
        let floor = seen.load(Ordering::SeqCst);
        let t0 = Instant::now();
        let body = a
            .get(format!("{}/v1/field", bases[k % bases.len()]))
            .call()
            .ok()
            .and_then(|mut r| r.body_mut().read_to_string().ok())
            .and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok());
        k += 1;
        if let Some(v) = body {
            lat.push(t0.elapsed().as_micros() as u64);
            if v["applied_seq"].as_u64().unwrap_or(0) < floor {
                behind += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (lat, behind)
}

/// A small xorshift generator: picks one of several base URLs, draws a
/// device's latencies.
pub(crate) struct Pick(u64);

impl Pick {
    /// A generator seeded from `seed` (any value).
    pub fn new(seed: u64) -> Pick {
        Pick(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// One of `of`, uniformly (`of` must not be empty).
    pub fn of<'a>(&mut self, of: &'a [String]) -> &'a str {
        &of[(self.next() % of.len().max(1) as u64) as usize]
    }

    /// A uniform draw in (0, 1).
    pub fn unit(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// A standard normal draw (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::{by_op, group_cpu_s};

    #[test]
    fn the_store_gauges_are_read_by_operation_and_anything_else_is_skipped() {
        let body = "# HELP router_store_hold_max_us x\n\
router_store_hold_max_us{op=\"snapshot\"} 1250\n\
router_store_hold_max_us{op=\"leases\"} 7\n\
router_store_hold_max_us{op=\"prune\"} many\n\
router_store_hold_max_us 9\n\
router_store_wait_max_us{op=\"leases\"} 1300\n";
        assert_eq!(
            by_op(body, "router_store_hold_max_us", "hold"),
            vec![
                ("hold snapshot".to_string(), 1250),
                ("hold leases".to_string(), 7)
            ]
        );
        assert_eq!(
            by_op(body, "router_store_wait_max_us", "wait"),
            vec![("wait leases".to_string(), 1300)]
        );
        assert!(by_op("", "router_store_hold_max_us", "hold").is_empty());
    }

    #[test]
    fn a_groups_cpu_reads_v1_cpuacct_or_v2_cpu_stat_and_zero_otherwise() {
        let v1 = tempfile::tempdir().unwrap();
        std::fs::write(v1.path().join("cpuacct.usage"), "2500000000\n").unwrap();
        assert_eq!(group_cpu_s(v1.path()), 2.5);
        let v2 = tempfile::tempdir().unwrap();
        std::fs::write(
            v2.path().join("cpu.stat"),
            "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n",
        )
        .unwrap();
        assert_eq!(group_cpu_s(v2.path()), 1.5);
        let neither = tempfile::tempdir().unwrap();
        std::fs::write(neither.path().join("cpuacct.usage"), "many\n").unwrap();
        assert_eq!(group_cpu_s(neither.path()), 0.0);
        assert_eq!(group_cpu_s(&neither.path().join("gone")), 0.0);
    }
}
