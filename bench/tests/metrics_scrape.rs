//! The Prometheus exporter over real loopback HTTP: the profile gauge, a
//! non-empty bin makespan histogram and the posture metrics appear in the
//! scrape, the scrape is dumped to `metrics.prom`, and the endpoint stops
//! on drop. One test: the recorder is process-wide.

use fleet::plan::{Binding, Profile};
use fleet::posture::{PostureOwner, PosturePolicy, ThrottleSample};
use fleet::telemetry;
use fleet::WorkerRole;
use fleet_bench::ops::{http, metrics};
use std::time::Duration;

/// The value of the sample line `name{labels}` (labels in any order).
fn sample(scrape: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape.lines().find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let rest = series.strip_prefix(name)?;
        let inner = if labels.is_empty() {
            if !(rest.is_empty() || rest == "{}") {
                return None;
            }
            ""
        } else {
            rest.strip_prefix('{')?.strip_suffix('}')?
        };
        let mut got: Vec<&str> = inner.split(',').filter(|s| !s.is_empty()).collect();
        let mut want: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        got.sort();
        want.sort();
        (got == want).then(|| value.parse().ok())?
    })
}

/// The bin makespan histogram: bin 0's three values in their buckets,
/// count and sum; bin 5's one value.
fn check_bin_makespan(s: &str) {
    let bucket = format!("{}_bucket", telemetry::BIN_MAKESPAN_SECONDS);
    let count = format!("{}_count", telemetry::BIN_MAKESPAN_SECONDS);
    let sum = format!("{}_sum", telemetry::BIN_MAKESPAN_SECONDS);
    assert_eq!(
        sample(s, &bucket, &[("bin", "0"), ("le", "0.05")]),
        Some(1.0),
        "{s}"
    );
    assert_eq!(
        sample(s, &bucket, &[("bin", "0"), ("le", "0.1")]),
        Some(2.0)
    );
    assert_eq!(
        sample(s, &bucket, &[("bin", "0"), ("le", "+Inf")]),
        Some(3.0)
    );
    assert_eq!(sample(s, &count, &[("bin", "0")]), Some(3.0));
    let total = sample(s, &sum, &[("bin", "0")]).unwrap();
    assert!(
        (total - 0.256).abs() < 1e-9,
        "sum of 40+86+130 ms, got {total}"
    );
    assert_eq!(sample(s, &count, &[("bin", "5")]), Some(1.0));
    assert!(s.contains(&format!(
        "# TYPE {} histogram",
        telemetry::BIN_MAKESPAN_SECONDS
    )));
}

/// The intake backlog gauge and the posture metrics after one cordon.
fn check_backlog_and_posture(s: &str) {
    let backlog = sample(s, telemetry::INTAKE_BACKLOG, &[("role", "verifier")]);
    assert_eq!(backlog, Some(7.0));
    let enters = sample(
        s,
        telemetry::POSTURE_ENTERS_TOTAL,
        &[("cause", "throttle_events")],
    );
    assert_eq!(enters, Some(1.0), "{s}");
    assert_eq!(sample(s, telemetry::THROTTLE_EVENTS_TOTAL, &[]), Some(2.0));
    assert_eq!(sample(s, telemetry::POSTURE_CORDONED, &[]), Some(1.0));
    let dwell = sample(s, telemetry::POSTURE_CORDONED_SECONDS_TOTAL, &[]).unwrap();
    assert!(
        (dwell - 2.0).abs() < 1e-9,
        "cordoned 10 ms → 2010 ms, got {dwell}"
    );
    assert!(
        s.contains(&format!("# HELP {}", telemetry::PROFILE)),
        "described"
    );
}

#[test]
fn a_scrape_shows_profile_bin_makespan_and_posture_metrics() {
    let handle = metrics::install(Some("127.0.0.1:0".parse().unwrap())).unwrap();
    let addr = handle.local_addr().expect("a listener was asked for");

    telemetry::record_profile_labels(Profile::Auto, Binding::Serial, false);
    for (bin, ms) in [(0, 40), (0, 86), (0, 130), (5, 300)] {
        telemetry::record_bin_makespan(bin, Duration::from_millis(ms));
    }
    telemetry::record_intake_backlog(&[(WorkerRole::Verifier, 7)]);
    let owner = PostureOwner::new(PosturePolicy::default(), 4);
    let hit = ThrottleSample {
        events: 1,
        throttled_us: 100,
    };
    owner.observe(hit, 0);
    owner.observe(hit, 10).expect("2 events in 1 s cordon");
    owner.observe(ThrottleSample::default(), 2_010);

    let r = http::request(addr, "GET", metrics::SCRAPE_PATH, None).unwrap();
    assert_eq!(r.status, 200);
    let s = r.body;
    let profile = [
        ("profile", "auto"),
        ("binding", "serial"),
        ("oversubscribed", "false"),
    ];
    assert_eq!(sample(&s, telemetry::PROFILE, &profile), Some(1.0), "{s}");

    check_bin_makespan(&s);
    check_backlog_and_posture(&s);
    let count = format!("{}_count", telemetry::BIN_MAKESPAN_SECONDS);

    // Another path is a 404; the dump has the same series.
    let r = http::request(addr, "GET", "/", None).unwrap();
    assert_eq!(r.status, 404);
    let dir = tempfile::tempdir().unwrap();
    let path = handle.write_prom(dir.path()).unwrap();
    assert_eq!(path.file_name().unwrap(), metrics::PROM_FILE);
    let dumped = std::fs::read_to_string(&path).unwrap();
    assert_eq!(sample(&dumped, telemetry::PROFILE, &profile), Some(1.0));
    assert_eq!(sample(&dumped, &count, &[("bin", "0")]), Some(3.0));

    // A second install shares the recorder; a later plan drops the old
    // profile series to 0. Dropping the handle closes its endpoint.
    let again = metrics::install(None).unwrap();
    assert!(again.local_addr().is_none());
    telemetry::record_profile_labels(Profile::Pinned, Binding::Pinned, true);
    let s = again.render();
    assert_eq!(sample(&s, telemetry::PROFILE, &profile), Some(0.0));
    let forced = [
        ("profile", "pinned"),
        ("binding", "pinned"),
        ("oversubscribed", "true"),
    ];
    assert_eq!(sample(&s, telemetry::PROFILE, &forced), Some(1.0));
    drop(handle);
    assert!(http::request(addr, "GET", metrics::SCRAPE_PATH, None).is_err());
}
