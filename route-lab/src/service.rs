//! The router as a service: a `routerd` child process on loopback, started
//! on its manual clock (`--manual-clock 0`) and driven over HTTP by the
//! lab's driver in lockstep. Before each request the clock is moved to the
//! request's simulated time without a tick (`POST /v1/clock {"to_s": t,
//! "tick": false}`); the driver's own tick schedule moves it with a tick.
//! So routerd stamps every request with the time the in-process router
//! would have been given, and the decisions do not depend on how fast the
//! host runs (decision 0017).
//!
//! Each simulated device registers from a loopback network of its own
//! (`127.x.y.1`, one /24 per device), because routerd relates identities
//! registered from one network (`ROUTING.md` §3 Trust, decision 0014) and
//! the in-process run registers devices with no network at all. Every
//! other request shares one keep-alive connection.
//!
//! The operator's reads (`GET /v1/device`, `/v1/settled`, `/v1/field`)
//! and routerd's event log (`events.jsonl` in its data directory) give the
//! figures the in-process run reads from the router directly.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use router::api::{ApiError, ErrorBody};
use router::events::Event;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::SimError;

/// The operator key the lab gives the routerd it starts.
const OPERATOR_KEY: &str = "route-sim-operator-key";
/// The registration token the lab gives the routerd it starts.
pub const REGISTRATION_TOKEN: &str = "route-sim-registration-token";
/// Distinct loopback /24 networks (`127.1.0.0` to `127.255.255.0`): more
/// devices than this share networks, so a run over HTTP is refused.
pub const MAX_DEVICES: usize = 255 * 256;

/// Where the service runs from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceSpec {
    /// The `routerd` binary.
    pub routerd: PathBuf,
    /// A PostgreSQL URL (`postgres://…`) for routerd's store; `None`:
    /// SQLite in a fresh data directory.
    pub store: Option<String>,
}

impl ServiceSpec {
    /// The store's name for reports: `sqlite` or `postgres`.
    pub fn store_name(&self) -> &'static str {
        if self.store.is_some() {
            "postgres"
        } else {
            "sqlite"
        }
    }
}

/// One running routerd and the lab's connection to it. Dropping it kills
/// routerd and removes its data directory.
pub struct Service {
    child: Child,
    data: PathBuf,
    base: String,
    addr: SocketAddr,
    agent: ureq::Agent,
    /// routerd's clock, as the lab last set it.
    now: f64,
    /// Bytes of `events.jsonl` read so far.
    events_read: u64,
    /// Events read so far, by kind.
    event_counts: BTreeMap<String, u64>,
    /// Why the service cannot go on (routerd unreachable or answering
    /// nonsense); the driver stops the run with it.
    broken: Option<String>,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.data);
    }
}

/// The loopback address device `d` registers from: `127.x.y.1`, one /24 per
/// device for `d < MAX_DEVICES`.
pub fn device_address(d: usize) -> Ipv4Addr {
    let d = d % MAX_DEVICES;
    Ipv4Addr::new(127, (1 + d / 256) as u8, (d % 256) as u8, 1)
}

impl Service {
    /// Starts routerd for run `tag` on a fresh data directory (and, on
    /// PostgreSQL, a fresh schema `route_sim_<pid>_<tag>`).
    /// Errors: [`SimError::Service`] when routerd does not start.
    pub fn start(spec: &ServiceSpec, tag: usize) -> Result<Service, SimError> {
        let pid = std::process::id();
        let data = std::env::temp_dir().join(format!("route-sim-http-{pid}-{tag}"));
        let _ = std::fs::remove_dir_all(&data);
        std::fs::create_dir_all(&data)
            .map_err(|e| SimError::Service(format!("{}: {e}", data.display())))?;
        let schema = format!("route_sim_{pid}_{tag}");
        // The burst rule relates identities of one credential registered
        // within a minute of each other from any networks (decision 0014);
        // the lab's devices register in process with no network, related
        // to none, so routerd runs with the rule off to route the same way.
        let mut extra = vec![
            "--manual-clock",
            "0",
            "--events-max-mib",
            "4096",
            "--burst-s",
            "0",
        ];
        match &spec.store {
            Some(url) => {
                extra.extend(["--store", url.as_str(), "--store-schema", schema.as_str()]);
            }
            // The lab measures decisions, not power-loss durability: every
            // lease and deposit is still committed before it is answered,
            // without waiting on the disk's flush (decision 0017).
            None => extra.extend(["--sqlite-synchronous", "normal"]),
        }
        let spawned = router::load::spawn_routerd(
            &spec.routerd,
            &data,
            OPERATOR_KEY,
            REGISTRATION_TOKEN,
            &extra,
        );
        let (child, base) = match spawned {
            Ok(v) => v,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&data);
                return Err(SimError::Service(e));
            }
        };
        let addr = base
            .trim_start_matches("http://")
            .parse()
            .map_err(|e| SimError::Service(format!("routerd's address {base:?}: {e}")))?;
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        Ok(Service {
            child,
            data,
            base,
            addr,
            agent,
            now: 0.0,
            events_read: 0,
            event_counts: BTreeMap::new(),
            broken: None,
        })
    }

    /// Why the service cannot go on, if it cannot.
    pub fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    fn fail(&mut self, why: String) -> ApiError {
        if self.broken.is_none() {
            self.broken = Some(why.clone());
        }
        ApiError::Store(why)
    }

    /// Moves routerd's clock to `t` (never back), with a tick if `tick`.
    pub fn clock_to(&mut self, t: f64, tick: bool) -> Result<(), ApiError> {
        if t <= self.now && !tick {
            return Ok(());
        }
        let to = t.max(self.now);
        let body = serde_json::json!({ "to_s": to, "tick": tick });
        self.call::<serde_json::Value>("POST", "/v1/clock", Some(body.to_string()), true)?;
        self.now = to;
        Ok(())
    }

    /// Moves the clock to `t` (no tick) and serializes `body`.
    fn at<B: Serialize>(&mut self, t: f64, body: &B) -> Result<String, ApiError> {
        self.clock_to(t, false)?;
        serde_json::to_string(body).map_err(|e| self.fail(e.to_string()))
    }

    /// Sends `body` to `path` at simulated time `t` (the clock moved there
    /// first) and reads the answer as `T`, or as the refusal it is.
    pub fn send<B: Serialize, T: DeserializeOwned>(
        &mut self,
        path: &str,
        body: &B,
        t: f64,
    ) -> Result<T, ApiError> {
        let text = self.at(t, body)?;
        self.call("POST", path, Some(text), false)
    }

    /// An operator read of `path` (with its query).
    pub fn read<T: DeserializeOwned>(&mut self, path: &str) -> Result<T, ApiError> {
        self.call("GET", path, None, true)
    }

    /// An operator read of one record at `path`: `None` when routerd
    /// knows no such record (404 `not_found`).
    pub fn read_record<T: DeserializeOwned>(&mut self, path: &str) -> Result<Option<T>, ApiError> {
        let (status, text) = self.exchange("GET", path, None, true)?;
        let absent = status == 404
            && serde_json::from_str::<ErrorBody>(&text).is_ok_and(|b| b.error == "not_found");
        if absent {
            return Ok(None);
        }
        self.answer(status, &text, path).map(Some)
    }

    /// An operator write of `body` to `path` with `method` at time `t`.
    pub fn write<B: Serialize, T: DeserializeOwned>(
        &mut self,
        method: &str,
        path: &str,
        body: &B,
        t: f64,
    ) -> Result<T, ApiError> {
        let text = self.at(t, body)?;
        self.call(method, path, Some(text), true)
    }

    fn call<T: DeserializeOwned>(
        &mut self,
        method: &str,
        path: &str,
        body: Option<String>,
        operator: bool,
    ) -> Result<T, ApiError> {
        let (status, text) = self.exchange(method, path, body, operator)?;
        self.answer(status, &text, path)
    }

    /// One request on the shared connection: (status, body text).
    fn exchange(
        &mut self,
        method: &str,
        path: &str,
        body: Option<String>,
        operator: bool,
    ) -> Result<(u16, String), ApiError> {
        let url = format!("{}{path}", self.base);
        let sent = match (method, body) {
            ("GET", _) => {
                let mut r = self.agent.get(&url);
                if operator {
                    r = r.header(router::http::OPERATOR_HEADER, OPERATOR_KEY);
                }
                r.call()
            }
            (m, body) => {
                let mut r = match m {
                    "PUT" => self.agent.put(&url),
                    _ => self.agent.post(&url),
                }
                .header("content-type", "application/json");
                if operator {
                    r = r.header(router::http::OPERATOR_HEADER, OPERATOR_KEY);
                }
                r.send(body.unwrap_or_default())
            }
        };
        let answer = sent.and_then(|mut resp| {
            let status = resp.status().as_u16();
            resp.body_mut()
                .with_config()
                .limit(256 << 20)
                .read_to_string()
                .map(|text| (status, text))
        });
        answer.map_err(|e| self.fail(format!("routerd unreachable at {path}: {e}")))
    }

    fn answer<T: DeserializeOwned>(
        &mut self,
        status: u16,
        text: &str,
        path: &str,
    ) -> Result<T, ApiError> {
        if status == 200 {
            return serde_json::from_str(text)
                .map_err(|e| self.fail(format!("{path} answered an unreadable body: {e}")));
        }
        match serde_json::from_str::<ErrorBody>(text)
            .ok()
            .and_then(|b| b.to_error())
        {
            Some(e) => Err(e),
            None => Err(self.fail(format!("{path} answered {status}: {text}"))),
        }
    }

    /// Registers device `d` with `body` at time `t`, from the device's own
    /// loopback network ([`device_address`]), on a connection of its own.
    pub fn register<B: Serialize, T: DeserializeOwned>(
        &mut self,
        d: usize,
        body: &B,
        t: f64,
    ) -> Result<T, ApiError> {
        let text = self.at(t, body)?;
        match exchange_from(device_address(d), self.addr, "/v1/register", &text) {
            Ok((status, answer)) => self.answer(status, &answer, "/v1/register"),
            Err(e) => Err(self.fail(format!("registering from {}: {e}", device_address(d)))),
        }
    }

    /// The events routerd wrote since the last call, oldest first (each
    /// also counted into [`Service::event_counts`]).
    pub fn drain_events(&mut self) -> Vec<Event> {
        let path = self.data.join("events.jsonl");
        let mut text = String::new();
        let read = std::fs::File::open(&path).and_then(|mut f| {
            f.seek(SeekFrom::Start(self.events_read))?;
            f.read_to_string(&mut text)
        });
        if read.is_err() {
            return Vec::new();
        }
        // Only whole lines: routerd writes each before it answers.
        let whole = text.rfind('\n').map_or(0, |i| i + 1);
        self.events_read += whole as u64;
        let mut out = Vec::new();
        for line in text[..whole].lines().filter(|l| !l.trim().is_empty()) {
            match serde_json::from_str::<Event>(line) {
                Ok(e) => {
                    *self.event_counts.entry(e.kind().to_string()).or_default() += 1;
                    out.push(e);
                }
                Err(e) => {
                    self.fail(format!(
                        "events.jsonl holds an unreadable line ({e}): {line}"
                    ));
                }
            }
        }
        out
    }

    /// Every event read so far, by kind (routerd's `router_events_total`).
    pub fn event_counts(&self) -> &BTreeMap<String, u64> {
        &self.event_counts
    }
}

/// One HTTP/1.1 POST of a JSON `body` to `path` at `to`, from local
/// address `from`, on a connection closed after the answer: (status, body).
fn exchange_from(
    from: Ipv4Addr,
    to: SocketAddr,
    path: &str,
    body: &str,
) -> std::io::Result<(u16, String)> {
    use socket2::{Domain, Protocol, SockAddr, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    socket.bind(&SockAddr::from(SocketAddr::new(from.into(), 0)))?;
    socket.connect_timeout(&SockAddr::from(to), Duration::from_secs(10))?;
    let mut stream: TcpStream = socket.into();
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {to}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "not an HTTP answer");
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(bad)?;
    let (_, answer) = text.split_once("\r\n\r\n").ok_or_else(bad)?;
    Ok((status, answer.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every device below the bound gets a network of its own, none the
    /// default loopback network.
    #[test]
    fn each_device_registers_from_a_network_of_its_own() {
        let mut seen = std::collections::BTreeSet::new();
        for d in 0..MAX_DEVICES {
            let a = device_address(d);
            assert_eq!((a.octets()[0], a.octets()[3]), (127, 1));
            assert_ne!(a.octets()[1], 0, "{a}");
            assert!(seen.insert((a.octets()[1], a.octets()[2])), "{d}: {a}");
        }
    }
}
