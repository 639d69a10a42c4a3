//! How a lease ends, and leases that outlive the process: an item closes
//! on its deposit or protest and the lease ends with its last item (or its
//! expiry); a lease with items is written to the
//! store's [`Table::Leases`] before it is answered, its row is deleted by
//! the first snapshot written after the lease ends, and the rows still
//! there are restored when the router opens. So a device whose routerd was
//! killed and restarted deposits on the lease it holds, and each item is
//! accepted exactly once: an item whose deposit token is in the deposit
//! log is restored as done. Source: docs/router.md "Durability and
//! restart"; `docs/decisions/0018-leases-survive-a-restart.md`.

use routing::policy::Tier;
use serde::{Deserialize, Serialize};

use super::{Item, Lease, OpenError, Router};
use crate::api::{ApiError, LeaseRequest, LeaseResponse};
use crate::config::LEASE_STAMP;
use crate::store::{Row, Table};

/// One lease as stored: its owner, when it was granted and lapses
/// (seconds, the router's clock) and its items with their deposit tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct LeaseRow {
    device: String,
    granted_s: f64,
    expires_s: f64,
    items: Vec<ItemRow>,
}

/// One leased item as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ItemRow {
    target: String,
    tier: Tier,
    token: String,
}

/// A lease answered by [`Router::lease_prepare`] and the store row that
/// must be written before the answer is sent (`None` for an empty answer,
/// which keeps no lease).
#[derive(Debug, Clone)]
pub struct PreparedLease {
    /// The answer for the device.
    pub response: LeaseResponse,
    /// The lease's row in [`Table::Leases`].
    pub row: Option<Row>,
}

/// Where the restore at open put the stored leases.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Restored {
    /// Outstanding: the device may deposit on them.
    pub live: usize,
    /// Lapsed while the router was down: a deposit is told `lease_expired`.
    pub expired: usize,
    /// Fully deposited, or of a device the store no longer knows: dropped.
    pub ended: usize,
}

impl LeaseRow {
    fn of(lease: &Lease) -> LeaseRow {
        LeaseRow {
            device: lease.device.clone(),
            granted_s: lease.granted_s,
            expires_s: lease.expires_s,
            items: lease
                .items
                .iter()
                .map(|it| ItemRow {
                    target: it.target.clone(),
                    tier: it.tier,
                    token: it.token.clone(),
                })
                .collect(),
        }
    }
}

impl Router {
    /// Leases work as [`Router::lease`] but leaves the write to the caller:
    /// the lease is held in memory and its row returned, to be upserted
    /// into [`Table::Leases`] before the answer is sent, and undone by
    /// [`Router::lease_abort`] if that write fails (the HTTP shell writes
    /// it outside the router's lock, batched with its neighbours). Errors
    /// as [`Router::lease`]; nothing changes on error.
    pub fn lease_prepare(
        &mut self,
        req: &LeaseRequest,
        now_s: f64,
    ) -> Result<PreparedLease, ApiError> {
        let r = self.lease_inner(req, now_s);
        let response = self.check(r)?;
        let Some(lease) = self.leases.get(&response.lease_id) else {
            return Ok(PreparedLease {
                response,
                row: None,
            });
        };
        match serde_json::to_string(&LeaseRow::of(lease)) {
            Ok(payload) => Ok(PreparedLease {
                row: Some(Row {
                    key: response.lease_id.clone(),
                    version: 1,
                    payload,
                }),
                response,
            }),
            Err(e) => {
                self.lease_abort(&response.lease_id);
                let e = ApiError::Store(format!("lease row: {e}"));
                self.refused(&e);
                Err(e)
            }
        }
    }

    /// Leases work to a live device at `now_s` (renews its liveness), and
    /// writes the lease to the store before answering.
    /// Errors: `UnknownDevice`, `Unauthorized`, `Forbidden`, `RateLimited`,
    /// `BadValue` (max_items outside 1..=64, wait_s outside
    /// 0..=[`crate::api::MAX_LEASE_WAIT_S`]); nothing changes on error.
    /// `Store` when the lease could not be written: it is undone, its items
    /// go back to their queues.
    pub fn lease(&mut self, req: &LeaseRequest, now_s: f64) -> Result<LeaseResponse, ApiError> {
        let p = self.lease_prepare(req, now_s)?;
        if let Some(row) = &p.row {
            let written = self
                .store
                .lock()
                .upsert(Table::Leases, std::slice::from_ref(row));
            if let Err(e) = written {
                self.lease_abort(&p.response.lease_id);
                let e = ApiError::Store(e.to_string());
                self.refused(&e);
                return Err(e);
            }
        }
        Ok(p.response)
    }

    /// Undoes a prepared lease whose row could not be written: its open
    /// verifications are released and its items go back (the next refill
    /// queues them again). The device never saw the lease.
    pub fn lease_abort(&mut self, lease_id: &str) {
        let Some(lease) = self.leases.get(lease_id).cloned() else {
            return;
        };
        for (i, it) in lease.items.iter().enumerate() {
            if let Some(mut t) = self.d.targets.get_mut(&it.target) {
                t.verification.release(&lease.device);
            }
            self.close_item(lease_id, i);
        }
        self.end_lease(lease_id);
    }

    /// Marks a leased item finished and releases its in-flight count; a
    /// lease whose items are all finished ends.
    pub(crate) fn close_item(&mut self, lease_id: &str, index: usize) {
        let Some(l) = self.leases.get_mut(lease_id) else {
            return;
        };
        let mut released = None;
        if let Some(it) = l.items.get_mut(index) {
            if !it.done {
                it.done = true;
                released = Some(it.target.clone());
            }
        }
        let all_done = l.items.iter().all(|i| i.done);
        if let Some(target) = released {
            self.pending_items = self.pending_items.saturating_sub(1);
            if let Some(n) = self.in_flight.get_mut(&target) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.in_flight.remove(&target);
                }
            }
        }
        if all_done {
            self.end_lease(lease_id);
        }
    }

    /// Forgets an ended lease and schedules its row's deletion with the
    /// next snapshot.
    pub(crate) fn end_lease(&mut self, lease_id: &str) {
        if self.leases.remove(lease_id).is_some() {
            self.ended_leases.push(lease_id.to_string());
            self.dirty = true;
        }
    }

    /// Restores the stored leases at open (after the snapshot and the
    /// deposits logged after it): an item whose token is in the deposit
    /// log is done; a lease whose items are all done, or whose device the
    /// store no longer knows, ends; one that lapsed while the router was
    /// down expires now (its late deposit is told `lease_expired`); the
    /// others are outstanding again, their items in flight, their
    /// verifications open and their devices live. Grants made after the snapshot was taken spend
    /// their politeness tokens and lease stamps again, so a restart gives
    /// no host a second helping. Errors: the store's, or `BadState` for an
    /// unreadable row.
    pub(crate) fn restore_leases(&mut self, now_s: f64) -> Result<Restored, OpenError> {
        let rows = self.store.lock().load(Table::Leases)?;
        let mut leases = Vec::with_capacity(rows.len());
        for row in rows {
            let l: LeaseRow = serde_json::from_str(&row.payload)
                .map_err(|e| OpenError::BadState(format!("lease {}: {e}", row.key)))?;
            leases.push((row.key, l));
        }
        leases.sort_by(|a, b| a.1.granted_s.total_cmp(&b.1.granted_s));
        let mut out = Restored::default();
        let taken_s = self.d.t_s;
        for (id, row) in leases {
            if row.granted_s > taken_s {
                self.spend_again(&row);
            }
            let mut items = Vec::with_capacity(row.items.len());
            for it in &row.items {
                let done = self.store.lock().has_deposit(&it.token)?;
                items.push(Item {
                    target: it.target.clone(),
                    tier: it.tier,
                    token: it.token.clone(),
                    done,
                    pending: false,
                });
            }
            let known = self.d.devices.contains_key(&row.device);
            if !known || items.iter().all(|i| i.done) {
                self.ended_leases.push(id);
                out.ended += 1;
            } else if row.expires_s < now_s {
                for it in items.iter().filter(|i| !i.done) {
                    if let Some(mut t) = self.d.targets.get_mut(&it.target) {
                        t.verification.release(&row.device);
                    }
                }
                self.expired.insert(id.clone(), (row.device, row.expires_s));
                self.ended_leases.push(id);
                out.expired += 1;
            } else {
                self.reopen(&row, &items);
                self.leases.insert(
                    id,
                    Lease {
                        device: row.device,
                        granted_s: row.granted_s,
                        expires_s: row.expires_s,
                        items,
                    },
                );
                out.live += 1;
            }
        }
        if out.ended + out.expired > 0 {
            self.dirty = true;
        }
        self.counters.leases_restored += out.live as u64;
        Ok(out)
    }

    /// Puts a restored lease's open items back in flight, rejoins the
    /// verifications they hold (a grant after the snapshot opened one the
    /// snapshot does not have) and makes its device live until the lease
    /// lapses (the lease renewed its live scope that far).
    fn reopen(&mut self, row: &LeaseRow, items: &[Item]) {
        let until = self
            .live
            .get(&row.device)
            .map_or(row.expires_s, |l| l.expires_s.max(row.expires_s));
        self.live
            .insert(row.device.clone(), super::Live { expires_s: until });
        let vc = self.verify_config();
        for it in items.iter().filter(|i| !i.done) {
            *self.in_flight.entry(it.target.clone()).or_default() += 1;
            self.pending_items += 1;
            if it.tier != Tier::Verification {
                continue;
            }
            let device = self.names.intern(&row.device);
            if let Some(mut t) = self.d.targets.get_mut(&it.target) {
                let held = t.verification.open().iter().any(|(d, _)| *d == device);
                if !held && t.verification.begin(device, row.granted_s, &vc).is_ok() {
                    self.verify_due.push(&it.target, row.granted_s + vc.ttl_s);
                }
            }
        }
    }

    /// Spends again what a grant made after the snapshot spent: one
    /// politeness token per item on its host, and the lease stamp when the
    /// grant fell in the open price window.
    fn spend_again(&mut self, row: &LeaseRow) {
        let (capacity, rate) = self.cfg.host_bucket;
        for it in &row.items {
            let Some(host) = self
                .d
                .targets
                .get(&it.target)
                .and_then(|t| self.d.sources.get(&t.source))
                .map(|s| s.host.clone())
            else {
                continue;
            };
            if !self.d.buckets.contains_key(&host) {
                match routing::politeness::Bucket::new(capacity, rate) {
                    Ok(b) => self.d.buckets.insert(host.clone(), b),
                    Err(_) => continue,
                };
            }
            if let Some(b) = self.d.buckets.get_mut(&host) {
                let _ = b.admit(row.granted_s);
            }
        }
        if !row.items.is_empty() && row.granted_s >= self.d.window_start_s {
            *self.d.usage.entry(LEASE_STAMP.0.into()).or_default() += LEASE_STAMP.1;
        }
    }
}
