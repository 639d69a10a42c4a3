//! `decide`: score every allowed option at an address and explain the choice.
//!
//! Per dimension d: w_d = root weight (default 1.0) + weight residuals along
//! the path; expected = Σ w_d·mean_d, variance = Σ w_d²·var_d, score =
//! expected − T·√variance; lowest wins, ties by option name bytes.
//! Source: `ROUTING.md` §3 Decide.

use serde::{Deserialize, Serialize};

use super::{Address, Field, FieldError, Work};

/// Why an alternative did not win. Source: `ROUTING.md` §3 Decide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum LossReason {
    /// This alternative is the selected one.
    Selected,
    /// A false gate at this prefix vetoed it.
    Gate(Address),
    /// Its expected cost was ±∞ or NaN.
    NonFiniteMean,
    /// Its score was higher than the winner's (or equal and its name sorts later).
    Score,
}

/// One option as evaluated by a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alternative {
    /// Option (archetype) name.
    pub option: String,
    /// expected − T·√variance (cost units; lower is better); +∞ when vetoed by a gate
    /// (a gated option is not evaluated: its mean and variance are +∞ too).
    /// In JSON a non-finite value is the string `"inf"`, `"-inf"` or `"NaN"`.
    #[serde(with = "crate::serde_float")]
    pub score: f64,
    /// expected = Σ_d w_d·mean_d (cost units).
    #[serde(with = "crate::serde_float")]
    pub mean: f64,
    /// Σ_d w_d²·var_d (cost units²).
    #[serde(with = "crate::serde_float")]
    pub variance: f64,
    /// Per dimension: (dimension, weight, posterior mean, posterior variance).
    pub dimensions: Vec<(String, f64, f64, f64)>,
    /// Contribution of each prefix of the address to `mean`, root first:
    /// Σ_d w_d·E[δ_d(prefix) | evidence]; the entries sum to `mean`. Empty when vetoed by a gate.
    pub contributions: Vec<f64>,
    /// Why it lost, or [`LossReason::Selected`].
    pub reason: LossReason,
}

/// The explanation of one decision. Source: `ROUTING.md` §3 Decide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    /// Field revision the decision read.
    pub revision: u64,
    /// The full address decided at.
    pub address: Address,
    /// Temperature actually used (negative or non-finite input becomes 0).
    pub temperature: f64,
    /// The winner, or `None` when every option was vetoed.
    pub selected: Option<String>,
    /// Every allowed option, ranked: winner first, then by score and name; vetoed last.
    pub alternatives: Vec<Alternative>,
    /// Selection probabilities per option (same order as `alternatives`)
    /// when the decision was randomized ([`Field::decide_sampled`]); `None`
    /// for the deterministic argmin. Lets decisions be evaluated off policy.
    pub probabilities: Option<Vec<f64>>,
    /// Work counters of this decision.
    pub work: Work,
}

impl Field {
    /// Decides among `allowed` options (deduplicated) at `address` with
    /// temperature `temperature` (≥ 0; negative or non-finite is treated as 0).
    /// A false gate at any prefix of `address` (root included), or an
    /// expected cost of ±∞ or NaN, vetoes an option. Ties break by option
    /// name bytes. Reads only; the field is not changed.
    ///
    /// Errors: [`FieldError::UnknownOption`], [`FieldError::TooDeep`].
    pub fn decide(
        &self,
        address: &Address,
        temperature: f64,
        allowed: &[&str],
    ) -> Result<Receipt, FieldError> {
        self.check_address(address)?;
        let t = if temperature.is_finite() && temperature > 0.0 {
            temperature
        } else {
            0.0
        };
        let mut names: Vec<&str> = Vec::new();
        for o in allowed {
            self.check_option(o)?;
            if !names.contains(o) {
                names.push(o);
            }
        }
        let mut work = Work::default();
        let mut alts = Vec::with_capacity(names.len());
        for o in names {
            alts.push(self.evaluate(address, o, t, &mut work)?);
        }
        alts.sort_by(|a, b| {
            let va = !matches!(a.reason, LossReason::Score);
            let vb = !matches!(b.reason, LossReason::Score);
            va.cmp(&vb)
                .then(
                    a.score
                        .partial_cmp(&b.score)
                        .unwrap_or(std::cmp::Ordering::Equal),
                )
                .then(a.option.as_bytes().cmp(b.option.as_bytes()))
        });
        let selected = match alts.first_mut() {
            Some(a) if a.reason == LossReason::Score => {
                a.reason = LossReason::Selected;
                Some(a.option.clone())
            }
            _ => None,
        };
        Ok(Receipt {
            revision: self.revision,
            address: address.clone(),
            temperature: t,
            selected,
            alternatives: alts,
            probabilities: None,
            work,
        })
    }

    /// A randomized decision: option i (not vetoed) is chosen with
    /// probability p_i ∝ exp(−(score_i − min score) / `spread`) by inverse
    /// CDF at `u` ∈ [0, 1) (the caller's random draw: the model holds no RNG).
    /// Scores use `temperature` as in [`Field::decide`]. The receipt lists
    /// every alternative's probability (vetoed ones get 0) so a logged
    /// decision can be evaluated off policy.
    ///
    /// Errors: [`FieldError::BadFactor`] for `u` outside [0, 1) or a
    /// `spread` that is not finite and > 0, and as [`Field::decide`].
    pub fn decide_sampled(
        &self,
        address: &Address,
        temperature: f64,
        allowed: &[&str],
        spread: f64,
        u: f64,
    ) -> Result<Receipt, FieldError> {
        if !(0.0..1.0).contains(&u) {
            return Err(FieldError::BadFactor(u));
        }
        if !(spread.is_finite() && spread > 0.0) {
            return Err(FieldError::BadFactor(spread));
        }
        let mut r = self.decide(address, temperature, allowed)?;
        let live = |a: &Alternative| matches!(a.reason, LossReason::Selected | LossReason::Score);
        let best = r
            .alternatives
            .iter()
            .filter(|a| live(a))
            .map(|a| a.score)
            .fold(f64::INFINITY, f64::min);
        let raw: Vec<f64> = r
            .alternatives
            .iter()
            .map(|a| {
                if live(a) {
                    (-(a.score - best) / spread).exp()
                } else {
                    0.0
                }
            })
            .collect();
        let total: f64 = raw.iter().sum();
        if total <= 0.0 || !total.is_finite() {
            r.probabilities = Some(raw);
            return Ok(r);
        }
        let probs: Vec<f64> = raw.iter().map(|w| w / total).collect();
        let mut acc = 0.0;
        let mut pick = probs.iter().rposition(|p| *p > 0.0).unwrap_or(0);
        for (i, p) in probs.iter().enumerate() {
            acc += p;
            if *p > 0.0 && u < acc {
                pick = i;
                break;
            }
        }
        for (i, a) in r.alternatives.iter_mut().enumerate() {
            if live(a) {
                a.reason = if i == pick {
                    LossReason::Selected
                } else {
                    LossReason::Score
                };
            }
        }
        r.selected = Some(r.alternatives[pick].option.clone());
        r.probabilities = Some(probs);
        Ok(r)
    }

    /// Scores one option; its reason is `Score` unless vetoed.
    fn evaluate(
        &self,
        address: &Address,
        option: &str,
        t: f64,
        work: &mut Work,
    ) -> Result<Alternative, FieldError> {
        for n in 0..=address.depth() {
            work.cells_visited += 1;
            if self.gates.is_empty() {
                continue;
            }
            let p = address.prefix(n);
            if self.gate(&p, option) == Some(false) {
                return Ok(Alternative {
                    option: option.to_string(),
                    score: f64::INFINITY,
                    mean: f64::INFINITY,
                    variance: f64::INFINITY,
                    dimensions: Vec::new(),
                    contributions: Vec::new(),
                    reason: LossReason::Gate(p),
                });
            }
        }
        let mut mean = 0.0;
        let mut variance = 0.0;
        let mut dims = Vec::with_capacity(self.dimensions.len());
        let mut contributions = vec![0.0; address.depth() + 1];
        for d in &self.dimensions {
            let (root, vars) = self.vars_for(d);
            let p = self
                .tree(option, d)?
                .posterior(address.labels(), root, &vars, 1.0, work);
            let mut previous = 0.0;
            for (c, m) in contributions.iter_mut().zip(&p.path_means) {
                *c += p.weight * (m - previous);
                previous = *m;
            }
            mean += p.weight * p.mean;
            variance += p.weight * p.weight * p.variance;
            dims.push((d.clone(), p.weight, p.mean, p.variance));
        }
        let score = mean - t * variance.sqrt();
        let reason = if mean.is_finite() {
            LossReason::Score
        } else {
            LossReason::NonFiniteMean
        };
        Ok(Alternative {
            option: option.to_string(),
            score,
            mean,
            variance,
            dimensions: dims,
            contributions,
            reason,
        })
    }
}
