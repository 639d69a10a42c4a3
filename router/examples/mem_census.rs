//! Where the router's memory goes: the application core in process on a
//! SQLite store in a temporary directory, under a counting allocator, in
//! phases: facts (sources and targets), registrations, then leases with
//! their deposits until every target has been observed, then again until
//! each has been observed `ROUNDS` times. After each phase it prints the
//! live heap, its growth per target or per device, and the high-water
//! mark so far (a snapshot's serialization is the transient peak). The
//! figures are bytes the router's own allocations hold (SQLite's page
//! cache is allocated by SQLite itself and not counted).
//!
//! `cargo run --release -p router --example mem_census -- [DEVICES] [TARGETS] [SOURCES] [ROUNDS]`
//! (defaults 10,000 devices, 100,000 targets, 1,000 sources, 2 rounds;
//! docs/router.md, "The small box").

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};

use router::api::LeaseRequest;
use router::config::RouterConfig;
use router::load::{
    population_facts_in_batches, register_in_process, success_deposit, FACTS_BATCH,
};
use router::store::SqliteStore;
use router::Router;

/// mimalloc (routerd's allocator; see `INNER`) with a count of the bytes live and
/// their high-water mark.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
#[cfg(not(system_alloc))]
static INNER: mimalloc::MiMalloc = mimalloc::MiMalloc;
/// `--cfg system_alloc`: the system allocator, so that a heap profiler
/// that intercepts `malloc` (valgrind's massif) sees every allocation.
#[cfg(system_alloc)]
static INNER: std::alloc::System = std::alloc::System;

fn grew(n: usize) {
    let now = LIVE.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call forwards to mimalloc with the same layout; the
// counters are side bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        grew(l.size());
        unsafe { INNER.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { INNER.dealloc(p, l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        grew(l.size());
        unsafe { INNER.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new >= l.size() {
            grew(new - l.size());
        } else {
            LIVE.fetch_sub(l.size() - new, Ordering::Relaxed);
        }
        unsafe { INNER.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// One phase's line: the heap now, its growth over `before` per `per`
/// unit, and the high-water mark so far.
fn report(phase: &str, before: usize, per: usize, unit: &str) {
    let now = live();
    let grown = now as f64 - before as f64;
    println!(
        "{{\"phase\": \"{phase}\", \"live_mib\": {:.1}, \"grown_mib\": {:.1}, \"bytes_per_{unit}\": {:.0}, \"peak_mib\": {:.1}}}",
        now as f64 / 1048576.0,
        grown / 1048576.0,
        grown / per.max(1) as f64,
        PEAK.load(Ordering::Relaxed) as f64 / 1048576.0
    );
}

/// Leases and deposits, devices in turn, until `observations` deposits
/// have been folded (or no lease grants anything for a whole pass).
fn observe(r: &mut Router, devices: &[(String, String)], observations: usize, now: &mut f64) {
    let mut done = 0usize;
    let mut idle = 0usize;
    let mut n = 0usize;
    while done < observations && idle < devices.len() {
        let (id, secret) = &devices[n % devices.len()];
        n += 1;
        *now += 0.0005;
        if n % 2000 == 0 {
            r.tick(*now).expect("tick");
        }
        let l = r
            .lease(
                &LeaseRequest {
                    device_id: id.clone(),
                    device_secret: secret.clone(),
                    max_items: 8,
                    wait_s: None,
                },
                *now,
            )
            .expect("lease");
        idle = if l.items.is_empty() { idle + 1 } else { 0 };
        for it in &l.items {
            let hash = format!("{:064x}", done as u128 * 0x9e37_79b9_7f4a_7c15);
            r.deposit(&success_deposit(id, secret, &l.lease_id, it, &hash), *now)
                .expect("deposit");
            done += 1;
        }
        // routerd's shell drains the events after every request (its event
        // log and stream): so does the census.
        drop(r.drain_events());
    }
    println!("{{\"observations\": {done}, \"leases\": {n}, \"clock_s\": {now:.1}}}");
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let devices = args.first().copied().unwrap_or(10_000);
    let targets = args.get(1).copied().unwrap_or(100_000);
    let sources = args.get(2).copied().unwrap_or(1_000).max(1);
    let rounds = args.get(3).copied().unwrap_or(2);
    let dir = tempfile::tempdir().expect("temporary directory");
    let cfg = RouterConfig {
        device_rate: (1e9, 1e9),
        registration_rate: (1e9, 1e9),
        discovery_per_window: usize::MAX,
        ..RouterConfig::default()
    };
    let base = live();
    let store = SqliteStore::open_dir(dir.path()).expect("store");
    let mut r = Router::open(cfg.clone(), Box::new(store), 0.0).expect("open");
    report("open", base, 1, "router");

    // As the load seeds them: one request per batch, built as it is sent.
    let before = live();
    for f in population_facts_in_batches(targets, sources, FACTS_BATCH) {
        r.put_facts(&f, 0.0).expect("facts");
    }
    report("facts", before, targets, "target");

    let before = live();
    let secrets = register_in_process(&mut r, devices, 0.5).expect("register");
    report("register", before, devices, "device");

    let mut now = 1.0;
    r.tick(now).expect("tick");
    for round in 1..=rounds {
        let before = live();
        observe(&mut r, &secrets, targets, &mut now);
        r.tick(now).expect("tick");
        report(&format!("observed x{round}"), before, targets, "target");
    }
    snapshot_phase(&mut r, now + 10.0);
}

/// One snapshot taken and written on its own: the heap it adds at its
/// peak over the live heap before it, and the JSON of its two largest
/// parts (the field and the targets).
fn snapshot_phase(r: &mut Router, now: f64) {
    let field = serde_json::to_vec(r.field()).map_or(0, |v| v.len());
    let targets = serde_json::to_vec(&r.targets_table()).map_or(0, |v| v.len());
    let before = live();
    PEAK.store(before, Ordering::Relaxed);
    r.mark_dirty();
    r.persist(now).expect("snapshot");
    println!(
        "{{\"phase\": \"snapshot\", \"transient_mib\": {:.1}, \"field_json_mib\": {:.1}, \"targets_json_mib\": {:.1}}}",
        (PEAK.load(Ordering::Relaxed) - before) as f64 / 1048576.0,
        field as f64 / 1048576.0,
        targets as f64 / 1048576.0
    );
}
