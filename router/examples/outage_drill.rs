//! The store outage drill (`router::outage`): starts `routerd` (built
//! beside this example, or `$ROUTERD`) on a PostgreSQL schema, drives
//! devices that lease and deposit, stops the PostgreSQL server with
//! STOP_CMD under that load, keeps it down OUTAGE_S seconds, starts it with
//! START_CMD, and checks that routerd answered only empty leases and typed
//! 503s meanwhile, lost no acknowledged deposit and served again within
//! 10 s of the server's start, without a restart. Prints the report as
//! JSON and `PASS` or `FAIL: …` lines; exits 1 on a failure.
//!
//! `cargo run --release -p router --example outage_drill -- DEVICES THREADS BEFORE_S OUTAGE_S postgres://… SCHEMA 'STOP_CMD' 'START_CMD'`
//! (the commands run with `sh -c`; `ci/pg-suite.sh` runs it with
//! `pg_ctl stop -m fast` and `pg_ctl start` on its throwaway cluster).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || -> ! {
        eprintln!("usage: outage_drill DEVICES(1..=10000) THREADS(1..=64) BEFORE_S OUTAGE_S postgres://… SCHEMA 'STOP_CMD' 'START_CMD'");
        std::process::exit(2);
    };
    if args.len() != 8 {
        usage();
    }
    let num = |i: usize| args[i].parse::<f64>().unwrap_or_else(|_| usage());
    let (devices, threads) = (num(0) as usize, num(1) as usize);
    if !(1..=10_000).contains(&devices) || !(1..=64).contains(&threads) {
        usage();
    }
    let (url, schema) = (args[4].clone(), args[5].clone());
    let routerd = router::load::routerd_path().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2);
    });
    let data = std::env::temp_dir().join(format!("outage-drill-{}", std::process::id()));
    let extra = [
        "--tick-ms",
        "200",
        "--store",
        url.as_str(),
        "--store-schema",
        schema.as_str(),
        "--store-timeout-s",
        "2",
        "--store-connect-timeout-s",
        "2",
    ];
    let start = || router::load::spawn_routerd(&routerd, &data, "drill-key", "drill-token", &extra);
    let shell = |cmd: &str| -> Result<(), String> {
        let s = std::process::Command::new("sh")
            .args(["-c", cmd])
            .status()
            .map_err(|e| e.to_string())?;
        if s.success() {
            Ok(())
        } else {
            Err(format!("exited with {s}"))
        }
    };
    let stop_server = || shell(&args[6]);
    let start_server = || shell(&args[7]);
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
            watch: None,
        },
        before_s: num(2),
        outage_s: num(3),
        recover_bound_s: 10.0,
    };
    let report = router::outage::run(&spec, &start, &stop_server, &start_server, &open_store);
    let _ = std::fs::remove_dir_all(&data);
    router::drill::conclude(report, |r| &r.failures)
}
