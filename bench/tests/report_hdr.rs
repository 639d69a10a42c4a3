//! The latency recorder: percentile maths on known inputs, out-of-range
//! counting (never clamped), and the interval-log round trip.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fleet_bench::report::hdr::{HIGHEST_TICKS, TICKS_PER_UNIT};
use fleet_bench::report::{
    read_interval_log, read_log_histogram, LatencyRecorder, Metric, ReportError,
};
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

/// Within HdrHistogram's 3-significant-digit resolution (≤ 0.1 %).
fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= want.abs() * 1e-3 + 1e-9
}

#[test]
fn percentiles_of_one_to_a_thousand_ms() {
    let mut r = LatencyRecorder::new(Metric::Makespan);
    for ms in 1..=1000u64 {
        r.record_ms(ms as f64);
    }
    let p = r.percentiles();
    assert_eq!(p.count, 1000);
    assert!(close(p.p50, 500.0), "p50 {}", p.p50);
    assert!(close(p.p95, 950.0), "p95 {}", p.p95);
    assert!(close(p.p99, 990.0), "p99 {}", p.p99);
    assert_eq!(p.max, 1000.0);
    assert!(close(p.mean, 500.5), "mean {}", p.mean);
    assert_eq!(r.out_of_range(), 0);
}

#[test]
fn percentiles_of_a_skewed_sample_find_the_tail() {
    // 980 fast cycles at 10 ms, 20 slow ones at 400 ms: p95 is fast, p99 slow.
    let mut r = LatencyRecorder::new(Metric::Makespan);
    for i in 0..1000 {
        r.record_duration(Duration::from_millis(if i % 50 == 0 { 400 } else { 10 }));
    }
    let p = r.percentiles();
    assert!(close(p.p50, 10.0) && close(p.p95, 10.0), "{p:?}");
    assert!(close(p.p99, 400.0), "{p:?}");
    assert!(
        close(p.mean, (980.0 * 10.0 + 20.0 * 400.0) / 1000.0),
        "{p:?}"
    );
}

#[test]
fn ratios_are_recorded_in_thousandths() {
    let mut r = LatencyRecorder::new(Metric::MakespanOverLowerBound);
    for x in [1.0, 1.25, 1.5, 2.0] {
        r.record_ratio(x);
    }
    let p = r.percentiles();
    assert_eq!(p.count, 4);
    assert!(close(p.p50, 1.25), "{p:?}");
    assert_eq!(p.max, 2.0);
}

#[test]
fn no_percentile_exceeds_the_exact_max() {
    let mut r = LatencyRecorder::new(Metric::Makespan);
    for ms in [24.222, 78.741, 11.325, 57.82] {
        r.record_ms(ms);
    }
    let p = r.percentiles();
    assert_eq!(p.max, 78.741);
    assert_eq!(
        p.p99, 78.741,
        "the bucket's top (78.783) is capped at the max"
    );
    assert!(p.p50 <= p.p95 && p.p95 <= p.p99 && p.p99 <= p.max);
}

#[test]
fn empty_recorder_reports_zeros() {
    let r = LatencyRecorder::new(Metric::SimLatency);
    assert!(r.is_empty());
    let p = r.percentiles();
    assert_eq!((p.p50, p.p99, p.max, p.count), (0.0, 0.0, 0.0, 0));
}

#[test]
fn values_above_the_range_are_counted_not_clamped() {
    let mut r = LatencyRecorder::new(Metric::Makespan);
    r.record_ms(5.0);
    r.record_ticks(HIGHEST_TICKS); // the top of the range is still in it
    r.record_ticks(HIGHEST_TICKS + 1);
    r.record_duration(Duration::from_secs(120));
    r.record_ms(-1.0);
    r.record_ms(f64::NAN);
    r.record_ratio(f64::INFINITY);
    assert_eq!(r.out_of_range(), 5);
    assert_eq!(r.len(), 2, "only in-range values are in the histogram");
    let p = r.percentiles();
    assert_eq!(p.count, 2);
    // The max is the true largest value seen (120 s), not the range's top.
    assert_eq!(p.max, 120_000.0);
    // The histogram's max is the 60 s value's bucket, not the 61 s or 120 s ones.
    assert_eq!(
        r.histogram().max(),
        r.histogram().highest_equivalent(HIGHEST_TICKS)
    );
    assert_eq!(r.histogram().count_at(HIGHEST_TICKS), 1);
    assert!(close(p.p99, HIGHEST_TICKS as f64 / TICKS_PER_UNIT), "{p:?}");
}

#[test]
fn merge_adds_values_and_out_of_range_and_refuses_other_metrics() {
    let mut a = LatencyRecorder::new(Metric::BinWalk);
    let mut b = LatencyRecorder::new(Metric::BinWalk);
    a.record_ms(1.0);
    b.record_ms(3.0);
    b.record_ticks(HIGHEST_TICKS * 2);
    a.merge(&b).unwrap();
    assert_eq!(a.len(), 2);
    assert_eq!(a.out_of_range(), 1);
    assert_eq!(
        a.percentiles().max,
        HIGHEST_TICKS as f64 * 2.0 / TICKS_PER_UNIT
    );
    let c = LatencyRecorder::new(Metric::SimLatency);
    assert!(matches!(
        a.merge(&c),
        Err(ReportError::MetricMismatch { .. })
    ));
}

#[test]
fn metric_table_has_distinct_files_and_valid_tags() {
    let mut files: Vec<_> = Metric::ALL.iter().map(|m| m.file_name()).collect();
    let mut tags: Vec<_> = Metric::ALL.iter().map(|m| m.tag()).collect();
    for m in Metric::ALL {
        assert!(m.file_name().ends_with(".hlog"), "{m:?}");
        assert!(!m.tag().contains([' ', ',', '\n', '\r']), "{m:?}");
        assert!(!m.tick_unit().is_empty());
    }
    files.sort();
    files.dedup();
    tags.sort();
    tags.dedup();
    assert_eq!(files.len(), Metric::ALL.len());
    assert_eq!(tags.len(), Metric::ALL.len());
    let wanted = ["makespan.hlog", "bin_walk.hlog", "sim_latency.hlog"];
    for w in wanted {
        assert!(files.contains(&w), "{w} missing");
    }
}

#[test]
fn interval_log_round_trips_through_the_hdrhistogram_reader() {
    let mut r = LatencyRecorder::new(Metric::SimLatency);
    for us in 1..=500u64 {
        r.record_ticks(us * 7);
    }
    r.close_interval(Duration::from_secs(10));
    for us in 1..=300u64 {
        r.record_ticks(us * 11);
    }
    r.close_interval(Duration::from_secs(20));
    r.record_ticks(HIGHEST_TICKS + 5); // out of range: in the comment, not the log
    for us in 1..=100u64 {
        r.record_ticks(us);
    }
    let start = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let mut bytes = Vec::new();
    r.write_interval_log(&mut bytes, start, Duration::from_secs(25))
        .unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(text.contains("out of range (not recorded): 1"), "{text}");

    // Read back with hdrhistogram's own iterator.
    let mut intervals = Vec::new();
    let mut start_time = None;
    for entry in IntervalLogIterator::new(&bytes) {
        match entry.unwrap() {
            LogEntry::StartTime(t) => start_time = Some(t),
            LogEntry::Interval(i) => intervals.push((
                i.tag().map(|t| t.as_str().to_string()),
                i.start_timestamp(),
                i.duration(),
            )),
            LogEntry::BaseTime(_) => {}
        }
    }
    assert_eq!(start_time, Some(Duration::from_secs(1_700_000_000)));
    assert_eq!(intervals.len(), 3);
    let tag = Some(Metric::SimLatency.tag().to_string());
    assert_eq!(
        intervals[0],
        (tag.clone(), Duration::ZERO, Duration::from_secs(10))
    );
    assert_eq!(
        intervals[1],
        (
            tag.clone(),
            Duration::from_secs(10),
            Duration::from_secs(10)
        )
    );
    assert_eq!(
        intervals[2],
        (tag, Duration::from_secs(20), Duration::from_secs(5))
    );

    // And the decoded histograms hold the same counts.
    let decoded = read_interval_log(&bytes).unwrap();
    let counts: Vec<u64> = decoded.iter().map(|i| i.histogram.len()).collect();
    assert_eq!(counts, [500, 300, 100]);
    assert_eq!(
        decoded[0].histogram.max(),
        r.histogram().highest_equivalent(3500)
    );
    let whole = read_log_histogram(&bytes).unwrap();
    assert_eq!(whole.len(), r.len());
    assert_eq!(whole.len(), 900);
    for q in [0.5, 0.9, 0.99, 1.0] {
        assert_eq!(
            whole.value_at_quantile(q),
            r.histogram().value_at_quantile(q),
            "q {q}"
        );
    }
}

#[test]
fn a_recorder_without_intervals_writes_one_whole_run_interval() {
    let mut r = LatencyRecorder::new(Metric::Makespan);
    r.record_ms(200.0);
    let log = r
        .to_hdr_log(SystemTime::now(), Duration::from_secs(3))
        .unwrap();
    assert_eq!(log.file_name, "makespan.hlog");
    let read = read_interval_log(&log.bytes).unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].length, Duration::from_secs(3));
    assert_eq!(read[0].histogram.len(), 1);
}

#[test]
fn a_garbled_log_is_refused() {
    let bad = b"#[StartTime: 1 (seconds since epoch)]\n0.000,1.000,0.2,HISTnotbase64!!\n";
    assert!(matches!(
        read_interval_log(bad),
        Err(ReportError::HdrLog { .. })
    ));
}
