//! Write-path cost of the store backends: one op = `append_deposit` of a
//! ~300-byte deposit plus a one-row `upsert` into `targets` (what the
//! router does per acknowledged deposit), and the append alone for
//! comparison, plus a 1000-row batch upsert and `append_deposits` in
//! groups of 32 (group commit). Prints ops/s and p50/p99 latency
//! per op in µs for SQLite (`synchronous` FULL and NORMAL) and PostgreSQL
//! (a throwaway cluster with durable settings, or `ROUTER_TEST_PG`).
//!
//! ```text
//! cargo run --release -p router --example store_bench -- [OPS]
//! ```
//! `OPS` defaults to 2000 per backend (after 100 warm-up ops).

#[path = "../tests/support/pg.rs"]
#[allow(dead_code)]
mod pg;

use std::time::{Duration, Instant};

use router::store::{DepositEntry, PgStore, Row, SqliteStore, Store, Synchronous, Table};

const WARMUP: u64 = 100;

fn one_op(s: &mut dyn Store, seq: u64, payload: &str, upsert: bool) {
    let fresh = s
        .append_deposit(&DepositEntry {
            seq,
            token: format!("tok-{seq:016x}"),
            payload: payload.to_string(),
        })
        .expect("append_deposit");
    assert!(fresh);
    if !upsert {
        return;
    }
    s.upsert(
        Table::Targets,
        &[Row {
            key: format!("target-{}", seq % 1000),
            version: seq,
            payload: payload.to_string(),
        }],
    )
    .expect("upsert");
}

fn run(name: &str, s: &mut dyn Store, ops: u64, upsert: bool) {
    let payload = format!(
        "{{\"ok\":true,\"latency_ms\":41,\"content_hash\":\"{}\",\"pad\":\"{}\"}}",
        "ab".repeat(32),
        "x".repeat(180)
    );
    for seq in 1..=WARMUP {
        one_op(s, seq, &payload, upsert);
    }
    let mut lat = Vec::with_capacity(ops as usize);
    let t0 = Instant::now();
    for seq in WARMUP + 1..=WARMUP + ops {
        let t = Instant::now();
        one_op(s, seq, &payload, upsert);
        lat.push(t.elapsed());
    }
    let total = t0.elapsed();
    lat.sort();
    let pct = |p: f64| -> Duration { lat[((lat.len() as f64 - 1.0) * p).round() as usize] };
    let what = if upsert {
        "append+upsert"
    } else {
        "append only"
    };
    println!(
        "{name:<28} {what:<13} {ops:>6} ops  {:>9.0} ops/s  p50 {:>8.1} µs  p99 {:>8.1} µs  max {:>8.1} µs",
        ops as f64 / total.as_secs_f64(),
        pct(0.50).as_secs_f64() * 1e6,
        pct(0.99).as_secs_f64() * 1e6,
        lat[lat.len() - 1].as_secs_f64() * 1e6,
    );
}

/// `append_deposits` in groups of 32 (group commit), `ops` deposits in all.
fn grouped(name: &str, s: &mut dyn Store, ops: u64) {
    let payload = "z".repeat(250);
    let base = 1_000_000u64;
    let mut lat = Vec::new();
    let t0 = Instant::now();
    let mut seq = base;
    while seq < base + ops {
        let group: Vec<DepositEntry> = (seq..(seq + 32).min(base + ops))
            .map(|q| DepositEntry {
                seq: q,
                token: format!("grp-{q}"),
                payload: payload.clone(),
            })
            .collect();
        seq += group.len() as u64;
        let t = Instant::now();
        let r = s.append_deposits(&group);
        lat.push(t.elapsed());
        assert!(r.iter().all(|x| matches!(x, Ok(true))));
    }
    let total = t0.elapsed();
    lat.sort();
    println!(
        "{name:<28} {:<13} {ops:>6} deps {:>9.0} deps/s p50 {:>8.1} µs  p99 {:>8.1} µs per group of 32",
        "append x32",
        ops as f64 / total.as_secs_f64(),
        lat[lat.len() / 2].as_secs_f64() * 1e6,
        lat[((lat.len() as f64 - 1.0) * 0.99).round() as usize].as_secs_f64() * 1e6,
    );
}

/// One upsert of 1000 rows (one transaction), five times; prints the median.
fn batch(name: &str, s: &mut dyn Store) {
    let payload = "y".repeat(250);
    let mut times: Vec<Duration> = (1..=5u64)
        .map(|v| {
            let rows: Vec<Row> = (0..1000)
                .map(|i| Row {
                    key: format!("batch-{i:04}"),
                    version: v,
                    payload: payload.clone(),
                })
                .collect();
            let t = Instant::now();
            s.upsert(Table::Meta, &rows).expect("batch upsert");
            t.elapsed()
        })
        .collect();
    times.sort();
    println!(
        "{name:<28} {:<13} {:>6} rows {:>9.1} ms per batch (median of 5)",
        "batch upsert",
        1000,
        times[2].as_secs_f64() * 1e3
    );
}

fn main() {
    let ops: u64 = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("OPS must be a number"))
        .unwrap_or(2000);
    let tmp = tempfile::Builder::new()
        .prefix("store-bench-")
        .tempdir_in(std::env::var_os("BENCH_DIR").unwrap_or_else(|| ".".into()))
        .expect("temp dir");
    println!("SQLite files in {}", tmp.path().display());
    for (name, sync) in [
        ("sqlite synchronous=FULL", Synchronous::Full),
        ("sqlite synchronous=NORMAL", Synchronous::Normal),
    ] {
        for upsert in [true, false] {
            let path = tmp.path().join(format!("{sync:?}-{upsert}.db"));
            let mut s = SqliteStore::open_with(&path, sync).expect("open sqlite");
            run(name, &mut s, ops, upsert);
            if upsert {
                batch(name, &mut s);
            } else {
                grouped(name, &mut s, ops * 4);
            }
        }
    }
    match pg::start_server(pg::ClusterOptions { durable: true }) {
        Ok(Some(server)) => {
            let name = match &server {
                pg::PgServer::External(_) => "postgres (ROUTER_TEST_PG)",
                pg::PgServer::Local(_) => "postgres (local, fsync on)",
            };
            for upsert in [true, false] {
                let schema = server.schema("bench");
                let mut s = PgStore::connect_with_schema(server.url(), schema.name())
                    .expect("connect postgres");
                run(name, &mut s, ops, upsert);
                if upsert {
                    batch(name, &mut s);
                } else {
                    grouped(name, &mut s, ops * 4);
                }
            }
        }
        Ok(None) => println!("postgres: skipped, no server binary and ROUTER_TEST_PG unset"),
        Err(e) => println!("postgres: cluster failed to start: {e}"),
    }
}
