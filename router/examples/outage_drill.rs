//! The store outage drill (`router::outage`): starts `routerd` (built
//! beside this example, or `$ROUTERD`) on a PostgreSQL schema, drives
//! devices that lease and deposit, makes the server unreachable under that
//! load for OUTAGE_S seconds, brings it back, and checks that routerd
//! answered only empty leases and typed 503s meanwhile, lost no
//! acknowledged deposit and served again within 10 s, without a restart.
//! Prints the report as JSON and `PASS` or `FAIL: …` lines; exits 1 on a
//! failure.
//!
//! Two ways to make the server unreachable:
//!
//! - `'STOP_CMD' 'START_CMD'` (run with `sh -c`): the server stops and
//!   starts (`ci/pg-suite.sh` uses `pg_ctl stop -m fast` and `pg_ctl
//!   start`); routerd's connections are closed and its reconnects refused.
//! - `--network-cut`: routerd reaches the server through a TCP proxy in
//!   this process, which then stops forwarding: nothing is closed or
//!   refused, nothing answers (a stalled network). Only routerd's own
//!   bounds on a store call end its waits, so the drill also fails when an
//!   answer while cut takes longer than three times the call and connect
//!   bounds it gives routerd (1 s each).
//!
//! `cargo run --release -p router --example outage_drill -- DEVICES THREADS BEFORE_S OUTAGE_S postgres://… SCHEMA ('STOP_CMD' 'START_CMD' | --network-cut)`

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use router::netcut::{proxy, via_port};

/// The URL routerd is given and, in `--network-cut` mode, the proxy's cut
/// flag: there routerd dials a proxy in front of the server in `url`.
///
/// Errors: the URL names no `@host:port/`, or the proxy cannot listen.
fn routerd_store(url: &str, cut_mode: bool) -> Result<(String, Option<Arc<AtomicBool>>), String> {
    if !cut_mode {
        return Ok((url.to_string(), None));
    }
    let bad = || "--network-cut needs a URL with @host:port/".to_string();
    let (_, upstream) = via_port(url, 0).ok_or_else(bad)?;
    let (port, cut) =
        proxy(SocketAddr::from(([127, 0, 0, 1], upstream))).map_err(|e| format!("proxy: {e}"))?;
    let (via, _) = via_port(url, port).ok_or_else(bad)?;
    Ok((via, Some(cut)))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || -> ! {
        eprintln!("usage: outage_drill DEVICES(1..=10000) THREADS(1..=64) BEFORE_S OUTAGE_S postgres://… SCHEMA ('STOP_CMD' 'START_CMD' | --network-cut)");
        std::process::exit(2);
    };
    let cut_mode = args.len() == 7 && args[6] == "--network-cut";
    if args.len() != 8 && !cut_mode {
        usage();
    }
    let num = |i: usize| args[i].parse::<f64>().unwrap_or_else(|_| usage());
    let (devices, threads) = (num(0) as usize, num(1) as usize);
    if !(1..=10_000).contains(&devices) || !(1..=64).contains(&threads) {
        usage();
    }
    let (url, schema) = (args[4].clone(), args[5].clone());
    // In --network-cut mode routerd dials the proxy; the drill's own check
    // of the store afterwards dials the server.
    let (routerd_url, cut) = routerd_store(&url, cut_mode).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2);
    });
    let bound_s = if cut_mode { "1" } else { "2" };
    let routerd = router::load::routerd_path().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2);
    });
    let data = std::env::temp_dir().join(format!("outage-drill-{}", std::process::id()));
    let extra = [
        "--tick-ms",
        "200",
        "--store",
        routerd_url.as_str(),
        "--store-schema",
        schema.as_str(),
        "--store-timeout-s",
        bound_s,
        "--store-connect-timeout-s",
        bound_s,
    ];
    let start = || router::load::spawn_routerd(&routerd, &data, "drill-key", "drill-token", &extra);
    let shell = router::drill::shell;
    let set_cut = |on: bool| {
        if let Some(c) = &cut {
            c.store(on, Ordering::SeqCst);
        }
        Ok(())
    };
    let stop_server = || {
        if cut_mode {
            set_cut(true)
        } else {
            shell(&args[6])
        }
    };
    let start_server = || {
        if cut_mode {
            set_cut(false)
        } else {
            shell(&args[7])
        }
    };
    let open_store = || -> Result<Box<dyn router::store::Store>, router::store::StoreError> {
        Ok(Box::new(router::store::PgStore::connect_with_schema(
            &url, &schema,
        )?))
    };
    let spec = router::outage::OutageSpec {
        load: router::load::LoadSpec {
            base: String::new(),
            operator_key: "drill-key".into(),
            registration_token: "drill-token".into(),
            devices,
            threads,
            seconds: 1.0,
            targets: 20_000,
            sources: 50,
            spread: Vec::new(),
            cpu_of: Vec::new(),
            cpu_groups: Vec::new(),
            fleet: None,
            watch: None,
        },
        before_s: num(2),
        outage_s: num(3),
        recover_bound_s: 10.0,
        answer_bound_s: cut_mode.then_some(6.0),
    };
    let report = router::outage::run(&spec, &start, &stop_server, &start_server, &open_store);
    let _ = std::fs::remove_dir_all(&data);
    router::drill::conclude(report, |r| &r.failures)
}
