//! The failover drill (`router::failover`): starts REPLICAS `routerd`
//! replicas (built beside this example, or `$ROUTERD`) on one PostgreSQL
//! schema, drives DEVICES devices that lease and deposit through any of
//! them, injects one fault under that load, and checks that no deposit
//! token or first observation was granted twice, no host got more than its
//! politeness, every acknowledged deposit is in the store, every refusal
//! was typed, a lease held through the fault was deposited on exactly
//! once, and the replicas led and served again without a restart. Prints
//! the report as JSON and `PASS` or `FAIL: …` lines; exits 1 on a failure.
//!
//! Faults: `kill` (SIGKILL of the leader), `cut` (the leader's link to
//! the store cut by a proxy in this process, then healed), `stop OUTAGE_S
//! 'STOP_CMD' 'START_CMD'` (the server stopped for OUTAGE_S seconds, then
//! started; the commands run with `sh -c`).
//!
//! `cargo run --release -p router --example failover_drill -- REPLICAS DEVICES postgres://… SCHEMA (kill | cut | stop OUTAGE_S 'STOP_CMD' 'START_CMD')`

use router::failover::{run, FailoverSpec, Fault};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || -> ! {
        eprintln!("usage: failover_drill REPLICAS(2..=9) DEVICES(3..=1000) postgres://… SCHEMA (kill | cut | stop OUTAGE_S 'STOP_CMD' 'START_CMD')");
        std::process::exit(2);
    };
    if args.len() < 5 {
        usage();
    }
    let num = |i: usize| args[i].parse::<f64>().unwrap_or_else(|_| usage());
    let routerd = router::load::routerd_path().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2);
    });
    let data = std::env::temp_dir().join(format!("failover-drill-{}", std::process::id()));
    let spec = FailoverSpec {
        routerd,
        url: args[2].clone(),
        schema: args[3].clone(),
        data: data.clone(),
        replicas: num(0) as usize,
        devices: num(1) as usize,
        work: 30,
        lead_ttl_s: 2.0,
    };
    let shell = router::drill::shell;
    let (stop, start) = match args.get(6..8) {
        Some([a, b]) => (a.clone(), b.clone()),
        _ => (String::new(), String::new()),
    };
    let stop_server = || shell(&stop);
    let start_server = || shell(&start);
    let fault = match (args[4].as_str(), args.len()) {
        ("kill", 5) => Fault::Kill,
        ("cut", 5) => Fault::Cut,
        ("stop", 8) => Fault::Stop {
            outage_s: num(5),
            stop: &stop_server,
            start: &start_server,
        },
        _ => usage(),
    };
    let report = run(&spec, &fault);
    let _ = std::fs::remove_dir_all(&data);
    router::drill::conclude(report, |r| &r.failures)
}
