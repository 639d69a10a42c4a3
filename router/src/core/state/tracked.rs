//! A table kept in memory and written by changed rows: every record in a
//! persistent map, and the keys of the records changed since the last
//! snapshot took them, so a snapshot writes one row per changed record
//! instead of every record (docs/router.md "Durability and restart"; the
//! small box's memory and CPU, docs/router.md "The small box"). The
//! targets and the devices are both kept this way ([`Targets`],
//! [`Devices`]).
//!
//! Reads go through [`std::ops::Deref`] to the map; every change goes
//! through [`Tracked::get_mut`], [`Tracked::insert`] or
//! [`Tracked::remove`], which mark the key, so no change can miss its row.

use std::collections::HashSet;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde::{Deserialize, Deserializer};

use super::{DeviceRec, TargetRec};

/// The targets, keyed by name.
pub type Targets = Tracked<TargetRec>;

/// The devices, keyed by id.
pub type Devices = Tracked<DeviceRec>;

/// What a record adds to its table's tally ([`Tracked::tally`]): a count
/// kept exact as records change, so a gauge over the whole table costs
/// nothing to read instead of a walk of every record (`/metrics`' open
/// verifications; docs/router.md, "The small box").
pub trait Tally {
    /// This record's share of the tally.
    fn tally(&self) -> usize;
}

/// A target counts its open verifications.
impl Tally for TargetRec {
    fn tally(&self) -> usize {
        self.verification.open().len()
    }
}

/// A device counts nothing.
impl Tally for DeviceRec {
    fn tally(&self) -> usize {
        0
    }
}

/// A shared read of a [`Tracked`] map: records by name, each behind its
/// own pointer ([`Tracked::table`]).
pub type Table<V> = imbl::OrdMap<String, Arc<V>>;

/// Records of type `V` keyed by name, with the names changed since
/// [`Tracked::take_changed`] last ran.
///
/// Each record is held behind its own [`Arc`]: the map's nodes then hold
/// a name and a pointer (32 bytes) instead of the whole record, and a
/// B-tree filled in key order keeps its leaves half full, so a record held
/// in place cost twice its size (482 bytes per 240-byte device record
/// against 282 behind a pointer, measured with 100,000 keys in order);
/// and a change after a snapshot's clone copies one record and a leaf of
/// pointers, not a leaf of records (docs/router.md, "The small box").
#[derive(Debug, Clone, PartialEq)]
pub struct Tracked<V: Clone> {
    map: imbl::OrdMap<String, Arc<V>>,
    changed: HashSet<String>,
    /// Σ [`Tally::tally`] over the records.
    tally: usize,
}

impl<V: Clone> Default for Tracked<V> {
    fn default() -> Self {
        Tracked {
            map: imbl::OrdMap::new(),
            changed: HashSet::new(),
            tally: 0,
        }
    }
}

/// A record being changed ([`Tracked::get_mut`]): when it is dropped its
/// share of the table's tally is brought up to date.
pub struct RecMut<'a, V: Tally> {
    rec: &'a mut V,
    tally: &'a mut usize,
    before: usize,
}

impl<V: Tally> Deref for RecMut<'_, V> {
    type Target = V;

    fn deref(&self) -> &V {
        self.rec
    }
}

impl<V: Tally> DerefMut for RecMut<'_, V> {
    fn deref_mut(&mut self) -> &mut V {
        self.rec
    }
}

impl<V: Tally> Drop for RecMut<'_, V> {
    fn drop(&mut self) {
        // The table's tally includes this record's share from before.
        *self.tally = *self.tally + self.rec.tally() - self.before;
    }
}

impl<V: Clone> Deref for Tracked<V> {
    type Target = Table<V>;

    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl<V: Clone + Tally> Tracked<V> {
    /// The record of `name` to change, marking it changed; `None` when no
    /// such record is kept (nothing is marked). The table's tally follows
    /// the change when the guard is dropped.
    pub fn get_mut(&mut self, name: &str) -> Option<RecMut<'_, V>> {
        let rec = self.map.get_mut(name)?;
        if !self.changed.contains(name) {
            self.changed.insert(name.to_string());
        }
        let rec = Arc::make_mut(rec);
        let before = rec.tally();
        Some(RecMut {
            rec,
            tally: &mut self.tally,
            before,
        })
    }

    /// Inserts or replaces the record of `name`, marking it changed.
    pub fn insert(&mut self, name: String, rec: V) {
        self.changed.insert(name.clone());
        self.put(name, rec);
    }

    /// Removes the record of `name` and unmarks it (a removed record has
    /// no row to write; its row is deleted by whoever removed it).
    pub fn remove(&mut self, name: &str) -> Option<V> {
        self.changed.remove(name);
        let rec = self.map.remove(name)?;
        self.tally -= rec.tally();
        Some(Arc::try_unwrap(rec).unwrap_or_else(|shared| (*shared).clone()))
    }

    /// Puts a stored record back at a restart, unmarked (its row holds it).
    pub fn restore(&mut self, name: String, rec: V) {
        self.changed.remove(&name);
        self.put(name, rec);
    }

    fn put(&mut self, name: String, rec: V) {
        self.tally += rec.tally();
        if let Some(old) = self.map.insert(name, Arc::new(rec)) {
            self.tally -= old.tally();
        }
    }

    /// Σ [`Tally::tally`] over the records, kept as they change: O(1).
    pub fn tally(&self) -> usize {
        self.tally
    }

    /// The map, shared (an O(1) clone of the persistent map).
    pub fn table(&self) -> Table<V> {
        self.map.clone()
    }

    /// The names changed since the last call, in no order; the set is left
    /// empty and its memory freed (a set that once held every target, a
    /// facts request's 50,000 or a restart's 1,000,000, would otherwise
    /// keep its table's size for good: 25 bytes a slot).
    pub fn take_changed(&mut self) -> Vec<String> {
        std::mem::take(&mut self.changed).into_iter().collect()
    }

    /// How many records are marked changed.
    pub fn changed_len(&self) -> usize {
        self.changed.len()
    }
}

/// Snapshots written before these records had rows of their own held them
/// in the state row: read as a map, every record marked changed, so the
/// next snapshot writes them all as rows.
impl<'de, V: Clone + Tally + Deserialize<'de>> Deserialize<'de> for Tracked<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = imbl::OrdMap::<String, Arc<V>>::deserialize(d)?;
        let changed = map.keys().cloned().collect();
        let tally = map.values().map(|r| r.tally()).sum();
        Ok(Tracked {
            map,
            changed,
            tally,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(due_s: f64) -> TargetRec {
        TargetRec {
            source: "s".into(),
            listing: false,
            observations: Vec::new(),
            verification: Default::default(),
            last_attempt_s: None,
            due_s,
            churn: Default::default(),
        }
    }

    fn sorted(mut v: Vec<String>) -> Vec<String> {
        v.sort();
        v
    }

    #[test]
    fn every_change_marks_its_name_and_a_read_marks_none() {
        let mut t = Targets::default();
        t.insert("a".into(), rec(1.0));
        t.insert("b".into(), rec(2.0));
        assert_eq!(sorted(t.take_changed()), ["a", "b"]);
        assert_eq!(t.changed_len(), 0);
        // Reads through the map mark nothing.
        assert_eq!(t.get("a").map(|r| r.due_s), Some(1.0));
        assert_eq!(t.len(), 2);
        assert!(t.take_changed().is_empty());
        // A change through get_mut marks it, once however often.
        t.get_mut("b").unwrap().due_s = 5.0;
        t.get_mut("b").unwrap().due_s = 6.0;
        assert!(t.get_mut("missing").is_none());
        assert_eq!(t.take_changed(), ["b"]);
        assert_eq!(t.get("b").map(|r| r.due_s), Some(6.0));
    }

    #[test]
    fn a_restore_marks_nothing_and_unmarks_its_name() {
        let mut t = Targets::default();
        t.insert("a".into(), rec(1.0));
        t.insert("c".into(), rec(3.0));
        t.restore("c".into(), rec(3.5));
        assert_eq!(t.take_changed(), ["a"]);
        t.restore("d".into(), rec(4.0));
        assert!(t.take_changed().is_empty());
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn a_removal_unmarks_its_name_and_a_reinsertion_marks_it_again() {
        let mut t = Targets::default();
        t.insert("a".into(), rec(1.0));
        t.insert("b".into(), rec(2.0));
        assert_eq!(t.remove("a").map(|r| r.due_s), Some(1.0));
        assert!(t.remove("missing").is_none());
        assert_eq!(t.take_changed(), ["b"]);
        assert!(!t.contains_key("a"));
        t.insert("a".into(), rec(3.0));
        assert_eq!(t.take_changed(), ["a"]);
    }

    /// A target with verifications opened by `devices` devices (as many
    /// as the rule lets open).
    fn with_open(devices: usize) -> TargetRec {
        let mut r = rec(0.0);
        let vc = routing::verify::VerifyConfig {
            max_open: 8,
            ..Default::default()
        };
        for i in 0..devices {
            r.verification.begin(format!("d{i}"), 0.0, &vc).unwrap();
        }
        r
    }

    fn walked(t: &Targets) -> usize {
        t.values().map(|r| r.verification.open().len()).sum()
    }

    proptest::proptest! {
        /// Whatever inserts, changes, removals and restores come, the kept
        /// tally is what a walk of every record counts.
        #[test]
        fn the_tally_is_what_a_walk_counts(
            ops in proptest::collection::vec((0u8..5, 0usize..6, 0usize..4), 1..60)
        ) {
            let mut t = Targets::default();
            let vc = routing::verify::VerifyConfig { max_open: 8, ..Default::default() };
            for (op, key, n) in ops {
                let name = format!("t{key}");
                match op {
                    0 => t.insert(name, with_open(n)),
                    1 => {
                        t.remove(&name);
                    }
                    2 => t.restore(name, with_open(n)),
                    3 => {
                        if let Some(mut r) = t.get_mut(&name) {
                            let _ = r.verification.begin(format!("x{n}"), 0.0, &vc);
                        }
                    }
                    _ => {
                        if let Some(mut r) = t.get_mut(&name) {
                            r.verification.expire(1e9);
                        }
                    }
                }
                proptest::prop_assert_eq!(t.tally(), walked(&t));
            }
            // A clone shares the records; a change to one side leaves the
            // other's tally as it was.
            let before = t.tally();
            let mut copy = t.clone();
            if let Some(name) = copy.keys().next().cloned() {
                copy.get_mut(&name).unwrap().verification.expire(1e9);
            }
            proptest::prop_assert_eq!(t.tally(), before);
            proptest::prop_assert_eq!(copy.tally(), walked(&copy));
        }
    }

    #[test]
    fn an_old_state_row_marks_every_target_it_held() {
        let mut old = imbl::OrdMap::new();
        old.insert("x".to_string(), rec(1.0));
        old.insert("y".to_string(), with_open(2));
        let json = serde_json::to_string(&old).unwrap();
        let mut t: Targets = serde_json::from_str(&json).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.tally(), 2, "the open verifications it held");
        assert_eq!(sorted(t.take_changed()), ["x", "y"]);
    }
}
