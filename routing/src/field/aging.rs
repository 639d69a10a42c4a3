//! Clock aging of stored evidence: precision and information scale by
//! 2^(−|Δt|/48 h), so an unobserved cell returns toward its prior, never
//! beyond. Source: `ROUTING.md` §3 Evidence dynamics (a).

use std::collections::BTreeMap;

use super::{Address, Field, FieldError, Work};

/// Half-life of stored evidence, in hours.
pub const AGING_HALF_LIFE_H: f64 = 48.0;

/// The aging factor 2^(−|Δt|/48 h) ∈ (0, 1] for `dt_hours` elapsed (a
/// backwards clock ages as much as a forward one, never rejuvenates), to be
/// passed to [`Field::discount`]. Errors: [`FieldError::NonFinite`] for a
/// non-finite duration.
pub fn aging_factor(dt_hours: f64) -> Result<f64, FieldError> {
    if !dt_hours.is_finite() {
        return Err(FieldError::NonFinite(dt_hours));
    }
    Ok((-(dt_hours.abs()) / AGING_HALF_LIFE_H).exp2())
}

impl Field {
    /// Ages the cell's own evidence by `dt_hours` elapsed: precision and
    /// information scale by 2^(−|Δt|/48 h) (see [`aging_factor`]),
    /// so an unobserved cell returns toward its prior, never beyond.
    /// Errors: [`FieldError::NonFinite`] for a non-finite duration, and as [`Field::observe`].
    /// Source: `ROUTING.md` §3 Evidence dynamics.
    pub fn age(
        &mut self,
        address: &Address,
        option: &str,
        dimension: &str,
        dt_hours: f64,
    ) -> Result<Work, FieldError> {
        let factor = aging_factor(dt_hours)?;
        self.discount(address, option, dimension, factor)
    }

    /// Ages the own evidence of every cell of every tree by `dt_hours`
    /// elapsed (factor 2^(−|Δt|/48 h), [`aging_factor`]) and
    /// recomputes the messages: an unobserved class regains uncertainty,
    /// never beyond its prior. Errors: [`FieldError::NonFinite`] for a
    /// non-finite duration (nothing changed). Source: `ROUTING.md` §3
    /// Evidence dynamics (a).
    pub fn age_all(&mut self, dt_hours: f64) -> Result<Work, FieldError> {
        let factor = aging_factor(dt_hours)?;
        let vars: BTreeMap<String, Vec<f64>> = self
            .dimensions
            .iter()
            .map(|d| (d.clone(), self.vars_for(d).1))
            .collect();
        let mut work = Work::default();
        for per in self.trees.values_mut() {
            for (d, tree) in per.iter_mut() {
                tree.scale_own(factor, &mut work);
                if let Some(v) = vars.get(d) {
                    tree.rebuild(v);
                }
            }
        }
        self.revision += 1;
        self.record(|| super::Edit::AgeAll { dt_hours });
        Ok(work)
    }

    /// [`Field::restore`] followed by [`Field::age_all`] for the `dt_hours`
    /// that passed since the snapshot was taken (recovery after a restart).
    /// Errors: as both.
    pub fn restore_aged(snapshot: Field, dt_hours: f64) -> Result<Field, FieldError> {
        if !dt_hours.is_finite() {
            return Err(FieldError::NonFinite(dt_hours));
        }
        let mut f = Field::restore(snapshot)?;
        f.age_all(dt_hours)?;
        Ok(f)
    }
}
