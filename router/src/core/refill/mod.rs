//! The queue refill: rank due targets, decide each at its address among the
//! live archetypes, and queue it on the winner's queue (a verification on
//! every archetype not vetoed: it needs distinct devices). Queues are rebuilt
//! from the state every tick: they mirror it, never accrete.
//! Source: `ROUTING.md` §3 Assignment policy, step 1 and 3.
//!
//! Four steps, so the shell walks and decides outside the router's lock:
//! [`Router::refill_inputs`] (under the lock: O(1) clones of what the plan
//! reads), [`RefillInputs::plan`] (no lock: the walk over every target,
//! which targets are due and what each decision reads),
//! [`RefillPlan::decide`] (no lock: the decisions, the refill's main
//! cost, and the first filler candidates') and [`Router::refill_install`]
//! (under the lock: drop what changed meanwhile, the fillers, the lanes
//! and the queues). In process the four run back to back, so the queues
//! are exactly what one step made.

mod plan;
mod select;

use std::collections::BTreeMap;
use std::sync::Arc;

use routing::field::{Address, Field, Layer, LossReason};
use routing::policy::{schedule_priority, Tier};

use super::{Queued, Router};
pub use plan::RefillInputs;

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

/// The refill's decisions to make ([`RefillInputs::plan`]);
/// [`RefillPlan::decide`] makes them without the router's lock.
#[derive(Debug, Clone)]
pub struct RefillPlan {
    allowed: Vec<String>,
    layers: Vec<Layer>,
    field: Field,
    temperature: f64,
    due: Vec<Planned>,
    /// Settled targets not due, least recently attempted first: filler
    /// candidates, taken in order at install (few are taken; at most
    /// `FILLER_CANDIDATES_PER_SLOT` per filler slot are kept).
    fillers: Vec<(f64, String)>,
    /// What deciding each of the first filler candidates reads (`None`:
    /// its target or source is unknown), decided ahead by
    /// [`RefillPlan::decide`].
    fillers_ahead: Vec<Option<Planned>>,
}

/// The decisions of a [`RefillPlan`], for [`Router::refill_install`].
#[derive(Debug, Clone)]
pub struct RefillDecision {
    allowed: Vec<String>,
    decided: Vec<Queued>,
    /// Indices into `decided`, highest priority first (ties by target
    /// name): the order of every lane, sorted outside the lock.
    rank: Vec<usize>,
    fillers: Vec<(f64, String)>,
    /// The first filler candidates' decisions, in order (`None`: vetoed
    /// everywhere or unknown); the install decides any later one itself.
    fillers_decided: Vec<Option<Queued>>,
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
        receipt: Arc::new(receipt),
        host: p.host.clone(),
        requires: p.requires.clone(),
    })
}

/// A lane's order: highest priority first, ties by target name (a total
/// order: a lane holds a target at most once).
fn queue_order(a: &Queued, b: &Queued) -> std::cmp::Ordering {
    b.priority
        .total_cmp(&a.priority)
        .then(a.target.cmp(&b.target))
}

/// Where the install puts one decided target.
enum Destination {
    /// Leased meanwhile: dropped.
    Skip,
    /// A verification: every archetype the decision did not veto.
    Every(Vec<String>),
    /// The archetype picked.
    One(String),
}

/// Queue entries per archetype, per tier, before they are interleaved.
type Lanes = BTreeMap<String, BTreeMap<Tier, Vec<Queued>>>;

/// The queues a refill replaced, to be dropped outside the lock.
pub(crate) type OldQueues = BTreeMap<String, std::collections::VecDeque<Queued>>;

impl RefillPlan {
    /// Makes the plan's decisions (the field's, at each due target's
    /// address); needs nothing of the router.
    pub fn decide(self) -> RefillDecision {
        let allowed: Vec<&str> = self.allowed.iter().map(String::as_str).collect();
        let decide =
            |p: &Planned| decide_one(&self.field, self.temperature, &self.layers, &allowed, p);
        let decided: Vec<Queued> = self.due.iter().filter_map(decide).collect();
        let mut rank: Vec<usize> = (0..decided.len()).collect();
        rank.sort_by(|&a, &b| queue_order(&decided[a], &decided[b]));
        let fillers_decided = self
            .fillers_ahead
            .iter()
            .map(|p| p.as_ref().and_then(decide))
            .collect();
        RefillDecision {
            allowed: self.allowed,
            decided,
            rank,
            fillers: self.fillers,
            fillers_decided,
        }
    }
}

impl Router {
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

    /// Builds the queues from `decision` at `now_s`: a decided target that
    /// went in flight since the plan (leased by a device meanwhile) is
    /// dropped, save a verification, which wants several devices; then the
    /// fillers are decided in order until each live archetype has its
    /// share, and every archetype's lanes are interleaved into its queue.
    pub fn refill_install(&mut self, decision: RefillDecision, now_s: f64) {
        drop(self.refill_install_keeping(decision, now_s));
    }

    /// [`Router::refill_install`], returning the queues it replaced (the
    /// shell drops them outside the lock).
    pub(crate) fn refill_install_keeping(
        &mut self,
        decision: RefillDecision,
        now_s: f64,
    ) -> OldQueues {
        let RefillDecision {
            allowed: live,
            decided,
            rank,
            fillers,
            mut fillers_decided,
        } = decision;
        let allowed: Vec<&str> = live.iter().map(|s| s.as_str()).collect();
        let layers = self.d.field.layers().to_vec();
        let mut lanes = self.ranked_lanes(decided, rank);
        let mut filler_count: BTreeMap<String, usize> = BTreeMap::new();
        let ahead = fillers_decided.len();
        let mut ahead_taken = fillers_decided.drain(..);
        for (k, (_, name)) in fillers.into_iter().enumerate() {
            if filler_count.values().sum::<usize>() >= self.cfg.filler_per_archetype * live.len() {
                break;
            }
            let decided = if k < ahead {
                ahead_taken.next().flatten()
            } else {
                self.route(&name, Tier::Filler, now_s, &layers, &allowed)
            };
            if let Some(q) = decided {
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
        let old = std::mem::take(&mut self.queues);
        for (arch, tiers) in lanes {
            // The decided lanes are in order already (a linear check); the
            // fillers' lane is sorted here (a few entries).
            let mut lists: Vec<std::vec::IntoIter<Queued>> = tiers
                .into_values()
                .map(|mut list| {
                    list.sort_by(queue_order);
                    list.into_iter()
                })
                .collect();
            // Interleave tiers so every tier is represented near the front.
            let mut queue = Vec::new();
            loop {
                let mut any = false;
                for list in lists.iter_mut() {
                    if let Some(q) = list.next() {
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
        old
    }

    /// The decided targets in their lanes (per archetype, per tier), each
    /// lane in rank order, so no lane is sorted under the lock. Where each
    /// goes is found in the decisions' order (the chooser, where one is
    /// set, sees them in that order).
    fn ranked_lanes(&mut self, decided: Vec<Queued>, rank: Vec<usize>) -> Lanes {
        let destinations: Vec<Destination> = decided.iter().map(|q| self.destination(q)).collect();
        let mut lanes = Lanes::new();
        let mut decided: Vec<Option<Queued>> = decided.into_iter().map(Some).collect();
        for i in rank {
            let (Some(q), Some(dest)) = (
                decided.get_mut(i).and_then(Option::take),
                destinations.get(i),
            ) else {
                continue;
            };
            match dest {
                Destination::Skip => {}
                Destination::Every(archs) => {
                    for arch in archs {
                        let lane = lanes.entry(arch.clone()).or_default();
                        lane.entry(q.tier).or_default().push(q.clone());
                    }
                }
                Destination::One(arch) => lanes
                    .entry(arch.clone())
                    .or_default()
                    .entry(q.tier)
                    .or_default()
                    .push(q),
            }
        }
        lanes
    }

    /// Where the install puts decided target `q`: nowhere when it went in
    /// flight since the plan, save a verification, which needs distinct
    /// devices and is offered to every archetype the decision did not veto
    /// (the winner's included); else the archetype picked.
    fn destination(&mut self, q: &Queued) -> Destination {
        if q.tier == Tier::Verification {
            return Destination::Every(
                q.receipt
                    .alternatives
                    .iter()
                    .filter(|alt| matches!(alt.reason, LossReason::Selected | LossReason::Score))
                    .map(|alt| alt.option.clone())
                    .collect(),
            );
        }
        if self.in_flight.get(&q.target).copied().unwrap_or(0) > 0 {
            return Destination::Skip;
        }
        Destination::One(self.pick(&q.target, q))
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
        let p = plan::planned(
            &self.d.targets,
            &self.d.sources,
            &self.d.devices,
            name,
            tier,
            now_s,
        )?;
        decide_one(&self.d.field, self.d.temperature, layers, allowed, &p)
    }
}
