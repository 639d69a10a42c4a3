//! The snapshot: taken under the router's lock as a clone of the durable
//! state (its large maps shared, so the clone is cheap), serialized and
//! written outside it, the departed devices' and ended leases' rows
//! deleted with it.
//! Source: `ROUTING.md` §4; docs/router.md "Durability and restart".

use super::{lease, Durable, Router, SharedStore, SNAPSHOT_KEY};
use crate::store::{Row, StoreError, Table};

impl Router {
    /// The snapshot if anything changed since the last call and the
    /// snapshot period has passed; marks the state clean. Taking it clones
    /// the durable state, which shares the targets and devices (persistent
    /// maps) and copies the rest (the field, O(its nodes)); serializing and
    /// writing is [`Router::write_snapshot`], which needs only the store,
    /// outside whatever lock guards the router.
    pub fn take_snapshot(&mut self, now_s: f64) -> Option<Snapshot> {
        if now_s < self.last_snapshot_s + self.cfg.snapshot_period_s {
            return None;
        }
        self.take_snapshot_now(now_s)
    }

    /// As [`Router::take_snapshot`] but ignoring the snapshot period (a
    /// clean stop writes everything, leases' open verifications included).
    pub fn take_snapshot_now(&mut self, now_s: f64) -> Option<Snapshot> {
        if !self.dirty {
            return None;
        }
        self.last_snapshot_s = now_s;
        self.d.t_s = now_s;
        self.d.snapshot_seq += 1;
        self.dirty = false;
        Some(Snapshot {
            state: Box::new(self.d.clone()),
            departed: std::mem::take(&mut self.departed),
            ended_leases: std::mem::take(&mut self.ended_leases),
            bytes: std::sync::OnceLock::new(),
        })
    }

    /// Serializes a snapshot taken by [`Router::take_snapshot`] and writes
    /// it to `store`: the state as one [`Table::Meta`] row, and one
    /// [`Table::Devices`] row per device (identity, trust, state), all at
    /// the snapshot's version. Errors: the store's, or `BadValue` when the
    /// state does not serialize (the next snapshot carries the state again).
    pub fn write_snapshot(store: &SharedStore, snap: &Snapshot) -> Result<(), StoreError> {
        let (meta, devices) = snap.rows()?;
        let mut st = store.lock();
        st.upsert(Table::Meta, &meta)?;
        st.upsert(Table::Devices, &devices)?;
        if !snap.departed.is_empty() {
            st.delete(Table::Devices, &snap.departed)?;
        }
        if !snap.ended_leases.is_empty() {
            st.delete(Table::Leases, &snap.ended_leases)?;
        }
        Ok(())
    }

    /// Marks the state changed (a snapshot write failed: the next tick retries).
    pub fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    /// Takes (ignoring the period) and writes the snapshot now. On a store error the
    /// state stays dirty so the next call retries.
    pub fn persist(&mut self, now_s: f64) -> Result<(), StoreError> {
        if let Some(snap) = self.take_snapshot_now(now_s) {
            if let Err(e) = Router::write_snapshot(&self.store, &snap) {
                self.snapshot_failed(&snap);
                return Err(e);
            }
        }
        Ok(())
    }
}

/// One snapshot: a clone of the durable state at the moment it was taken
/// (cheap: its large maps are shared), serialized only when written.
#[derive(Debug, Clone)]
pub struct Snapshot {
    state: Box<Durable>,
    /// Departed devices whose rows this snapshot deletes.
    departed: Vec<String>,
    /// Ended leases whose rows this snapshot deletes (after the state that
    /// no longer holds them is written).
    ended_leases: Vec<String>,
    /// Bytes of the snapshot row, once [`Snapshot::rows`] serialized it.
    bytes: std::sync::OnceLock<u64>,
}

impl Snapshot {
    /// Router-clock time it was taken at, seconds.
    pub fn t_s(&self) -> f64 {
        self.state.t_s
    }

    /// The highest deposit seq folded into it.
    pub fn applied_seq(&self) -> u64 {
        self.state.applied_seq
    }

    /// Bytes of its snapshot row, once serialized ([`Snapshot::rows`]).
    pub fn bytes(&self) -> Option<u64> {
        self.bytes.get().copied()
    }

    /// The departed devices whose rows it deletes.
    pub fn departed(&self) -> &[String] {
        &self.departed
    }

    /// The ended leases whose rows it deletes.
    pub fn ended_leases(&self) -> &[String] {
        &self.ended_leases
    }

    /// The snapshot's version: the state's snapshot sequence (a store keeps
    /// the row with the higher version, so a late write never wins).
    pub fn version(&self) -> u64 {
        self.state.snapshot_seq
    }

    /// The rows to write: the [`Table::Meta`] snapshot row and one
    /// [`Table::Devices`] row per device. Errors: `BadValue` when the
    /// state does not serialize.
    pub fn rows(&self) -> Result<(Vec<Row>, Vec<Row>), StoreError> {
        let version = self.version();
        let payload = json_exact(&*self.state)?;
        let _ = self.bytes.set(payload.len() as u64);
        let meta = vec![Row {
            key: SNAPSHOT_KEY.into(),
            version,
            payload,
        }];
        let devices = self
            .state
            .devices
            .iter()
            .map(|(k, v)| Row {
                key: k.clone(),
                version,
                payload: serde_json::json!({
                    "archetype": v.archetype,
                    "trust": v.trust,
                    "state": lease::state_name(v.state),
                    "deposits": v.deposits,
                })
                .to_string(),
            })
            .collect();
        Ok((meta, devices))
    }
}

/// Counts the bytes written to it, keeping none.
struct Count(usize);

impl std::io::Write for Count {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0 += b.len();
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `value` as JSON in a buffer of exactly its length: one pass counts the
/// bytes, the second writes them. A string grown by doubling would hold
/// up to twice the snapshot, and, while it grows, the old buffer and the
/// new one at once (three times a snapshot of tens of MiB at the peak of a
/// small box: docs/router.md, "The small box"). Errors: `BadValue` when
/// the value does not serialize.
fn json_exact<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    let bad = |e: serde_json::Error| StoreError::BadValue(format!("snapshot: {e}"));
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value).map_err(bad)?;
    let mut buf = Vec::with_capacity(count.0);
    serde_json::to_writer(&mut buf, value).map_err(bad)?;
    String::from_utf8(buf).map_err(|e| StoreError::BadValue(format!("snapshot: {e}")))
}
