//! The tick (injected clock): lease expiry, live-scope pruning,
//! verification TTLs, the price tick (single writer), aging, the fleet-level
//! limited cap, the queue refill, and the snapshot.
//! Source: `ROUTING.md` §3 Prices, Evidence dynamics, Assignment policy; §4 Ticks.

use routing::trust::treated_as_limited;

use super::aging::{Retired, TickInputs, TickWork};
use super::Router;
use crate::events::Event;
use crate::store::StoreError;

/// What one tick did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct TickReport {
    /// Leases expired with items not deposited.
    pub leases_expired: usize,
    /// Devices whose live scope ended.
    pub devices_pruned: usize,
    /// Open verifications that expired.
    pub verifications_expired: usize,
    /// Price windows closed.
    pub price_windows: usize,
    /// Targets queued per archetype after the refill.
    pub queued: std::collections::BTreeMap<String, usize>,
}

/// Most price windows closed by one tick (a clock jump of days closes at most this many).
pub const MAX_WINDOWS_PER_TICK: usize = 1000;

impl Router {
    /// Runs one tick at `now_s` (a clock that went backwards changes nothing
    /// time-based) and writes the snapshot. Errors: the store's, when the
    /// snapshot could not be written (the tick's effects are kept in memory
    /// and written next time).
    pub fn tick(&mut self, now_s: f64) -> Result<TickReport, StoreError> {
        let rep = self.tick_state(now_s);
        if let Some(snap) = self.take_snapshot(now_s) {
            if let Err(e) = Router::write_snapshot(&self.store, &snap) {
                self.snapshot_failed(&snap);
                return Err(e);
            }
            if let Some(up_to) = self.snapshot_written(&snap, now_s) {
                let pruned = self.store.lock().prune_deposits(up_to)?;
                self.deposits_pruned(pruned);
            }
        }
        Ok(rep)
    }

    /// The tick without the snapshot: [`Router::tick_begin`], the field's
    /// aging and the refill's plan and decisions ([`TickInputs::run`]),
    /// [`Router::tick_finish`], back to back.
    pub fn tick_state(&mut self, now_s: f64) -> TickReport {
        let (mut rep, inputs) = self.tick_begin(now_s);
        if let Some(inputs) = inputs {
            let retired = self.tick_finish(&mut rep, inputs.run(), now_s);
            drop(retired);
        }
        rep
    }

    /// The tick's last step at `now_s`: the aged field put in place with
    /// the writes made since [`Router::tick_begin`] replayed onto it, then
    /// the refill's install ([`Router::refill_install`], or empty queues
    /// when no archetype was live), and the queue lengths into `rep`. The
    /// shell runs it under the router's lock after [`TickInputs::run`]
    /// outside it, and drops what it returns (the replaced field) after
    /// leaving the lock.
    pub fn tick_finish(&mut self, rep: &mut TickReport, work: TickWork, now_s: f64) -> Retired {
        let retired = self.install_work(work, now_s);
        rep.queued = self
            .queues
            .iter()
            .map(|(k, v)| (k.clone(), v.len()))
            .collect();
        retired
    }

    /// The tick's work up to the refill at `now_s`, and what is done
    /// outside the lock ([`TickInputs`]: the field's clone to age, with its
    /// journal opened, and [`Router::refill_inputs`], O(1) clones); `None`
    /// when the time is not finite, when nothing at all is done.
    pub fn tick_begin(&mut self, now_s: f64) -> (TickReport, Option<TickInputs>) {
        let mut rep = TickReport::default();
        if !now_s.is_finite() {
            return (rep, None);
        }
        self.counters.ticks += 1;
        if let Some(last) = self.last_tick_s {
            if now_s > last {
                self.tick_gap_s = Some(now_s - last);
            }
        }
        self.last_tick_s = Some(now_s);
        rep.leases_expired += self.expire_leases(now_s);
        self.settler_tick(now_s);
        self.expired
            .retain(|_, (_, at)| now_s - *at < super::EXPIRED_MEMORY_S);
        self.acks.forget_before(now_s - super::ACK_MEMORY_S);
        // A live scope that ends is the device's last sign of life: its
        // retention counts from there (a device leasing for months and then
        // gone a minute is not departed).
        let ended: Vec<(String, f64)> = self
            .live
            .iter()
            .filter(|(_, l)| l.expires_s < now_s)
            .map(|(k, l)| (k.clone(), l.expires_s))
            .collect();
        for (id, at) in &ended {
            self.live.remove(id);
            if let Some(mut d) = self.d.devices.get_mut(id) {
                d.last_seen_s = d.last_seen_s.max(*at);
            }
        }
        rep.devices_pruned = ended.len();
        self.sweep_departed(now_s);
        rep.verifications_expired += self.expire_verifications(now_s);
        self.lapse_reports(now_s);
        rep.price_windows = self.price_tick(now_s);
        self.limit_share();
        // Aging of stored evidence: on a clone, outside the lock
        // (`core/aging.rs`).
        let aging = self.begin_aging(now_s);
        let inputs = TickInputs::new(aging, self.refill_inputs(now_s));
        (rep, Some(inputs))
    }

    /// Expires the leases past their time: their open items go back and
    /// their open verifications are released. Returns how many expired.
    fn expire_leases(&mut self, now_s: f64) -> usize {
        let mut count = 0;
        // Leases: expired items go back; their open verifications are released.
        let expired: Vec<String> = self
            .leases
            .iter()
            .filter(|(_, l)| l.expires_s < now_s)
            .map(|(k, _)| k.clone())
            .collect();
        for id in expired {
            if let Some(l) = self.leases.get(&id).cloned() {
                for (i, it) in l.items.iter().enumerate() {
                    if !it.done {
                        if let Some(mut t) = self.d.targets.get_mut(&it.target) {
                            t.verification.release(&l.device);
                        }
                        self.close_item(&id, i);
                    }
                }
                self.end_lease(&id);
                self.expired
                    .insert(id.clone(), (l.device.clone(), l.expires_s));
                count += 1;
                self.counters.leases_expired += 1;
            }
        }
        count
    }

    /// Expires the verifications past their TTL, one event per target.
    /// Returns how many expired.
    fn expire_verifications(&mut self, now_s: f64) -> usize {
        let mut total = 0;
        // Only the targets with an expiry due; read first, write only those
        // with one still open: a write copies the map's path, shared with a
        // snapshot being written. Each target taken is armed again at the
        // earliest expiry it keeps open.
        let mut due = Vec::new();
        for name in self.verify_due.take_due(now_s) {
            let Some(t) = self.d.targets.get(&name) else {
                continue;
            };
            let open = t.verification.open();
            let next = open
                .iter()
                .map(|(_, at)| *at)
                .filter(|at| *at > now_s)
                .min_by(f64::total_cmp);
            let lapsed = open.iter().any(|(_, at)| *at <= now_s);
            if let Some(at) = next {
                self.verify_due.push(&name, at);
            }
            if lapsed {
                due.push(name);
            }
        }
        let mut expired_v = Vec::new();
        for name in due {
            if let Some(mut t) = self.d.targets.get_mut(&name) {
                let n = t.verification.expire(now_s);
                if n > 0 {
                    expired_v.push((name, n));
                }
            }
        }
        for (target, count) in expired_v {
            total += count;
            self.emit(Event::VerificationExpired {
                t_s: now_s,
                target,
                count,
            });
        }
        total
    }

    /// The fleet-level cap on the share of live devices treated as limited.
    /// The live devices' records are found by one walk beside the
    /// devices table ([`super::live_join`]), and only the limited ids are
    /// copied.
    fn limit_share(&mut self) {
        let limited = {
            let live: Vec<(&String, f64)> =
                super::live_join::live_records(&self.live, &self.d.devices)
                    .map(|(k, d)| (k, d.trust))
                    .collect();
            let taus: Vec<f64> = live.iter().map(|(_, t)| *t).collect();
            treated_as_limited(&taus, self.cfg.limited_cap_share)
                .into_iter()
                .filter_map(|i| live.get(i).map(|(k, _)| (*k).clone()))
                .collect()
        };
        self.limited = limited;
    }

    /// Undoes the corroborated reports whose time is up: a crawl delay's
    /// bucket gets its rate back, a shut gate opens to the evidence again
    /// ([`super::reports`]).
    fn lapse_reports(&mut self, now_s: f64) {
        use super::reports::Subject;
        for lapse in self.d.reports.lapsed(now_s) {
            match &lapse.subject {
                Subject::CrawlDelay(host) => {
                    if let (Some(b), Some(rate)) = (self.d.buckets.get_mut(host), lapse.restore) {
                        let _ = b.lift_crawl_delay(rate);
                    }
                }
                Subject::Gate(source, archetype) => {
                    let layers = self.d.field.layers().to_vec();
                    if let Ok(src) =
                        routing::field::Address::from_labels(&layers, &[source.as_str()])
                    {
                        if self.d.field.gate(&src, archetype) == Some(false) {
                            let _ = self.d.field.set_gate(&src, archetype, None);
                        }
                    }
                }
                Subject::Pause(_) => {}
            }
            self.dirty = true;
        }
    }

    /// Seconds from `now_s` to the next queue refill, estimated from the
    /// last two ticks (the shell ticks at a fixed period); `None` before
    /// the second tick. A tick that is late reads as due now (0).
    pub(crate) fn next_refill_s(&self, now_s: f64) -> Option<f64> {
        let (last, gap) = (self.last_tick_s?, self.tick_gap_s?);
        Some((last + gap - now_s).max(0.0))
    }

    /// Closes every elapsed price window: λ ← min(max(0, λ + α(usage − cap)), λ_max)
    /// per pool (the first window with the usage counted, later idle ones
    /// with 0), then publishes λ as the `budget:<pool>` weights.
    fn price_tick(&mut self, now_s: f64) -> usize {
        let w = self.cfg.price_window_s;
        if !(w.is_finite() && w > 0.0) || now_s < self.d.window_start_s + w {
            return 0;
        }
        let windows =
            (((now_s - self.d.window_start_s) / w).floor() as usize).clamp(1, MAX_WINDOWS_PER_TICK);
        let usage = std::mem::take(&mut self.d.usage);
        let held = std::mem::take(&mut self.held_demand);
        self.held_devices.clear();
        self.discovered.clear();
        let pools: Vec<String> = self.d.pools.keys().cloned().collect();
        for name in pools {
            let Some(pool) = self.d.pools.get_mut(&name) else {
                continue;
            };
            let from = pool.price();
            let used = usage.get(&name).copied().unwrap_or(0.0);
            // Demand the cap held back counts toward the price (the window's
            // usage alone cannot pass the cap once the cap binds).
            pool.tick(&[used + held.get(&name).copied().unwrap_or(0.0)]);
            for _ in 1..windows {
                pool.tick(&[0.0]);
            }
            let to = pool.price();
            let _ = self.d.field.set_price(&format!("budget:{name}"), to);
            if to != from {
                self.emit(Event::PriceChanged {
                    t_s: now_s,
                    pool: name.clone(),
                    from,
                    to,
                    usage: used,
                });
            }
        }
        self.d.window_start_s += w * windows as f64;
        if now_s - self.d.window_start_s >= w {
            self.d.window_start_s = now_s;
        }
        self.dirty = true;
        windows
    }
}
