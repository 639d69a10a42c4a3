//! One (option, dimension) Gaussian tree with cached upward messages.
//!
//! θ(root) = δ(root), θ(child) = θ(parent) + δ(child), δ ~ N(prior residual,
//! process variance of its layer). Each node caches `inner` (its own evidence
//! times the messages of its children); the message it sends its parent is
//! derived from `inner` when read ([`Node::message`]).
//! Source: `ROUTING.md` §3 Field, Compaction, Discount.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::children::Children;
use super::gauss::Natural;

/// A cell of one tree: prior residual, weight, own evidence and caches.
///
/// The prior residual and the weight are held out of line, and only when
/// one of them is set ([`Node::prior_residual`], [`Node::weight`]): most
/// cells (a target's, an environment's) have neither, and a field holds
/// several cells per observed target (docs/router.md, "The small box").
///
/// Serialized compactly (a snapshot holds one per cell of every tree):
/// fields at their defaults are left out and the caches are never
/// written, since [`super::Field::restore`] recomputes them; older
/// snapshots that carry them still read. The JSON is as it was when the
/// prior and weight were fields of their own.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(from = "NodeRepr")]
pub struct Node {
    /// Prior residual and weight, when either is set.
    prior: Option<Box<Prior>>,
    /// The cell's own evidence (observations and compacted subtrees).
    pub own: Natural,
    /// Cached: `own` plus every child's message. The message this node
    /// sends its parent is not held: [`Node::message`] derives it from
    /// `inner` (a few multiplications), which saves every cell 16 bytes.
    pub inner: Natural,
    /// Children by label, shared: a clone of the field copies the roots
    /// and shares every subtree, and an edit copies only the nodes on its
    /// path that a clone still shares (`Arc::make_mut`). The router clones
    /// the field under its lock and reads the clone outside it.
    /// Held compactly ([`Children`]): most cells have one child or a few.
    pub children: Children<Node>,
}

/// A cell's prior residual and weight (see [`Node`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Prior {
    residual: f64,
    weight: Option<f64>,
}

/// A [`Node`] as written: the prior and weight as fields of their own.
#[derive(Deserialize)]
struct NodeRepr {
    #[serde(default)]
    prior_residual: f64,
    #[serde(default)]
    weight: Option<f64>,
    #[serde(default)]
    own: Natural,
    #[serde(default)]
    inner: Natural,
    #[serde(default)]
    children: Children<Node>,
}

impl From<NodeRepr> for Node {
    fn from(r: NodeRepr) -> Node {
        let mut n = Node {
            prior: None,
            own: r.own,
            inner: r.inner,
            children: r.children,
        };
        n.set_prior(Prior {
            residual: r.prior_residual,
            weight: r.weight,
        });
        n
    }
}

impl Serialize for Node {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let residual = self.prior_residual();
        let weight = self.weight();
        let present = [
            !is_positive_zero(&residual),
            weight.is_some(),
            !is_flat(&self.own),
            !self.children.is_empty(),
        ];
        let mut st = s.serialize_struct("Node", present.iter().filter(|p| **p).count())?;
        if present[0] {
            st.serialize_field("prior_residual", &residual)?;
        }
        if let Some(w) = weight {
            st.serialize_field("weight", &w)?;
        }
        if present[2] {
            st.serialize_field("own", &self.own)?;
        }
        if present[3] {
            st.serialize_field("children", &self.children)?;
        }
        st.end()
    }
}

/// Whether `x` is +0.0 exactly (bit for bit: a −0.0 is written).
fn is_positive_zero(x: &f64) -> bool {
    x.to_bits() == 0
}

/// Whether `n` is the flat factor exactly (both parameters +0.0).
fn is_flat(n: &Natural) -> bool {
    is_positive_zero(&n.precision) && is_positive_zero(&n.information)
}

/// Work done by one tree operation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Work {
    /// Cells read or written.
    pub cells_visited: u64,
    /// Upward messages recomputed.
    pub messages_recomputed: u64,
}

impl Work {
    /// Adds another counter set.
    pub fn add(&mut self, o: Work) {
        self.cells_visited += o.cells_visited;
        self.messages_recomputed += o.messages_recomputed;
    }
}

/// Posterior of one tree at one address, with the per-prefix weight sum.
#[derive(Debug, Clone, PartialEq)]
pub struct Posterior {
    /// Posterior mean of θ at the address.
    pub mean: f64,
    /// Posterior variance of θ at the address.
    pub variance: f64,
    /// Root weight (`default_weight` if unset) plus residuals along the path.
    pub weight: f64,
    /// Posterior mean of θ at every prefix of the address, root first
    /// (length depth + 1; the last entry is `mean`). Consecutive differences
    /// are the posterior means of each prefix's δ.
    pub path_means: Vec<f64>,
}

impl Node {
    /// Prior mean of δ at this cell (default 0).
    pub fn prior_residual(&self) -> f64 {
        self.prior.as_ref().map_or(0.0, |p| p.residual)
    }

    /// Weight at the root, or weight residual at a deeper prefix (`None`:
    /// the default).
    pub fn weight(&self) -> Option<f64> {
        self.prior.as_ref().and_then(|p| p.weight)
    }

    /// Sets the prior mean of δ at this cell.
    pub fn set_prior_residual(&mut self, residual: f64) {
        let weight = self.weight();
        self.set_prior(Prior { residual, weight });
    }

    /// Sets the weight (`None`: the default).
    pub fn set_weight(&mut self, weight: Option<f64>) {
        let residual = self.prior_residual();
        self.set_prior(Prior { residual, weight });
    }

    /// Holds `p` out of line, or nothing when it is the default (+0.0
    /// exactly, bit for bit, and no weight).
    fn set_prior(&mut self, p: Prior) {
        self.prior = (!is_positive_zero(&p.residual) || p.weight.is_some()).then(|| Box::new(p));
    }

    /// The message this node sends its parent: `inner` through its δ
    /// (prior residual, and `variance`, the process variance of its layer).
    pub fn message(&self, variance: f64) -> Natural {
        self.inner.through_up(self.prior_residual(), variance)
    }

    /// Applies `edit` to the node at `labels` (created on the way), then
    /// refreshes `inner` and messages on the exact path back up.
    /// `vars[i]` is the process variance of the node at depth `i + 1`.
    pub fn edit_path(
        &mut self,
        labels: &[String],
        vars: &[f64],
        work: &mut Work,
        edit: &mut dyn FnMut(&mut Node),
    ) {
        work.cells_visited += 1;
        match labels.split_first() {
            None => {
                let old_own = self.own;
                edit(self);
                self.inner = self.inner.quotient(old_own).product(self.own);
            }
            Some((head, rest)) => {
                let child = Arc::make_mut(self.children.get_or_insert_default(head));
                let old_msg = child.message(vars[0]);
                child.edit_path(rest, &vars[1..], work, edit);
                work.messages_recomputed += 1;
                let new_msg = child.message(vars[0]);
                self.inner = self.inner.quotient(old_msg).product(new_msg);
            }
        }
    }

    /// Scales the own evidence of this node and every node below by `factor`
    /// (caches are left stale: call [`Node::rebuild`] next).
    pub fn scale_own(&mut self, factor: f64, work: &mut Work) {
        work.cells_visited += 1;
        self.own = self.own.scale(factor);
        for child in self.children.values_mut() {
            Arc::make_mut(child).scale_own(factor, work);
        }
    }

    /// Recomputes every cache below and at this node from scratch
    /// (used after restore). `vars` as in [`Node::edit_path`].
    pub fn rebuild(&mut self, vars: &[f64]) {
        let mut inner = self.own;
        for child in self.children.values_mut() {
            let child = Arc::make_mut(child);
            child.rebuild(&vars[1..]);
            inner = inner.product(child.message(vars[0]));
        }
        self.inner = inner;
    }

    /// Posterior at `labels` when this node is the root with process variance
    /// `root_var`; `vars` as in [`Node::edit_path`]. Cells not yet written
    /// take their defaults (residual 0, no evidence, no weight).
    pub fn posterior(
        &self,
        labels: &[String],
        root_var: f64,
        vars: &[f64],
        default_weight: f64,
        work: &mut Work,
    ) -> Posterior {
        work.cells_visited += 1;
        let mut belief = Natural::from_moments(self.prior_residual(), root_var).product(self.inner);
        let mut weight = self.weight().unwrap_or(default_weight);
        let mut path_means = Vec::with_capacity(labels.len() + 1);
        path_means.push(belief.mean());
        let mut node = Some(self);
        for (i, label) in labels.iter().enumerate() {
            let child = node.and_then(|n| n.children.get(label)).map(|c| &**c);
            match (node, child) {
                (Some(_), Some(c)) => {
                    work.cells_visited += 1;
                    let cavity = belief.quotient(c.message(vars[i]));
                    belief = cavity
                        .through_down(c.prior_residual(), vars[i])
                        .product(c.inner);
                    weight += c.weight().unwrap_or(0.0);
                }
                _ => belief = belief.through_down(0.0, vars[i]),
            }
            node = child;
            path_means.push(belief.mean());
        }
        Posterior {
            mean: belief.mean(),
            variance: belief.variance(),
            weight,
            path_means,
        }
    }

    /// A copy of this node whose subtrees `depth` levels below are kept
    /// only where `keep` says so of their labels (the path from the tree's
    /// root, `path` holding the labels above this node). Nodes above that
    /// depth are copied (their caches too); every kept subtree is shared,
    /// not copied.
    pub(crate) fn pruned(
        &self,
        depth: usize,
        path: &mut Vec<String>,
        keep: &mut dyn FnMut(&[String]) -> bool,
    ) -> Node {
        let mut pairs = Vec::new();
        for (label, child) in self.children.iter() {
            path.push(label.to_string());
            let kept = if depth <= 1 {
                keep(path).then(|| Arc::clone(child))
            } else {
                Some(Arc::new(child.pruned(depth - 1, path, keep)))
            };
            path.pop();
            if let Some(c) = kept {
                pairs.push((Box::<str>::from(label), c));
            }
        }
        Node {
            prior: self.prior.clone(),
            own: self.own,
            inner: self.inner,
            children: Children::from_pairs(pairs),
        }
    }

    /// Calls `each` with the labels of every node `depth` levels below
    /// this one (`path` holding the labels above this node).
    pub(crate) fn each_at(
        &self,
        depth: usize,
        path: &mut Vec<String>,
        each: &mut dyn FnMut(&[String]),
    ) {
        for (label, child) in self.children.iter() {
            path.push(label.to_string());
            if depth <= 1 {
                each(path);
            } else {
                child.each_at(depth - 1, path, each);
            }
            path.pop();
        }
    }

    /// The node at `labels`, if it exists.
    pub fn get(&self, labels: &[String]) -> Option<&Node> {
        match labels.split_first() {
            None => Some(self),
            Some((h, rest)) => self.children.get(h)?.get(rest),
        }
    }

    /// Folds the subtree at `labels` (non-empty) into its parent's own evidence
    /// and deletes it. The parent's `inner` is unchanged, so no message above
    /// moves. Returns whether a subtree existed. `vars` as in
    /// [`Node::edit_path`].
    pub fn compact(&mut self, labels: &[String], vars: &[f64], work: &mut Work) -> bool {
        work.cells_visited += 1;
        match labels {
            [] => false,
            [last] => match self.children.remove(last) {
                Some(child) => {
                    self.own = self.own.product(child.message(vars[0]));
                    true
                }
                None => false,
            },
            [head, rest @ ..] => match self.children.get_mut(head) {
                Some(c) => Arc::make_mut(c).compact(rest, &vars[1..], work),
                None => false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON is the one the separate fields gave: defaults left out,
    /// a −0.0 residual written, the caches never written but read.
    #[test]
    fn a_cell_writes_and_reads_its_prior_and_weight_as_before() {
        let mut n = Node::default();
        assert_eq!(serde_json::to_string(&n).unwrap(), "{}");
        n.set_weight(Some(2.5));
        assert_eq!(serde_json::to_string(&n).unwrap(), r#"{"weight":2.5}"#);
        n.set_prior_residual(-0.0);
        assert_eq!(
            serde_json::to_string(&n).unwrap(),
            r#"{"prior_residual":-0.0,"weight":2.5}"#
        );
        n.set_weight(None);
        n.set_prior_residual(0.0);
        assert_eq!(n, Node::default(), "back to defaults holds nothing");
        // An old snapshot's cell: its caches written, the message too.
        let old = r#"{"prior_residual":0.5,"own":{"precision":1.0,"information":2.0},
            "inner":{"precision":3.0,"information":4.0},
            "message":{"precision":0.5,"information":0.25},"children":{"a":{"weight":1.0}}}"#;
        let n: Node = serde_json::from_str(old).unwrap();
        assert_eq!((n.prior_residual(), n.weight()), (0.5, None));
        assert_eq!(n.inner.precision, 3.0, "an old snapshot's cache reads");
        assert_eq!(n.children.get("a").and_then(|c| c.weight()), Some(1.0));
        let back: Node = serde_json::from_str(&serde_json::to_string(&n).unwrap()).unwrap();
        assert_eq!((back.prior_residual(), back.own), (0.5, n.own));
        assert_eq!(back.children, n.children);
    }

    /// A cell with neither prior nor weight holds one pointer for both,
    /// and no message (derived from `inner`).
    #[test]
    fn a_cell_is_sixty_four_bytes() {
        assert_eq!(std::mem::size_of::<Node>(), 64);
    }
}
