//! The outcome of one path on a pool snapshot (`DESIGN.md` §5): the function
//! the solver walk calls. Pure and exact: the outcome depends only on the
//! corpus, never on scale, binding or timing.

use fleet::{FailReason, PathOutcome};

use crate::corpus::PathCase;
use crate::math;
use crate::paths::{hop_reserves, Hop};
use crate::pools::PoolSet;

/// The optimal input and exact profit of a cycle on `pools`, or `None` when
/// no input makes a profit (see [`math::optimal_input`]).
pub fn solve_hops(pools: &PoolSet, hops: &[Hop]) -> Option<(u128, u128)> {
    math::optimal_input(&hop_reserves(pools, hops))
}

/// The outcome of `path` on `pools` with `profit_threshold` (wei):
/// `Failed { SimReverted }` when the corpus marks the path's simulation as
/// reverting; otherwise `Solved { amount_in, profit }` when the best profit
/// is strictly above the threshold; otherwise `Suppressed`.
pub fn solve_path(pools: &PoolSet, path: &PathCase, profit_threshold: u128) -> PathOutcome {
    if path.sim.is_some_and(|s| s.reverts) {
        return PathOutcome::Failed {
            reason: FailReason::SimReverted,
        };
    }
    match solve_hops(pools, &path.hops) {
        Some((amount_in, profit)) if profit > profit_threshold => {
            PathOutcome::Solved { amount_in, profit }
        }
        _ => PathOutcome::Suppressed,
    }
}
