//! The per-cycle outcome ledger and the exactness fuse at the merge.
//!
//! Every path of a cycle gets exactly one [`PathOutcome`]; the merge checks
//! `solved + suppressed + failed = submitted` per cycle and that no
//! `(cycle, path)` is seen twice (`DESIGN.md` §3 "Outcome ledger"; seed 000
//! §10.3 and the §11 ops note). A duplicate, a stray path, or a shortfall
//! trips the [`ExactnessFuse`]: an `error` log line, then a loud stop through
//! an injectable hook (process abort by default).
//!
//! The ledger is a pure book (no clocks, threads or I/O). The [`pipe`] module
//! carries outcomes from the lanes to the merge, and [`witness`] is the
//! per-bin guard that turns a lane death into typed `Failed(LaneDeath)`
//! outcomes so the book stays exact.

pub mod fuse;
pub mod pipe;
pub mod witness;

pub use fuse::{ExactnessFuse, FuseHook, FuseTrip};
pub use pipe::{open_cycle, CycleMerge, OutcomeSender, PipeClosed, SharedLedger};
pub use witness::{BinWitness, WitnessSettle};

use crate::outcome::PathOutcome;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A solve cycle's sequence number (one per block).
pub type CycleId = u64;

/// A path's id inside its cycle (stable across bindings: part of the corpus).
pub type PathId = u32;

/// Counts of one cycle's outcomes, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CycleTally {
    /// Paths the cycle submitted (the number the other three must sum to).
    pub submitted: u32,
    /// Paths with a `Solved` outcome.
    pub solved: u32,
    /// Paths with a `Suppressed` outcome.
    pub suppressed: u32,
    /// Paths with a `Failed` outcome (any reason, lane deaths included).
    pub failed: u32,
}

impl CycleTally {
    /// Outcomes received so far: `solved + suppressed + failed`.
    pub const fn received(&self) -> u32 {
        self.solved + self.suppressed + self.failed
    }

    fn count(&mut self, outcome: &PathOutcome) {
        match outcome {
            PathOutcome::Solved { .. } => self.solved += 1,
            PathOutcome::Suppressed => self.suppressed += 1,
            PathOutcome::Failed { .. } => self.failed += 1,
        }
    }
}

/// One closed cycle: every submitted path with its one outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CycleRecord {
    /// The cycle.
    pub cycle: CycleId,
    /// The counts; `tally.received() == tally.submitted` by construction.
    pub tally: CycleTally,
    /// Each submitted path's outcome, in path order.
    pub outcomes: BTreeMap<PathId, PathOutcome>,
}

/// An open cycle's book.
#[derive(Debug)]
struct CycleBook {
    submitted: BTreeSet<PathId>,
    outcomes: BTreeMap<PathId, PathOutcome>,
    tally: CycleTally,
}

/// The outcome ledger: open cycles with their submitted paths, and the ids of
/// closed ones (8 bytes per closed cycle).
///
/// Every check that fails trips the fuse and returns the [`FuseTrip`]; with
/// the default (aborting) fuse the process never sees the `Err`.
///
/// ```
/// use fleet::ledger::{ExactnessFuse, FuseTrip, OutcomeLedger};
/// use fleet::{FailReason, PathOutcome};
///
/// // A fuse that records instead of aborting (tests, dry runs).
/// let mut ledger = OutcomeLedger::new(ExactnessFuse::with_hook(|trip| eprintln!("fuse: {trip}")));
/// ledger.open(7, &[0, 1, 2]).unwrap();
/// ledger.record(7, 0, PathOutcome::Suppressed).unwrap();
/// ledger.record(7, 1, PathOutcome::Solved { amount_in: 10, profit: 3 }).unwrap();
/// ledger.record(7, 2, PathOutcome::Failed { reason: FailReason::Overrun }).unwrap();
/// // A second outcome for the same path trips the fuse.
/// assert!(matches!(ledger.record(7, 2, PathOutcome::Suppressed), Err(FuseTrip::Duplicate { .. })));
/// let closed = ledger.close(7).unwrap();
/// assert_eq!((closed.tally.solved, closed.tally.suppressed, closed.tally.failed), (1, 1, 1));
/// ```
#[derive(Debug)]
pub struct OutcomeLedger {
    open: HashMap<CycleId, CycleBook>,
    closed: BTreeSet<CycleId>,
    fuse: ExactnessFuse,
    trips: u64,
}

impl OutcomeLedger {
    /// An empty ledger guarded by `fuse`.
    pub fn new(fuse: ExactnessFuse) -> Self {
        OutcomeLedger {
            open: HashMap::new(),
            closed: BTreeSet::new(),
            fuse,
            trips: 0,
        }
    }

    /// Opens `cycle` with the paths it submits.
    ///
    /// Errors (each trips the fuse): [`FuseTrip::CycleReopened`] if the cycle
    /// is already open or closed; [`FuseTrip::DuplicateSubmission`] if a path
    /// appears twice in `paths`.
    pub fn open(&mut self, cycle: CycleId, paths: &[PathId]) -> Result<(), FuseTrip> {
        if self.open.contains_key(&cycle) || self.closed.contains(&cycle) {
            return Err(self.trip(FuseTrip::CycleReopened { cycle }));
        }
        let mut submitted = BTreeSet::new();
        for &path in paths {
            if !submitted.insert(path) {
                return Err(self.trip(FuseTrip::DuplicateSubmission { cycle, path }));
            }
        }
        let tally = CycleTally {
            submitted: submitted.len() as u32,
            ..CycleTally::default()
        };
        self.open.insert(
            cycle,
            CycleBook {
                submitted,
                outcomes: BTreeMap::new(),
                tally,
            },
        );
        Ok(())
    }

    /// Records `path`'s outcome in `cycle`.
    ///
    /// Errors (each trips the fuse): [`FuseTrip::Duplicate`] when the
    /// `(cycle, path)` was already seen (also after the cycle closed);
    /// [`FuseTrip::UnknownCycle`] when the cycle was never opened;
    /// [`FuseTrip::Stray`] when the path was not submitted in the cycle.
    pub fn record(
        &mut self,
        cycle: CycleId,
        path: PathId,
        outcome: PathOutcome,
    ) -> Result<(), FuseTrip> {
        let Some(book) = self.open.get_mut(&cycle) else {
            let trip = if self.closed.contains(&cycle) {
                FuseTrip::Duplicate {
                    cycle,
                    path,
                    first: None,
                    second: outcome,
                }
            } else {
                FuseTrip::UnknownCycle { cycle, path }
            };
            return Err(self.trip(trip));
        };
        if !book.submitted.contains(&path) {
            return Err(self.trip(FuseTrip::Stray { cycle, path }));
        }
        if let Some(first) = book.outcomes.get(&path) {
            let trip = FuseTrip::Duplicate {
                cycle,
                path,
                first: Some(*first),
                second: outcome,
            };
            return Err(self.trip(trip));
        }
        book.tally.count(&outcome);
        book.outcomes.insert(path, outcome);
        Ok(())
    }

    /// Whether every submitted path of the open `cycle` has its outcome
    /// (`false` for a cycle that is not open).
    pub fn is_complete(&self, cycle: CycleId) -> bool {
        self.open
            .get(&cycle)
            .is_some_and(|b| b.tally.received() == b.tally.submitted)
    }

    /// The counts of an open cycle so far.
    pub fn tally(&self, cycle: CycleId) -> Option<CycleTally> {
        self.open.get(&cycle).map(|b| b.tally)
    }

    /// Closes `cycle`: the exactness check `solved + suppressed + failed =
    /// submitted`. Returns the cycle's record.
    ///
    /// Errors (each trips the fuse): [`FuseTrip::Shortfall`] naming the
    /// missing paths; [`FuseTrip::UnknownCycle`] if the cycle is not open.
    pub fn close(&mut self, cycle: CycleId) -> Result<CycleRecord, FuseTrip> {
        let Some(book) = self.open.remove(&cycle) else {
            return Err(self.trip(FuseTrip::UnknownCycle {
                cycle,
                path: PathId::MAX,
            }));
        };
        self.closed.insert(cycle);
        if book.tally.received() != book.tally.submitted {
            let missing = book
                .submitted
                .iter()
                .copied()
                .filter(|p| !book.outcomes.contains_key(p))
                .collect();
            return Err(self.trip(FuseTrip::Shortfall {
                cycle,
                tally: book.tally,
                missing,
            }));
        }
        Ok(CycleRecord {
            cycle,
            tally: book.tally,
            outcomes: book.outcomes,
        })
    }

    /// Abandons the open `cycle` whose merge was dropped mid-drain: trips
    /// the fuse with [`FuseTrip::Stranded`] (the loud stop) and forgets the
    /// cycle (a later outcome for it is a duplicate). A cycle that is not
    /// open is left alone (`None`).
    pub fn strand(&mut self, cycle: CycleId) -> Option<FuseTrip> {
        let book = self.open.remove(&cycle)?;
        self.closed.insert(cycle);
        Some(self.trip(FuseTrip::Stranded {
            cycle,
            received: book.tally.received(),
            submitted: book.tally.submitted,
        }))
    }

    /// Cycles currently open.
    pub fn open_cycles(&self) -> usize {
        self.open.len()
    }

    /// How many times this ledger tripped its fuse (only a test hook lets
    /// the process see a number above zero).
    pub fn trips(&self) -> u64 {
        self.trips
    }

    fn trip(&mut self, trip: FuseTrip) -> FuseTrip {
        self.trips += 1;
        self.fuse.trip(&trip);
        trip
    }
}

#[cfg(test)]
mod tests;
