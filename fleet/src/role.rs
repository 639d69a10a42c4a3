//! Worker roles and their cordon classes.
//!
//! Source: `DESIGN.md` §3 "Roles"; seed 000 §3.1. Adding a role is one entry
//! in [`ALL_ROLES`] plus its rows in [`WorkerRole::cordon_class`],
//! [`WorkerRole::hosting`] and [`WorkerRole::thread_label`]; the exhaustive
//! tests below fail until every table has the new entry.

use serde::{Deserialize, Serialize};

/// Work a fleet seat can be leased for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerRole {
    /// One persistent pin per bin; a bin key always lands on its own seat.
    Solver,
    /// Pooled simulation seats (mostly I/O wait), capped by the sim slot cap.
    SimDriver,
    /// Path resolution, pooled.
    Resolve,
    /// The result merge: exactly one pin; owns every path's terminal outcome.
    Merge,
    /// Pool-state update application (deferrable).
    PoolStateUpdater,
    /// Registration crawl driver (deferrable).
    Registrar,
    /// Published-edge verification reads (deferrable).
    Verifier,
    /// Settlement submission delivery (never held: latency-critical).
    Submitter,
}

/// Every role, in dispatch-table order. Indexing by position is stable.
pub const ALL_ROLES: [WorkerRole; 8] = [
    WorkerRole::Solver,
    WorkerRole::SimDriver,
    WorkerRole::Resolve,
    WorkerRole::Merge,
    WorkerRole::PoolStateUpdater,
    WorkerRole::Registrar,
    WorkerRole::Verifier,
    WorkerRole::Submitter,
];

/// How a role behaves under a `Cordoned` posture (`DESIGN.md` §3 "Roles").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CordonClass {
    /// Never held (Solver, Resolve, Merge, Submitter).
    Never,
    /// New intake floored under cordon; in-flight never cancelled (SimDriver).
    IntakeFloored,
    /// Intake held in a backlog under cordon, never dropped (background roles).
    Deferrable,
}

/// How seats of a role are hosted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hosting {
    /// A keyed pin per key (Solver: one per bin; Merge: exactly one).
    Keyed,
    /// A pooled set of interchangeable seats fed by a shared queue.
    Pooled,
}

impl WorkerRole {
    /// The role's cordon class.
    pub const fn cordon_class(self) -> CordonClass {
        match self {
            WorkerRole::Solver
            | WorkerRole::Resolve
            | WorkerRole::Merge
            | WorkerRole::Submitter => CordonClass::Never,
            WorkerRole::SimDriver => CordonClass::IntakeFloored,
            WorkerRole::PoolStateUpdater | WorkerRole::Registrar | WorkerRole::Verifier => {
                CordonClass::Deferrable
            }
        }
    }

    /// Keyed (pinned on completion, T3/T4) or pooled (released on completion, T5).
    pub const fn hosting(self) -> Hosting {
        match self {
            WorkerRole::Solver | WorkerRole::Merge => Hosting::Keyed,
            _ => Hosting::Pooled,
        }
    }

    /// The role's part of a seat thread name: `work-fleet-{label}-{n}`.
    pub const fn thread_label(self) -> &'static str {
        match self {
            WorkerRole::Solver => "solver",
            WorkerRole::SimDriver => "sim",
            WorkerRole::Resolve => "resolve",
            WorkerRole::Merge => "merge",
            WorkerRole::PoolStateUpdater => "poolupd",
            WorkerRole::Registrar => "registrar",
            WorkerRole::Verifier => "verifier",
            WorkerRole::Submitter => "submitter",
        }
    }

    /// Position of the role in [`ALL_ROLES`].
    pub fn index(self) -> usize {
        ALL_ROLES
            .iter()
            .position(|r| *r == self)
            .expect("every role is in ALL_ROLES")
    }

    /// Stable snake_case name (the same as its serde form and metric label).
    pub const fn name(self) -> &'static str {
        match self {
            WorkerRole::Solver => "solver",
            WorkerRole::SimDriver => "sim_driver",
            WorkerRole::Resolve => "resolve",
            WorkerRole::Merge => "merge",
            WorkerRole::PoolStateUpdater => "pool_state_updater",
            WorkerRole::Registrar => "registrar",
            WorkerRole::Verifier => "verifier",
            WorkerRole::Submitter => "submitter",
        }
    }
}

impl std::fmt::Display for WorkerRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn all_roles_is_complete_and_indexed_by_position() {
        for (i, role) in ALL_ROLES.iter().enumerate() {
            assert_eq!(role.index(), i);
        }
        let names: HashSet<_> = ALL_ROLES.iter().map(|r| r.name()).collect();
        assert_eq!(names.len(), ALL_ROLES.len());
        let labels: HashSet<_> = ALL_ROLES.iter().map(|r| r.thread_label()).collect();
        assert_eq!(labels.len(), ALL_ROLES.len());
    }

    #[test]
    fn cordon_classes_follow_the_design_table() {
        use CordonClass::*;
        let expected = [
            Never,
            IntakeFloored,
            Never,
            Never,
            Deferrable,
            Deferrable,
            Deferrable,
            Never,
        ];
        for (role, class) in ALL_ROLES.iter().zip(expected) {
            assert_eq!(role.cordon_class(), class, "{role}");
        }
    }

    #[test]
    fn only_solver_and_merge_are_keyed() {
        for role in ALL_ROLES {
            let keyed = matches!(role, WorkerRole::Solver | WorkerRole::Merge);
            assert_eq!(role.hosting() == Hosting::Keyed, keyed, "{role}");
        }
    }

    #[test]
    fn serde_name_matches_name() {
        for role in ALL_ROLES {
            assert_eq!(
                serde_json::to_string(&role).unwrap(),
                format!("\"{}\"", role.name())
            );
        }
    }
}
