//! Deposits: validation, the write-ahead log's two halves (prepare, then
//! commit or abort) and the answer a retry gets. The fold of an accepted
//! deposit is in [`super::fold`]. Source: `ROUTING.md` §4.

use super::fold::Logged;
use super::Router;
use crate::api::{ApiError, DepositRequest, DepositResponse};
use crate::config::{check_id, check_range};
use crate::store::DepositEntry;

/// A deposit between [`Router::deposit_prepare`] and [`Router::deposit_commit`].
#[derive(Debug, Clone)]
pub struct PreparedDeposit {
    /// The log entry to append.
    pub entry: DepositEntry,
    logged: Logged,
    index: usize,
    /// [`super::acks::request_digest`] of the request.
    request: String,
}

/// What [`Router::deposit_prepare`] found.
#[derive(Debug, Clone)]
pub enum Prepared {
    /// A new deposit: append its entry, then commit or abort it.
    Fresh(PreparedDeposit),
    /// A retry of a deposit already acknowledged (its answer was lost):
    /// the same answer again, nothing to append.
    Acknowledged(DepositResponse),
}

fn validate(req: &DepositRequest) -> Result<(), ApiError> {
    check_id("target", &req.target)?;
    if req.adapter_id.is_empty() || req.adapter_id.len() > 64 {
        return Err(ApiError::bad("adapter_id", "1..=64 bytes"));
    }
    if req.adapter_version.is_empty() || req.adapter_version.len() > 64 {
        return Err(ApiError::bad("adapter_version", "1..=64 bytes"));
    }
    let o = &req.outcome;
    if let Some(h) = &o.content_hash {
        if h.is_empty() || h.len() > 128 {
            return Err(ApiError::bad("outcome.content_hash", "1..=128 bytes"));
        }
    } else if o.ok {
        return Err(ApiError::bad("outcome.content_hash", "required when ok"));
    }
    if let Some(l) = o.latency_ms {
        check_range("outcome.latency_ms", l, 0.0, 86_400_000.0)?;
    }
    if let Some(r) = o.retry_after_s {
        check_range("outcome.retry_after_s", r, 0.0, 86_400.0)?;
    }
    if let Some(c) = o.crawl_delay_s {
        check_range("outcome.crawl_delay_s", c, 0.0, 86_400.0)?;
    }
    if let Some(e) = &o.error_class {
        if e.is_empty() || e.len() > 64 {
            return Err(ApiError::bad("outcome.error_class", "1..=64 bytes"));
        }
    }
    if req.discovered.len() > 1000 {
        return Err(ApiError::bad("discovered", "at most 1,000 targets"));
    }
    for d in &req.discovered {
        check_id("discovered", d)?;
    }
    Ok(())
}

impl Router {
    /// Accepts the deposit of one leased item at `now_s`: validates it,
    /// appends it to the store's log (write-ahead), folds it, and only then
    /// answers. The same deposit again (a retry after a lost answer) gets
    /// the same answer, for [`super::acks::ACK_MEMORY_S`], even after its
    /// lease finished. Errors: `BadValue`, `Unauthorized`, `UnknownDevice`,
    /// `UnknownLease`, `LeaseExpired`, `UnknownItem`, `Replayed`,
    /// `RateLimited`, `Store`; nothing changes on error.
    pub fn deposit(
        &mut self,
        req: &DepositRequest,
        now_s: f64,
    ) -> Result<DepositResponse, ApiError> {
        let r = self.deposit_inner(req, now_s);
        self.check(r)
    }

    fn deposit_inner(
        &mut self,
        req: &DepositRequest,
        now_s: f64,
    ) -> Result<DepositResponse, ApiError> {
        let p = match self.prepare_inner(req, now_s) {
            Ok(Prepared::Acknowledged(r)) => return Ok(r),
            Ok(Prepared::Fresh(p)) => p,
            // A lease that ended and was forgotten: a logged token is a
            // replay (as the HTTP shell answers, docs/router.md).
            Err(ApiError::UnknownLease)
                if matches!(self.store.lock().has_deposit(&req.deposit_token), Ok(true)) =>
            {
                return Err(ApiError::Replayed)
            }
            Err(e) => return Err(e),
        };
        let appended = self.store.lock().append_deposit(&p.entry);
        match appended {
            Ok(true) => Ok(self.deposit_commit(p)),
            Ok(false) => {
                self.deposit_abort(&p);
                Err(ApiError::Replayed)
            }
            Err(e) => {
                self.deposit_abort(&p);
                Err(ApiError::Store(e.to_string()))
            }
        }
    }

    /// First half of a deposit (the shell's path): validates, authenticates,
    /// finds the item and reserves it (a second deposit of it is `Replayed`)
    /// and assigns the next sequence number. The caller appends
    /// [`PreparedDeposit::entry`] to the store, then calls
    /// [`Router::deposit_commit`] — in sequence order — or
    /// [`Router::deposit_abort`]; a retry of an acknowledged deposit is
    /// [`Prepared::Acknowledged`], its answer. Errors as [`Router::deposit`]
    /// (nothing changed).
    pub fn deposit_prepare(
        &mut self,
        req: &DepositRequest,
        now_s: f64,
    ) -> Result<Prepared, ApiError> {
        let r = self.prepare_inner(req, now_s);
        self.check(r)
    }

    fn prepare_inner(&mut self, req: &DepositRequest, now_s: f64) -> Result<Prepared, ApiError> {
        validate(req)?;
        self.authenticate(&req.device_id, &req.device_secret, now_s)?;
        let request = super::acks::request_digest(req);
        let key = super::acks::DepositKey {
            device: &req.device_id,
            lease_id: &req.lease_id,
            target: &req.target,
            token: &req.deposit_token,
            request: &request,
        };
        if let Some(answer) = self.acks.answer(key) {
            let answer = answer.clone();
            self.counters.deposits_answered_again += 1;
            return Ok(Prepared::Acknowledged(answer));
        }
        let (_, index) = self.find_item(
            &req.device_id,
            &req.lease_id,
            &req.target,
            &req.deposit_token,
            now_s,
        )?;
        self.check_discovery(req)?;
        let archetype = self.d.devices[&req.device_id].archetype.to_string();
        let mut logged = Logged {
            device: req.device_id.clone(),
            archetype,
            t_s: now_s,
            req: req.clone(),
        };
        logged.req.device_secret.clear();
        let seq = self.next_seq.max(self.d.applied_seq + 1);
        let payload = serde_json::to_string(&logged).map_err(|e| ApiError::Store(e.to_string()))?;
        self.next_seq = seq + 1;
        self.set_pending(&req.lease_id, index, true);
        Ok(Prepared::Fresh(PreparedDeposit {
            entry: DepositEntry {
                seq,
                token: req.deposit_token.clone(),
                payload,
            },
            logged,
            index,
            request,
        }))
    }

    /// Second half of a deposit, after its entry is in the store's log:
    /// folds it and closes the item. Call in sequence order.
    pub fn deposit_commit(&mut self, p: PreparedDeposit) -> DepositResponse {
        let seq = p.entry.seq;
        self.fold(&p.logged, seq);
        self.close_item(&p.logged.req.lease_id, p.index);
        self.counters.deposits += 1;
        let answer = DepositResponse {
            seq,
            trust: self
                .d
                .devices
                .get(&p.logged.device)
                .map(|d| d.trust)
                .unwrap_or(0.5),
            settled: self.settled(&p.logged.req.target).is_some(),
        };
        let key = super::acks::DepositKey {
            device: &p.logged.device,
            lease_id: &p.logged.req.lease_id,
            target: &p.logged.req.target,
            token: &p.logged.req.deposit_token,
            request: &p.request,
        };
        self.acks.remember(key, &answer, p.logged.t_s);
        if !p.logged.req.discovered.is_empty() {
            *self.discovered.entry(p.logged.device.clone()).or_default() +=
                p.logged.req.discovered.len();
        }
        answer
    }

    /// Whether `req` may add its discovered targets: only a successful
    /// crawl of a listing target discovers, within the device's budget for
    /// the open price window. Errors: `BadValue` (not a listing, or a
    /// failed crawl), `DiscoveryLimited`.
    fn check_discovery(&self, req: &DepositRequest) -> Result<(), ApiError> {
        if req.discovered.is_empty() {
            return Ok(());
        }
        let listing = self.d.targets.get(&req.target).is_some_and(|t| t.listing);
        if !(listing && req.outcome.ok) {
            return Err(ApiError::bad(
                "discovered",
                "only a successful crawl of a listing target discovers targets",
            ));
        }
        let used = self.discovered.get(&req.device_id).copied().unwrap_or(0);
        if used + req.discovered.len() > self.cfg.discovery_per_window {
            return Err(ApiError::DiscoveryLimited(self.cfg.discovery_per_window));
        }
        Ok(())
    }

    /// Gives a prepared deposit up (its append failed or was a replay): the
    /// item can be deposited again. Its sequence number stays unused.
    pub fn deposit_abort(&mut self, p: &PreparedDeposit) {
        self.set_pending(&p.logged.req.lease_id, p.index, false);
    }
}
