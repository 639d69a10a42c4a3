//! The per-bin witness: the lane's promise of one outcome per owed path.
//!
//! A bin's walk owns a [`BinWitness`] listing the paths it owes. Each
//! [`BinWitness::deliver`] sends one outcome to the merge. If the witness is
//! dropped while paths are still owed — a panic unwinding through the walk, a
//! unit dropped without running, a seat thread lost — it delivers one typed
//! `Failed { LaneDeath }` per owed path, so the ledger stays exact and the
//! process lives (`DESIGN.md` §3 "Outcome ledger"; seed 000 §13 lane
//! ownership, §14 lane-death terminal receipts).

use super::{OutcomeSender, PathId, PipeClosed};
use crate::outcome::{FailReason, PathOutcome};
use std::collections::BTreeSet;

/// Owes one outcome for each of a bin's paths. `Send`; not `Clone`.
#[derive(Debug)]
pub struct BinWitness {
    sender: OutcomeSender,
    owed: BTreeSet<PathId>,
    lane_deaths: u32,
}

impl BinWitness {
    /// A witness owing `paths` on `sender`'s cycle.
    pub fn new(sender: OutcomeSender, paths: impl IntoIterator<Item = PathId>) -> Self {
        BinWitness {
            sender,
            owed: paths.into_iter().collect(),
            lane_deaths: 0,
        }
    }

    /// Delivers `path`'s outcome and marks it paid.
    ///
    /// A path that is not owed (already delivered, or not this bin's) is
    /// still sent: the merge's fuse is the one judge of exactness.
    ///
    /// Errors: [`PipeClosed`] when the cycle's merge has stopped.
    pub fn deliver(&mut self, path: PathId, outcome: PathOutcome) -> Result<(), PipeClosed> {
        self.owed.remove(&path);
        self.sender.send(path, outcome)
    }

    /// Paths still owed, ascending.
    pub fn owed(&self) -> Vec<PathId> {
        self.owed.iter().copied().collect()
    }

    /// The cycle this witness delivers into.
    pub fn cycle(&self) -> u64 {
        self.sender.cycle()
    }

    /// Settles every owed path as `Failed { LaneDeath }` now; returns how many.
    pub fn fail_owed(&mut self) -> u32 {
        let owed = std::mem::take(&mut self.owed);
        let n = owed.len() as u32;
        for path in owed {
            let outcome = PathOutcome::Failed {
                reason: FailReason::LaneDeath,
            };
            if let Err(e) = self.sender.send(path, outcome) {
                tracing::error!(target: "fleet::ledger", %e, "lane-death outcome not delivered");
            }
        }
        self.lane_deaths += n;
        n
    }
}

impl Drop for BinWitness {
    fn drop(&mut self) {
        if !self.owed.is_empty() {
            let owed = self.owed();
            tracing::warn!(
                target: "fleet::ledger",
                cycle = self.sender.cycle(),
                ?owed,
                "lane died owing paths; delivering Failed(LaneDeath) for each"
            );
            self.fail_owed();
        }
    }
}
