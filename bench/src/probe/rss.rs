//! A resident-set series of bounded size, so that measuring a long run's
//! memory does not itself grow the memory measured.
//!
//! Samples arrive about once a second. The series keeps at most
//! [`RSS_KEPT`] of them in a buffer allocated up front: when it is full,
//! every other kept sample is dropped and from then on only every second
//! arriving sample is kept (the stride doubles), so the kept samples stay
//! evenly spaced over the whole run. The first and last samples and the
//! peak are exact whatever the stride.

/// The most samples a series keeps (32 KiB of buffer; a 68-minute run at
/// one sample a second keeps every other one).
pub const RSS_KEPT: usize = 2048;

/// Resident-set samples: (seconds since sampling began, KiB).
#[derive(Debug, Clone, PartialEq)]
pub struct RssSeries {
    kept: Vec<(f64, u64)>,
    /// Keep one arriving sample in `stride`.
    stride: u64,
    /// Samples arrived so far.
    arrived: u64,
    /// The newest sample, kept or not.
    last: Option<(f64, u64)>,
    /// The largest sample seen.
    peak: Option<(f64, u64)>,
}

impl Default for RssSeries {
    fn default() -> Self {
        RssSeries {
            kept: Vec::with_capacity(RSS_KEPT),
            stride: 1,
            arrived: 0,
            last: None,
            peak: None,
        }
    }
}

impl RssSeries {
    /// Adds one sample (`at`: seconds since sampling began).
    pub fn push(&mut self, at: f64, kib: u64) {
        if self.arrived.is_multiple_of(self.stride) {
            if self.kept.len() == RSS_KEPT {
                let mut i = 0;
                self.kept.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride *= 2;
            }
            if self.arrived.is_multiple_of(self.stride) {
                self.kept.push((at, kib));
            }
        }
        self.arrived += 1;
        self.last = Some((at, kib));
        if self.peak.is_none_or(|(_, p)| kib > p) {
            self.peak = Some((at, kib));
        }
    }

    /// The kept samples, evenly spaced, with the newest sample appended
    /// when the stride skipped it: at most [`RSS_KEPT`] + 1.
    pub fn samples(&self) -> Vec<(f64, u64)> {
        let mut out = self.kept.clone();
        if let Some(last) = self.last {
            if out.last() != Some(&last) {
                out.push(last);
            }
        }
        out
    }

    /// The largest sample seen: (seconds, KiB).
    pub fn peak(&self) -> Option<(f64, u64)> {
        self.peak
    }

    /// Samples arrived, kept or not.
    pub fn arrived(&self) -> u64 {
        self.arrived
    }

    /// True when no sample arrived.
    pub fn is_empty(&self) -> bool {
        self.arrived == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_series_keeps_every_sample() {
        let mut s = RssSeries::default();
        assert!(s.is_empty());
        assert_eq!(s.samples(), vec![]);
        for i in 0..10u64 {
            s.push(i as f64, 100 + i);
        }
        assert_eq!(s.samples().len(), 10);
        assert_eq!(s.peak(), Some((9.0, 109)));
        assert_eq!(s.arrived(), 10);
    }

    #[test]
    fn a_long_series_stays_bounded_evenly_spaced_and_keeps_first_last_and_peak() {
        let mut s = RssSeries::default();
        let capacity = s.kept.capacity();
        // 3 hours at one sample a second, with one spike between kept samples.
        let n = 3 * 3600u64;
        for i in 0..n {
            let kib = if i == 5_001 { 99_999 } else { 1_000 + i / 100 };
            s.push(i as f64, kib);
            assert!(s.kept.len() <= RSS_KEPT, "at {i}");
        }
        assert_eq!(s.kept.capacity(), capacity, "the buffer never grows");
        let samples = s.samples();
        assert!(samples.len() <= RSS_KEPT + 1);
        assert!(samples.len() > RSS_KEPT / 2, "{}", samples.len());
        assert_eq!(samples[0], (0.0, 1_000), "the first sample stays");
        let last = (n - 1) as f64;
        assert_eq!(
            samples.last().unwrap().0,
            last,
            "the newest sample is there"
        );
        // Even spacing: every gap between kept samples is the stride.
        let gaps: Vec<f64> = samples[..samples.len() - 1]
            .windows(2)
            .map(|w| w[1].0 - w[0].0)
            .collect();
        assert!(gaps.iter().all(|g| *g == s.stride as f64), "{gaps:?}");
        assert_eq!(s.stride, 8);
        assert!(
            !samples.contains(&(5_001.0, 99_999)),
            "the spike fell between"
        );
        assert_eq!(
            s.peak(),
            Some((5_001.0, 99_999)),
            "and the peak is still exact"
        );
    }
}
