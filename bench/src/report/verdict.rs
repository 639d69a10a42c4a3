//! Who won: plain sentences derived from the compare figures, and the
//! legend of the compare table's abbreviations.
//!
//! [`verdict`] is a pure function of [`Figures`], so every sentence can be
//! checked on constructed figures (ties, missing values); `compare` prints
//! it under its table and the page states it at the top.

use super::model::RunReport;
use super::summary::{fmt_ms, COLUMNS};

/// The figures the verdict is derived from, for one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    /// The run's label.
    pub label: String,
    /// True for a fleet run, false for a design the fleet replaces.
    pub fleet: bool,
    /// Cycle makespan p99, ms (`None`: no cycle was measured).
    pub cycle_p99_ms: Option<f64>,
    /// The co-tenant probe's wake-up lateness p99 while the run lasted, µs
    /// (`None`: not measured).
    pub cotenant_p99_us: Option<f64>,
    /// The co-tenant reserve burst's completion lateness p99, µs (`None`:
    /// no reserve load ran).
    pub reserve_p99_us: Option<f64>,
    /// How late the last cycle started when the run ended saturated, ms
    /// (`None`: it kept up).
    pub saturated_late_ms: Option<f64>,
    /// Most threads alive at once (`None`: threads were not sampled).
    pub peak_threads: Option<u64>,
    /// CPU seconds the run used (`None`: not measured).
    pub cpu_seconds: Option<f64>,
    /// Whether every outcome equalled the golden one.
    pub parity: bool,
}

impl Figures {
    /// The figures of a report. A run with no cycles has no tail; a peak of
    /// 0 threads means the sampler did not run (a process has at least one
    /// thread). Co-tenant latency is `None` when the run had no probe.
    pub fn of(r: &RunReport) -> Figures {
        Figures {
            label: r.label.clone(),
            fleet: r.profile != "baseline",
            cycle_p99_ms: (r.makespan_ms.count > 0).then_some(r.makespan_ms.p99),
            cotenant_p99_us: r.cotenant_lateness_us.map(|l| l.p99),
            reserve_p99_us: r.reserve_task_lateness_us.map(|l| l.p99),
            saturated_late_ms: r.saturation.map(|s| s.last_late_ms),
            peak_threads: (r.threads.peak > 0).then_some(r.threads.peak),
            cpu_seconds: (r.cpu_seconds > 0.0).then_some(r.cpu_seconds),
            parity: r.parity,
        }
    }
}

/// Joins names as `a`, `a and b`, `a, b and c`.
fn names(list: &[&str]) -> String {
    match list {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The runs with the lowest value of `key` (by its shown text, so runs the
/// table shows as equal tie), and that text; `None` when no run has one.
fn lowest<'a>(
    runs: &[&'a Figures],
    key: impl Fn(&Figures) -> Option<f64>,
    show: impl Fn(f64) -> String,
) -> Option<(Vec<&'a str>, String)> {
    let best = runs
        .iter()
        .filter_map(|f| key(f))
        .min_by(|a, b| a.total_cmp(b))?;
    let shown = show(best);
    let winners = runs
        .iter()
        .filter(|f| key(f).is_some_and(|v| show(v) == shown))
        .map(|f| f.label.as_str())
        .collect();
    Some((winners, shown))
}

/// One "best X" sentence: the winner, or the tie; the runs without the
/// figure are named.
fn best_sentence(
    what: &str,
    runs: &[&Figures],
    key: impl Fn(&Figures) -> Option<f64>,
    show: impl Fn(f64) -> String,
    none: &str,
) -> String {
    let missing: Vec<&str> = runs
        .iter()
        .filter(|f| key(f).is_none())
        .map(|f| f.label.as_str())
        .collect();
    let Some((winners, shown)) = lowest(runs, &key, &show) else {
        return none.to_string();
    };
    let mut s = if winners.len() == 1 {
        format!("{what}: {} ({shown}).", winners[0])
    } else {
        format!("{what}: a tie between {} ({shown} each).", names(&winners))
    };
    if !missing.is_empty() {
        s.pop();
        s.push_str(&format!("; not measured for {}.", names(&missing)));
    }
    s
}

/// `a / b` as `0.85×`, or `None` when `b` is not positive.
fn times(a: f64, b: f64) -> Option<String> {
    (b > 0.0).then(|| format!("{:.2}×", a / b))
}

/// The fleet run against one contender: its cycle p99, peak threads and
/// CPU as ratios of the contender's (below 1 is better for the fleet).
fn against(fleet: &Figures, other: &Figures) -> String {
    let mut parts = Vec::new();
    match (fleet.cycle_p99_ms, other.cycle_p99_ms) {
        (Some(a), Some(b)) => match times(a, b) {
            Some(r) => parts.push(format!("cycle p99 {r} ({} vs {} ms)", fmt_ms(a), fmt_ms(b))),
            None => parts.push("cycle p99 not comparable (0 ms)".to_string()),
        },
        _ => parts.push("no cycle p99 to compare".to_string()),
    }
    if let (Some(a), Some(b)) = (fleet.cotenant_p99_us, other.cotenant_p99_us) {
        if let Some(r) = times(a, b) {
            parts.push(format!("co-tenant p99 {r} ({a:.0} vs {b:.0} µs)"));
        }
    }
    match (fleet.peak_threads, other.peak_threads) {
        (Some(a), Some(b)) => {
            if let Some(r) = times(a as f64, b as f64) {
                parts.push(format!("peak threads {r} ({a} vs {b})"));
            }
        }
        _ => parts.push("no thread counts to compare".to_string()),
    }
    if let (Some(a), Some(b)) = (fleet.cpu_seconds, other.cpu_seconds) {
        if let Some(r) = times(a, b) {
            parts.push(format!("CPU {r}"));
        }
    }
    let saturated: Vec<&str> = [fleet, other]
        .iter()
        .filter(|f| f.saturated_late_ms.is_some())
        .map(|f| f.label.as_str())
        .collect();
    if !saturated.is_empty() {
        parts.push(format!(
            "but {} saturated, so its tail measures its backlog",
            names(&saturated)
        ));
    }
    format!(
        "{} against {}: {}.",
        fleet.label,
        other.label,
        parts.join(", ")
    )
}

/// The verdict on several runs, as plain sentences in a fixed order: runs
/// left out for failing parity; saturated runs (which then win nothing:
/// their figures measure their backlog); the best cycle tail (lowest
/// makespan p99); the best co-tenant probe latency, or that it was not
/// measured; the best reserve-load latency where one ran; the fewest
/// threads (lowest peak alive); then the first fleet run against each
/// design it replaces, as ratios (below 1 favours the fleet). Values the
/// table shows as equal are ties. Empty for no runs.
pub fn verdict(runs: &[Figures]) -> Vec<String> {
    if runs.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let failed: Vec<&str> = runs
        .iter()
        .filter(|f| !f.parity)
        .map(|f| f.label.as_str())
        .collect();
    if !failed.is_empty() {
        out.push(format!(
            "Left out of the verdict for failing parity: {}.",
            names(&failed)
        ));
    }
    let saturated: Vec<String> = runs
        .iter()
        .filter_map(|f| {
            f.saturated_late_ms
                .map(|ms| format!("{} (last cycle {} ms late)", f.label, fmt_ms(ms)))
        })
        .collect();
    if !saturated.is_empty() {
        let list: Vec<&str> = saturated.iter().map(String::as_str).collect();
        out.push(format!(
            "Saturated (the late-cycle backlog kept growing to the end; its tail measures the backlog): {}.",
            names(&list)
        ));
    }
    let eligible: Vec<&Figures> = runs.iter().filter(|f| f.parity).collect();
    if eligible.is_empty() {
        out.push("No run kept parity: there is no winner.".to_string());
        return out;
    }
    // A saturated run wins nothing: its figures measure its backlog.
    let contenders: Vec<&Figures> = eligible
        .iter()
        .copied()
        .filter(|f| f.saturated_late_ms.is_none())
        .collect();
    let contenders = if contenders.is_empty() {
        out.push("Every run saturated: there is no winner.".to_string());
        return out;
    } else {
        contenders
    };
    out.push(best_sentence(
        "Best cycle tail (lowest makespan p99)",
        &contenders,
        |f| f.cycle_p99_ms,
        |v| format!("{} ms", fmt_ms(v)),
        "Best cycle tail: no run measured a cycle.",
    ));
    out.push(best_sentence(
        "Best co-tenant probe latency (lowest wake-up p99)",
        &contenders,
        |f| f.cotenant_p99_us,
        |v| format!("{v:.0} µs"),
        "Co-tenant latency was not measured in these runs.",
    ));
    if contenders.iter().any(|f| f.reserve_p99_us.is_some()) {
        out.push(best_sentence(
            "Best reserve-load latency (lowest completion p99)",
            &contenders,
            |f| f.reserve_p99_us,
            |v| format!("{v:.0} µs"),
            "",
        ));
    }
    out.push(best_sentence(
        "Fewest threads (lowest peak alive)",
        &contenders,
        |f| f.peak_threads.map(|t| t as f64),
        |v| format!("{v:.0} threads"),
        "Fewest threads: no run sampled its threads.",
    ));
    let fleet = eligible.iter().find(|f| f.fleet);
    let others: Vec<&&Figures> = eligible.iter().filter(|f| !f.fleet).collect();
    match (fleet, others.is_empty()) {
        (Some(fleet), false) => {
            for other in others {
                out.push(against(fleet, other));
            }
        }
        (Some(_), true) => {
            out.push("No design the fleet replaces ran: nothing to set the fleet against.".into())
        }
        (None, _) => out.push("No fleet run kept parity: no fleet ratios.".into()),
    }
    out
}

/// The legend of the compare table: `header: meaning` for every column.
pub fn legend() -> Vec<String> {
    COLUMNS
        .iter()
        .map(|c| format!("{}: {}", c.header, c.meaning))
        .collect()
}

/// The verdict and legend as terminal text: a `Verdict:` block of
/// sentences (for two or more runs), then a `Columns:` legend.
pub fn render_verdict(runs: &[RunReport]) -> String {
    let mut s = String::new();
    if runs.len() > 1 {
        s.push_str("\nVerdict:\n");
        for line in verdict(&runs.iter().map(Figures::of).collect::<Vec<_>>()) {
            s.push_str("  ");
            s.push_str(&line);
            s.push('\n');
        }
    }
    s.push_str("\nColumns:\n");
    for line in legend() {
        s.push_str("  ");
        s.push_str(&line);
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(label: &str, fleet: bool, p99: Option<f64>, threads: Option<u64>) -> Figures {
        Figures {
            label: label.into(),
            fleet,
            cycle_p99_ms: p99,
            cotenant_p99_us: None,
            reserve_p99_us: None,
            saturated_late_ms: None,
            peak_threads: threads,
            cpu_seconds: Some(10.0),
            parity: true,
        }
    }

    #[test]
    fn a_clear_winner_and_ratios_against_each_contender() {
        let runs = [
            fig("fleet auto", true, Some(75.0), Some(12)),
            fig("fleet pinned", true, Some(150.0), Some(14)),
            fig("pile of pools", false, Some(63.3), Some(40)),
            fig("plain tokio", false, Some(52.4), Some(12)),
        ];
        let v = verdict(&runs);
        assert_eq!(
            v,
            [
                "Best cycle tail (lowest makespan p99): plain tokio (52.4 ms).",
                "Co-tenant latency was not measured in these runs.",
                "Fewest threads (lowest peak alive): a tie between fleet auto and plain tokio (12 threads each).",
                "fleet auto against pile of pools: cycle p99 1.18× (75.0 vs 63.3 ms), peak threads 0.30× (12 vs 40), CPU 1.00×.",
                "fleet auto against plain tokio: cycle p99 1.43× (75.0 vs 52.4 ms), peak threads 1.00× (12 vs 12), CPU 1.00×.",
            ]
        );
    }

    #[test]
    fn ties_are_decided_by_the_shown_value() {
        let runs = [
            fig("a", true, Some(52.41), Some(3)),
            fig("b", false, Some(52.44), Some(4)),
            fig("c", false, Some(52.6), Some(5)),
        ];
        let v = verdict(&runs);
        assert_eq!(
            v[0],
            "Best cycle tail (lowest makespan p99): a tie between a and b (52.4 ms each)."
        );
        assert_eq!(v[2], "Fewest threads (lowest peak alive): a (3 threads).");
    }

    #[test]
    fn missing_values_are_named_and_never_win() {
        let mut runs = vec![
            fig("fleet auto", true, None, None),
            fig("pile of pools", false, Some(60.0), None),
            fig("plain tokio", false, Some(50.0), None),
        ];
        runs[1].cotenant_p99_us = Some(200.0);
        runs[0].cotenant_p99_us = Some(100.0);
        let v = verdict(&runs);
        assert_eq!(
            v[0],
            "Best cycle tail (lowest makespan p99): plain tokio (50.0 ms); not measured for fleet auto."
        );
        assert_eq!(
            v[1],
            "Best co-tenant probe latency (lowest wake-up p99): fleet auto (100 µs); not measured for plain tokio."
        );
        assert_eq!(v[2], "Fewest threads: no run sampled its threads.");
        assert_eq!(
            v[3],
            "fleet auto against pile of pools: no cycle p99 to compare, co-tenant p99 0.50× (100 vs 200 µs), no thread counts to compare, CPU 1.00×."
        );
    }

    #[test]
    fn a_saturated_run_is_named_with_how_late_it_ended() {
        let mut runs = vec![
            fig("fleet auto", true, Some(900.0), Some(10)),
            fig("plain tokio", false, Some(60.0), Some(12)),
        ];
        runs[0].saturated_late_ms = Some(1234.0);
        let v = verdict(&runs);
        assert_eq!(
            v[0],
            "Saturated (the late-cycle backlog kept growing to the end; its tail measures the backlog): fleet auto (last cycle 1234 ms late)."
        );
        // It wins nothing, and its ratios say why they are what they are.
        assert_eq!(
            v[1],
            "Best cycle tail (lowest makespan p99): plain tokio (60.0 ms)."
        );
        assert_eq!(
            v[3],
            "Fewest threads (lowest peak alive): plain tokio (12 threads)."
        );
        assert!(
            v[4].ends_with("but fleet auto saturated, so its tail measures its backlog."),
            "{}",
            v[4]
        );
        runs[0].saturated_late_ms = None;
        assert!(!verdict(&runs).iter().any(|l| l.starts_with("Saturated")));
        runs[1].saturated_late_ms = Some(10.0);
        runs[0].saturated_late_ms = Some(10.0);
        assert_eq!(
            verdict(&runs)[1],
            "Every run saturated: there is no winner."
        );
    }

    #[test]
    fn the_reserve_load_has_its_own_sentence_when_it_ran() {
        let mut runs = vec![
            fig("fleet auto", true, Some(70.0), Some(10)),
            fig("pile of pools", false, Some(60.0), Some(12)),
        ];
        assert!(!verdict(&runs).iter().any(|l| l.contains("reserve")));
        runs[0].reserve_p99_us = Some(900.0);
        runs[1].reserve_p99_us = Some(400.0);
        let v = verdict(&runs);
        assert_eq!(
            v[2],
            "Best reserve-load latency (lowest completion p99): pile of pools (400 µs)."
        );
    }

    #[test]
    fn parity_failures_are_left_out_and_fleet_only_runs_say_so() {
        let mut runs = vec![
            fig("fleet auto", true, Some(70.0), Some(10)),
            fig("fleet pinned", true, Some(60.0), Some(12)),
        ];
        runs[1].parity = false;
        let v = verdict(&runs);
        assert_eq!(
            v,
            [
                "Left out of the verdict for failing parity: fleet pinned.",
                "Best cycle tail (lowest makespan p99): fleet auto (70.0 ms).",
                "Co-tenant latency was not measured in these runs.",
                "Fewest threads (lowest peak alive): fleet auto (10 threads).",
                "No design the fleet replaces ran: nothing to set the fleet against.",
            ]
        );
        runs[0].parity = false;
        assert_eq!(verdict(&runs)[1], "No run kept parity: there is no winner.");
        assert!(verdict(&[]).is_empty());
        let baselines = [fig("plain tokio", false, Some(1.0), Some(1))];
        assert_eq!(
            verdict(&baselines).last().unwrap(),
            "No fleet run kept parity: no fleet ratios."
        );
    }

    #[test]
    fn a_zero_tail_cannot_be_a_ratio_denominator() {
        let runs = [
            fig("fleet auto", true, Some(5.0), Some(2)),
            fig("x", false, Some(0.0), Some(2)),
        ];
        assert!(verdict(&runs)[3].contains("cycle p99 not comparable (0 ms)"));
    }

    #[test]
    fn the_legend_explains_every_column() {
        let l = legend();
        assert_eq!(l.len(), COLUMNS.len());
        assert!(l
            .iter()
            .all(|line| line.len() > line.find(':').unwrap() + 5));
        assert!(l.iter().any(|line| line.starts_with("/proc lb p99: ")));
        assert!(l.iter().any(|line| line.starts_with("/plan lb p99: ")));
        assert!(l.iter().any(|line| line.starts_with("oor: ")));
    }
}
