//! The figures of one simulated run (`report.json`): per contender, the
//! regret against the oracle, correct rows, trust separation, prices,
//! drift, politeness, budget, occupancy, work per decision and timing.
//! Source: `ROUTING.md` §5 (Figures). Every figure except [`Timing`] is a
//! pure function of the spec (the determinism test compares them).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ledger::LowerDevice;

/// The whole run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SimReport {
    /// Scenario name.
    pub scenario: String,
    /// What the scenario does.
    pub description: String,
    /// Seed.
    pub seed: u64,
    /// Devices simulated.
    pub devices: usize,
    /// Simulated hours.
    pub hours: f64,
    /// Router tick period, simulated seconds.
    pub tick_s: f64,
    /// Sampling period of the series, simulated seconds.
    pub sample_s: f64,
    /// The world in numbers.
    pub world: WorldSummary,
    /// One entry per contender, in [`super::Contender::ALL`] order.
    pub contenders: Vec<ContenderReport>,
    /// `adapter-bug` with the router among the contenders: the router's
    /// event figures on the control world, the same world and seed without
    /// the bug ([`super::World::without_bug`]). Trust that ends lower there
    /// was not lowered by the bug.
    #[serde(default)]
    pub control: Option<EventFigures>,
    /// Where the router ran: `in-process`, or `routerd over HTTP (sqlite)`
    /// / `(postgres)` ([`crate::Transport::label`]).
    #[serde(default)]
    pub transport: String,
}

/// The world in numbers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorldSummary {
    /// Sources.
    pub sources: usize,
    /// Targets.
    pub targets: usize,
    /// Devices per archetype.
    pub devices: BTreeMap<String, usize>,
    /// Lying devices.
    pub liars: usize,
    /// Devices that upgrade to the buggy adapter.
    pub buggy: usize,
    /// Sum of the hosts' politeness refill rates, grants per second.
    pub polite_rate: f64,
    /// Pool caps per price window (absent pools are uncapped).
    pub caps: BTreeMap<String, f64>,
    /// `[from, to)` of a scheduled event (drought, regime change, bug), seconds.
    pub event_s: Option<(f64, f64)>,
}

/// One point of the time series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Simulated time, seconds.
    pub t_s: f64,
    /// Cumulative regret in expected failures.
    pub regret_failures: f64,
    /// Cumulative regret in cloud cost (failure-equivalents; may be negative).
    pub regret_cost: f64,
    /// Executed attempts so far.
    pub attempts: u64,
    /// Share of settled rows whose hash is genuine (1 when none is settled).
    pub correct_fraction: f64,
    /// Share of settled rows whose hash is the content now.
    pub fresh_fraction: f64,
    /// Settled rows.
    pub settled: usize,
    /// Price λ per pool.
    pub prices: BTreeMap<String, f64>,
    /// Online devices per archetype (the world's truth).
    pub online: BTreeMap<String, usize>,
    /// Busy share of online device time since the previous sample.
    pub busy_share: f64,
    /// Politeness violations so far (grants over a host's true limit).
    #[serde(default)]
    pub violations: u64,
}

/// A drift detection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriftMark {
    /// Time, seconds.
    pub t_s: f64,
    /// Binding cell `source/binding`.
    pub cell: String,
    /// Archetype.
    pub option: String,
    /// Dimension.
    pub dimension: String,
    /// Whether it is a false alarm (no truth changed on that cell).
    pub false_alarm: bool,
}

/// A trust histogram (20 bins over [0, 1]) of honest and lying devices.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrustHistogram {
    /// Honest devices per bin.
    pub honest: Vec<u64>,
    /// Lying devices per bin.
    pub liars: Vec<u64>,
}

/// Regret against the oracle, in its two parts (docs/routing-lab.md,
/// "Figures"): failure probability and cloud cost beyond the best
/// archetype online, summed over attempts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RegretParts {
    /// Σ (failure probability of the device's archetype − the best's).
    pub failures: f64,
    /// Σ (cloud cost of the device's archetype − the best's).
    pub cost: f64,
}

/// Budget usage against the caps.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Caps per window.
    pub caps: BTreeMap<String, f64>,
    /// Every closed price window of a capped pool: (t closed, pool, usage).
    pub windows: Vec<(f64, String, f64)>,
    /// Per capped pool: windows over cap.
    pub over_cap: BTreeMap<String, u64>,
    /// Per capped pool: the largest usage / cap.
    pub max_ratio: BTreeMap<String, f64>,
    /// Per capped pool: mean usage / cap over the second half of the run's windows.
    pub late_mean_ratio: BTreeMap<String, f64>,
}

/// Figures of one timed source change (`[[events.source_change]]`):
/// what the change shut and opened, and how the contender's attempts on
/// that source followed. Archetype arrays are in [`crate::world::ARCHETYPES`] order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChangeFigures {
    /// The source's name.
    pub source: String,
    /// When the change came, seconds.
    pub at_s: f64,
    /// How long its truth held: to the source's next change or the run's end, seconds.
    pub held_s: f64,
    /// Archetypes the change shut out (a wall or a refusal; success was above 0 before).
    pub shut: Vec<String>,
    /// Archetypes the change let back in (success was 0 before, above 0 now).
    pub opened: Vec<String>,
    /// Attempts on the source per archetype in the hour before the change.
    pub hour_before: [u64; 4],
    /// Attempts on the source per archetype while the change held.
    pub after: [u64; 4],
    /// Attempts on the source per archetype in the first hour after the change.
    pub first_hour_after: [u64; 4],
    /// Regret (failure and cost parts, as [`RegretParts`]) on the source
    /// while the change held.
    #[serde(default)]
    pub regret_after: RegretParts,
}

/// Figures of the scheduled event of a scenario.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EventFigures {
    /// Each timed source change, in time order (absent: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<ChangeFigures>,
    /// `regime-change`: attempts by the blocked archetype on the affected
    /// source after the change (an upper bound on the observations needed to re-route).
    pub blocked_attempts_after: Option<u64>,
    /// `regime-change`: attempts by the blocked archetype in the hour before the change.
    pub blocked_attempts_hour_before: Option<u64>,
    /// `regime-change`: seconds from the change to the first drift detection on the cell.
    pub drift_delay_s: Option<f64>,
    /// `drought`: the tick at which the router first had no live browser, seconds.
    pub browsers_gone_s: Option<f64>,
    /// `drought`: seconds from then to the first grant to another archetype of a
    /// target last granted to a browser.
    pub reroute_delay_s: Option<f64>,
    /// `drought`: grants to browsers after they were gone and before they returned.
    pub browser_grants_while_gone: Option<u64>,
    /// `drought`: occupancy (as [`ContenderReport::occupancy`]) counted over the drought only.
    pub occupancy_during: Option<f64>,
    /// `drought`: [`ContenderReport::occupancy_conservative`] over the drought only.
    #[serde(default)]
    pub occupancy_during_conservative: Option<f64>,
    /// `adapter-bug`: adapter-disagreement events (time, source, version, devices restored).
    pub adapter_events: Vec<(f64, String, String, usize)>,
    /// `adapter-bug`: devices whose trust at the end is below their trust when the bug began.
    pub devices_lower_than_before: Option<usize>,
    /// `adapter-bug`: devices known when the bug began.
    pub devices_before: Option<usize>,
    /// `adapter-bug`: mean trust when the bug began and at the end.
    pub mean_trust_before_after: Option<(f64, f64)>,
    /// `adapter-bug`: the largest drop of one device's trust, end vs when the bug began.
    pub largest_drop: Option<f64>,
    /// `adapter-bug`: every honest device known when the bug began, its
    /// trust at the end minus its trust then, in device-id order (the
    /// sample the multi-seed check compares with the control world's).
    #[serde(default)]
    pub trust_deltas: Vec<f64>,
    /// `adapter-bug`: each device whose trust ended below its value when the
    /// bug began, with the losses (by the world's truth of each comparison)
    /// it had not won back by the end.
    #[serde(default)]
    pub lower_devices: Vec<LowerDevice>,
    /// `adapter-bug`: comparison sides the ledger checked against the
    /// router's trust moves, and how many moved against their cause
    /// (`ledger::Ledger::checks`; 0 when the mirror is exact).
    #[serde(default)]
    pub ledger_checks: Option<(u64, u64)>,
}

/// Work counters per routing decision (means over the receipts of granted items).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkPerDecision {
    /// Receipts counted.
    pub decisions: u64,
    /// Cells visited per decision.
    pub cells_visited: f64,
    /// Messages recomputed per decision.
    pub messages_recomputed: f64,
}

/// Wall-clock figures (not deterministic; left out of comparisons).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Wall seconds of the whole contender run.
    pub wall_s: f64,
    /// Wall seconds inside the router's calls.
    pub router_s: f64,
    /// Lease calls.
    pub lease_calls: u64,
    /// Wall seconds inside lease calls.
    pub lease_s: f64,
    /// Wall seconds inside ticks.
    pub tick_s: f64,
    /// Decisions: refill decisions (targets queued per tick) plus lease calls.
    pub decisions: u64,
    /// Decisions per wall second inside lease and tick calls.
    pub decisions_per_s: f64,
    /// Lease calls per wall second inside lease calls.
    pub leases_per_s: f64,
    /// Lease call latency percentiles p50, p99, microseconds.
    pub lease_us: (f64, f64),
}

/// One contender's figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContenderReport {
    /// Contender name.
    pub name: String,
    /// Executed attempts (deposits accepted).
    pub attempts: u64,
    /// Successful attempts.
    pub successes: u64,
    /// Items granted.
    pub items: u64,
    /// Protests (the device's own local facts declined an item).
    pub protests: u64,
    /// Deposits refused per error kind (e.g. a lease that expired mid-batch).
    pub refused: BTreeMap<String, u64>,
    /// Cumulative regret in expected failures.
    pub regret_failures: f64,
    /// Cumulative regret in cloud cost (failure-equivalents; negative when
    /// cheaper than the oracle, which pays cost to avoid failures).
    pub regret_cost: f64,
    /// regret_failures + regret_cost.
    pub regret_total: f64,
    /// Grants a host's true limit would have refused (must be 0).
    pub politeness_violations: u64,
    /// Correct-row fraction at the end.
    pub correct_fraction: f64,
    /// Fresh-row fraction at the end.
    pub fresh_fraction: f64,
    /// Settled rows at the end.
    pub settled: usize,
    /// Trust AUC, honest vs lying devices with ≥ 5 deposits (None without liars).
    pub trust_auc: Option<f64>,
    /// Trust histogram of devices with ≥ 5 deposits.
    pub trust: TrustHistogram,
    /// Drift detections.
    pub drift: Vec<DriftMark>,
    /// False drift alarms.
    pub drift_false_alarms: u64,
    /// Budget against caps.
    pub budget: Budget,
    /// Busy share of online device time counted over the time when
    /// admissible work existed: an idle gap counts from the earliest
    /// instant work could have become admissible after the router's last
    /// empty answer (the next refill tick, or the politeness hint if
    /// sooner) to the lease that returned work (see `docs/routing-lab.md`).
    pub occupancy: f64,
    /// The same with every idle gap that ended in work counted whole (an
    /// upper bound on the idle time).
    #[serde(default)]
    pub occupancy_conservative: f64,
    /// Busy share of all online device time.
    pub busy_share: f64,
    /// Work per decision.
    pub work: WorkPerDecision,
    /// Scenario event figures.
    pub event: EventFigures,
    /// Time series.
    pub series: Vec<Sample>,
    /// Events counted by kind.
    pub events: BTreeMap<String, u64>,
    /// Attempts started, by the item's work kind (`first_observation`,
    /// `verification`, `reobservation`, `discovery`, `filler`) and the
    /// archetype of the device that made them. Verification attempts count
    /// in no regret (docs/routing-lab.md, "Figures").
    #[serde(default)]
    pub attempts_by_kind: BTreeMap<String, BTreeMap<String, u64>>,
    /// Regret's two parts by the item's work kind (the keys of
    /// `attempts_by_kind` but `verification`): where `regret_failures` and
    /// `regret_cost` come from.
    #[serde(default)]
    pub regret_by_kind: BTreeMap<String, RegretParts>,
    /// Wall-clock figures.
    pub timing: Timing,
}

/// The area under the ROC curve of `honest` above `liars`: the chance an
/// honest device's τ exceeds a liar's (ties count half). None when either is empty.
pub fn auc(honest: &[f64], liars: &[f64]) -> Option<f64> {
    if honest.is_empty() || liars.is_empty() {
        return None;
    }
    let mut sorted: Vec<f64> = liars
        .iter()
        .map(|x| if x.is_nan() { 0.5 } else { *x })
        .collect();
    sorted.sort_by(f64::total_cmp);
    let mut wins = 0.0;
    for &h in honest {
        let h = if h.is_nan() { 0.5 } else { h };
        let below = sorted.partition_point(|l| *l < h);
        let not_above = sorted.partition_point(|l| *l <= h);
        wins += below as f64 + 0.5 * (not_above - below) as f64;
    }
    Some(wins / (honest.len() * liars.len()) as f64)
}

#[cfg(test)]
mod tests {
    use super::auc;

    #[test]
    fn auc_rows() {
        assert_eq!(auc(&[0.9, 0.8], &[0.1, 0.2]), Some(1.0));
        assert_eq!(auc(&[0.1], &[0.9]), Some(0.0));
        assert_eq!(auc(&[0.5], &[0.5]), Some(0.5));
        assert_eq!(auc(&[0.9, 0.1], &[0.5]), Some(0.5));
        assert_eq!(auc(&[], &[0.5]), None);
    }
}
