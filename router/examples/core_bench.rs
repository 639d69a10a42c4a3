//! The application core in process (no HTTP): 1,000 registered devices,
//! 20,000 targets on 50 sources (the load generator's population,
//! `router::load::population_facts`); each lease (2 items) followed by its
//! deposits; a tick every simulated second. Prints leases/s and lease
//! latency percentiles, to separate the core's cost from the shell's.
//!
//! `cargo run --release -p router --example core_bench -- [DEVICES] [LEASES]`

use std::time::Instant;

use router::api::LeaseRequest;
use router::config::RouterConfig;
use router::load::{population_facts, register_in_process, success_deposit};
use router::store::MemoryStore;
use router::Router;

#[cfg(not(system_alloc))]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let devices = args.first().copied().unwrap_or(1000);
    let leases = args.get(1).copied().unwrap_or(50_000);
    let cfg = RouterConfig {
        device_rate: (1e9, 1e9),
        ..RouterConfig::default()
    };
    let mut r = Router::open(cfg.clone(), Box::new(MemoryStore::new()), 0.0).expect("open");
    // 50 sources whose politeness never binds, 20,000 targets over them.
    let facts = population_facts(20_000, 50);
    r.put_facts(&facts, 0.0).expect("facts");
    let secrets = register_in_process(&mut r, devices, 0.0).expect("register");
    r.tick(1.0).expect("tick");
    let mut lat = Vec::with_capacity(leases);
    let mut items = 0usize;
    let mut tick_us = Vec::new();
    let t0 = Instant::now();
    for n in 0..leases {
        let now = 1.0 + n as f64 * 0.001;
        if n % 1000 == 999 {
            let t = Instant::now();
            r.tick(now).expect("tick");
            tick_us.push(t.elapsed().as_micros() as u64);
        }
        let (id, secret) = &secrets[n % devices];
        let t = Instant::now();
        let l = r
            .lease(
                &LeaseRequest {
                    device_id: id.clone(),
                    device_secret: secret.clone(),
                    max_items: 2,
                    wait_s: None,
                },
                now,
            )
            .expect("lease");
        lat.push(t.elapsed().as_nanos() as u64);
        for it in &l.items {
            items += 1;
            r.deposit(&success_deposit(id, secret, &l.lease_id, it, "h"), now)
                .expect("deposit");
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    lat.sort_unstable();
    let p = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
    tick_us.sort_unstable();
    println!(
        "{{\"devices\": {devices}, \"leases\": {leases}, \"items\": {items}, \"wall_s\": {wall:.3}, \"lease_us_p50\": {:.1}, \"lease_us_p99\": {:.1}, \"lease_us_max\": {:.1}, \"leases_per_s_core_only\": {:.0}, \"tick_ms_p50\": {:.2}}}",
        p(0.5),
        p(0.99),
        p(1.0),
        leases as f64 / (lat.iter().sum::<u64>() as f64 / 1e9),
        tick_us.get(tick_us.len() / 2).copied().unwrap_or(0) as f64 / 1000.0
    );
}
