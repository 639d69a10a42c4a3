//! Exact constant-product math: the fee-adjusted amount out of one hop, a
//! path's output, and the optimal input of a 2- or 3-hop cycle.
//!
//! Every amount is an integer in token units (wei for WETH). Intermediates
//! are 256-bit (one hop) or 1024-bit (the closed form of a whole cycle), so
//! nothing overflows for reserves up to 2^112 (the Uniswap V2 bound). The
//! rules come from `DESIGN.md` §5 ("exact integer constant-product math").

use ruint::aliases::{U1024, U256};

/// Fee numerator kept by the pool per 1000 (Uniswap V2 and SushiSwap: 3/1000 fee).
pub const FEE_KEEP: u64 = 997;
/// Fee denominator.
pub const FEE_DEN: u64 = 1000;
/// Half-width of the integer scan around the closed-form optimum (inputs).
pub const SEARCH_HALF_WIDTH: u128 = 64;

/// Reserves of one hop in the direction of travel: `(reserve_in, reserve_out)`.
pub type HopReserves = (u128, u128);

/// Amount out of one hop: `floor(x·997·R_out / (R_in·1000 + x·997))`.
///
/// Exact with 256-bit intermediates; the result is always `< r_out` (0 when
/// either reserve or the input is 0), so it fits a `u128`.
pub fn amount_out(amount_in: u128, reserve_in: u128, reserve_out: u128) -> u128 {
    if amount_in == 0 || reserve_in == 0 || reserve_out == 0 {
        return 0;
    }
    let x = U256::from(amount_in) * U256::from(FEE_KEEP);
    let num = x * U256::from(reserve_out);
    let den = U256::from(reserve_in) * U256::from(FEE_DEN) + x;
    let q = num / den;
    // q < reserve_out <= u128::MAX by construction.
    q.to::<u128>()
}

/// Output of a whole path for input `amount_in`: the hops applied in turn.
pub fn path_out(amount_in: u128, hops: &[HopReserves]) -> u128 {
    hops.iter()
        .fold(amount_in, |x, &(r_in, r_out)| amount_out(x, r_in, r_out))
}

/// Profit of a cycle at input `amount_in`: `path_out − amount_in`, or `None`
/// when the output does not exceed the input.
pub fn profit_at(amount_in: u128, hops: &[HopReserves]) -> Option<u128> {
    path_out(amount_in, hops)
        .checked_sub(amount_in)
        .filter(|p| *p > 0)
}

/// The composed map of a path as `A·x / (B + C·x)` (real-valued, no floors).
///
/// Each hop is `a·x / (b + c·x)` with `a = 997·R_out`, `b = 1000·R_in`,
/// `c = 997`; composing two gives `A = a1·a2`, `B = b1·b2`,
/// `C = c1·b2 + a1·c2`. With three hops of 2^112 reserves the terms stay
/// under 2^370, so 1024 bits hold `A·B`.
fn compose(hops: &[HopReserves]) -> (U1024, U1024, U1024) {
    let mut a = U1024::from(1u8);
    let mut b = U1024::from(1u8);
    let mut c = U1024::ZERO;
    for &(r_in, r_out) in hops {
        let ha = U1024::from(r_out) * U1024::from(FEE_KEEP);
        let hb = U1024::from(r_in) * U1024::from(FEE_DEN);
        let hc = U1024::from(FEE_KEEP);
        // new = h(A x / (B + C x)) = ha·A x / (hb (B + C x) + hc·A x)
        let na = ha * a;
        let nb = hb * b;
        let nc = hb * c + hc * a;
        a = na;
        b = nb;
        c = nc;
    }
    (a, b, c)
}

/// The real-valued optimum of the un-floored cycle, rounded down:
/// `x* = (√(A·B) − B) / C`, or `None` when the marginal rate at zero input
/// (`A / B`) is not above 1 or the path is empty or has an empty reserve.
pub fn closed_form_optimum(hops: &[HopReserves]) -> Option<u128> {
    if hops.is_empty() || hops.iter().any(|&(i, o)| i == 0 || o == 0) {
        return None;
    }
    let (a, b, c) = compose(hops);
    if a <= b || c.is_zero() {
        return None;
    }
    let root = (a * b).root(2);
    if root <= b {
        return None;
    }
    let x = (root - b) / c;
    Some(if x > U1024::from(u128::MAX) {
        u128::MAX
    } else {
        x.to::<u128>()
    })
}

/// The optimal integer input of a cycle and its exact profit.
///
/// The closed form gives the real optimum `x*`; the integer profit curve is
/// a sawtooth (a floor in every hop), so the best integer input is searched
/// exhaustively in `[x* − 64, x* + 64]`; ties go to the smaller input.
/// Returns `None` when no input in that window makes a profit.
pub fn optimal_input(hops: &[HopReserves]) -> Option<(u128, u128)> {
    let x0 = closed_form_optimum(hops)?;
    let lo = x0.saturating_sub(SEARCH_HALF_WIDTH).max(1);
    let hi = x0.saturating_add(SEARCH_HALF_WIDTH);
    let mut best: Option<(u128, u128)> = None;
    let mut x = lo;
    loop {
        if let Some(p) = profit_at(x, hops) {
            if best.is_none_or(|(_, bp)| p > bp) {
                best = Some((x, p));
            }
        }
        if x == hi {
            break;
        }
        x += 1;
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_matches_the_formula_on_small_numbers() {
        // 1000·997·2000 / (1000·1000 + 1000·997) = 1994000000 / 1997000 = 998.49 -> 998
        assert_eq!(amount_out(1000, 1000, 2000), 998);
        assert_eq!(amount_out(0, 1000, 2000), 0);
        assert_eq!(amount_out(5, 0, 2000), 0);
    }

    #[test]
    fn closed_form_is_none_without_an_edge() {
        // Balanced pools: the fee makes every cycle unprofitable.
        let hops = [
            (10u128.pow(21), 10u128.pow(24)),
            (10u128.pow(24), 10u128.pow(21)),
        ];
        assert_eq!(closed_form_optimum(&hops), None);
        assert_eq!(optimal_input(&hops), None);
    }

    #[test]
    fn optimum_of_an_imbalanced_pair_is_profitable_and_replays() {
        let hops = [
            (10u128.pow(21), 2 * 10u128.pow(24)),
            (10u128.pow(24), 10u128.pow(21)),
        ];
        let (x, p) = optimal_input(&hops).unwrap();
        assert_eq!(path_out(x, &hops) - x, p);
        assert!(profit_at(x / 2, &hops).unwrap() < p);
        assert!(profit_at(x + x / 2, &hops).unwrap() < p);
    }
}
