//! A field written apart: the subtrees at one depth (the router's task
//! cells, one per target in each tree) taken out of the whole and put back
//! in, so a store can keep each with the record it belongs to and write
//! it when that record changes, instead of the whole field every time
//! (docs/router.md, "The small box"). Source: `ROUTING.md` §3 Field, §4.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::aging::aging_factor;
use super::{tree_depth, Field, FieldError, Node, Work};

/// Subtrees at one path, one per (option, dimension) tree that has one:
/// option → dimension → the subtree's root. Serialized as the trees are
/// (caches left out; [`Field::restore`] recomputes them).
pub type Subtrees = BTreeMap<String, BTreeMap<String, Node>>;

impl Field {
    /// The subtree at `labels` in every (option, dimension) tree that has
    /// one (empty when none has). The subtrees' children are shared, not
    /// copied.
    pub fn subtrees_at(&self, labels: &[String]) -> Subtrees {
        let mut out = Subtrees::new();
        if labels.is_empty() {
            return out;
        }
        for (option, per) in &self.trees {
            for (dimension, tree) in per {
                if let Some(n) = tree.get(labels) {
                    out.entry(option.clone())
                        .or_default()
                        .insert(dimension.clone(), n.clone());
                }
            }
        }
        out
    }

    /// Whether any tree holds a subtree at `labels` (non-empty); nothing
    /// is copied.
    pub fn holds_subtree_at(&self, labels: &[String]) -> bool {
        !labels.is_empty()
            && self
                .trees
                .values()
                .flat_map(|per| per.values())
                .any(|tree| tree.get(labels).is_some())
    }

    /// A copy of the field without the subtrees `depth` levels below the
    /// roots (depth ≥ 1) whose path `keep` refuses; the rest is the same
    /// (kept subtrees shared, the nodes above them copied). `keep` is asked
    /// once per subtree per tree, with the path's labels from the root.
    pub fn pruned_at(&self, depth: usize, mut keep: impl FnMut(&[String]) -> bool) -> Field {
        let mut f = Field {
            layers: self.layers.clone(),
            root_variance: self.root_variance,
            options: self.options.clone(),
            dimensions: self.dimensions.clone(),
            trees: BTreeMap::new(),
            gates: self.gates.clone(),
            revision: self.revision,
            scales: self.scales.clone(),
            journal: Default::default(),
        };
        let mut path = Vec::with_capacity(depth);
        for (option, per) in &self.trees {
            let pruned = per
                .iter()
                .map(|(d, tree)| (d.clone(), tree.pruned(depth.max(1), &mut path, &mut keep)))
                .collect();
            f.trees.insert(option.clone(), pruned);
        }
        f
    }

    /// Calls `each` with the path of every subtree `depth` levels below the
    /// roots (depth ≥ 1), once per tree that holds it.
    pub fn each_subtree_at(&self, depth: usize, mut each: impl FnMut(&[String])) {
        let mut path = Vec::with_capacity(depth);
        for per in self.trees.values() {
            for tree in per.values() {
                tree.each_at(depth.max(1), &mut path, &mut each);
            }
        }
    }

    /// Puts each of `subtrees` at `labels` (non-empty) in its tree, where
    /// that tree holds nothing at `labels` (what a tree holds there is
    /// kept), the own evidence of every cell put scaled by the aging
    /// factor of `aged_hours` ([`aging_factor`]): the aging the field had
    /// since the subtrees were taken. The nodes on the way are created as
    /// needed. Returns how many subtrees were put. Caches are left stale:
    /// [`Field::restore`] recomputes them, so call this on a field read
    /// from a snapshot, before restoring it.
    ///
    /// Errors, with nothing changed: [`FieldError::UnknownOption`],
    /// [`FieldError::UnknownDimension`], [`FieldError::TooDeep`] (empty
    /// `labels`, or a subtree reaching past the declared layers),
    /// [`FieldError::NonFinite`].
    pub fn graft(
        &mut self,
        labels: &[String],
        subtrees: Subtrees,
        aged_hours: f64,
    ) -> Result<usize, FieldError> {
        let factor = aging_factor(aged_hours)?;
        let layers = self.layers.len();
        for (option, per) in &subtrees {
            for (dimension, node) in per {
                self.tree(option, dimension)?;
                let given = labels.len() + tree_depth(node);
                if labels.is_empty() || given > layers {
                    return Err(FieldError::TooDeep { given, layers });
                }
            }
        }
        let (last, above) = labels
            .split_last()
            .ok_or(FieldError::TooDeep { given: 0, layers })?;
        let mut put = 0;
        for (option, per) in subtrees {
            for (dimension, mut node) in per {
                let tree = self.tree_mut(&option, &dimension)?;
                let mut parent = tree;
                for l in above {
                    parent = Arc::make_mut(parent.children.get_or_insert_default(l));
                }
                if parent.children.get(last).is_none() {
                    node.scale_own(factor, &mut Work::default());
                    *parent.children.get_or_insert_default(last) = Arc::new(node);
                    put += 1;
                }
            }
        }
        Ok(put)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Layer;

    fn field() -> Field {
        let layers = ["source", "binding", "task", "environment"]
            .iter()
            .map(|n| Layer {
                process_variance: 0.01,
                ..Layer::new(n)
            })
            .collect();
        Field::new(layers, 1.0, &["a", "b"], &["x", "y"]).unwrap()
    }

    fn labels(l: &[&str]) -> Vec<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    fn observed() -> Field {
        let mut f = field();
        for (t, o, d, x) in [
            ("t1", "a", "x", 0.5),
            ("t1", "b", "y", 1.5),
            ("t2", "a", "x", -1.0),
        ] {
            let at = f.address(&[
                ("source", "s"),
                ("binding", "html"),
                ("task", t),
                ("environment", o),
            ]);
            f.observe(&at.unwrap(), o, d, x, 0.25).unwrap();
        }
        let cell = f.address(&[("source", "s"), ("binding", "html")]).unwrap();
        f.observe(&cell, "a", "x", 0.1, 0.5).unwrap();
        f
    }

    /// Taking every task's subtrees out and putting them back gives the
    /// field that restoring the whole gives, caches and all.
    #[test]
    fn pruned_then_grafted_is_the_field() {
        let f = observed();
        let mut tasks = Vec::new();
        f.each_subtree_at(3, |p| tasks.push(p.to_vec()));
        tasks.sort();
        tasks.dedup();
        assert_eq!(
            tasks,
            [labels(&["s", "html", "t1"]), labels(&["s", "html", "t2"])]
        );
        let t1 = f.subtrees_at(&tasks[0]);
        assert_eq!(t1.len(), 2, "t1 has cells in a's and b's trees");
        assert!(
            f.holds_subtree_at(&tasks[0]) && !f.holds_subtree_at(&labels(&["s", "html", "t9"]))
        );
        let t2 = f.subtrees_at(&tasks[1]);
        let mut rest = f.pruned_at(3, |_| false);
        let mut none = 0;
        rest.each_subtree_at(3, |_| none += 1);
        assert_eq!(none, 0);
        assert_eq!(rest.graft(&tasks[0], t1, 0.0), Ok(2));
        assert_eq!(rest.graft(&tasks[1], t2, 0.0), Ok(1));
        // As a restart from the whole field would have it (caches rebuilt).
        let back = Field::restore(rest).unwrap();
        assert_eq!(back, Field::restore(f.clone()).unwrap());
        // Kept subtrees stay.
        let kept = f.pruned_at(3, |p| p[2] == "t2");
        assert_eq!(kept.subtrees_at(&tasks[1]), f.subtrees_at(&tasks[1]));
        assert!(kept.subtrees_at(&tasks[0]).is_empty());
        assert!(!kept.holds_subtree_at(&tasks[0]) && !kept.holds_subtree_at(&[]));
    }

    /// A graft ages what it puts by the hours given, as aging the whole
    /// field would have, and never replaces what the field holds.
    #[test]
    fn a_graft_ages_and_keeps_what_is_there() {
        let f = observed();
        let t1 = labels(&["s", "html", "t1"]);
        let cells = f.subtrees_at(&t1);
        let mut aged = f.clone();
        aged.age_all(24.0).unwrap();
        let mut rest = aged.pruned_at(3, |p| p[2] != "t1");
        assert_eq!(rest.graft(&t1, cells.clone(), 24.0), Ok(2));
        let rest = Field::restore(rest).unwrap();
        let at = f
            .address(&[
                ("source", "s"),
                ("binding", "html"),
                ("task", "t1"),
                ("environment", "a"),
            ])
            .unwrap();
        let (p, q) = (
            aged.posterior(&at, "a", "x").unwrap(),
            rest.posterior(&at, "a", "x").unwrap(),
        );
        assert!((p.mean - q.mean).abs() < 1e-12 && (p.variance - q.variance).abs() < 1e-12);
        let mut whole = f.clone();
        assert_eq!(
            whole.graft(&t1, cells, 0.0),
            Ok(0),
            "the field's own are kept"
        );
        assert_eq!(whole, f);
    }

    #[test]
    fn a_bad_graft_changes_nothing() {
        let f = observed();
        let t1 = labels(&["s", "html", "t1"]);
        let cells = f.subtrees_at(&t1);
        let mut g = f.pruned_at(3, |_| false);
        let before = g.clone();
        let mut unknown = cells.clone();
        unknown.insert(
            "zz".into(),
            BTreeMap::from([("x".to_string(), Node::default())]),
        );
        assert!(matches!(
            g.graft(&t1, unknown, 0.0),
            Err(FieldError::UnknownOption(_))
        ));
        let deep = labels(&["s", "html", "t1", "a"]);
        assert!(matches!(
            g.graft(&deep, cells.clone(), 0.0),
            Err(FieldError::TooDeep { .. })
        ));
        assert!(matches!(
            g.graft(&[], cells.clone(), 0.0),
            Err(FieldError::TooDeep { .. })
        ));
        assert!(matches!(
            g.graft(&t1, cells, f64::NAN),
            Err(FieldError::NonFinite(_))
        ));
        assert_eq!(g, before);
    }
}
