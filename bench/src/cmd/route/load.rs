//! `fleet-lab route load`: starts `routerd` on loopback and drives it over
//! HTTP with `router::load`; prints leases/s, latency percentiles and the
//! report as JSON.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use super::{parse_devices, parse_seconds, parse_targets, parse_threads, routerd_path};

/// Arguments of `fleet-lab route load`.
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// Devices to register (1..=100000).
    #[arg(long, value_name = "N", default_value_t = 1000, allow_hyphen_values = true, value_parser = parse_devices)]
    pub devices: usize,
    /// Client threads (1..=256).
    #[arg(long, value_name = "T", default_value_t = 16, allow_hyphen_values = true, value_parser = parse_threads)]
    pub threads: usize,
    /// Seconds to drive (0.1..=3600).
    #[arg(long, value_name = "S", default_value_t = 10.0, allow_hyphen_values = true, value_parser = parse_seconds)]
    pub seconds: f64,
    /// Targets to seed (1..=1000000).
    #[arg(long, value_name = "N", default_value_t = 20_000, allow_hyphen_values = true, value_parser = parse_targets)]
    pub targets: usize,
    /// routerd's store: absent = SQLite in a fresh temporary directory; `postgres://…` = PostgreSQL.
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// PostgreSQL schema (with --store postgres://…).
    #[arg(long, value_name = "NAME", default_value = "public")]
    pub store_schema: String,
    /// The routerd binary (default: next to fleet-lab, as `cargo build --release -p router` puts it).
    #[arg(long, value_name = "PATH")]
    pub routerd: Option<PathBuf>,
}

/// Kills the child routerd and removes its data directory when dropped.
struct Child {
    child: std::process::Child,
    data: Option<PathBuf>,
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(d) = &self.data {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// `fleet-lab route load`.
pub(super) fn load(a: LoadArgs) -> Result<()> {
    if let Some(url) = &a.store {
        if !url.starts_with("postgres://") && !url.starts_with("postgresql://") {
            bail!("--store must be a postgres:// URL (or absent for SQLite), got {url:?}");
        }
    }
    let routerd = routerd_path(a.routerd.clone())?;
    let data = std::env::temp_dir().join(format!("route-load-{}", std::process::id()));
    let mut extra = vec!["--tick-ms", "1000"];
    if let Some(url) = &a.store {
        extra.extend([
            "--store",
            url.as_str(),
            "--store-schema",
            a.store_schema.as_str(),
        ]);
    }
    let (spawned, base) = router::load::spawn_routerd(
        &routerd,
        &data,
        "route-load-key",
        "route-load-token",
        &extra,
    )
    .map_err(|e| anyhow::anyhow!(e))?;
    let watch = Some((spawned.id(), data.clone()));
    let child = Child {
        child: spawned,
        data: Some(data),
    };
    let spec = router::load::LoadSpec {
        base: base.to_string(),
        operator_key: "route-load-key".into(),
        registration_token: "route-load-token".into(),
        devices: a.devices,
        threads: a.threads,
        seconds: a.seconds,
        targets: a.targets,
        sources: 50,
        watch,
        spread: Vec::new(),
        cpu_of: Vec::new(),
        cpu_groups: Vec::new(),
        fleet: None,
    };
    let r = router::load::run(&spec).map_err(|e| anyhow::anyhow!("load: {e}"))?;
    drop(child);
    println!(
        "{} devices, {} threads, {} s ({} store): {:.0} leases/s, {} items, {} deposits, {} errors; lease latency p50 {} µs, p90 {} µs, p99 {} µs, max {} µs; /metrics p99 {} µs; routerd RSS {} → {} KiB, data {} → {} bytes",
        r.devices,
        r.threads,
        r.seconds,
        if a.store.is_some() { "PostgreSQL" } else { "SQLite" },
        r.leases_per_s,
        r.items,
        r.deposits,
        r.errors,
        r.lease_us[0],
        r.lease_us[1],
        r.lease_us[2],
        r.lease_us[3],
        r.metrics_us[2],
        r.rss_kib[0],
        r.rss_kib[1],
        r.store_bytes[0],
        r.store_bytes[1]
    );
    println!("{}", serde_json::to_string(&r)?);
    Ok(())
}
