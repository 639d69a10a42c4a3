//! Registration and authentication: how a device enters the live scope
//! and proves it is the device it says on every later request.
//! Source: `ROUTING.md` §4 (registration is live-scoped; earned trust is
//! durable), §3 Trust (a returning device resumes its trust).

use routing::politeness::Bucket;
use routing::trust::State as TrustState;

use super::lease::state_name;
use super::state::DeviceRec;
use super::{Live, Router};
use crate::api::{ApiError, RegisterRequest, RegisterResponse};
use crate::config::{check_id, check_label};
use crate::ids;

impl Router {
    /// Registers a device at `now_s`: it becomes live for one lease TTL. A
    /// new id gets a fresh device secret; a known id is resumed, with its
    /// earned trust, only when it presents the secret it was given.
    /// Errors: `Unauthorized` (token, or a known id without its secret),
    /// `UnknownArchetype`, `BadValue`, `Forbidden` (revoked); nothing
    /// changes on error.
    pub fn register(
        &mut self,
        req: &RegisterRequest,
        now_s: f64,
    ) -> Result<RegisterResponse, ApiError> {
        let r = self.register_inner(req, now_s);
        self.check(r)
    }

    fn register_inner(
        &mut self,
        req: &RegisterRequest,
        now_s: f64,
    ) -> Result<RegisterResponse, ApiError> {
        if !ids::same(&req.registration_token, &self.cfg.registration_token) {
            return Err(ApiError::Unauthorized("registration token".into()));
        }
        check_label("device_id", &req.device_id)?;
        if !self.cfg.archetypes.contains(&req.archetype) {
            return Err(ApiError::UnknownArchetype(
                req.archetype.chars().take(64).collect(),
            ));
        }
        if req.capabilities.len() > 32 {
            return Err(ApiError::bad("capabilities", "at most 32"));
        }
        for c in &req.capabilities {
            check_id("capabilities", c)?;
        }
        if req.adapter_version.is_empty() || req.adapter_version.len() > 64 {
            return Err(ApiError::bad("adapter_version", "1..=64 bytes"));
        }
        if let Some(d) = self.d.devices.get(&req.device_id) {
            // A known identity carries earned trust: only its holder resumes it.
            let presented = req.device_secret.as_deref().unwrap_or("");
            if !ids::same(&ids::digest(presented), &d.secret_digest) {
                return Err(ApiError::Unauthorized(
                    "device secret: a known device id is resumed only with the secret it was given"
                        .into(),
                ));
            }
            if d.state == TrustState::Revoked {
                return Err(ApiError::Forbidden(req.device_id.clone(), "revoked".into()));
            }
            if d.archetype != req.archetype {
                return Err(ApiError::bad(
                    "archetype",
                    format!(
                        "device registered as `{}`; an identity keeps its archetype",
                        d.archetype
                    ),
                ));
            }
        }
        let (cap, rate) = self.cfg.device_rate;
        let bucket =
            Bucket::new(cap, rate).map_err(|e| ApiError::bad("device_rate", e.to_string()))?;
        let secret = match (
            &req.device_secret,
            self.d.devices.contains_key(&req.device_id),
        ) {
            (Some(kept), true) => kept.clone(),
            _ => ids::token(),
        };
        let rec = self
            .d
            .devices
            .entry(req.device_id.clone())
            .or_insert_with(|| DeviceRec {
                archetype: req.archetype.clone(),
                capabilities: Vec::new(),
                adapter_version: String::new(),
                trust: routing::trust::INITIAL,
                state: TrustState::Normal,
                secret_digest: String::new(),
                registered_at: now_s,
                deposits: 0,
                note: None,
            });
        rec.capabilities = req.capabilities.clone();
        rec.adapter_version = req.adapter_version.clone();
        rec.secret_digest = ids::digest(&secret);
        let (trust, state) = (rec.trust, rec.state);
        self.live.insert(
            req.device_id.clone(),
            Live {
                expires_s: now_s + self.cfg.lease_ttl_s,
                requests: bucket,
            },
        );
        self.dirty = true;
        self.counters.registrations += 1;
        Ok(RegisterResponse {
            device_id: req.device_id.clone(),
            device_secret: secret,
            trust,
            state: state_name(state).into(),
            lease_ttl_s: self.cfg.lease_ttl_s,
        })
    }

    /// Authenticates a live device and spends one request token.
    pub(crate) fn authenticate(
        &mut self,
        device: &str,
        secret: &str,
        now_s: f64,
    ) -> Result<(), ApiError> {
        self.authenticate_charged(device, secret, now_s, true)
    }

    /// [`Self::authenticate`]; `charge: false` checks the device's
    /// request-rate bucket without taking a token (a long poll's later try).
    pub(super) fn authenticate_charged(
        &mut self,
        device: &str,
        secret: &str,
        now_s: f64,
        charge: bool,
    ) -> Result<(), ApiError> {
        let rec = self
            .d
            .devices
            .get(device)
            .ok_or_else(|| ApiError::UnknownDevice(device.chars().take(64).collect()))?;
        if !ids::same(&ids::digest(secret), &rec.secret_digest) {
            return Err(ApiError::Unauthorized("device secret".into()));
        }
        if matches!(rec.state, TrustState::Suspended | TrustState::Revoked) {
            return Err(ApiError::Forbidden(
                device.into(),
                state_name(rec.state).into(),
            ));
        }
        let live = self
            .live
            .get_mut(device)
            .filter(|l| l.expires_s >= now_s)
            .ok_or_else(|| ApiError::UnknownDevice(device.into()))?;
        if charge && !live.requests.admit(now_s).unwrap_or(false) {
            let wait = (1.0 - live.requests.tokens()).max(0.0) / live.requests.rate();
            return Err(ApiError::RateLimited(wait));
        }
        Ok(())
    }
}
