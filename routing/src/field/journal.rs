//! A journal of a field's edits, so a long operation can run on a clone
//! while the field itself keeps taking writes: the clone is aged (an O(cells)
//! walk) outside whatever lock guards the field, the edits made to the field
//! meanwhile are replayed onto it, and the result is exactly the field that
//! aging first and editing after would have made.
//!
//! The field records only while a journal is open ([`Field::begin_journal`]);
//! a clone or a snapshot of the field never carries it.

use super::{Address, Field, FieldError};

/// Most edits one journal holds; past it the journal is marked incomplete
/// and [`Field::replay`] refuses it (the caller then does the operation on
/// the field itself, as without a journal).
pub const JOURNAL_CAP: usize = 1 << 16;

/// One successful write to a field, with its arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum Edit {
    /// [`Field::observe`].
    Observe {
        /// Cell address.
        address: Address,
        /// Option (archetype).
        option: String,
        /// Dimension.
        dimension: String,
        /// Observed value.
        x: f64,
        /// Observation variance.
        variance: f64,
    },
    /// [`Field::set_prior`].
    SetPrior {
        /// Cell address.
        address: Address,
        /// Option (archetype).
        option: String,
        /// Dimension.
        dimension: String,
        /// Prior residual.
        residual: f64,
    },
    /// [`Field::set_weight`] (and each option's weight of [`Field::set_price`]).
    SetWeight {
        /// Cell address.
        address: Address,
        /// Option (archetype).
        option: String,
        /// Dimension.
        dimension: String,
        /// Weight.
        weight: f64,
    },
    /// [`Field::set_gate`].
    SetGate {
        /// Gate address.
        address: Address,
        /// Option (archetype).
        option: String,
        /// The gate written (`None`: cleared).
        gate: Option<bool>,
    },
    /// [`Field::discount`] (and [`Field::age`], which discounts one cell).
    Discount {
        /// Cell address.
        address: Address,
        /// Option (archetype).
        option: String,
        /// Dimension.
        dimension: String,
        /// Factor in [0, 1].
        factor: f64,
    },
    /// [`Field::compact`].
    Compact {
        /// The subtree's address.
        address: Address,
    },
    /// [`Field::set_dimension_scale`].
    DimensionScale {
        /// Dimension.
        dimension: String,
        /// Variance scale.
        scale: f64,
    },
    /// [`Field::age_all`].
    AgeAll {
        /// Hours elapsed.
        dt_hours: f64,
    },
}

/// The edits a field took since [`Field::begin_journal`], in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Journal {
    edits: Vec<Edit>,
    /// More than [`JOURNAL_CAP`] edits were made: some are not here.
    overflowed: bool,
}

impl Journal {
    /// The edits recorded, in order.
    pub fn edits(&self) -> &[Edit] {
        &self.edits
    }

    /// Whether every edit is here (false past [`JOURNAL_CAP`]).
    pub fn is_complete(&self) -> bool {
        !self.overflowed
    }

    fn push(&mut self, edit: Edit) {
        if self.edits.len() < JOURNAL_CAP {
            self.edits.push(edit);
        } else {
            self.overflowed = true;
        }
    }
}

/// The field's open journal, if any: never cloned, compared or serialized
/// with the field (a clone starts with none).
#[derive(Debug, Default)]
pub(super) struct Recording(Option<Journal>);

impl Clone for Recording {
    fn clone(&self) -> Self {
        Recording(None)
    }
}

impl PartialEq for Recording {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Field {
    /// Opens a journal: from now every successful write is recorded until
    /// [`Field::take_journal`]. An open journal is replaced by an empty one.
    pub fn begin_journal(&mut self) {
        self.journal.0 = Some(Journal::default());
    }

    /// Closes the journal and returns it (`None` when none was open).
    pub fn take_journal(&mut self) -> Option<Journal> {
        self.journal.0.take()
    }

    /// Records `edit` when a journal is open. A write made inside another
    /// write (a price's weights) is recorded once, by the inner write.
    pub(super) fn record(&mut self, edit: impl FnOnce() -> Edit) {
        if let Some(j) = self.journal.0.as_mut() {
            j.push(edit());
        }
    }

    /// Applies `journal`'s edits in order, as the writes they record.
    /// Errors: [`FieldError::IncompleteJournal`] for a journal that
    /// overflowed (nothing changed), and the first edit's error (the edits
    /// before it are applied): a journal from a field with the same
    /// declarations replays without error.
    pub fn replay(&mut self, journal: &Journal) -> Result<(), FieldError> {
        if !journal.is_complete() {
            return Err(FieldError::IncompleteJournal);
        }
        for edit in &journal.edits {
            self.apply(edit)?;
        }
        Ok(())
    }

    fn apply(&mut self, edit: &Edit) -> Result<(), FieldError> {
        match edit {
            Edit::Observe {
                address,
                option,
                dimension,
                x,
                variance,
            } => self
                .observe(address, option, dimension, *x, *variance)
                .map(drop),
            Edit::SetPrior {
                address,
                option,
                dimension,
                residual,
            } => self
                .set_prior(address, option, dimension, *residual)
                .map(drop),
            Edit::SetWeight {
                address,
                option,
                dimension,
                weight,
            } => self
                .set_weight(address, option, dimension, *weight)
                .map(drop),
            Edit::SetGate {
                address,
                option,
                gate,
            } => self.set_gate(address, option, *gate),
            Edit::Discount {
                address,
                option,
                dimension,
                factor,
            } => self.discount(address, option, dimension, *factor).map(drop),
            Edit::Compact { address } => self.compact(address).map(drop),
            Edit::DimensionScale { dimension, scale } => {
                self.set_dimension_scale(dimension, *scale)
            }
            Edit::AgeAll { dt_hours } => self.age_all(*dt_hours).map(drop),
        }
    }
}
