//! The run's timeline: what happened when (posture edges, throttle
//! episodes, retunes, quota changes, heap releases), as the report's
//! `timeline` and the page's timeline plot show it.

use serde::{Deserialize, Serialize};

/// What happened at a timeline instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimelineKind {
    /// The posture entered cordon.
    PostureEnter,
    /// The posture left cordon.
    PostureExit,
    /// A throttle episode: consecutive throttled samples (one or more
    /// throttled periods each), noted once at the first; the detail gives
    /// its length and sums.
    Throttle,
    /// The posture policy was changed at runtime by an operator.
    Retune,
    /// Re-detection saw the CPU quota change: the plan was re-derived (or
    /// the re-plan refused; the report's `plan_changes` holds each).
    QuotaChange,
    /// A cordon's backlog drained and the lab's host handed the allocator's
    /// free memory back to the OS (`crate::probe::heap`); the detail gives
    /// the resident set before and after.
    HeapRelease,
}

impl TimelineKind {
    /// Every kind, in the order the timeline legend lists them.
    pub const ALL: [TimelineKind; 6] = [
        TimelineKind::PostureEnter,
        TimelineKind::PostureExit,
        TimelineKind::Throttle,
        TimelineKind::Retune,
        TimelineKind::QuotaChange,
        TimelineKind::HeapRelease,
    ];

    /// The snake_case name used in JSON and on the page.
    pub const fn as_str(self) -> &'static str {
        match self {
            TimelineKind::PostureEnter => "posture_enter",
            TimelineKind::PostureExit => "posture_exit",
            TimelineKind::Throttle => "throttle",
            TimelineKind::Retune => "retune",
            TimelineKind::QuotaChange => "quota_change",
            TimelineKind::HeapRelease => "heap_release",
        }
    }
}

/// One timeline event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineEvent {
    /// Milliseconds since the run started.
    pub t_ms: f64,
    /// What happened.
    pub kind: TimelineKind,
    /// Free text: the cause, the changed keys, the throttled periods.
    pub detail: String,
}
