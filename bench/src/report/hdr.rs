//! Latency recording with HdrHistogram, and its interval-log files.
//!
//! A [`LatencyRecorder`] holds one metric's values as integer ticks in a
//! fixed range (1 tick .. [`HIGHEST_TICKS`], 3 significant digits). A value
//! above the range is counted as out of range and never clamped or dropped
//! silently (issue 6); the report carries the count and gates fail on it.
//! The recorder applies no coordinated-omission correction: the driver
//! records end − intended start itself (issue 6, "without double
//! correction").
//!
//! Each metric is written to its own file in HdrHistogram's interval-log
//! format (`makespan.hlog`, `bin_walk.hlog`, `sim_latency.hlog`,
//! `makespan_over_lower_bound.hlog`), every interval tagged with the metric's
//! tag, readable by any HdrHistogram log reader. A streamed run writes those
//! files as it goes instead (the report's live logs), keeping no closed interval.

use std::io::Write;
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

use super::model::Percentiles;
use super::ReportError;

/// Ticks per reported unit: latencies are recorded in µs and reported in ms;
/// ratios are recorded in thousandths and reported as plain ratios.
pub const TICKS_PER_UNIT: f64 = 1000.0;

/// The largest recordable value in ticks: 60 s in µs (or a ratio of 60 000).
pub const HIGHEST_TICKS: u64 = 60_000_000;

/// Significant digits kept by every histogram (relative error ≤ 0.1 %).
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// A metric of the run report that has a histogram and a log file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Cycle makespan, recorded in µs.
    Makespan,
    /// One bin's solver walk, recorded in µs.
    BinWalk,
    /// One simulation, recorded in µs.
    SimLatency,
    /// Makespan over the cycle's plan-based lower bound, recorded in
    /// thousandths.
    MakespanOverLowerBound,
    /// Makespan over the cycle's lower bound on the cores the process may
    /// use (the same for every contender), recorded in thousandths.
    MakespanOverProcessBound,
}

impl Metric {
    /// Every metric, in the order reports list them.
    pub const ALL: [Metric; 5] = [
        Metric::Makespan,
        Metric::BinWalk,
        Metric::SimLatency,
        Metric::MakespanOverLowerBound,
        Metric::MakespanOverProcessBound,
    ];

    /// The log file's name inside the report directory.
    pub const fn file_name(self) -> &'static str {
        match self {
            Metric::Makespan => "makespan.hlog",
            Metric::BinWalk => "bin_walk.hlog",
            Metric::SimLatency => "sim_latency.hlog",
            Metric::MakespanOverLowerBound => "makespan_over_lower_bound.hlog",
            Metric::MakespanOverProcessBound => "makespan_over_process_bound.hlog",
        }
    }

    /// The tag every interval of this metric's log carries (no spaces or
    /// commas, as the log format requires).
    pub const fn tag(self) -> &'static str {
        match self {
            Metric::Makespan => "makespan_us",
            Metric::BinWalk => "bin_walk_us",
            Metric::SimLatency => "sim_latency_us",
            Metric::MakespanOverLowerBound => "makespan_over_lower_bound_milli",
            Metric::MakespanOverProcessBound => "makespan_over_process_bound_milli",
        }
    }

    /// The unit of one recorded tick, for log comments and axis labels.
    pub const fn tick_unit(self) -> &'static str {
        match self {
            Metric::MakespanOverLowerBound => "1/1000 of the lower bound",
            Metric::MakespanOverProcessBound => "1/1000 of the process lower bound",
            _ => "µs",
        }
    }
}

/// One metric's values over a run, split into intervals for the log.
///
/// Values are integer ticks (µs for latencies, thousandths for ratios); see
/// [`Metric`]. Not thread-safe: one recorder per recording thread, merged
/// with [`LatencyRecorder::merge`].
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    metric: Metric,
    total: Histogram<u64>,
    current: Histogram<u64>,
    current_start: Duration,
    closed: Vec<Interval>,
    out_of_range: u64,
    max_seen: u64,
}

/// A closed interval of a recorder: its start and length since the run
/// started, and its values, kept compressed (the V2 deflate encoding): a
/// full histogram of this range holds ≈ 140 KB of counters, so a long run
/// that kept one per interval would grow by that every second.
#[derive(Debug, Clone)]
struct Interval {
    start: Duration,
    length: Duration,
    compressed: Vec<u8>,
}

impl Interval {
    /// Compresses `histogram` for keeping.
    fn new(start: Duration, length: Duration, histogram: &Histogram<u64>) -> Self {
        let mut compressed = Vec::new();
        V2DeflateSerializer::new()
            .serialize(histogram, &mut compressed)
            .expect("serializing into memory cannot fail");
        Interval {
            start,
            length,
            compressed,
        }
    }

    /// The interval's values.
    fn histogram(&self) -> Result<Histogram<u64>, String> {
        Deserializer::new()
            .deserialize(&mut self.compressed.as_slice())
            .map_err(|e| format!("{e:?}"))
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_TICKS, SIGNIFICANT_DIGITS)
        .expect("constant histogram bounds are valid")
}

impl LatencyRecorder {
    /// An empty recorder for `metric`; its first interval starts at run
    /// time 0.
    pub fn new(metric: Metric) -> Self {
        LatencyRecorder {
            metric,
            total: new_histogram(),
            current: new_histogram(),
            current_start: Duration::ZERO,
            closed: Vec::new(),
            out_of_range: 0,
            max_seen: 0,
        }
    }

    /// The metric this recorder holds.
    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// Records one value in ticks. A value above [`HIGHEST_TICKS`] is counted
    /// as out of range (and still raises the max) but is not put in the
    /// histogram: it is never clamped.
    pub fn record_ticks(&mut self, ticks: u64) {
        self.max_seen = self.max_seen.max(ticks);
        if ticks > HIGHEST_TICKS {
            self.out_of_range += 1;
            return;
        }
        // In range by the check above, so recording cannot fail.
        self.total.record(ticks).expect("value checked in range");
        self.current.record(ticks).expect("value checked in range");
    }

    /// Records a duration as whole µs (rounded to nearest).
    pub fn record_duration(&mut self, d: Duration) {
        let us = (d.as_nanos() + 500) / 1000;
        self.record_ticks(u64::try_from(us).unwrap_or(u64::MAX));
    }

    /// Records milliseconds (e.g. `end − intended start` already in ms) as µs,
    /// rounded to nearest; a negative or non-finite value counts as out of
    /// range, as it cannot be a latency.
    pub fn record_ms(&mut self, ms: f64) {
        self.record_scaled(ms);
    }

    /// Records a ratio (e.g. makespan over lower bound) in thousandths,
    /// rounded to nearest; a negative or non-finite ratio counts as out of
    /// range.
    pub fn record_ratio(&mut self, ratio: f64) {
        self.record_scaled(ratio);
    }

    fn record_scaled(&mut self, units: f64) {
        let ticks = (units * TICKS_PER_UNIT).round();
        if !ticks.is_finite() || ticks < 0.0 {
            self.out_of_range += 1;
            return;
        }
        // f64 → u64 saturates; anything that large is out of range anyway.
        self.record_ticks(ticks as u64);
    }

    /// Values seen above the range (or negative / non-finite), not in the
    /// histogram.
    pub fn out_of_range(&self) -> u64 {
        self.out_of_range
    }

    /// In-range values recorded.
    pub fn len(&self) -> u64 {
        self.total.len()
    }

    /// True when no in-range value was recorded.
    pub fn is_empty(&self) -> bool {
        self.total.is_empty()
    }

    /// The whole run's histogram (in-range values, ticks).
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.total
    }

    /// Closes the current interval at `now` (time since the run started) and
    /// starts the next one there. An empty interval is still written, so
    /// quiet stretches show in the log. A `now` before the interval's start
    /// closes a zero-length interval.
    pub fn close_interval(&mut self, now: Duration) {
        let length = now.saturating_sub(self.current_start);
        self.closed
            .push(Interval::new(self.current_start, length, &self.current));
        self.current.reset();
        self.current_start += length;
    }

    /// Closes the current interval at `now` as [`close_interval`] does, but
    /// hands it to `sink` (its values, start and length since the run
    /// started) instead of keeping it, so a streamed run holds no interval
    /// in memory (a live log's writer is such a sink). The next interval
    /// starts at `now` even when the sink fails.
    ///
    /// Errors: what `sink` returns.
    ///
    /// [`close_interval`]: LatencyRecorder::close_interval
    pub fn close_interval_with<E>(
        &mut self,
        now: Duration,
        sink: impl FnOnce(&Histogram<u64>, Duration, Duration) -> Result<(), E>,
    ) -> Result<(), E> {
        let length = now.saturating_sub(self.current_start);
        let written = sink(&self.current, self.current_start, length);
        self.current.reset();
        self.current_start += length;
        written
    }

    /// Closed intervals kept in memory (0 when every interval went to a
    /// sink through [`LatencyRecorder::close_interval_with`]).
    pub fn closed_intervals(&self) -> usize {
        self.closed.len()
    }

    /// The open interval: its values so far (ticks) and its start since the
    /// run started.
    pub fn open_interval(&self) -> (&Histogram<u64>, Duration) {
        (&self.current, self.current_start)
    }

    /// Adds another recorder's values, out-of-range count and max into this
    /// one (its intervals are folded into the current interval).
    ///
    /// Errors: [`ReportError::MetricMismatch`] when `other` holds a different
    /// metric.
    pub fn merge(&mut self, other: &LatencyRecorder) -> Result<(), ReportError> {
        if other.metric != self.metric {
            return Err(ReportError::MetricMismatch {
                into: self.metric.tag(),
                from: other.metric.tag(),
            });
        }
        self.total
            .add(&other.total)
            .expect("same bounds always add");
        self.current
            .add(&other.total)
            .expect("same bounds always add");
        self.out_of_range += other.out_of_range;
        self.max_seen = self.max_seen.max(other.max_seen);
        Ok(())
    }

    /// The metric's percentiles in reported units (ms, or a plain ratio):
    /// p50/p95/p99/mean from the histogram (a percentile is the highest
    /// value equivalent to its bucket, capped at `max`), `max` the exact
    /// largest value seen (out-of-range ones included), `count` the
    /// in-range values.
    pub fn percentiles(&self) -> Percentiles {
        let h = &self.total;
        if h.is_empty() && self.max_seen == 0 {
            return Percentiles::default();
        }
        let max = self.max_seen as f64 / TICKS_PER_UNIT;
        // A bucket's highest equivalent value can lie above the exact max;
        // a percentile never exceeds the largest value actually seen.
        let q = |quantile: f64| {
            if h.is_empty() {
                0.0
            } else {
                (h.value_at_quantile(quantile) as f64 / TICKS_PER_UNIT).min(max)
            }
        };
        Percentiles {
            p50: q(0.50),
            p95: q(0.95),
            p99: q(0.99),
            max,
            mean: if h.is_empty() {
                0.0
            } else {
                h.mean() / TICKS_PER_UNIT
            },
            count: h.len(),
        }
    }

    /// Writes the metric's interval log: a header comment naming the metric
    /// and its tick unit, `StartTime` = `run_start`, then every closed
    /// interval and the still-open one (ending at `run_end`, time since the
    /// run started), each tagged with [`Metric::tag`].
    ///
    /// Errors: [`ReportError::HdrLog`] when writing or serializing fails.
    pub fn write_interval_log<W: Write>(
        &self,
        out: &mut W,
        run_start: SystemTime,
        run_end: Duration,
    ) -> Result<(), ReportError> {
        let wrap = |e: String| ReportError::HdrLog {
            metric: self.metric.tag(),
            reason: e,
        };
        let mut serializer = V2DeflateSerializer::new();
        let mut builder = IntervalLogWriterBuilder::new();
        builder
            .add_comment(&format!(
                "fleet-lab {}: values in {}; out of range (not recorded): {}",
                self.metric.tag(),
                self.metric.tick_unit(),
                self.out_of_range
            ))
            .with_start_time(run_start)
            .with_max_value_divisor(TICKS_PER_UNIT);
        let mut writer = builder
            .begin_log_with(out, &mut serializer)
            .map_err(|e| wrap(e.to_string()))?;
        let tag = Tag::new(self.metric.tag()).expect("metric tags are valid log tags");
        for interval in &self.closed {
            writer
                .write_histogram(
                    &interval.histogram().map_err(&wrap)?,
                    interval.start,
                    interval.length,
                    Some(tag),
                )
                .map_err(|e| wrap(e.to_string()))?;
        }
        writer
            .write_histogram(
                &self.current,
                self.current_start,
                run_end.saturating_sub(self.current_start),
                Some(tag),
            )
            .map_err(|e| wrap(e.to_string()))?;
        Ok(())
    }

    /// [`LatencyRecorder::write_interval_log`] into a byte vector, named for
    /// the report directory.
    pub fn to_hdr_log(
        &self,
        run_start: SystemTime,
        run_end: Duration,
    ) -> Result<HdrLog, ReportError> {
        let mut bytes = Vec::new();
        self.write_interval_log(&mut bytes, run_start, run_end)?;
        Ok(HdrLog {
            file_name: self.metric.file_name().to_string(),
            bytes,
        })
    }
}

/// One metric's interval log, ready to be written into a report directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HdrLog {
    /// The file name inside the directory (e.g. `makespan.hlog`); a plain
    /// name, no separators.
    pub file_name: String,
    /// The log's bytes.
    pub bytes: Vec<u8>,
}

/// One interval read back from an interval log.
#[derive(Debug, Clone)]
pub struct ReadInterval {
    /// The interval's tag, if any.
    pub tag: Option<String>,
    /// Start, relative to the log's `StartTime`.
    pub start: Duration,
    /// Length of the interval.
    pub length: Duration,
    /// The interval's values, ticks.
    pub histogram: Histogram<u64>,
}

/// Reads every interval of an interval log (as written by
/// [`LatencyRecorder::write_interval_log`] or any HdrHistogram tool).
///
/// Errors: [`ReportError::HdrLog`] naming the byte offset of a line that
/// does not parse, or the interval whose histogram does not decode.
pub fn read_interval_log(bytes: &[u8]) -> Result<Vec<ReadInterval>, ReportError> {
    use base64::Engine as _;
    let bad = |reason: String| ReportError::HdrLog {
        metric: "interval log",
        reason,
    };
    let mut deserializer = Deserializer::new();
    let mut out = Vec::new();
    for entry in IntervalLogIterator::new(bytes) {
        let entry = entry.map_err(|e| bad(format!("unparsable log line: {e:?}")))?;
        let LogEntry::Interval(ilh) = entry else {
            continue;
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(ilh.encoded_histogram())
            .map_err(|e| bad(format!("interval {}: bad base64: {e}", out.len())))?;
        let histogram: Histogram<u64> = deserializer
            .deserialize(&mut raw.as_slice())
            .map_err(|e| bad(format!("interval {}: bad histogram: {e:?}", out.len())))?;
        out.push(ReadInterval {
            tag: ilh.tag().map(|t| t.as_str().to_string()),
            start: ilh.start_timestamp(),
            length: ilh.duration(),
            histogram,
        });
    }
    Ok(out)
}

/// Reads an interval log and adds all its intervals into one histogram
/// (ticks), e.g. a whole run's `sim_latency.hlog`.
///
/// Errors: as [`read_interval_log`]; [`ReportError::HdrLog`] when an
/// interval's range does not fit the recorder's ([`HIGHEST_TICKS`]).
pub fn read_log_histogram(bytes: &[u8]) -> Result<Histogram<u64>, ReportError> {
    let mut total = new_histogram();
    for (i, interval) in read_interval_log(bytes)?.iter().enumerate() {
        total
            .add(&interval.histogram)
            .map_err(|e| ReportError::HdrLog {
                metric: "interval log",
                reason: format!("interval {i} does not fit the range 1..{HIGHEST_TICKS}: {e:?}"),
            })?;
    }
    Ok(total)
}
