//! The comparison's fleet paired against a reference build, round by round.
//!
//! The comparison's standing (the fleet against the baselines) moves with
//! the host, so CI reports it ([`crate::compare_gate::Standing`]); what
//! CI gates is whether the fleet got worse. With `[compare.reference]` in
//! the budgets, every round of `fleet-lab compare --gate --reference BUILD`
//! also runs one block of fleet auto on this build and one on the
//! reference build, in the comparison's own shape (its scale, cycles,
//! rate, co-tenant and lending), as `fleet-lab blocks` servers
//! ([`crate::paired`]): both arms are child processes, booted afresh for
//! each block. Each round runs two blocks of each arm in a mirrored order,
//! C R R C (R C C R the next round), so neither arm has the block right
//! after the round's in-process contenders more often than the other (with
//! one pair per round, C R, R C, C R … over 5 rounds gave the candidate
//! that place 3 times of 5). The round's figures are the means of its two
//! blocks per arm. The rounds' ratios candidate ÷ reference (mean cycle
//! makespan, and the co-tenant probe's p99 lateness) are judged by the exact one-sided sign
//! test at the `[compare]` level: with 5 rounds at alpha 0.05 a figure
//! fails when all 5 rounds are above its tolerance (docs/gates.md "The
//! comparison").

use serde::{Deserialize, Serialize};

use crate::gate::Breach;
use crate::paired::{
    pair_order, Arm, BlockFigures, BlockServer, Pair, ServerError, SignTest, SignVerdict,
};

/// `[compare.reference]`: the tolerances the paired rounds are judged by,
/// and the length of their blocks.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ReferenceTolerances {
    /// Tolerated candidate ÷ reference mean cycle makespan (> 1; 1.05
    /// tolerates 5 %).
    pub makespan_tolerance: f64,
    /// Tolerated candidate ÷ reference co-tenant probe p99 (> 1).
    pub cotenant_tolerance: f64,
    /// Cycles of each paired block (1..=100,000), the length the
    /// tolerances were measured at; absent, the comparison's own
    /// `--cycles`. It lets the in-process contenders run shorter than the
    /// gated pairs (docs/gates.md "The comparison").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_cycles: Option<u32>,
}

impl ReferenceTolerances {
    /// Refuses a tolerance that is not a finite number above 1 (at or
    /// below 1, unchanged code fails half its rounds).
    pub fn validate(&self) -> Result<(), String> {
        for (key, v) in [
            ("makespan_tolerance", self.makespan_tolerance),
            ("cotenant_tolerance", self.cotenant_tolerance),
        ] {
            if !(v.is_finite() && v > 1.0) {
                return Err(format!(
                    "[compare.reference] {key} {v} must be a finite number above 1"
                ));
            }
        }
        match self.block_cycles {
            Some(n) if !(1..=100_000).contains(&n) => Err(format!(
                "[compare.reference] block_cycles {n} must be 1..=100000"
            )),
            _ => Ok(()),
        }
    }
}

/// The two block servers of the paired rounds and the pairs so far.
pub struct RoundPairs {
    candidate: BlockServer,
    reference: BlockServer,
    pairs: Vec<Pair>,
}

impl RoundPairs {
    /// Starts both servers (each loads the corpus and says it is ready).
    pub fn start(candidate: BlockServer, reference: BlockServer) -> Self {
        RoundPairs {
            candidate,
            reference,
            pairs: Vec::new(),
        }
    }

    /// Runs round `round`'s four blocks in their mirrored order (C R R C,
    /// or R C C R) and keeps the round as one pair of the arms' means.
    ///
    /// # Errors
    /// A server that fails a block, exits or speaks another protocol.
    pub fn measure(&mut self, round: u32) -> Result<&Pair, ServerError> {
        let order = pair_order(round);
        let (mut c, mut r) = (Vec::new(), Vec::new());
        for arm in order.iter().chain(order.iter().rev()) {
            match arm {
                Arm::Candidate => c.push(self.candidate.block()?),
                Arm::Reference => r.push(self.reference.block()?),
            }
        }
        self.pairs.push(Pair {
            first: order[0],
            candidate: mean_block(&c),
            reference: mean_block(&r),
        });
        Ok(self.pairs.last().expect("just pushed"))
    }

    /// The pairs, in round order (the servers are stopped).
    pub fn finish(self) -> Vec<Pair> {
        self.pairs
    }
}

/// One arm's blocks of a round as one: the means of the timed figures
/// (the co-tenant p99 only where every block has one), the sums of the
/// counts, parity only if every block's held, saturated if any block was.
pub fn mean_block(blocks: &[BlockFigures]) -> BlockFigures {
    let n = blocks.len().max(1) as f64;
    let mean = |f: fn(&BlockFigures) -> f64| blocks.iter().map(f).sum::<f64>() / n;
    let first = blocks.first().cloned().unwrap_or_else(|| BlockFigures {
        label: String::new(),
        cycles: 0,
        makespan_mean_ms: f64::NAN,
        makespan_p50_ms: f64::NAN,
        makespan_max_ms: f64::NAN,
        over_lower_bound_mean: f64::NAN,
        parity: false,
        saturated: true,
        threads_created: 0,
        histograms_out_of_range: 0,
        throttled_share: None,
        throttle_in_lab_cgroup: false,
        cotenant_p99_us: None,
        cpu_seconds: 0.0,
        wall_seconds: 0.0,
    });
    if blocks.is_empty() {
        return first;
    }
    let cotenant: Option<Vec<f64>> = blocks.iter().map(|b| b.cotenant_p99_us).collect();
    BlockFigures {
        label: first.label,
        cycles: blocks.iter().map(|b| b.cycles).sum(),
        makespan_mean_ms: mean(|b| b.makespan_mean_ms),
        makespan_p50_ms: mean(|b| b.makespan_p50_ms),
        makespan_max_ms: blocks
            .iter()
            .map(|b| b.makespan_max_ms)
            .fold(f64::MIN, f64::max),
        over_lower_bound_mean: mean(|b| b.over_lower_bound_mean),
        parity: blocks.iter().all(|b| b.parity),
        saturated: blocks.iter().any(|b| b.saturated),
        threads_created: blocks.iter().map(|b| b.threads_created).sum(),
        histograms_out_of_range: blocks.iter().map(|b| b.histograms_out_of_range).sum(),
        throttled_share: None,
        throttle_in_lab_cgroup: false,
        cotenant_p99_us: cotenant.map(|v| v.iter().sum::<f64>() / v.len() as f64),
        cpu_seconds: blocks.iter().map(|b| b.cpu_seconds).sum(),
        wall_seconds: blocks.iter().map(|b| b.wall_seconds).sum(),
    }
}

/// Candidate ÷ reference co-tenant probe p99; NaN when either block has
/// no probe figure or the reference's is 0 (the sign test counts a NaN
/// as above the tolerance, so a broken measurement cannot pass).
pub fn cotenant_ratio(p: &Pair) -> f64 {
    match (p.candidate.cotenant_p99_us, p.reference.cotenant_p99_us) {
        (Some(c), Some(r)) if r > 0.0 => c / r,
        _ => f64::NAN,
    }
}

/// The paired rounds' figures and verdicts, as `paired.json` keeps them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairedRounds {
    /// The tolerances judged by.
    pub tolerances: ReferenceTolerances,
    /// The sign test's level.
    pub alpha: f64,
    /// Each round's pair.
    pub pairs: Vec<Pair>,
    /// Each round's candidate ÷ reference mean makespan.
    pub makespan_ratios: Vec<f64>,
    /// Each round's candidate ÷ reference co-tenant p99.
    pub cotenant_ratios: Vec<f64>,
    /// The sign test on the makespan ratios.
    pub makespan: SignVerdict,
    /// The sign test on the co-tenant ratios.
    pub cotenant: SignVerdict,
}

/// Judges the rounds' pairs: a breach for each figure the sign test fails
/// and for a block whose outcomes differ from the golden corpus or whose
/// backlog grew to its end, on either arm.
pub fn judge(pairs: Vec<Pair>, t: ReferenceTolerances, alpha: f64) -> (Vec<Breach>, PairedRounds) {
    let makespan_ratios: Vec<f64> = pairs.iter().map(Pair::ratio).collect();
    let cotenant_ratios: Vec<f64> = pairs.iter().map(cotenant_ratio).collect();
    let makespan = SignTest {
        tolerance: t.makespan_tolerance,
        alpha,
    }
    .judge(&makespan_ratios);
    let cotenant = SignTest {
        tolerance: t.cotenant_tolerance,
        alpha,
    }
    .judge(&cotenant_ratios);
    let mut out = Vec::new();
    for (key, v, tol) in [
        (
            "reference.makespan_tolerance",
            &makespan,
            t.makespan_tolerance,
        ),
        (
            "reference.cotenant_tolerance",
            &cotenant,
            t.cotenant_tolerance,
        ),
    ] {
        if v.fails {
            out.push(Breach {
                budget: key,
                detail: format!(
                    "fleet auto ÷ the reference's above {tol:.2}× in {} of {} rounds (median {:.3}, range {:.3}–{:.3}); sign test p = {:.4} ≤ alpha {alpha}",
                    v.above, v.pairs, v.median_ratio, v.min_ratio, v.max_ratio, v.p_value
                ),
            });
        }
    }
    for (i, p) in pairs.iter().enumerate() {
        for (arm, b) in [("candidate", &p.candidate), ("reference", &p.reference)] {
            if !b.parity {
                out.push(Breach {
                    budget: "reference.parity",
                    detail: format!(
                        "round {}: the {arm}'s block produced outcomes that differ from the golden corpus",
                        i + 1
                    ),
                });
            }
            if b.saturated {
                out.push(Breach {
                    budget: "reference.saturation",
                    detail: format!(
                        "round {}: the {arm}'s block saturated (its backlog grew to the end)",
                        i + 1
                    ),
                });
            }
        }
    }
    let rounds = PairedRounds {
        tolerances: t,
        alpha,
        pairs,
        makespan_ratios,
        cotenant_ratios,
        makespan,
        cotenant,
    };
    (out, rounds)
}

/// One line per figure: how many rounds were above the tolerance, the
/// ratios' median and range, and the sign test's p.
pub fn render(r: &PairedRounds) -> String {
    let mut s = String::new();
    for (what, v, tol) in [
        (
            "mean makespan",
            &r.makespan,
            r.tolerances.makespan_tolerance,
        ),
        (
            "co-tenant p99",
            &r.cotenant,
            r.tolerances.cotenant_tolerance,
        ),
    ] {
        s.push_str(&format!(
            "compare against the reference, {what}: {} of {} rounds above {tol:.2}× (median ratio {:.3}, range {:.3}–{:.3}); sign test p = {:.4}, fails at {} of {} (alpha {})\n",
            v.above,
            v.pairs,
            v.median_ratio,
            v.min_ratio,
            v.max_ratio,
            v.p_value,
            v.critical.map_or("-".to_string(), |c| c.to_string()),
            v.pairs,
            r.alpha
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(makespan: f64, cotenant: Option<f64>) -> BlockFigures {
        BlockFigures {
            label: "fleet auto".into(),
            cycles: 60,
            makespan_mean_ms: makespan,
            makespan_p50_ms: makespan,
            makespan_max_ms: makespan * 2.0,
            over_lower_bound_mean: 1.2,
            parity: true,
            saturated: false,
            threads_created: 0,
            histograms_out_of_range: 0,
            throttled_share: None,
            throttle_in_lab_cgroup: false,
            cotenant_p99_us: cotenant,
            cpu_seconds: 1.0,
            wall_seconds: 2.0,
        }
    }

    fn pair(c: f64, r: f64, cc: f64, rc: f64) -> Pair {
        Pair {
            first: Arm::Candidate,
            candidate: block(c, Some(cc)),
            reference: block(r, Some(rc)),
        }
    }

    const T: ReferenceTolerances = ReferenceTolerances {
        makespan_tolerance: 1.05,
        cotenant_tolerance: 1.5,
        block_cycles: None,
    };

    #[test]
    fn five_rounds_fail_only_when_every_round_is_above() {
        // Four of five rounds 1.5× slower, one within: p = 6/32 > 0.05.
        let mut pairs: Vec<Pair> = (0..4).map(|_| pair(150.0, 100.0, 300.0, 300.0)).collect();
        pairs.push(pair(101.0, 100.0, 300.0, 300.0));
        let (breaches, r) = judge(pairs.clone(), T, 0.05);
        assert!(breaches.is_empty(), "{breaches:?}");
        assert_eq!((r.makespan.above, r.makespan.critical), (4, Some(5)));
        // All five above: p = 1/32 ≤ 0.05, the makespan figure fails.
        pairs[4] = pair(150.0, 100.0, 300.0, 300.0);
        let (breaches, _) = judge(pairs, T, 0.05);
        assert_eq!(breaches.len(), 1, "{breaches:?}");
        assert_eq!(breaches[0].budget, "reference.makespan_tolerance");
        assert!(
            breaches[0].detail.contains("in 5 of 5 rounds"),
            "{}",
            breaches[0]
        );
    }

    #[test]
    fn the_cotenant_figure_is_judged_on_its_own_tolerance() {
        // 1.4× co-tenant lateness in every round: within 1.5.
        let pairs: Vec<Pair> = (0..5).map(|_| pair(100.0, 100.0, 420.0, 300.0)).collect();
        assert!(judge(pairs, T, 0.05).0.is_empty());
        let pairs: Vec<Pair> = (0..5).map(|_| pair(100.0, 100.0, 460.0, 300.0)).collect();
        let (b, r) = judge(pairs, T, 0.05);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].budget, "reference.cotenant_tolerance");
        assert!((r.cotenant.median_ratio - 460.0 / 300.0).abs() < 1e-12);
    }

    #[test]
    fn a_missing_probe_figure_cannot_pass() {
        let mut pairs: Vec<Pair> = (0..5).map(|_| pair(100.0, 100.0, 300.0, 300.0)).collect();
        for p in &mut pairs {
            p.reference.cotenant_p99_us = None;
        }
        assert!(cotenant_ratio(&pairs[0]).is_nan());
        let (b, _) = judge(pairs, T, 0.05);
        assert!(
            b.iter().any(|b| b.budget == "reference.cotenant_tolerance"),
            "{b:?}"
        );
        // A zero reference figure is no measurement either.
        let p = pair(100.0, 100.0, 300.0, 0.0);
        assert!(cotenant_ratio(&p).is_nan());
    }

    #[test]
    fn parity_and_saturation_of_either_arm_fail_in_any_round() {
        let mut pairs: Vec<Pair> = (0..5).map(|_| pair(100.0, 100.0, 300.0, 300.0)).collect();
        pairs[2].reference.parity = false;
        pairs[3].candidate.saturated = true;
        let (b, _) = judge(pairs, T, 0.05);
        let keys: Vec<&str> = b.iter().map(|b| b.budget).collect();
        assert_eq!(keys, ["reference.parity", "reference.saturation"]);
        assert!(
            b[0].detail.starts_with("round 3: the reference's"),
            "{}",
            b[0]
        );
        assert!(
            b[1].detail.starts_with("round 4: the candidate's"),
            "{}",
            b[1]
        );
    }

    #[test]
    fn no_pairs_fail_both_figures() {
        let (b, _) = judge(Vec::new(), T, 0.05);
        assert_eq!(b.len(), 2, "{b:?}");
    }

    #[test]
    fn a_rounds_blocks_merge_into_means_and_worst_cases() {
        let mut a = block(100.0, Some(200.0));
        let mut b = block(140.0, Some(400.0));
        b.saturated = true;
        a.threads_created = 1;
        let m = mean_block(&[a.clone(), b.clone()]);
        assert_eq!(
            (m.makespan_mean_ms, m.cotenant_p99_us),
            (120.0, Some(300.0))
        );
        assert_eq!((m.cycles, m.threads_created), (120, 1));
        assert!(m.saturated && m.parity);
        assert_eq!(m.makespan_max_ms, 280.0);
        // A block without a probe figure leaves the round without one.
        b.cotenant_p99_us = None;
        a.parity = false;
        let m = mean_block(&[a, b]);
        assert_eq!(m.cotenant_p99_us, None);
        assert!(!m.parity);
        // No blocks: nothing that could pass.
        let m = mean_block(&[]);
        assert!(m.makespan_mean_ms.is_nan() && !m.parity && m.saturated);
    }

    #[test]
    fn tolerances_at_or_below_one_are_refused() {
        assert!(T.validate().is_ok());
        for (m, c, n) in [
            (1.0, 1.5, None),
            (1.05, 0.9, None),
            (f64::NAN, 1.5, None),
            (1.05, f64::INFINITY, None),
            (1.05, 1.5, Some(0)),
            (1.05, 1.5, Some(100_001)),
        ] {
            let t = ReferenceTolerances {
                makespan_tolerance: m,
                cotenant_tolerance: c,
                block_cycles: n,
            };
            assert!(t.validate().is_err(), "{m} {c} {n:?}");
        }
        for n in [1, 60, 100_000] {
            let t = ReferenceTolerances {
                block_cycles: Some(n),
                ..T
            };
            assert!(t.validate().is_ok(), "{n}");
        }
    }

    #[test]
    fn the_summary_names_both_figures_and_the_fail_count() {
        let pairs: Vec<Pair> = (0..5).map(|_| pair(100.0, 100.0, 300.0, 300.0)).collect();
        let (_, r) = judge(pairs, T, 0.05);
        let s = render(&r);
        assert!(
            s.contains("mean makespan: 0 of 5 rounds above 1.05×"),
            "{s}"
        );
        assert!(
            s.contains("co-tenant p99: 0 of 5 rounds above 1.50×"),
            "{s}"
        );
        assert!(s.contains("fails at 5 of 5"), "{s}");
    }
}
