//! Starts `routerd` (built beside this example) on loopback with a fresh
//! data directory, drives it with the bounded load generator and prints
//! the figures as JSON.
//!
//! `cargo run --release -p router --example lease_load -- [--targets N] [--sources N] [--fleet] [--cpu-group DIR] [DEVICES] [THREADS] [SECONDS] [postgres://… SCHEMA] [-- ROUTERD ARGS…]`
//! (`--targets`: targets seeded, default 20,000, at most 1,000,000;
//! `--sources`: the sources they are spread over, default 50, at most
//! 100,000; `--fleet`: every device behaves as a crawling fleet's does,
//! `router::load::fleet`, on THREADS runtime workers (routerd's
//! connection cap, `--max-connections`, stays its own: devices beyond it
//! wait in the kernel's backlog); after a second `--`, arguments for
//! routerd itself). Reports
//! routerd's resident set and data directory size after the setup and at
//! the end. routerd is then killed with SIGKILL and every deposit it
//! acknowledged is looked for in its store (`acknowledged_lost` must be
//! 0). The `routerd` started is the one beside this example's directory, or `$ROUTERD` where that is set (`ci/small-box.sh` points it
//! at a wrapper that enters a cgroup first). `--cpu-group DIR` (repeatable)
//! reports the CPU seconds of that control group over the driven window
//! (`group_cpu_s`: the store's server, in a group of its own).

/// Removes `flag COUNT` from `args` and returns the count (`default`
/// without the flag); a count that is not a whole number in 1..=`max`
/// stops the program with a message.
fn take_count(args: &mut Vec<String>, flag: &str, default: usize, max: usize) -> usize {
    let Some(i) = args.iter().position(|a| a == flag) else {
        return default;
    };
    let count = args.get(i + 1).and_then(|s| s.parse().ok());
    match count.filter(|n| (1..=max).contains(n)) {
        Some(n) => {
            args.drain(i..i + 2);
            n
        }
        None => {
            eprintln!("{flag} takes a count in 1..={max}");
            std::process::exit(2);
        }
    }
}

use router::store::{PgStore, SqliteStore, Store};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let routerd_args: Vec<String> = match args.iter().position(|a| a == "--") {
        Some(i) => args.split_off(i).into_iter().skip(1).collect(),
        None => Vec::new(),
    };
    let targets = take_count(&mut args, "--targets", 20_000, 1_000_000);
    let sources = take_count(&mut args, "--sources", 50, 100_000);
    let mut cpu_groups = Vec::new();
    while let Some(i) = args.iter().position(|a| a == "--cpu-group") {
        match args.get(i + 1).map(std::path::PathBuf::from) {
            Some(dir) if dir.is_dir() => {
                cpu_groups.push(dir);
                args.drain(i..i + 2);
            }
            _ => {
                eprintln!("--cpu-group takes a control group's directory");
                std::process::exit(2);
            }
        }
    }
    let fleet = match args.iter().position(|a| a == "--fleet") {
        Some(i) => {
            args.remove(i);
            Some(router::load::FleetSpec::default())
        }
        None => None,
    };
    let num = |i: usize, d: f64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (devices, threads, seconds) =
        (num(0, 1000.0) as usize, num(1, 16.0) as usize, num(2, 10.0));
    let routerd = router::load::routerd_path().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2);
    });
    let data = std::env::temp_dir().join(format!("lease-load-{}", std::process::id()));
    let mut extra = vec!["--tick-ms", "1000"];
    if let (Some(url), Some(schema)) = (args.get(3), args.get(4)) {
        extra.extend(["--store", url.as_str(), "--store-schema", schema.as_str()]);
    }
    extra.extend(routerd_args.iter().map(String::as_str));
    let (mut child, base) =
        router::load::spawn_routerd(&routerd, &data, "load-key", "load-token", &extra)
            .unwrap_or_else(|e| panic!("{e} (build it: cargo build --release -p router)"));
    let spec = router::load::LoadSpec {
        base,
        operator_key: "load-key".into(),
        registration_token: "load-token".into(),
        devices,
        threads,
        seconds,
        targets,
        sources,
        spread: Vec::new(),
        cpu_of: Vec::new(),
        cpu_groups,
        fleet,
        watch: Some((child.id(), data.clone())),
    };
    let mut report = router::load::run(&spec);
    // SIGKILL, then every acknowledged deposit is looked for in the store.
    let _ = child.kill();
    let _ = child.wait();
    if let Ok(r) = report.as_mut() {
        let store: Result<Box<dyn Store>, _> = match (args.get(3), args.get(4)) {
            (Some(url), Some(schema)) => {
                PgStore::connect_with_schema(url, schema).map(|s| Box::new(s) as Box<dyn Store>)
            }
            _ => SqliteStore::open_dir(&data).map(|s| Box::new(s) as Box<dyn Store>),
        };
        if let Err(e) = store.and_then(|mut st| router::load::check_durable(r, st.as_mut())) {
            eprintln!("the store after the kill: {e}");
            std::process::exit(1);
        }
    }
    let _ = std::fs::remove_dir_all(&data);
    match report {
        Ok(r) => println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default()),
        Err(e) => {
            eprintln!("load failed: {e}");
            std::process::exit(1);
        }
    }
}
