//! The host floor in a comparison: each round, beside the contenders and
//! in the same rotation, the host's own work runs alone on the same
//! arrivals ([`crate::lab::floor`]). The rounds' block then shows what the
//! host gives any thread (the floor's co-tenant p99) and each
//! contender's co-tenant p99 over it, paired per round, and says when
//! every baseline sits at the floor: then the host, not the contenders,
//! sets the co-tenant's tail, and a ratio between contenders says little
//! about them (decision 0033).

use serde::{Deserialize, Serialize};

use crate::compare_rounds::spread;
use crate::lab::floor::{FloorFigures, FLOOR_LABEL};
use crate::report::RunReport;

/// A baseline whose co-tenant p99 is at most this many times the floor's
/// (the median of its paired per-round ratios) sits at the floor: it adds
/// at most half again to what the host gives a thread with nothing else
/// running.
pub const AT_FLOOR_MAX: f64 = 1.5;

/// The floor of one round (what `compare.json` keeps, under `host_floor`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloorRound {
    /// The round, from 1.
    pub round: u32,
    /// Where in the round it ran, from 1.
    pub position: u32,
    /// The co-tenant probe's wake-up lateness p50, µs (`None` with the
    /// co-tenant off).
    pub probe_p50_us: Option<f64>,
    /// The probe's p99, µs.
    pub probe_p99_us: Option<f64>,
    /// The probe's largest lateness, µs.
    pub probe_max_us: Option<f64>,
    /// The reserve load's completion lateness p99, µs (`None` unless the
    /// co-tenant is on).
    pub reserve_p99_us: Option<f64>,
    /// Other processes' CPUs over the floor's span.
    pub other_cpus: Option<f64>,
    /// How long the floor ran, seconds.
    pub wall_s: f64,
}

impl FloorRound {
    /// The compact figures of one round's floor (`round` and `position`
    /// from 1).
    pub fn of(round: u32, position: u32, f: &FloorFigures) -> Self {
        FloorRound {
            round,
            position,
            probe_p50_us: f.cotenant.probe.map(|l| l.p50),
            probe_p99_us: f.cotenant.probe.map(|l| l.p99),
            probe_max_us: f.cotenant.probe.map(|l| l.max),
            reserve_p99_us: f.cotenant.reserve.map(|l| l.p99),
            other_cpus: f.other_cpus,
            wall_s: f.wall_s,
        }
    }
}

/// Each round's ratio of `label`'s co-tenant p99 to that round's floor
/// (rounds with either missing, or a zero floor, are left out).
/// `rounds[r]` and `floors[r]` are round `r`'s.
pub fn over_floor(rounds: &[Vec<RunReport>], floors: &[FloorRound], label: &str) -> Vec<f64> {
    rounds
        .iter()
        .zip(floors)
        .filter_map(|(runs, f)| {
            let floor = f.probe_p99_us.filter(|v| *v > 0.0)?;
            let run = runs.iter().find(|r| r.label == label)?;
            Some(run.cotenant_lateness_us?.p99 / floor)
        })
        .collect()
}

/// The block printed after the rounds' medians: the floor's figures over
/// rounds, every contender's co-tenant p99 ÷ the floor, and the note when
/// every baseline sits at the floor. Empty without floors or without a
/// probe.
pub fn render_floor(rounds: &[Vec<RunReport>], floors: &[FloorRound]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let p99: Vec<f64> = floors.iter().filter_map(|f| f.probe_p99_us).collect();
    let (Some(p99), Some(first)) = (spread(&p99), rounds.first()) else {
        return out;
    };
    let p50: Vec<f64> = floors.iter().filter_map(|f| f.probe_p50_us).collect();
    let p50 = spread(&p50).map_or("-".into(), |s| format!("{s:.0}"));
    let _ = writeln!(
        out,
        "The {FLOOR_LABEL} (the host's own work alone on the same arrivals, no contender; in the rotation): co-tenant p50 {p50} µs, p99 {p99:.0} µs"
    );
    let _ = writeln!(
        out,
        "Paired per round, each contender's co-tenant p99 ÷ the {FLOOR_LABEL}, median (min–max):"
    );
    let mut baselines_at_floor = Vec::new();
    for run in first {
        let s = spread(&over_floor(rounds, floors, &run.label));
        let shown = s.map_or("-".into(), |s| format!("{s:.2}"));
        let _ = writeln!(out, "  {:<16} {shown}", run.label);
        if run.profile == "baseline" {
            baselines_at_floor.push(s.is_some_and(|s| s.median <= AT_FLOOR_MAX));
        }
    }
    if !baselines_at_floor.is_empty() && baselines_at_floor.iter().all(|b| *b) {
        let _ = writeln!(
            out,
            "  every baseline's co-tenant p99 is within {AT_FLOOR_MAX}× the {FLOOR_LABEL}: the host's wake-up latency, not the contenders, sets the co-tenant's tail here (decision 0033)"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::Lateness;

    fn run(label: &str, profile: &str, co_p99: Option<f64>) -> RunReport {
        let mut r = crate::compare_gate::tests::run(label, profile == "baseline", 50.0, 0.0);
        r.cotenant_lateness_us = co_p99.map(|p99| Lateness {
            p99,
            ..Default::default()
        });
        r
    }

    fn floor(round: u32, p99: Option<f64>) -> FloorRound {
        FloorRound {
            round,
            position: 1,
            probe_p50_us: p99.map(|v| v / 10.0),
            probe_p99_us: p99,
            probe_max_us: p99,
            reserve_p99_us: None,
            other_cpus: Some(0.0),
            wall_s: 1.0,
        }
    }

    fn rounds(fleet: [f64; 3], base: [f64; 3]) -> Vec<Vec<RunReport>> {
        (0..3)
            .map(|i| {
                vec![
                    run("fleet auto", "auto", Some(fleet[i])),
                    run("plain tokio", "baseline", Some(base[i])),
                ]
            })
            .collect()
    }

    #[test]
    fn the_ratio_to_the_floor_is_paired_per_round_and_skips_what_is_missing() {
        let r = rounds([200.0, 300.0, 400.0], [1000.0, 1000.0, 1000.0]);
        let f = vec![floor(1, Some(100.0)), floor(2, None), floor(3, Some(0.0))];
        assert_eq!(over_floor(&r, &f, "fleet auto"), vec![2.0]);
        assert_eq!(over_floor(&r, &f, "plain tokio"), vec![10.0]);
        assert!(over_floor(&r, &f, "nobody").is_empty());
        // Fewer floors than rounds: the rounds without one are left out.
        assert_eq!(over_floor(&r, &f[..1], "fleet auto"), vec![2.0]);
    }

    #[test]
    fn the_note_says_so_only_when_every_baseline_sits_at_the_floor() {
        let f: Vec<FloorRound> = (1..=3).map(|i| floor(i, Some(1000.0))).collect();
        // Baselines at 1.2× the floor: at the floor.
        let at = render_floor(&rounds([1100.0; 3], [1200.0; 3]), &f);
        assert!(at.contains("p99 1000 (1000–1000) µs"), "{at}");
        assert!(at.contains("plain tokio      1.20 (1.20–1.20)"), "{at}");
        assert!(at.contains("sets the co-tenant's tail"), "{at}");
        // At exactly the limit, still at the floor; above it, not.
        let edge = render_floor(&rounds([1100.0; 3], [1500.0; 3]), &f);
        assert!(edge.contains("sets the co-tenant's tail"), "{edge}");
        let above = render_floor(&rounds([300.0; 3], [1600.0; 3]), &f);
        assert!(!above.contains("sets the co-tenant's tail"), "{above}");
        assert!(above.contains("fleet auto       0.30"), "{above}");
    }

    #[test]
    fn nothing_is_printed_without_a_floor_or_a_probe() {
        let r = rounds([1.0; 3], [1.0; 3]);
        assert_eq!(render_floor(&r, &[]), "");
        let none: Vec<FloorRound> = (1..=3).map(|i| floor(i, None)).collect();
        assert_eq!(render_floor(&r, &none), "");
        assert_eq!(render_floor(&[], &[floor(1, Some(5.0))]), "");
    }

    #[test]
    fn a_floor_round_keeps_the_figures_of_its_run() {
        let figures = FloorFigures {
            cotenant: crate::lab::cotenant::CoTenantFigures {
                probe: Some(Lateness {
                    p50: 12.0,
                    p99: 900.0,
                    p999: 1500.0,
                    max: 2000.0,
                    count: 10,
                }),
                ..Default::default()
            },
            other_cpus: Some(0.25),
            wall_s: 14.0,
        };
        let r = FloorRound::of(2, 3, &figures);
        assert_eq!(
            (
                r.round,
                r.position,
                r.probe_p50_us,
                r.probe_p99_us,
                r.probe_max_us
            ),
            (2, 3, Some(12.0), Some(900.0), Some(2000.0))
        );
        assert_eq!(
            (r.reserve_p99_us, r.other_cpus, r.wall_s),
            (None, Some(0.25), 14.0)
        );
        let back: FloorRound = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
