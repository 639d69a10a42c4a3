//! The targets table: every target's record in a persistent map, and the
//! names of the records changed since the last snapshot took them, so a
//! snapshot writes one row per changed target instead of every target
//! (docs/router.md "Durability and restart"; the small box's memory and
//! CPU, docs/router.md "The small box").
//!
//! Reads go through [`std::ops::Deref`] to the map; every change goes
//! through [`Targets::get_mut`] or [`Targets::insert`], which mark the
//! name, so no change can miss its row.

use std::collections::HashSet;
use std::ops::Deref;

use serde::{Deserialize, Deserializer};

use super::TargetRec;

/// The targets, keyed by name, with the names changed since
/// [`Targets::take_changed`] last ran.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Targets {
    map: imbl::OrdMap<String, TargetRec>,
    changed: HashSet<String>,
}

impl Deref for Targets {
    type Target = imbl::OrdMap<String, TargetRec>;

    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl Targets {
    /// The record of `name` to change, marking it changed; `None` when no
    /// such target is kept (nothing is marked).
    pub fn get_mut(&mut self, name: &str) -> Option<&mut TargetRec> {
        let rec = self.map.get_mut(name)?;
        if !self.changed.contains(name) {
            self.changed.insert(name.to_string());
        }
        Some(rec)
    }

    /// Inserts or replaces the record of `name`, marking it changed.
    pub fn insert(&mut self, name: String, rec: TargetRec) {
        self.changed.insert(name.clone());
        self.map.insert(name, rec);
    }

    /// Puts a stored record back at a restart, unmarked (its row holds it).
    pub fn restore(&mut self, name: String, rec: TargetRec) {
        self.changed.remove(&name);
        self.map.insert(name, rec);
    }

    /// The map, shared (an O(1) clone of the persistent map).
    pub fn table(&self) -> imbl::OrdMap<String, TargetRec> {
        self.map.clone()
    }

    /// The names changed since the last call, in no order; the set is left
    /// empty.
    pub fn take_changed(&mut self) -> Vec<String> {
        self.changed.drain().collect()
    }

    /// How many records are marked changed.
    pub fn changed_len(&self) -> usize {
        self.changed.len()
    }
}

/// Snapshots written before the targets had rows of their own held them in
/// the state row: read as a map, every record marked changed, so the next
/// snapshot writes them all as rows.
impl<'de> Deserialize<'de> for Targets {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = imbl::OrdMap::<String, TargetRec>::deserialize(d)?;
        let changed = map.keys().cloned().collect();
        Ok(Targets { map, changed })
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
    fn an_old_state_row_marks_every_target_it_held() {
        let mut old = imbl::OrdMap::new();
        old.insert("x".to_string(), rec(1.0));
        old.insert("y".to_string(), rec(2.0));
        let json = serde_json::to_string(&old).unwrap();
        let mut t: Targets = serde_json::from_str(&json).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(sorted(t.take_changed()), ["x", "y"]);
    }
}
