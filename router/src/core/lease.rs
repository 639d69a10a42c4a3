//! Leases and protests: what a live device is given and gives back
//! (registration is `admission.rs`).
//! Source: `ROUTING.md` §3 Assignment policy step 2 and 4, §4.

use routing::policy::{self, Candidate, DeviceView, Pass, PolicyConfig, Tier};
use routing::trust::State as TrustState;

use super::{Item, Lease, Router};
use crate::api::{
    ApiError, LeaseItem, LeaseRequest, LeaseResponse, ProtestRequest, ProtestResponse,
};
use crate::config::{deposit_usage, item_usage, LEASE_STAMP, POOLS, UNCAPPED};
use crate::ids;

/// Refuses a lease request whose numbers are out of range.
///
/// Errors: [`ApiError`] naming `max_items` (1..=64) or `wait_s` (0..=30 s).
fn check_lease(req: &LeaseRequest) -> Result<(), ApiError> {
    if req.max_items == 0 || req.max_items > 64 {
        return Err(ApiError::bad("max_items", "must be in 1..=64"));
    }
    if let Some(w) = req.wait_s {
        if !(w.is_finite() && (0.0..=crate::api::MAX_LEASE_WAIT_S).contains(&w)) {
            return Err(ApiError::bad("wait_s", "must be in 0..=30 seconds"));
        }
    }
    Ok(())
}

/// The policy's candidates for the queue's `head`: each row's tier,
/// priority and value (priority over `value_scale`), and its verification
/// state where the target has one.
fn candidates<'a>(
    head: &'a [super::Queued],
    targets: &'a crate::core::state::Table<crate::core::state::TargetRec>,
    value_scale: f64,
) -> Vec<Candidate<'a>> {
    const NO_LIVE: [&str; 0] = [];
    head.iter()
        .map(|q| Candidate {
            target: &q.target,
            host: &q.host,
            address: &q.receipt.address,
            tier: q.tier,
            priority: q.priority,
            value: q.priority / value_scale,
            requires: &q.requires,
            verification: targets.get(&q.target).map(|t| &t.verification),
            live: &NO_LIVE,
            receipt: Some(&q.receipt),
        })
        .collect()
}

/// The wire name of a tier.
pub fn tier_name(t: Tier) -> &'static str {
    match t {
        Tier::FirstObservation => "first_observation",
        Tier::Verification => "verification",
        Tier::Reobservation => "reobservation",
        Tier::Discovery => "discovery",
        Tier::Filler => "filler",
    }
}

/// The wire name of a trust state.
pub fn state_name(s: TrustState) -> &'static str {
    match s {
        TrustState::Trusted => "trusted",
        TrustState::Normal => "normal",
        TrustState::Limited => "limited",
        TrustState::Suspended => "suspended",
        TrustState::Revoked => "revoked",
    }
}

impl Router {
    pub(crate) fn check<T>(&mut self, r: Result<T, ApiError>) -> Result<T, ApiError> {
        if let Err(e) = &r {
            self.refused(e);
        }
        r
    }

    /// The first `candidates_per_lease` queue entries this device may be
    /// offered. Entries on a paused host, or held off this device by its
    /// own uncorroborated reports ([`super::reports`]), stay queued, in
    /// order, for the others: one pause cannot empty every lease of the
    /// archetype. Only the front is taken when nothing there is skipped
    /// (O(candidates)); otherwise one pass over the queue (at most
    /// `queue_limit` entries).
    fn lease_head(
        &self,
        queue: &mut std::collections::VecDeque<super::Queued>,
        device: &str,
        now_s: f64,
    ) -> Vec<super::Queued> {
        let want = self.cfg.candidates_per_lease;
        let holds = self.d.reports.holds_any(device, now_s);
        let skip = |q: &super::Queued| {
            self.d
                .buckets
                .get(&q.host)
                .is_some_and(|b| b.paused_at(now_s))
                || (holds
                    && self.d.reports.held(
                        device,
                        &q.host,
                        self.d
                            .targets
                            .get(&q.target)
                            .map_or("", |t| t.source.as_str()),
                        now_s,
                    ))
        };
        if !queue.iter().take(want).any(skip) {
            let take = want.min(queue.len());
            return queue.drain(..take).collect();
        }
        let mut head = Vec::with_capacity(want);
        let mut kept = std::collections::VecDeque::with_capacity(queue.len());
        while let Some(q) = queue.pop_front() {
            if head.len() < want && !skip(&q) {
                head.push(q);
            } else {
                kept.push_back(q);
            }
        }
        *queue = kept;
        head
    }

    pub(super) fn lease_inner(
        &mut self,
        req: &LeaseRequest,
        now_s: f64,
    ) -> Result<LeaseResponse, ApiError> {
        check_lease(req)?;
        self.authenticate(&req.device_id, &req.device_secret, now_s)?;
        let ttl = self.cfg.lease_ttl_s;
        if let Some(l) = self.live.get_mut(&req.device_id) {
            l.expires_s = now_s + ttl;
        }
        let rec = &self.d.devices[&req.device_id];
        let archetype = rec.archetype.clone();
        let caps = rec.capabilities.clone();
        let trust = rec.trust;
        let origin = rec.origin();
        let limited = self.limited.contains(&req.device_id);
        let config = self.policy_config(&archetype);
        let (key, mut queue) = self
            .queues
            .remove_entry(&*archetype)
            .unwrap_or_else(|| (archetype.to_string(), Default::default()));
        let head = self.lease_head(&mut queue, &req.device_id, now_s);
        let cands = candidates(&head, &self.d.targets, self.cfg.reobserve_s.0);
        let (affordable, binding) = self.affordable_items();
        let view = DeviceView {
            id: &req.device_id,
            archetype: &archetype,
            trust,
            limited,
            capabilities: &caps,
            max_items: req.max_items.min(affordable),
            origin: Some(&origin),
        };
        let decision = policy::lease(
            &self.d.field,
            &view,
            &cands,
            &mut self.d.buckets,
            now_s,
            &config,
        );
        drop(cands);
        let decision = match decision {
            Ok(d) => d,
            Err(e) => {
                for q in head.into_iter().rev() {
                    queue.push_front(q);
                }
                self.queues.insert(key, queue);
                return Err(ApiError::bad("lease", e.to_string()));
            }
        };
        self.count_cut_demand(
            &req.device_id,
            req.max_items,
            affordable,
            decision.grants.len(),
            &binding,
        );
        let politeness_wait = if decision.grants.is_empty() {
            self.promise_token(&decision.passed, now_s)
        } else {
            f64::INFINITY
        };
        self.counters.politeness_passes += decision
            .passed
            .iter()
            .filter(|(_, p)| *p == Pass::Politeness)
            .count() as u64;
        let granted: std::collections::HashSet<&str> =
            decision.grants.iter().map(|g| g.target.as_str()).collect();
        for q in head.into_iter().rev() {
            if !granted.contains(q.target.as_str()) {
                queue.push_front(q);
            }
        }
        self.queues.insert(key, queue);
        Ok(self.issue_lease(&req.device_id, decision.grants, politeness_wait, now_s))
    }

    /// Records the granted items as one lease of `device` (an empty lease is
    /// not kept) and answers it: with a `retry_after_s` when nothing was
    /// granted (the next refill or the politeness token promised, whichever
    /// is first, within the lease TTL).
    fn issue_lease(
        &mut self,
        device: &str,
        grants: Vec<routing::policy::Grant>,
        politeness_wait: f64,
        now_s: f64,
    ) -> LeaseResponse {
        let ttl = self.cfg.lease_ttl_s;
        let lease_id = ids::token();
        let (items, wire, trace) = self.record_grants(device, grants, now_s);
        if !items.is_empty() {
            *self.d.usage.entry(LEASE_STAMP.0.into()).or_default() += LEASE_STAMP.1;
            self.dirty = true;
        }
        let expires_s = now_s + ttl;
        self.counters.leases += 1;
        self.counters.items += items.len() as u64;
        // An empty lease is not kept: its id names nothing to deposit, and
        // a device polling in a loop must not grow the lease table.
        if !items.is_empty() {
            self.leases.insert(
                lease_id.clone(),
                Lease {
                    device: device.to_string(),
                    granted_s: now_s,
                    expires_s,
                    items,
                },
            );
        }
        let retry_after_s = if wire.is_empty() {
            let refill = self.next_refill_s(now_s).unwrap_or(f64::INFINITY);
            let wait = refill.min(politeness_wait);
            wait.is_finite().then(|| wait.clamp(0.0, ttl))
        } else {
            None
        };
        LeaseResponse {
            lease_id,
            items: wire,
            expires_at: expires_s,
            routing_trace: trace,
            retry_after_s,
        }
    }

    /// Seconds from `now_s` to the politeness token this device may use:
    /// among the hosts whose bucket held back one of its candidates, the
    /// soonest token not already promised to another empty answer (each
    /// promise takes one refill interval, 1/rate, of that host), so idle
    /// devices are told to come back one per token instead of all at the
    /// first token. +∞ when no candidate was held back for politeness.
    fn promise_token(&mut self, passed: &[(String, Pass)], now_s: f64) -> f64 {
        let mut best: Option<(String, f64)> = None;
        for (target, p) in passed {
            if *p != Pass::Politeness {
                continue;
            }
            let Some(host) = self
                .d
                .targets
                .get(target)
                .and_then(|t| self.d.sources.get(&t.source))
                .map(|s| s.host.clone())
            else {
                continue;
            };
            let Some(bucket) = self.d.buckets.get(&host) else {
                continue;
            };
            let mut at = now_s + bucket.next_admit_s(now_s);
            if let Some(last) = self.promised.get(&host) {
                at = at.max(last + 1.0 / bucket.rate());
            }
            if best.as_ref().is_none_or(|(_, b)| at < *b) {
                best = Some((host, at));
            }
        }
        match best {
            Some((host, at)) if at.is_finite() => {
                self.promised.insert(host, at);
                at - now_s
            }
            _ => f64::INFINITY,
        }
    }

    /// Finds the open item (`target`, `token`) of `lease_id` owned by `device`.
    pub(crate) fn find_item(
        &self,
        device: &str,
        lease_id: &str,
        target: &str,
        token: &str,
        now_s: f64,
    ) -> Result<(Tier, usize), ApiError> {
        let Some(lease) = self.leases.get(lease_id).filter(|l| l.device == device) else {
            return match self.expired.get(lease_id) {
                Some((owner, at)) if owner == device => Err(ApiError::LeaseExpired(*at)),
                _ => Err(ApiError::UnknownLease),
            };
        };
        if lease.expires_s < now_s {
            return Err(ApiError::LeaseExpired(lease.expires_s));
        }
        let (i, item) = lease
            .items
            .iter()
            .enumerate()
            .find(|(_, it)| it.target == target && ids::same(&it.token, token))
            .ok_or(ApiError::UnknownItem)?;
        if item.done || item.pending {
            return Err(ApiError::Replayed);
        }
        Ok((item.tier, i))
    }

    /// Marks a leased item as reserved by a deposit in progress (or not).
    pub(crate) fn set_pending(&mut self, lease_id: &str, index: usize, pending: bool) {
        if let Some(it) = self
            .leases
            .get_mut(lease_id)
            .and_then(|l| l.items.get_mut(index))
        {
            it.pending = pending;
        }
    }

    /// The policy's constants for a device of `archetype`: the decision
    /// temperature, its batch base, the stamp price and one item's priced
    /// cost (Σ_pool λ·usage), the default bucket and the verification rule.
    fn policy_config(&self, archetype: &str) -> PolicyConfig {
        let price = |p: &str| self.d.pools.get(p).map(|x| x.price()).unwrap_or(0.0);
        PolicyConfig {
            temperature: self.d.temperature,
            batch_base: self.cfg.batch_base.get(archetype).copied().unwrap_or(1),
            stamp_price: price(LEASE_STAMP.0),
            item_cost: POOLS.iter().map(|p| price(p) * item_usage(p)).sum(),
            bucket_capacity: self.cfg.host_bucket.0,
            bucket_rate: self.cfg.host_bucket.1,
            verify: self.verify_config(),
        }
    }

    /// Counts a lease the budget cap cut (`affordable` < `asked`). The cap
    /// bound the grant only if the policy filled what it allowed (`granted`
    /// = `affordable` > 0): then the items it cut are demand the price must
    /// see (usage alone never passes a binding cap, and λ would never
    /// rise), added to each binding pool's held demand at one item's charge
    /// there. Counted once per device per window: a turned-away device asks
    /// again every few seconds, and its retries are not more demand. A lease
    /// the cap left no room for at all adds nothing: whether anything was
    /// admissible at the current price is unknown, so the price rises only
    /// on measured excess (`docs/decisions/0006-budget-hard-cap.md`).
    fn count_cut_demand(
        &mut self,
        device: &str,
        asked: usize,
        affordable: usize,
        granted: usize,
        binding: &[(String, f64)],
    ) {
        if affordable >= asked {
            return;
        }
        self.counters.budget_held += 1;
        if affordable > 0 && granted == affordable && self.held_devices.insert(device.to_string()) {
            let cut = (asked - affordable) as f64;
            for (pool, per_item) in binding {
                *self.held_demand.entry(pool.clone()).or_default() += cut * per_item;
            }
        }
    }

    /// Books the policy's grants for `device`: opens each verification it
    /// joins, counts each item in flight (and its deposit's charge as
    /// pending), and returns the lease's items, their wire form and the
    /// decision receipts, in grant order.
    fn record_grants(
        &mut self,
        device: &str,
        grants: Vec<routing::policy::Grant>,
        now_s: f64,
    ) -> (Vec<Item>, Vec<LeaseItem>, Vec<routing::field::Receipt>) {
        let mut items = Vec::with_capacity(grants.len());
        let mut wire = Vec::with_capacity(grants.len());
        let mut trace = Vec::with_capacity(grants.len());
        let vc = self.verify_config();
        for g in grants {
            let token = ids::token();
            if g.tier == Tier::Verification {
                let device = self.names.intern(device);
                if let Some(mut t) = self.d.targets.get_mut(&g.target) {
                    if t.verification.begin(device, now_s, &vc).is_ok() {
                        self.verify_due.push(&g.target, now_s + vc.ttl_s);
                    }
                }
            }
            *self.in_flight.entry(g.target.clone()).or_default() += 1;
            self.pending_items += 1;
            let source = self
                .d
                .targets
                .get(&g.target)
                .map(|t| t.source.clone())
                .unwrap_or_default();
            wire.push(LeaseItem {
                target: g.target.clone(),
                source,
                kind: tier_name(g.tier).into(),
                deposit_token: token.clone(),
            });
            items.push(Item {
                target: g.target,
                tier: g.tier,
                token,
                done: false,
                pending: false,
            });
            trace.push(g.receipt);
        }
        (items, wire, trace)
    }

    /// How many items a lease may grant now without any capped pool going
    /// over its cap in the current price window: per pool, the cap minus
    /// the window's usage so far, minus what the items still in flight
    /// will charge when deposited ([`deposit_usage`] of a changed row, the
    /// larger), minus this lease's stamp, divided by one deposit's charge.
    /// Also returns the pools that bind (the least room), each with one
    /// item's charge there, so a cut lease can be counted as held demand.
    /// A hard limit beside the price controller, which only steers the mix
    /// (`ROUTING.md` §3 Prices; `docs/decisions/0006-budget-hard-cap.md`):
    /// usage can pass a cap only by deposits that land in a later window
    /// than their grant and by events the router itself emits.
    pub(crate) fn affordable_items(&self) -> (usize, Vec<(String, f64)>) {
        let mut n = usize::MAX;
        let mut limits = Vec::new();
        for (name, pool) in &self.d.pools {
            let cap = pool.cap();
            if cap >= UNCAPPED {
                continue;
            }
            let per_item: f64 = deposit_usage(true)
                .iter()
                .filter(|(p, _)| p == name)
                .map(|(_, u)| u)
                .sum();
            let stamp = if LEASE_STAMP.0 == name {
                LEASE_STAMP.1
            } else {
                0.0
            };
            if per_item <= 0.0 && stamp <= 0.0 {
                continue;
            }
            let used = self.d.usage.get(name).copied().unwrap_or(0.0);
            let left = cap - used - self.pending_items as f64 * per_item - stamp;
            let fits = if left < 0.0 {
                0
            } else if per_item <= 0.0 {
                usize::MAX
            } else {
                (left / per_item).floor() as usize
            };
            n = n.min(fits);
            limits.push((name.clone(), fits, per_item.max(stamp)));
        }
        let binding = limits
            .into_iter()
            .filter(|(_, fits, _)| *fits == n)
            .map(|(p, _, per)| (p, per))
            .collect();
        (n, binding)
    }

    /// A protest: the device declines one leased item before executing it.
    /// The item goes back (its open verification is released); nothing is
    /// learned above the device. Errors as a deposit's lookup.
    pub fn protest(
        &mut self,
        req: &ProtestRequest,
        now_s: f64,
    ) -> Result<ProtestResponse, ApiError> {
        let r = self.protest_inner(req, now_s);
        self.check(r)
    }

    fn protest_inner(
        &mut self,
        req: &ProtestRequest,
        now_s: f64,
    ) -> Result<ProtestResponse, ApiError> {
        if req.reason.len() > 256 {
            return Err(ApiError::bad("reason", "at most 256 bytes"));
        }
        let device = req.device_id.as_str();
        self.authenticate(device, &req.device_secret, now_s)?;
        let (_, index) = self.find_item(
            device,
            &req.lease_id,
            &req.target,
            &req.deposit_token,
            now_s,
        )?;
        if let Some(mut t) = self.d.targets.get_mut(&req.target) {
            t.verification.release(device);
        }
        self.close_item(&req.lease_id, index);
        self.counters.protests += 1;
        Ok(ProtestResponse { released: true })
    }
}
