//! The lab host's memory hygiene after a cordon: once the backlog has
//! drained, the allocator's free memory goes back to the OS
//! ([`crate::probe::heap`]), so one cordon's backlog does not stay resident
//! for the rest of a soak.

use std::sync::Arc;
use std::time::Instant;

use fleet::posture::{Posture, PostureOwner};
use fleet_bindings::FleetHandle;
use parking_lot::Mutex;

use crate::report::{TimelineEvent, TimelineKind};

/// Hands the allocator's free memory back once per cordon: at the first
/// cycle end after the posture is Nominal again with nothing held, queued or
/// running ([`crate::probe::heap`]).
pub(crate) struct HeapRelease {
    handle: FleetHandle,
    posture: Arc<PostureOwner>,
    t0: Instant,
    /// Posture exits already answered with a release.
    answered: u64,
    events: Arc<Mutex<Vec<TimelineEvent>>>,
}

impl HeapRelease {
    pub(crate) fn new(
        handle: FleetHandle,
        posture: Arc<PostureOwner>,
        t0: Instant,
        events: Arc<Mutex<Vec<TimelineEvent>>>,
    ) -> Self {
        HeapRelease {
            handle,
            posture,
            t0,
            answered: 0,
            events,
        }
    }

    pub(crate) fn at_cycle_end(&mut self, cycle: u32) {
        let exits = self.posture.counters().exits;
        if exits <= self.answered
            || self.posture.posture() != Posture::Nominal
            || !self.handle.backlog().is_idle()
        {
            return;
        }
        self.answered = exits;
        let (before, after) = crate::probe::heap::release_free_heap();
        let mb =
            |k: Option<u64>| k.map_or("?".to_string(), |k| format!("{:.1}", k as f64 / 1024.0));
        self.events.lock().push(TimelineEvent {
            t_ms: self.t0.elapsed().as_secs_f64() * 1e3,
            kind: TimelineKind::HeapRelease,
            detail: format!(
                "after cycle {cycle}: {}, resident set {} → {} MB",
                crate::probe::heap::RELEASE_CALL,
                mb(before),
                mb(after)
            ),
        });
    }
}
