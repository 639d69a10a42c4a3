//! The simulated world, built deterministically from a [`SimSpec`]:
//! sources with hidden truths, targets whose contents change, devices with
//! sessions, honesty and adapter versions. Source: `ROUTING.md` §5.
//!
//! Hidden truth of source s for archetype a: success probability
//! σ(μ_a + d_s + e_sa) — a shared archetype effect μ_a, a per-source
//! deviation d_s ~ N(0, 0.8²) and an interaction e_sa ~ N(0, 0.6²) — and
//! latency exp(m_a + l_s + 0.5·z) seconds. Gates are walls: a source that
//! needs JavaScript refuses `container_plain` (`js_required`), a closed CORS
//! policy refuses `browser` (`cors`), an antibot family refuses both
//! containers (`antibot`); a residential-only source lets a container
//! through only 15 % as often (plain failures, no gate class).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::plan::{archetype_index, PlanError, WorldPlan};
use super::population::{build_devices, PopulationInput};
use super::rng::{coin, coin_normal, mix64, Stream};
use super::scenario::SimSpec;
use super::source::{apply_sets, source_truth, timeline};
pub use super::source::{SourceEpoch, SourceTruth, TargetTruth};
use super::SimError;

pub use super::archetype::DeviceSpec;
pub use super::archetype::{
    ADAPTER_BUGGY, ADAPTER_ID, ADAPTER_LATER, ADAPTER_OK, ARCHETYPES, ARCH_LN_LATENCY, ARCH_LOGIT,
    ARCH_SHARE, BROWSER, CAPABILITIES, CLOUD_COST, DESKTOP, PLAIN, RENDER,
};

/// The whole world of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct World {
    /// What was asked for.
    pub spec: SimSpec,
    /// Sources, as they are at the start.
    pub sources: Vec<SourceTruth>,
    /// Their later truths, in time order (`[[events.source_change]]`);
    /// [`World::source_at`] reads them.
    #[serde(default)]
    pub changes: Vec<SourceEpoch>,
    /// Targets.
    pub targets: Vec<TargetTruth>,
    /// Devices.
    pub devices: Vec<DeviceSpec>,
    /// `regime-change`: (source, archetype, from seconds).
    pub regime: Option<(usize, usize, f64)>,
    /// `adapter-bug`: (source, from seconds); without a bug, the first
    /// correct rollout (`events.adapter_rollout`): (0, from seconds) with
    /// `bug_fixed`.
    pub bug: Option<(usize, f64)>,
    /// `adapter-bug`'s control: the same world in every draw, but the
    /// upgraded adapter scrapes the bug's source correctly ([`World::without_bug`]).
    #[serde(default)]
    pub bug_fixed: bool,
    /// `drought`: browsers offline in `[from, to)` seconds.
    pub drought: Option<(f64, f64)>,
    /// Pool caps per price window the operator sets (absent: uncapped).
    pub caps: BTreeMap<String, f64>,
}

/// What one executed attempt produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    /// Success.
    pub ok: bool,
    /// Wall time, seconds.
    pub latency_s: f64,
    /// Failure class (`cors`, `js_required`, `antibot` write gates; `network`,
    /// `http_403`, `http_429`, `http_5xx` are plain failures).
    pub error_class: Option<&'static str>,
    /// The host's Retry-After, seconds, on a 429.
    pub retry_after_s: Option<f64>,
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// The caps of a world with `share` (the budget-saturation world: half;
/// none elsewhere): that share of what the fleet would spend per window,
/// for the database and the object store.
fn budget_caps(
    spec: &SimSpec,
    share: Option<f64>,
    sources: &[SourceTruth],
) -> BTreeMap<String, f64> {
    let mut caps = BTreeMap::new();
    if let Some(share) = share {
        let hosts: BTreeMap<&str, f64> = sources
            .iter()
            .map(|s| (s.host.as_str(), s.true_bucket().1))
            .collect();
        let polite: f64 = hosts.values().sum();
        // What the fleet actually fetches: the due work and the filler use
        // about a quarter of the hosts' capacity, and a device fetches
        // about one item per 25 s (measured in `steady`).
        let fleet = spec.devices as f64 / 25.0;
        let grants_per_window = (0.25 * polite).min(fleet) * 60.0;
        caps.insert("database".into(), (share * 1.5 * grants_per_window).round());
        caps.insert(
            "object_store".into(),
            (share * 2.5 * grants_per_window).round(),
        );
    }
    caps
}

/// The population's part of `plan`, in seconds of a run ending at `end`.
fn population_input(
    plan: &WorldPlan,
    end: f64,
    drought: Option<(f64, f64)>,
) -> Result<PopulationInput, SimError> {
    let ev = &plan.events;
    let dropouts = ev
        .dropout
        .iter()
        .map(|d| {
            let a = archetype_index(&d.archetype, "events.dropout.archetype")?;
            Ok((a, d.from.of_end(end), d.to.of_end(end), d.share))
        })
        .collect::<Result<Vec<_>, PlanError>>()?;
    let bursts = ev
        .burst
        .iter()
        .map(|b| {
            let a = archetype_index(&b.archetype, "events.burst.archetype")?;
            Ok((a, b.count, b.at.of_end(end), b.within_s, b.liar_share))
        })
        .collect::<Result<Vec<_>, PlanError>>()?;
    Ok(PopulationInput {
        shares: plan.population.shares(),
        sessions: plan.population.sessions(),
        drought,
        liar_share: plan.population.liar_share_of_browsers,
        upgrade: plan.upgrade().map(|(at, share, over)| {
            let over = over.map_or(0.0, |o| o.of_end(end));
            (at.of_end(end), share, over)
        }),
        rollouts: plan
            .events
            .rollouts()
            .into_iter()
            .map(|r| {
                let over = r.over.map_or(0.0, |o| o.of_end(end));
                (r.at.of_end(end), r.upgrade_share, over)
            })
            .collect(),
        dropouts,
        bursts,
    })
}

impl World {
    /// Builds the world of `spec`, following its plan ([`SimSpec::plan`]).
    /// Errors: [`SimError::BadSpec`], [`SimError::World`].
    pub fn build(spec: &SimSpec) -> Result<World, SimError> {
        spec.check()?;
        let plan = spec.plan()?;
        let mut rng = Stream::new(spec.seed);
        let end = spec.end_s();
        let (n_src, per_src, waves) = (
            plan.sources.count,
            plan.sources.targets_per_source,
            plan.sources.arrival_waves,
        );
        let mut sources = Vec::with_capacity(n_src);
        let mut targets = Vec::new();
        for s in 0..n_src {
            let source = source_truth(s, n_src, per_src, end, waves, &mut rng, &mut targets);
            sources.push(source);
        }
        // One host, one limit: sources sharing a host declare the same bucket.
        for (dst, src) in [(3usize, 2usize), (5, 4)] {
            if dst < sources.len() {
                sources[dst].bucket = sources[src].bucket;
            }
        }
        apply_sets(&plan.sources.set, &mut sources, &mut targets);
        let ev = &plan.events;
        let drought = ev
            .drought
            .as_ref()
            .map(|d| (d.from.of_end(end), d.to.of_end(end)));
        let bug = ev
            .adapter_bug
            .as_ref()
            .map(|b| (b.source, b.at.of_end(end), b.upgrade_share));
        let input = population_input(&plan, end, drought)?;
        let devices = build_devices(spec, &mut rng, n_src, &input);
        let regime = ev.regime_change.as_ref().and_then(|r| {
            plan.regime_archetype()
                .map(|a| (r.source, a, r.at.of_end(end)))
        });
        // Without the bug, the first correct rollout is traced as the
        // bug's control world is: trust from its start, every hash genuine.
        let rollout = ev
            .rollouts()
            .first()
            .filter(|_| bug.is_none())
            .map(|r| (0, r.at.of_end(end)));
        let bug = bug.map(|(s, at, _)| (s, at)).or(rollout);
        let caps = budget_caps(spec, plan.budget.caps_share_of_demand, &sources);
        let changes = timeline(&ev.source_change, &sources, end);
        Ok(World {
            spec: spec.clone(),
            sources,
            changes,
            targets,
            devices,
            regime,
            bug,
            bug_fixed: rollout.is_some(),
            drought,
            caps,
        })
    }

    /// The control of `adapter-bug`: this world with the upgraded adapter
    /// scraping the bug's source correctly, and nothing else changed (the
    /// same sources, targets, contents, sessions and upgrades; the trust
    /// snapshot and the ledger still start when the bug would have). What a
    /// device's trust does here, the bug did not cause.
    pub fn without_bug(&self) -> World {
        World {
            bug_fixed: true,
            ..self.clone()
        }
    }

    /// Source `s`'s truth at `t_s`: its latest epoch begun by then, or its
    /// truth at the start.
    pub fn source_at(&self, s: usize, t_s: f64) -> &SourceTruth {
        self.changes
            .iter()
            .rev()
            .find(|e| e.source == s && e.from_s <= t_s)
            .map_or(&self.sources[s], |e| &e.truth)
    }

    /// True success probability of archetype `a` on source `s` at `t_s`
    /// (0 behind a gate, a regime change or a refusal). What the oracle knows.
    pub fn p_success(&self, s: usize, a: usize, t_s: f64) -> f64 {
        let src = self.source_at(s, t_s);
        if gate_class(src, a).is_some() || src.refuses[a] {
            return 0.0;
        }
        if let Some((rs, ra, from)) = self.regime {
            if rs == s && ra == a && t_s >= from {
                return 0.0;
            }
        }
        let p = sigmoid(src.logit[a]);
        if src.residential && a >= RENDER {
            p * 0.15
        } else {
            p
        }
    }

    /// The gate class that refuses archetype `a` on source `s` at `t_s`, if any.
    pub fn gate_class(&self, s: usize, a: usize, t_s: f64) -> Option<&'static str> {
        gate_class(self.source_at(s, t_s), a)
    }

    /// The oracle's objective of archetype `a` on source `s` at `t_s`:
    /// expected failures plus cloud cost (failure-equivalents).
    pub fn objective(&self, s: usize, a: usize, t_s: f64) -> (f64, f64) {
        (1.0 - self.p_success(s, a, t_s), CLOUD_COST[a])
    }

    /// Executes one attempt of device `d` on target `target` at `t_s`; `n`
    /// is the device's attempt counter (the luck is keyed by seed, device,
    /// target and `n`, so every contender meets the same luck).
    pub fn attempt(&self, d: usize, target: usize, t_s: f64, n: u64) -> Attempt {
        let dev = &self.devices[d];
        let s = self.targets[target].source;
        let a = dev.archetype;
        let key = [self.spec.seed, d as u64, target as u64, n];
        let src = self.source_at(s, t_s);
        let jitter = (0.5 * coin_normal(&key)).exp();
        if dev.blocked.contains(&s) {
            return fail(10.0 * jitter, "network");
        }
        if let Some(class) = gate_class(src, a) {
            return fail(0.5 * jitter, class);
        }
        let regime = self
            .regime
            .is_some_and(|(rs, ra, from)| rs == s && ra == a && t_s >= from);
        if regime || src.refuses[a] {
            return fail(1.0 * jitter, "http_403");
        }
        let p = self.p_success(s, a, t_s);
        let latency_s = (src.ln_latency[a]).exp() * jitter;
        if coin(&[key[0], key[1], key[2], key[3], 77]) < p {
            Attempt {
                ok: true,
                latency_s,
                error_class: None,
                retry_after_s: None,
            }
        } else {
            fail(latency_s * 2.0, "http_5xx")
        }
    }

    /// An attempt on `target` at `t_s` that its host refused with 429 (it
    /// came over the host's true limit, and the host sends a Retry-After):
    /// a quick failure carrying the host's Retry-After. `None` where the
    /// host serves requests over its limit.
    pub fn throttled(&self, target: usize, t_s: f64) -> Option<Attempt> {
        let src = self.source_at(self.targets[target].source, t_s);
        src.retry_after_s.map(|r| Attempt {
            ok: false,
            latency_s: 0.2,
            error_class: Some("http_429"),
            retry_after_s: Some(r),
        })
    }

    /// The honest content hash of `target` at `t_s`.
    pub fn content(&self, target: usize, t_s: f64) -> String {
        content_hash(target, self.targets[target].version(t_s), 0)
    }

    /// The hash device `d` writes for `target` at `t_s` with adapter
    /// `version`: honest, forged (a liar: one hash shared by every liar) or
    /// wrong (the buggy adapter on the bug's source), as [`World::hash_kind`] says.
    pub fn observed(&self, d: usize, target: usize, t_s: f64, version: &str) -> String {
        let v = self.targets[target].version(t_s);
        content_hash(target, v, self.hash_kind(d, target, version) as u64)
    }

    /// Which kind of hash device `d` writes for `target` with adapter `version`.
    pub fn hash_kind(&self, d: usize, target: usize, version: &str) -> HashKind {
        if self.devices[d].liar {
            return HashKind::Forged;
        }
        match self.bug {
            Some((bs, _))
                if !self.bug_fixed
                    && version == ADAPTER_BUGGY
                    && self.targets[target].source == bs =>
            {
                HashKind::Buggy
            }
            _ => HashKind::Genuine,
        }
    }

    /// Whether `hash` is a genuine content of `target` at or before `t_s`.
    pub fn genuine(&self, target: usize, hash: &str, t_s: f64) -> bool {
        let now = self.targets[target].version(t_s);
        (0..=now).rev().any(|v| content_hash(target, v, 0) == hash)
    }

    /// The politeness capacity of the hosts at the start, grants per second.
    pub fn polite_rate(&self) -> f64 {
        let hosts: BTreeMap<&str, f64> = self
            .sources
            .iter()
            .map(|s| (s.host.as_str(), s.true_bucket().1))
            .collect();
        hosts.values().sum()
    }

    /// The adapter version device `d` runs at `t_s`: its latest upgrade by
    /// then (the buggy one, or a correct rollout's), else [`ADAPTER_OK`].
    pub fn adapter_at(&self, d: usize, t_s: f64) -> &'static str {
        let dev = &self.devices[d];
        let bug = dev.upgrade_at.map(|t| (t, ADAPTER_BUGGY));
        let later = dev
            .rollouts
            .iter()
            .map(|&(t, i)| (t, ADAPTER_LATER.get(i).copied().unwrap_or(ADAPTER_OK)));
        bug.into_iter()
            .chain(later)
            .filter(|(t, _)| *t <= t_s)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map_or(ADAPTER_OK, |(_, v)| v)
    }

    /// Whether device `d` is online at `t_s`.
    pub fn online(&self, d: usize, t_s: f64) -> bool {
        self.devices[d]
            .sessions
            .iter()
            .any(|(a, b)| *a <= t_s && t_s < *b)
    }
}

/// The gate class that refuses archetype `a` on `src`, if any.
fn gate_class(src: &SourceTruth, a: usize) -> Option<&'static str> {
    if src.needs_js && a == PLAIN {
        Some("js_required")
    } else if src.cors_closed && a == BROWSER {
        Some("cors")
    } else if src.antibot && a >= RENDER {
        Some("antibot")
    } else {
        None
    }
}

fn fail(latency_s: f64, class: &'static str) -> Attempt {
    Attempt {
        ok: false,
        latency_s,
        error_class: Some(class),
        retry_after_s: None,
    }
}

/// What a written hash is, by the world's truth (the discriminant is the
/// kind mixed into `content_hash`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HashKind {
    /// The target's true content at the time.
    Genuine = 0,
    /// A liar's forgery (the same for every liar).
    Forged = 1,
    /// The buggy adapter's misreading of the bug's source.
    Buggy = 2,
}

/// A content hash: 16 hex digits of the mixed (target, version, kind).
fn content_hash(target: usize, version: u64, kind: u64) -> String {
    format!(
        "{:016x}",
        mix64(mix64(target as u64 ^ 0xC0_17E7) ^ version.wrapping_mul(31) ^ (kind << 56))
    )
}

#[cfg(test)]
#[path = "world_tests.rs"]
mod tests;
