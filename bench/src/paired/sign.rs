//! The exact one-sided sign test the paired gates decide by.
//!
//! Each pair of blocks (candidate and reference, run back to back on the
//! same corpus slice) gives one ratio `r = candidate ÷ reference`. Under
//! the null hypothesis the candidate is at most `tolerance` times slower:
//! the median of `r` is at most `tolerance`, so each pair lands above it
//! with probability at most ½. With `k` of `n` pairs above, the one-sided
//! p-value is `P(K ≥ k)` for `K ~ Binomial(n, ½)`; the gate fails when it
//! is at most `alpha`.
//!
//! Why the sign test (docs/gates.md, "The paired gates"): it assumes
//! nothing of the ratios' distribution (a Wilcoxon signed-rank test needs
//! them symmetric about their median, and a host stall makes them skewed),
//! one stalled block moves it by one pair however long the stall, and it is
//! exact at the small `n` a CI job can afford.

use serde::Serialize;

/// `P(K ≥ k)` for `K ~ Binomial(n, ½)`; 1 for `k = 0`, 0 for `k > n`.
///
/// Sums the binomial coefficients from the top (`C(n, n) = 1` down to
/// `C(n, k)` by `C(n, j−1) = C(n, j)·j / (n−j+1)`) and divides by `2ⁿ`: exact
/// while the coefficients fit in 53 bits (`n ≤ 56`, far beyond any gate's
/// pairs), a few ulps off beyond; for `n > 1,000` it returns the normal
/// approximation's tail instead of overflowing.
pub fn binomial_half_upper_tail(n: u32, k: u32) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if k > n {
        return 0.0;
    }
    if n > 1_000 {
        let z = (k as f64 - 0.5 - n as f64 / 2.0) / (n as f64 / 4.0).sqrt();
        return 0.5 * erfc(z / std::f64::consts::SQRT_2);
    }
    let mut c = 1.0_f64; // C(n, n)
    let mut total = 1.0_f64;
    for j in (k + 1..=n).rev() {
        // C(n, j − 1) from C(n, j).
        c = c * j as f64 / (n - j + 1) as f64;
        total += c;
    }
    (total / 2f64.powi(n as i32)).min(1.0)
}

/// The complementary error function (Abramowitz–Stegun 7.1.26, absolute
/// error below 1.5e-7), for the large-`n` tail only.
fn erfc(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let e = poly * (-x * x).exp();
    if x >= 0.0 {
        e
    } else {
        2.0 - e
    }
}

/// The smallest number of pairs above the tolerance, of `n`, that fails a
/// gate at level `alpha`; `None` when no count can (`n` too small: even
/// all `n` above has `P = 2⁻ⁿ > alpha`).
pub fn critical_count(n: u32, alpha: f64) -> Option<u32> {
    (0..=n).find(|&k| binomial_half_upper_tail(n, k) <= alpha)
}

/// A sign test's settings: the tolerated slowdown and the level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SignTest {
    /// Ratios above this count against the candidate (> 1; 1.1 tolerates
    /// a 10 % slowdown).
    pub tolerance: f64,
    /// The level: the largest chance of failing a candidate that is exactly
    /// `tolerance` times slower (0 < alpha < 1).
    pub alpha: f64,
}

/// What a sign test found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SignVerdict {
    /// Pairs judged.
    pub pairs: u32,
    /// Pairs whose ratio was above the tolerance.
    pub above: u32,
    /// `P(K ≥ above)` under the null hypothesis.
    pub p_value: f64,
    /// The count that fails the gate at this `n` and level.
    pub critical: Option<u32>,
    /// The median ratio (for people; the decision is on the count).
    pub median_ratio: f64,
    /// The smallest and largest ratio.
    pub min_ratio: f64,
    /// The largest ratio.
    pub max_ratio: f64,
    /// Whether the candidate is slower than tolerated.
    pub fails: bool,
}

impl SignTest {
    /// Judges the pairs' ratios. A ratio equal to the tolerance does not
    /// count as above; a non-finite ratio (a reference block of zero
    /// length) counts as above, so a broken measurement cannot pass.
    /// An empty slice fails: nothing was measured.
    pub fn judge(&self, ratios: &[f64]) -> SignVerdict {
        let n = ratios.len() as u32;
        let above = ratios
            .iter()
            .filter(|r| !r.is_finite() || **r > self.tolerance)
            .count() as u32;
        let p_value = binomial_half_upper_tail(n, above);
        let critical = critical_count(n, self.alpha);
        let mut sorted: Vec<f64> = ratios.to_vec();
        sorted.sort_by(f64::total_cmp);
        let median_ratio = match sorted.len() {
            0 => f64::NAN,
            l if l % 2 == 1 => sorted[l / 2],
            l => (sorted[l / 2 - 1] + sorted[l / 2]) / 2.0,
        };
        SignVerdict {
            pairs: n,
            above,
            p_value,
            critical,
            median_ratio,
            min_ratio: sorted.first().copied().unwrap_or(f64::NAN),
            max_ratio: sorted.last().copied().unwrap_or(f64::NAN),
            fails: n == 0 || p_value <= self.alpha,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// C(n, k) by Pascal's triangle in exact integers, the independent
    /// reference the tail is checked against.
    fn pascal(n: u32) -> Vec<u128> {
        let mut row = vec![1u128];
        for _ in 0..n {
            let mut next = vec![1u128; row.len() + 1];
            for j in 1..row.len() {
                next[j] = row[j - 1] + row[j];
            }
            row = next;
        }
        row
    }

    #[test]
    fn the_tail_equals_exact_binomial_sums_for_every_n_and_k_up_to_60() {
        for n in 0..=60u32 {
            let row = pascal(n);
            let total = 2f64.powi(n as i32);
            for k in 0..=n + 1 {
                let exact: u128 = row.iter().skip(k as usize).sum();
                let want = exact as f64 / total;
                let got = binomial_half_upper_tail(n, k);
                assert!(
                    (got - want).abs() <= 1e-12 * want.max(1e-300) + 1e-15,
                    "n {n} k {k}: {got} against {want}"
                );
            }
        }
    }

    #[test]
    fn known_tails_of_ten_pairs() {
        assert_eq!(binomial_half_upper_tail(10, 10), 1.0 / 1024.0);
        assert_eq!(binomial_half_upper_tail(10, 9), 11.0 / 1024.0);
        assert_eq!(binomial_half_upper_tail(10, 8), 56.0 / 1024.0);
        // The shipped gates: 24 pairs at alpha 0.02 fail at 18 above.
        assert_eq!(binomial_half_upper_tail(24, 18), 190_051.0 / 16_777_216.0);
        assert_eq!(critical_count(24, 0.02), Some(18));
        assert_eq!(critical_count(10, 0.02), Some(9));
        assert_eq!(critical_count(10, 0.01), Some(10));
        assert_eq!(critical_count(5, 0.02), None, "2^-5 = 0.031 > 0.02");
        assert_eq!(critical_count(6, 0.02), Some(6));
    }

    #[test]
    fn past_a_thousand_pairs_the_normal_tail_is_used_and_stays_ordered() {
        let mid = binomial_half_upper_tail(2_000, 1_000);
        assert!((mid - 0.5).abs() < 0.02, "{mid}");
        let far = binomial_half_upper_tail(2_000, 1_100);
        assert!(far < 1e-5 && far >= 0.0, "{far}");
        let mut last = 1.0;
        for k in (900..1_100).step_by(10) {
            let p = binomial_half_upper_tail(2_000, k);
            assert!(p <= last + 1e-12, "k {k}");
            last = p;
        }
    }

    #[test]
    fn the_verdict_fails_exactly_at_the_critical_count() {
        let t = SignTest {
            tolerance: 1.1,
            alpha: 0.02,
        };
        for above in 0..=10u32 {
            let ratios: Vec<f64> = (0..10)
                .map(|i| if i < above { 1.25 } else { 1.01 })
                .collect();
            let v = t.judge(&ratios);
            assert_eq!(v.above, above);
            assert_eq!(v.fails, above >= 9, "{above} above");
        }
    }

    #[test]
    fn a_ratio_at_the_tolerance_is_not_above_and_a_broken_one_is() {
        let t = SignTest {
            tolerance: 1.1,
            alpha: 0.5,
        };
        assert_eq!(t.judge(&[1.1, 1.1]).above, 0);
        assert_eq!(t.judge(&[f64::INFINITY, f64::NAN, 1.0]).above, 2);
    }

    #[test]
    fn nothing_measured_fails() {
        let t = SignTest {
            tolerance: 1.1,
            alpha: 0.02,
        };
        assert!(t.judge(&[]).fails);
    }

    #[test]
    fn one_huge_stall_moves_the_count_by_one() {
        let t = SignTest {
            tolerance: 1.1,
            alpha: 0.02,
        };
        let mut r = vec![1.0; 10];
        r[3] = 40.0;
        let v = t.judge(&r);
        assert_eq!((v.above, v.fails), (1, false));
        assert_eq!(v.max_ratio, 40.0);
        assert_eq!(v.median_ratio, 1.0);
    }
}
