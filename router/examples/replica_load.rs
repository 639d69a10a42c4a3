//! The load generator against routerd replicas on PostgreSQL: starts K
//! replicas (built beside this example, or `$ROUTERD`) on one schema, or
//! with K = 0 one routerd alone on it, drives DEVICES devices from
//! THREADS client threads for SECONDS, each lease, deposit and field read
//! sent to one replica at random, and prints JSON: the load's figures
//! (leases/s, lease and deposit latency, field reads behind an
//! acknowledged deposit), each routerd's CPU seconds over the driven
//! window, and over the whole run (setup included) the PostgreSQL
//! server's CPU seconds (its processes, backends opened during the run
//! included) and its transactions and row changes (`pg_stat_database`).
//!
//! `cargo run --release -p router --example replica_load -- K DEVICES THREADS SECONDS postgres://… SCHEMA`

use router::failover::replicas::Replicas;
use router::failover::FailoverSpec;
use router::load::{cpu_s, spawn_routerd, LoadSpec};
use router::store::PgStore;

/// CPU seconds of each process named `postgres` (the server and its
/// backends), by pid.
fn postgres_cpu() -> std::collections::BTreeMap<u32, f64> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Default::default();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        (comm.trim() == "postgres").then(|| (pid, cpu_s(pid)))
    })
    .collect()
}

/// The routerd processes of a run and what a client needs of them.
struct Started {
    bases: Vec<String>,
    pids: Vec<u32>,
    key: String,
    token: String,
    alone: Option<std::process::Child>,
    replicas: Option<Replicas>,
}

/// K = 0: one routerd alone on the store; else K replicas, once they
/// agree on a lead.
fn start(
    k: usize,
    routerd: std::path::PathBuf,
    url: &str,
    schema: &str,
    data: &std::path::Path,
) -> Result<Started, String> {
    let flags = ["--tick-ms", "1000"];
    if k == 0 {
        let mut extra = vec!["--store", url, "--store-schema", schema];
        extra.extend(flags);
        let (child, base) = spawn_routerd(&routerd, data, "load-key", "load-token", &extra)?;
        return Ok(Started {
            bases: vec![base],
            pids: vec![child.id()],
            key: "load-key".into(),
            token: "load-token".into(),
            alone: Some(child),
            replicas: None,
        });
    }
    let spec = FailoverSpec {
        routerd,
        url: url.into(),
        schema: schema.into(),
        data: data.into(),
        replicas: k,
        devices: 3,
        work: 1,
        lead_ttl_s: 6.0,
    };
    let rs = Replicas::start_with(&spec, false, &flags)?;
    rs.agreed_lead(&rs.live())?;
    Ok(Started {
        bases: (0..k).map(|i| rs.base(i)).collect(),
        pids: (0..k).map(|i| rs.pid(i)).collect(),
        key: rs.key.clone(),
        token: rs.token.clone(),
        alone: None,
        replicas: Some(rs),
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || -> ! {
        eprintln!("usage: replica_load K(0..=9) DEVICES THREADS SECONDS postgres://… SCHEMA");
        std::process::exit(2);
    };
    if args.len() != 6 {
        usage();
    }
    let num = |i: usize| args[i].parse::<f64>().unwrap_or_else(|_| usage());
    let (k, devices, threads, seconds) =
        (num(0) as usize, num(1) as usize, num(2) as usize, num(3));
    if k > 9 {
        usage();
    }
    let (url, schema) = (args[4].clone(), args[5].clone());
    let routerd = router::load::routerd_path().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2);
    });
    let data = std::env::temp_dir().join(format!("replica-load-{}", std::process::id()));
    let fail = |e: String| -> ! {
        eprintln!("{e}");
        std::process::exit(1);
    };
    let started = start(k, routerd, &url, &schema, &data).unwrap_or_else(|e| fail(e));
    let (bases, pids) = (&started.bases, &started.pids);
    let pg = PgStore::connect_with_schema(&url, &schema).unwrap_or_else(|e| fail(e.to_string()));
    let before = pg.activity().unwrap_or_else(|e| fail(e.to_string()));
    let server = postgres_cpu();
    let t0 = std::time::Instant::now();
    let spec = LoadSpec {
        base: bases[0].clone(),
        operator_key: started.key.clone(),
        registration_token: started.token.clone(),
        devices,
        threads,
        seconds,
        targets: 20_000,
        sources: 50,
        watch: None,
        spread: bases[1..].to_vec(),
        cpu_of: pids.clone(),
        cpu_groups: Vec::new(),
        fleet: None,
    };
    let report = router::load::run(&spec).unwrap_or_else(|e| fail(e));
    let after = pg
        .activity()
        .unwrap_or_else(|e| fail(e.to_string()))
        .since(&before);
    // Backends that ended during the run are missed (the pools keep theirs).
    let postgres_cpu: f64 = postgres_cpu()
        .iter()
        .map(|(p, c)| c - server.get(p).copied().unwrap_or(0.0))
        .sum();
    let run_s = t0.elapsed().as_secs_f64();
    let per_lease = |n: i64| n as f64 / report.leases.max(1) as f64;
    let out = serde_json::json!({
        "replicas": k,
        "load": report,
        "routerd_cpu_s": report.cpu_s,
        "run_s": run_s,
        "postgres_cpu_s": postgres_cpu,
        "postgres": after,
        "commits_per_lease": per_lease(after.commits),
        "rows_written_per_lease": per_lease(after.inserted + after.updated + after.deleted),
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    drop(started.replicas);
    if let Some(mut c) = started.alone {
        let _ = c.kill();
        let _ = c.wait();
    }
    let _ = std::fs::remove_dir_all(&data);
}
