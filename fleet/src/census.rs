//! The census: one row per seat or runtime the fleet hosts.
//!
//! Source: `DESIGN.md` §3 "Census and status"; seed 000 §7 and §13 (the
//! `binding` field: `pinned`, `shared`, `logical`).

use crate::role::WorkerRole;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// How a census row's work maps to threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CensusBinding {
    /// Dedicated seat threads.
    Pinned,
    /// A pooled runtime shared by many lanes (the ambient I/O runtime, the reserve).
    Shared,
    /// A lane riding another thread's time (every role under the serial binding).
    Logical,
}

impl CensusBinding {
    /// The lowercase name (`pinned`, `shared`, `logical`).
    pub const fn name(self) -> &'static str {
        match self {
            CensusBinding::Pinned => "pinned",
            CensusBinding::Shared => "shared",
            CensusBinding::Logical => "logical",
        }
    }
}

/// One census row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CensusRow {
    /// Row name, e.g. `solver-3`, `ambient_io`, `reserve`.
    pub name: String,
    /// The role the row hosts; `None` for runtimes that are not a role.
    pub role: Option<WorkerRole>,
    /// Threads (or seats) the row stands for.
    pub count: u32,
    /// The sizing rule the count comes from.
    pub sizing_rule: String,
    /// The OS thread name, e.g. `work-fleet-sim-3`.
    pub thread_name: String,
    /// How the row maps to threads.
    pub binding: CensusBinding,
    /// The row belongs to a plan marked oversubscribed.
    pub oversubscribed: bool,
    /// The core the thread is pinned to, when core pinning applied.
    pub pinned_cpu: Option<usize>,
    /// The seat was lost (its thread died outside a unit) and left the
    /// layout: a lane death (`DESIGN.md` §3 "Outcome ledger"). Absent in
    /// older JSON reads as `false`.
    #[serde(default)]
    pub lost: bool,
}

/// A thread-safe registry of census rows (`Send + Sync`; share by `Arc`).
#[derive(Debug, Default)]
pub struct Census {
    rows: Mutex<Vec<CensusRow>>,
}

impl Census {
    /// An empty census.
    pub fn new() -> Self {
        Census::default()
    }

    /// Register one row (a seat registers itself when its thread starts).
    pub fn register(&self, row: CensusRow) {
        self.rows.lock().push(row);
    }

    /// A copy of every row, in registration order.
    pub fn rows(&self) -> Vec<CensusRow> {
        self.rows.lock().clone()
    }

    /// Number of registered rows.
    pub fn len(&self) -> usize {
        self.rows.lock().len()
    }

    /// No row registered yet.
    pub fn is_empty(&self) -> bool {
        self.rows.lock().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn registers_from_many_threads() {
        let census = Arc::new(Census::new());
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let c = Arc::clone(&census);
                std::thread::spawn(move || {
                    c.register(CensusRow {
                        name: format!("sim-{i}"),
                        role: Some(WorkerRole::SimDriver),
                        count: 1,
                        sizing_rule: "cap 4".into(),
                        thread_name: format!("work-fleet-sim-{i}"),
                        binding: CensusBinding::Pinned,
                        oversubscribed: false,
                        pinned_cpu: None,
                        lost: false,
                    })
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let mut names: Vec<_> = census.rows().into_iter().map(|r| r.name).collect();
        names.sort();
        assert_eq!(names, ["sim-0", "sim-1", "sim-2", "sim-3"]);
    }

    #[test]
    fn binding_serializes_lowercase() {
        for b in [
            CensusBinding::Pinned,
            CensusBinding::Shared,
            CensusBinding::Logical,
        ] {
            assert_eq!(
                serde_json::to_string(&b).unwrap(),
                format!("\"{}\"", b.name())
            );
        }
    }
}
