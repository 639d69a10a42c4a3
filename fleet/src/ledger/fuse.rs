//! The exactness fuse: a trip logs an error, then stops loudly.
//!
//! Source: `DESIGN.md` §3 "Outcome ledger"; seed 000 §10.3 (the loud stop:
//! log at `error`, then `std::process::abort`) and the §11 ops note (a
//! duplicate or an undercount trips the fuse, never silently).

use super::{CycleId, CycleTally, PathId};
use crate::outcome::PathOutcome;
use std::fmt;
use std::sync::Arc;

/// What tripped the fuse. Every variant is a bug in whoever emitted the
/// outcomes (a bin that double-emitted, a lane that lost a path): capture the
/// dump, fix the emitter, restart the process; never retry the region.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FuseTrip {
    /// `(cycle, path)` got a second outcome. `first` is `None` when the cycle
    /// had already closed (its outcomes are no longer kept).
    #[error("duplicate outcome for cycle {cycle} path {path}: first {first:?}, second {second:?}; the lane that emitted it twice is the bug")]
    Duplicate {
        /// The cycle.
        cycle: CycleId,
        /// The path that got two outcomes.
        path: PathId,
        /// The first outcome, while the cycle is still open.
        first: Option<PathOutcome>,
        /// The second outcome.
        second: PathOutcome,
    },
    /// The cycle closed with fewer outcomes than submitted paths.
    #[error("shortfall in cycle {cycle}: solved {} + suppressed {} + failed {} != submitted {}; missing paths {missing:?} were never delivered", tally.solved, tally.suppressed, tally.failed, tally.submitted)]
    Shortfall {
        /// The cycle.
        cycle: CycleId,
        /// What the cycle counted when it closed.
        tally: CycleTally,
        /// The paths that never got an outcome.
        missing: Vec<PathId>,
    },
    /// An outcome for a path the cycle never submitted.
    #[error("stray outcome for cycle {cycle} path {path}: the cycle never submitted that path")]
    Stray {
        /// The cycle.
        cycle: CycleId,
        /// The path it never submitted.
        path: PathId,
    },
    /// An outcome for a cycle that was never opened (open it before handing
    /// out its senders).
    #[error("outcome for unknown cycle {cycle} (path {path}); open the cycle before its bins run")]
    UnknownCycle {
        /// The unknown cycle id.
        cycle: CycleId,
        /// The path the outcome was for.
        path: PathId,
    },
    /// A cycle id opened twice.
    #[error("cycle {cycle} opened twice; cycle ids must be unique per process")]
    CycleReopened {
        /// The cycle id opened twice.
        cycle: CycleId,
    },
    /// The cycle's merge was dropped mid-drain (its host died with it):
    /// the lanes' sends land in a pipe nobody drains and the cycle can
    /// never close (`DESIGN.md` §3 "Outcome ledger": the merge pipe is
    /// never stranded).
    #[error("cycle {cycle}: its merge was dropped mid-drain with {received} of {submitted} outcomes recorded; the result pipe is stranded (the host running the merge died)")]
    Stranded {
        /// The cycle.
        cycle: CycleId,
        /// Outcomes recorded before the merge was dropped.
        received: u32,
        /// Paths the cycle submitted.
        submitted: u32,
    },
    /// A path submitted twice in one cycle.
    #[error("cycle {cycle} submits path {path} twice")]
    DuplicateSubmission {
        /// The cycle.
        cycle: CycleId,
        /// The path submitted twice.
        path: PathId,
    },
}

/// The loud-stop hook a trip runs after its error log line.
pub type FuseHook = Arc<dyn Fn(&FuseTrip) + Send + Sync>;

/// The fuse at the merge. Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct ExactnessFuse {
    hook: FuseHook,
    aborts: bool,
}

impl ExactnessFuse {
    /// The production fuse: logs the trip at `error`, then
    /// `std::process::abort()`.
    pub fn aborting() -> Self {
        ExactnessFuse {
            hook: Arc::new(|_| std::process::abort()),
            aborts: true,
        }
    }

    /// A fuse whose loud stop is `hook` (tests observe trips through it; the
    /// ledger then returns the trip as an `Err` and the merge stops).
    pub fn with_hook(hook: impl Fn(&FuseTrip) + Send + Sync + 'static) -> Self {
        ExactnessFuse {
            hook: Arc::new(hook),
            aborts: false,
        }
    }

    /// Logs `trip` at `error` (`tripping-the-fuse`) and runs the hook.
    pub fn trip(&self, trip: &FuseTrip) {
        tracing::error!(target: "fleet::ledger", %trip, "tripping-the-fuse: outcome ledger is not exact");
        (self.hook)(trip);
    }
}

impl Default for ExactnessFuse {
    fn default() -> Self {
        Self::aborting()
    }
}

impl fmt::Debug for ExactnessFuse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExactnessFuse")
            .field("aborts", &self.aborts)
            .finish()
    }
}
