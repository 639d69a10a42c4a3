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

/// The CPUs this process may run on (the affinity mask), at least 1.
pub fn cpu_count() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
