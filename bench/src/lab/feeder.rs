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
    /// Posture edges and throttled samples, ms since the run's start.
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
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(period);
                    let now_ms = t0.elapsed().as_millis() as u64;
                    let reading = match sampler.sample() {
                        Ok(r) => r,
                        Err(e) => {
                            shared.lock().error = Some(e.to_string());
                            return;
                        }
                    };
                    let sample = ThrottleSample::from(reading);
                    let edge = posture.observe(sample, now_ms);
                    let mut log = shared.lock();
                    log.samples += 1;
                    log.events += sample.events;
                    log.throttled_us += sample.throttled_us;
                    if sample.is_throttled() {
                        log.timeline.push(TimelineEvent {
                            t_ms: now_ms as f64,
                            kind: TimelineKind::Throttle,
                            detail: format!(
                                "{} events, {:.1} ms throttled",
                                sample.events,
                                sample.throttled_us as f64 / 1e3
                            ),
                        });
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
