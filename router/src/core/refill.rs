//! The queue refill: rank due targets, decide each at its address among the
//! live archetypes, and queue it on the winner's queue (a verification on
//! every archetype not vetoed: it needs distinct devices). Queues are rebuilt
//! from the state every tick: they mirror it, never accrete.
//! Source: `ROUTING.md` §3 Assignment policy, step 1 and 3.
//!
//! Three steps, so the shell decides outside the router's lock:
//! [`Router::refill_plan`] (under the lock: which targets are due, with
//! what each decision reads, and a clone of the field),
//! [`RefillPlan::decide`] (no lock: the decisions, the refill's main cost)
//! and [`Router::refill_install`] (under the lock: drop what changed
//! meanwhile, then the fillers, the lanes and the queues). In process the
//! three run back to back, so the queues are exactly what one step made.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use routing::field::{Address, Field, Layer, LossReason};
use routing::policy::{schedule_priority, Tier};
use routing::trust::State as TrustState;

use super::{Queued, Router};

/// Volatility floor used in the schedule priority, so a source never
/// re-observed yet (volatility 0) still ranks its new targets.
pub const VOLATILITY_FLOOR: f64 = 0.1;

/// What one decision reads of the state, copied out under the lock.
#[derive(Debug, Clone)]
struct Planned {
    target: String,
    tier: Tier,
    source: String,
    binding: String,
    host: String,
    requires: Arc<[String]>,
    /// Trust of the target's last observer (0.5 without one).
    last_tau: f64,
    /// Seconds overdue plus one (≥ 1).
    staleness: f64,
    volatility: f64,
}

/// The refill's decisions to make, taken under the router's lock by
/// [`Router::refill_plan`]; [`RefillPlan::decide`] makes them without it.
#[derive(Debug, Clone)]
pub struct RefillPlan {
    allowed: Vec<String>,
    layers: Vec<Layer>,
    field: Field,
    temperature: f64,
    due: Vec<Planned>,
    /// Settled targets not due, least recently attempted first: filler
    /// candidates, decided at install (few are taken).
    fillers: Vec<(f64, String)>,
}

/// The decisions of a [`RefillPlan`], for [`Router::refill_install`].
#[derive(Debug, Clone)]
pub struct RefillDecision {
    allowed: Vec<String>,
    decided: Vec<Queued>,
    fillers: Vec<(f64, String)>,
}

/// Decides one target at its task address among `allowed`; `None` when
/// every archetype is vetoed or the address is not the field's.
fn decide_one(
    field: &Field,
    temperature: f64,
    layers: &[Layer],
    allowed: &[&str],
    p: &Planned,
) -> Option<Queued> {
    let address = Address::from_labels(
        layers,
        &[p.source.as_str(), p.binding.as_str(), p.target.as_str()],
    )
    .ok()?;
    let receipt = field.decide(&address, temperature, allowed).ok()?;
    receipt.selected.as_ref()?;
    let priority = schedule_priority(p.staleness, p.last_tau, p.volatility.max(VOLATILITY_FLOOR));
    Some(Queued {
        target: p.target.clone(),
        tier: p.tier,
        priority,
        receipt,
        host: p.host.clone(),
        requires: p.requires.clone(),
    })
}

impl RefillPlan {
    /// Makes the plan's decisions (the field's, at each due target's
    /// address); needs nothing of the router.
    pub fn decide(self) -> RefillDecision {
        let allowed: Vec<&str> = self.allowed.iter().map(String::as_str).collect();
        let decided = self
            .due
            .iter()
            .filter_map(|p| decide_one(&self.field, self.temperature, &self.layers, &allowed, p))
            .collect();
        RefillDecision {
            allowed: self.allowed,
            decided,
            fillers: self.fillers,
        }
    }
}

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

    /// The whole refill at `now_s`: plan, decide, install, back to back.
    pub(crate) fn refill(&mut self, now_s: f64) {
        match self.refill_plan(now_s) {
            Some(plan) => {
                let decision = plan.decide();
                self.refill_install(decision, now_s);
            }
            None => self.queues.clear(),
        }
    }

    /// What the refill at `now_s` must decide: the due targets (at most
    /// `queue_limit` per live archetype, the longest overdue first; the
    /// rest stay due for the next tick, so a tick's cost is bounded
    /// whatever the number of targets), the filler candidates and a clone
    /// of the field. `None` when no archetype is live (nothing to queue).
    /// Reads only; the queues stay as they are until the install.
    pub fn refill_plan(&self, now_s: f64) -> Option<RefillPlan> {
        let live = self.live_archetypes();
        if live.is_empty() {
            return None;
        }
        let vc = self.verify_config();
        let mut fillers: Vec<(f64, String)> = Vec::new();
        let mut due: Vec<(f64, &str, Tier)> = Vec::new();
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
            due.push((now_s - t.due_s, name.as_str(), tier));
        }
        let budget = self.cfg.queue_limit.saturating_mul(live.len());
        if due.len() > budget {
            // The `budget` longest overdue (ties by name), in that order: a
            // selection, then a sort of the selected only.
            let order = |a: &(f64, &str, Tier), b: &(f64, &str, Tier)| {
                b.0.total_cmp(&a.0).then(a.1.cmp(b.1))
            };
            if budget == 0 {
                due.clear();
            } else {
                due.select_nth_unstable_by(budget - 1, order);
                due.truncate(budget);
            }
            due.sort_by(order);
        }
        let due = due
            .into_iter()
            .filter_map(|(_, name, tier)| self.planned(name, tier, now_s))
            .collect();
        fillers.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        Some(RefillPlan {
            allowed: live,
            layers: self.d.field.layers().to_vec(),
            field: self.d.field.clone(),
            temperature: self.d.temperature,
            due,
            fillers,
        })
    }

    /// What deciding `name` reads of the state, `None` for an unknown
    /// target or source.
    fn planned(&self, name: &str, tier: Tier, now_s: f64) -> Option<Planned> {
        let t = self.d.targets.get(name)?;
        let s = self.d.sources.get(&t.source)?;
        let last_tau = t
            .observations
            .last()
            .and_then(|o| self.d.devices.get(&o.device))
            .map(|d| d.trust)
            .unwrap_or(0.5);
        Some(Planned {
            target: name.to_string(),
            tier,
            source: t.source.clone(),
            binding: s.binding.clone(),
            host: s.host.clone(),
            requires: s.requires.clone().into(),
            last_tau,
            staleness: (now_s - t.due_s).max(0.0) + 1.0,
            volatility: s.volatility(),
        })
    }

    /// Builds the queues from `decision` at `now_s`: a decided target that
    /// went in flight since the plan (leased by a device meanwhile) is
    /// dropped, save a verification, which wants several devices; then the
    /// fillers are decided in order until each live archetype has its
    /// share, and every archetype's lanes are interleaved into its queue.
    pub fn refill_install(&mut self, decision: RefillDecision, now_s: f64) {
        let RefillDecision {
            allowed: live,
            decided,
            fillers,
        } = decision;
        let allowed: Vec<&str> = live.iter().map(|s| s.as_str()).collect();
        let layers = self.d.field.layers().to_vec();
        // per archetype, per tier: entries
        let mut lanes: BTreeMap<String, BTreeMap<Tier, Vec<Queued>>> = BTreeMap::new();
        for q in decided {
            let in_flight = self.in_flight.get(&q.target).copied().unwrap_or(0);
            if q.tier != Tier::Verification && in_flight > 0 {
                continue;
            }
            if q.tier == Tier::Verification {
                // A verification needs distinct devices: offer it to every
                // archetype the decision did not veto, the winner's included.
                for alt in &q.receipt.alternatives {
                    if matches!(alt.reason, LossReason::Selected | LossReason::Score) {
                        let lane = lanes.entry(alt.option.clone()).or_default();
                        lane.entry(q.tier).or_default().push(q.clone());
                    }
                }
            } else {
                let arch = self.pick(&q.target, &q);
                lanes
                    .entry(arch)
                    .or_default()
                    .entry(q.tier)
                    .or_default()
                    .push(q);
            }
        }
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
        self.queues.clear();
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
        layers: &[Layer],
        allowed: &[&str],
    ) -> Option<Queued> {
        let p = self.planned(name, tier, now_s)?;
        decide_one(&self.d.field, self.d.temperature, layers, allowed, &p)
    }
}
