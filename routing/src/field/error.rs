//! Typed errors of the field.

use thiserror::Error;

/// Every way a field operation can refuse its arguments. Source: `ROUTING.md` §3.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum FieldError {
    /// A layer name that the field does not declare.
    #[error("unknown layer `{0}`")]
    UnknownLayer(String),
    /// An address skips a layer: `missing` must come before `found`.
    #[error("address has a gap: layer `{missing}` missing before `{found}`")]
    Gap {
        /// The first layer left out.
        missing: String,
        /// The layer given in its place.
        found: String,
    },
    /// An address longer than the declared layers.
    #[error("address has {given} labels but only {layers} layers are declared")]
    TooDeep {
        /// Labels given.
        given: usize,
        /// Layers declared.
        layers: usize,
    },
    /// An option (archetype) that the field does not declare.
    #[error("unknown option `{0}`")]
    UnknownOption(String),
    /// A dimension that the field does not declare.
    #[error("unknown dimension `{0}`")]
    UnknownDimension(String),
    /// A declaration repeats a name (layer, option or dimension).
    #[error("duplicate name `{0}`")]
    Duplicate(String),
    /// A variance that is not finite and > 0.
    #[error("variance must be finite and > 0, got {0}")]
    BadVariance(f64),
    /// A value (observation, prior, weight) that is not finite.
    #[error("value must be finite, got {0}")]
    NonFinite(f64),
    /// A discount factor outside [0, 1] (or NaN).
    #[error("factor must lie in [0, 1], got {0}")]
    BadFactor(f64),
    /// Compaction needs a non-root address.
    #[error("the root cannot be compacted")]
    CompactRoot,
    /// A journal that overflowed its cap cannot be replayed (some edits are
    /// missing from it).
    #[error("the journal overflowed its cap and misses edits")]
    IncompleteJournal,
    /// A snapshot that does not describe a valid field.
    #[error("invalid snapshot: {0}")]
    BadSnapshot(String),
}
