//! The pile of pools: every mechanism sizes itself from the CPU count and
//! nothing bounds their sum.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{unbounded, Sender};
use fleet::ledger::{BinWitness, CycleMerge};
use fleet::receipt::Receipt;
use fleet::{FailReason, WorkerRole};
use fleet_workloads::corpus::{CycleCase, PathCase};
use fleet_workloads::pools::{CurrentPools, PoolSet};
use fleet_workloads::replay::host::Merged;
use fleet_workloads::replay::record::BinRecord;
use fleet_workloads::replay::units::{
    resolve_step, simulate_blocking, walk_bin, CycleShared, Scale, SimJoin,
};
use fleet_workloads::replay::CycleHost;
use futures::FutureExt;

use super::{cpu_count, rayon_pool, runtime, solve_bins, SpawnCounter};

type MergeJob = (CycleMerge, Sender<Merged>);

/// The legacy design, reproduced as a comparison baseline.
pub struct PileOfPools {
    solve_rt: tokio::runtime::Runtime,
    ambient_rt: tokio::runtime::Runtime,
    resolve_pool: rayon::ThreadPool,
    sims: Arc<tokio::sync::Semaphore>,
    merge_tx: Option<Sender<MergeJob>>,
    sidecar: Option<JoinHandle<()>>,
    spawned: SpawnCounter,
    scale: Scale,
}

impl PileOfPools {
    /// Builds every pool, each sized on its own from the CPU count: a solve
    /// runtime with one worker per bin (6), a sim semaphore of
    /// `leftover × 2` where leftover = max(1, cpus − 1), a resolve pool of
    /// `cpus` threads, one merge sidecar, an ambient runtime of `cpus` workers.
    pub fn new(scale: f64, bins: usize) -> std::io::Result<Self> {
        let cpus = cpu_count();
        let spawned = SpawnCounter::default();
        let solve_rt = runtime(bins.max(1), "solve-exec", &spawned)?;
        let ambient_rt = runtime(cpus, "ambient-io", &spawned)?;
        let resolve_pool = rayon_pool(cpus, "rayon", &spawned)?;
        let (merge_tx, merge_rx) = unbounded::<MergeJob>();
        spawned.add();
        let sidecar = std::thread::Builder::new()
            .name("merge-sidecar".into())
            .spawn(move || {
                for (merge, reply) in merge_rx {
                    let _ = reply.send(merge.wait().ok());
                }
            })?;
        Ok(PileOfPools {
            solve_rt,
            ambient_rt,
            resolve_pool,
            sims: Arc::new(tokio::sync::Semaphore::new(Self::sim_permits(cpus))),
            merge_tx: Some(merge_tx),
            sidecar: Some(sidecar),
            spawned,
            scale: Scale(scale),
        })
    }

    /// The legacy sim semaphore's permits on a host of `cpus` CPUs:
    /// `leftover × 2`, leftover = max(1, cpus − 1) (2 on a 2-CPU host).
    pub fn sim_permits(cpus: usize) -> usize {
        cpus.saturating_sub(1).max(1) * 2
    }

    /// The legacy sim path: a permit from the `leftover × 2` semaphore, then
    /// one short-lived OS thread per sim. Started at call time.
    fn sim_join(&self) -> SimJoin {
        let sims = self.sims.clone();
        let spawned = self.spawned.clone();
        let handle = self.solve_rt.handle().clone();
        let scale = self.scale;
        Arc::new(move |sim, pools: Arc<PoolSet>, path: PathCase| {
            let sims = sims.clone();
            let spawned = spawned.clone();
            let task = handle.spawn(async move {
                let _permit = sims
                    .acquire_owned()
                    .await
                    .map_err(|_| FailReason::SimRefused)?;
                let (tx, rx) = futures::channel::oneshot::channel();
                spawned.add();
                std::thread::Builder::new()
                    .name("legacy-sim".into())
                    .spawn(move || {
                        let _ = tx.send(simulate_blocking(&sim, &pools, &path, scale));
                    })
                    .map_err(|_| FailReason::SimRefused)?;
                rx.await.map_err(|_| FailReason::LaneDeath)
            });
            async move { task.await.map_err(|_| FailReason::LaneDeath)? }.boxed()
        })
    }
}

impl CycleHost for PileOfPools {
    fn resolve(
        &self,
        prev: Arc<PoolSet>,
        case: Arc<CycleCase>,
        scale: Scale,
    ) -> Result<Arc<PoolSet>, String> {
        Ok(self
            .resolve_pool
            .install(|| resolve_step(&prev, &case, scale)))
    }

    fn solve(
        &self,
        shared: Arc<CycleShared>,
        witnesses: Vec<BinWitness>,
        merge: CycleMerge,
    ) -> Result<(Vec<Option<BinRecord>>, Merged), String> {
        let (reply_tx, reply_rx) = crossbeam_channel::bounded(1);
        self.merge_tx
            .as_ref()
            .ok_or("merge sidecar gone")?
            .send((merge, reply_tx))
            .map_err(|e| e.to_string())?;
        solve_bins(
            witnesses,
            |b, w| {
                self.solve_rt
                    .spawn(walk_bin(shared.clone(), b, w, self.sim_join()))
            },
            |h| self.solve_rt.block_on(h).ok(),
            || reply_rx.recv().map_err(|e| e.to_string()),
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
            self.ambient_rt.spawn_blocking(job);
        }))
    }
}

impl Drop for PileOfPools {
    fn drop(&mut self) {
        self.merge_tx.take();
        if let Some(h) = self.sidecar.take() {
            let _ = h.join();
        }
    }
}
