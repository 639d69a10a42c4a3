//! The router's durable state: everything a restart rebuilds, serialized as
//! one snapshot row plus the deposits logged after it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use routing::dynamics::DriftBank;
use routing::field::Field;
use routing::politeness::Bucket;
use routing::prices::Pool;
use routing::trust::Churn;
use routing::trust::Clusters;
use routing::trust::State as TrustState;
use routing::verify::Verification;

mod tracked;
pub use tracked::{Devices, RecMut, Table, Tally, Targets, Tracked};

/// Durable identity and earned trust of one device. Its archetype,
/// capabilities and adapter version are shared with every other device
/// that declared the same (the router's `Names`: a router holds one
/// record per device, and a fleet's devices declare a handful of each;
/// docs/router.md, "The small box"); the JSON is plain strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceRec {
    /// Archetype it registered with.
    pub archetype: std::sync::Arc<str>,
    /// Declared capabilities.
    pub capabilities: std::sync::Arc<[String]>,
    /// Adapter version it runs.
    pub adapter_version: std::sync::Arc<str>,
    /// τ ∈ [0, 1].
    pub trust: f64,
    /// Trust state (operator states are sticky).
    pub state: TrustState,
    /// SHA-256 of its current device secret (written as 64 hex characters).
    pub secret_digest: crate::ids::SecretDigest,
    /// First registration, seconds.
    pub registered_at: f64,
    /// The registration credential it first registered with (its name;
    /// one copy shared by the identities that share it).
    #[serde(default = "default_credential")]
    pub credential: std::sync::Arc<str>,
    /// The network it first registered from
    /// ([`routing::trust::network_of`]; shared as the credential is);
    /// `None`: registered in process.
    #[serde(default)]
    pub network: Option<std::sync::Arc<str>>,
    /// Last sign of life, seconds: its last registration, or the end of
    /// its last live scope (leases renew it); 0 in rows written before it
    /// was kept (the registration time is read then).
    #[serde(default)]
    pub last_seen_s: f64,
    /// Deposits folded.
    pub deposits: u64,
    /// Whether the operator marked it a liar in a test world (never set by the router).
    #[serde(default)]
    pub note: Option<Box<str>>,
}

fn default_credential() -> std::sync::Arc<str> {
    crate::credentials::DEFAULT_NAME.into()
}

impl DeviceRec {
    /// Where this identity came from (`ROUTING.md` §3 Trust; decision 0014).
    pub fn origin(&self) -> routing::trust::Origin {
        routing::trust::Origin {
            credential: self.credential.clone(),
            network: self.network.clone(),
            registered_at_s: self.registered_at,
        }
    }
}

/// One declared source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceRec {
    /// Host (politeness bucket key).
    pub host: String,
    /// Binding label.
    pub binding: String,
    /// Operator gates required.
    pub requires: Vec<String>,
    /// Change timescale, seconds.
    pub change_timescale_s: f64,
    /// Re-observations compared (volatility denominator).
    pub reobservations: u64,
    /// Re-observations whose content changed (volatility numerator).
    pub changes: u64,
}

impl SourceRec {
    /// Volatility v ∈ [0, 1]: the share of re-observations whose content
    /// changed (with one pseudo-observation of no change).
    pub fn volatility(&self) -> f64 {
        self.changes as f64 / (self.reobservations as f64 + 1.0)
    }
}

/// One observation of a target. Its names are shared with every other
/// observation that names the same device, adapter or version (the
/// router's `Names`), as its hash is with the row's vote; the JSON is
/// plain strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// Device id.
    pub device: std::sync::Arc<str>,
    /// Content hash seen (one copy, shared with the row's vote and, once
    /// settled on it, the settled hash).
    pub hash: std::sync::Arc<str>,
    /// Time, seconds.
    pub t_s: f64,
    /// Adapter id the observation was scraped with (empty in rows written
    /// before it was recorded: the device's current adapter is read then).
    #[serde(default = "no_name")]
    pub adapter: std::sync::Arc<str>,
    /// Adapter version the observation was scraped with; a device that
    /// upgrades later does not change what its earlier observations ran
    /// (`ROUTING.md` §3 Trust: disagreements cluster by the version that
    /// produced them). Empty in rows written before it was recorded.
    #[serde(default = "no_name")]
    pub adapter_version: std::sync::Arc<str>,
}

/// An observation's name absent from a row written before it was kept.
fn no_name() -> std::sync::Arc<str> {
    std::sync::Arc::from("")
}

/// Observations kept per target (most recent last): the newest, and
/// before it the newest earlier one by another device
/// ([`TargetRec::push_observation`]).
pub const KEEP_OBSERVATIONS: usize = 2;

/// One target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetRec {
    /// Source.
    pub source: String,
    /// Listing crawl (mints targets) or a page.
    pub listing: bool,
    /// Successful observations: the newest last, and before it the newest
    /// earlier one by another device, if any (at most
    /// [`KEEP_OBSERVATIONS`]; kept by [`TargetRec::push_observation`]).
    /// Rows written when eight were kept read as written and are cut to
    /// these two by [`TargetRec::keep_observations`].
    pub observations: Vec<Observation>,
    /// Verification state of the row.
    pub verification: Verification,
    /// Last executed attempt, seconds.
    pub last_attempt_s: Option<f64>,
    /// Due for (re-)observation at, seconds.
    pub due_s: f64,
    /// Content churn and cooldown.
    pub churn: Churn,
}

/// Everything durable, as one snapshot.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Durable {
    /// The evidence field.
    pub field: Field,
    /// Drift detectors.
    pub drift: DriftBank,
    /// Metered pools with their prices.
    pub pools: BTreeMap<String, Pool>,
    /// Disagreement clusters.
    pub clusters: Clusters,
    /// Sources.
    pub sources: imbl::OrdMap<String, SourceRec>,
    /// Politeness buckets per host.
    pub buckets: BTreeMap<String, Bucket>,
    /// Devices (durable identity and trust); a persistent map, so a
    /// snapshot's clone shares it instead of copying it. Not in the state
    /// row: each device has a row of its own, written when it changed
    /// ([`Devices`]); a state row written before that holds them, and
    /// they are read from it.
    #[serde(default, skip_serializing)]
    pub devices: Devices,
    /// Targets; a persistent map, as `devices`. Not in the state row: each
    /// target has a row of its own, written when it changed
    /// ([`Targets`]); a state row written before that holds them, and
    /// they are read from it.
    #[serde(default, skip_serializing)]
    pub targets: Targets,
    /// Decision temperature.
    pub temperature: f64,
    /// Highest deposit seq folded into this state.
    pub applied_seq: u64,
    /// Router-clock time the evidence was last aged to, seconds.
    pub aged_to_s: f64,
    /// Start of the current price window, seconds.
    pub window_start_s: f64,
    /// Usage of the current window per pool.
    pub usage: BTreeMap<String, f64>,
    /// Router-clock time of this snapshot, seconds.
    pub t_s: f64,
    /// Snapshots taken of this state so far: the version of the snapshot's
    /// rows, so a snapshot written late (a tick writes outside the router's
    /// lock) never overwrites a newer one (the stores keep the row with the
    /// higher version). Absent in older snapshots: 0.
    #[serde(default)]
    pub snapshot_seq: u64,
    /// Devices' politeness and gate reports waiting for corroboration,
    /// their holds on the reporters' own work, and the shared effects'
    /// lapses ([`super::reports`]). Absent in older snapshots: empty.
    #[serde(default)]
    pub reports: super::reports::Reports,
}

impl TargetRec {
    /// Records `o` as the newest successful observation, keeping before it
    /// the newest earlier one by a device other than `o`'s. The two answer
    /// what the fold asks of a target's history exactly as the whole
    /// history would: the newest observation, and the newest by a device
    /// other than any given one (the newest's device is either the given
    /// one, and the first answers, or not, and the newest does). Eight
    /// were kept before, and a run of eight by one device hid the others.
    /// The vector holds no spare room: one is held per target
    /// (docs/router.md, "Where the memory goes").
    pub fn push_observation(&mut self, o: Observation) {
        match self
            .observations
            .iter()
            .rposition(|p| *p.device != *o.device)
        {
            Some(i) => {
                self.observations.drain(..i);
                self.observations.truncate(1);
            }
            None => self.observations.clear(),
        }
        self.observations.reserve_exact(1);
        self.observations.push(o);
        if self.observations.capacity() > self.observations.len() {
            self.observations.shrink_to_fit();
        }
    }

    /// Cuts observations read from a row written when more were kept to
    /// the newest and the newest earlier one by another device, as
    /// [`TargetRec::push_observation`] keeps them.
    pub fn keep_observations(&mut self) {
        if let Some(newest) = self.observations.pop() {
            self.push_observation(newest);
        }
    }
}
