//! The fleet records its metrics through the facade: posture transitions,
//! dwell, throttle events and suppressions from the posture owner; the
//! profile, bin makespan and backlog from the `record_*` functions.
//! Observed with a thread-local debugging recorder, so the values are exact.

use fleet::plan::{Binding, Profile};
use fleet::posture::{PostureOwner, PosturePolicy, ThrottleSample};
use fleet::telemetry::{self, METRICS};
use fleet::WorkerRole;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;
use std::time::Duration;

/// `(name, sorted labels as "k=v")` → value.
fn snapshot(s: &Snapshotter) -> Vec<(String, Vec<String>, DebugValue)> {
    s.snapshot()
        .into_vec()
        .into_iter()
        .map(|(ck, _, _, v)| {
            let key = ck.key();
            let mut labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            (key.name().to_string(), labels, v)
        })
        .collect()
}

fn find<'a>(
    snap: &'a [(String, Vec<String>, DebugValue)],
    name: &str,
    labels: &[&str],
) -> &'a DebugValue {
    let mut want: Vec<String> = labels.iter().map(|s| s.to_string()).collect();
    want.sort();
    snap.iter()
        .find(|(n, l, _)| n == name && *l == want)
        .map(|(_, _, v)| v)
        .unwrap_or_else(|| panic!("no {name}{labels:?} in {snap:?}"))
}

fn counter(v: &DebugValue) -> u64 {
    match v {
        DebugValue::Counter(c) => *c,
        other => panic!("not a counter: {other:?}"),
    }
}

fn gauge(v: &DebugValue) -> f64 {
    match v {
        DebugValue::Gauge(g) => g.into_inner(),
        other => panic!("not a gauge: {other:?}"),
    }
}

#[test]
fn posture_owner_records_edges_dwell_throttle_and_suppressions() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let owner = PostureOwner::new(PosturePolicy::default(), 4);
        let one = ThrottleSample {
            events: 1,
            throttled_us: 10,
        };
        assert!(owner.observe(one, 0).is_none());
        assert!(
            owner.observe(one, 100).is_some(),
            "2 events in 1000 ms enter"
        );
        assert!(owner.observe(ThrottleSample::default(), 5_000).is_none());
        owner.note_intake_suppressed();
        owner.note_intake_suppressed();
        // A snapshot drains: counters and gauges read since the last one.
        let s = snapshot(&snap);
        let enters = find(
            &s,
            telemetry::POSTURE_ENTERS_TOTAL,
            &["cause=throttle_events"],
        );
        assert_eq!(counter(enters), 1);
        assert_eq!(counter(find(&s, telemetry::THROTTLE_EVENTS_TOTAL, &[])), 2);
        let suppressed = find(&s, telemetry::POSTURE_INTAKE_SUPPRESSED_TOTAL, &[]);
        assert_eq!(counter(suppressed), 2);
        assert_eq!(gauge(find(&s, telemetry::POSTURE_CORDONED, &[])), 1.0);
        let live = gauge(find(&s, telemetry::POSTURE_CORDONED_SECONDS_TOTAL, &[]));
        assert!((live - 4.9).abs() < 1e-9, "dwell so far 4.9 s, got {live}");
        let exit = owner.observe(ThrottleSample::default(), 10_100);
        assert!(exit.is_some(), "10 s clean exits");
        assert_eq!(owner.counters().cordoned_dwell_ms, 10_000);
    });
    let s = snapshot(&snap);
    assert_eq!(counter(find(&s, telemetry::POSTURE_EXITS_TOTAL, &[])), 1);
    let enters = find(
        &s,
        telemetry::POSTURE_ENTERS_TOTAL,
        &["cause=throttle_events"],
    );
    assert_eq!(counter(enters), 0, "no new enter since the last snapshot");
    assert_eq!(gauge(find(&s, telemetry::POSTURE_CORDONED, &[])), 0.0);
    let rest = gauge(find(&s, telemetry::POSTURE_CORDONED_SECONDS_TOTAL, &[]));
    assert!(
        (rest - 5.1).abs() < 1e-9,
        "dwell 10 s in all, 5.1 s since, got {rest}"
    );
}

#[test]
fn lane_death_enters_with_its_own_cause() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let owner = PostureOwner::new(PosturePolicy::default(), 4);
        assert!(owner.mark_lane_death_at(50).is_some());
    });
    let s = snapshot(&snap);
    let enters = find(&s, telemetry::POSTURE_ENTERS_TOTAL, &["cause=lane_death"]);
    assert_eq!(counter(enters), 1);
}

#[test]
fn profile_bin_makespan_and_backlog_are_recorded_with_their_labels() {
    let recorder = DebuggingRecorder::new();
    let snap = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        telemetry::describe();
        telemetry::record_profile_labels(Profile::Auto, Binding::Serial, false);
        telemetry::record_profile_labels(Profile::Pinned, Binding::Pinned, true);
        telemetry::record_bin_makespan(3, Duration::from_millis(86));
        telemetry::record_bin_makespan(3, Duration::from_millis(120));
        telemetry::record_intake_backlog(&[(WorkerRole::Registrar, 5), (WorkerRole::Solver, 0)]);
    });
    let s = snapshot(&snap);
    let old = find(
        &s,
        telemetry::PROFILE,
        &["profile=auto", "binding=serial", "oversubscribed=false"],
    );
    assert_eq!(gauge(old), 0.0, "a replaced plan drops to 0");
    let now = find(
        &s,
        telemetry::PROFILE,
        &["profile=pinned", "binding=pinned", "oversubscribed=true"],
    );
    assert_eq!(gauge(now), 1.0);
    match find(&s, telemetry::BIN_MAKESPAN_SECONDS, &["bin=3"]) {
        DebugValue::Histogram(v) => {
            let got: Vec<f64> = v.iter().map(|x| x.into_inner()).collect();
            assert_eq!(got, vec![0.086, 0.12]);
        }
        other => panic!("not a histogram: {other:?}"),
    }
    assert_eq!(
        gauge(find(&s, telemetry::INTAKE_BACKLOG, &["role=registrar"])),
        5.0
    );
    assert_eq!(
        gauge(find(&s, telemetry::INTAKE_BACKLOG, &["role=solver"])),
        0.0
    );
    // The kinds the recorder saw match the table.
    for (ck, _, _, _) in snap.snapshot().into_vec() {
        let spec = METRICS
            .iter()
            .find(|m| m.name == ck.key().name())
            .expect("recorded metric is in the table");
        let kind = match spec.kind {
            telemetry::MetricKind::Counter => MetricKind::Counter,
            telemetry::MetricKind::Gauge => MetricKind::Gauge,
            telemetry::MetricKind::Histogram => MetricKind::Histogram,
        };
        assert_eq!(ck.kind(), kind, "{}", spec.name);
    }
}
