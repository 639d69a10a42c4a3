//! Fleet-level cap on the share of devices the policy may treat as limited.

use super::LIMITED_BELOW;

/// Which devices the policy treats as limited: those with τ < 0.3, lowest τ
/// first (ties by index), at most ⌊`cap_share`·population⌋ of them.
/// `taus` holds every device's τ (non-finite read as 0.5); `cap_share` ∈
/// [0, 1] (clamped; NaN reads as 0). Returns indices into `taus`, ascending.
/// It restrains demotion only; τ itself is untouched. Source: `ROUTING.md` §3 Trust.
pub fn treated_as_limited(taus: &[f64], cap_share: f64) -> Vec<usize> {
    let share = if cap_share.is_nan() {
        0.0
    } else {
        cap_share.clamp(0.0, 1.0)
    };
    let max = (share * taus.len() as f64).floor() as usize;
    let mut low: Vec<(f64, usize)> = taus
        .iter()
        .enumerate()
        .map(|(i, t)| (if t.is_finite() { *t } else { 0.5 }, i))
        .filter(|(t, _)| *t < LIMITED_BELOW)
        .collect();
    low.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut out: Vec<usize> = low.into_iter().take(max).map(|(_, i)| i).collect();
    out.sort_unstable();
    out
}
