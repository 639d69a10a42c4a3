//! Plain Tokio, and Rayon plus Tokio: the off-the-shelf alternatives.

use std::sync::Arc;

use fleet::ledger::{BinWitness, CycleMerge};
use fleet::receipt::Receipt;
use fleet::{FailReason, WorkerRole};
use fleet_workloads::corpus::{CycleCase, PathCase};
use fleet_workloads::pools::{CurrentPools, PoolSet};
use fleet_workloads::replay::host::Merged;
use fleet_workloads::replay::record::BinRecord;
use fleet_workloads::replay::units::{
    resolve_step, simulate, walk_bin, CycleShared, Scale, SimJoin,
};
use fleet_workloads::replay::CycleHost;
use futures::FutureExt;

use super::{cpu_count, rayon_pool, runtime, solve_bins, SpawnCounter};

fn tokio_sim_join(handle: tokio::runtime::Handle, scale: Scale) -> SimJoin {
    Arc::new(move |sim, pools: Arc<PoolSet>, path: PathCase| {
        let task = handle.spawn(simulate(sim, pools, path, scale));
        async move { task.await.map_err(|_| FailReason::LaneDeath) }.boxed()
    })
}

/// One multi-thread Tokio runtime sized to the CPU count; CPU units
/// (resolve, walks) go to `spawn_blocking`, sims are tasks.
pub struct PlainTokio {
    rt: tokio::runtime::Runtime,
    spawned: SpawnCounter,
}

impl PlainTokio {
    /// Builds the runtime (`cpus` workers, Tokio's default blocking pool).
    pub fn new() -> std::io::Result<Self> {
        let spawned = SpawnCounter::default();
        Ok(PlainTokio {
            rt: runtime(cpu_count(), "tokio-rt", &spawned)?,
            spawned,
        })
    }
}

impl CycleHost for PlainTokio {
    fn resolve(
        &self,
        prev: Arc<PoolSet>,
        case: Arc<CycleCase>,
        scale: Scale,
    ) -> Result<Arc<PoolSet>, String> {
        let task = self
            .rt
            .spawn_blocking(move || resolve_step(&prev, &case, scale));
        self.rt.block_on(task).map_err(|e| e.to_string())
    }

    fn solve(
        &self,
        shared: Arc<CycleShared>,
        witnesses: Vec<BinWitness>,
        merge: CycleMerge,
    ) -> Result<(Vec<Option<BinRecord>>, Merged), String> {
        let merge = self.rt.spawn(async move { merge.run().await.ok() });
        solve_bins(
            witnesses,
            |b, w| {
                let handle = self.rt.handle().clone();
                let join = tokio_sim_join(handle.clone(), shared.scale);
                let shared = shared.clone();
                self.rt
                    .spawn_blocking(move || handle.block_on(walk_bin(shared, b, w, join)))
            },
            |h| self.rt.block_on(h).ok(),
            || self.rt.block_on(merge).map_err(|e| e.to_string()),
        )
    }

    fn threads_spawned(&self) -> u64 {
        self.spawned.get()
    }

    fn background(
        &self,
        _role: WorkerRole,
        cpu_us: u64,
        pools: CurrentPools,
        probe: PathCase,
    ) -> Result<Receipt, String> {
        Ok(super::background_job(cpu_us, pools, probe, |job| {
            self.rt.spawn_blocking(job);
        }))
    }
}

/// A Rayon pool (`cpus` threads) for CPU units plus a Tokio runtime
/// (`cpus` workers) for sims and the merge.
pub struct RayonTokio {
    pool: rayon::ThreadPool,
    rt: tokio::runtime::Runtime,
    spawned: SpawnCounter,
}

impl RayonTokio {
    /// Builds both pools, each sized to the CPU count.
    pub fn new() -> std::io::Result<Self> {
        let spawned = SpawnCounter::default();
        let pool = rayon_pool(cpu_count(), "rayon-cpu", &spawned)?;
        Ok(RayonTokio {
            pool,
            rt: runtime(cpu_count(), "tokio-sim", &spawned)?,
            spawned,
        })
    }
}

impl CycleHost for RayonTokio {
    fn resolve(
        &self,
        prev: Arc<PoolSet>,
        case: Arc<CycleCase>,
        scale: Scale,
    ) -> Result<Arc<PoolSet>, String> {
        Ok(self.pool.install(|| resolve_step(&prev, &case, scale)))
    }

    fn solve(
        &self,
        shared: Arc<CycleShared>,
        witnesses: Vec<BinWitness>,
        merge: CycleMerge,
    ) -> Result<(Vec<Option<BinRecord>>, Merged), String> {
        let merge = self.rt.spawn(async move { merge.run().await.ok() });
        let handle = self.rt.handle().clone();
        let (tx, rx) = crossbeam_channel::unbounded();
        // The scope returns when every walk has finished.
        self.pool.scope(|s| {
            for (b, w) in witnesses.into_iter().enumerate() {
                let join = tokio_sim_join(handle.clone(), shared.scale);
                let shared = shared.clone();
                let tx = tx.clone();
                s.spawn(move |_| {
                    let rec = futures::executor::block_on(walk_bin(shared, b, w, join));
                    let _ = tx.send((b, rec));
                });
            }
        });
        drop(tx);
        let mut slots: Vec<Option<BinRecord>> = vec![None; shared.case.bins.len()];
        for (b, rec) in rx.iter() {
            slots[b] = Some(rec);
        }
        let merged = self.rt.block_on(merge).map_err(|e| e.to_string())?;
        Ok((slots, merged))
    }

    fn threads_spawned(&self) -> u64 {
        self.spawned.get()
    }

    fn background(
        &self,
        _role: WorkerRole,
        cpu_us: u64,
        pools: CurrentPools,
        probe: PathCase,
    ) -> Result<Receipt, String> {
        Ok(super::background_job(cpu_us, pools, probe, |job| {
            self.pool.spawn(job);
        }))
    }
}
