//! The snapshot: taken under the router's lock as a clone of the durable
//! state (its large maps shared, so the clone is cheap), serialized and
//! written outside it in one atomic batch: the state row, one row per
//! target changed since the last snapshot (the targets are not in the
//! state row, so a snapshot's size follows the work since the last one,
//! not the population), one row per device changed since then (the
//! devices are not in the state row either), and the deletions of the
//! departed devices' and ended leases' rows.
//! Source: `ROUTING.md` §4; docs/router.md "Durability and restart".

use super::admission::IDENTITY_FIELD;
use super::names::Names;
use super::state::DeviceRec;
use super::target_rows;
use super::{lease, Durable, OpenError, Router, SharedStore, SNAPSHOT_KEY};
use crate::store::{Row, Store, StoreError, Table, Write};

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
        if !self.dirty && self.d.targets.changed_len() == 0 && self.d.devices.changed_len() == 0 {
            return None;
        }
        let version = self.d.snapshot_seq + 1;
        let changed_targets = self
            .unwritten_targets
            .carry(self.d.targets.take_changed(), version);
        let changed_devices = self
            .unwritten_devices
            .carry(self.d.devices.take_changed(), version);
        self.names.prune();
        self.last_snapshot_s = now_s;
        self.d.t_s = now_s;
        self.d.snapshot_seq += 1;
        self.dirty = false;
        Some(Snapshot {
            state: parking_lot::Mutex::new(Some(Box::new(self.d.clone()))),
            t_s: self.d.t_s,
            applied_seq: self.d.applied_seq,
            version: self.d.snapshot_seq,
            changed_targets,
            changed_devices,
            departed: std::mem::take(&mut self.departed),
            ended_leases: std::mem::take(&mut self.ended_leases),
            bytes: std::sync::OnceLock::new(),
        })
    }

    /// Serializes a snapshot taken by [`Router::take_snapshot`] and writes
    /// it to `store` in one atomic batch ([`crate::store::Store::write_all`]): one
    /// [`Table::Targets`] row per target changed since the last snapshot,
    /// the state as one [`Table::Meta`] row, one [`Table::Devices`] row
    /// per device changed since the last snapshot (its identity, trust and
    /// state), all at the snapshot's version, then the departed devices' and ended leases' rows deleted. A crash
    /// leaves either all of it or none, so the state row never covers
    /// deposits whose target or device rows are missing (on SQLite the
    /// ended leases' deletions commit after the rest, in the log file: a
    /// crash between leaves rows a restart reads as ended or expired;
    /// decision 0030). Errors: the store's, or
    /// `BadValue` when the state does not serialize (the next snapshot
    /// carries the state again).
    pub fn write_snapshot(store: &SharedStore, snap: &Snapshot) -> Result<(), StoreError> {
        Router::write_snapshot_with(snap, |writes| store.lock().write_all(writes))
    }

    /// As [`Router::write_snapshot`], with `write` taking the store to
    /// make the writes in one atomic batch: the rows are serialized first,
    /// before it is called (the shell counts how long the store is held:
    /// `http/holds.rs`). Errors: `write`'s, or `BadValue` as above.
    pub fn write_snapshot_with(
        snap: &Snapshot,
        write: impl FnOnce(&[Write<'_>]) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let Rows {
            targets,
            meta,
            devices,
        } = snap.rows()?;
        write(&[
            Write::Upsert(Table::Targets, &targets),
            Write::Upsert(Table::Meta, &meta),
            Write::Upsert(Table::Devices, &devices),
            Write::Delete(Table::Devices, &snap.departed),
            Write::Delete(Table::Leases, &snap.ended_leases),
        ])
    }

    /// `snap` was written: the target and device rows it carried are in
    /// the store, so later snapshots need not carry them again (unless
    /// changed since).
    pub(super) fn rows_written(&mut self, snap: &Snapshot) {
        self.unwritten_targets.written(snap.version());
        self.unwritten_devices.written(snap.version());
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
            self.rows_written(&snap);
        }
        Ok(())
    }
}

/// Rows read per page at a restart.
const RESTORE_PAGE: usize = 4096;

/// Calls `each` on every row of `table`, in key order, a page of
/// [`RESTORE_PAGE`] rows at a time, so a restart never holds a large
/// table's rows at once. Errors: the store's, or the first of `each`'s.
pub(super) fn each_row(
    store: &mut dyn Store,
    table: Table,
    mut each: impl FnMut(Row) -> Result<(), OpenError>,
) -> Result<(), OpenError> {
    let mut after: Option<String> = None;
    loop {
        let page = store.load_page(table, after.as_deref(), RESTORE_PAGE)?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        after = Some(last.key.clone());
        for row in page {
            each(row)?;
        }
    }
}

/// Reads the targets' own rows into `d`, and their cells into the field
/// read from the state row (its caches are rebuilt after:
/// [`super::target_rows::restore_cells`]); a row replaces what an older
/// state row held of its target.
///
/// Errors: [`OpenError::BadState`] when a row is unreadable; the store's.
pub(super) fn restore_targets(
    d: &mut Durable,
    store: &mut dyn Store,
    names: &mut Names,
) -> Result<(), OpenError> {
    each_row(store, Table::Targets, |row| {
        let (mut rec, cells) = target_rows::read(&row.payload)
            .map_err(|e| OpenError::BadState(format!("target {}: {e}", row.key)))?;
        rec.keep_observations();
        for o in &mut rec.observations {
            o.device = names.intern(&o.device);
            o.adapter = names.intern(&o.adapter);
            o.adapter_version = names.intern(&o.adapter_version);
        }
        let state_held = target_rows::restore_cells(d, &row.key, &rec, cells)
            .map_err(|e| OpenError::BadState(format!("target {}: {e}", row.key)))?;
        let name = row.key;
        d.targets.restore(name.clone(), rec);
        if state_held {
            // Written before the cells moved to the rows: the next
            // snapshot writes its row with them.
            drop(d.targets.get_mut(&name));
        }
        Ok(())
    })
}

/// Restores into `d` every device from its row ([`IDENTITY_FIELD`] rows
/// of [`Table::Devices`]: written at registration, then by every snapshot
/// after the device changed), a page at a time, unmarked. A state row
/// written before the devices had rows of their own holds them: a device
/// it holds keeps that record (its row then is a summary, or an identity
/// row no newer than it), and rows without an identity change nothing.
/// Errors: a row that does not parse, named; the store's.
pub(super) fn restore_devices(
    d: &mut Durable,
    store: &mut dyn Store,
    names: &mut Names,
) -> Result<(), OpenError> {
    each_row(store, Table::Devices, |row| {
        if d.devices.contains_key(&row.key) {
            return Ok(());
        }
        let bad =
            |e: serde_json::Error| OpenError::BadState(format!("device row {}: {e}", row.key));
        let v: serde_json::Value = serde_json::from_str(&row.payload).map_err(bad)?;
        if let Some(identity) = v.get(IDENTITY_FIELD) {
            let mut rec: DeviceRec = serde_json::from_value(identity.clone()).map_err(bad)?;
            rec.credential = names.intern(&rec.credential);
            rec.network = rec.network.map(|n| names.intern(&n));
            rec.archetype = names.intern(&rec.archetype);
            rec.capabilities = names.intern_list(&rec.capabilities);
            rec.adapter_version = names.intern(&rec.adapter_version);
            d.devices.restore(row.key, rec);
        }
        Ok(())
    })
}

/// One snapshot: a clone of the durable state at the moment it was taken
/// (cheap: its large maps are shared), serialized only when written.
///
/// The clone is dropped as soon as [`Snapshot::rows`] has serialized it,
/// before the rows are written: while it lives, every target or device
/// the router changes is copied (the maps share their records, and a
/// shared record is copied on write), and a write can take seconds
/// (docs/router.md, "The log in its own file").
#[derive(Debug)]
pub struct Snapshot {
    /// The state's clone, until [`Snapshot::rows`] takes it.
    state: parking_lot::Mutex<Option<Box<Durable>>>,
    /// The state's router-clock time, seconds.
    t_s: f64,
    /// The highest deposit seq folded into the state.
    applied_seq: u64,
    /// The state's snapshot sequence.
    version: u64,
    /// Targets changed since the last snapshot: the rows this one writes.
    changed_targets: Vec<String>,
    /// Devices changed since the last snapshot: the rows this one writes.
    changed_devices: Vec<String>,
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
        self.t_s
    }

    /// The highest deposit seq folded into it.
    pub fn applied_seq(&self) -> u64 {
        self.applied_seq
    }

    /// Bytes of its snapshot row, once serialized ([`Snapshot::rows`]).
    pub fn bytes(&self) -> Option<u64> {
        self.bytes.get().copied()
    }

    /// The targets whose rows it writes (changed since the last snapshot).
    pub fn changed_targets(&self) -> &[String] {
        &self.changed_targets
    }

    /// The devices whose rows it writes (changed since the last snapshot).
    pub fn changed_devices(&self) -> &[String] {
        &self.changed_devices
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
        self.version
    }

    /// The rows to write: one [`Table::Targets`] row per changed target,
    /// the [`Table::Meta`] snapshot row and one [`Table::Devices`] row per
    /// changed device ([`device_payload`]). Takes the state's clone and
    /// drops it once serialized, so a snapshot serializes once. Errors:
    /// `BadValue` when the state does not serialize, or was serialized
    /// before.
    pub fn rows(&self) -> Result<Rows, StoreError> {
        let Some(state) = self.state.lock().take() else {
            return Err(StoreError::BadValue(format!(
                "snapshot {} was serialized before",
                self.version
            )));
        };
        self.rows_of(&state)
    }

    fn rows_of(&self, st: &Durable) -> Result<Rows, StoreError> {
        let version = self.version();
        let bad = |e: serde_json::Error| StoreError::BadValue(format!("snapshot: {e}"));
        let mut targets = Vec::with_capacity(self.changed_targets.len());
        for name in &self.changed_targets {
            if let Some(rec) = st.targets.get(name) {
                targets.push(Row {
                    key: name.clone(),
                    version,
                    payload: target_rows::payload(st, name, rec).map_err(bad)?,
                });
            }
        }
        let mut devices = Vec::with_capacity(self.changed_devices.len());
        for id in &self.changed_devices {
            if let Some(rec) = st.devices.get(id) {
                devices.push(Row {
                    key: id.clone(),
                    version,
                    payload: device_payload(rec).map_err(bad)?,
                });
            }
        }
        // The state row leaves out the task cells the targets' rows carry.
        let mut state = st.clone();
        state.field = target_rows::state_field(st);
        let payload = json_exact(&state)?;
        drop(state);
        let rows_bytes: usize = targets
            .iter()
            .chain(&devices)
            .map(|r| r.payload.len())
            .sum();
        let _ = self.bytes.set((payload.len() + rows_bytes) as u64);
        let meta = vec![Row {
            key: SNAPSHOT_KEY.into(),
            version,
            payload,
        }];
        Ok(Rows {
            targets,
            meta,
            devices,
        })
    }
}

/// The rows one snapshot writes, by table.
#[derive(Debug, Clone, PartialEq)]
pub struct Rows {
    /// One [`Table::Targets`] row per changed target.
    pub targets: Vec<Row>,
    /// The [`Table::Meta`] snapshot row.
    pub meta: Vec<Row>,
    /// One [`Table::Devices`] row per changed device.
    pub devices: Vec<Row>,
}

/// A device's row: its whole record under [`IDENTITY_FIELD`] (what a
/// restart reads back), beside its archetype, trust, state and deposits
/// at the top level for an operator reading the table. Errors: the
/// record does not serialize.
pub fn device_payload(rec: &DeviceRec) -> Result<String, serde_json::Error> {
    serde_json::to_string(&serde_json::json!({
        IDENTITY_FIELD: rec,
        "archetype": rec.archetype,
        "trust": rec.trust,
        "state": lease::state_name(rec.state),
        "deposits": rec.deposits,
    }))
}

/// Rows a snapshot carried whose write nobody has confirmed, for one
/// table: each name with the version of the latest snapshot that carried
/// it. Every snapshot carries them again, so the newest state row never
/// lacks a row, even after a failed write.
#[derive(Debug, Clone, Default)]
pub(super) struct Unwritten {
    rows: std::collections::HashMap<String, u64>,
}

impl Unwritten {
    /// The names snapshot `version` writes: those `changed` since the last
    /// snapshot, and those an earlier one carried and nobody confirmed
    /// written, each once.
    pub(super) fn carry(&mut self, mut changed: Vec<String>, version: u64) -> Vec<String> {
        for name in &changed {
            self.rows.insert(name.clone(), version);
        }
        for (name, v) in self.rows.iter_mut() {
            if *v < version {
                *v = version;
                changed.push(name.clone());
            }
        }
        changed
    }

    /// Snapshot `version` was written: the names it carried are in the store.
    pub(super) fn written(&mut self, version: u64) {
        self.rows.retain(|_, v| *v > version);
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
