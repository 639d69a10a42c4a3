//! The few statistics the multi-seed tables need: the median and spread of
//! a figure over seeds, and the Mann–Whitney U test for two samples.

use serde::{Deserialize, Serialize};

/// A figure over seeds: the values in seed order, their median and range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// One value per seed, in the order the seeds were given.
    pub values: Vec<f64>,
    /// Median (the mean of the middle two for an even count).
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; `None` when empty or when one is not finite.
    pub fn of(values: Vec<f64>) -> Option<Spread> {
        if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let median = median(&values)?;
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Spread {
            values,
            median,
            min,
            max,
        })
    }
}

/// The median of `values` (`None` when empty; NaN sorts last).
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    })
}

/// The result of a one-sided Mann–Whitney U test of "`x` tends to be
/// smaller than `y`".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MannWhitney {
    /// Sample sizes.
    pub n_x: usize,
    /// Size of `y`.
    pub n_y: usize,
    /// U of `x`: pairs (x, y) with x > y, ties counting half.
    pub u_x: f64,
    /// The normal approximation's z, tie-corrected, with a continuity
    /// correction of 0.5 toward the null.
    pub z: f64,
    /// One-sided p-value P(Z ≤ z): small when `x` is smaller than `y`.
    pub p_less: f64,
}

/// Mann–Whitney U (Wilcoxon rank-sum), one-sided alternative "`x` is
/// stochastically smaller than `y`", by the tie-corrected normal
/// approximation (`σ² = n_x n_y/12 · ((n+1) − Σ(t³ − t)/(n(n − 1)))`).
/// Chosen for trust changes because they are far from normal (most are 0,
/// a few are small negatives) and ranks need no distribution. `None` when
/// either sample is empty or a value is not finite; when every value ties,
/// z is 0 and p is 0.5 (no evidence either way).
pub fn mann_whitney_less(x: &[f64], y: &[f64]) -> Option<MannWhitney> {
    if x.is_empty() || y.is_empty() || x.iter().chain(y).any(|v| !v.is_finite()) {
        return None;
    }
    let mut all: Vec<(f64, bool)> = x
        .iter()
        .map(|&v| (v, true))
        .chain(y.iter().map(|&v| (v, false)))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = all.len();
    let (mut rank_x, mut ties) = (0.0, 0.0);
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        // Ranks i+1..=j+1 share their mean.
        let mean_rank = (i + j + 2) as f64 / 2.0;
        let t = (j - i + 1) as f64;
        ties += t * t * t - t;
        rank_x += mean_rank * all[i..=j].iter().filter(|e| e.1).count() as f64;
        i = j + 1;
    }
    let (nx, ny, nf) = (x.len() as f64, y.len() as f64, n as f64);
    let u_x = rank_x - nx * (nx + 1.0) / 2.0;
    let mean = nx * ny / 2.0;
    let var = nx * ny / 12.0 * ((nf + 1.0) - ties / (nf * (nf - 1.0)).max(1.0));
    let z = if var > 0.0 {
        let d = u_x - mean;
        (d - 0.5 * d.signum()) / var.sqrt()
    } else {
        0.0
    };
    Some(MannWhitney {
        n_x: x.len(),
        n_y: y.len(),
        u_x,
        z,
        p_less: normal_cdf(z),
    })
}

/// Φ(z), the standard normal distribution function.
pub fn normal_cdf(z: f64) -> f64 {
    0.5 * libm::erfc(-z / std::f64::consts::SQRT_2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        let s = Spread::of(vec![5.0, 1.0, 3.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (3.0, 1.0, 5.0));
        assert_eq!(s.values, [5.0, 1.0, 3.0]);
        assert!(Spread::of(vec![]).is_none());
        assert!(Spread::of(vec![1.0, f64::NAN]).is_none());
    }

    #[test]
    fn normal_cdf_at_known_points() {
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-15);
        assert!((normal_cdf(-1.959_963_984_540_054) - 0.025).abs() < 1e-12);
        assert!((normal_cdf(1.644_853_626_951_472_2) - 0.95).abs() < 1e-12);
    }

    #[test]
    fn separated_samples_by_hand() {
        // x = 1, 2, 3 below y = 4, 5, 6: U_x = 0, mean 4.5, σ² = 9·7/12 =
        // 5.25, z = (0 − 4.5 + 0.5)/√5.25 = −1.7457, p = 0.0404.
        let t = mann_whitney_less(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert_eq!(t.u_x, 0.0);
        assert!((t.z + 4.0 / 5.25f64.sqrt()).abs() < 1e-12, "{}", t.z);
        assert!((t.p_less - 0.040_43).abs() < 1e-4, "{}", t.p_less);
        // The other way round, x is not smaller.
        let t = mann_whitney_less(&[4.0, 5.0, 6.0], &[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(t.u_x, 9.0);
        assert!(t.p_less > 0.95);
    }

    #[test]
    fn ties_by_hand() {
        // x = 0, 0, 1; y = 0, 1, 1. Three 0s share rank 2, three 1s rank 5:
        // R_x = 9, U_x = 3; Σ(t³ − t) = 48; σ² = 9/12·(7 − 48/30) = 4.05;
        // z = (3 − 4.5 + 0.5)/√4.05 = −0.4969, p = 0.3096.
        let t = mann_whitney_less(&[0.0, 0.0, 1.0], &[0.0, 1.0, 1.0]).unwrap();
        assert_eq!(t.u_x, 3.0);
        assert!((t.z + 1.0 / 4.05f64.sqrt()).abs() < 1e-12, "{}", t.z);
        assert!((t.p_less - 0.3096).abs() < 1e-4, "{}", t.p_less);
    }

    #[test]
    fn all_tied_is_no_evidence_and_bad_input_is_none() {
        let t = mann_whitney_less(&[0.0; 4], &[0.0; 5]).unwrap();
        assert_eq!((t.z, t.p_less), (0.0, 0.5));
        assert!(mann_whitney_less(&[], &[1.0]).is_none());
        assert!(mann_whitney_less(&[f64::NAN], &[1.0]).is_none());
    }
}
