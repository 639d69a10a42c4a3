//! The operator's facts (`PUT /v1/facts`): sources, seeded targets,
//! priors, weights, gates, caps, temperature and sticky device states,
//! applied all or nothing. Source: `ROUTING.md` §1 (operators steer by
//! writing facts and weights), §4.

use serde::{Deserialize, Serialize};

use routing::field::Address;
use routing::politeness::Bucket;
use routing::prices::Pool;
use routing::trust::State as TrustState;

use super::state::{Durable, SourceRec, TargetRec};
use super::Router;
use crate::api::ApiError;
use crate::config::{check_id, check_label, check_range, Facts, POOLS};

/// What a facts request changed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FactsReport {
    /// Sources declared or updated.
    pub sources: usize,
    /// Targets added (existing ones are kept).
    pub targets_added: usize,
    /// Cells written (priors, weights, gates).
    pub cells: usize,
    /// Caps set.
    pub caps: usize,
    /// Device states set.
    pub device_states: usize,
}

fn address(d: &Durable, field: &str, text: &str) -> Result<Address, ApiError> {
    if text.is_empty() {
        return Ok(Address::root());
    }
    d.field
        .parse(text)
        .map_err(|e| ApiError::bad(field, e.to_string()))
}

fn fe(field: &'static str) -> impl Fn(routing::field::FieldError) -> ApiError {
    move |e| ApiError::bad(field, e.to_string())
}

fn apply(d: &mut Durable, f: &Facts, now_s: f64) -> Result<FactsReport, ApiError> {
    let mut rep = FactsReport::default();
    if let Some(t) = f.temperature {
        check_range("temperature", t, 0.0, 100.0)?;
        d.temperature = t;
    }
    apply_sources(d, f, &mut rep)?;
    apply_targets(d, f, now_s, &mut rep)?;
    apply_cells(d, f, &mut rep)?;
    apply_caps(d, f, &mut rep)?;
    apply_device_states(d, f, &mut rep)?;
    Ok(rep)
}

/// The sources: their host, binding, requirements, change timescale and
/// politeness bucket (a source's counts survive a redeclaration).
fn apply_sources(d: &mut Durable, f: &Facts, rep: &mut FactsReport) -> Result<(), ApiError> {
    for s in &f.sources {
        check_label("sources.source", &s.source)?;
        check_label("sources.binding", &s.binding)?;
        check_id("sources.host", &s.host)?;
        for r in &s.requires {
            check_id("sources.requires", r)?;
        }
        let ts = s.change_timescale_s.unwrap_or(86_400.0);
        check_range("sources.change_timescale_s", ts, 1.0, 31_536_000.0)?;
        if let Some((cap, rate)) = s.bucket {
            let bad = |e: routing::politeness::PolitenessError| {
                ApiError::bad("sources.bucket", e.to_string())
            };
            // Declared again: the host keeps its tokens, pause and crawl
            // delay (docs/decisions/0023-a-crawl-delay-allows-no-burst.md).
            match d.buckets.get_mut(&s.host) {
                Some(b) => b.redeclare(cap, rate).map_err(bad)?,
                None => {
                    let b = Bucket::new(cap, rate).map_err(bad)?;
                    d.buckets.insert(s.host.clone(), b);
                }
            }
        }
        let prev = d.sources.get(&s.source);
        let rec = SourceRec {
            host: s.host.clone(),
            binding: s.binding.clone(),
            requires: s.requires.clone(),
            change_timescale_s: ts,
            reobservations: prev.map(|p| p.reobservations).unwrap_or(0),
            changes: prev.map(|p| p.changes).unwrap_or(0),
        };
        d.sources.insert(s.source.clone(), rec);
        rep.sources += 1;
    }
    Ok(())
}

/// The targets, each of a declared source; a new one is due at `now_s`.
fn apply_targets(
    d: &mut Durable,
    f: &Facts,
    now_s: f64,
    rep: &mut FactsReport,
) -> Result<(), ApiError> {
    for t in &f.targets {
        check_id("targets.target", &t.target)?;
        if !d.sources.contains_key(&t.source) {
            return Err(ApiError::bad(
                "targets.source",
                format!("unknown source `{}`", t.source),
            ));
        }
        if !d.targets.contains_key(&t.target) {
            d.targets.insert(
                t.target.clone(),
                TargetRec {
                    source: t.source.clone(),
                    listing: t.listing,
                    observations: Vec::new(),
                    verification: Default::default(),
                    last_attempt_s: None,
                    due_s: now_s,
                    churn: Default::default(),
                },
            );
            rep.targets_added += 1;
        }
    }
    Ok(())
}

/// The target whose task cells a cell at `a` is, marked changed: its row
/// carries its task cells (`core/target_rows.rs`), so a prior or weight
/// written there is written with it.
fn mark_task(d: &mut Durable, a: &Address) {
    if let Some(target) = a.labels().get(2) {
        drop(d.targets.get_mut(target));
    }
}

/// The field's priors, weights and gates.
fn apply_cells(d: &mut Durable, f: &Facts, rep: &mut FactsReport) -> Result<(), ApiError> {
    for c in &f.priors {
        let a = address(d, "priors.address", &c.address)?;
        d.field
            .set_prior(&a, &c.option, &c.dimension, c.value)
            .map_err(fe("priors"))?;
        mark_task(d, &a);
        rep.cells += 1;
    }
    for c in &f.weights {
        let a = address(d, "weights.address", &c.address)?;
        d.field
            .set_weight(&a, &c.option, &c.dimension, c.value)
            .map_err(fe("weights"))?;
        mark_task(d, &a);
        rep.cells += 1;
    }
    for g in &f.gates {
        let a = address(d, "gates.address", &g.address)?;
        d.field
            .set_gate(&a, &g.option, g.open)
            .map_err(fe("gates"))?;
        rep.cells += 1;
    }
    Ok(())
}

/// The pools' caps.
fn apply_caps(d: &mut Durable, f: &Facts, rep: &mut FactsReport) -> Result<(), ApiError> {
    for (pool, cap) in &f.caps {
        if !POOLS.contains(&pool.as_str()) {
            return Err(ApiError::bad(
                "caps",
                format!("unknown pool `{pool}`; pools are {POOLS:?}"),
            ));
        }
        check_range("caps", *cap, 0.0, 1e12)?;
        let mut p = match d.pools.get(pool) {
            Some(p) => p.clone(),
            None => Pool::with_cap(*cap).map_err(|e| ApiError::bad("caps", e.to_string()))?,
        };
        p.set_cap(*cap)
            .map_err(|e| ApiError::bad("caps", e.to_string()))?;
        d.pools.insert(pool.clone(), p);
        rep.caps += 1;
    }
    Ok(())
}

/// The operator's device states: suspended, revoked or cleared.
fn apply_device_states(d: &mut Durable, f: &Facts, rep: &mut FactsReport) -> Result<(), ApiError> {
    for (dev, state) in &f.device_states {
        let mut rec = d
            .devices
            .get_mut(dev)
            .ok_or_else(|| ApiError::bad("device_states", format!("unknown device `{dev}`")))?;
        rec.state = match state.as_str() {
            "suspended" => TrustState::Suspended,
            "revoked" => TrustState::Revoked,
            "cleared" => TrustState::classify(TrustState::Normal, rec.trust),
            other => {
                return Err(ApiError::bad(
                    "device_states",
                    format!("`{other}`: use suspended, revoked or cleared"),
                ))
            }
        };
        rep.device_states += 1;
    }
    Ok(())
}

impl Router {
    /// Applies the operator's facts at `now_s`, all or nothing, and writes
    /// the snapshot before answering (acknowledged facts are durable).
    /// Errors: `BadValue` naming the first offending entry, `Store` when the
    /// snapshot could not be written (nothing changed either way).
    pub fn put_facts(&mut self, facts: &Facts, now_s: f64) -> Result<FactsReport, ApiError> {
        let mut next = self.d.clone();
        let r = apply(&mut next, facts, now_s);
        let r = self.check(r)?;
        // Acknowledged facts are durable: the snapshot is written before answering.
        let old = std::mem::replace(&mut self.d, next);
        let was_dirty = std::mem::replace(&mut self.dirty, true);
        if let Err(e) = self.persist(now_s) {
            self.d = old;
            self.dirty = was_dirty;
            let e = ApiError::Store(e.to_string());
            self.refused(&e);
            return Err(e);
        }
        if facts
            .device_states
            .values()
            .any(|s| s == "suspended" || s == "revoked")
        {
            let gone: Vec<String> = facts
                .device_states
                .iter()
                .filter(|(_, s)| *s == "suspended" || *s == "revoked")
                .map(|(k, _)| k.clone())
                .collect();
            for k in gone {
                self.live.remove(&k);
            }
        }
        self.refill(now_s);
        Ok(r)
    }

    /// The operator's current facts (temperature, sources, caps); device
    /// states only for operator-set ones.
    pub fn get_facts(&self) -> Facts {
        Facts {
            temperature: Some(self.d.temperature),
            sources: self
                .d
                .sources
                .iter()
                .map(|(k, s)| crate::config::SourceFact {
                    source: k.clone(),
                    host: s.host.clone(),
                    binding: s.binding.clone(),
                    requires: s.requires.clone(),
                    change_timescale_s: Some(s.change_timescale_s),
                    bucket: None,
                })
                .collect(),
            caps: self
                .d
                .pools
                .iter()
                .map(|(k, p)| (k.clone(), p.cap()))
                .collect(),
            device_states: self
                .d
                .devices
                .iter()
                .filter(|(_, d)| matches!(d.state, TrustState::Suspended | TrustState::Revoked))
                .map(|(k, d)| (k.clone(), super::lease::state_name(d.state).to_string()))
                .collect(),
            ..Facts::default()
        }
    }
}
