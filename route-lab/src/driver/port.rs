//! Where the driver's requests go: the router in process (called directly
//! with the simulated time), or `routerd` over HTTP on its manual clock
//! ([`crate::service`]). Both answer the same requests with the same
//! types, so the driver does not know which one it drives.

use std::collections::BTreeMap;

use router::api::{
    ApiError, DepositRequest, DepositResponse, LeaseRequest, LeaseResponse, ProtestRequest,
    ProtestResponse, RegisterRequest, RegisterResponse,
};
use router::config::Facts;
use router::core::{DeviceView, FieldView, SettledPage};
use router::events::Event;
use router::Router;

use crate::service::{Service, REGISTRATION_TOKEN};

/// The router the driver talks to.
pub enum Port {
    /// The router in this process.
    Local(Box<Router>),
    /// routerd over loopback HTTP.
    Service(Box<Service>),
}

impl Port {
    /// The registration token devices present.
    pub fn registration_token(&self) -> String {
        match self {
            Port::Local(r) => r.config().registration_token.clone(),
            Port::Service(_) => REGISTRATION_TOKEN.to_string(),
        }
    }

    /// Registers device `d` with `req` at `t`.
    pub fn register(
        &mut self,
        d: usize,
        req: &RegisterRequest,
        t: f64,
    ) -> Result<RegisterResponse, ApiError> {
        match self {
            Port::Local(r) => r.register(req, t),
            Port::Service(s) => s.register(d, req, t),
        }
    }

    /// A lease try at `t` (the driver holds the long poll itself).
    pub fn lease(&mut self, req: &LeaseRequest, t: f64) -> Result<LeaseResponse, ApiError> {
        match self {
            Port::Local(r) => r.lease(req, t),
            Port::Service(s) => {
                // routerd would hold a poll with a wait on the wall clock;
                // the driver holds it on the simulated one, as in process.
                let once = LeaseRequest {
                    wait_s: None,
                    ..req.clone()
                };
                s.send("/v1/lease", &once, t)
            }
        }
    }

    /// A deposit at `t`.
    pub fn deposit(&mut self, req: &DepositRequest, t: f64) -> Result<DepositResponse, ApiError> {
        match self {
            Port::Local(r) => r.deposit(req, t),
            Port::Service(s) => s.send("/v1/deposit", req, t),
        }
    }

    /// A protest at `t`.
    pub fn protest(&mut self, req: &ProtestRequest, t: f64) -> Result<ProtestResponse, ApiError> {
        match self {
            Port::Local(r) => r.protest(req, t),
            Port::Service(s) => s.send("/v1/protest", req, t),
        }
    }

    /// The operator's facts at `t`.
    pub fn put_facts(&mut self, facts: &Facts, t: f64) -> Result<(), String> {
        match self {
            Port::Local(r) => r.put_facts(facts, t).map(|_| ()),
            Port::Service(s) => s
                .write::<_, serde_json::Value>("PUT", "/v1/facts", facts, t)
                .map(|_| ()),
        }
        .map_err(|e| e.to_string())
    }

    /// A tick at `t`: the targets queued (in process; routerd does not say).
    pub fn tick(&mut self, t: f64) -> Result<u64, String> {
        match self {
            Port::Local(r) => r
                .tick(t)
                .map(|rep| rep.queued.values().sum::<usize>() as u64)
                .map_err(|e| e.to_string()),
            Port::Service(s) => {
                s.clock_to(t, true).map_err(|e| e.to_string())?;
                match s.broken() {
                    Some(why) => Err(why.to_string()),
                    None => Ok(0),
                }
            }
        }
    }

    /// The current price window's start and each pool's use in it.
    pub fn price_window(&mut self) -> (f64, BTreeMap<String, f64>) {
        match self {
            Port::Local(r) => {
                let (start, usage) = r.price_window();
                (start, usage.clone())
            }
            Port::Service(s) => s
                .read::<FieldView>("/v1/field")
                .map(|v| (v.window_start_s, v.window_usage))
                .unwrap_or_default(),
        }
    }

    /// The events since the last call.
    pub fn drain_events(&mut self) -> Vec<Event> {
        match self {
            Port::Local(r) => r.drain_events(),
            Port::Service(s) => s.drain_events(),
        }
    }

    /// Live devices of `archetype`.
    pub fn live(&mut self, archetype: &str) -> usize {
        let view = match self {
            Port::Local(r) => Some(r.field_view()),
            Port::Service(s) => s.read::<FieldView>("/v1/field").ok(),
        };
        view.and_then(|v| {
            v.population
                .iter()
                .find(|p| p.archetype == archetype)
                .map(|p| p.live)
        })
        .unwrap_or(0)
    }

    /// Device `id`'s trust, if it is known.
    pub fn trust(&mut self, id: &str) -> Option<f64> {
        match self {
            Port::Local(r) => r.trust(id),
            Port::Service(s) => s
                .read_record::<DeviceView>(&format!("/v1/device?id={}", query_value(id)))
                .ok()
                .flatten()
                .map(|v| v.trust),
        }
    }

    /// Every settled row: target → hash.
    pub fn settled_rows(&mut self) -> BTreeMap<String, String> {
        match self {
            Port::Local(r) => {
                let targets = r.targets_table();
                targets
                    .iter()
                    .filter_map(|(k, t)| {
                        t.verification.settled().map(|h| (k.clone(), h.to_string()))
                    })
                    .collect()
            }
            Port::Service(s) => {
                let mut rows = BTreeMap::new();
                let mut after = String::new();
                loop {
                    let path = format!("/v1/settled{after}");
                    let Ok(page) = s.read::<SettledPage>(&path) else {
                        break;
                    };
                    rows.extend(page.rows.into_iter().map(|r| (r.target, r.hash)));
                    match page.next_after {
                        Some(a) => after = format!("?after={}", query_value(&a)),
                        None => break,
                    }
                }
                rows
            }
        }
    }

    /// Price λ per pool.
    pub fn prices(&mut self) -> BTreeMap<String, f64> {
        match self {
            Port::Local(r) => r.prices(),
            Port::Service(s) => s
                .read::<FieldView>("/v1/field")
                .map(|v| v.prices)
                .unwrap_or_default(),
        }
    }

    /// Events emitted so far, by kind.
    pub fn event_counts(&mut self) -> BTreeMap<String, u64> {
        match self {
            Port::Local(r) => r.counters().events.clone(),
            Port::Service(s) => {
                s.drain_events();
                s.event_counts().clone()
            }
        }
    }

    /// Why the service broke, if it did (never in process).
    pub fn broken(&self) -> Option<String> {
        match self {
            Port::Local(_) => None,
            Port::Service(s) => s.broken().map(str::to_string),
        }
    }
}

/// `s` percent-encoded for a query value (RFC 3986 unreserved kept).
fn query_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::query_value;

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(query_value("src-0-t2"), "src-0-t2");
        assert_eq!(query_value("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
    }
}
