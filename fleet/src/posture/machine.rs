//! The pure posture machine: `Nominal ⇄ Cordoned`, time as an argument.
//!
//! Source: `DESIGN.md` §3 "Posture". Enter when the events in the enter
//! window reach `cordon_enter_events`, or the throttled duty over the duty
//! window exceeds `cordon_duty_percent`. Exit when no throttling was seen
//! for `cordon_exit_clean_ms`. A lane death cordons for the rest of the
//! process (sticky). No clocks, threads or I/O here.

use super::{Posture, PostureCause, PosturePolicy, ThrottleSample, Transition};
use std::collections::VecDeque;

/// The posture state machine. Feed it samples with a monotonic `now_ms`.
#[derive(Debug, Clone)]
pub struct PostureMachine {
    policy: PosturePolicy,
    posture: Posture,
    /// Throttled samples `(t_ms, events, throttled_us)`, oldest first.
    window: VecDeque<(u64, u64, u64)>,
    last_dirty_ms: Option<u64>,
    lane_dead: bool,
    cordoned_since_ms: Option<u64>,
}

impl PostureMachine {
    /// A nominal machine. The policy is assumed valid ([`PosturePolicy::validate`]).
    pub fn new(policy: PosturePolicy) -> Self {
        PostureMachine {
            policy,
            posture: Posture::Nominal,
            window: VecDeque::new(),
            last_dirty_ms: None,
            lane_dead: false,
            cordoned_since_ms: None,
        }
    }

    /// The posture now.
    pub fn posture(&self) -> Posture {
        self.posture
    }

    /// The policy in force.
    pub fn policy(&self) -> &PosturePolicy {
        &self.policy
    }

    /// Whether a lane death was marked (sticky).
    pub fn lane_dead(&self) -> bool {
        self.lane_dead
    }

    /// When the current cordon began, ms; `None` when nominal.
    pub fn cordoned_since_ms(&self) -> Option<u64> {
        self.cordoned_since_ms
    }

    /// Swap the policy, keeping the posture and the sample window.
    pub fn set_policy(&mut self, policy: PosturePolicy) {
        self.policy = policy;
    }

    /// Events and throttled µs of the samples within `window_ms` before `now_ms`.
    fn sums(&self, now_ms: u64, window_ms: u64) -> (u64, u64) {
        self.window
            .iter()
            .filter(|(t, _, _)| now_ms.saturating_sub(*t) < window_ms)
            .fold((0, 0), |(e, us), (_, de, dus)| (e + de, us + dus))
    }

    fn enter(&mut self, now_ms: u64, cause: PostureCause) -> Option<Transition> {
        if self.posture == Posture::Cordoned {
            return None;
        }
        self.posture = Posture::Cordoned;
        self.cordoned_since_ms = Some(now_ms);
        Some(Transition {
            from: Posture::Nominal,
            to: Posture::Cordoned,
            cause,
            at_ms: now_ms,
        })
    }

    /// Observe one sample covering the time up to `now_ms`. Returns the
    /// edge it caused, if any.
    pub fn observe(&mut self, sample: ThrottleSample, now_ms: u64) -> Option<Transition> {
        let p = self.policy;
        if sample.is_throttled() {
            self.window
                .push_back((now_ms, sample.events, sample.throttled_us));
            self.last_dirty_ms = Some(now_ms);
        }
        let horizon = p.cordon_enter_window_ms.max(p.cordon_duty_window_ms);
        while self
            .window
            .front()
            .is_some_and(|(t, _, _)| now_ms.saturating_sub(*t) >= horizon)
        {
            self.window.pop_front();
        }
        match self.posture {
            Posture::Nominal => {
                let (events, _) = self.sums(now_ms, p.cordon_enter_window_ms);
                if events >= p.cordon_enter_events as u64 {
                    let cause = PostureCause::ThrottleEvents {
                        events,
                        window_ms: p.cordon_enter_window_ms,
                    };
                    return self.enter(now_ms, cause);
                }
                let (_, us) = self.sums(now_ms, p.cordon_duty_window_ms);
                let duty = us as f64 / (p.cordon_duty_window_ms as f64 * 1000.0) * 100.0;
                if duty > p.cordon_duty_percent {
                    let cause = PostureCause::ThrottleDuty {
                        duty_percent: duty,
                        window_ms: p.cordon_duty_window_ms,
                    };
                    return self.enter(now_ms, cause);
                }
                None
            }
            Posture::Cordoned => {
                if self.lane_dead {
                    return None;
                }
                let since = self
                    .last_dirty_ms
                    .or(self.cordoned_since_ms)
                    .unwrap_or(now_ms);
                let clean = now_ms.saturating_sub(since);
                if clean >= p.cordon_exit_clean_ms {
                    self.posture = Posture::Nominal;
                    self.cordoned_since_ms = None;
                    return Some(Transition {
                        from: Posture::Cordoned,
                        to: Posture::Nominal,
                        cause: PostureCause::CleanWindow { clean_ms: clean },
                        at_ms: now_ms,
                    });
                }
                None
            }
        }
    }

    /// Mark a lane death at `now_ms`: cordons (if not already) and never
    /// exits again in this process.
    pub fn mark_lane_death(&mut self, now_ms: u64) -> Option<Transition> {
        self.lane_dead = true;
        self.enter(now_ms, PostureCause::LaneDeath)
    }
}
