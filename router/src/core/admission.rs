//! Registration and authentication: how a device enters the live scope
//! and proves it is the device it says on every later request.
//! Source: `ROUTING.md` §4 (registration is live-scoped; earned trust is
//! durable), §3 Trust (a returning device resumes its trust).

use routing::trust::State as TrustState;

use super::lease::state_name;
use super::state::DeviceRec;
use super::{Live, Router, SharedStore};
use crate::api::{ApiError, RegisterRequest, RegisterResponse};
use crate::config::{check_id, check_label};
use crate::ids;
use crate::store::{Row, Store, Table, Write};

/// The field of a [`Table::Devices`] row that holds a registered identity.
pub const IDENTITY_FIELD: &str = "identity";

/// A registration checked by [`Router::register_prepare`].
#[derive(Debug)]
pub enum Registration {
    /// A known identity, resumed: the answer.
    Done(RegisterResponse),
    /// A new identity, to write and commit.
    New(NewIdentity),
}

/// A new identity waiting for its durable write
/// ([`Router::write_identity`], then [`Router::register_commit`]).
#[derive(Debug)]
pub struct NewIdentity {
    id: String,
    rec: DeviceRec,
    secret: String,
    now_s: f64,
}

impl Router {
    /// Registers a device at `now_s`: it becomes live for one lease TTL. A
    /// new id gets a fresh device secret; a known id is resumed, with its
    /// earned trust, only when it presents the secret it was given.
    /// Registering again renews the live scope only: the device's request
    /// budget stays as spent. In process: no source address is charged
    /// (see [`Router::register_from`]).
    /// Errors: `RegistrationLimited` (the credential's budget,
    /// [`RouterConfig::registration_rate`](crate::config::RouterConfig)),
    /// `Unauthorized` (token, or a known id without its secret),
    /// `UnknownArchetype`, `BadValue`, `Forbidden` (revoked); nothing
    /// changes on error but the budget the attempt spent.
    pub fn register(
        &mut self,
        req: &RegisterRequest,
        now_s: f64,
    ) -> Result<RegisterResponse, ApiError> {
        self.register_from(req, now_s, None)
    }

    /// [`Router::register`] of a request that came from `source` (the
    /// peer's address, as the HTTP shell sees it): every attempt, a wrong
    /// token's too, spends one registration of that address's budget
    /// ([`RouterConfig::registration_address_rate`](crate::config::RouterConfig)).
    pub fn register_from(
        &mut self,
        req: &RegisterRequest,
        now_s: f64,
        source: Option<&str>,
    ) -> Result<RegisterResponse, ApiError> {
        match self.register_prepare(req, now_s, source)? {
            Registration::Done(resp) => Ok(resp),
            Registration::New(n) => {
                let written = Router::write_identity(&self.store, &n);
                self.register_commit(n, written)
            }
        }
    }

    /// The checks of [`Router::register_from`], done under the router's
    /// lock: a known identity is resumed at once ([`Registration::Done`]);
    /// a new one is reserved (a second registration of its id is refused
    /// until it is committed) and returned to be written to the store
    /// outside the lock ([`Router::write_identity`]) and then committed
    /// ([`Router::register_commit`]). Errors as [`Router::register`].
    pub fn register_prepare(
        &mut self,
        req: &RegisterRequest,
        now_s: f64,
        source: Option<&str>,
    ) -> Result<Registration, ApiError> {
        let r = self.register_inner(req, now_s, source);
        self.check(r)
    }

    /// Writes a new identity's row to `store` ([`Table::Devices`], version
    /// 0, [`super::device_payload`]; the row a snapshot writes once the
    /// device changed, with a higher version, replaces it), in one batch
    /// with the deletion of any row its id still has: a departed identity
    /// whose row the next snapshot was to delete, which would otherwise
    /// keep its higher version and win over the new one. [`Router::open`]
    /// restores the device from it. Needs only the store. Errors: `Store`.
    pub fn write_identity(store: &SharedStore, n: &NewIdentity) -> Result<(), ApiError> {
        Self::write_identities(&mut **store.lock(), &[n])
    }

    /// [`Router::write_identity`] of several new identities at once: every
    /// row in one atomic write, so one durable commit (one fsync) answers
    /// them all (the HTTP shell's registrar groups concurrent
    /// registrations so). Their ids are distinct: a second registration of
    /// an id is refused while its first is being saved
    /// ([`Router::register_prepare`]). Errors: `Store`, and then none of
    /// the rows is written.
    pub fn write_identities(store: &mut dyn Store, new: &[&NewIdentity]) -> Result<(), ApiError> {
        let mut ids = Vec::with_capacity(new.len());
        let mut rows = Vec::with_capacity(new.len());
        for n in new {
            let payload =
                super::device_payload(&n.rec).map_err(|e| ApiError::Store(e.to_string()))?;
            ids.push(n.id.clone());
            rows.push(Row {
                key: n.id.clone(),
                version: 0,
                payload,
            });
        }
        store
            .write_all(&[
                Write::Delete(Table::Devices, &ids),
                Write::Upsert(Table::Devices, &rows),
            ])
            .map_err(|e| ApiError::Store(e.to_string()))
    }

    /// Completes a new identity's registration once `written` says whether
    /// its row is durable: the identity becomes known and live and is
    /// answered; on a failed write nothing of it is kept (`Store`).
    pub fn register_commit(
        &mut self,
        n: NewIdentity,
        written: Result<(), ApiError>,
    ) -> Result<RegisterResponse, ApiError> {
        self.registering.remove(&n.id);
        if let Err(e) = written {
            return self.check(Err(e));
        }
        // A departed identity registering anew before the snapshot that
        // deletes its old row: that deletion would take the new row with
        // it, so it is called off.
        self.departed.retain(|id| *id != n.id);
        let (trust, state) = (n.rec.trust, n.rec.state);
        self.d.devices.insert(n.id.clone(), n.rec);
        self.live.insert(
            n.id.clone(),
            Live {
                expires_s: n.now_s + self.cfg.lease_ttl_s,
            },
        );
        self.dirty = true;
        self.counters.registrations += 1;
        Ok(RegisterResponse {
            device_id: n.id,
            device_secret: n.secret,
            trust,
            state: state_name(state).into(),
            lease_ttl_s: self.cfg.lease_ttl_s,
        })
    }

    /// Refuses a registration whose fields are malformed: the device id, an
    /// unknown archetype, too many or malformed capabilities, an adapter
    /// version outside 1..=64 bytes.
    fn check_fields(&self, req: &RegisterRequest) -> Result<(), ApiError> {
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
        Ok(())
    }

    /// Refuses a registration of a known identity without its secret, of a
    /// revoked one, or under another archetype; and one of an identity
    /// whose first registration is still being saved.
    fn check_resume(&self, req: &RegisterRequest) -> Result<(), ApiError> {
        if let Some(d) = self.d.devices.get(&req.device_id) {
            // A known identity carries earned trust: only its holder resumes it.
            let presented = req.device_secret.as_deref().unwrap_or("");
            if !d.secret_digest.matches(presented) {
                return Err(ApiError::Unauthorized(
                    "device secret: a known device id is resumed only with the secret it was given"
                        .into(),
                ));
            }
            if d.state == TrustState::Revoked {
                return Err(ApiError::Forbidden(req.device_id.clone(), "revoked".into()));
            }
            if *d.archetype != *req.archetype {
                return Err(ApiError::bad(
                    "archetype",
                    format!(
                        "device registered as `{}`; an identity keeps its archetype",
                        d.archetype
                    ),
                ));
            }
        }
        if self.registering.contains(&req.device_id) {
            return Err(ApiError::Unauthorized(
                "device id: its first registration is being saved".into(),
            ));
        }
        Ok(())
    }

    fn register_inner(
        &mut self,
        req: &RegisterRequest,
        now_s: f64,
        source: Option<&str>,
    ) -> Result<Registration, ApiError> {
        let credential = crate::credentials::matching(
            &req.registration_token,
            &self.cfg.registration_token,
            &self.cfg.more_credentials,
        )
        .map(str::to_string);
        self.limits
            .charge_registration(credential.as_deref(), source, now_s)
            .map_err(|(scope, wait)| ApiError::RegistrationLimited(scope.name().into(), wait))?;
        let Some(credential) = credential else {
            return Err(ApiError::Unauthorized("registration token".into()));
        };
        self.check_fields(req)?;
        self.check_resume(req)?;
        let known = self.d.devices.contains_key(&req.device_id);
        // A new identity's origin is where it first registered from; a
        // known one keeps its own (resuming from elsewhere changes nothing).
        let network = source
            .and_then(|s| s.parse::<std::net::IpAddr>().ok())
            .map(routing::trust::network_of);
        let secret = match (&req.device_secret, known) {
            (Some(kept), true) => kept.clone(),
            _ => ids::token(),
        };
        if !known {
            // A new identity is durable before it is answered: a crash
            // right after the answer must not forget the secret it gave.
            // The write happens outside the router's lock.
            self.registering.insert(req.device_id.clone());
            return Ok(Registration::New(NewIdentity {
                id: req.device_id.clone(),
                rec: DeviceRec {
                    archetype: self.names.intern(&req.archetype),
                    capabilities: self.names.intern_list(&req.capabilities),
                    adapter_version: self.names.intern(&req.adapter_version),
                    trust: routing::trust::INITIAL,
                    state: TrustState::Normal,
                    secret_digest: ids::SecretDigest::of(&secret),
                    registered_at: now_s,
                    credential: self.names.intern(&credential),
                    network: network.map(|n| self.names.intern(&n)),
                    last_seen_s: now_s,
                    deposits: 0,
                    note: None,
                },
                secret,
                now_s,
            }));
        }
        let Some(mut rec) = self.d.devices.get_mut(&req.device_id) else {
            return Err(ApiError::UnknownDevice(
                req.device_id.chars().take(64).collect(),
            ));
        };
        rec.capabilities = self.names.intern_list(&req.capabilities);
        rec.adapter_version = self.names.intern(&req.adapter_version);
        rec.secret_digest = ids::SecretDigest::of(&secret);
        rec.last_seen_s = now_s;
        let (trust, state) = (rec.trust, rec.state);
        self.live.insert(
            req.device_id.clone(),
            Live {
                expires_s: now_s + self.cfg.lease_ttl_s,
            },
        );
        self.dirty = true;
        self.counters.registrations += 1;
        Ok(Registration::Done(RegisterResponse {
            device_id: req.device_id.clone(),
            device_secret: secret,
            trust,
            state: state_name(state).into(),
            lease_ttl_s: self.cfg.lease_ttl_s,
        }))
    }

    /// Authenticates a live device and spends one token of its request
    /// budget. Errors: `UnknownDevice`, `Unauthorized`, `Forbidden`,
    /// `RateLimited` (the seconds until a token is back).
    pub(crate) fn authenticate(
        &mut self,
        device: &str,
        secret: &str,
        now_s: f64,
    ) -> Result<(), ApiError> {
        let rec = self
            .d
            .devices
            .get(device)
            .ok_or_else(|| ApiError::UnknownDevice(device.chars().take(64).collect()))?;
        if !rec.secret_digest.matches(secret) {
            return Err(ApiError::Unauthorized("device secret".into()));
        }
        if matches!(rec.state, TrustState::Suspended | TrustState::Revoked) {
            return Err(ApiError::Forbidden(
                device.into(),
                state_name(rec.state).into(),
            ));
        }
        if !self.live.get(device).is_some_and(|l| l.expires_s >= now_s) {
            return Err(ApiError::UnknownDevice(device.into()));
        }
        self.limits.charge_device(device, now_s)
    }
}
