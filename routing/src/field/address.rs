//! Addresses: gap-free prefixes of the declared layer path.

use serde::{Deserialize, Serialize};

use super::error::FieldError;

/// One declared layer: its name and the process variance of the residual δ
/// of every cell at that layer (value², finite, > 0; default 1.0).
/// Source: `ROUTING.md` §3 Field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Layer {
    /// Layer name, e.g. `source`.
    pub name: String,
    /// Process variance of this layer's residuals (value², finite, > 0).
    pub process_variance: f64,
}

impl Layer {
    /// A layer with the default process variance 1.0.
    pub fn new(name: &str) -> Layer {
        Layer {
            name: name.to_string(),
            process_variance: 1.0,
        }
    }

    /// A layer with an explicit process variance (checked when the field is built).
    pub fn with_variance(name: &str, process_variance: f64) -> Layer {
        Layer {
            name: name.to_string(),
            process_variance,
        }
    }
}

/// A gap-free prefix of the layer path: label `i` belongs to layer `i`.
/// The empty address is the root. Source: `ROUTING.md` §3 Addresses.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Address {
    labels: Vec<String>,
}

impl Address {
    /// The root (empty prefix).
    pub fn root() -> Address {
        Address::default()
    }

    /// Builds an address from `(layer, label)` pairs, which must name the
    /// declared `layers` in order from the first, without a gap.
    ///
    /// Errors: [`FieldError::UnknownLayer`], [`FieldError::Gap`] (a layer
    /// skipped or given out of order), [`FieldError::TooDeep`].
    pub fn from_pairs(layers: &[Layer], pairs: &[(&str, &str)]) -> Result<Address, FieldError> {
        if pairs.len() > layers.len() {
            return Err(FieldError::TooDeep {
                given: pairs.len(),
                layers: layers.len(),
            });
        }
        for (i, (layer, _)) in pairs.iter().enumerate() {
            if !layers.iter().any(|l| l.name == *layer) {
                return Err(FieldError::UnknownLayer(layer.to_string()));
            }
            if layers[i].name != *layer {
                return Err(FieldError::Gap {
                    missing: layers[i].name.clone(),
                    found: layer.to_string(),
                });
            }
        }
        Ok(Address {
            labels: pairs.iter().map(|(_, v)| v.to_string()).collect(),
        })
    }

    /// Builds an address from positional labels (label `i` is layer `i`);
    /// gap-free by construction. Errors: [`FieldError::TooDeep`].
    pub fn from_labels(layers: &[Layer], labels: &[&str]) -> Result<Address, FieldError> {
        if labels.len() > layers.len() {
            return Err(FieldError::TooDeep {
                given: labels.len(),
                layers: layers.len(),
            });
        }
        Ok(Address {
            labels: labels.iter().map(|s| s.to_string()).collect(),
        })
    }

    /// Parses `a/b/c` (empty string = root) as positional labels.
    /// Errors: [`FieldError::TooDeep`].
    pub fn parse(layers: &[Layer], text: &str) -> Result<Address, FieldError> {
        if text.is_empty() {
            return Ok(Address::root());
        }
        let labels: Vec<&str> = text.split('/').collect();
        Address::from_labels(layers, &labels)
    }

    /// The labels, coarse to fine.
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// Number of labels (0 = root).
    pub fn depth(&self) -> usize {
        self.labels.len()
    }

    /// The prefix of the first `n` labels (`n` clamped to the depth).
    pub fn prefix(&self, n: usize) -> Address {
        Address {
            labels: self.labels[..n.min(self.labels.len())].to_vec(),
        }
    }
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.labels.join("/"))
    }
}
