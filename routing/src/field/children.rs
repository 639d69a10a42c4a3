//! The children of one field cell, by label: a map sized for the field's
//! shape, where most cells have one child or a few (a target's cell holds
//! one per environment) and a few have many (a source's binding holds one
//! per target).
//!
//! Up to [`SMALL_MAX`] children are one sorted vector grown a slot at a
//! time, so a cell with one child costs one 24-byte entry instead of a
//! B-tree node with room for eleven (about 370 bytes); beyond that they
//! move to a B-tree, so a cell with a million children still inserts in
//! O(log n). Either way iteration is in label byte order, and the map
//! serializes as a JSON object exactly as a `BTreeMap<String, _>` did, so
//! snapshots read and write unchanged. Source: `ROUTING.md` §3 Field;
//! docs/router.md, "The small box".

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Most children held in the sorted vector; one more moves them to a B-tree.
pub const SMALL_MAX: usize = 32;

/// A cell's children by label (see the module's docs); `N` is the cell
/// type (the field's [`super::Node`]), shared between clones of the field.
#[derive(Debug, Clone)]
pub enum Children<N> {
    /// At most [`SMALL_MAX`], sorted by label, no spare capacity.
    Small(Vec<(Box<str>, Arc<N>)>),
    /// More than [`SMALL_MAX`]; boxed, so the map costs a cell with few
    /// children nothing (the enum is one vector's 24 bytes, not 32).
    Large(Box<BTreeMap<Box<str>, Arc<N>>>),
}

impl<N> Default for Children<N> {
    fn default() -> Self {
        Children::Small(Vec::new())
    }
}

impl<N: PartialEq> PartialEq for Children<N> {
    /// Equal when they hold the same labels with equal children, whichever
    /// representation each uses.
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .zip(other.iter())
                .all(|((a, x), (b, y))| a == b && x == y)
    }
}

impl<N> Children<N> {
    /// How many children.
    pub fn len(&self) -> usize {
        match self {
            Children::Small(v) => v.len(),
            Children::Large(m) => m.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The child labelled `label`.
    pub fn get(&self, label: &str) -> Option<&Arc<N>> {
        match self {
            Children::Small(v) => find(v, label).ok().map(|i| &v[i].1),
            Children::Large(m) => m.get(label),
        }
    }

    /// The child labelled `label`, to edit.
    pub fn get_mut(&mut self, label: &str) -> Option<&mut Arc<N>> {
        match self {
            Children::Small(v) => find(v, label).ok().map(move |i| &mut v[i].1),
            Children::Large(m) => m.get_mut(label),
        }
    }

    /// The child labelled `label`, a default cell inserted first if none.
    pub fn get_or_insert_default(&mut self, label: &str) -> &mut Arc<N>
    where
        N: Default,
    {
        if let Children::Small(v) = self {
            if let Err(at) = find(v, label) {
                if v.len() < SMALL_MAX {
                    v.reserve_exact(1);
                    v.insert(at, (label.into(), Arc::default()));
                } else {
                    let m: BTreeMap<_, _> = std::mem::take(v).into_iter().collect();
                    *self = Children::Large(Box::new(m));
                }
            }
        }
        match self {
            Children::Small(v) => {
                let i = find(v, label).unwrap_or_else(|i| i);
                &mut v[i].1
            }
            Children::Large(m) => m.entry(label.into()).or_default(),
        }
    }

    /// Removes and returns the child labelled `label`.
    pub fn remove(&mut self, label: &str) -> Option<Arc<N>> {
        match self {
            Children::Small(v) => {
                let i = find(v, label).ok()?;
                let (_, child) = v.remove(i);
                v.shrink_to_fit();
                Some(child)
            }
            Children::Large(m) => m.remove(label),
        }
    }

    /// Every (label, child), in label byte order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (&str, &Arc<N>)> + '_> {
        match self {
            Children::Small(v) => Box::new(v.iter().map(|(k, c)| (&**k, c))),
            Children::Large(m) => Box::new(m.iter().map(|(k, c)| (&**k, c))),
        }
    }

    /// Every child, in label byte order.
    pub fn values(&self) -> impl Iterator<Item = &Arc<N>> + '_ {
        self.iter().map(|(_, c)| c)
    }

    /// Every child, to edit, in label byte order.
    pub fn values_mut(&mut self) -> Box<dyn Iterator<Item = &mut Arc<N>> + '_> {
        match self {
            Children::Small(v) => Box::new(v.iter_mut().map(|(_, c)| c)),
            Children::Large(m) => Box::new(m.values_mut()),
        }
    }

    /// From (label, child) pairs in any order; a repeated label keeps its
    /// last child (as a `BTreeMap` built from the same pairs would).
    pub(crate) fn from_pairs(mut pairs: Vec<(Box<str>, Arc<N>)>) -> Children<N> {
        if pairs.len() > SMALL_MAX {
            return Children::Large(Box::new(pairs.into_iter().collect()));
        }
        // A stable sort keeps repeated labels in arrival order; keep the last.
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(Box<str>, Arc<N>)> = Vec::with_capacity(pairs.len());
        for p in pairs {
            match out.last_mut() {
                Some(last) if last.0 == p.0 => *last = p,
                _ => out.push(p),
            }
        }
        out.shrink_to_fit();
        Children::Small(out)
    }
}

/// Binary search of a sorted small map.
fn find<N>(v: &[(Box<str>, Arc<N>)], label: &str) -> Result<usize, usize> {
    v.binary_search_by(|(k, _)| (**k).cmp(label))
}

impl<N: Serialize> Serialize for Children<N> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.len()))?;
        for (k, c) in self.iter() {
            m.serialize_entry(k, &**c)?;
        }
        m.end()
    }
}

impl<'de, N: Deserialize<'de>> Deserialize<'de> for Children<N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Pairs<N>(std::marker::PhantomData<N>);
        impl<'de, N: Deserialize<'de>> Visitor<'de> for Pairs<N> {
            type Value = Children<N>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map from label to cell")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Children<N>, A::Error> {
                let mut pairs = Vec::new();
                while let Some((k, c)) = a.next_entry::<String, N>()? {
                    pairs.push((k.into_boxed_str(), Arc::new(c)));
                }
                Ok(Children::from_pairs(pairs))
            }
        }
        d.deserialize_map(Pairs(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in cell (the field's node type lives in `tree.rs`).
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    struct Node {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        weight: Option<f64>,
    }

    type Children = super::Children<Node>;

    fn cell(w: f64) -> Node {
        Node { weight: Some(w) }
    }

    fn labels(c: &Children) -> Vec<String> {
        c.iter().map(|(k, _)| k.to_string()).collect()
    }

    /// Every operation against a `BTreeMap` doing the same, across the
    /// move from the vector to the B-tree and back below it.
    #[test]
    fn behaves_as_a_sorted_map_on_both_sides_of_the_threshold() {
        let mut c = Children::default();
        let mut model: BTreeMap<String, f64> = BTreeMap::new();
        // A fixed scramble of 0..n, so inserts land before, between and after.
        let n = SMALL_MAX * 3;
        for i in 0..n {
            let k = format!("t{:03}", (i * 37) % n);
            let w = i as f64;
            Arc::make_mut(c.get_or_insert_default(&k)).weight = Some(w);
            model.insert(k.clone(), w);
            assert_eq!(c.len(), model.len());
            assert_eq!(
                matches!(c, Children::Large(_)),
                model.len() > SMALL_MAX,
                "at {} children",
                model.len()
            );
            assert_eq!(labels(&c), model.keys().cloned().collect::<Vec<_>>());
        }
        for (k, w) in &model {
            assert_eq!(c.get(k).and_then(|n| n.weight), Some(*w), "{k}");
        }
        assert!(c.get("absent").is_none());
        assert!(c.remove("absent").is_none());
        // An existing label is found, not inserted again.
        Arc::make_mut(c.get_or_insert_default("t000")).weight = Some(-1.0);
        assert_eq!(c.len(), n);
        assert_eq!(c.get("t000").and_then(|n| n.weight), Some(-1.0));
        let removed = c.remove("t001").map(|n| n.weight);
        assert_eq!(removed, Some(model.get("t001").copied()));
        assert_eq!(c.len(), n - 1);
    }

    #[test]
    fn a_small_map_holds_no_spare_room() {
        // The enum is one vector wide: every cell of the field holds one.
        assert_eq!(std::mem::size_of::<Children>(), 24);
        let mut c = Children::default();
        for k in ["b", "a", "c"] {
            c.get_or_insert_default(k);
        }
        let Children::Small(v) = &c else {
            panic!("three children are small")
        };
        assert_eq!(v.capacity(), 3);
        c.remove("a");
        let Children::Small(v) = &c else {
            panic!("two children are small")
        };
        assert_eq!(v.capacity(), 2);
        assert_eq!(labels(&c), ["b", "c"]);
    }

    /// The JSON is a `BTreeMap<String, Node>`'s, byte for byte, both ways,
    /// small and large.
    #[test]
    fn serializes_as_a_btreemap_does() {
        for n in [0, 1, 5, SMALL_MAX, SMALL_MAX + 1, 100] {
            let model: BTreeMap<String, Node> = (0..n)
                .map(|i| (format!("k{}", (i * 7) % n.max(1)), cell(i as f64)))
                .collect();
            let mut c = Children::default();
            for (k, v) in &model {
                *c.get_or_insert_default(k) = Arc::new(v.clone());
            }
            let a = serde_json::to_string(&model).unwrap();
            assert_eq!(serde_json::to_string(&c).unwrap(), a, "{n} children");
            let back: Children = serde_json::from_str(&a).unwrap();
            assert_eq!(back, c, "{n} children");
            assert_eq!(matches!(back, Children::Large(_)), n > SMALL_MAX);
        }
    }

    #[test]
    fn a_repeated_label_in_a_file_keeps_its_last_cell_as_a_btreemap_does() {
        let text = r#"{"b": {"weight": 1.0}, "a": {"weight": 2.0}, "b": {"weight": 3.0}}"#;
        let model: BTreeMap<String, Node> = serde_json::from_str(text).unwrap();
        let c: Children = serde_json::from_str(text).unwrap();
        assert_eq!(labels(&c), ["a", "b"]);
        assert_eq!(c.get("b").and_then(|n| n.weight), model["b"].weight);
    }

    #[test]
    fn equal_contents_are_equal_across_representations() {
        let pairs: Vec<(Box<str>, Arc<Node>)> = (0..SMALL_MAX)
            .map(|i| {
                (
                    format!("k{i:02}").into_boxed_str(),
                    Arc::new(cell(i as f64)),
                )
            })
            .collect();
        let small = Children::from_pairs(pairs.clone());
        let large = Children::Large(Box::new(pairs.into_iter().collect()));
        assert!(matches!(small, Children::Small(_)));
        assert_eq!(small, large);
    }
}
