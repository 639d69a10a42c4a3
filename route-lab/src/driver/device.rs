//! A simulated device's side of the router: registering when it comes
//! online, leasing (a long poll the router holds to its hint), and what it
//! does with an empty, granted or refused answer. Source: `ROUTING.md` §4.

use std::time::Instant;

use router::api::{ApiError, LeaseItem, LeaseRequest, LeaseResponse, RegisterRequest};
use routing::field::Receipt;

use super::{ms, wire_err, Driver, Ev, Held, LONG_POLL_S};
use crate::rng::coin;
use crate::world::{ARCHETYPES, BROWSER, CAPABILITIES};

impl<'w> Driver<'w> {
    pub(super) fn register(&mut self, d: usize, t: f64) {
        let spec = &self.world.devices[d];
        let req = RegisterRequest {
            device_id: spec.id.clone(),
            archetype: ARCHETYPES[spec.archetype].to_string(),
            capabilities: CAPABILITIES[spec.archetype]
                .iter()
                .map(|c| c.to_string())
                .collect(),
            adapter_version: self.devs[d].version.to_string(),
            registration_token: self.port.registration_token(),
            device_secret: self.devs[d].secret.clone(),
        };
        let t0 = Instant::now();
        let r = self.port.register(d, &req, t);
        self.acc.timing.router_s += t0.elapsed().as_secs_f64();
        match r {
            Ok(resp) => self.devs[d].secret = Some(resp.device_secret),
            Err(e) => *self.acc.refused.entry(wire_err(&e)).or_default() += 1,
        }
    }

    pub(super) fn come_online(&mut self, d: usize, t: f64) {
        let a = self.world.devices[d].archetype;
        if !self.devs[d].online {
            self.online[a] += 1;
            self.devs[d].online_since = t;
        }
        let st = &mut self.devs[d];
        st.online = true;
        st.epoch += 1;
        st.held = None;
        st.idle_since = None;
        st.admissible_from = None;
        st.poll_until = None;
        self.register(d, t);
        let e = self.devs[d].epoch;
        let jitter = 5.0 * coin(&[self.world.spec.seed, d as u64, ms(t), 11]);
        self.at(t + jitter, Ev::Wake(d, e));
    }

    pub(super) fn go_offline(&mut self, d: usize, t: f64) {
        let a = self.world.devices[d].archetype;
        if self.devs[d].online {
            self.online[a] -= 1;
            self.acc.online_s += t - self.devs[d].online_since;
        }
        let st = &mut self.devs[d];
        st.online = false;
        st.epoch += 1;
        st.held = None;
        st.idle_since = None;
        st.admissible_from = None;
        st.poll_until = None;
        st.busy_until = st.busy_until.min(t);
    }

    pub(super) fn wake(&mut self, d: usize, t: f64) {
        if !self.devs[d].online || self.devs[d].held.is_some() {
            return;
        }
        let Some(secret) = self.devs[d].secret.clone() else {
            self.register(d, t);
            let e = self.devs[d].epoch;
            self.at(t + self.retry_s, Ev::Wake(d, e));
            return;
        };
        let spec = &self.world.devices[d];
        let req = LeaseRequest {
            device_id: spec.id.clone(),
            device_secret: secret,
            max_items: if spec.archetype == BROWSER { 4 } else { 2 },
            wait_s: Some(LONG_POLL_S),
        };
        // Every try spends the device's request budget, a try inside the
        // router's hold of its long poll too; routerd answers a held try
        // refused for the budget with the poll's empty answer.
        let held_poll = self.devs[d].poll_until.is_some_and(|until| t <= until);
        if !held_poll {
            self.devs[d].poll_until = Some(t + LONG_POLL_S);
        }
        let t0 = Instant::now();
        let r = self.port.lease(&req, t);
        let el = t0.elapsed();
        self.acc.timing.router_s += el.as_secs_f64();
        self.acc.timing.lease_s += el.as_secs_f64();
        self.acc.timing.lease_calls += 1;
        if self.acc.timing.lease_calls % 8 == 1 {
            self.acc
                .lease_us
                .push(el.as_micros().min(u32::MAX as u128) as u32);
        }
        match r {
            Ok(resp) if resp.items.is_empty() => self.on_empty(d, &resp, t),
            Ok(resp) => self.on_granted(d, resp, t),
            Err(ApiError::RateLimited(wait)) if held_poll => {
                let empty = LeaseResponse {
                    lease_id: String::new(),
                    items: Vec::new(),
                    expires_at: t,
                    routing_trace: Vec::new(),
                    retry_after_s: Some(wait),
                };
                self.on_empty(d, &empty, t)
            }
            Err(err) => self.on_refused(d, err, t),
        }
    }

    /// An empty answer: the device is idle from now; the router holds its
    /// long poll to the hint, or the device polls again.
    fn on_empty(&mut self, d: usize, resp: &LeaseResponse, t: f64) {
        let e = self.devs[d].epoch;
        let tick = self.world.spec.tick_s;
        // Queues change at refills (ticks); a politeness token comes
        // back at the router's hint. Before the earlier of the two
        // nothing new can be admissible for this device.
        let next_tick = (t / tick).ceil() * tick;
        let hint = resp.retry_after_s.unwrap_or(f64::INFINITY);
        let st = &mut self.devs[d];
        st.idle_since.get_or_insert(t);
        st.admissible_from = Some(next_tick.min(t + hint));
        let u = coin(&[self.world.spec.seed, d as u64, ms(t), 12]);
        let until = self.devs[d].poll_until.unwrap_or(t);
        let next = match resp.retry_after_s {
            // The router holds the poll and tries again at its hint;
            // the answer reaches the device 1–5 ms later.
            Some(h) if t + h <= until => t + h + 0.001 + 0.004 * u,
            // The wait runs out first: the empty answer comes back
            // then, and the device polls again 10–110 ms later.
            Some(_) => {
                self.devs[d].poll_until = None;
                until + 0.01 + 0.1 * u
            }
            // No hint (no tick yet): the device's own backoff.
            None => {
                self.devs[d].poll_until = None;
                t + self.retry_s * (0.75 + 0.5 * u)
            }
        };
        self.at(next, Ev::Wake(d, e));
    }

    /// Items granted: the idle gap closes (counted against occupancy) and
    /// the device starts the lease's first item.
    fn on_granted(&mut self, d: usize, resp: LeaseResponse, t: f64) {
        self.devs[d].poll_until = None;
        let from = self.devs[d].admissible_from.take();
        if let Some(since) = self.devs[d].idle_since.take() {
            let wasted = (t - from.unwrap_or(since).max(since)).max(0.0);
            self.acc.wasted_s += wasted;
            self.acc.wasted_conservative_s += t - since;
            if self.in_drought(t) {
                self.acc.drought_wasted_s += wasted;
                self.acc.drought_wasted_conservative_s += t - since;
            }
        }
        self.granted(d, &resp.items, &resp.routing_trace, t);
        self.devs[d].held = Some(Held {
            id: resp.lease_id,
            items: resp.items,
            receipts: resp.routing_trace,
            next: 0,
            running: None,
        });
        self.next_item(d, t);
    }

    /// A refused lease: counted; the device registers again or backs off.
    fn on_refused(&mut self, d: usize, err: ApiError, t: f64) {
        let e = self.devs[d].epoch;
        self.devs[d].poll_until = None;
        *self.acc.refused.entry(wire_err(&err)).or_default() += 1;
        let wait = match err {
            ApiError::UnknownDevice(_) => {
                self.register(d, t);
                1.0
            }
            ApiError::RateLimited(w) => w + 0.1,
            _ => self.retry_s,
        };
        self.at(t + wait, Ev::Wake(d, e));
    }

    /// Politeness (against the true limits), work counters and the drought's re-routing.
    pub(super) fn granted(&mut self, d: usize, items: &[LeaseItem], receipts: &[Receipt], t: f64) {
        let a = self.world.devices[d].archetype;
        for (item, receipt) in items.iter().zip(receipts) {
            self.acc.items += 1;
            let Some(&k) = self.targets.get(&item.target) else {
                continue;
            };
            let src = self.world.source_at(self.world.targets[k].source, t);
            if let Some(b) = self.shadow.get_mut(&src.host) {
                b.retune(src.true_bucket(), t);
                if !b.admit(t) {
                    self.acc.violations += 1;
                    if self.world.throttled(k, t).is_some() {
                        self.throttled.insert(item.deposit_token.clone());
                    }
                }
            }
            let w = &mut self.acc.work;
            let n = w.decisions as f64;
            w.cells_visited = (w.cells_visited * n + receipt.work.cells_visited as f64) / (n + 1.0);
            w.messages_recomputed =
                (w.messages_recomputed * n + receipt.work.messages_recomputed as f64) / (n + 1.0);
            w.decisions += 1;
            if let (Some(gone), Some((_, to))) =
                (self.acc.event.browsers_gone_s, self.world.drought)
            {
                if t < to {
                    if a == BROWSER {
                        *self.acc.event.browser_grants_while_gone.get_or_insert(0) += 1;
                    } else if self.acc.last_grant[k] == Some(BROWSER)
                        && self.acc.event.reroute_delay_s.is_none()
                    {
                        self.acc.event.reroute_delay_s = Some(t - gone);
                    }
                }
            }
            self.acc.last_grant[k] = Some(a);
        }
    }
}
