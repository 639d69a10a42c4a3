//! One (option, dimension) Gaussian tree with cached upward messages.
//!
//! θ(root) = δ(root), θ(child) = θ(parent) + δ(child), δ ~ N(prior residual,
//! process variance of its layer). Each node caches `inner` (its own evidence
//! times the messages of its children) and the message it sends its parent.
//! Source: `ROUTING.md` §3 Field, Compaction, Discount.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::children::Children;
use super::gauss::Natural;

/// A cell of one tree: prior residual, weight, own evidence and caches.
///
/// Serialized compactly (a snapshot holds one per cell of every tree):
/// fields at their defaults are left out and the caches are never
/// written, since [`super::Field::restore`] recomputes them; older
/// snapshots that carry them still read.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Node {
    /// Prior mean of δ at this cell (default 0).
    #[serde(default, skip_serializing_if = "is_positive_zero")]
    pub prior_residual: f64,
    /// Weight at the root, or weight residual at a deeper prefix (None = default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    /// The cell's own evidence (observations and compacted subtrees).
    #[serde(default, skip_serializing_if = "is_flat")]
    pub own: Natural,
    /// Cached: `own` plus every child's message.
    #[serde(default, skip_serializing)]
    pub inner: Natural,
    /// Cached: the message this node sends its parent.
    #[serde(default, skip_serializing)]
    pub message: Natural,
    /// Children by label, shared: a clone of the field copies the roots
    /// and shares every subtree, and an edit copies only the nodes on its
    /// path that a clone still shares (`Arc::make_mut`). The router clones
    /// the field under its lock and reads the clone outside it.
    /// Held compactly ([`Children`]): most cells have one child or a few.
    #[serde(default, skip_serializing_if = "Children::is_empty")]
    pub children: Children<Node>,
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
    /// Recomputes this node's message from `inner` (residual and variance of its δ).
    fn refresh_message(&mut self, variance: f64) {
        self.message = self.inner.through_up(self.prior_residual, variance);
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
                let old_msg = child.message;
                child.edit_path(rest, &vars[1..], work, edit);
                child.refresh_message(vars[0]);
                work.messages_recomputed += 1;
                let new_msg = child.message;
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
            child.refresh_message(vars[0]);
            inner = inner.product(child.message);
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
        let mut belief = Natural::from_moments(self.prior_residual, root_var).product(self.inner);
        let mut weight = self.weight.unwrap_or(default_weight);
        let mut path_means = Vec::with_capacity(labels.len() + 1);
        path_means.push(belief.mean());
        let mut node = Some(self);
        for (i, label) in labels.iter().enumerate() {
            let child = node.and_then(|n| n.children.get(label)).map(|c| &**c);
            match (node, child) {
                (Some(_), Some(c)) => {
                    work.cells_visited += 1;
                    let cavity = belief.quotient(c.message);
                    belief = cavity
                        .through_down(c.prior_residual, vars[i])
                        .product(c.inner);
                    weight += c.weight.unwrap_or(0.0);
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

    /// The node at `labels`, if it exists.
    pub fn get(&self, labels: &[String]) -> Option<&Node> {
        match labels.split_first() {
            None => Some(self),
            Some((h, rest)) => self.children.get(h)?.get(rest),
        }
    }

    /// Folds the subtree at `labels` (non-empty) into its parent's own evidence
    /// and deletes it. The parent's `inner` is unchanged, so no message above
    /// moves. Returns whether a subtree existed.
    pub fn compact(&mut self, labels: &[String], work: &mut Work) -> bool {
        work.cells_visited += 1;
        match labels {
            [] => false,
            [last] => match self.children.remove(last) {
                Some(child) => {
                    self.own = self.own.product(child.message);
                    true
                }
                None => false,
            },
            [head, rest @ ..] => match self.children.get_mut(head) {
                Some(c) => Arc::make_mut(c).compact(rest, work),
                None => false,
            },
        }
    }
}
