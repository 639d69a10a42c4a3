//! The queue refill: rank due targets, decide each at its address among the
//! live archetypes, and queue it on the winner's queue (a verification on
//! every archetype not vetoed: it needs distinct devices). Queues are rebuilt
//! from the state every tick: they mirror it, never accrete.
//! Source: `ROUTING.md` §3 Assignment policy, step 1 and 3.

use std::collections::{BTreeMap, BTreeSet};

use routing::field::{Address, LossReason};
use routing::policy::{schedule_priority, Tier};
use routing::trust::State as TrustState;

use super::{Queued, Router};

/// Volatility floor used in the schedule priority, so a source never
/// re-observed yet (volatility 0) still ranks its new targets.
pub const VOLATILITY_FLOOR: f64 = 0.1;

impl Router {
    /// The archetypes that have at least one live, not suspended device.
    pub(crate) fn live_archetypes(&self) -> Vec<String> {
        let set: BTreeSet<&str> = self
            .live
            .keys()
            .filter_map(|k| self.d.devices.get(k))
            .filter(|d| !matches!(d.state, TrustState::Suspended | TrustState::Revoked))
            .map(|d| d.archetype.as_str())
            .collect();
        set.into_iter().map(String::from).collect()
    }

    pub(crate) fn refill(&mut self, now_s: f64) {
        self.queues.clear();
        let live = self.live_archetypes();
        if live.is_empty() {
            return;
        }
        let allowed: Vec<&str> = live.iter().map(|s| s.as_str()).collect();
        let layers = self.d.field.layers().to_vec();
        let vc = self.verify_config();
        // per archetype, per tier: entries
        let mut lanes: BTreeMap<String, BTreeMap<Tier, Vec<Queued>>> = BTreeMap::new();
        let mut fillers: Vec<(f64, String)> = Vec::new();
        let mut due: Vec<(String, Tier)> = Vec::new();
        for (name, t) in &self.d.targets {
            if t.churn.cooling(now_s / 3600.0) {
                continue;
            }
            let in_flight = self.in_flight.get(name).copied().unwrap_or(0);
            let settled = t.verification.settled().is_some();
            let tier = if t.listing {
                (t.due_s <= now_s).then_some(Tier::Discovery)
            } else if t.observations.is_empty() {
                (t.due_s <= now_s || t.last_attempt_s.is_none()).then_some(Tier::FirstObservation)
            } else if !settled {
                let open = t
                    .verification
                    .open()
                    .iter()
                    .filter(|(_, at)| *at > now_s)
                    .count() as u32;
                (open < vc.max_open).then_some(Tier::Verification)
            } else if t.due_s <= now_s {
                Some(Tier::Reobservation)
            } else {
                None
            };
            if in_flight > 0 && tier != Some(Tier::Verification) {
                continue;
            }
            let Some(tier) = tier else {
                if settled {
                    fillers.push((t.last_attempt_s.unwrap_or(0.0), name.clone()));
                }
                continue;
            };
            due.push((name.clone(), tier));
        }
        // Decide at most `queue_limit` targets per live archetype per tick,
        // the longest overdue first (the rest stay due for the next tick):
        // a tick's cost is bounded whatever the number of targets.
        let budget = self.cfg.queue_limit.saturating_mul(live.len());
        if due.len() > budget {
            let overdue = |n: &str| {
                self.d
                    .targets
                    .get(n)
                    .map(|t| now_s - t.due_s)
                    .unwrap_or(0.0)
            };
            let mut ranked: Vec<(f64, String, Tier)> =
                due.into_iter().map(|(n, t)| (overdue(&n), n, t)).collect();
            ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            ranked.truncate(budget);
            due = ranked.into_iter().map(|(_, n, t)| (n, t)).collect();
        }
        for (name, tier) in due {
            let name = name.as_str();
            if let Some(q) = self.route(name, tier, now_s, &layers, &allowed) {
                if tier == Tier::Verification {
                    // A verification needs distinct devices: offer it to every
                    // archetype the decision did not veto, the winner's included.
                    for alt in &q.receipt.alternatives {
                        if matches!(alt.reason, LossReason::Selected | LossReason::Score) {
                            let lane = lanes.entry(alt.option.clone()).or_default();
                            lane.entry(tier).or_default().push(q.clone());
                        }
                    }
                } else {
                    let arch = self.pick(name, &q);
                    lanes
                        .entry(arch)
                        .or_default()
                        .entry(tier)
                        .or_default()
                        .push(q);
                }
            }
        }
        fillers.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut filler_count: BTreeMap<String, usize> = BTreeMap::new();
        for (_, name) in fillers {
            if filler_count.values().sum::<usize>() >= self.cfg.filler_per_archetype * live.len() {
                break;
            }
            if let Some(q) = self.route(&name, Tier::Filler, now_s, &layers, &allowed) {
                let arch = self.pick(&name, &q);
                let n = filler_count.entry(arch.clone()).or_default();
                if *n < self.cfg.filler_per_archetype {
                    *n += 1;
                    lanes
                        .entry(arch)
                        .or_default()
                        .entry(Tier::Filler)
                        .or_default()
                        .push(q);
                }
            }
        }
        for (arch, mut tiers) in lanes {
            for list in tiers.values_mut() {
                list.sort_by(|a, b| {
                    b.priority
                        .total_cmp(&a.priority)
                        .then(a.target.cmp(&b.target))
                });
                list.reverse(); // pop from the back = highest priority first
            }
            // Interleave tiers so every tier is represented near the front.
            let mut queue = Vec::new();
            loop {
                let mut any = false;
                for list in tiers.values_mut() {
                    if let Some(q) = list.pop() {
                        queue.push(q);
                        any = true;
                    }
                }
                if !any || queue.len() >= self.cfg.queue_limit {
                    break;
                }
            }
            queue.truncate(self.cfg.queue_limit);
            self.queues.insert(arch, queue.into());
        }
    }

    /// The archetype a queued target goes to: the decision's winner, or the
    /// chooser's pick among the archetypes the decision did not veto.
    fn pick(&mut self, target: &str, q: &Queued) -> String {
        let winner = q.receipt.selected.clone().unwrap_or_default();
        let Some(chooser) = self.chooser.as_mut() else {
            return winner;
        };
        let feasible: Vec<&str> = q
            .receipt
            .alternatives
            .iter()
            .filter(|a| matches!(a.reason, LossReason::Selected | LossReason::Score))
            .map(|a| a.option.as_str())
            .collect();
        let source = self
            .d
            .targets
            .get(target)
            .map(|t| t.source.as_str())
            .unwrap_or("");
        let pick = chooser.choose(source, target, &feasible, &q.receipt);
        if feasible.contains(&pick.as_str()) {
            pick
        } else {
            winner
        }
    }

    /// Decides one target at its task address; `None` when every live archetype is vetoed.
    fn route(
        &self,
        name: &str,
        tier: Tier,
        now_s: f64,
        layers: &[routing::field::Layer],
        allowed: &[&str],
    ) -> Option<Queued> {
        let t = self.d.targets.get(name)?;
        let s = self.d.sources.get(&t.source)?;
        let address =
            Address::from_labels(layers, &[t.source.as_str(), s.binding.as_str(), name]).ok()?;
        let receipt = self
            .d
            .field
            .decide(&address, self.d.temperature, allowed)
            .ok()?;
        receipt.selected.as_ref()?;
        let last_tau = t
            .observations
            .last()
            .and_then(|o| self.d.devices.get(&o.device))
            .map(|d| d.trust)
            .unwrap_or(0.5);
        let staleness = (now_s - t.due_s).max(0.0) + 1.0;
        let priority = schedule_priority(staleness, last_tau, s.volatility().max(VOLATILITY_FLOOR));
        Some(Queued {
            target: name.to_string(),
            tier,
            priority,
            receipt,
            host: s.host.clone(),
            requires: s.requires.clone().into(),
        })
    }
}
