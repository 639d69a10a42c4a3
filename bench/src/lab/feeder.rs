//! The throttle feeder: samples a cgroup's `cpu.stat` on a fixed period,
//! feeds the posture owner, and on every posture edge wakes the fleet's hosts
//! (`PostureEdge`) and notes the edge on the run's timeline.
//!
//! This is the bot-side waker of seed 003 ("PostureEdge delivery"): a
//! hint to re-read the live guard, never a value.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fleet::posture::{Posture, PostureOwner, ThrottleSample};
use fleet::quota::ThrottleSampler;
use fleet::waker::PostureWaker;
use parking_lot::Mutex;

use crate::report::{TimelineEvent, TimelineKind};

/// What the feeder saw over its life.
#[derive(Debug, Clone, Default)]
pub struct FeederLog {
    /// Throttle events (periods throttled) summed over the samples.
    pub events: u64,
    /// Time throttled, µs, summed over the samples.
    pub throttled_us: u64,
    /// Posture edges and throttle episodes, ms since the run's start. An
    /// episode is a run of consecutive throttled samples, noted once at its
    /// first sample ([`Episode`]): a long quota shrink is one event, not
    /// one per sample (which a one-hour soak would keep by the thousand).
    pub timeline: Vec<TimelineEvent>,
    /// Samples taken.
    pub samples: u64,
    /// The first sampling error, if sampling stopped early.
    pub error: Option<String>,
}

/// A running feeder thread (`lab-throttle`).
pub struct Feeder {
    stop: Arc<AtomicBool>,
    join: Option<JoinHandle<()>>,
    log: Arc<Mutex<FeederLog>>,
}

impl Feeder {
    /// Starts sampling with `sampler` (built for the cgroup that limits:
    /// `ThrottleSampler::for_report`) every `period`, feeding `posture` and
    /// waking `waker`'s hosts on each edge. `t0` is the run's start.
    pub fn start(
        mut sampler: ThrottleSampler,
        period: Duration,
        posture: Arc<PostureOwner>,
        waker: Option<Arc<PostureWaker>>,
        t0: Instant,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(FeederLog::default()));
        let (flag, shared) = (stop.clone(), log.clone());
        let join = std::thread::Builder::new()
            .name("lab-throttle".into())
            .spawn(move || {
                let mut episode: Option<Episode> = None;
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(period);
                    let now_ms = t0.elapsed().as_millis() as u64;
                    let reading = match sampler.sample() {
                        Ok(r) => r,
                        Err(e) => {
                            shared.lock().error = Some(e.to_string());
                            break;
                        }
                    };
                    let sample = ThrottleSample::from(reading);
                    let edge = posture.observe(sample, now_ms);
                    let mut log = shared.lock();
                    log.samples += 1;
                    log.events += sample.events;
                    log.throttled_us += sample.throttled_us;
                    if sample.is_throttled() {
                        episode
                            .get_or_insert_with(|| Episode::new(now_ms))
                            .add(now_ms, sample);
                    } else if let Some(e) = episode.take() {
                        log.timeline.push(e.event());
                    }
                    if let Some(t) = edge {
                        let kind = if t.to == Posture::Cordoned {
                            TimelineKind::PostureEnter
                        } else {
                            TimelineKind::PostureExit
                        };
                        log.timeline.push(TimelineEvent {
                            t_ms: now_ms as f64,
                            kind,
                            detail: format!("{:?}", t.cause),
                        });
                        drop(log);
                        if let Some(w) = &waker {
                            w.notify(posture.seq());
                        }
                    }
                }
                if let Some(e) = episode.take() {
                    shared.lock().timeline.push(e.event());
                }
            })
            .expect("spawning the throttle feeder thread");
        Feeder {
            stop,
            join: Some(join),
            log,
        }
    }

    /// Stops the feeder and returns what it saw.
    pub fn finish(mut self) -> FeederLog {
        self.halt();
        self.log.lock().clone()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

impl Drop for Feeder {
    fn drop(&mut self) {
        self.halt();
    }
}

/// A run of consecutive throttled samples: one timeline event at its first
/// sample, with how long it lasted and what it summed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Episode {
    /// The first throttled sample, ms since the run's start.
    pub start_ms: u64,
    /// The last throttled sample, ms since the run's start.
    pub last_ms: u64,
    /// Throttled samples in the run.
    pub samples: u64,
    /// Throttle events (periods throttled) summed.
    pub events: u64,
    /// Time throttled, µs, summed.
    pub throttled_us: u64,
}

impl Episode {
    /// An episode opening at `start_ms` (its first sample still to add).
    pub fn new(start_ms: u64) -> Self {
        Episode {
            start_ms,
            last_ms: start_ms,
            samples: 0,
            events: 0,
            throttled_us: 0,
        }
    }

    /// Adds one throttled sample taken at `now_ms`.
    pub fn add(&mut self, now_ms: u64, sample: ThrottleSample) {
        self.last_ms = self.last_ms.max(now_ms);
        self.samples += 1;
        self.events = self.events.saturating_add(sample.events);
        self.throttled_us = self.throttled_us.saturating_add(sample.throttled_us);
    }

    /// The episode as one `throttle` timeline event at its first sample.
    pub fn event(&self) -> TimelineEvent {
        TimelineEvent {
            t_ms: self.start_ms as f64,
            kind: TimelineKind::Throttle,
            detail: format!(
                "{} throttled sample(s) over {:.1} s: {} events, {:.1} ms throttled",
                self.samples,
                (self.last_ms - self.start_ms) as f64 / 1e3,
                self.events,
                self.throttled_us as f64 / 1e3
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_throttled_samples_are_one_event_at_the_first() {
        let hit = |events, us| ThrottleSample {
            events,
            throttled_us: us,
        };
        let mut e = Episode::new(1_000);
        e.add(1_000, hit(2, 1_500));
        e.add(1_100, hit(1, 500));
        e.add(43_000, hit(3, 2_000));
        assert_eq!(
            e,
            Episode {
                start_ms: 1_000,
                last_ms: 43_000,
                samples: 3,
                events: 6,
                throttled_us: 4_000
            }
        );
        let ev = e.event();
        assert_eq!((ev.t_ms, ev.kind), (1_000.0, TimelineKind::Throttle));
        assert_eq!(
            ev.detail,
            "3 throttled sample(s) over 42.0 s: 6 events, 4.0 ms throttled"
        );
    }
}
