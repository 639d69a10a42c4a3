//! Cycle discovery: every directed 2-pool and 3-pool cycle that starts and
//! ends in WETH over a pool set (`DESIGN.md` §5, "the solver walk").

use std::collections::BTreeMap;

use crate::pools::{PoolSet, WETH};

/// One hop of a path: the pool and the direction (token0 in when `zero_for_one`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hop {
    /// Pool id in the corpus's pool set.
    pub pool: u32,
    /// Token0 → token1 when true.
    pub zero_for_one: bool,
}

/// Hop reserves `(R_in, R_out)` of a path on a pool set, in order.
pub fn hop_reserves(pools: &PoolSet, hops: &[Hop]) -> Vec<(u128, u128)> {
    hops.iter()
        .map(|h| pools.get(h.pool).reserves(h.zero_for_one))
        .collect()
}

/// All directed WETH cycles of 2 or 3 distinct pools, in a deterministic
/// order (2-pool cycles first, then 3-pool; each by pool ids).
///
/// A 2-pool cycle is WETH → T → WETH through two different pools of the same
/// pair of tokens; a 3-pool cycle is WETH → A → B → WETH with A ≠ B, neither
/// WETH.
pub fn discover_cycles(pools: &PoolSet) -> Vec<Vec<Hop>> {
    // token -> [(pool, zero_for_one)] for hops that take `token` in.
    let mut by_in: BTreeMap<&str, Vec<(u32, bool, &str)>> = BTreeMap::new();
    for p in &pools.pools {
        by_in
            .entry(&*p.token0)
            .or_default()
            .push((p.id, true, &*p.token1));
        by_in
            .entry(&*p.token1)
            .or_default()
            .push((p.id, false, &*p.token0));
    }
    let empty = Vec::new();
    let from_weth = by_in.get(WETH).unwrap_or(&empty);
    let mut two = Vec::new();
    let mut three = Vec::new();
    for &(p1, d1, a) in from_weth {
        for &(p2, d2, b) in by_in.get(a).unwrap_or(&empty) {
            if p2 == p1 {
                continue;
            }
            let h1 = Hop {
                pool: p1,
                zero_for_one: d1,
            };
            let h2 = Hop {
                pool: p2,
                zero_for_one: d2,
            };
            if b == WETH {
                two.push(vec![h1, h2]);
                continue;
            }
            for &(p3, d3, c) in by_in.get(b).unwrap_or(&empty) {
                if c == WETH && p3 != p2 && p3 != p1 {
                    three.push(vec![
                        h1,
                        h2,
                        Hop {
                            pool: p3,
                            zero_for_one: d3,
                        },
                    ]);
                }
            }
        }
    }
    two.sort();
    three.sort();
    two.extend(three);
    two
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pools::{Pool, Venue};

    fn pool(id: u32, t0: &str, t1: &str) -> Pool {
        Pool {
            id,
            venue: Venue::UniswapV2,
            address: format!("0x{id}").into(),
            token0: t0.into(),
            token1: t1.into(),
            reserve0: 10,
            reserve1: 10,
        }
    }

    #[test]
    fn finds_every_directed_cycle_and_nothing_else() {
        let set = PoolSet {
            pools: vec![
                pool(0, WETH, "a"),
                pool(1, "a", WETH),
                pool(2, "a", "b"),
                pool(3, "b", WETH),
                pool(4, "c", "d"),
            ],
        };
        let cycles = discover_cycles(&set);
        // 2-pool: 0→1 and 1→0. 3-pool: W-a-b-W via (0|1),2,3 and reverse 3,2,(0|1).
        assert_eq!(cycles.len(), 2 + 4, "{cycles:?}");
        for c in &cycles {
            // Every cycle's token chain closes at WETH.
            let mut t: &str = WETH;
            for h in c {
                let p = set.get(h.pool);
                let (i, o) = if h.zero_for_one {
                    (&p.token0, &p.token1)
                } else {
                    (&p.token1, &p.token0)
                };
                assert_eq!(&**i, t);
                t = o;
            }
            assert_eq!(t, WETH);
        }
        assert!(cycles.iter().all(|c| c.iter().all(|h| h.pool != 4)));
    }
}
