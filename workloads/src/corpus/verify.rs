//! Corpus verification (every outcome recomputed, bins re-partitioned) and
//! calibration figures.

use std::path::Path;

use fleet::PathOutcome;

use super::{Corpus, CorpusError, PathCase};
use crate::lpt::{self, BINS};
use crate::solve::solve_path;

/// Calibration figures of a corpus at scale 1 (all times µs).
#[derive(Debug, Clone, PartialEq)]
pub struct CorpusStats {
    /// Paths per cycle: min, max, mean.
    pub paths_per_cycle: (usize, usize, f64),
    /// Simulations per cycle: min, max, mean.
    pub sims_per_cycle: (usize, usize, f64),
    /// Mean simulation CPU.
    pub sim_cpu_mean_us: f64,
    /// Simulation I/O wait: p50, p99, max.
    pub sim_io_us: (u64, u64, u64),
    /// Mean walk CPU of a bin (sum of its paths' walk CPU).
    pub bin_walk_cpu_mean_us: f64,
    /// Mean simulations per bin.
    pub sims_per_bin_mean: f64,
    /// A bin's span at no contention if the walk waits each simulation out
    /// in turn (walk CPU + Σ sim CPU + I/O): mean and max.
    pub bin_span_sequential_us: (f64, u64),
    /// A bin's span at no contention if the walk keeps one simulation in
    /// flight (it submits a path's simulation, walks the next path, then
    /// joins the previous simulation before submitting the next): mean, max.
    pub bin_span_one_in_flight_us: (f64, u64),
    /// Mean resolve CPU.
    pub resolve_mean_us: f64,
    /// Mean pool-update CPU.
    pub poolupd_mean_us: f64,
}

/// What [`Corpus::verify`] checked.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifyReport {
    /// Cycles checked.
    pub cycles: usize,
    /// Paths checked (each outcome recomputed).
    pub paths: usize,
    /// Outcomes by kind.
    pub solved: usize,
    /// `Suppressed` outcomes.
    pub suppressed: usize,
    /// `Failed` outcomes.
    pub failed: usize,
    /// Swaps applied.
    pub swaps: usize,
    /// Calibration figures.
    pub stats: CorpusStats,
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        0.0
    } else {
        s / n as f64
    }
}

/// Span of a bin's paths (in order) with at most one simulation in flight.
fn span_one_in_flight(bin: &[&PathCase]) -> u64 {
    let (mut t, mut pending) = (0u64, 0u64);
    for p in bin {
        t += p.walk_cpu_us as u64;
        if let Some(s) = p.sim {
            t = t.max(pending);
            pending = t + s.cpu_us as u64 + s.io_us as u64;
        }
    }
    t.max(pending)
}

/// Calibration figures (see [`CorpusStats`]).
pub(super) fn stats(c: &Corpus) -> CorpusStats {
    let per = |f: &dyn Fn(&super::CycleCase) -> usize| {
        let v: Vec<usize> = c.cycles.iter().map(f).collect();
        (
            v.iter().copied().min().unwrap_or(0),
            v.iter().copied().max().unwrap_or(0),
            mean(v.iter().map(|&x| x as f64)),
        )
    };
    let sims: Vec<_> = c
        .cycles
        .iter()
        .flat_map(|cy| cy.paths.iter().filter_map(|p| p.sim))
        .collect();
    let mut io: Vec<u64> = sims.iter().map(|s| s.io_us as u64).collect();
    io.sort_unstable();
    let q = |p: usize| {
        io.get((io.len().saturating_sub(1)) * p / 100)
            .copied()
            .unwrap_or(0)
    };
    let bins: Vec<Vec<&PathCase>> = c
        .cycles
        .iter()
        .flat_map(|cy| {
            cy.bins
                .iter()
                .map(move |b| b.iter().map(|&i| &cy.paths[i as usize]).collect())
        })
        .collect();
    let spans: Vec<u64> = bins
        .iter()
        .map(|b| b.iter().map(|p| p.cost_us()).sum())
        .collect();
    let piped: Vec<u64> = bins.iter().map(|b| span_one_in_flight(b)).collect();
    CorpusStats {
        paths_per_cycle: per(&|cy| cy.paths.len()),
        sims_per_cycle: per(&|cy| cy.paths.iter().filter(|p| p.sim.is_some()).count()),
        sim_cpu_mean_us: mean(sims.iter().map(|s| s.cpu_us as f64)),
        sim_io_us: (q(50), q(99), io.last().copied().unwrap_or(0)),
        bin_walk_cpu_mean_us: mean(
            bins.iter()
                .map(|b| b.iter().map(|p| p.walk_cpu_us as f64).sum()),
        ),
        sims_per_bin_mean: mean(
            bins.iter()
                .map(|b| b.iter().filter(|p| p.sim.is_some()).count() as f64),
        ),
        bin_span_sequential_us: (
            mean(spans.iter().map(|&s| s as f64)),
            spans.iter().copied().max().unwrap_or(0),
        ),
        bin_span_one_in_flight_us: (
            mean(piped.iter().map(|&s| s as f64)),
            piped.iter().copied().max().unwrap_or(0),
        ),
        resolve_mean_us: mean(c.cycles.iter().map(|cy| cy.resolve_cpu_us as f64)),
        poolupd_mean_us: mean(c.cycles.iter().map(|cy| cy.poolupd_cpu_us as f64)),
    }
}

/// Recomputes every outcome and every bin; `file` names the corpus in errors.
pub(super) fn verify(c: &Corpus, file: &Path) -> Result<VerifyReport, CorpusError> {
    let mut pools = c.pools.clone();
    let (mut solved, mut suppressed, mut failed, mut paths, mut swaps) = (0, 0, 0, 0, 0);
    for cy in &c.cycles {
        pools.apply(&cy.swaps);
        swaps += cy.swaps.len();
        for p in &cy.paths {
            let got = solve_path(&pools, p, c.header.profit_threshold);
            if got != p.expected {
                return Err(CorpusError::OutcomeMismatch {
                    file: file.into(),
                    cycle: cy.index,
                    path: p.id,
                    recorded: Box::new(p.expected),
                    recomputed: Box::new(got),
                });
            }
            match got {
                PathOutcome::Solved { .. } => solved += 1,
                PathOutcome::Suppressed => suppressed += 1,
                PathOutcome::Failed { .. } => failed += 1,
            }
            paths += 1;
        }
        let costs: Vec<u64> = cy.paths.iter().map(PathCase::cost_us).collect();
        let want = lpt::partition(&costs, BINS);
        if want != cy.bins {
            return Err(CorpusError::BinsMismatch {
                file: file.into(),
                cycle: cy.index,
                recorded: cy.bins.clone(),
                recomputed: want,
            });
        }
    }
    Ok(VerifyReport {
        cycles: c.cycles.len(),
        paths,
        solved,
        suppressed,
        failed,
        swaps,
        stats: stats(c),
    })
}
