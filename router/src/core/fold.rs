//! The fold of one accepted deposit into evidence, gates, politeness,
//! trust, churn, verification and usage (its validation and the log's two
//! halves are in [`super::deposit`]).
//! Source: `ROUTING.md` §3 (Gates are learned, Trust, Prices, Politeness,
//! Assignment policy) and §4.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use routing::field::Address;
use routing::trust::{pairwise, AdapterKey, State as TrustState};
use routing::verify::{SettledBy, VoteOutcome};

use super::lease::state_name;
use super::reports::{Subject, Verdict};
use super::state::{Observation, TargetRec};
use super::Router;
use crate::api::DepositRequest;
use crate::config::deposit_usage;
use crate::events::Event;

/// Error classes that write a false gate for (source, archetype).
pub const GATE_CLASSES: [&str; 3] = ["cors", "js_required", "antibot"];

/// Seconds after which a failed attempt is due again (or its Retry-After, if longer).
pub const RETRY_S: f64 = 60.0;

/// A deposit as logged (write-ahead) and folded; the device secret is not kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Logged {
    /// Depositing device.
    pub device: String,
    /// Its archetype (the realized environment).
    pub archetype: String,
    /// Router-clock time of the deposit, seconds.
    pub t_s: f64,
    /// The request, with `device_secret` blanked.
    pub req: DepositRequest,
}

impl Router {
    /// Folds one logged deposit (also at restart, in log order). Never
    /// fails: a part that cannot apply (an unknown source, a field refusal)
    /// is skipped, the rest applies.
    pub(crate) fn fold(&mut self, l: &Logged, seq: u64) {
        let t = l.t_s;
        let req = &l.req;
        let Some(target) = self.d.targets.get(&req.target).cloned() else {
            self.d.applied_seq = self.d.applied_seq.max(seq);
            return;
        };
        let Some(source) = self.d.sources.get(&target.source).cloned() else {
            self.d.applied_seq = self.d.applied_seq.max(seq);
            return;
        };
        let layers = self.d.field.layers().to_vec();
        let labels = [
            target.source.as_str(),
            source.binding.as_str(),
            req.target.as_str(),
            l.archetype.as_str(),
        ];
        let (Ok(leaf), Ok(cell), Ok(src)) = (
            Address::from_labels(&layers, &labels),
            Address::from_labels(&layers, &labels[..2]),
            Address::from_labels(&layers, &labels[..1]),
        ) else {
            self.d.applied_seq = self.d.applied_seq.max(seq);
            return;
        };
        self.fold_evidence(l, &target.source, &leaf, &cell, &src, t);
        if let Some(ch) = self.chooser.as_mut() {
            ch.observe(
                &target.source,
                &req.target,
                &l.archetype,
                req.outcome.ok,
                req.outcome.latency_ms,
            );
        }
        self.fold_politeness(l, &source.host, t);
        let changed = self.fold_observation(l, &target, t);
        for (pool, n) in deposit_usage(changed) {
            *self.d.usage.entry(pool.into()).or_default() += n;
        }
        for d in &req.discovered {
            if !self.d.targets.contains_key(d) {
                self.d.targets.insert(
                    d.clone(),
                    TargetRec {
                        source: target.source.clone(),
                        listing: false,
                        observations: Vec::new(),
                        verification: Default::default(),
                        last_attempt_s: None,
                        due_s: t,
                        churn: Default::default(),
                    },
                );
            }
        }
        let cadence = source
            .change_timescale_s
            .clamp(self.cfg.reobserve_s.0, self.cfg.reobserve_s.1);
        let mut compact = false;
        if let Some(mut tr) = self.d.targets.get_mut(&req.target) {
            tr.last_attempt_s = Some(t);
            tr.due_s = if req.outcome.ok {
                t + cadence
            } else {
                // One device's Retry-After moves this target's next try by
                // at most the shared pause's cap.
                t + RETRY_S.max(
                    req.outcome
                        .retry_after_s
                        .unwrap_or(0.0)
                        .min(super::reports::MAX_SHARED_PAUSE_S),
                )
            };
            compact = tr.listing
                || (tr.verification.settled().is_some() && tr.verification.open().is_empty());
        }
        if compact {
            if let Ok(task) = Address::from_labels(&layers, &labels[..3]) {
                let _ = self.d.field.compact(&task);
            }
        }
        if let Some(mut dev) = self.d.devices.get_mut(&l.device) {
            dev.deposits += 1;
        }
        self.d.applied_seq = self.d.applied_seq.max(seq);
        self.dirty = true;
    }

    fn fold_evidence(
        &mut self,
        l: &Logged,
        source: &str,
        leaf: &Address,
        cell: &Address,
        src: &Address,
        t: f64,
    ) {
        let o = &l.req.outcome;
        // A failure of a gate class is a datapoint about the gate, not an
        // error of the archetype (`ROUTING.md` §3 Gates are learned too): it
        // writes the gate below and folds no reliability evidence, so a wall
        // on one source does not lower the archetype's mean everywhere else.
        let gate_failure = !o.ok
            && o.error_class
                .as_deref()
                .is_some_and(|c| GATE_CLASSES.contains(&c));
        let mut outcomes = Vec::with_capacity(2);
        if !gate_failure {
            outcomes.push(("reliability", if o.ok { 0.0 } else { 1.0 }, 0.25));
        }
        if let (true, Some(ms)) = (o.ok, o.latency_ms) {
            if ms > 0.0 {
                outcomes.push(("latency", (ms / 1000.0).ln(), self.cfg.latency_variance));
            }
        }
        for (dim, x, var) in outcomes {
            let ev = self
                .d
                .drift
                .fold(&mut self.d.field, cell, leaf, &l.archetype, dim, x, var, t);
            if ev == Ok(routing::dynamics::DriftEvent::Confirmed) {
                if let Some(r) = self.d.drift.trace().last().cloned() {
                    self.emit(Event::DriftConfirmed {
                        t_s: t,
                        cell: r.cell.labels().join("/"),
                        option: r.option,
                        dimension: r.dimension,
                        fast: r.fast,
                        slow: r.slow,
                    });
                }
            }
        }
        let gated = self.d.field.gate(src, &l.archetype) == Some(false);
        match (&o.error_class, o.ok) {
            // Evidence, not a command: one device's wall holds its own
            // work off the source; a corroborated one shuts the gate for
            // the archetype until it lapses (docs/router.md "Threat model").
            (Some(c), false) if GATE_CLASSES.contains(&c.as_str()) => {
                let subject = Subject::Gate(source.to_string(), l.archetype.clone());
                if let Verdict::Shared(_) = self.claim(&subject, &l.device, t, 0.0) {
                    let _ = self.d.field.set_gate(src, &l.archetype, Some(false));
                    self.d.reports.schedule_lapse(&subject, t, None);
                }
            }
            (_, true) if gated => {
                let _ = self.d.field.set_gate(src, &l.archetype, None);
            }
            _ => {}
        }
    }

    /// A device's `retry_after_s` and `crawl_delay_s`: claims that hold
    /// its own work on the host, and move the host's shared bucket only
    /// once corroborated, capped ([`super::reports`]).
    fn fold_politeness(&mut self, l: &Logged, host: &str, t: f64) {
        let (cap, rate) = self.cfg.host_bucket;
        let Ok(fresh) = routing::politeness::Bucket::new(cap, rate) else {
            return;
        };
        let o = &l.req.outcome;
        if let Some(s) = o.retry_after_s {
            let subject = Subject::Pause(host.to_string());
            if let Verdict::Shared(v) = self.claim(&subject, &l.device, t, s) {
                let b = self
                    .d
                    .buckets
                    .entry(host.to_string())
                    .or_insert(fresh.clone());
                let _ = b.pause(t, v);
            }
        }
        if let Some(s) = o.crawl_delay_s {
            let subject = Subject::CrawlDelay(host.to_string());
            if let Verdict::Shared(v) = self.claim(&subject, &l.device, t, s) {
                let b = self.d.buckets.entry(host.to_string()).or_insert(fresh);
                let before = b.rate();
                let _ = b.crawl_delay(v);
                self.d.reports.schedule_lapse(&subject, t, Some(before));
            }
        }
    }

    /// Records `device`'s claim on `subject` at `t` (its `value`):
    /// corroborated by trust at τ_hi or by an unrelated device
    /// ([`super::reports::Reports::claim_among`]).
    fn claim(&mut self, subject: &Subject, device: &str, t: f64, value: f64) -> Verdict {
        let trusted = self.trusted(device);
        let (devices, rule) = (&self.d.devices, self.cfg.verify.relation);
        let related = |a: &str, b: &str| related_in(devices, a, b, &rule, t);
        self.d
            .reports
            .claim_among(subject, device, trusted, t, value, related)
    }

    /// The verification rule in force: the configured one, requiring two
    /// credentials in a quorum where the router holds more than one
    /// (decision 0014).
    pub(crate) fn verify_config(&self) -> routing::verify::VerifyConfig {
        let mut vc = self.cfg.verify;
        if !self.cfg.more_credentials.is_empty() {
            vc.quorum_credentials = vc.quorum_credentials.max(2).min(vc.quorum);
        }
        vc
    }

    /// Whether two identities count as one at `now_s`
    /// ([`routing::trust::Origin::related`]).
    fn related(&self, a: &str, b: &str, now_s: f64) -> bool {
        related_in(&self.d.devices, a, b, &self.cfg.verify.relation, now_s)
    }

    /// Whether `device`'s trust alone corroborates its reports (at or
    /// above the verification rule's τ_hi).
    fn trusted(&self, device: &str) -> bool {
        self.d
            .devices
            .get(device)
            .is_some_and(|d| d.trust >= self.cfg.verify.tau_hi)
    }

    /// Trust, churn and verification for a successful observation; returns
    /// whether the content changed (or was seen for the first time).
    fn fold_observation(&mut self, l: &Logged, target: &TargetRec, t: f64) -> bool {
        let req = &l.req;
        let (true, Some(hash)) = (req.outcome.ok, req.outcome.content_hash.as_deref()) else {
            if let Some(mut tr) = self.d.targets.get_mut(&req.target) {
                tr.verification.release(&l.device);
            }
            return false;
        };
        // One copy of the content hash, shared by the observation, its
        // vote and the settled row.
        let hash: Arc<str> = Arc::from(hash);
        let t_h = t / 3600.0;
        let cooling = target.churn.cooling(t_h);
        let last_any = target.observations.last().cloned();
        let changed = last_any.as_ref().is_none_or(|o| *o.hash != *hash);
        let source_name = target.source.clone();
        if let Some(prev) = &last_any {
            if let Some(s) = self.d.sources.get_mut(&source_name) {
                s.reobservations += 1;
                if prev.hash != hash {
                    s.changes += 1;
                }
            }
            if prev.hash != hash {
                let started = self
                    .d
                    .targets
                    .get_mut(&req.target)
                    .is_some_and(|mut tr| tr.churn.record_change(t_h));
                if started {
                    self.emit(Event::ChurnCooldown {
                        t_s: t,
                        target: req.target.clone(),
                    });
                }
            }
        }
        let other = target
            .observations
            .iter()
            .rev()
            .find(|o| *o.device != *l.device)
            .cloned();
        if let (Some(other), false, true) = (other, cooling, self.cfg.trust_enabled) {
            self.trust_event(l, &other, &hash, &source_name, t);
        }
        let settled_by = self.vote_on_row(l, &hash, t);
        let (device, adapter, adapter_version) = (
            self.names.intern(&l.device),
            self.names.intern(&req.adapter_id),
            self.names.intern(&req.adapter_version),
        );
        if let Some(mut tr) = self.d.targets.get_mut(&req.target) {
            tr.push_observation(Observation {
                device,
                hash: hash.clone(),
                t_s: t,
                adapter,
                adapter_version,
            });
        }
        if let Some(by) = settled_by {
            self.emit(Event::VerificationSettled {
                t_s: t,
                target: req.target.clone(),
                by: match by {
                    SettledBy::Trusted => "trusted".into(),
                    SettledBy::Quorum => "quorum".into(),
                    SettledBy::Inferred => "inferred".into(),
                },
            });
        }
        changed
    }

    /// The observation's vote on its row: a disagreeing re-observation of
    /// a settled row reopens it; then the router's rule counts the vote
    /// (trusted or quorum), or, with a [`super::Settler`], the vote is
    /// recorded and the model decides. Returns how the row settled, if it
    /// did now.
    fn vote_on_row(&mut self, l: &Logged, hash: &Arc<str>, t: f64) -> Option<SettledBy> {
        let target = &l.req.target;
        let (my_trust, my_origin) = self
            .d
            .devices
            .get(&l.device)
            .map_or((0.5, None), |d| (d.trust, Some(d.origin())));
        let vc = self.verify_config();
        let device = self.names.intern(&l.device);
        let mut tr = self.d.targets.get_mut(target)?;
        if tr.verification.settled().is_some_and(|s| s != &**hash) {
            tr.verification.reopen();
            if let Some(s) = self.settler.as_mut() {
                s.reopen(target);
            }
        }
        let settled = tr.verification.settled().is_some();
        if let (Some(s), true) = (self.settler.as_mut(), settled) {
            s.observe(target, &l.device, hash, t);
        }
        if settled {
            // Settled on this hash: the answer closes the verification the
            // device held, if it held one, so the row's cells compact now
            // instead of when the verification lapses, an hour on.
            tr.verification.release(&l.device);
            return None;
        }
        let outcome = if let Some(s) = self.settler.as_mut() {
            s.observe(target, &l.device, hash, t);
            tr.verification
                .record(device, hash.clone(), my_trust)
                .ok()?;
            let h = s.decide(target)?;
            tr.verification.settle_inferred(h.as_str())
        } else {
            tr.verification
                .vote_from(device, hash.clone(), my_trust, my_origin, t, &vc)
        };
        match outcome {
            Ok(VoteOutcome::Settled { by, .. }) => Some(by),
            _ => None,
        }
    }

    /// One pairwise trust event against the most recent earlier observation
    /// by another device, with the adapter-disagreement clustering.
    fn trust_event(&mut self, l: &Logged, other: &Observation, hash: &str, source: &str, t: f64) {
        let agree = *other.hash == *hash;
        let volatility = self
            .d
            .sources
            .get(source)
            .map(|s| s.volatility())
            .unwrap_or(0.0);
        let (me_key, other_key) = self.adapter_keys(l, other, source);
        // Every comparison counts toward the source's rates (across adapter
        // versions or within one): they tell a bug from churn.
        self.d
            .clusters
            .record_comparison(source, me_key != other_key, agree);
        let clusters_move =
            self.d.clusters.moves_trust(&me_key) && self.d.clusters.moves_trust(&other_key);
        if !agree && !clusters_move {
            return;
        }
        // Related identities (one credential, one network or one burst)
        // agreeing tell nothing: their agreement moves no trust. A
        // disagreement still costs both (decision 0014).
        if agree && self.related(&l.device, &other.device, t) {
            self.counters.related_agreements += 1;
            return;
        }
        let (a, b) = (self.trust_of(&l.device), self.trust_of(&other.device));
        let dt_h = (t - other.t_s) / 3600.0;
        let (na, nb) = pairwise(a, b, agree, dt_h, volatility);
        self.set_trust(&l.device, na, t);
        self.set_trust(&other.device, nb, t);
        if agree {
            return;
        }
        if me_key == other_key {
            self.d.clusters.record_plain(source);
            return;
        }
        let mut restorations = Vec::new();
        for (key, device, moved) in [
            (&me_key, l.device.as_str(), na - a),
            (&other_key, &*other.device, nb - b),
        ] {
            let r = self.d.clusters.record(key, device, moved);
            if !r.is_empty() {
                self.emit(Event::AdapterDisagreement {
                    t_s: t,
                    source: key.source.clone(),
                    adapter: key.adapter.clone(),
                    version: key.version.clone(),
                    restored: r.len(),
                });
            }
            restorations.extend(r);
        }
        for r in restorations {
            let cur = self.trust_of(&r.device);
            self.set_trust(&r.device, (cur + r.delta).clamp(0.0, 1.0), t);
        }
    }

    /// The adapter keys of the two sides of a comparison. The earlier side
    /// is keyed by the adapter its observation ran, not by what its device
    /// runs now: a device that upgraded since would otherwise carry the new
    /// version's disagreements as same-version ones, which no cluster
    /// restores.
    fn adapter_keys(
        &self,
        l: &Logged,
        other: &Observation,
        source: &str,
    ) -> (AdapterKey, AdapterKey) {
        let me_key = AdapterKey {
            source: source.to_string(),
            adapter: l.req.adapter_id.clone(),
            version: l.req.adapter_version.clone(),
        };
        let other_key = AdapterKey {
            source: source.to_string(),
            adapter: if other.adapter.is_empty() {
                l.req.adapter_id.clone()
            } else {
                other.adapter.to_string()
            },
            version: if other.adapter_version.is_empty() {
                self.d
                    .devices
                    .get(&*other.device)
                    .map(|d| d.adapter_version.to_string())
                    .unwrap_or_default()
            } else {
                other.adapter_version.to_string()
            },
        };
        (me_key, other_key)
    }

    /// A device's trust (0.5 for one not known).
    fn trust_of(&self, device: &str) -> f64 {
        self.d.devices.get(device).map(|d| d.trust).unwrap_or(0.5)
    }

    pub(super) fn set_trust(&mut self, device: &str, tau: f64, t: f64) {
        let Some(mut d) = self.d.devices.get_mut(device) else {
            return;
        };
        d.trust = if tau.is_finite() {
            tau.clamp(0.0, 1.0)
        } else {
            0.5
        };
        let next = TrustState::classify(d.state, d.trust);
        let moved = next != d.state;
        d.state = next;
        drop(d);
        if moved {
            let state = state_name(next).to_string();
            self.emit(Event::DeviceState {
                t_s: t,
                device: device.to_string(),
                state,
            });
        }
    }
}

/// Whether devices `a` and `b` of `devices` are distinct identities that
/// count as one at `now_s` ([`routing::trust::Origin::related`]; unknown
/// ids are related to nothing).
fn related_in(
    devices: &crate::core::state::Table<crate::core::state::DeviceRec>,
    a: &str,
    b: &str,
    rule: &routing::trust::Relation,
    now_s: f64,
) -> bool {
    match (devices.get(a), devices.get(b)) {
        (Some(x), Some(y)) if a != b => x.origin().related(&y.origin(), rule, now_s),
        _ => false,
    }
}
