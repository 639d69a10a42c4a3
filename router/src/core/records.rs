//! The operator's reads of one record: a device's identity and earned
//! trust (`GET /v1/device?id=…`) and a target's verification and schedule
//! (`GET /v1/target?name=…`). Unlike `GET /v1/field` these name a device,
//! so routerd answers them to the operator key only. They copy a handful
//! of fields under the router's lock and never walk a table.
//! Source: `ROUTING.md` §3 Trust and Verification, §4 (the operator's surface).

use serde::{Deserialize, Serialize};

use routing::trust::State as TrustState;

use super::Router;

/// The body of `GET /v1/device?id=…`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceView {
    /// Device id.
    pub device_id: String,
    /// Archetype it registered with.
    pub archetype: String,
    /// Adapter version it runs.
    pub adapter_version: String,
    /// Trust τ ∈ [0, 1].
    pub trust: f64,
    /// Trust state (trusted, normal, limited; suspended and revoked are the operator's).
    pub state: TrustState,
    /// Whether it is live now (its lease scope is fresh).
    pub live: bool,
    /// Deposits folded.
    pub deposits: u64,
    /// First registration, seconds on the router's clock.
    pub registered_at_s: f64,
    /// Last sign of life, seconds on the router's clock.
    pub last_seen_s: f64,
}

/// The body of `GET /v1/target?name=…`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetView {
    /// Target.
    pub target: String,
    /// Its source.
    pub source: String,
    /// The settled content hash of its row, if settled.
    pub settled: Option<String>,
    /// Verifications asked of devices and not yet answered.
    pub open_verifications: usize,
    /// Successful observations kept (at most 8, `state::KEEP_OBSERVATIONS`).
    pub observations: usize,
    /// Last executed attempt, seconds, if any.
    pub last_attempt_s: Option<f64>,
    /// Due for (re-)observation at, seconds.
    pub due_s: f64,
}

impl Router {
    /// The operator's view of device `id`; `None` when no such identity is kept.
    pub fn device_view(&self, id: &str) -> Option<DeviceView> {
        let d = self.d.devices.get(id)?;
        Some(DeviceView {
            device_id: id.to_string(),
            archetype: d.archetype.clone(),
            adapter_version: d.adapter_version.clone(),
            trust: d.trust,
            state: d.state,
            live: self.live.contains_key(id),
            deposits: d.deposits,
            registered_at_s: d.registered_at,
            last_seen_s: d.last_seen_s,
        })
    }

    /// The operator's view of target `name`; `None` when no such target is known.
    pub fn target_view(&self, name: &str) -> Option<TargetView> {
        let t = self.d.targets.get(name)?;
        Some(TargetView {
            target: name.to_string(),
            source: t.source.clone(),
            settled: t.verification.settled().map(str::to_string),
            open_verifications: t.verification.open().len(),
            observations: t.observations.len(),
            last_attempt_s: t.last_attempt_s,
            due_s: t.due_s,
        })
    }
}
