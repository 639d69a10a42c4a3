//! How long the store was held, and waited for, by each operation of the
//! HTTP shell that takes it: the longest of each since the start, in µs,
//! in `/metrics` (`router_store_hold_max_us{op}` and
//! `router_store_wait_max_us{op}`).
//!
//! A lease with items and a deposit are answered only once the writer has
//! written their rows (`writer.rs`), so their latency includes the
//! writer's wait for the store. Where the store has no second handle for
//! the writer (SQLite), that wait is whatever else holds the store then:
//! a snapshot's write, or the deposit log's pruning after it
//! (docs/router.md, "The small box").

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::core::{SharedStore, Snapshot};
use crate::store::{Store, StoreError};
use crate::Router;

use super::Shell;

/// An operation that takes the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    /// A tick's snapshot: its rows in one atomic write.
    Snapshot,
    /// The deposit log pruned after a snapshot.
    Prune,
    /// The writer's batch of leases' rows.
    Leases,
    /// The writer's batch of deposits.
    Deposits,
    /// The registrar's batch of new identities' rows.
    Registrations,
}

impl Op {
    const ALL: [Op; 5] = [
        Op::Snapshot,
        Op::Prune,
        Op::Leases,
        Op::Deposits,
        Op::Registrations,
    ];

    fn label(self) -> &'static str {
        match self {
            Op::Snapshot => "snapshot",
            Op::Prune => "prune",
            Op::Leases => "leases",
            Op::Deposits => "deposits",
            Op::Registrations => "registrations",
        }
    }
}

/// The longest wait for, and hold of, the store by each [`Op`], µs.
#[derive(Debug, Default)]
pub(super) struct Holds {
    wait_us: [AtomicU64; Op::ALL.len()],
    hold_us: [AtomicU64; Op::ALL.len()],
}

impl Holds {
    /// Runs `f` on `store` under its lock, counting how long `op` waited
    /// for the lock and held it.
    pub(super) fn with<T>(
        &self,
        op: Op,
        store: &SharedStore,
        f: impl FnOnce(&mut dyn Store) -> T,
    ) -> T {
        self.with_held(op, store, f).0
    }

    /// As [`Holds::with`], also returning how long this call held the store.
    fn with_held<T>(
        &self,
        op: Op,
        store: &SharedStore,
        f: impl FnOnce(&mut dyn Store) -> T,
    ) -> (T, Duration) {
        let asked = Instant::now();
        let mut guard = store.lock();
        let got = Instant::now();
        let out = f(&mut **guard);
        drop(guard);
        let held = got.elapsed();
        let i = op as usize;
        let wait = got.saturating_duration_since(asked).as_micros() as u64;
        self.wait_us[i].fetch_max(wait, Ordering::Relaxed);
        self.hold_us[i].fetch_max(held.as_micros() as u64, Ordering::Relaxed);
        (out, held)
    }

    /// Writes `snap` ([`Router::write_snapshot_with`]), counting its hold
    /// of the store as [`Op::Snapshot`] and logging it where it reached
    /// [`SLOW_SNAPSHOT`]. Errors as [`Router::write_snapshot`].
    pub(super) fn write_snapshot(
        &self,
        store: &SharedStore,
        snap: &Snapshot,
    ) -> Result<(), StoreError> {
        let mut held = Duration::ZERO;
        let written = Router::write_snapshot_with(snap, |writes| {
            let (out, h) = self.with_held(Op::Snapshot, store, |s| s.write_all(writes));
            held = h;
            out
        });
        log_slow_snapshot(snap, held);
        written
    }

    /// The longest hold of `op` so far, µs.
    pub(super) fn hold_max_us(&self, op: Op) -> u64 {
        self.hold_us[op as usize].load(Ordering::Relaxed)
    }

    /// The longest wait of `op` so far, µs.
    pub(super) fn wait_max_us(&self, op: Op) -> u64 {
        self.wait_us[op as usize].load(Ordering::Relaxed)
    }

    /// Both gauges, one line per operation (Prometheus text).
    pub(super) fn metrics_text(&self) -> String {
        let mut out = String::from(
            "# HELP router_store_hold_max_us The longest time an operation held the store since the start, µs.\n# TYPE router_store_hold_max_us gauge\n",
        );
        for op in Op::ALL {
            out.push_str(&format!(
                "router_store_hold_max_us{{op=\"{}\"}} {}\n",
                op.label(),
                self.hold_max_us(op)
            ));
        }
        out.push_str("# HELP router_store_wait_max_us The longest time an operation waited for the store since the start, µs.\n# TYPE router_store_wait_max_us gauge\n");
        for op in Op::ALL {
            out.push_str(&format!(
                "router_store_wait_max_us{{op=\"{}\"}} {}\n",
                op.label(),
                self.wait_max_us(op)
            ));
        }
        out
    }
}

impl Shell {
    /// Writes a tick's snapshot `snap`, taken at `now`, outside the
    /// router's lock, then prunes the deposit log as far as retention
    /// allows; both count their holds of the store. A failed write leaves
    /// the state dirty (the next tick retries); errors are logged.
    pub(super) fn persist(&self, snap: &Snapshot, now: f64) {
        if let Err(e) = self.holds.write_snapshot(&self.store, snap) {
            tracing::warn!("tick could not write its snapshot: {e}");
            self.router.lock().snapshot_failed(snap);
            return;
        }
        let Some(up_to) = self.router.lock().snapshot_written(snap, now) else {
            return;
        };
        match self
            .holds
            .with(Op::Prune, &self.store, |s| s.prune_deposits(up_to))
        {
            Ok(n) => self.router.lock().deposits_pruned(n),
            Err(e) => tracing::warn!("could not prune the deposit log: {e}"),
        }
    }
}

/// A snapshot write that held the store at least this long is logged
/// (whatever goes through the shared handle meanwhile, a registration or
/// a read, waits it out; the store writer's leases and deposits wait only
/// where the store has no handle for them of their own).
pub(super) const SLOW_SNAPSHOT: Duration = Duration::from_millis(100);

/// Logs a snapshot write that held the store [`SLOW_SNAPSHOT`] or
/// longer, with what it wrote.
fn log_slow_snapshot(snap: &Snapshot, held: Duration) {
    if held >= SLOW_SNAPSHOT {
        tracing::warn!(
            held_ms = held.as_millis() as u64,
            target_rows = snap.changed_targets().len(),
            device_rows = snap.changed_devices().len(),
            departed = snap.departed().len(),
            ended_leases = snap.ended_leases().len(),
            state_bytes = snap.bytes().unwrap_or(0),
            "a snapshot write held the store's shared handle"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{MemoryStore, Table};
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn each_operation_keeps_its_own_longest_hold() {
        let store: SharedStore = Arc::new(parking_lot::Mutex::new(Box::new(MemoryStore::new())));
        let holds = Holds::default();
        // A hold that sleeps 2 ms lasts at least that (a sleep never ends
        // early); a later, shorter one does not lower the figure.
        let rows = holds.with(Op::Snapshot, &store, |s| {
            std::thread::sleep(Duration::from_millis(2));
            s.load_page(Table::Leases, None, 10).map(|r| r.len())
        });
        assert_eq!(
            rows.unwrap(),
            0,
            "f ran on the store and its answer came back"
        );
        let long = holds.hold_max_us(Op::Snapshot);
        assert!(long >= 2_000, "{long} µs");
        holds.with(Op::Snapshot, &store, |_| ());
        assert_eq!(holds.hold_max_us(Op::Snapshot), long);
        // The others are untouched.
        for op in [Op::Prune, Op::Leases, Op::Deposits, Op::Registrations] {
            assert_eq!((holds.hold_max_us(op), holds.wait_max_us(op)), (0, 0));
        }
        let text = holds.metrics_text();
        assert!(text.contains(&format!(
            "router_store_hold_max_us{{op=\"snapshot\"}} {long}\n"
        )));
        assert!(text.contains("router_store_wait_max_us{op=\"prune\"} 0\n"));
        assert!(text.contains("router_store_hold_max_us{op=\"registrations\"} 0\n"));
        assert_eq!(text.lines().filter(|l| !l.starts_with('#')).count(), 10);
    }
}
