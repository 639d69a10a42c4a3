//! The outcome pipe: lanes send path outcomes; one merge future per cycle
//! drains them into the shared ledger.
//!
//! The pipe is a `futures` unbounded channel, so a lane sends without
//! blocking from any thread and the merge is a plain future: on the pinned
//! binding it runs on the merge seat under `block_on`, on the serial binding
//! it shares the cycle thread with the walks and only ever yields, never
//! blocks (`DESIGN.md` §4). The ledger lock is held for one check at a time
//! and never across an `.await`.
//!
//! A cycle's merge ends when every [`OutcomeSender`] of the cycle is dropped
//! (each bin's [`super::BinWitness`] owns one); it then runs the exactness
//! check, so a duplicate that arrives after the last expected outcome is still
//! caught. A merge dropped mid-drain (after it started, before the cycle
//! closed: the host running it died) trips the fuse with
//! [`FuseTrip::Stranded`]: a stranded result pipe is a loud stop, never a
//! silent one (seed 000 §10.3).

use super::{CycleId, CycleRecord, ExactnessFuse, FuseTrip, OutcomeLedger, PathId};
use crate::outcome::PathOutcome;
use futures::channel::mpsc;
use futures::StreamExt;
use parking_lot::Mutex;
use std::sync::Arc;

/// The merge is gone: an outcome sent now would land in a pipe nobody drains.
/// Seen only after a fuse trip under a test hook (the production fuse aborts
/// first) or when the merge future was dropped unpolled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("outcome pipe of cycle {cycle} is closed (path {path}): its merge stopped; the cycle cannot be exact")]
pub struct PipeClosed {
    /// The cycle whose merge is gone.
    pub cycle: CycleId,
    /// The path whose outcome was not delivered.
    pub path: PathId,
}

/// The outcome ledger shared by every cycle's merge. Cheap to clone.
#[derive(Clone, Debug)]
pub struct SharedLedger(Arc<Mutex<OutcomeLedger>>);

impl SharedLedger {
    /// An empty ledger guarded by `fuse`.
    pub fn new(fuse: ExactnessFuse) -> Self {
        SharedLedger(Arc::new(Mutex::new(OutcomeLedger::new(fuse))))
    }

    /// Opens `cycle` with its submitted `paths` and returns the cycle's pipe:
    /// the sender (clone one per bin) and the merge future.
    ///
    /// Errors: the [`OutcomeLedger::open`] trips (cycle reopened, a path
    /// submitted twice), after the fuse ran.
    pub fn open_cycle(
        &self,
        cycle: CycleId,
        paths: &[PathId],
    ) -> Result<(OutcomeSender, CycleMerge), FuseTrip> {
        self.0.lock().open(cycle, paths)?;
        let (tx, rx) = mpsc::unbounded();
        Ok((
            OutcomeSender { cycle, tx },
            CycleMerge {
                cycle,
                rx,
                ledger: self.clone(),
                state: MergeState::Unstarted,
            },
        ))
    }

    /// Runs `f` on the ledger under its lock (keep `f` short; never block in it).
    pub fn with<R>(&self, f: impl FnOnce(&mut OutcomeLedger) -> R) -> R {
        f(&mut self.0.lock())
    }
}

/// Opens `cycle` on `ledger`; see [`SharedLedger::open_cycle`].
pub fn open_cycle(
    ledger: &SharedLedger,
    cycle: CycleId,
    paths: &[PathId],
) -> Result<(OutcomeSender, CycleMerge), FuseTrip> {
    ledger.open_cycle(cycle, paths)
}

/// One path outcome in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Delivery {
    path: PathId,
    outcome: PathOutcome,
}

/// The sending end of one cycle's outcome pipe. `Clone + Send`; sending never
/// blocks.
#[derive(Clone, Debug)]
pub struct OutcomeSender {
    cycle: CycleId,
    tx: mpsc::UnboundedSender<Delivery>,
}

impl OutcomeSender {
    /// The cycle this pipe belongs to.
    pub fn cycle(&self) -> CycleId {
        self.cycle
    }

    /// Sends `path`'s outcome to the merge.
    ///
    /// Errors: [`PipeClosed`] when the merge has stopped.
    pub fn send(&self, path: PathId, outcome: PathOutcome) -> Result<(), PipeClosed> {
        self.tx
            .unbounded_send(Delivery { path, outcome })
            .map_err(|_| PipeClosed {
                cycle: self.cycle,
                path,
            })
    }
}

/// The merge of one cycle: a future that records every outcome in the shared
/// ledger, and, once every sender is dropped, closes the cycle with the
/// exactness check.
#[must_use = "a merge that is not run strands its cycle's outcomes"]
#[derive(Debug)]
pub struct CycleMerge {
    cycle: CycleId,
    rx: mpsc::UnboundedReceiver<Delivery>,
    ledger: SharedLedger,
    state: MergeState,
}

/// How far a merge got (its drop checks it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MergeState {
    /// Never polled.
    Unstarted,
    /// Draining the pipe.
    Draining,
    /// Closed the cycle, or stopped at a fuse trip (already loud).
    Ended,
}

impl Drop for CycleMerge {
    fn drop(&mut self) {
        if self.state == MergeState::Draining {
            self.ledger.with(|l| l.strand(self.cycle));
        }
    }
}

impl CycleMerge {
    /// The cycle this merge closes.
    pub fn cycle(&self) -> CycleId {
        self.cycle
    }

    /// Drains the pipe and closes the cycle. Never blocks the thread; yields
    /// while the pipe is empty.
    ///
    /// Errors: the first [`FuseTrip`] (after the fuse ran); the merge stops
    /// there and later sends get [`PipeClosed`].
    ///
    /// Dropping the future mid-drain (the host running it died) trips the
    /// fuse with [`FuseTrip::Stranded`]; dropping it unpolled does not
    /// (nothing was drained: the caller still holds the refusal).
    pub async fn run(mut self) -> Result<CycleRecord, FuseTrip> {
        self.state = MergeState::Draining;
        while let Some(d) = self.rx.next().await {
            let recorded = self
                .ledger
                .with(|l| l.record(self.cycle, d.path, d.outcome));
            if let Err(trip) = recorded {
                self.state = MergeState::Ended;
                return Err(trip);
            }
        }
        self.state = MergeState::Ended;
        self.ledger.with(|l| l.close(self.cycle))
    }

    /// [`CycleMerge::run`] on the calling thread, blocking it until the
    /// cycle closes (for a dedicated merge seat; never on the serial thread).
    pub fn wait(self) -> Result<CycleRecord, FuseTrip> {
        futures::executor::block_on(self.run())
    }
}
