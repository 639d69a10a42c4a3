//! Read-only views: `GET /v1/field` (aggregates, never device identities)
//! and the Prometheus exposition of `/metrics`. Source: `ROUTING.md` §4.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use routing::field::Address;

use super::Router;
use crate::events::Event;

/// Evidence of one archetype at one source's binding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellView {
    /// Archetype.
    pub archetype: String,
    /// Posterior mean failure rate proxy (reliability cost, 0 = always ok).
    pub reliability_mean: f64,
    /// Posterior standard deviation of the reliability cost.
    pub reliability_sd: f64,
    /// Posterior mean ln-latency (ln seconds).
    pub latency_mean: f64,
    /// Posterior standard deviation of ln-latency.
    pub latency_sd: f64,
    /// Whether a learned or operator gate closes this archetype at the source.
    pub gated: bool,
}

/// One source with its evidence per archetype.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceView {
    /// Source id.
    pub source: String,
    /// Binding.
    pub binding: String,
    /// Host.
    pub host: String,
    /// Volatility ∈ [0, 1].
    pub volatility: f64,
    /// Targets known on this source.
    pub targets: usize,
    /// Evidence per archetype.
    pub cells: Vec<CellView>,
}

/// Population of one archetype.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArchetypeView {
    /// Archetype.
    pub archetype: String,
    /// Live devices.
    pub live: usize,
    /// Known devices (durable identities).
    pub known: usize,
    /// Mean trust of the known devices (0 when none).
    pub mean_trust: f64,
    /// Targets queued for it now.
    pub queued: usize,
}

/// Which replica answered, and under which term of the lead (replicas
/// only; `docs/decisions/0020-replicas-over-one-postgresql.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaLabel {
    /// The replica's name (`--replica-id`).
    pub name: String,
    /// The term of the lead it answered under.
    pub term: i64,
}

/// The body of `GET /v1/field`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldView {
    /// The replica that answered (absent when routerd runs alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<ReplicaLabel>,
    /// Highest deposit sequence number folded into this field: every
    /// deposit acknowledged with a sequence number at most this is in it.
    #[serde(default)]
    pub applied_seq: u64,
    /// Field revision.
    pub revision: u64,
    /// Store backend.
    pub backend: String,
    /// Decision temperature.
    pub temperature: f64,
    /// Sources with evidence.
    pub sources: Vec<SourceView>,
    /// Price λ per pool.
    pub prices: BTreeMap<String, f64>,
    /// Start of the current price window, seconds (`ROUTING.md` §3 Prices).
    #[serde(default)]
    pub window_start_s: f64,
    /// Each pool's use so far in the current price window, in the pool's
    /// unit (a capped pool's cap is in the same unit).
    #[serde(default)]
    pub window_usage: BTreeMap<String, f64>,
    /// Population by archetype.
    pub population: Vec<ArchetypeView>,
    /// Drift: outcomes fed and confirmations.
    pub drift_observations: u64,
    /// Confirmed drifts.
    pub drift_confirmations: u64,
    /// Recent drift, adapter and price events (newest last, ≤ 50).
    pub recent_events: Vec<Event>,
    /// Targets known, settled rows and open verifications.
    pub targets: usize,
    /// Settled rows.
    pub settled: usize,
    /// Open verifications.
    pub open_verifications: usize,
}

impl Router {
    /// The operator's aggregate view of the field (no device identities):
    /// [`Router::field_view_parts`] completed at once.
    pub fn field_view(&self) -> FieldView {
        let (mut view, tables) = self.field_view_parts();
        tables.complete(&mut view);
        view
    }

    /// The field view without the figures that walk whole tables (each
    /// source's target count, each archetype's live and known devices and
    /// mean trust, the targets, settled rows and open verifications: zero
    /// here), and those tables as O(1) clones. The shell takes this under
    /// the router's lock and runs [`ViewTables::complete`] outside it, so
    /// `GET /v1/field` walks no table of targets or devices under the lock
    /// (issue: the lock off the hot path; `docs/router.md`, "Threat model").
    pub fn field_view_parts(&self) -> (FieldView, ViewTables) {
        let layers = self.d.field.layers().to_vec();
        let sources = self
            .d
            .sources
            .iter()
            .map(|(name, s)| {
                let cell = Address::from_labels(&layers, &[name.as_str(), s.binding.as_str()])
                    .unwrap_or_default();
                let src = Address::from_labels(&layers, &[name.as_str()]).unwrap_or_default();
                let cells = self
                    .cfg
                    .archetypes
                    .iter()
                    .map(|a| {
                        let r = self.d.field.posterior(&cell, a, "reliability").ok();
                        let l = self.d.field.posterior(&cell, a, "latency").ok();
                        let gated = (0..=src.depth())
                            .any(|n| self.d.field.gate(&src.prefix(n), a) == Some(false));
                        CellView {
                            archetype: a.clone(),
                            reliability_mean: r.as_ref().map(|p| p.mean).unwrap_or(f64::NAN),
                            reliability_sd: r
                                .as_ref()
                                .map(|p| p.variance.sqrt())
                                .unwrap_or(f64::NAN),
                            latency_mean: l.as_ref().map(|p| p.mean).unwrap_or(f64::NAN),
                            latency_sd: l.as_ref().map(|p| p.variance.sqrt()).unwrap_or(f64::NAN),
                            gated,
                        }
                    })
                    .collect();
                SourceView {
                    source: name.clone(),
                    binding: s.binding.clone(),
                    host: s.host.clone(),
                    volatility: s.volatility(),
                    targets: 0,
                    cells,
                }
            })
            .collect();
        let population = self
            .cfg
            .archetypes
            .iter()
            .map(|a| ArchetypeView {
                archetype: a.clone(),
                live: 0,
                known: 0,
                mean_trust: 0.0,
                queued: self.queues.get(a).map(|q| q.len()).unwrap_or(0),
            })
            .collect();
        let view = FieldView {
            replica: None,
            applied_seq: self.d.applied_seq,
            revision: self.d.field.revision(),
            backend: self.backend.into(),
            temperature: self.d.temperature,
            sources,
            prices: self.prices(),
            window_start_s: self.d.window_start_s,
            window_usage: self.d.usage.clone(),
            population,
            drift_observations: self.d.drift.observations(),
            drift_confirmations: self.d.drift.confirmations(),
            recent_events: self.recent.iter().map(Event::without_identities).collect(),
            targets: 0,
            settled: 0,
            open_verifications: 0,
        };
        (view, self.view_tables())
    }

    /// The tables the views walk, as O(1) clones (persistent maps).
    pub fn view_tables(&self) -> ViewTables {
        ViewTables {
            targets: self.d.targets.table(),
            devices: self.d.devices.table(),
            live: self.live.clone(),
        }
    }

    /// Prometheus text exposition (version 0.0.4) of the counters and
    /// gauges. Every figure is kept as it changes, so writing them walks
    /// no table: O(1) in the targets and devices.
    pub fn metrics_text(&self) -> String {
        let mut out = String::new();
        self.write_counters(&mut out);
        self.write_families_and_gauges(&mut out);
        out
    }

    /// The plain counters, one family each.
    fn write_counters(&self, out: &mut String) {
        let c = &self.counters;
        let mut counter = |name: &str, help: &str, v: u64| {
            let _ = writeln!(
                out,
                "# HELP router_{name} {help}\n# TYPE router_{name} counter\nrouter_{name} {v}"
            );
        };
        counter(
            "registrations_total",
            "Registrations accepted.",
            c.registrations,
        );
        counter("leases_total", "Leases answered.", c.leases);
        counter("items_granted_total", "Items granted.", c.items);
        counter(
            "deposits_total",
            "Deposits folded and acknowledged.",
            c.deposits,
        );
        counter(
            "deposits_replayed_total",
            "Logged deposits folded again at restart.",
            c.replayed,
        );
        counter(
            "deposits_answered_again_total",
            "Retried deposits answered again with their acknowledgement.",
            c.deposits_answered_again,
        );
        counter(
            "protests_total",
            "Protests (preflight releases).",
            c.protests,
        );
        counter(
            "leases_expired_total",
            "Leases expired with undeposited items.",
            c.leases_expired,
        );
        counter(
            "leases_restored_total",
            "Outstanding leases restored from the store at start (written before they were answered).",
            c.leases_restored,
        );
        counter("ticks_total", "Ticks run.", c.ticks);
        counter(
            "politeness_passes_total",
            "Candidates passed over for politeness.",
            c.politeness_passes,
        );
        counter(
            "devices_departed_total",
            "Devices forgotten after their retention (not live, not registered for --device-retention-s).",
            c.devices_departed,
        );
        counter(
            "deposits_pruned_total",
            "Logged deposits pruned after their retention (--deposit-retention-s past a written snapshot).",
            c.deposits_pruned,
        );
        counter(
            "related_agreements_total",
            "Agreements between related identities that moved no trust.",
            c.related_agreements,
        );
        counter(
            "budget_held_total",
            "Leases a capped pool's remaining window budget cut.",
            c.budget_held,
        );
        counter(
            "drift_confirmations_total",
            "Confirmed drifts (all time).",
            self.d.drift.confirmations(),
        );
    }

    /// The labelled counter families (refusals, events), the prices and
    /// the gauges that need no table walk.
    fn write_families_and_gauges(&self, out: &mut String) {
        let c = &self.counters;
        let _ = writeln!(out, "# HELP router_refused_total Refused requests by error kind.\n# TYPE router_refused_total counter");
        for (k, v) in &c.refused {
            let _ = writeln!(out, "router_refused_total{{kind=\"{k}\"}} {v}");
        }
        let _ = writeln!(
            out,
            "# HELP router_events_total Events by kind.\n# TYPE router_events_total counter"
        );
        for (k, v) in &c.events {
            let _ = writeln!(out, "router_events_total{{kind=\"{k}\"}} {v}");
        }
        let _ = writeln!(
            out,
            "# HELP router_price Shadow price per pool.\n# TYPE router_price gauge"
        );
        for (k, v) in self.prices() {
            let _ = writeln!(out, "router_price{{pool=\"{k}\"}} {v}");
        }
        let _ = writeln!(out, "# HELP router_registrations_pending New identities whose first registration is waiting for its durable write.\n# TYPE router_registrations_pending gauge\nrouter_registrations_pending {}", self.registering.len());
        let _ = writeln!(out, "# HELP router_known_devices Devices known (identities kept, live or not).\n# TYPE router_known_devices gauge\nrouter_known_devices {}", self.d.devices.len());
        let _ = writeln!(out, "# HELP router_open_verifications Open verifications.\n# TYPE router_open_verifications gauge\nrouter_open_verifications {}", self.d.targets.tally());
        let _ = writeln!(out, "# HELP router_live_devices Live devices.\n# TYPE router_live_devices gauge\nrouter_live_devices {}", self.live.len());
        let _ = writeln!(out, "# HELP router_outstanding_leases Leases held until they expire or every item is settled (empty leases are not kept).\n# TYPE router_outstanding_leases gauge\nrouter_outstanding_leases {}", self.leases.len());
        let _ = writeln!(out, "# HELP router_reports_waiting Device reports (Retry-After, crawl delay, gate-class failures) holding only their reporter's work until another device corroborates them.\n# TYPE router_reports_waiting gauge\nrouter_reports_waiting {}", self.d.reports.waiting());
        let _ = writeln!(out, "# HELP router_deposit_answers_remembered Deposit acknowledgements remembered for retries.\n# TYPE router_deposit_answers_remembered gauge\nrouter_deposit_answers_remembered {}", self.acks.len());
        let (devices, credentials, addresses) = self.limits.tracked();
        let _ = writeln!(out, "# HELP router_request_budgets Request budgets held, by what they are keyed by.\n# TYPE router_request_budgets gauge\nrouter_request_budgets{{key=\"device\"}} {devices}\nrouter_request_budgets{{key=\"credential\"}} {credentials}\nrouter_request_budgets{{key=\"address\"}} {addresses}");
        let _ = writeln!(out, "# HELP router_field_revision Field revision.\n# TYPE router_field_revision gauge\nrouter_field_revision {}", self.d.field.revision());
        let _ = writeln!(out, "# HELP router_snapshot_bytes Bytes of the last snapshot row written (the state serialized; docs/router.md, \"The small box\").\n# TYPE router_snapshot_bytes gauge\nrouter_snapshot_bytes {}", self.counters.snapshot_bytes);
        let _ = writeln!(out, "# HELP router_field_aged_in_place_total Ticks whose field was aged under the lock (the aged clone's journal could not be replayed).\n# TYPE router_field_aged_in_place_total counter\nrouter_field_aged_in_place_total {}", self.counters.aging_in_place);
    }
}

/// The tables `GET /v1/field` and `/metrics` count: targets, devices and
/// live devices, cloned in O(1) under the router's lock (persistent maps
/// share their nodes) and walked outside it. A view completed from them is
/// exact as of the moment they were taken.
pub struct ViewTables {
    targets: crate::core::state::Table<crate::core::state::TargetRec>,
    devices: crate::core::state::Table<crate::core::state::DeviceRec>,
    live: imbl::OrdMap<String, super::Live>,
}

impl ViewTables {
    /// Fills in what [`Router::field_view_parts`] left at zero: each
    /// source's targets, each archetype's live and known devices and mean
    /// trust (0 when none), the targets, settled rows and open
    /// verifications.
    pub fn complete(&self, view: &mut FieldView) {
        let mut per_source: BTreeMap<&str, usize> = BTreeMap::new();
        let (mut settled, mut open) = (0, 0);
        for t in self.targets.values() {
            *per_source.entry(t.source.as_str()).or_default() += 1;
            settled += usize::from(t.verification.settled().is_some());
            open += t.verification.open().len();
        }
        for s in &mut view.sources {
            s.targets = per_source.get(s.source.as_str()).copied().unwrap_or(0);
        }
        // archetype → (live, known, trust sum)
        let mut by: BTreeMap<&str, (usize, usize, f64)> = BTreeMap::new();
        for (id, d) in &self.devices {
            let e = by.entry(&*d.archetype).or_default();
            e.1 += 1;
            e.2 += d.trust;
            e.0 += usize::from(self.live.contains_key(id));
        }
        for a in &mut view.population {
            let (live, known, sum) = by.get(a.archetype.as_str()).copied().unwrap_or_default();
            a.live = live;
            a.known = known;
            a.mean_trust = if known == 0 { 0.0 } else { sum / known as f64 };
        }
        view.targets = self.targets.len();
        view.settled = settled;
        view.open_verifications = open;
    }
}
