//! An interval log written to disk as the run goes.
//!
//! A kept recorder holds every closed interval (compressed) until the end of
//! the run, about 0.1–1 KB per metric per second of run time, so an hour's
//! soak grows by a few hundred KB for its logs alone. A streamed run
//! (`--stream DIR`) closes each interval into a [`LiveLog`] instead: the
//! line goes to `DIR/<metric>.hlog` and nothing of it stays in memory. The
//! file is a valid interval log at every moment (readable by any
//! HdrHistogram log reader while the run goes), and at the end
//! [`LiveLog::finish`] appends the last interval and a closing comment with
//! the out-of-range count, then hands the whole log back for the report
//! directory.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;

use super::hdr::{HdrLog, LatencyRecorder, Metric, TICKS_PER_UNIT};

/// One metric's interval log, open for appending in a stream directory.
pub struct LiveLog {
    metric: Metric,
    path: PathBuf,
    out: BufWriter<File>,
    serializer: V2DeflateSerializer,
    /// One interval's line, rebuilt for each append.
    scratch: Vec<u8>,
}

impl LiveLog {
    /// Creates (or replaces) `dir/<metric file name>` and writes the log's
    /// header: a comment naming the metric and its tick unit, `StartTime` =
    /// `run_start` and the max-value divisor.
    ///
    /// Errors: the I/O error creating or writing the file.
    pub fn create(dir: &Path, metric: Metric, run_start: SystemTime) -> std::io::Result<Self> {
        let path = dir.join(metric.file_name());
        let mut out = BufWriter::new(File::create(&path)?);
        let mut serializer = V2DeflateSerializer::new();
        let mut builder = IntervalLogWriterBuilder::new();
        builder
            .add_comment(&format!(
                "fleet-lab {}: values in {}; written as the run goes",
                metric.tag(),
                metric.tick_unit()
            ))
            .with_start_time(run_start)
            .with_max_value_divisor(TICKS_PER_UNIT);
        builder.begin_log_with(&mut out, &mut serializer)?;
        out.flush()?;
        Ok(LiveLog {
            metric,
            path,
            out,
            serializer,
            scratch: Vec::new(),
        })
    }

    /// The metric this log holds.
    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one interval (`start` and `length` since the run started,
    /// values in ticks) and flushes it to the file.
    ///
    /// Errors: the I/O error writing, or a serialization failure as
    /// [`std::io::ErrorKind::InvalidData`].
    pub fn append(
        &mut self,
        histogram: &Histogram<u64>,
        start: Duration,
        length: Duration,
    ) -> std::io::Result<()> {
        self.scratch.clear();
        {
            let mut builder = IntervalLogWriterBuilder::new();
            builder.with_max_value_divisor(TICKS_PER_UNIT);
            let mut writer = builder.begin_log_with(&mut self.scratch, &mut self.serializer)?;
            let tag = Tag::new(self.metric.tag()).expect("metric tags are valid log tags");
            writer
                .write_histogram(histogram, start, length, Some(tag))
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
        }
        // The scratch writer repeats the divisor header: keep only the
        // interval's line.
        for line in self.scratch.split_inclusive(|b| *b == b'\n') {
            if !line.starts_with(b"#") {
                self.out.write_all(line)?;
            }
        }
        self.out.flush()
    }

    /// Closes `recorder`'s current interval at `now` (time since the run
    /// started) into this log instead of keeping it in memory; the next
    /// interval starts at `now` even when writing fails.
    ///
    /// Errors: the I/O error writing the log.
    pub fn close_from(
        &mut self,
        recorder: &mut LatencyRecorder,
        now: Duration,
    ) -> std::io::Result<()> {
        recorder.close_interval_with(now, |h, start, length| self.append(h, start, length))
    }

    /// Closes the log: appends `last`'s open interval (ending at `run_end`,
    /// time since the run started) and a comment with its out-of-range
    /// count, flushes, and reads the whole file back for the report
    /// directory.
    ///
    /// Errors: the I/O error writing or reading back.
    pub fn finish(mut self, last: &LatencyRecorder, run_end: Duration) -> std::io::Result<HdrLog> {
        let (histogram, start) = last.open_interval();
        self.append(histogram, start, run_end.saturating_sub(start))?;
        writeln!(
            self.out,
            "#fleet-lab {}: out of range (not recorded): {}",
            self.metric.tag(),
            last.out_of_range()
        )?;
        self.out.flush()?;
        Ok(HdrLog {
            file_name: self.metric.file_name().to_string(),
            bytes: std::fs::read(&self.path)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::hdr::read_interval_log;

    fn recorder_with(values: &[&[u64]], live: Option<&mut LiveLog>) -> LatencyRecorder {
        let mut r = LatencyRecorder::new(Metric::Makespan);
        let mut live = live;
        for (i, chunk) in values.iter().enumerate() {
            for v in *chunk {
                r.record_ticks(*v);
            }
            let now = Duration::from_secs(i as u64 + 1);
            match live.as_deref_mut() {
                Some(log) => log.close_from(&mut r, now).unwrap(),
                None => r.close_interval(now),
            }
        }
        r
    }

    #[test]
    fn a_live_log_holds_the_same_intervals_as_a_kept_one_and_keeps_none_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let values: [&[u64]; 3] = [&[10, 20, 30], &[], &[5, 70_000_000, 400]];
        let mut live = LiveLog::create(dir.path(), Metric::Makespan, start).unwrap();
        let mut streamed = recorder_with(&values, Some(&mut live));
        let mut kept = recorder_with(&values, None);
        assert_eq!(streamed.closed_intervals(), 0, "nothing kept in memory");
        assert_eq!(kept.closed_intervals(), 3);
        // Readable while the run goes: the three closed intervals are there.
        let so_far = read_interval_log(&std::fs::read(live.path()).unwrap()).unwrap();
        assert_eq!(so_far.len(), 3);
        for r in [&mut streamed, &mut kept] {
            r.record_ticks(99);
        }
        let end = Duration::from_millis(3_500);
        let log = live.finish(&streamed, end).unwrap();
        assert_eq!(log.file_name, "makespan.hlog");
        let text = String::from_utf8(log.bytes.clone()).unwrap();
        assert!(text.contains("#[StartTime: 1700000000.000"), "{text}");
        assert!(text.contains("out of range (not recorded): 1"), "{text}");
        let from_live = read_interval_log(&log.bytes).unwrap();
        let kept_log = kept.to_hdr_log(start, end).unwrap();
        let from_kept = read_interval_log(&kept_log.bytes).unwrap();
        assert_eq!(from_live.len(), 4);
        assert_eq!(from_live.len(), from_kept.len());
        for (a, b) in from_live.iter().zip(&from_kept) {
            assert_eq!(a.tag.as_deref(), Some("makespan_us"));
            assert_eq!(
                (a.tag.as_deref(), a.start, a.length),
                (b.tag.as_deref(), b.start, b.length)
            );
            assert_eq!(a.histogram, b.histogram);
        }
        assert_eq!(from_live[3].start, Duration::from_secs(3));
        assert_eq!(from_live[3].length, Duration::from_millis(500));
        assert_eq!(from_live[3].histogram.len(), 1);
        // The file on disk is the log handed back.
        assert_eq!(
            std::fs::read(dir.path().join("makespan.hlog")).unwrap(),
            log.bytes
        );
    }

    #[test]
    fn a_live_log_in_a_missing_directory_is_an_io_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no/such/dir");
        let err = LiveLog::create(&missing, Metric::BinWalk, SystemTime::now())
            .err()
            .expect("cannot create");
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }
}
