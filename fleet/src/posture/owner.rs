//! The thread-safe posture owner shared by the process (`Arc<PostureOwner>`).
//!
//! Source: `DESIGN.md` §3 "Posture"; seed 000 §6 (retune: atomic policy
//! swap that keeps state and window; one warn line listing old → new).

use super::{
    Degradation, LaneDeathCause, Posture, PostureMachine, PosturePolicy, PosturePolicyPatch,
    PostureRetuneError, ThrottleSample, Transition,
};
use crate::guard::GuardSnapshot;
use crate::telemetry;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};

/// Posture telemetry counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostureCounters {
    /// Nominal → Cordoned edges.
    pub enters: u64,
    /// Cordoned → Nominal edges.
    pub exits: u64,
    /// Total time cordoned, ms (including the current cordon up to the last observation).
    pub cordoned_dwell_ms: u64,
    /// Intake held or floored by the cordon (reported by the pump).
    pub intake_suppressions: u64,
}

#[derive(Debug)]
struct Inner {
    machine: PostureMachine,
    enters: u64,
    exits: u64,
    closed_dwell_ms: u64,
    last_now_ms: u64,
    /// Dwell already exported to the dwell metric, ms.
    exported_dwell_ms: u64,
    /// The first lane-death cause and when it latched (sticky).
    degraded: Option<(LaneDeathCause, u64)>,
}

impl Inner {
    /// Total cordoned dwell up to the last observation, ms.
    fn dwell_ms(&self) -> u64 {
        let open = self
            .machine
            .cordoned_since_ms()
            .map_or(0, |s| self.last_now_ms.saturating_sub(s));
        self.closed_dwell_ms + open
    }

    /// Advance the dwell metric to the dwell now (it never goes back).
    fn export_dwell(&mut self) {
        let dwell = self.dwell_ms();
        if dwell > self.exported_dwell_ms {
            telemetry::record_cordoned_dwell(dwell - self.exported_dwell_ms);
            self.exported_dwell_ms = dwell;
        }
    }
}

/// Owns the posture machine for a process. `Send + Sync`.
#[derive(Debug)]
pub struct PostureOwner {
    inner: Mutex<Inner>,
    seq: AtomicU64,
    suppressions: AtomicU64,
    sim_slot_cap: u32,
}

impl PostureOwner {
    /// A nominal owner with a validated `policy` and the plan's sim slot cap
    /// (seats). Panics never; an invalid policy is the caller's config error
    /// (validate with [`PosturePolicy::validate`] at load).
    pub fn new(policy: PosturePolicy, sim_slot_cap: u32) -> Self {
        PostureOwner {
            inner: Mutex::new(Inner {
                machine: PostureMachine::new(policy),
                enters: 0,
                exits: 0,
                closed_dwell_ms: 0,
                last_now_ms: 0,
                exported_dwell_ms: 0,
                degraded: None,
            }),
            seq: AtomicU64::new(0),
            suppressions: AtomicU64::new(0),
            sim_slot_cap,
        }
    }

    fn record(&self, inner: &mut Inner, t: Option<Transition>) -> Option<Transition> {
        inner.export_dwell();
        let t = t?;
        telemetry::record_posture_edge(&t);
        match t.to {
            Posture::Cordoned => inner.enters += 1,
            Posture::Nominal => inner.exits += 1,
        }
        // Loud on both edges (seed 000 §6: "entering is loud"; an exit is
        // the other half of the dwell an operator reads): one warn event.
        tracing::warn!(
            from = ?t.from,
            to = ?t.to,
            cause = ?t.cause,
            at_ms = t.at_ms,
            "[fleet-posture] posture {:?} -> {:?}",
            t.from,
            t.to
        );
        self.seq.fetch_add(1, Ordering::AcqRel);
        Some(t)
    }

    /// Feed one throttle sample at `now_ms` (monotonic, ms). Records the
    /// throttle events, posture edges and cordoned dwell metrics
    /// ([`crate::telemetry`]).
    pub fn observe(&self, sample: ThrottleSample, now_ms: u64) -> Option<Transition> {
        telemetry::record_throttle(&sample);
        let mut inner = self.inner.lock();
        let since = inner.machine.cordoned_since_ms();
        inner.last_now_ms = inner.last_now_ms.max(now_ms);
        let t = inner.machine.observe(sample, now_ms);
        if let (Some(tr), Some(since)) = (&t, since) {
            if tr.to == Posture::Nominal {
                inner.closed_dwell_ms += tr.at_ms.saturating_sub(since);
            }
        }
        self.record(&mut inner, t)
    }

    /// Latch a lane death: cordoned for the rest of this process. The edge
    /// is stamped with the last observed time (see [`Self::mark_lane_death_at`]).
    pub fn mark_lane_death(&self) -> Option<Transition> {
        self.mark_lane_death_because(LaneDeathCause::Unrecorded)
    }

    /// Latch a lane death with its cause (the first cause sticks and is
    /// reported by [`Self::degraded`]), stamped with the last observed time.
    pub fn mark_lane_death_because(&self, cause: LaneDeathCause) -> Option<Transition> {
        let now = self.inner.lock().last_now_ms;
        self.latch(now, cause)
    }

    /// Latch a lane death at `now_ms` (monotonic, ms).
    pub fn mark_lane_death_at(&self, now_ms: u64) -> Option<Transition> {
        self.latch(now_ms, LaneDeathCause::Unrecorded)
    }

    fn latch(&self, now_ms: u64, cause: LaneDeathCause) -> Option<Transition> {
        let mut inner = self.inner.lock();
        inner.last_now_ms = inner.last_now_ms.max(now_ms);
        let first = match &inner.degraded {
            None => true,
            // A recorded cause replaces an unrecorded one, never another.
            Some((LaneDeathCause::Unrecorded, _)) => cause != LaneDeathCause::Unrecorded,
            Some(_) => false,
        };
        if first {
            telemetry::record_degraded(&cause);
            inner.degraded = Some((cause, now_ms));
        }
        let t = inner.machine.mark_lane_death(now_ms);
        self.record(&mut inner, t)
    }

    /// `Some` once a lane death latched: the fleet runs degraded (the
    /// deferrable roles are held until a fresh process), with the cause.
    pub fn degraded(&self) -> Option<Degradation> {
        let inner = self.inner.lock();
        let (cause, since_ms) = inner.degraded.clone()?;
        Some(Degradation {
            cause,
            held_roles: crate::role::ALL_ROLES
                .iter()
                .copied()
                .filter(|r| r.cordon_class() == crate::role::CordonClass::Deferrable)
                .collect(),
            since_ms,
            action: "a lane death latched the sticky cordon: pool state updates, registration and verification are held until the process restarts; find the cause in the error log and restart".into(),
        })
    }

    /// Apply a partial retune atomically, keeping the posture and the sample
    /// window. Returns the effective policy. Errors: [`PostureRetuneError`]
    /// (nothing changes).
    ///
    /// ```
    /// use fleet::posture::{PostureOwner, PosturePolicy, PosturePolicyPatch};
    ///
    /// let owner = PostureOwner::new(PosturePolicy::default(), 4);
    /// // Enter the cordon after 5 throttle events instead of the default.
    /// let patch = PosturePolicyPatch { cordon_enter_events: Some(5), ..Default::default() };
    /// let effective = owner.retune(patch).expect("in range");
    /// assert_eq!(effective.cordon_enter_events, 5);
    /// // An out-of-range value is refused and changes nothing.
    /// let bad = PosturePolicyPatch { cordon_duty_percent: Some(250.0), ..Default::default() };
    /// assert!(owner.retune(bad).is_err());
    /// assert_eq!(owner.policy().cordon_enter_events, 5);
    /// ```
    pub fn retune(&self, patch: PosturePolicyPatch) -> Result<PosturePolicy, PostureRetuneError> {
        let mut inner = self.inner.lock();
        let old = *inner.machine.policy();
        let new = patch.apply(&old)?;
        let changes = old.diff(&new);
        inner.machine.set_policy(new);
        match change_listing(&changes) {
            Some(listing) => {
                tracing::warn!(changes = %listing, "[fleet-posture] operator retune")
            }
            None => tracing::info!(
                "[fleet-posture] operator retune changed nothing: every value was already as asked"
            ),
        }
        Ok(new)
    }

    /// The posture now.
    pub fn posture(&self) -> Posture {
        self.inner.lock().machine.posture()
    }

    /// The policy in force.
    pub fn policy(&self) -> PosturePolicy {
        *self.inner.lock().machine.policy()
    }

    /// The guards for one pump step: cordoned, the sim intake cap (the slot
    /// cap when nominal; the floor, or half the cap, when cordoned), the
    /// sticky lane-death latch.
    pub fn guard(&self) -> GuardSnapshot {
        let inner = self.inner.lock();
        let cordoned = inner.machine.posture() == Posture::Cordoned;
        let sim_intake_cap = if cordoned {
            inner.machine.policy().cordoned_sim_cap(self.sim_slot_cap)
        } else {
            self.sim_slot_cap
        };
        GuardSnapshot {
            cordoned,
            sim_intake_cap,
            lane_dead: inner.machine.lane_dead(),
        }
    }

    /// Bumps on every posture edge (the `PostureEdge` hint's stamp).
    pub fn seq(&self) -> u64 {
        self.seq.load(Ordering::Acquire)
    }

    /// Count one intake the cordon held or floored.
    pub fn note_intake_suppressed(&self) {
        self.suppressions.fetch_add(1, Ordering::Relaxed);
        telemetry::record_intake_suppressed();
    }

    /// The counters now.
    pub fn counters(&self) -> PostureCounters {
        let inner = self.inner.lock();
        PostureCounters {
            enters: inner.enters,
            exits: inner.exits,
            cordoned_dwell_ms: inner.dwell_ms(),
            intake_suppressions: self.suppressions.load(Ordering::Relaxed),
        }
    }
}

/// The retune log's `changes` text (`key: old -> new, …`), or `None` when
/// the retune changed nothing (so the log never reads `changes=` with
/// nothing after it).
fn change_listing(changes: &[(&'static str, String, String)]) -> Option<String> {
    if changes.is_empty() {
        return None;
    }
    let listing: Vec<String> = changes
        .iter()
        .map(|(k, a, b)| format!("{k}: {a} -> {b}"))
        .collect();
    Some(listing.join(", "))
}

#[cfg(test)]
mod listing_tests {
    use super::change_listing;
    use crate::posture::PosturePolicy;

    #[test]
    fn an_empty_retune_has_no_listing_and_a_real_one_names_each_change() {
        let p = PosturePolicy::default();
        assert_eq!(change_listing(&p.diff(&p)), None);
        let mut q = p;
        q.cordon_enter_events = p.cordon_enter_events + 1;
        let text = change_listing(&p.diff(&q)).expect("one change");
        assert_eq!(
            text,
            format!(
                "cordon_enter_events: {} -> {}",
                p.cordon_enter_events,
                p.cordon_enter_events + 1
            )
        );
    }
}
