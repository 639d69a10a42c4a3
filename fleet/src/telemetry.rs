//! Fleet metrics, recorded through the `metrics` facade so the bot chooses
//! its exporter (Prometheus in the lab, whatever the bot installs in
//! production; with no recorder installed every call is a cheap no-op).
//!
//! Source: `DESIGN.md` §3 "Telemetry" and "Posture"; seed 000 §6 (posture
//! transition metrics: enter/exit counts, cordoned dwell, intake
//! suppression) and §7 (the bin makespan histogram). Names follow the seeds
//! (`degenbot_fleet_*`) because the bot's dashboards read them.
//!
//! [`METRICS`] is the table of every metric (name, kind, unit, labels, what
//! records it); [`describe`] registers its help text with the installed
//! recorder. The posture metrics are recorded by
//! [`crate::posture::PostureOwner`] where its transitions happen; the
//! profile, bin makespan and backlog metrics are recorded by whoever runs
//! the fleet (the binding or the driver) through the `record_*` functions.

use crate::plan::{Binding, Plan, Profile};
use crate::posture::{PostureCause, ThrottleSample, Transition};
use crate::role::WorkerRole;
use metrics::Unit;
use parking_lot::Mutex;
use std::time::Duration;

/// `degenbot_fleet_profile{profile,binding,oversubscribed}`: gauge, 1 for
/// the plan in force (0 for a plan replaced earlier in the same process).
/// Labels: `profile` (`auto|pinned|serial`, the requested profile),
/// `binding` (`pinned|serial`, the resolved one; alerting reads
/// `binding="serial"`), `oversubscribed` (`true|false`). Source: `DESIGN.md`
/// §3 "Telemetry"; recorded by [`record_profile`].
pub const PROFILE: &str = "degenbot_fleet_profile";

/// `degenbot_fleet_bin_makespan_seconds{bin}`: histogram, seconds, one
/// observation per bin per cycle (the bin's walk, start to last outcome).
/// Label `bin`: the bin index (`0..6`). Source: seed 000 §7; recorded by
/// [`record_bin_makespan`].
pub const BIN_MAKESPAN_SECONDS: &str = "degenbot_fleet_bin_makespan_seconds";

/// `degenbot_fleet_intake_backlog{role}`: gauge, units held in the host
/// pump's backlog per role (never dropped, `DESIGN.md` §3 "Lanes, hosts and
/// the pump"). Label `role`: the role's snake_case name. Recorded by
/// [`record_intake_backlog`] from the pump's `backlog_by_role()`.
pub const INTAKE_BACKLOG: &str = "degenbot_fleet_intake_backlog";

/// `degenbot_fleet_posture_enters_total{cause}`: counter, Nominal →
/// Cordoned edges. Label `cause`: `throttle_events`, `throttle_duty` or
/// `lane_death`. Source: seed 000 §6; recorded by the posture owner.
pub const POSTURE_ENTERS_TOTAL: &str = "degenbot_fleet_posture_enters_total";

/// `degenbot_fleet_posture_exits_total`: counter, Cordoned → Nominal edges
/// (after `cordon_exit_clean_ms` of clean windows). Source: seed 000 §6;
/// recorded by the posture owner.
pub const POSTURE_EXITS_TOTAL: &str = "degenbot_fleet_posture_exits_total";

/// `degenbot_fleet_posture_cordoned_seconds_total`: cordoned dwell,
/// seconds, cumulative, advanced on every observation while cordoned and at
/// the exit. Exported as a gauge that only ever increases, because the
/// facade's counters are integers. Source: seed 000 §6; recorded by the
/// posture owner.
pub const POSTURE_CORDONED_SECONDS_TOTAL: &str = "degenbot_fleet_posture_cordoned_seconds_total";

/// `degenbot_fleet_posture_intake_suppressed_total`: counter, intakes the
/// cordon held (deferrable roles) or floored (sims). Source: seed 000 §6;
/// counted by the posture owner when the pump reports a suppression.
pub const POSTURE_INTAKE_SUPPRESSED_TOTAL: &str = "degenbot_fleet_posture_intake_suppressed_total";

/// `degenbot_fleet_posture_cordoned`: gauge, 1 while cordoned, 0 while
/// nominal (the posture timeline). Recorded by the posture owner.
pub const POSTURE_CORDONED: &str = "degenbot_fleet_posture_cordoned";

/// `degenbot_fleet_throttle_events_total`: counter, cgroup throttle events
/// (periods throttled) fed to the posture owner. Source: `DESIGN.md` §3
/// "Quota detection" (the throttle sampler); recorded by the posture owner.
pub const THROTTLE_EVENTS_TOTAL: &str = "degenbot_fleet_throttle_events_total";

/// How a metric is exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// Monotone integer counter (name ends in `_total`).
    Counter,
    /// Point-in-time value.
    Gauge,
    /// Distribution of observations.
    Histogram,
}

/// One row of the metric table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricSpec {
    /// The exported name.
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub kind: MetricKind,
    /// The unit of the value (`Count` for plain counts and 0/1 flags).
    pub unit: Unit,
    /// Label keys, in the order documented.
    pub labels: &'static [&'static str],
    /// Help text: what it measures and where it is recorded.
    pub help: &'static str,
}

/// `degenbot_fleet_receipt_overruns_total{role}`: counter, receipt waits
/// that passed their deadline (the unit is accounted `Failed(Overrun)`; a
/// hung unit, `DESIGN.md` §3 "Outcome ledger"). Label `role`: the awaited
/// unit's role, or `unknown`. Recorded by [`record_receipt_overrun`].
pub const RECEIPT_OVERRUNS_TOTAL: &str = "degenbot_fleet_receipt_overruns_total";

/// `degenbot_fleet_degraded{cause}`: gauge, 1 once a lane death latched
/// the sticky cordon (the deferrable roles are held until a restart).
/// Label `cause`: `unit_panicked`, `seat_lost` or `unrecorded`. Recorded by
/// the posture owner ([`record_degraded`]).
pub const DEGRADED: &str = "degenbot_fleet_degraded";

/// `degenbot_fleet_lent_promotions_total`: counter, times the serial
/// tier's idle-class cycle threads were returned to the normal class
/// because other processes starved them while they held work
/// (`docs/decisions/0009-reserve-lent-at-idle-class.md`). Recorded by
/// [`record_lent_promotion`].
pub const LENT_PROMOTIONS_TOTAL: &str = "degenbot_fleet_lent_promotions_total";

/// Every fleet metric. [`describe`] registers each row's help and unit.
pub const METRICS: [MetricSpec; 12] = [
    MetricSpec {
        name: PROFILE,
        kind: MetricKind::Gauge,
        unit: Unit::Count,
        labels: &["profile", "binding", "oversubscribed"],
        help: "1 for the fleet plan in force: requested profile, resolved binding, oversubscribed",
    },
    MetricSpec {
        name: BIN_MAKESPAN_SECONDS,
        kind: MetricKind::Histogram,
        unit: Unit::Seconds,
        labels: &["bin"],
        help: "Makespan of one bin's solver walk per cycle, seconds",
    },
    MetricSpec {
        name: INTAKE_BACKLOG,
        kind: MetricKind::Gauge,
        unit: Unit::Count,
        labels: &["role"],
        help: "Units held in the host pump's intake backlog, per role",
    },
    MetricSpec {
        name: POSTURE_ENTERS_TOTAL,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: &["cause"],
        help: "Posture edges Nominal -> Cordoned, by cause",
    },
    MetricSpec {
        name: POSTURE_EXITS_TOTAL,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: &[],
        help: "Posture edges Cordoned -> Nominal after the clean window",
    },
    MetricSpec {
        name: POSTURE_CORDONED_SECONDS_TOTAL,
        kind: MetricKind::Gauge,
        unit: Unit::Seconds,
        labels: &[],
        help: "Cumulative time spent cordoned, seconds (only increases)",
    },
    MetricSpec {
        name: POSTURE_INTAKE_SUPPRESSED_TOTAL,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: &[],
        help: "Intakes held or floored by the cordon",
    },
    MetricSpec {
        name: POSTURE_CORDONED,
        kind: MetricKind::Gauge,
        unit: Unit::Count,
        labels: &[],
        help: "1 while the fleet posture is Cordoned, 0 while Nominal",
    },
    MetricSpec {
        name: THROTTLE_EVENTS_TOTAL,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: &[],
        help: "cgroup throttle events (periods throttled) fed to the posture",
    },
    MetricSpec {
        name: RECEIPT_OVERRUNS_TOTAL,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: &["role"],
        help: "Receipt waits that passed their deadline (units accounted Failed(Overrun))",
    },
    MetricSpec {
        name: DEGRADED,
        kind: MetricKind::Gauge,
        unit: Unit::Count,
        labels: &["cause"],
        help:
            "1 once a lane death latched the sticky cordon (deferrable roles held until a restart)",
    },
    MetricSpec {
        name: LENT_PROMOTIONS_TOTAL,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        labels: &[],
        help: "Times the idle-class cycle threads went back to the normal class because other processes starved them",
    },
];

/// Count one return of the lent cycle threads to the normal class.
pub fn record_lent_promotion() {
    metrics::counter!(LENT_PROMOTIONS_TOTAL).increment(1);
}

/// Register every metric's help text and unit with the installed recorder.
/// Call once after installing an exporter; harmless to repeat.
pub fn describe() {
    for m in METRICS {
        match m.kind {
            MetricKind::Counter => metrics::describe_counter!(m.name, m.unit, m.help),
            MetricKind::Gauge => metrics::describe_gauge!(m.name, m.unit, m.help),
            MetricKind::Histogram => metrics::describe_histogram!(m.name, m.unit, m.help),
        }
    }
}

/// The labels of the profile gauge last set to 1 in this process.
static LAST_PROFILE: Mutex<Option<(Profile, Binding, bool)>> = Mutex::new(None);

/// Set [`PROFILE`] to 1 for `plan` (its requested profile, resolved binding
/// and oversubscribed mark). A different plan recorded earlier in this
/// process drops to 0, so exactly one series reads 1.
pub fn record_profile(plan: &Plan) {
    record_profile_labels(plan.profile, plan.binding, plan.oversubscribed);
}

/// [`record_profile`] from the three label values.
pub fn record_profile_labels(profile: Profile, binding: Binding, oversubscribed: bool) {
    let mut last = LAST_PROFILE.lock();
    let now = (profile, binding, oversubscribed);
    if let Some(prev) = last.replace(now) {
        if prev != now {
            profile_gauge(prev).set(0.0);
        }
    }
    profile_gauge(now).set(1.0);
}

fn profile_gauge((profile, binding, over): (Profile, Binding, bool)) -> metrics::Gauge {
    metrics::gauge!(
        PROFILE,
        "profile" => profile.name(),
        "binding" => binding.name(),
        "oversubscribed" => if over { "true" } else { "false" },
    )
}

/// Observe one bin's makespan (`bin` = bin index, `makespan` = its walk,
/// start to last outcome) in [`BIN_MAKESPAN_SECONDS`].
pub fn record_bin_makespan(bin: u32, makespan: Duration) {
    metrics::histogram!(BIN_MAKESPAN_SECONDS, "bin" => bin.to_string())
        .record(makespan.as_secs_f64());
}

/// Set [`INTAKE_BACKLOG`] for every role given, units held. Pass the host
/// pump's `backlog_by_role()` after each pump step.
pub fn record_intake_backlog(backlog: &[(WorkerRole, u32)]) {
    for (role, held) in backlog {
        metrics::gauge!(INTAKE_BACKLOG, "role" => role.name()).set(f64::from(*held));
    }
}

/// Count one receipt overrun in [`RECEIPT_OVERRUNS_TOTAL`] (`role`: the
/// awaited unit's role, when the waiter knows it).
pub fn record_receipt_overrun(role: Option<WorkerRole>) {
    metrics::counter!(RECEIPT_OVERRUNS_TOTAL, "role" => role.map_or("unknown", |r| r.name()))
        .increment(1);
}

/// Set [`DEGRADED`] to 1 with the lane death's cause.
pub fn record_degraded(cause: &crate::posture::LaneDeathCause) {
    use crate::posture::LaneDeathCause as C;
    let label = match cause {
        C::UnitPanicked { .. } => "unit_panicked",
        C::SeatLost { .. } => "seat_lost",
        C::Unrecorded => "unrecorded",
    };
    metrics::gauge!(DEGRADED, "cause" => label).set(1.0);
}

/// The `cause` label of an enter edge.
pub const fn cause_label(cause: &PostureCause) -> &'static str {
    match cause {
        PostureCause::ThrottleEvents { .. } => "throttle_events",
        PostureCause::ThrottleDuty { .. } => "throttle_duty",
        PostureCause::LaneDeath => "lane_death",
        PostureCause::CleanWindow { .. } => "clean_window",
    }
}

/// Count one posture edge (enters by cause, or exits) and set
/// [`POSTURE_CORDONED`]. Recorded by the posture owner only.
pub(crate) fn record_posture_edge(t: &Transition) {
    use crate::posture::Posture;
    match t.to {
        Posture::Cordoned => {
            metrics::counter!(POSTURE_ENTERS_TOTAL, "cause" => cause_label(&t.cause)).increment(1);
            metrics::gauge!(POSTURE_CORDONED).set(1.0);
        }
        Posture::Nominal => {
            metrics::counter!(POSTURE_EXITS_TOTAL).increment(1);
            metrics::gauge!(POSTURE_CORDONED).set(0.0);
        }
    }
}

/// Advance [`POSTURE_CORDONED_SECONDS_TOTAL`] by `delta_ms` of dwell.
pub(crate) fn record_cordoned_dwell(delta_ms: u64) {
    if delta_ms > 0 {
        metrics::gauge!(POSTURE_CORDONED_SECONDS_TOTAL).increment(delta_ms as f64 / 1000.0);
    }
}

/// Count one suppressed intake in [`POSTURE_INTAKE_SUPPRESSED_TOTAL`].
pub(crate) fn record_intake_suppressed() {
    metrics::counter!(POSTURE_INTAKE_SUPPRESSED_TOTAL).increment(1);
}

/// Count a sample's throttle events in [`THROTTLE_EVENTS_TOTAL`].
pub(crate) fn record_throttle(sample: &ThrottleSample) {
    if sample.events > 0 {
        metrics::counter!(THROTTLE_EVENTS_TOTAL).increment(sample.events);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn table_names_are_unique_prefixed_and_suffixed_by_kind() {
        let mut seen = HashSet::new();
        for m in METRICS {
            assert!(seen.insert(m.name), "duplicate metric {}", m.name);
            assert!(m.name.starts_with("degenbot_fleet_"), "{}", m.name);
            match m.kind {
                MetricKind::Counter => assert!(m.name.ends_with("_total"), "{}", m.name),
                MetricKind::Histogram => assert!(m.name.ends_with("_seconds"), "{}", m.name),
                MetricKind::Gauge => {}
            }
            if m.unit == Unit::Seconds {
                assert!(m.name.contains("_seconds"), "{} is in seconds", m.name);
            }
            assert!(!m.help.is_empty(), "{} has help", m.name);
        }
        for name in [
            PROFILE,
            BIN_MAKESPAN_SECONDS,
            INTAKE_BACKLOG,
            POSTURE_ENTERS_TOTAL,
            POSTURE_EXITS_TOTAL,
            POSTURE_CORDONED_SECONDS_TOTAL,
            POSTURE_INTAKE_SUPPRESSED_TOTAL,
            POSTURE_CORDONED,
            THROTTLE_EVENTS_TOTAL,
            RECEIPT_OVERRUNS_TOTAL,
            DEGRADED,
        ] {
            assert!(seen.contains(name), "{name} missing from METRICS");
        }
    }

    #[test]
    fn every_cause_has_a_distinct_label() {
        let causes = [
            PostureCause::ThrottleEvents {
                events: 2,
                window_ms: 1000,
            },
            PostureCause::ThrottleDuty {
                duty_percent: 3.0,
                window_ms: 5000,
            },
            PostureCause::LaneDeath,
            PostureCause::CleanWindow { clean_ms: 10_000 },
        ];
        let labels: HashSet<_> = causes.iter().map(cause_label).collect();
        assert_eq!(labels.len(), causes.len());
    }
}
