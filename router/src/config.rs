//! Router configuration and the operator's facts (`PUT /v1/facts`).
//! Source: `ROUTING.md` §3 (defaults) and §4.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::api::ApiError;

/// The metered pools and what one unit of work charges them.
/// Source: `ROUTING.md` §3 Prices (metering table).
pub const POOLS: [&str; 3] = ["object_store", "database", "events"];

/// Per-deposit charge: object-store put + get + delete (the put is skipped
/// when the content hash is unchanged), one database copy.
pub fn deposit_usage(changed: bool) -> [(&'static str, f64); 2] {
    [
        ("object_store", if changed { 3.0 } else { 2.0 }),
        ("database", 1.0),
    ]
}

/// The cap a pool has until the operator sets one (per price window): at or
/// above it a pool counts as uncapped and never limits a lease.
pub const UNCAPPED: f64 = 1e9;

/// Per-lease charge: one database stamp.
pub const LEASE_STAMP: (&str, f64) = ("database", 1.0);

/// Expected usage of one item, per pool, entering decisions as the
/// `budget:<pool>` dimensions' prior means (weighted by λ).
pub fn item_usage(pool: &str) -> f64 {
    match pool {
        "object_store" => 3.0,
        "database" => 2.0,
        "events" => 0.1,
        _ => 0.0,
    }
}

/// Service configuration (command line and defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RouterConfig {
    /// Declared archetypes (options of the field).
    pub archetypes: Vec<String>,
    /// Lease TTL in seconds (the heartbeat), default 60.
    pub lease_ttl_s: f64,
    /// Token devices present to register: the credential named
    /// [`crate::credentials::DEFAULT_NAME`].
    pub registration_token: String,
    /// More registration credentials, name → token
    /// ([`crate::credentials`]), default none. Holding any (two or more
    /// credentials in all), every quorum needs voters of two credentials.
    #[serde(default)]
    pub more_credentials: BTreeMap<String, String>,
    /// Key guarding the operator endpoints.
    pub operator_key: String,
    /// Observation variance of ln-latency, default 0.5.
    pub latency_variance: f64,
    /// Items per lease at zero stamp price, per archetype (default 1; browsers 4).
    pub batch_base: BTreeMap<String, usize>,
    /// Price window in seconds (one price tick per window), default 60.
    pub price_window_s: f64,
    /// Per-device request bucket: capacity (requests) and refill (per
    /// second), default (20, 10). Kept apart from the device's live entry:
    /// registering again does not refill it.
    pub device_rate: (f64, f64),
    /// Registrations per registration credential: capacity and refill per
    /// second, default (100,000, 1,000), so a 100,000-device fleet
    /// registering again after a restart fits; lower it for a smaller fleet.
    pub registration_rate: (f64, f64),
    /// Registrations per source address (where the HTTP shell sees one),
    /// every attempt counted, default (1,000, 10): a site behind one
    /// address may register a thousand devices at once, then ten a second.
    /// Behind a reverse proxy every device has the proxy's address: raise
    /// it there.
    pub registration_address_rate: (f64, f64),
    /// Most targets one device may discover per price window, default
    /// 10,000 (ten full listing deposits).
    pub discovery_per_window: usize,
    /// Fleet-level cap on the share of live devices treated as limited, default 0.3.
    pub limited_cap_share: f64,
    /// Most queued targets per archetype, default 1,024 (also bounds the
    /// decisions a refill makes: this many per live archetype per tick).
    pub queue_limit: usize,
    /// Queue entries offered to the policy per lease, default 32.
    pub candidates_per_lease: usize,
    /// Re-observation interval bounds in seconds (min, max), default (3,600, 604,800).
    pub reobserve_s: (f64, f64),
    /// Filler entries per archetype per refill, default 64.
    pub filler_per_archetype: usize,
    /// Default politeness bucket for a new host: capacity and refill per second.
    pub host_bucket: (f64, f64),
    /// Most deposits accepted and not yet answered by the store, default
    /// 4,096; past it a deposit is refused with 503 `overloaded` and
    /// `Retry-After` (the HTTP shell's back-pressure).
    pub deposit_queue: usize,
    /// Most long polls held at once, default 1,024: a held poll keeps its
    /// connection's buffers (about 26 KB each, docs/router.md "The
    /// small box"), so past it a long poll is answered at once, empty,
    /// with its `retry_after_s` (the HTTP shell's bound on waiting
    /// devices' memory).
    #[serde(default = "default_held_polls")]
    pub held_polls: usize,
    /// Most request body bytes on the device endpoints, default 65,536.
    pub body_limit: usize,
    /// Most request body bytes on `PUT /v1/facts` (operator), default 8 MiB.
    pub facts_body_limit: usize,
    /// Verification rule (τ_hi, quorum k, open cap, TTL), default the brief's.
    pub verify: routing::verify::VerifyConfig,
    /// Whether deposits move trust (the fixed-quorum baseline turns it off).
    pub trust_enabled: bool,
    /// Least seconds between two snapshots, default 5 (deposits after the
    /// last snapshot are folded again from the log at restart, so this bounds
    /// replay work, not durability).
    pub snapshot_period_s: f64,
    /// Least seconds between two agings of the field, default 0 (every
    /// tick). A tick within it does not age; the next aging ages by all
    /// the time since the last, so the evidence decays as much either way
    /// (`ROUTING.md` §3 Evidence dynamics (a); decision 0021).
    #[serde(default)]
    pub aging_period_s: f64,
    /// Whether the field is aged in place under the router's lock instead
    /// of on a clone outside it, default false. Aging a clone rewrites
    /// every cell, so for that moment the field is held twice; in place
    /// it is not, at the cost of the walk's time on the lock (decision
    /// 0021; docs/router.md "The small box").
    #[serde(default)]
    pub aging_in_place: bool,
    /// Seconds a logged deposit is kept after a written snapshot covers
    /// it, default 86,400 (a day); then it is pruned from the log.
    #[serde(default = "default_deposit_retention_s")]
    pub deposit_retention_s: f64,
    /// Seconds a device that is not live is kept (from its last
    /// registration or the end of its last live scope); then it is
    /// forgotten (suspended and revoked ones are kept), default 2,592,000
    /// (30 days).
    #[serde(default = "default_device_retention_s")]
    pub device_retention_s: f64,
    /// The field's process variances for a new store (a reopened store
    /// keeps the ones it was created with).
    pub field_variances: FieldVariances,
}

/// The process variances of the router's field
/// (`docs/decisions/0005-field-variance-units.md`). The root and layer
/// variances are in reliability units (a probability², the scale of
/// x = 1 − ok); the latency dimension's trees use them times
/// `latency_scale` (ln seconds² per probability²); the operator-fact
/// dimensions (`financial`, `budget:<pool>`) are known exactly
/// ([`KNOWN_FACT_SCALE`]). Each value is finite and > 0.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FieldVariances {
    /// The root's (the fleet-wide mean of an archetype), default 0.05.
    pub root: f64,
    /// `source`, `binding`, `task`, `environment`, default 0.02, 0.01, 0.002,
    /// 0.002: a source's success rate is allowed to differ from the fleet's
    /// by about ±0.14 (one σ), a target from its source's by ±0.045.
    pub layers: [f64; 4],
    /// Multiplier of every variance above for the latency dimension, default 10.
    pub latency_scale: f64,
}

impl Default for FieldVariances {
    fn default() -> Self {
        FieldVariances {
            root: 0.05,
            layers: [0.02, 0.01, 0.002, 0.002],
            latency_scale: 10.0,
        }
    }
}

impl FieldVariances {
    /// The brief's unit variances (1.0 everywhere, every dimension alike).
    pub fn unit() -> Self {
        FieldVariances {
            root: 1.0,
            layers: [1.0; 4],
            latency_scale: 1.0,
        }
    }

    /// Checks every value is finite and > 0. Errors: the first bad one, named.
    pub fn check(&self) -> Result<(), String> {
        let named = [
            ("root", self.root),
            ("source", self.layers[0]),
            ("binding", self.layers[1]),
            ("task", self.layers[2]),
            ("environment", self.layers[3]),
            ("latency_scale", self.latency_scale),
        ];
        for (n, v) in named {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!(
                    "field variance {n} must be finite and > 0, got {v}"
                ));
            }
        }
        Ok(())
    }
}

/// Variance scale of the dimensions the operator states as facts (the cloud
/// cost, the budget usage per item): small enough that their made-up
/// uncertainty adds no exploration bonus to a decision.
pub const KNOWN_FACT_SCALE: f64 = 1e-9;

impl Default for RouterConfig {
    fn default() -> Self {
        let archetypes: Vec<String> = ["browser", "desktop", "container_render", "container_plain"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut batch_base = BTreeMap::new();
        batch_base.insert("browser".to_string(), 4);
        RouterConfig {
            archetypes,
            lease_ttl_s: 60.0,
            registration_token: "fleet-registration".into(),
            more_credentials: BTreeMap::new(),
            operator_key: "operator".into(),
            latency_variance: 0.5,
            batch_base,
            price_window_s: 60.0,
            device_rate: (20.0, 10.0),
            registration_rate: (100_000.0, 1_000.0),
            registration_address_rate: (1_000.0, 10.0),
            discovery_per_window: 10_000,
            limited_cap_share: 0.3,
            queue_limit: 1024,
            candidates_per_lease: 32,
            reobserve_s: (3600.0, 604_800.0),
            filler_per_archetype: 64,
            host_bucket: (4.0, 1.0),
            deposit_queue: 4096,
            held_polls: 1024,
            body_limit: 65_536,
            facts_body_limit: 8 << 20,
            verify: routing::verify::VerifyConfig::default(),
            trust_enabled: true,
            snapshot_period_s: 5.0,
            aging_period_s: 0.0,
            aging_in_place: false,
            deposit_retention_s: default_deposit_retention_s(),
            device_retention_s: default_device_retention_s(),
            field_variances: FieldVariances::default(),
        }
    }
}

fn default_held_polls() -> usize {
    1024
}

fn default_deposit_retention_s() -> f64 {
    86_400.0
}

fn default_device_retention_s() -> f64 {
    2_592_000.0
}

/// A source the operator declares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceFact {
    /// Source id (a job board).
    pub source: String,
    /// Host the source's targets are fetched from (one politeness bucket per host).
    pub host: String,
    /// The binding (adapter) that scrapes it, e.g. `html-v3`.
    pub binding: String,
    /// Operator gates a device must declare to fetch it.
    #[serde(default)]
    pub requires: Vec<String>,
    /// How often its listings change, seconds (re-observation cadence), default 86,400.
    #[serde(default)]
    pub change_timescale_s: Option<f64>,
    /// Host bucket capacity (tokens ≥ 1) and refill (per second > 0).
    #[serde(default)]
    pub bucket: Option<(f64, f64)>,
}

/// A target the operator seeds (usually listing crawls).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetFact {
    /// Target id.
    pub target: String,
    /// Its source.
    pub source: String,
    /// Whether it is a listing crawl (mints targets) rather than one page.
    #[serde(default)]
    pub listing: bool,
}

/// A value written at one cell of the field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CellFact {
    /// Address text, `source/binding/…` (empty = root).
    pub address: String,
    /// Archetype.
    pub option: String,
    /// Dimension (`reliability`, `latency`, `financial`, `budget:<pool>`).
    pub dimension: String,
    /// The value (finite).
    pub value: f64,
}

/// An operator gate at one address.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateFact {
    /// Address text (empty = root).
    pub address: String,
    /// Archetype.
    pub option: String,
    /// `true` open, `false` closed, `null` cleared.
    pub open: Option<bool>,
}

/// The operator's facts: everything is optional; a request applies all or nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Facts {
    /// Decision temperature T (finite, ≥ 0, ≤ 100).
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Sources to declare or update.
    #[serde(default)]
    pub sources: Vec<SourceFact>,
    /// Targets to seed.
    #[serde(default)]
    pub targets: Vec<TargetFact>,
    /// Prior residuals.
    #[serde(default)]
    pub priors: Vec<CellFact>,
    /// Weights (root) and weight residuals (deeper).
    #[serde(default)]
    pub weights: Vec<CellFact>,
    /// Gates.
    #[serde(default)]
    pub gates: Vec<GateFact>,
    /// Pool caps per price window (finite, ≥ 0).
    #[serde(default)]
    pub caps: BTreeMap<String, f64>,
    /// Operator device states: `suspended`, `revoked`, or `cleared`.
    #[serde(default)]
    pub device_states: BTreeMap<String, String>,
}

/// Checks an id: 1..=128 bytes of `[A-Za-z0-9._:/-]`.
pub fn check_id(field: &str, v: &str) -> Result<(), ApiError> {
    let ok = !v.is_empty()
        && v.len() <= 128
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-/".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad(
            field,
            "must be 1..=128 characters of A-Z a-z 0-9 . _ : - /",
        ))
    }
}

/// Checks a label used inside an address (no `/`): 1..=128 bytes of `[A-Za-z0-9._:-]`.
pub fn check_label(field: &str, v: &str) -> Result<(), ApiError> {
    check_id(field, v)?;
    if v.contains('/') {
        return Err(ApiError::bad(field, "must not contain `/`"));
    }
    Ok(())
}

/// Checks a finite number within `[lo, hi]`.
pub fn check_range(field: &str, v: f64, lo: f64, hi: f64) -> Result<(), ApiError> {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(())
    } else {
        Err(ApiError::bad(
            field,
            format!("must be a finite number in [{lo}, {hi}], got {v}"),
        ))
    }
}
