//! Retention: what the router forgets, so a long run's memory and store
//! stay flat (docs/router.md "Threat model", retention).
//!
//! - **Deposits.** A logged deposit is needed only until a written
//!   snapshot covers it (a restart folds the deposits after the snapshot).
//!   The log keeps `deposit_retention_s` more of history for the operator,
//!   then [`Store::prune_deposits`](crate::store::Store::prune_deposits)
//!   deletes it; its evidence stays in the field, its trust moves in the
//!   devices, so no figure the router decides by is lost.
//! - **Departed devices.** A device not live for `device_retention_s`
//!   (since its last registration or the end of its last live scope) is
//!   forgotten:
//!   its identity, trust and row. Suspended and revoked devices are kept,
//!   so an operator's decision never lapses. A departed device that comes
//!   back registers as a new identity.

use std::collections::VecDeque;

use routing::trust::State as TrustState;

use super::{Router, Snapshot};

/// Seconds between two sweeps for departed devices.
pub const SWEEP_PERIOD_S: f64 = 60.0;

/// Written snapshots remembered, for the deposit log's retention: each
/// one's time and the highest deposit it covers.
#[derive(Debug, Clone, Default)]
pub struct Written {
    marks: VecDeque<(f64, u64)>,
}

impl Written {
    /// Records a snapshot written at `t_s` covering deposits ≤ `seq`, and
    /// returns the highest seq a snapshot written at least `keep_s` before
    /// `now_s` covered: the log may be pruned up to it. Marks older than
    /// that one are dropped (at most one mark a snapshot period is kept).
    pub fn record(&mut self, t_s: f64, seq: u64, now_s: f64, keep_s: f64) -> Option<u64> {
        if self.marks.back().is_none_or(|(_, s)| seq > *s) {
            self.marks.push_back((t_s, seq));
        }
        let mut up_to = None;
        while let Some(&(t, s)) = self.marks.front() {
            if now_s - t < keep_s {
                break;
            }
            up_to = Some(s);
            self.marks.pop_front();
        }
        if let Some(s) = up_to {
            // Keep the mark that allowed it: the next prune starts there.
            self.marks.push_front((f64::NEG_INFINITY, s));
        }
        up_to
    }
}

impl Router {
    /// Forgets devices departed at `now_s` (see the module), at most once
    /// a [`SWEEP_PERIOD_S`]; their rows are deleted with the next snapshot.
    pub(crate) fn sweep_departed(&mut self, now_s: f64) {
        if now_s - self.last_sweep_s < SWEEP_PERIOD_S {
            return;
        }
        self.last_sweep_s = now_s;
        let keep = self.cfg.device_retention_s;
        let gone: Vec<String> = self
            .d
            .devices
            .iter()
            .filter(|(id, d)| {
                !self.live.contains_key(*id)
                    && !matches!(d.state, TrustState::Suspended | TrustState::Revoked)
                    && now_s - d.last_seen_s.max(d.registered_at) > keep
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            self.d.devices.remove(&id);
            self.departed.push(id);
            self.counters.devices_departed += 1;
            self.dirty = true;
        }
    }

    /// Marks `snap` written at `now_s`: returns the seq the deposit log
    /// may be pruned up to now ([`Written::record`]), if any.
    pub fn snapshot_written(&mut self, snap: &Snapshot, now_s: f64) -> Option<u64> {
        self.rows_written(snap);
        if let Some(b) = snap.bytes() {
            self.counters.snapshot_bytes = b;
        }
        let keep = self.cfg.deposit_retention_s;
        self.written
            .record(snap.t_s(), snap.applied_seq(), now_s, keep)
    }

    /// A snapshot's write failed: its departed devices' rows are deleted
    /// with the next one instead (its targets' rows are written with it:
    /// they stay unwritten, `snapshot.rs`).
    pub fn snapshot_failed(&mut self, snap: &Snapshot) {
        self.departed.extend(snap.departed().iter().cloned());
        self.ended_leases
            .extend(snap.ended_leases().iter().cloned());
        self.dirty = true;
    }

    /// Counts deposits pruned from the log.
    pub fn deposits_pruned(&mut self, n: u64) {
        self.counters.deposits_pruned += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_is_pruned_up_to_the_newest_snapshot_old_enough() {
        let mut w = Written::default();
        let keep = 100.0;
        assert_eq!(w.record(0.0, 10, 0.0, keep), None);
        assert_eq!(w.record(50.0, 20, 50.0, keep), None);
        // At 120 the snapshot of t = 0 is old enough, t = 50 is not.
        assert_eq!(w.record(120.0, 30, 120.0, keep), Some(10));
        // At 160 the one of t = 50 is.
        assert_eq!(w.record(160.0, 40, 160.0, keep), Some(20));
        // Nothing newer is old enough yet: the last prune point again.
        assert_eq!(w.record(170.0, 45, 170.0, keep), Some(20));
        assert_eq!(w.record(300.0, 50, 300.0, keep), Some(45));
    }

    #[test]
    fn a_snapshot_covering_nothing_new_adds_no_mark() {
        let mut w = Written::default();
        w.record(0.0, 10, 0.0, 100.0);
        w.record(10.0, 10, 10.0, 100.0);
        assert_eq!(w.marks.len(), 1);
    }
}
