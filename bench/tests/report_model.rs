//! The report's JSON shape: stable snake_case keys (scripts and CI gates
//! read them), optional parts written as `null`, exact round trips.

use std::collections::BTreeSet;

use fleet::{FailReason, PathOutcome};
use fleet_bench::report::sample::{sample_run, SampleShape};
use fleet_bench::report::{CounterValue, Mismatch, OutcomeCounts, RunReport, TimelineKind};
use serde_json::Value;

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().expect("an object").keys().cloned().collect()
}

fn set(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The report's top-level keys: `report.json`'s stable contract (scripts
/// and gates read them by name).
const TOP_LEVEL_KEYS: &[&str] = &[
    "census",
    "lent_reserve",
    "perf_per_thread",
    "background",
    "overruns",
    "quota_detection",
    "plan_changes",
    "rss",
    "streamed_to",
    "cotenant_lateness_us",
    "reserve_task_lateness_us",
    "cotenant",
    "saturation",
    "peak_start_late_ms",
    "arrival_interval_ms",
    "contend_threads",
    "contend_class",
    "sim_io_mean_late_us",
    "makespan_over_process_bound",
    "label",
    "profile",
    "binding",
    "oversubscribed",
    "scale",
    "cycles",
    "paths",
    "outcomes",
    "parity",
    "first_mismatch",
    "makespan_ms",
    "makespan_over_lower_bound",
    "bin_walk_ms",
    "sim_latency_ms",
    "threads",
    "timer_slack_ns",
    "cpu_seconds",
    "wall_seconds",
    "throttle",
    "posture",
    "perf_counters",
    "histograms_out_of_range",
    "per_cycle",
    "timeline",
    "machine",
    "corpus",
];

#[test]
fn top_level_and_nested_keys_are_the_documented_ones() {
    let r = sample_run("fleet auto", SampleShape::FLEET, 20, 0.1, 1);
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(keys(&v), set(TOP_LEVEL_KEYS));
    assert_eq!(
        keys(&v["outcomes"]),
        set(&["solved", "suppressed", "failed"])
    );
    for p in [
        "makespan_ms",
        "makespan_over_lower_bound",
        "makespan_over_process_bound",
        "bin_walk_ms",
        "sim_latency_ms",
    ] {
        assert_eq!(
            keys(&v[p]),
            set(&["p50", "p95", "p99", "max", "mean", "count"]),
            "{p}"
        );
    }
    assert_eq!(
        keys(&v["threads"]),
        set(&["at_start", "peak", "created_during_run", "peak_runnable"])
    );
    assert_eq!(
        keys(&v["throttle"]),
        set(&["events", "throttled_ms", "throttled_share", "source"])
    );
    assert_eq!(v["throttle"]["source"], "injected");
    assert_eq!(
        keys(&v["posture"]),
        set(&["enters", "exits", "cordoned_ms", "intake_suppressed"])
    );
    assert_eq!(
        keys(&v["per_cycle"][0]),
        set(&[
            "cycle",
            "intended_start_ms",
            "makespan_ms",
            "lower_bound_ms",
            "process_lower_bound_ms",
            "start_late_ms",
            "bins_walk_ms"
        ])
    );
    for p in ["cotenant_lateness_us", "reserve_task_lateness_us"] {
        assert_eq!(
            keys(&v[p]),
            set(&["p50", "p99", "p999", "max", "count"]),
            "{p}"
        );
    }
    assert_eq!(
        keys(&v["cotenant"]),
        set(&[
            "mode",
            "probe_period_us",
            "probe_missed_ticks",
            "reserve_burst_us",
            "cpu_seconds"
        ])
    );
    assert!(v["saturation"].is_null());
    assert_eq!(keys(&v["timeline"][0]), set(&["t_ms", "kind", "detail"]));
    assert_eq!(
        keys(&v["machine"]),
        set(&["cpus", "quota", "load_average", "other_cpus"])
    );
    assert_eq!(keys(&v["corpus"]), set(&["path", "version", "checksum"]));
    assert!(
        v["first_mismatch"].is_null(),
        "absent parts are null, never left out"
    );
}

#[test]
fn timeline_kinds_are_snake_case_and_exhaustive() {
    let names: Vec<String> = TimelineKind::ALL
        .iter()
        .map(|k| {
            serde_json::to_value(k)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        names,
        [
            "posture_enter",
            "posture_exit",
            "throttle",
            "retune",
            "quota_change",
            "heap_release"
        ]
    );
    for k in TimelineKind::ALL {
        assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
    }
}

#[test]
fn counters_are_a_number_or_a_skip_reason() {
    let v = CounterValue::Value(42);
    let s = CounterValue::Skipped {
        skipped: "not supported".into(),
    };
    assert_eq!(serde_json::to_string(&v).unwrap(), "42");
    assert_eq!(
        serde_json::to_string(&s).unwrap(),
        r#"{"skipped":"not supported"}"#
    );
    assert_eq!(serde_json::from_str::<CounterValue>("42").unwrap(), v);
    assert_eq!(
        serde_json::from_str::<CounterValue>(r#"{"skipped":"not supported"}"#).unwrap(),
        s
    );
}

#[test]
fn a_report_with_a_mismatch_round_trips_exactly() {
    let mut r = sample_run("pinned", SampleShape::PILE, 12, 0.1, 3);
    r.parity = false;
    r.first_mismatch = Some(Mismatch {
        cycle: 4,
        path: 17,
        expected: Some(PathOutcome::Solved {
            amount_in: (1u128 << 100) + 3,
            profit: 99,
        }),
        got: Some(PathOutcome::Failed {
            reason: FailReason::LaneDeath,
        }),
    });
    r.throttle = None;
    r.perf_counters = None;
    r.machine.quota = None;
    let json = serde_json::to_string_pretty(&r).unwrap();
    let back: RunReport = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        v["first_mismatch"]["expected"]["amount_in"],
        "1267650600228229401496703205379"
    );
    assert!(
        v["throttle"].is_null() && v["perf_counters"].is_null() && v["machine"]["quota"].is_null()
    );
}

#[test]
fn outcome_counts_add_by_kind() {
    let mut c = OutcomeCounts::default();
    for o in [
        PathOutcome::Suppressed,
        PathOutcome::Solved {
            amount_in: 1,
            profit: 1,
        },
        PathOutcome::Failed {
            reason: FailReason::SimReverted,
        },
        PathOutcome::Suppressed,
    ] {
        c.add(&o);
    }
    assert_eq!(
        c,
        OutcomeCounts {
            solved: 1,
            suppressed: 2,
            failed: 1
        }
    );
    assert_eq!(c.total(), 4);
}

#[test]
fn the_sample_is_deterministic_and_consistent() {
    let a = sample_run("x", SampleShape::FLEET, 50, 1.0, 9);
    let b = sample_run("x", SampleShape::FLEET, 50, 1.0, 9);
    assert_eq!(a, b);
    assert_eq!(a.per_cycle.len(), 50);
    assert_eq!(a.outcomes.total(), a.paths);
    assert_eq!(a.makespan_ms.count, 50);
    assert!(a
        .per_cycle
        .iter()
        .all(|c| c.makespan_ms >= c.lower_bound_ms && c.bins_walk_ms.len() == 6));
    assert!(a.makespan_over_lower_bound.p50 >= 1.0);
}
