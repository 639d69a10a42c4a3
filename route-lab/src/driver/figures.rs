//! The driver's figures: regret against the oracle, the router's events
//! (drift, adapter clusters), the periodic samples and the final report.
//! Source: `ROUTING.md` §5 (figures), `docs/routing-lab.md` (definitions).

use router::events::Event;

use super::{Cause, Driver, MIN_DEPOSITS_FOR_TRUST};
use crate::report::{
    auc, Budget, ContenderReport, DriftMark, EventFigures, Sample, Timing, TrustHistogram,
};
use crate::world::{HashKind, ARCHETYPES};
use crate::SimError;

/// `a / b`, 0 when `b` is not positive.
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

impl Driver<'_> {
    /// Device-seconds online up to `t`: closed spells plus the open ones.
    pub(super) fn online_time(&self, t: f64) -> f64 {
        self.acc.online_s
            + self
                .devs
                .iter()
                .filter(|st| st.online)
                .map(|st| (t - st.online_since).max(0.0))
                .sum::<f64>()
    }

    /// Regret of the routed choice against the oracle among the archetypes
    /// online now, for an item of work kind `kind`.
    pub(super) fn regret(&mut self, d: usize, k: usize, t: f64, kind: &str) {
        let w = self.world;
        let s = w.targets[k].source;
        let a = w.devices[d].archetype;
        let (fa, ca) = w.objective(s, a, t);
        let mut best = (fa + ca, fa, ca);
        for o in 0..4 {
            if self.online[o] == 0 {
                continue;
            }
            let (f, c) = w.objective(s, o, t);
            if f + c < best.0 {
                best = (f + c, f, c);
            }
        }
        self.acc.regret_failures += fa - best.1;
        self.acc.regret_cost += ca - best.2;
        let parts = self.acc.regret_by_kind.entry(kind.to_string()).or_default();
        parts.failures += fa - best.1;
        parts.cost += ca - best.2;
        super::changes::count_regret(&mut self.acc.changes, s, t, (fa - best.1, ca - best.2));
        if let Some((rs, ra, from)) = w.regime {
            if rs == s && ra == a {
                if t >= from {
                    self.acc.blocked_attempts_after += 1;
                } else if t >= from - 3600.0 {
                    self.acc.blocked_attempts_before += 1;
                }
            }
        }
    }

    pub(super) fn event(&mut self, ev: Event) {
        match ev {
            Event::DriftConfirmed {
                t_s,
                cell,
                option,
                dimension,
                ..
            } => {
                let w = self.world;
                let truth_changed = w.regime.is_some_and(|(s, a, from)| {
                    t_s >= from
                        && cell == format!("{}/{}", w.sources[s].name, w.sources[s].binding)
                        && option == ARCHETYPES[a]
                });
                if truth_changed && self.acc.event.drift_delay_s.is_none() {
                    self.acc.event.drift_delay_s = w.regime.map(|(_, _, from)| t_s - from);
                }
                self.acc.drift.push(DriftMark {
                    t_s,
                    cell,
                    option,
                    dimension,
                    false_alarm: !truth_changed,
                });
            }
            Event::AdapterDisagreement {
                t_s,
                source,
                version,
                restored,
                ..
            } => self
                .acc
                .event
                .adapter_events
                .push((t_s, source, version, restored)),
            _ => {}
        }
    }

    pub(super) fn snapshot_trust(&mut self) {
        let mut known = Vec::new();
        for (d, dev) in self.world.devices.iter().enumerate() {
            if let Some(tau) = self.port.trust(&dev.id) {
                self.acc.trust_at_bug.insert(dev.id.clone(), tau);
                known.push((d, tau));
            }
        }
        if let Some(l) = self.ledger.as_mut() {
            l.start(known);
        }
    }

    /// Before device `d` deposits on `target`: the observation the router
    /// will compare it with (as the ledger mirrors it), both devices' trust
    /// synced first. `None` without a ledger or an earlier observation.
    pub(super) fn before_comparison(
        &mut self,
        d: usize,
        target: usize,
        t: f64,
    ) -> Option<(usize, String, HashKind)> {
        let l = self.ledger.as_mut()?;
        let (o, hash, kind) = l.other(target, d).map(|(o, h, k)| (o, h.to_string(), k))?;
        for x in [d, o] {
            if let Some(tau) = self.port.trust(&self.world.devices[x].id) {
                l.sync(x, tau, t);
            }
        }
        Some((o, hash, kind))
    }

    /// After device `d`'s accepted observation `hash` of `target`: both
    /// sides' trust moves tagged with the comparison's cause, and the
    /// observation mirrored.
    pub(super) fn after_comparison(
        &mut self,
        d: usize,
        target: usize,
        compared: Option<(usize, String, HashKind)>,
        hash: &str,
        kind: HashKind,
        t: f64,
    ) {
        let Some(l) = self.ledger.as_mut() else {
            return;
        };
        if let Some((o, other_hash, other_kind)) = compared {
            let cause = Cause::of(kind, other_kind, other_hash == hash);
            for x in [d, o] {
                if let Some(tau) = self.port.trust(&self.world.devices[x].id) {
                    l.moved(x, tau, cause, t);
                }
            }
        }
        l.push(target, d, hash.to_string(), kind);
    }

    pub(super) fn sample(&mut self, t: f64) {
        let w = self.world;
        let (mut settled, mut correct, mut fresh) = (0usize, 0usize, 0usize);
        let rows = self.port.settled_rows();
        for (k, target) in w.targets.iter().enumerate() {
            if !self.arrived[target.source] {
                continue;
            }
            if let Some(h) = rows.get(&target.name).map(String::as_str) {
                settled += 1;
                if w.genuine(k, h, t) {
                    correct += 1;
                }
                if w.content(k, t) == h {
                    fresh += 1;
                }
            }
        }
        let frac = |n: usize| {
            if settled == 0 {
                1.0
            } else {
                n as f64 / settled as f64
            }
        };
        let online = self.online_time(t);
        let busy_share = ratio(
            self.acc.busy_s - self.acc.sampled_busy_s,
            online - self.acc.sampled_online_s,
        );
        self.acc.sampled_busy_s = self.acc.busy_s;
        self.acc.sampled_online_s = online;
        self.acc.series.push(Sample {
            t_s: t,
            regret_failures: self.acc.regret_failures,
            regret_cost: self.acc.regret_cost,
            attempts: self.acc.attempts,
            correct_fraction: frac(correct),
            fresh_fraction: frac(fresh),
            settled,
            prices: self.port.prices(),
            online: ARCHETYPES
                .iter()
                .enumerate()
                .map(|(a, n)| (n.to_string(), self.online[a]))
                .collect(),
            busy_share,
            violations: self.acc.violations,
        });
    }

    /// The report, or why it cannot be trusted: routerd stopped answering
    /// while its figures were read ([`SimError::Service`]).
    pub(super) fn finish(mut self) -> Result<ContenderReport, SimError> {
        let (honest, liars, hist) = self.trust_figures();
        let ev = self.event_figures();
        let budget = budget_figures(std::mem::take(&mut self.acc.budget));
        let timing = self.timing_figures();
        let last = self.acc.series.last().cloned();
        let false_alarms = self.acc.drift.iter().filter(|m| m.false_alarm).count() as u64;
        let share = |busy: f64, wasted: f64| ratio(busy, busy + wasted);
        let occupancy = share(self.acc.busy_s, self.acc.wasted_s);
        let occupancy_conservative = share(self.acc.busy_s, self.acc.wasted_conservative_s);
        let report = ContenderReport {
            name: self.contender.name().into(),
            attempts: self.acc.attempts,
            successes: self.acc.successes,
            items: self.acc.items,
            protests: self.acc.protests,
            refused: std::mem::take(&mut self.acc.refused),
            regret_failures: self.acc.regret_failures,
            regret_cost: self.acc.regret_cost,
            regret_total: self.acc.regret_failures + self.acc.regret_cost,
            politeness_violations: self.acc.violations,
            correct_fraction: last.as_ref().map(|s| s.correct_fraction).unwrap_or(1.0),
            fresh_fraction: last.as_ref().map(|s| s.fresh_fraction).unwrap_or(1.0),
            settled: last.as_ref().map(|s| s.settled).unwrap_or(0),
            trust_auc: auc(&honest, &liars),
            trust: hist,
            drift: std::mem::take(&mut self.acc.drift),
            drift_false_alarms: false_alarms,
            budget,
            occupancy,
            occupancy_conservative,
            busy_share: ratio(self.acc.busy_s, self.online_time(self.world.spec.end_s())),
            work: std::mem::take(&mut self.acc.work),
            event: ev,
            series: std::mem::take(&mut self.acc.series),
            events: self.port.event_counts(),
            attempts_by_kind: std::mem::take(&mut self.acc.by_kind),
            regret_by_kind: std::mem::take(&mut self.acc.regret_by_kind),
            timing,
        };
        match self.port.broken() {
            Some(why) => Err(SimError::Service(why)),
            None => Ok(report),
        }
    }

    /// Trust of honest and lying devices with enough deposits, and their histogram.
    fn trust_figures(&mut self) -> (Vec<f64>, Vec<f64>, TrustHistogram) {
        let (mut honest, mut liars) = (Vec::new(), Vec::new());
        let mut hist = TrustHistogram {
            honest: vec![0; 20],
            liars: vec![0; 20],
        };
        for (i, dev) in self.world.devices.iter().enumerate() {
            if self.devs[i].deposits < MIN_DEPOSITS_FOR_TRUST {
                continue;
            }
            let Some(tau) = self.port.trust(&dev.id) else {
                continue;
            };
            let bin = ((tau * 20.0).floor() as usize).min(19);
            if dev.liar {
                liars.push(tau);
                hist.liars[bin] += 1;
            } else {
                honest.push(tau);
                hist.honest[bin] += 1;
            }
        }
        (honest, liars, hist)
    }

    /// The scheduled event's figures: trust around the adapter bug,
    /// occupancy during the drought, attempts around the regime change.
    fn event_figures(&mut self) -> EventFigures {
        let w = self.world;
        let mut ev = std::mem::take(&mut self.acc.event);
        if w.bug.is_some() {
            let before = &self.acc.trust_at_bug;
            let mut lower = 0;
            let mut drop: f64 = 0.0;
            let (mut sb, mut sa) = (0.0, 0.0);
            let liars: std::collections::BTreeSet<&str> = w
                .devices
                .iter()
                .filter(|d| d.liar)
                .map(|d| d.id.as_str())
                .collect();
            for (id, b) in before {
                let a = self.port.trust(id).unwrap_or(*b);
                if a < b - 1e-9 {
                    lower += 1;
                }
                if !liars.contains(id.as_str()) {
                    ev.trust_deltas.push(a - b);
                }
                drop = drop.max(b - a);
                sb += b;
                sa += a;
            }
            let n = before.len().max(1) as f64;
            ev.devices_lower_than_before = Some(lower);
            ev.devices_before = Some(before.len());
            ev.mean_trust_before_after = Some((sb / n, sa / n));
            ev.largest_drop = Some(drop);
            if let Some(l) = self.ledger.as_mut() {
                let devices = &w.devices;
                let trust: Vec<Option<f64>> =
                    devices.iter().map(|d| self.port.trust(&d.id)).collect();
                let end = w.spec.end_s();
                ev.lower_devices = l.lower(
                    |d| trust[d],
                    |d| devices[d].id.clone(),
                    |d| w.online(d, end - 1.0),
                    end,
                );
                ev.ledger_checks = Some(l.checks());
            }
        }
        if w.drought.is_some() {
            let busy = self.acc.drought_busy_s;
            let all = busy + self.acc.drought_wasted_s;
            ev.occupancy_during = (all > 0.0).then(|| busy / all);
            let all = busy + self.acc.drought_wasted_conservative_s;
            ev.occupancy_during_conservative = (all > 0.0).then(|| busy / all);
        }
        ev.changes = super::changes::finish(std::mem::take(&mut self.acc.changes));
        if w.regime.is_some() {
            ev.blocked_attempts_after = Some(self.acc.blocked_attempts_after);
            ev.blocked_attempts_hour_before = Some(self.acc.blocked_attempts_before);
        }
        ev
    }

    /// Wall-clock figures: decisions and leases per second inside the
    /// router, lease latency p50/p99 from the sampled calls.
    fn timing_figures(&mut self) -> Timing {
        let mut timing = std::mem::take(&mut self.acc.timing);
        timing.decisions += timing.lease_calls;
        timing.decisions_per_s = ratio(timing.decisions as f64, timing.lease_s + timing.tick_s);
        timing.leases_per_s = ratio(timing.lease_calls as f64, timing.lease_s);
        let mut us = std::mem::take(&mut self.acc.lease_us);
        us.sort_unstable();
        let pct = |p: f64| {
            if us.is_empty() {
                0.0
            } else {
                us[((us.len() - 1) as f64 * p).round() as usize] as f64
            }
        };
        timing.lease_us = (pct(0.5), pct(0.99));
        timing
    }
}

/// Per capped pool: windows over cap, the largest usage / cap, and the mean
/// usage / cap over the second half of the windows.
fn budget_figures(mut budget: Budget) -> Budget {
    for (pool, cap) in budget.caps.clone() {
        let ws: Vec<f64> = budget
            .windows
            .iter()
            .filter(|(_, p, _)| *p == pool)
            .map(|(_, _, u)| *u)
            .collect();
        let over = ws.iter().filter(|u| **u > cap).count() as u64;
        let max = ws.iter().fold(0.0f64, |m, u| m.max(u / cap.max(1e-9)));
        let late = &ws[ws.len() / 2..];
        let mean = ratio(late.iter().sum::<f64>() / cap.max(1e-9), late.len() as f64);
        budget.over_cap.insert(pool.clone(), over);
        budget.max_ratio.insert(pool.clone(), max);
        budget.late_mean_ratio.insert(pool, mean);
    }
    budget
}
