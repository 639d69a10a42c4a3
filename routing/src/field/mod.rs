//! The addressed evidence field: one independent Gaussian tree per (option, dimension).
//!
//! Layers are declared in order; addresses are gap-free prefixes; every write
//! updates cached messages along the exact path only (O(depth)). Source:
//! `ROUTING.md` §3 Field, Decide, Compaction, Discount.

mod address;
mod aging;
mod children;
mod decide;
mod error;
mod gate_list;
mod gauss;
mod journal;
mod split;
mod tree;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use address::{Address, Layer};
pub use aging::{aging_factor, AGING_HALF_LIFE_H};
pub use children::{Children, SMALL_MAX};
pub use decide::{Alternative, LossReason, Receipt};
pub use error::FieldError;
pub use gauss::Natural;
pub use journal::{Edit, Journal, JOURNAL_CAP};
pub use split::Subtrees;
pub use tree::{Node, Posterior, Work};

/// The field: declared layers, options and dimensions, and the trees.
/// Serializable as a whole: `serde` output of this struct is the snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Field {
    layers: Vec<Layer>,
    root_variance: f64,
    options: Vec<String>,
    dimensions: Vec<String>,
    /// option → dimension → tree root.
    trees: BTreeMap<String, BTreeMap<String, Node>>,
    /// Gates written per (address, option); absent = open.
    #[serde(with = "gate_list")]
    gates: BTreeMap<Address, BTreeMap<String, bool>>,
    revision: u64,
    /// Variance scale per dimension (absent = 1): every process variance of
    /// that dimension's trees, the root's included, is multiplied by it.
    #[serde(default)]
    scales: BTreeMap<String, f64>,
    /// The open journal of edits, if any ([`Field::begin_journal`]).
    #[serde(skip)]
    journal: journal::Recording,
}

fn check_unique(names: &[String]) -> Result<(), FieldError> {
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            return Err(FieldError::Duplicate(n.clone()));
        }
    }
    Ok(())
}

fn check_variance(v: f64) -> Result<(), FieldError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(FieldError::BadVariance(v))
    }
}

fn check_finite(v: f64) -> Result<(), FieldError> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(FieldError::NonFinite(v))
    }
}

impl Field {
    /// A field with `layers` (coarse to fine), the root's process variance
    /// `root_variance` (value², finite, > 0; the brief's default is 1.0), and
    /// the declared `options` and `dimensions`.
    ///
    /// Errors: [`FieldError::BadVariance`], [`FieldError::Duplicate`].
    pub fn new(
        layers: Vec<Layer>,
        root_variance: f64,
        options: &[&str],
        dimensions: &[&str],
    ) -> Result<Field, FieldError> {
        check_variance(root_variance)?;
        for l in &layers {
            check_variance(l.process_variance)?;
        }
        let layer_names: Vec<String> = layers.iter().map(|l| l.name.clone()).collect();
        let options: Vec<String> = options.iter().map(|s| s.to_string()).collect();
        let dimensions: Vec<String> = dimensions.iter().map(|s| s.to_string()).collect();
        check_unique(&layer_names)?;
        check_unique(&options)?;
        check_unique(&dimensions)?;
        let mut trees = BTreeMap::new();
        for o in &options {
            let per: BTreeMap<String, Node> = dimensions
                .iter()
                .map(|d| (d.clone(), Node::default()))
                .collect();
            trees.insert(o.clone(), per);
        }
        Ok(Field {
            layers,
            root_variance,
            options,
            dimensions,
            trees,
            gates: BTreeMap::new(),
            revision: 0,
            scales: BTreeMap::new(),
            journal: journal::Recording::default(),
        })
    }

    /// Sets the variance scale of `dimension` (finite, > 0; default 1.0):
    /// in that dimension's trees the root's process variance becomes
    /// `scale × root_variance` and each layer's `scale × process_variance`,
    /// so one layer shape serves dimensions measured in different units
    /// (a probability, ln seconds), and a dimension the operator states as
    /// a fact (a cost) can be made all but certain with a tiny scale, so
    /// it carries no exploration bonus in [`Field::decide`]. Recomputes that
    /// dimension's messages; posteriors of other dimensions are unchanged.
    /// `docs/decisions/0005-field-variance-units.md`.
    ///
    /// Errors: [`FieldError::UnknownDimension`], [`FieldError::BadVariance`]
    /// (nothing changed).
    pub fn set_dimension_scale(&mut self, dimension: &str, scale: f64) -> Result<(), FieldError> {
        if !self.dimensions.iter().any(|d| d == dimension) {
            return Err(FieldError::UnknownDimension(dimension.to_string()));
        }
        check_variance(scale)?;
        self.scales.insert(dimension.to_string(), scale);
        let (_, vars) = self.vars_for(dimension);
        for per in self.trees.values_mut() {
            if let Some(tree) = per.get_mut(dimension) {
                tree.rebuild(&vars);
            }
        }
        self.revision += 1;
        self.record(|| Edit::DimensionScale {
            dimension: dimension.to_string(),
            scale,
        });
        Ok(())
    }

    /// The variance scale of `dimension` (1.0 unless set).
    pub fn dimension_scale(&self, dimension: &str) -> f64 {
        self.scales.get(dimension).copied().unwrap_or(1.0)
    }

    /// The declared layers.
    pub fn layers(&self) -> &[Layer] {
        &self.layers
    }

    /// The declared options, in declaration order.
    pub fn options(&self) -> &[String] {
        &self.options
    }

    /// The declared dimensions, in declaration order.
    pub fn dimensions(&self) -> &[String] {
        &self.dimensions
    }

    /// The revision: incremented by every successful write.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Builds an address from `(layer, label)` pairs; see [`Address::from_pairs`].
    pub fn address(&self, pairs: &[(&str, &str)]) -> Result<Address, FieldError> {
        Address::from_pairs(&self.layers, pairs)
    }

    /// Parses `a/b/c` positional labels; see [`Address::parse`].
    pub fn parse(&self, text: &str) -> Result<Address, FieldError> {
        Address::parse(&self.layers, text)
    }

    fn check_address(&self, a: &Address) -> Result<(), FieldError> {
        if a.depth() > self.layers.len() {
            return Err(FieldError::TooDeep {
                given: a.depth(),
                layers: self.layers.len(),
            });
        }
        Ok(())
    }

    fn check_option(&self, option: &str) -> Result<(), FieldError> {
        if self.options.iter().any(|o| o == option) {
            Ok(())
        } else {
            Err(FieldError::UnknownOption(option.to_string()))
        }
    }

    /// The root's and each layer's process variance in `dimension`'s trees
    /// (scaled by [`Field::dimension_scale`]).
    pub(crate) fn vars_for(&self, dimension: &str) -> (f64, Vec<f64>) {
        let k = self.dimension_scale(dimension);
        (
            k * self.root_variance,
            self.layers.iter().map(|l| k * l.process_variance).collect(),
        )
    }

    fn tree_mut(&mut self, option: &str, dimension: &str) -> Result<&mut Node, FieldError> {
        self.check_option(option)?;
        self.trees
            .get_mut(option)
            .and_then(|t| t.get_mut(dimension))
            .ok_or_else(|| FieldError::UnknownDimension(dimension.to_string()))
    }

    pub(crate) fn tree(&self, option: &str, dimension: &str) -> Result<&Node, FieldError> {
        self.check_option(option)?;
        self.trees
            .get(option)
            .and_then(|t| t.get(dimension))
            .ok_or_else(|| FieldError::UnknownDimension(dimension.to_string()))
    }

    fn edit(
        &mut self,
        address: &Address,
        option: &str,
        dimension: &str,
        edit: &mut dyn FnMut(&mut Node),
    ) -> Result<Work, FieldError> {
        self.check_address(address)?;
        let (_, vars) = self.vars_for(dimension);
        let tree = self.tree_mut(option, dimension)?;
        let mut work = Work::default();
        tree.edit_path(address.labels(), &vars, &mut work, edit);
        self.revision += 1;
        Ok(work)
    }

    /// Observes value `x` (finite) with observation variance `variance`
    /// (finite, > 0) for `option` in `dimension` at `address`: adds
    /// (1/variance, x/variance) to that cell's own evidence and refreshes the
    /// messages on the path, O(depth). Returns the work done.
    ///
    /// Errors: [`FieldError::NonFinite`], [`FieldError::BadVariance`],
    /// [`FieldError::UnknownOption`], [`FieldError::UnknownDimension`], [`FieldError::TooDeep`].
    pub fn observe(
        &mut self,
        address: &Address,
        option: &str,
        dimension: &str,
        x: f64,
        variance: f64,
    ) -> Result<Work, FieldError> {
        check_finite(x)?;
        check_variance(variance)?;
        let obs = Natural::from_moments(x, variance);
        let work = self.edit(address, option, dimension, &mut |n| {
            n.own = n.own.product(obs)
        })?;
        self.record(|| Edit::Observe {
            address: address.clone(),
            option: option.to_string(),
            dimension: dimension.to_string(),
            x,
            variance,
        });
        Ok(work)
    }

    /// Sets the prior residual (finite) of the cell (address, option,
    /// dimension); at the root it is the prior mean of θ(root).
    /// Errors as [`Field::observe`].
    pub fn set_prior(
        &mut self,
        address: &Address,
        option: &str,
        dimension: &str,
        residual: f64,
    ) -> Result<Work, FieldError> {
        check_finite(residual)?;
        let work = self.edit(address, option, dimension, &mut |n| {
            n.set_prior_residual(residual)
        })?;
        self.record(|| Edit::SetPrior {
            address: address.clone(),
            option: option.to_string(),
            dimension: dimension.to_string(),
            residual,
        });
        Ok(work)
    }

    /// Sets the weight (finite) of the cell: at the root the dimension's
    /// weight (default 1.0; for `budget:<pool>` the price λ), deeper a weight
    /// residual added along the path (default 0). A non-finite weight is
    /// refused with [`FieldError::NonFinite`], so it never changes a decision.
    pub fn set_weight(
        &mut self,
        address: &Address,
        option: &str,
        dimension: &str,
        weight: f64,
    ) -> Result<Work, FieldError> {
        check_finite(weight)?;
        let work = self.edit(address, option, dimension, &mut |n| {
            n.set_weight(Some(weight))
        })?;
        self.record(|| Edit::SetWeight {
            address: address.clone(),
            option: option.to_string(),
            dimension: dimension.to_string(),
            weight,
        });
        Ok(work)
    }

    /// Publishes a pool's price `lambda` (finite, ≥ 0) as the root weight
    /// of `dimension` (e.g. `budget:<pool>`) in every option's tree.
    /// Errors: [`FieldError::NonFinite`] (also for a negative price), [`FieldError::UnknownDimension`].
    /// Source: `ROUTING.md` §3 Prices.
    pub fn set_price(&mut self, dimension: &str, lambda: f64) -> Result<(), FieldError> {
        if !(lambda.is_finite() && lambda >= 0.0) {
            return Err(FieldError::NonFinite(lambda));
        }
        if !self.dimensions.iter().any(|d| d == dimension) {
            return Err(FieldError::UnknownDimension(dimension.to_string()));
        }
        let root = Address::root();
        for o in self.options.clone() {
            self.set_weight(&root, &o, dimension, lambda)?;
        }
        Ok(())
    }

    /// Sets (`Some`) or clears (`None`) the gate of `option` at `address`.
    /// A false gate at any prefix of a decision's address vetoes the option.
    /// Errors: [`FieldError::UnknownOption`], [`FieldError::TooDeep`].
    pub fn set_gate(
        &mut self,
        address: &Address,
        option: &str,
        gate: Option<bool>,
    ) -> Result<(), FieldError> {
        self.check_address(address)?;
        self.check_option(option)?;
        match gate {
            Some(g) => {
                self.gates
                    .entry(address.clone())
                    .or_default()
                    .insert(option.to_string(), g);
            }
            None => {
                if let Some(m) = self.gates.get_mut(address) {
                    m.remove(option);
                    if m.is_empty() {
                        self.gates.remove(address);
                    }
                }
            }
        }
        self.revision += 1;
        self.record(|| Edit::SetGate {
            address: address.clone(),
            option: option.to_string(),
            gate,
        });
        Ok(())
    }

    /// The gate written for `option` exactly at `address`, if any.
    pub fn gate(&self, address: &Address, option: &str) -> Option<bool> {
        self.gates.get(address).and_then(|m| m.get(option)).copied()
    }

    /// Multiplies the precision and information of the cell's *own* evidence
    /// by `factor` ∈ [0, 1] (its evidence mean stays, its variance grows).
    /// Errors: [`FieldError::BadFactor`] and as [`Field::observe`].
    pub fn discount(
        &mut self,
        address: &Address,
        option: &str,
        dimension: &str,
        factor: f64,
    ) -> Result<Work, FieldError> {
        if !(0.0..=1.0).contains(&factor) {
            return Err(FieldError::BadFactor(factor));
        }
        let work = self.edit(address, option, dimension, &mut |n| {
            n.own = n.own.scale(factor)
        })?;
        self.record(|| Edit::Discount {
            address: address.clone(),
            option: option.to_string(),
            dimension: dimension.to_string(),
            factor,
        });
        Ok(work)
    }

    /// Folds the subtree at `address` (non-root) into its parent's own
    /// evidence and deletes it, in every (option, dimension) tree and for
    /// every gate at or below it. No ancestor's or sibling's posterior moves.
    /// Returns the work done. Errors: [`FieldError::CompactRoot`], [`FieldError::TooDeep`].
    pub fn compact(&mut self, address: &Address) -> Result<Work, FieldError> {
        self.check_address(address)?;
        if address.depth() == 0 {
            return Err(FieldError::CompactRoot);
        }
        let mut work = Work::default();
        let vars: BTreeMap<String, Vec<f64>> = self
            .dimensions
            .iter()
            .map(|d| (d.clone(), self.vars_for(d).1))
            .collect();
        for per in self.trees.values_mut() {
            for (dimension, tree) in per.iter_mut() {
                if let Some(v) = vars.get(dimension) {
                    tree.compact(address.labels(), v, &mut work);
                }
            }
        }
        let d = address.depth();
        self.gates
            .retain(|a, _| !(a.depth() >= d && a.prefix(d) == *address));
        self.revision += 1;
        self.record(|| Edit::Compact {
            address: address.clone(),
        });
        Ok(work)
    }

    /// Posterior mean, variance and path weight of `option` in `dimension` at
    /// `address`. Cells never written take their defaults.
    /// Errors: [`FieldError::UnknownOption`], [`FieldError::UnknownDimension`], [`FieldError::TooDeep`].
    pub fn posterior(
        &self,
        address: &Address,
        option: &str,
        dimension: &str,
    ) -> Result<Posterior, FieldError> {
        let mut work = Work::default();
        self.posterior_counted(address, option, dimension, &mut work)
    }

    fn posterior_counted(
        &self,
        address: &Address,
        option: &str,
        dimension: &str,
        work: &mut Work,
    ) -> Result<Posterior, FieldError> {
        self.check_address(address)?;
        let tree = self.tree(option, dimension)?;
        let (root, vars) = self.vars_for(dimension);
        Ok(tree.posterior(address.labels(), root, &vars, 1.0, work))
    }

    /// The serializable snapshot (a copy of the whole field).
    pub fn snapshot(&self) -> Field {
        self.clone()
    }

    /// Rebuilds a field from a snapshot: checks its declarations and
    /// recomputes every cached message from the stored own evidence.
    /// Errors: [`FieldError::BadSnapshot`], [`FieldError::BadVariance`], [`FieldError::Duplicate`].
    pub fn restore(snapshot: Field) -> Result<Field, FieldError> {
        let mut f = snapshot;
        check_variance(f.root_variance)?;
        for l in &f.layers {
            check_variance(l.process_variance)?;
        }
        check_unique(&f.options)?;
        check_unique(&f.dimensions)?;
        let opts: Vec<&String> = f.trees.keys().collect();
        let mut declared: Vec<&String> = f.options.iter().collect();
        declared.sort();
        if opts != declared {
            return Err(FieldError::BadSnapshot(
                "trees do not match declared options".into(),
            ));
        }
        let mut dims: Vec<&String> = f.dimensions.iter().collect();
        dims.sort();
        if f.trees
            .values()
            .any(|per| per.keys().collect::<Vec<_>>() != dims)
        {
            return Err(FieldError::BadSnapshot(
                "trees do not match declared dimensions".into(),
            ));
        }
        for (d, k) in &f.scales {
            if !f.dimensions.contains(d) {
                return Err(FieldError::BadSnapshot(format!(
                    "variance scale for an undeclared dimension {d:?}"
                )));
            }
            check_variance(*k)?;
        }
        let vars: BTreeMap<String, Vec<f64>> = f
            .dimensions
            .iter()
            .map(|d| (d.clone(), f.vars_for(d).1))
            .collect();
        let depth = f.layers.len();
        for per in f.trees.values_mut() {
            for (d, tree) in per.iter_mut() {
                let Some(vars) = vars.get(d) else { continue };
                if tree_depth(tree) > depth {
                    return Err(FieldError::BadSnapshot(
                        "tree deeper than the declared layers".into(),
                    ));
                }
                tree.rebuild(vars);
            }
        }
        Ok(f)
    }
}

fn tree_depth(n: &Node) -> usize {
    n.children
        .values()
        .map(|c| 1 + tree_depth(c))
        .max()
        .unwrap_or(0)
}
