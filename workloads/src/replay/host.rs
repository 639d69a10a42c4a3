//! The seam between the replay driver and what executes a cycle's units.
//!
//! The fleet is one [`CycleHost`]; the designs it replaces (the pile of
//! pools, plain Tokio, Rayon plus Tokio) are others, so every contender is
//! driven and measured by the same harness on the same units.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fleet::ledger::{BinWitness, CycleMerge};
use fleet::receipt::{Receipt, TerminalReason};
use fleet::{FailReason, WorkerRole};
use fleet_bindings::FleetHandle;
use futures::FutureExt;

use crate::corpus::{CycleCase, PathCase};
use crate::pools::{CurrentPools, PoolSet};
use crate::replay::record::BinRecord;
use crate::replay::units::{background_body, resolve_body, walk_body, CycleShared, Scale};

/// What the merge of a cycle produced: the closed cycle's record (every
/// path's one outcome), or `None` when the exactness fuse tripped (it has
/// already stopped loudly through its hook).
pub type Merged = Option<fleet::ledger::CycleRecord>;

/// Why a unit the cycle needs gave no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitFailure {
    /// Refused, or ended without a value (the host's reason).
    #[error("{0}")]
    Failed(String),
    /// No answer within the deadline (a hung unit): counted, and the
    /// replay accounts the cycle's paths as `Failed(Overrun)`.
    #[error("no answer within the {deadline_ms} ms deadline: the {role} unit overran")]
    Overrun {
        /// The unit's role.
        role: WorkerRole,
        /// The deadline that passed, ms.
        deadline_ms: u64,
    },
}

/// What a cycle's solve produced ([`CycleHost::solve_within`]).
#[derive(Debug)]
pub struct Solved {
    /// Each bin's record; `None` for a bin whose walk died or overran (its
    /// owed paths were paid `Failed(LaneDeath)` or `Failed(Overrun)`).
    pub bins: Vec<Option<BinRecord>>,
    /// The merge's result (`None` also when the merge overran).
    pub merged: Merged,
    /// Walks that gave no answer within the deadline.
    pub walk_overruns: u32,
    /// Whether the merge gave no answer within its deadline (the cycle's
    /// outcomes are then missing from the run).
    pub merge_overrun: bool,
}

impl Solved {
    /// The bins and the merge, as [`CycleHost::solve`] returns them (the
    /// overrun counts dropped).
    pub fn into_parts(self) -> (Vec<Option<BinRecord>>, Merged) {
        (self.bins, self.merged)
    }
}

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
    /// [`CycleHost::resolve`] with every wait bounded by `deadline`; an
    /// overrun is [`UnitFailure::Overrun`]. The default (the baselines)
    /// calls `resolve` and does not bound it.
    fn resolve_within(
        &self,
        prev: Arc<PoolSet>,
        case: Arc<CycleCase>,
        scale: Scale,
        deadline: Duration,
    ) -> Result<Arc<PoolSet>, UnitFailure> {
        let _ = deadline;
        self.resolve(prev, case, scale).map_err(UnitFailure::Failed)
    }
    /// [`CycleHost::solve`] with every wait bounded by `deadline`: a walk
    /// past it is settled (its owed paths `Failed(Overrun)`, so the merge
    /// closes exact) and counted in [`Solved`]. The default (the baselines)
    /// calls `solve` and does not bound it.
    fn solve_within(
        &self,
        shared: Arc<CycleShared>,
        witnesses: Vec<BinWitness>,
        merge: CycleMerge,
        deadline: Duration,
    ) -> Result<Solved, String> {
        let _ = deadline;
        let (bins, merged) = self.solve(shared, witnesses, merge)?;
        Ok(Solved {
            bins,
            merged,
            walk_overruns: 0,
            merge_overrun: false,
        })
    }
    /// Submits `cpu_us` of background CPU for a deferrable role, spent along
    /// `probe`'s hops on the states `pools` holds when the unit runs (never
    /// a copy taken at submit: decision 0011); the receipt resolves when it
    /// ran (or terminally). Errors: the host's refusal, as text.
    fn background(
        &self,
        role: WorkerRole,
        cpu_us: u64,
        pools: CurrentPools,
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
/// interface of a booted fleet, and every wait on a receipt has a deadline
/// (`DESIGN.md` §3 "Outcome ledger": an overrun is a typed, counted
/// `Failed(Overrun)`; nothing hangs).
pub struct FleetHost {
    fleet: FleetHandle,
    /// The bound on each receipt wait of `resolve` and `solve`.
    deadline: Duration,
}

impl FleetHost {
    /// Wraps a booted fleet's handle; its waits are bounded by
    /// [`crate::replay::DEFAULT_UNIT_DEADLINE`] (the replay passes the one
    /// it derives from the cycle budget through the `_within` methods).
    pub fn new(fleet: FleetHandle) -> Self {
        FleetHost {
            fleet,
            deadline: crate::replay::DEFAULT_UNIT_DEADLINE,
        }
    }

    /// The same host with `deadline` bounding `resolve` and `solve`'s waits.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }
}

impl CycleHost for FleetHost {
    fn resolve(
        &self,
        prev: Arc<PoolSet>,
        case: Arc<CycleCase>,
        scale: Scale,
    ) -> Result<Arc<PoolSet>, String> {
        self.resolve_within(prev, case, scale, self.deadline)
            .map_err(|e| e.to_string())
    }

    fn solve(
        &self,
        shared: Arc<CycleShared>,
        witnesses: Vec<BinWitness>,
        merge: CycleMerge,
    ) -> Result<(Vec<Option<BinRecord>>, Merged), String> {
        self.solve_within(shared, witnesses, merge, self.deadline)
            .map(Solved::into_parts)
    }

    fn resolve_within(
        &self,
        prev: Arc<PoolSet>,
        case: Arc<CycleCase>,
        scale: Scale,
        deadline: Duration,
    ) -> Result<Arc<PoolSet>, UnitFailure> {
        let role = WorkerRole::Resolve;
        let answer = self
            .fleet
            .submit(role, None, resolve_body(prev, case, scale))
            .map_err(|e| UnitFailure::Failed(format!("resolve refused: {e}")))?
            .wait_deadline(deadline, Some(role));
        let value = match answer {
            Ok(v) => v,
            Err(TerminalReason::Overrun { deadline_ms }) => {
                return Err(UnitFailure::Overrun { role, deadline_ms })
            }
            Err(e) => {
                return Err(UnitFailure::Failed(format!(
                    "resolve ended without a value: {e}"
                )))
            }
        };
        value
            .downcast::<Arc<PoolSet>>()
            .map(|b| *b)
            .map_err(|_| UnitFailure::Failed("resolve returned an unexpected value".into()))
    }

    fn solve_within(
        &self,
        shared: Arc<CycleShared>,
        witnesses: Vec<BinWitness>,
        merge: CycleMerge,
        deadline: Duration,
    ) -> Result<Solved, String> {
        let merge_body: fleet_bindings::UnitBody = Box::new(move |_ctx| {
            async move { Box::new(merge.run().await.ok()) as fleet::receipt::UnitValue }.boxed()
        });
        let merge_receipt = self
            .fleet
            .submit(WorkerRole::Merge, Some(0), merge_body)
            .map_err(|e| format!("merge refused: {e}"))?;
        let settlers: Vec<_> = witnesses.iter().map(BinWitness::settler).collect();
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
        // Every walk is bounded by `deadline` from here; the merge, whose
        // senders are then all answered or settled, by `deadline` after that.
        let until = Instant::now().checked_add(deadline);
        let left = || until.map_or(deadline, |u| u.saturating_duration_since(Instant::now()));
        let mut walk_overruns = 0;
        let bins = walks
            .into_iter()
            .zip(&settlers)
            .map(
                |(r, settle)| match r.wait_deadline(left(), Some(WorkerRole::Solver)) {
                    Ok(v) => v.downcast::<BinRecord>().ok().map(|b| *b),
                    Err(TerminalReason::Overrun { .. }) => {
                        // The hung walk still holds its witness: pay what it
                        // owes here so the merge closes exact without it.
                        settle.settle_owed(FailReason::Overrun);
                        walk_overruns += 1;
                        None
                    }
                    // A dead walk's witness paid `Failed(LaneDeath)` as it dropped.
                    Err(_) => None,
                },
            )
            .collect();
        let (merged, merge_overrun) =
            match merge_receipt.wait_deadline(deadline, Some(WorkerRole::Merge)) {
                Ok(v) => (
                    *v.downcast::<Merged>()
                        .map_err(|_| "merge returned an unexpected value".to_string())?,
                    false,
                ),
                Err(TerminalReason::Overrun { .. }) => (None, true),
                Err(e) => return Err(format!("merge ended without a value: {e}")),
            };
        Ok(Solved {
            bins,
            merged,
            walk_overruns,
            merge_overrun,
        })
    }

    fn background(
        &self,
        role: WorkerRole,
        cpu_us: u64,
        pools: CurrentPools,
        probe: PathCase,
    ) -> Result<Receipt, String> {
        self.fleet
            .submit(role, None, background_body(cpu_us, pools, probe))
            .map_err(|e| e.to_string())
    }
}
