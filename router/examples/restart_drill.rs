//! The restart drill (`router::drill`): starts `routerd` (built beside
//! this example, or `$ROUTERD`) on a fresh SQLite directory or a
//! PostgreSQL schema, drives devices that each hold one item of their
//! latest lease, kills routerd with SIGKILL under that load, starts it
//! again on the same store and checks that no acknowledged deposit was
//! lost and that every held item is accepted exactly once. Prints the
//! report as JSON and `PASS` or `FAIL: …` lines; exits 1 on a failure.
//!
//! `cargo run --release -p router --example restart_drill -- [DEVICES] [THREADS] [SECONDS] [postgres://… SCHEMA]`
//! (defaults: 200 devices, 4 threads, 5 s of load before the kill).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, d: f64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (devices, threads, seconds) = (num(0, 200.0) as usize, num(1, 4.0) as usize, num(2, 5.0));
    if !(1..=10_000).contains(&devices)
        || !(1..=64).contains(&threads)
        || !(0.5..=600.0).contains(&seconds)
    {
        eprintln!("usage: restart_drill [DEVICES 1..=10000] [THREADS 1..=64] [SECONDS 0.5..=600] [postgres://… SCHEMA]");
        std::process::exit(2);
    }
    let pg = match (args.get(3), args.get(4)) {
        (Some(url), Some(schema)) => Some((url.clone(), schema.clone())),
        _ => None,
    };
    let routerd = router::load::routerd_path().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2);
    });
    let data = std::env::temp_dir().join(format!("restart-drill-{}", std::process::id()));
    let mut extra = vec!["--tick-ms".to_string(), "200".to_string()];
    if let Some((url, schema)) = &pg {
        extra.extend([
            "--store".into(),
            url.clone(),
            "--store-schema".into(),
            schema.clone(),
        ]);
    }
    let extra_refs: Vec<&str> = extra.iter().map(String::as_str).collect();
    let start =
        || router::load::spawn_routerd(&routerd, &data, "drill-key", "drill-token", &extra_refs);
    let open_store = || -> Result<Box<dyn router::store::Store>, router::store::StoreError> {
        match &pg {
            Some((url, schema)) => Ok(Box::new(router::store::PgStore::connect_with_schema(
                url, schema,
            )?)),
            None => Ok(Box::new(router::store::SqliteStore::open_dir(&data)?)),
        }
    };
    let spec = router::load::LoadSpec {
        base: String::new(),
        operator_key: "drill-key".into(),
        registration_token: "drill-token".into(),
        devices,
        threads,
        seconds,
        targets: 20_000,
        sources: 50,
        spread: Vec::new(),
        cpu_of: Vec::new(),
        cpu_groups: Vec::new(),
        fleet: None,
        watch: None,
    };
    let report = router::drill::run(&spec, &start, &open_store);
    let _ = std::fs::remove_dir_all(&data);
    router::drill::conclude(report, |r| &r.failures)
}
