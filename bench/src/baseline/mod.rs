//! The designs the fleet replaces, as [`CycleHost`](fleet_workloads::replay::CycleHost)s driven by the same
//! replay harness on the same units (`DESIGN.md` §6; seed 000 §1 and seed
//! 001 "Context"):
//!
//! - [`PileOfPools`]: a solve runtime with a thread per bin, a sim semaphore
//!   sized `leftover × 2`, one short-lived OS thread spawned per sim, the
//!   Rayon global-style pool for resolve, a merge sidecar thread, and an
//!   ambient runtime — each sized on its own from the CPU count;
//! - [`PlainTokio`]: one multi-thread Tokio runtime, `spawn_blocking` for
//!   CPU units;
//! - [`RayonTokio`]: a Rayon pool for CPU units plus a Tokio runtime for sims.
//!
//! Every host counts the OS threads it spawns itself, so the report can
//! show threads created even when they live too briefly to be sampled.

mod pile;
mod plain;

pub use pile::PileOfPools;
pub use plain::{PlainTokio, RayonTokio};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Counts threads a baseline spawns (runtime workers, rayon threads, the
/// sidecar, and every per-sim thread).
#[derive(Debug, Default, Clone)]
pub struct SpawnCounter(Arc<AtomicU64>);

impl SpawnCounter {
    /// One more thread.
    pub fn add(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// Threads counted so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A background job (pool update or crawl step) for a baseline's own pool:
/// `spawn` runs the returned closure on the pool; the receipt resolves when
/// the job's CPU has been spent on the pool states current when it runs.
pub(crate) fn background_job(
    cpu_us: u64,
    pools: fleet_workloads::pools::CurrentPools,
    probe: fleet_workloads::corpus::PathCase,
    spawn: impl FnOnce(Box<dyn FnOnce() + Send>),
) -> fleet::receipt::Receipt {
    let (tx, rx) = fleet::receipt::receipt_pair();
    spawn(Box::new(move || {
        let pools = pools.get();
        fleet_workloads::cpu::burn_cpu_us(cpu_us, &pools, &probe.hops);
        tx.complete(Box::new(()));
    }));
    rx
}

/// A multi-thread Tokio runtime of `workers` threads named `name`, each
/// counted in `spawned` as it starts.
pub(crate) fn runtime(
    workers: usize,
    name: &str,
    spawned: &SpawnCounter,
) -> std::io::Result<tokio::runtime::Runtime> {
    let c = spawned.clone();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name(name)
        .on_thread_start(move || c.add())
        .enable_all()
        .build()
}

/// A Rayon pool of `threads` threads named `{prefix}-{i}`, each counted in
/// `spawned` as it starts.
pub(crate) fn rayon_pool(
    threads: usize,
    prefix: &'static str,
    spawned: &SpawnCounter,
) -> std::io::Result<rayon::ThreadPool> {
    let c = spawned.clone();
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("{prefix}-{i}"))
        .start_handler(move |_| c.add())
        .build()
        .map_err(std::io::Error::other)
}

/// One cycle's solve on a baseline whose walks are joinable handles: with
/// the merge already started, starts a walk per bin (`start`), waits for
/// each in bin order (`wait`; a walk that failed is `None`), then for the
/// merge (`merged`).
///
/// Errors: the merge's, as text.
pub(crate) fn solve_bins<H>(
    witnesses: Vec<fleet::ledger::BinWitness>,
    mut start: impl FnMut(usize, fleet::ledger::BinWitness) -> H,
    wait: impl FnMut(H) -> Option<fleet_workloads::replay::record::BinRecord>,
    merged: impl FnOnce() -> Result<fleet_workloads::replay::host::Merged, String>,
) -> Result<
    (
        Vec<Option<fleet_workloads::replay::record::BinRecord>>,
        fleet_workloads::replay::host::Merged,
    ),
    String,
> {
    let walks: Vec<H> = witnesses
        .into_iter()
        .enumerate()
        .map(|(b, w)| start(b, w))
        .collect();
    let bins = walks.into_iter().map(wait).collect();
    Ok((bins, merged()?))
}

/// The CPUs this process may run on (the affinity mask), at least 1.
pub fn cpu_count() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
