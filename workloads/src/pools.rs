//! Pool states: constant-product pairs with `u128` reserves, the swaps that
//! move them between cycles, and the filter that derives the corpus's pool
//! set from the raw on-chain dumps (`DESIGN.md` §5; provenance in
//! `corpus/README.md`).
//!
//! Reserves are read from JSON integer tokens straight into `u128`
//! (serde_json parses 128-bit integers without going through `f64`).

use std::sync::Arc;

use serde::Deserialize;

use crate::math;

/// Where a pair trades. Both venues charge 3/1000.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Venue {
    /// Uniswap V2 (text tag `u`).
    UniswapV2,
    /// SushiSwap (text tag `s`).
    Sushi,
}

impl Venue {
    /// The one-letter tag used in the text formats.
    pub const fn tag(self) -> &'static str {
        match self {
            Venue::UniswapV2 => "u",
            Venue::Sushi => "s",
        }
    }

    /// Parses a tag written by [`Venue::tag`].
    pub fn from_tag(s: &str) -> Option<Venue> {
        match s {
            "u" => Some(Venue::UniswapV2),
            "s" => Some(Venue::Sushi),
            _ => None,
        }
    }
}

/// One constant-product pair.
///
/// The identity (address and tokens) is shared, immutable text
/// (`Arc<str>`): every cycle's resolve copies the whole set to move its
/// reserves, so a copy is one allocation of fixed-size rows (96 bytes a
/// pool), never three strings per pool (decision 0011).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    /// Dense id within its [`PoolSet`] (its position).
    pub id: u32,
    /// The venue.
    pub venue: Venue,
    /// Pair contract address, `0x…` as on chain (provenance only).
    pub address: Arc<str>,
    /// Token0 address, lower-case `0x…`.
    pub token0: Arc<str>,
    /// Token1 address, lower-case `0x…`.
    pub token1: Arc<str>,
    /// Reserve of token0, token units (< 2^112).
    pub reserve0: u128,
    /// Reserve of token1, token units (< 2^112).
    pub reserve1: u128,
}

impl Pool {
    /// `(reserve_in, reserve_out)` when trading token0 → token1
    /// (`zero_for_one`) or the reverse.
    pub const fn reserves(&self, zero_for_one: bool) -> (u128, u128) {
        if zero_for_one {
            (self.reserve0, self.reserve1)
        } else {
            (self.reserve1, self.reserve0)
        }
    }
}

/// One swap applied to a pool between cycles: `amount_in` of the input token
/// (token0 when `zero_for_one`), priced with the exact hop math.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Swap {
    /// Pool id in the corpus's [`PoolSet`].
    pub pool: u32,
    /// Direction: token0 in, token1 out when true.
    pub zero_for_one: bool,
    /// Input amount, token units.
    pub amount_in: u128,
}

/// The pools of a corpus, indexed by dense id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PoolSet {
    /// Pools; `pools[i].id == i`.
    pub pools: Vec<Pool>,
}

impl PoolSet {
    /// Pool by id. Panics on an id outside the set (ids are checked when a
    /// corpus is parsed).
    pub fn get(&self, id: u32) -> &Pool {
        &self.pools[id as usize]
    }

    /// Number of pools.
    pub fn len(&self) -> usize {
        self.pools.len()
    }

    /// True when there is no pool.
    pub fn is_empty(&self) -> bool {
        self.pools.is_empty()
    }

    /// Applies swaps in order: `out = amount_out(x, R_in, R_out)`, then
    /// `R_in += x`, `R_out −= out`. A reserve that would pass `2^112 − 1`
    /// saturates there (the pair contract's bound).
    pub fn apply(&mut self, swaps: &[Swap]) {
        const MAX_RESERVE: u128 = (1u128 << 112) - 1;
        for s in swaps {
            let p = &mut self.pools[s.pool as usize];
            let (r_in, r_out) = p.reserves(s.zero_for_one);
            let out = math::amount_out(s.amount_in, r_in, r_out);
            let new_in = r_in.saturating_add(s.amount_in).min(MAX_RESERVE);
            let new_out = r_out - out;
            if s.zero_for_one {
                p.reserve0 = new_in;
                p.reserve1 = new_out;
            } else {
                p.reserve1 = new_in;
                p.reserve0 = new_out;
            }
        }
    }
}

/// The newest resolved pool states, shared between the replay (which
/// replaces them after each cycle's resolve) and the background work that
/// reads them (`DESIGN.md` §5: the pool-state update and the registration
/// crawl are deferrable).
///
/// A background unit takes the states current when it *runs*, as a state
/// writer persists the current state, so a unit held through a cordon pins
/// no snapshot of its own: a cordon's backlog costs its units, not one pool
/// set per held cycle. Cloning is an `Arc` clone of the shared cell.
#[derive(Clone, Debug)]
pub struct CurrentPools(Arc<parking_lot::Mutex<Arc<PoolSet>>>);

impl CurrentPools {
    /// A cell holding `set`.
    pub fn new(set: Arc<PoolSet>) -> Self {
        CurrentPools(Arc::new(parking_lot::Mutex::new(set)))
    }

    /// The states current now (an `Arc` clone under a short lock).
    pub fn get(&self) -> Arc<PoolSet> {
        self.0.lock().clone()
    }

    /// Replaces the current states with `set`; the previous set is freed
    /// once no running unit reads it.
    pub fn set(&self, set: Arc<PoolSet>) {
        // The guard is a temporary: the old set drops after the lock.
        let _old = std::mem::replace(&mut *self.0.lock(), set);
    }
}

/// WETH's mainnet address, lower case: the start token of every cycle.
pub const WETH: &str = "0xc02aaa39b223fe8d0a0e5c4f27ead9083c756cc2";

/// One whole WETH in wei: the liquidity floor of the filter.
pub const ONE_WETH: u128 = 1_000_000_000_000_000_000;

#[derive(Debug, Deserialize)]
struct RawToken {
    address: String,
    decimal: u32,
}

#[derive(Debug, Deserialize)]
struct RawPair {
    address: String,
    token0: RawToken,
    token1: RawToken,
    reserve0: u128,
    reserve1: u128,
}

/// The filter rule (recorded in `corpus/README.md`): keep a pair when it has
/// at least 1 WETH on its WETH side, or — without WETH — at least one whole
/// token (`10^decimals`) on each side.
fn keep(p: &RawPair) -> bool {
    let t0 = p.token0.address.to_ascii_lowercase();
    let t1 = p.token1.address.to_ascii_lowercase();
    let whole = |d: u32| 10u128.checked_pow(d).unwrap_or(u128::MAX);
    if p.reserve0 == 0 || p.reserve1 == 0 {
        return false;
    }
    if t0 == WETH {
        p.reserve0 >= ONE_WETH
    } else if t1 == WETH {
        p.reserve1 >= ONE_WETH
    } else {
        p.reserve0 >= whole(p.token0.decimal) && p.reserve1 >= whole(p.token1.decimal)
    }
}

/// Derives the filtered pool list from the raw JSON dumps (the Uniswap V2
/// file first, then SushiSwap), keeping file order; ids are dense from 0.
///
/// Errors: the JSON error of the file that does not parse (a reserve that is
/// not an integer token fails here, never silently rounds).
pub fn derive_filtered(univ2_json: &str, sushi_json: &str) -> Result<Vec<Pool>, serde_json::Error> {
    let mut out = Vec::new();
    for (venue, text) in [(Venue::UniswapV2, univ2_json), (Venue::Sushi, sushi_json)] {
        let raw: Vec<RawPair> = serde_json::from_str(text)?;
        for p in raw.iter().filter(|p| keep(p)) {
            out.push(Pool {
                id: out.len() as u32,
                venue,
                address: p.address.as_str().into(),
                token0: p.token0.address.to_ascii_lowercase().into(),
                token1: p.token1.address.to_ascii_lowercase().into(),
                reserve0: p.reserve0,
                reserve1: p.reserve1,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_reserves_parse_exactly_beyond_f64() {
        let j = r#"[{"index":0,"address":"0xA","token0":{"address":"0xC02aaA39b223FE8D0A0e5C4F27eAD9083C756Cc2","symbol":"WETH","decimal":18},
            "token1":{"address":"0xB","symbol":"B","decimal":18},"reserve0":5192296858534827628530496329220095,"reserve1":9007199254740993}]"#;
        let pools = derive_filtered(j, "[]").unwrap();
        assert_eq!(pools[0].reserve0, (1u128 << 112) - 1);
        assert_eq!(pools[0].reserve1, 9_007_199_254_740_993); // 2^53 + 1: not representable in f64
        assert_eq!(&*pools[0].token0, WETH);
    }

    #[test]
    fn filter_drops_thin_pairs() {
        let j = r#"[{"index":0,"address":"0xA","token0":{"address":"0xC02aaA39b223FE8D0A0e5C4F27eAD9083C756Cc2","symbol":"WETH","decimal":18},
            "token1":{"address":"0xB","symbol":"B","decimal":18},"reserve0":999999999999999999,"reserve1":5},
            {"index":1,"address":"0xC","token0":{"address":"0xD","symbol":"D","decimal":6},
            "token1":{"address":"0xE","symbol":"E","decimal":2},"reserve0":1000000,"reserve1":99}]"#;
        assert!(derive_filtered(j, "[]").unwrap().is_empty());
    }

    #[test]
    fn current_pools_hands_out_the_newest_set_and_frees_the_old() {
        let first = Arc::new(PoolSet::default());
        let weak = Arc::downgrade(&first);
        let cell = CurrentPools::new(first);
        let reader = cell.clone();
        let held = reader.get();
        assert!(held.is_empty());
        let mut next = PoolSet::default();
        next.pools.push(Pool {
            id: 0,
            venue: Venue::UniswapV2,
            address: "0xA".into(),
            token0: "0x0".into(),
            token1: "0x1".into(),
            reserve0: 1,
            reserve1: 2,
        });
        cell.set(Arc::new(next));
        assert_eq!(
            reader.get().len(),
            1,
            "a clone of the cell sees the replacement"
        );
        assert!(weak.upgrade().is_some(), "a running reader keeps its set");
        drop(held);
        assert!(
            weak.upgrade().is_none(),
            "the replaced set is freed with its last reader"
        );
    }

    #[test]
    fn apply_moves_reserves_by_the_exact_hop() {
        let mut set = PoolSet {
            pools: vec![Pool {
                id: 0,
                venue: Venue::Sushi,
                address: "0xA".into(),
                token0: "0x0".into(),
                token1: "0x1".into(),
                reserve0: 1000,
                reserve1: 2000,
            }],
        };
        set.apply(&[Swap {
            pool: 0,
            zero_for_one: true,
            amount_in: 1000,
        }]);
        assert_eq!(
            (set.pools[0].reserve0, set.pools[0].reserve1),
            (2000, 2000 - 998)
        );
        set.apply(&[Swap {
            pool: 0,
            zero_for_one: false,
            amount_in: 10,
        }]);
        let out = math::amount_out(10, 1002, 2000);
        assert_eq!(
            (set.pools[0].reserve0, set.pools[0].reserve1),
            (2000 - out, 1012)
        );
    }
}
