//! The per-bin witness: the lane's promise of one outcome per owed path.
//!
//! A bin's walk owns a [`BinWitness`] listing the paths it owes. Each
//! [`BinWitness::deliver`] sends one outcome to the merge. If the witness is
//! dropped while paths are still owed — a panic unwinding through the walk, a
//! unit dropped without running, a seat thread lost — it delivers one typed
//! `Failed { LaneDeath }` per owed path, so the ledger stays exact and the
//! process lives (`DESIGN.md` §3 "Outcome ledger"; seed 000 §13 lane
//! ownership, §14 lane-death terminal receipts).
//!
//! A walk that overruns its deadline still holds its witness, so the waiter
//! settles it from outside through a [`WitnessSettle`]: every path still owed
//! gets one `Failed(reason)` (`Overrun`), the witness lets go of the cycle's
//! pipe (so the merge can close), and whatever the late walk delivers after
//! that is dropped — each path is paid exactly once either way.

use super::{CycleId, OutcomeSender, PathId, PipeClosed};
use crate::outcome::{FailReason, PathOutcome};
use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::sync::Arc;

/// What a witness still owes, shared with its [`WitnessSettle`].
#[derive(Debug)]
struct Owed {
    /// The cycle's pipe; `None` once settled from outside.
    sender: Option<OutcomeSender>,
    /// Paths not yet paid.
    owed: BTreeSet<PathId>,
}

impl Owed {
    /// Pays every owed path with `Failed(reason)` and lets go of the pipe.
    /// Returns how many were paid.
    fn settle(&mut self, reason: FailReason) -> u32 {
        let owed = std::mem::take(&mut self.owed);
        let n = owed.len() as u32;
        if let Some(sender) = self.sender.take() {
            for path in owed {
                if let Err(e) = sender.send(path, PathOutcome::Failed { reason }) {
                    tracing::error!(target: "fleet::ledger", %e, ?reason, "owed outcome not delivered");
                }
            }
        }
        n
    }
}

/// Owes one outcome for each of a bin's paths. `Send`; not `Clone`.
#[derive(Debug)]
pub struct BinWitness {
    cycle: CycleId,
    inner: Arc<Mutex<Owed>>,
}

/// Settles a [`BinWitness`] from outside the walk that holds it (a waiter
/// whose deadline passed). `Send + Sync`; cheap to clone.
#[derive(Debug, Clone)]
pub struct WitnessSettle {
    cycle: CycleId,
    inner: Arc<Mutex<Owed>>,
}

impl BinWitness {
    /// A witness owing `paths` on `sender`'s cycle.
    pub fn new(sender: OutcomeSender, paths: impl IntoIterator<Item = PathId>) -> Self {
        BinWitness {
            cycle: sender.cycle(),
            inner: Arc::new(Mutex::new(Owed {
                sender: Some(sender),
                owed: paths.into_iter().collect(),
            })),
        }
    }

    /// Delivers `path`'s outcome and marks it paid.
    ///
    /// A path that is not owed (already delivered, or not this bin's) is
    /// still sent: the merge's fuse is the one judge of exactness.
    ///
    /// Errors: [`PipeClosed`] when the cycle's merge has stopped, or when
    /// the witness was settled from outside ([`WitnessSettle::settle_owed`]);
    /// then nothing is sent.
    pub fn deliver(&mut self, path: PathId, outcome: PathOutcome) -> Result<(), PipeClosed> {
        // Send under the lock: a concurrent settle then either sees the path
        // paid or pays it itself, never both.
        let mut owed = self.inner.lock();
        let Some(sender) = owed.sender.as_ref() else {
            return Err(PipeClosed {
                cycle: self.cycle,
                path,
            });
        };
        let sent = sender.send(path, outcome);
        owed.owed.remove(&path);
        sent
    }

    /// Paths still owed, ascending.
    pub fn owed(&self) -> Vec<PathId> {
        self.inner.lock().owed.iter().copied().collect()
    }

    /// The cycle this witness delivers into.
    pub fn cycle(&self) -> u64 {
        self.cycle
    }

    /// Settles every owed path as `Failed { LaneDeath }` now; returns how many.
    pub fn fail_owed(&mut self) -> u32 {
        let mut owed = self.inner.lock();
        let n = owed.owed.len() as u32;
        let paths = std::mem::take(&mut owed.owed);
        if let Some(sender) = owed.sender.as_ref() {
            for path in paths {
                let outcome = PathOutcome::Failed {
                    reason: FailReason::LaneDeath,
                };
                if let Err(e) = sender.send(path, outcome) {
                    tracing::error!(target: "fleet::ledger", %e, "lane-death outcome not delivered");
                }
            }
        }
        n
    }

    /// A handle that settles this witness from outside the walk holding it.
    pub fn settler(&self) -> WitnessSettle {
        WitnessSettle {
            cycle: self.cycle,
            inner: self.inner.clone(),
        }
    }
}

impl WitnessSettle {
    /// Pays every path the witness still owes with `Failed(reason)`
    /// (`FailReason::Overrun` for a walk past its deadline), then lets go of
    /// the cycle's pipe so the merge can close without the late walk; what
    /// the walk delivers afterwards is dropped ([`BinWitness::deliver`]
    /// answers [`PipeClosed`]). Returns how many paths were paid (0 when the
    /// walk had already delivered everything, or on a second call).
    pub fn settle_owed(&self, reason: FailReason) -> u32 {
        let n = self.inner.lock().settle(reason);
        if n > 0 {
            tracing::warn!(
                target: "fleet::ledger",
                cycle = self.cycle,
                paths = n,
                ?reason,
                "walk settled from outside: its owed paths are failed"
            );
        }
        n
    }

    /// The cycle of the witness this settles.
    pub fn cycle(&self) -> u64 {
        self.cycle
    }
}

impl Drop for BinWitness {
    fn drop(&mut self) {
        let owed = self.owed();
        if !owed.is_empty() {
            tracing::warn!(
                target: "fleet::ledger",
                cycle = self.cycle,
                ?owed,
                "lane died owing paths; delivering Failed(LaneDeath) for each"
            );
            self.fail_owed();
        }
        // The pipe's sender goes with the witness: the merge closes once
        // every bin's witness is gone or settled.
        self.inner.lock().sender = None;
    }
}
