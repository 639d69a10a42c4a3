//! The corpus generator: deterministic from a seed (same seed and pool file →
//! byte-identical corpus). Calibration targets (`DESIGN.md` §5, scale 1) are
//! the constants below; `corpus/README.md` explains each.

use std::collections::BTreeSet;

use super::rng::SplitMix64;
use super::{Corpus, CorpusHeader, CycleCase, PathCase, SimCase, VERSION};
use crate::lpt::{self, BINS};
use crate::paths::{discover_cycles, Hop};
use crate::pools::{Pool, PoolSet, Swap};
use crate::solve::solve_path;

/// Paths per cycle: uniform in this range.
pub const PATHS_PER_CYCLE: (u64, u64) = (92, 108);
/// Simulations per cycle: uniform in this range (capped at the path count).
pub const SIMS_PER_CYCLE: (u64, u64) = (85, 105);
/// Mean simulation CPU, µs (jittered ±15 %).
pub const SIM_CPU_US: u64 = 3_300;
/// Walk CPU per hop, µs (jittered ±30 %): ≈ 2.4 ms per (mostly 3-hop) path,
/// so a bin of ≈ 16.7 paths walks ≈ 40 ms of CPU.
pub const WALK_CPU_PER_HOP_US: u64 = 810;
/// Resolve CPU per cycle, µs (jittered ±10 %).
pub const RESOLVE_CPU_US: u64 = 12_400;
/// Pool-update unit CPU: a base plus a cost per swap, µs.
pub const POOLUPD_CPU_US: (u64, u64) = (150, 40);
/// Swaps per cycle: uniform in this range.
pub const SWAPS_PER_CYCLE: (u64, u64) = (4, 16);
/// A swap's input as a share of the pool's input reserve, basis points.
pub const SWAP_BPS: (u64, u64) = (5, 150);
/// Share of simulations that revert, per mille.
pub const REVERT_PERMILLE: u64 = 30;
/// The most profitable `Solved` paths of a cycle whose trades land before the
/// next cycle (their hops become that cycle's first swaps), closing the edge.
pub const LANDED_PER_CYCLE: usize = 3;
/// Share of a cycle's paths drawn from those touching this cycle's swapped
/// pools (the rest are drawn from all cycles), per mille.
pub const TOUCHED_PERMILLE: u64 = 600;
/// Simulation I/O wait: quantiles (per million → µs), linear between them.
/// Median 3.0 ms, p90 5.2 ms, p99 9.5 ms, max 12 ms.
pub const SIM_IO_QUANTILES: [(u64, u64); 9] = [
    (0, 900),
    (100_000, 1_700),
    (250_000, 2_300),
    (500_000, 3_000),
    (750_000, 3_900),
    (900_000, 5_200),
    (950_000, 6_600),
    (990_000, 9_500),
    (1_000_000, 12_000),
];

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerateParams {
    /// Seed of the random stream.
    pub seed: u64,
    /// Number of cycles.
    pub cycles: u32,
    /// Intended arrival interval between cycles at scale 1, µs.
    pub cycle_interval_us: u64,
    /// `Solved` above this profit, wei.
    pub profit_threshold: u128,
    /// File name of the pool file (recorded in the header).
    pub pool_source: String,
}

impl Default for GenerateParams {
    /// The golden corpus's parameters: seed 1, 333 cycles, 1 s interval,
    /// threshold 0.01 WETH.
    fn default() -> Self {
        GenerateParams {
            seed: 1,
            cycles: 333,
            cycle_interval_us: 1_000_000,
            profit_threshold: 10_000_000_000_000_000,
            pool_source: "pools-2020-09.txt".into(),
        }
    }
}

fn sim_io_us(rng: &mut SplitMix64) -> u64 {
    let u = rng.below(1_000_001);
    let q = &SIM_IO_QUANTILES;
    let i = q
        .iter()
        .position(|&(p, _)| p >= u)
        .unwrap_or(q.len() - 1)
        .max(1);
    let ((p0, v0), (p1, v1)) = (q[i - 1], q[i]);
    v0 + (v1 - v0) * (u - p0) / (p1 - p0)
}

/// The trades that land after `cycle`: its [`LANDED_PER_CYCLE`] most
/// profitable `Solved` paths (ties to the lower path id), as (hops, input).
fn landed(cycle: &CycleCase) -> Vec<(Vec<Hop>, u128)> {
    let mut won: Vec<(u128, u32, &PathCase, u128)> = cycle
        .paths
        .iter()
        .filter_map(|p| match p.expected {
            fleet::PathOutcome::Solved { amount_in, profit } => Some((profit, p.id, p, amount_in)),
            _ => None,
        })
        .collect();
    won.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    won.into_iter()
        .take(LANDED_PER_CYCLE)
        .map(|(_, _, p, x)| (p.hops.clone(), x))
        .collect()
}

/// The cycle universe of `base`, with the pools no cycle uses left out and
/// the rest renumbered densely: the pools, the cycles' hops, and for each
/// pool the cycles through it.
fn compact_universe(base: &PoolSet) -> (PoolSet, Vec<Vec<Hop>>, Vec<Vec<u32>>) {
    let universe = discover_cycles(base);
    let used: BTreeSet<u32> = universe.iter().flatten().map(|h| h.pool).collect();
    let mut remap = vec![u32::MAX; base.len()];
    let mut pools = Vec::with_capacity(used.len());
    for &id in &used {
        remap[id as usize] = pools.len() as u32;
        pools.push(Pool {
            id: pools.len() as u32,
            ..base.get(id).clone()
        });
    }
    let universe: Vec<Vec<Hop>> = universe
        .into_iter()
        .map(|c| {
            c.into_iter()
                .map(|h| Hop {
                    pool: remap[h.pool as usize],
                    ..h
                })
                .collect()
        })
        .collect();
    let pools = PoolSet { pools };
    let mut through: Vec<Vec<u32>> = vec![Vec::new(); pools.len()];
    for (i, c) in universe.iter().enumerate() {
        for h in c {
            through[h.pool as usize].push(i as u32);
        }
    }

    (pools, universe, through)
}

/// One cycle's swaps, applied to `working`: the previous cycle's landed
/// paths first (each hop's output feeding the next), then the random swaps.
fn draw_swaps(
    prev: Option<&CycleCase>,
    working: &mut PoolSet,
    universe: &[Vec<Hop>],
    rng: &mut SplitMix64,
) -> Vec<Swap> {
    let mut swaps = Vec::new();
    if let Some(prev) = prev {
        for hops in landed(prev) {
            let mut x = hops.1;
            for h in &hops.0 {
                let (r_in, r_out) = working.get(h.pool).reserves(h.zero_for_one);
                let s = Swap {
                    pool: h.pool,
                    zero_for_one: h.zero_for_one,
                    amount_in: x,
                };
                x = crate::math::amount_out(x, r_in, r_out);
                working.apply(&[s]);
                swaps.push(s);
            }
        }
    }
    let n_swaps = rng.range(SWAPS_PER_CYCLE.0, SWAPS_PER_CYCLE.1);
    for _ in 0..n_swaps {
        let route = &universe[rng.below(universe.len() as u64) as usize];
        let pool = route[rng.below(route.len() as u64) as usize].pool;
        let zero_for_one = rng.below(2) == 1;
        let (r_in, _) = working.get(pool).reserves(zero_for_one);
        let bps = rng.range(SWAP_BPS.0, SWAP_BPS.1) as u128;
        let s = Swap {
            pool,
            zero_for_one,
            amount_in: (r_in / 10_000 * bps).max(1),
        };
        working.apply(&[s]);
        swaps.push(s);
    }
    swaps
}

/// One cycle's candidate routes: up to the touched share among the cycles
/// through a swapped pool, the rest drawn from the universe, shuffled.
fn draw_routes(
    swaps: &[Swap],
    universe: &[Vec<Hop>],
    through: &[Vec<u32>],
    rng: &mut SplitMix64,
) -> Vec<u32> {
    let n_paths = rng.range(PATHS_PER_CYCLE.0, PATHS_PER_CYCLE.1) as usize;
    let touched: BTreeSet<u32> = swaps
        .iter()
        .flat_map(|s| through[s.pool as usize].iter().copied())
        .collect();
    let mut touched: Vec<u32> = touched.into_iter().collect();
    rng.shuffle(&mut touched);
    touched.truncate(n_paths * TOUCHED_PERMILLE as usize / 1000);
    let mut chosen: BTreeSet<u32> = touched.iter().copied().collect();
    let mut routes = touched;
    while routes.len() < n_paths.min(universe.len()) {
        let r = rng.below(universe.len() as u64) as u32;
        if chosen.insert(r) {
            routes.push(r);
        }
    }
    rng.shuffle(&mut routes);
    routes
}

/// One cycle's paths over `routes`: walk CPU, a simulation for a drawn
/// subset, and each path's expected outcome solved on `working`.
fn draw_paths(
    routes: &[u32],
    universe: &[Vec<Hop>],
    working: &PoolSet,
    profit_threshold: u128,
    rng: &mut SplitMix64,
) -> Vec<PathCase> {
    let n_sims = (rng.range(SIMS_PER_CYCLE.0, SIMS_PER_CYCLE.1) as usize).min(routes.len());
    let mut order: Vec<usize> = (0..routes.len()).collect();
    rng.shuffle(&mut order);
    let mut has_sim = vec![false; routes.len()];
    for &i in &order[..n_sims] {
        has_sim[i] = true;
    }

    let mut paths = Vec::with_capacity(routes.len());
    for (i, &r) in routes.iter().enumerate() {
        let hops = universe[r as usize].clone();
        let walk_cpu_us = rng.jitter(WALK_CPU_PER_HOP_US * hops.len() as u64, 700, 1300) as u32;
        let sim = has_sim[i].then(|| SimCase {
            cpu_us: rng.jitter(SIM_CPU_US, 850, 1150) as u32,
            io_us: sim_io_us(rng) as u32,
            reverts: rng.below(1000) < REVERT_PERMILLE,
        });
        let mut p = PathCase {
            id: i as u32,
            hops,
            walk_cpu_us,
            sim,
            expected: fleet::PathOutcome::Suppressed,
        };
        p.expected = solve_path(working, &p, profit_threshold);
        paths.push(p);
    }
    paths
}

/// Generates a corpus over `base` (the filtered pool file's pools).
///
/// Only pools on some WETH cycle are kept, renumbered densely in their
/// original order. Each cycle: draw swaps and apply them, draw the candidate
/// paths (about 60 % touching a swapped pool), their walk CPU and
/// simulations, solve each path exactly on the moved pools, and partition
/// the paths into 6 LPT bins.
pub fn generate(base: &PoolSet, params: &GenerateParams) -> Corpus {
    let (pools, universe, through) = compact_universe(base);
    let mut rng = SplitMix64::new(params.seed);
    let mut working = pools.clone();
    let mut cycles: Vec<CycleCase> = Vec::with_capacity(params.cycles as usize);
    for index in 0..params.cycles {
        let swaps = draw_swaps(cycles.last(), &mut working, &universe, &mut rng);
        let routes = draw_routes(&swaps, &universe, &through, &mut rng);
        let paths = draw_paths(
            &routes,
            &universe,
            &working,
            params.profit_threshold,
            &mut rng,
        );
        let costs: Vec<u64> = paths.iter().map(PathCase::cost_us).collect();
        cycles.push(CycleCase {
            index,
            resolve_cpu_us: rng.jitter(RESOLVE_CPU_US, 900, 1100) as u32,
            poolupd_cpu_us: (POOLUPD_CPU_US.0 + POOLUPD_CPU_US.1 * swaps.len() as u64) as u32,
            swaps,
            bins: lpt::partition(&costs, BINS),
            paths,
        });
    }
    let mut c = Corpus {
        header: CorpusHeader {
            version: VERSION,
            seed: params.seed,
            cycles: params.cycles,
            cycle_interval_us: params.cycle_interval_us,
            profit_threshold: params.profit_threshold,
            pool_source: params.pool_source.clone(),
            checksum: String::new(),
        },
        pools,
        cycles,
    };
    c.header.checksum = super::format::checksum_of(&c.to_text());
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_quantiles_are_hit() {
        let mut rng = SplitMix64::new(3);
        let mut v: Vec<u64> = (0..20_000).map(|_| sim_io_us(&mut rng)).collect();
        v.sort_unstable();
        let med = v[v.len() / 2];
        assert!((2_800..=3_200).contains(&med), "median {med}");
        assert!(*v.last().unwrap() <= 12_000 && v[0] >= 900);
    }
}
