//! The refill's plan, made outside the router's lock: which targets are
//! due (at most `queue_limit` per live archetype, the longest overdue
//! first), what each decision reads of the state, and the filler
//! candidates. [`Router::refill_inputs`] takes what the walk reads in
//! O(1) under the lock (persistent maps and the field's shared trees);
//! [`RefillInputs::plan`] walks every target without it.
//! Source: `ROUTING.md` §3 Assignment policy, step 1.

use std::collections::BTreeSet;

use routing::field::{Field, Layer};
use routing::policy::Tier;
use routing::trust::State as TrustState;

use super::{select, Planned, RefillPlan};
use crate::core::state::{DeviceRec, SourceRec, Table, TargetRec};
use crate::core::{Live, Router};

/// What the refill at one time reads of the router's state: clones taken
/// under the router's lock in O(1) each (the maps are persistent, the
/// field shares its subtrees), so the walk over every target
/// ([`RefillInputs::plan`]) runs without the lock.
#[derive(Debug, Clone)]
pub struct RefillInputs {
    now_s: f64,
    live: imbl::OrdMap<String, Live>,
    devices: Table<DeviceRec>,
    targets: Table<TargetRec>,
    sources: imbl::OrdMap<String, SourceRec>,
    in_flight: imbl::HashMap<String, u32>,
    max_open: u32,
    queue_limit: usize,
    /// Fillers each live archetype takes (`RouterConfig::filler_per_archetype`).
    filler_per_archetype: usize,
    layers: Vec<Layer>,
    field: Field,
    temperature: f64,
}

/// Filler candidates decided outside the lock per filler slot: the install
/// skips candidates whose archetype's share is full, so it reads a few
/// more than it takes.
const FILLERS_AHEAD_PER_SLOT: usize = 4;

/// Filler candidates kept per filler slot (least recently attempted
/// first): the install takes candidates in order until each archetype
/// has its share, and stops at the end of the list, so a plan holds a
/// bounded list instead of every settled target's name.
const FILLER_CANDIDATES_PER_SLOT: usize = 64;

/// The archetypes with at least one live device that is not suspended or
/// revoked, in order. The walk beside the devices table
/// ([`crate::core::live_join`]) stops once every one of the `declared`
/// archetypes is found (at once, in a fleet where each has live devices).
fn live_archetypes(
    live: &imbl::OrdMap<String, Live>,
    devices: &Table<DeviceRec>,
    declared: usize,
) -> Vec<String> {
    let mut set: BTreeSet<&str> = BTreeSet::new();
    for (_, d) in crate::core::live_join::live_records(live, devices) {
        if !matches!(d.state, TrustState::Suspended | TrustState::Revoked) {
            set.insert(&*d.archetype);
            if set.len() >= declared {
                break;
            }
        }
    }
    set.into_iter().map(String::from).collect()
}

/// What deciding target `name` at `tier` reads of the state at `now_s`;
/// `None` for an unknown target or source.
pub(super) fn planned(
    targets: &Table<TargetRec>,
    sources: &imbl::OrdMap<String, SourceRec>,
    devices: &Table<DeviceRec>,
    name: &str,
    tier: Tier,
    now_s: f64,
) -> Option<Planned> {
    let t = targets.get(name)?;
    let s = sources.get(&t.source)?;
    let last_tau = t
        .observations
        .last()
        .and_then(|o| devices.get(&*o.device))
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

impl Router {
    /// What the refill at `now_s` reads, cloned in O(1) under the lock
    /// (the shell's tick takes it there and plans outside).
    pub fn refill_inputs(&self, now_s: f64) -> RefillInputs {
        RefillInputs {
            now_s,
            live: self.live.clone(),
            devices: self.d.devices.table(),
            targets: self.d.targets.table(),
            sources: self.d.sources.clone(),
            in_flight: self.in_flight.clone(),
            max_open: self.verify_config().max_open,
            queue_limit: self.cfg.queue_limit,
            filler_per_archetype: self.cfg.filler_per_archetype,
            layers: self.d.field.layers().to_vec(),
            field: self.d.field.clone(),
            temperature: self.d.temperature,
        }
    }

    /// The refill's plan at `now_s` ([`Router::refill_inputs`], then
    /// [`RefillInputs::plan`]); `None` when no archetype is live.
    pub fn refill_plan(&self, now_s: f64) -> Option<RefillPlan> {
        self.refill_inputs(now_s).plan()
    }
}

impl RefillInputs {
    /// Plans on `field` instead of the clone taken with the inputs (the
    /// tick's aged clone, `core/aging.rs`).
    pub(crate) fn set_field(&mut self, field: Field) {
        self.field = field;
    }

    /// The due targets' tier, or `None` for a target not due; `settled`
    /// says whether its row is settled (a filler candidate when not due).
    fn tier_of(&self, name: &str, t: &TargetRec) -> Option<(Option<Tier>, bool)> {
        let now_s = self.now_s;
        if t.churn.cooling(now_s / 3600.0) {
            return None;
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
            (open < self.max_open).then_some(Tier::Verification)
        } else if t.due_s <= now_s {
            Some(Tier::Reobservation)
        } else {
            None
        };
        if in_flight > 0 && tier != Some(Tier::Verification) {
            return None;
        }
        Some((tier, settled))
    }

    /// The plan: the due targets (at most `queue_limit` per live
    /// archetype, the longest overdue first; the rest stay due for the
    /// next tick, so a tick's cost is bounded whatever the number of
    /// targets), what each decision reads, and the filler candidates
    /// (settled targets not due, least recently attempted first), the
    /// first of them planned for deciding ahead. `None` when no archetype
    /// is live (nothing to queue).
    pub fn plan(self) -> Option<RefillPlan> {
        let live = live_archetypes(&self.live, &self.devices, self.field.options().len());
        if live.is_empty() {
            return None;
        }
        let now_s = self.now_s;
        // The `budget` longest overdue, ties by name, and the least
        // recently attempted settled targets not due, ties by name: both
        // selected as the walk goes (docs/router.md "The small box": a
        // walk of 1,000,000 due targets keeps a few thousand entries, not
        // a vector of them all).
        let budget = self.queue_limit.saturating_mul(live.len());
        let mut due =
            select::Smallest::new(budget, |a: &(f64, &str, Tier), b: &(f64, &str, Tier)| {
                b.0.total_cmp(&a.0).then(a.1.cmp(b.1))
            });
        let kept = FILLER_CANDIDATES_PER_SLOT
            .saturating_mul(self.filler_per_archetype)
            .saturating_mul(live.len());
        let mut fillers = select::Smallest::new(kept, |a: &(f64, &str), b: &(f64, &str)| {
            a.0.total_cmp(&b.0).then(a.1.cmp(b.1))
        });
        for (name, t) in &self.targets {
            match self.tier_of(name, t) {
                Some((Some(tier), _)) => due.push((now_s - t.due_s, name.as_str(), tier)),
                Some((None, true)) => {
                    fillers.push((t.last_attempt_s.unwrap_or(0.0), name.as_str()))
                }
                _ => {}
            }
        }
        let due = due.into_sorted();
        let fillers: Vec<(f64, String)> = fillers
            .into_sorted()
            .into_iter()
            .map(|(at, name)| (at, name.to_string()))
            .collect();
        let plan_one = |name: &str, tier| {
            planned(
                &self.targets,
                &self.sources,
                &self.devices,
                name,
                tier,
                now_s,
            )
        };
        let due: Vec<Planned> = due
            .into_iter()
            .filter_map(|(_, name, tier)| plan_one(name, tier))
            .collect();
        // The install decides any candidate past these itself.
        let ahead = FILLERS_AHEAD_PER_SLOT
            .saturating_mul(self.filler_per_archetype)
            .saturating_mul(live.len());
        let fillers_ahead: Vec<Option<Planned>> = fillers
            .iter()
            .take(ahead)
            .map(|(_, name)| plan_one(name, Tier::Filler))
            .collect();
        Some(RefillPlan {
            allowed: live,
            layers: self.layers,
            field: self.field,
            temperature: self.temperature,
            due,
            fillers,
            fillers_ahead,
        })
    }
}
