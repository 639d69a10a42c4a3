//! Re-detection at run time: a `lab-quota` thread re-detects the CPU quota
//! every period; on a change it re-derives the running plan
//! (`Plan::replan`), hands the new bounds to the fleet (they take effect at
//! the next cycle boundary, where pins are re-keyed) and notes the change on
//! the run's timeline; a refused re-plan (below the host floor) is noted
//! with its reason and changes nothing. `DESIGN.md` §3 "Quota detection".

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fleet::plan::Plan;
use fleet::pump::PumpBounds;
use fleet::quota::{QuotaReport, QuotaWatcher};
use fleet_bindings::FleetHandle;
use parking_lot::Mutex;

use crate::report::{PlanChange, TimelineEvent, TimelineKind};

/// What the watch saw, shared between its thread and the cycle driver.
struct Book {
    /// The plan in force (or pending at the next boundary).
    plan: Plan,
    /// The changes so far.
    changes: Vec<PlanChange>,
    /// The changes' timeline events.
    timeline: Vec<TimelineEvent>,
    /// Index of the change waiting for the next boundary.
    pending: Option<usize>,
}

/// A running quota watch; [`QuotaWatch::boundary`] at each cycle start.
pub struct QuotaWatch {
    /// Dropped (or sent on) to stop the thread: it waits on the channel
    /// between detections, so a stop ends the wait at once instead of
    /// after the rest of a period (a run's shutdown waited up to 1 s).
    stop: Option<mpsc::Sender<()>>,
    join: Option<JoinHandle<()>>,
    book: Arc<Mutex<Book>>,
    fleet: FleetHandle,
}

impl QuotaWatch {
    /// Starts re-detecting with `detect` every `period`, from the boot
    /// detection `initial` and the running `plan`; `t0` is the run's start.
    pub fn start(
        initial: &QuotaReport,
        plan: Plan,
        fleet: FleetHandle,
        period: Duration,
        t0: Instant,
        detect: impl Fn() -> QuotaReport + Send + 'static,
    ) -> Self {
        let mut watcher = QuotaWatcher::new(initial, period);
        let (stop, stopped) = mpsc::channel::<()>();
        let book = Arc::new(Mutex::new(Book {
            plan,
            changes: Vec::new(),
            timeline: Vec::new(),
            pending: None,
        }));
        let (shared, handle) = (book.clone(), fleet.clone());
        let join = std::thread::Builder::new()
            .name("lab-quota".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(watcher.period()) {
                    if let Some(change) = watcher.observe(detect()) {
                        let t_ms = t0.elapsed().as_secs_f64() * 1e3;
                        note_change(
                            &mut shared.lock(),
                            &handle,
                            t_ms,
                            change.from_cpus,
                            change.to_cpus,
                        );
                    }
                }
            })
            .expect("spawning the quota watch thread");
        QuotaWatch {
            stop: Some(stop),
            join: Some(join),
            book,
            fleet,
        }
    }

    /// A cycle boundary: forwards it to the fleet (a pending re-budget takes
    /// effect there) and marks the pending change applied at `cycle`.
    pub fn boundary(&self, cycle: u64) {
        let mut book = self.book.lock();
        // Under the lock: a re-budget sent by the watch thread is either
        // before this boundary in the pump's inbox (applied here) or after it.
        self.fleet.epoch_boundary(cycle);
        if let Some(i) = book.pending.take() {
            book.changes[i].applied_at_cycle = Some(cycle);
        }
    }

    /// Stops the watch; returns the changes and their timeline events.
    pub fn finish(mut self) -> (Vec<PlanChange>, Vec<TimelineEvent>) {
        self.halt();
        let mut book = self.book.lock();
        (
            std::mem::take(&mut book.changes),
            std::mem::take(&mut book.timeline),
        )
    }

    fn halt(&mut self) {
        drop(self.stop.take());
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

impl Drop for QuotaWatch {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Re-plans for `to` cores and records the change (or the refusal).
fn note_change(book: &mut Book, fleet: &FleetHandle, t_ms: f64, from: f64, to: f64) {
    let before = PumpBounds::for_plan(&book.plan);
    let (change, detail) = match book.plan.replan(to) {
        Ok(next) => {
            let after = PumpBounds::for_plan(&next);
            fleet.rebudget(after);
            let change = PlanChange {
                t_ms,
                from_cpus: from,
                to_cpus: to,
                binding: Some(next.binding.name().to_string()),
                oversubscribed: next.oversubscribed,
                walk_admission: [before.walk_admission, after.walk_admission],
                solver_cpus: Some(next.budget.solver_cpus),
                applied_at_cycle: None,
                refused: None,
            };
            let detail = format!(
                "quota {from} → {to} cores: re-planned {}{}, walk admission {} → {} from the next cycle boundary",
                next.binding.name(),
                if next.oversubscribed { " (oversubscribed)" } else { "" },
                before.walk_admission,
                after.walk_admission
            );
            tracing::info!(target: "fleet::posture", from, to, %after, "quota changed: budget re-derived");
            book.plan = next;
            (change, detail)
        }
        Err(e) => {
            tracing::warn!(target: "fleet::posture", from, to, error = %e, "quota changed: re-plan refused; the bounds in force stay");
            let change = PlanChange {
                t_ms,
                from_cpus: from,
                to_cpus: to,
                binding: None,
                oversubscribed: false,
                walk_admission: [before.walk_admission; 2],
                solver_cpus: None,
                applied_at_cycle: None,
                refused: Some(e.to_string()),
            };
            (
                change,
                format!(
                    "quota {from} → {to} cores: re-plan refused ({e}); the bounds in force stay"
                ),
            )
        }
    };
    let refused = change.refused.is_some();
    book.changes.push(change);
    // A refused re-plan waits for nothing; a newer change replaces a pending one.
    book.pending = (!refused)
        .then_some(book.changes.len() - 1)
        .or(book.pending);
    book.timeline.push(TimelineEvent {
        t_ms,
        kind: TimelineKind::QuotaChange,
        detail,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleet::plan::Profile;
    use fleet::quota::QuotaSource;

    fn report(quota: f64) -> QuotaReport {
        QuotaReport {
            exact_cpus: Some(quota),
            affinity_cpus: 64,
            source: QuotaSource::CgroupV1,
            reason: "scripted".into(),
            cgroup_dir: None,
            limiting_dir: None,
            affinity_list: (0..64).collect(),
        }
    }

    #[test]
    fn a_quota_change_re_plans_takes_effect_at_the_next_boundary_and_a_refusal_changes_nothing() {
        let plan = Plan::resolve(8.0, Profile::Auto, &Default::default()).unwrap();
        let fleet = fleet_bindings::boot(&plan, fleet_bindings::BootOptions::for_plan(&plan))
            .expect("boot");
        let script = Arc::new(Mutex::new(8.0f64));
        let read = script.clone();
        let watch = QuotaWatch::start(
            &report(8.0),
            plan,
            fleet.handle(),
            Duration::from_millis(1),
            Instant::now(),
            move || report(*read.lock()),
        );
        let wait_for = |n: usize| {
            // The watch thread re-detects every millisecond; wait for it.
            while watch.book.lock().changes.len() < n {
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        watch.boundary(1);
        *script.lock() = 6.0;
        wait_for(1);
        watch.boundary(2);
        *script.lock() = 1.0;
        wait_for(2);
        watch.boundary(3);
        let (changes, timeline) = watch.finish();
        fleet.shutdown().expect("clean shutdown");
        assert_eq!(changes.len(), 2, "{changes:?}");
        let shrink = &changes[0];
        assert_eq!((shrink.from_cpus, shrink.to_cpus), (8.0, 6.0));
        assert_eq!(shrink.walk_admission, [3, 2]);
        assert_eq!(shrink.solver_cpus, Some(2));
        assert_eq!(shrink.binding.as_deref(), Some("pinned"));
        assert_eq!(shrink.applied_at_cycle, Some(2), "at the next boundary");
        let refused = &changes[1];
        assert_eq!(refused.walk_admission, [2, 2], "a refusal changes nothing");
        assert!(refused
            .refused
            .as_deref()
            .unwrap_or("")
            .contains("BelowHostFloor"));
        assert_eq!(refused.applied_at_cycle, None);
        assert_eq!(timeline.len(), 2);
        assert!(timeline.iter().all(|e| e.kind == TimelineKind::QuotaChange));
        assert!(
            timeline[0].detail.contains("walk admission 3 → 2"),
            "{}",
            timeline[0].detail
        );
    }
}
