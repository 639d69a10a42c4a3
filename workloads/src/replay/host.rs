//! The seam between the replay driver and what executes a cycle's units.
//!
//! The fleet is one [`CycleHost`]; the designs it replaces (the pile of
//! pools, plain Tokio, Rayon plus Tokio) are others, so every contender is
//! driven and measured by the same harness on the same units.

use std::sync::Arc;

use fleet::ledger::{BinWitness, CycleMerge};
use fleet::receipt::Receipt;
use fleet::WorkerRole;
use fleet_bindings::FleetHandle;
use futures::FutureExt;

use crate::corpus::{CycleCase, PathCase};
use crate::pools::PoolSet;
use crate::replay::record::BinRecord;
use crate::replay::units::{background_body, resolve_body, walk_body, CycleShared, Scale};

/// What the merge of a cycle produced: the closed cycle's record (every
/// path's one outcome), or `None` when the exactness fuse tripped (it has
/// already stopped loudly through its hook).
pub type Merged = Option<fleet::ledger::CycleRecord>;

/// Executes the units of a cycle.
pub trait CycleHost {
    /// Runs the resolve and returns the pool states the cycle solves on.
    fn resolve(
        &self,
        prev: Arc<PoolSet>,
        case: Arc<CycleCase>,
        scale: Scale,
    ) -> Result<Arc<PoolSet>, String>;
    /// Runs every bin's walk (with its sims) and the merge, and waits for
    /// all of them. `witnesses[b]` is bin b's witness; `merge` is the merge's
    /// end of the outcome pipe (`merge`). A bin that died reports `None`.
    fn solve(
        &self,
        shared: Arc<CycleShared>,
        witnesses: Vec<BinWitness>,
        merge: CycleMerge,
    ) -> Result<(Vec<Option<BinRecord>>, Merged), String>;
    /// Submits background CPU for a deferrable role; the receipt resolves
    /// when it ran (or terminally).
    fn background(
        &self,
        role: WorkerRole,
        cpu_us: u64,
        pools: Arc<PoolSet>,
        probe: PathCase,
    ) -> Result<Receipt, String>;
    /// OS threads this host has spawned itself so far (a baseline counts
    /// its pools' workers and every per-unit thread; the fleet spawns none
    /// after boot and reports 0).
    fn threads_spawned(&self) -> u64 {
        0
    }
}

/// The fleet as a [`CycleHost`]: every unit is submitted through the lane
/// interface of a booted fleet.
pub struct FleetHost {
    fleet: FleetHandle,
}

impl FleetHost {
    /// Wraps a booted fleet's handle.
    pub fn new(fleet: FleetHandle) -> Self {
        FleetHost { fleet }
    }
}

impl CycleHost for FleetHost {
    fn resolve(
        &self,
        prev: Arc<PoolSet>,
        case: Arc<CycleCase>,
        scale: Scale,
    ) -> Result<Arc<PoolSet>, String> {
        let value = self
            .fleet
            .submit(WorkerRole::Resolve, None, resolve_body(prev, case, scale))
            .map_err(|e| format!("resolve refused: {e}"))?
            .wait()
            .map_err(|e| format!("resolve ended without a value: {e}"))?;
        value
            .downcast::<Arc<PoolSet>>()
            .map(|b| *b)
            .map_err(|_| "resolve returned an unexpected value".into())
    }

    fn solve(
        &self,
        shared: Arc<CycleShared>,
        witnesses: Vec<BinWitness>,
        merge: CycleMerge,
    ) -> Result<(Vec<Option<BinRecord>>, Merged), String> {
        let merge_body: fleet_bindings::UnitBody = Box::new(move |_ctx| {
            async move { Box::new(merge.run().await.ok()) as fleet::receipt::UnitValue }.boxed()
        });
        let merge_receipt = self
            .fleet
            .submit(WorkerRole::Merge, Some(0), merge_body)
            .map_err(|e| format!("merge refused: {e}"))?;
        let mut walks = Vec::with_capacity(witnesses.len());
        for (b, witness) in witnesses.into_iter().enumerate() {
            let r = self
                .fleet
                .submit(
                    WorkerRole::Solver,
                    Some(b as u32),
                    walk_body(shared.clone(), b, witness),
                )
                .map_err(|e| format!("walk of bin {b} refused: {e}"))?;
            walks.push(r);
        }
        let bins = walks
            .into_iter()
            .map(|r| {
                r.wait()
                    .ok()
                    .and_then(|v| v.downcast::<BinRecord>().ok())
                    .map(|b| *b)
            })
            .collect();
        let merged = merge_receipt
            .wait()
            .map_err(|e| format!("merge ended without a value: {e}"))?;
        let merged = *merged
            .downcast::<Merged>()
            .map_err(|_| "merge returned an unexpected value".to_string())?;
        Ok((bins, merged))
    }

    fn background(
        &self,
        role: WorkerRole,
        cpu_us: u64,
        pools: Arc<PoolSet>,
        probe: PathCase,
    ) -> Result<Receipt, String> {
        self.fleet
            .submit(role, None, background_body(cpu_us, pools, probe))
            .map_err(|e| e.to_string())
    }
}
