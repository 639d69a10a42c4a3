//! Starts `routerd` as a child process on a free loopback port and talks to
//! it over real HTTP.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

pub const OPERATOR_KEY: &str = "test-operator-key";
pub const TOKEN: &str = "test-registration-token";

/// Where a manual clock starts in the tests (a fixed Unix time).
pub const CLOCK_START_S: f64 = 1_000_000_000.0;

pub struct Routerd {
    /// The process (`None` for a handle from [`Routerd::attach`]).
    pub child: Option<Child>,
    pub base: String,
    agent: ureq::Agent,
}

impl Routerd {
    /// Starts routerd with data in `data` and extra arguments.
    pub fn start(data: &Path, extra: &[&str]) -> Routerd {
        let mut child = Command::new(env!("CARGO_BIN_EXE_routerd"))
            .arg("--data")
            .arg(data)
            .args(["--listen", "127.0.0.1:0", "--operator-key", OPERATOR_KEY])
            .args(["--registration-token", TOKEN])
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("routerd starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).expect("a line");
        let base = line
            .trim()
            .strip_prefix("routerd listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        Routerd {
            child: Some(child),
            base,
            agent: Self::agent(),
        }
    }

    fn agent() -> ureq::Agent {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(20)))
            .build()
            .into()
    }

    /// A client of the routerd at `base`, without its process (dropping it
    /// stops nothing).
    pub fn attach(base: &str) -> Routerd {
        Routerd {
            child: None,
            base: base.to_string(),
            agent: Self::agent(),
        }
    }

    /// The process id (panics on an attached handle).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("a started routerd").id()
    }

    /// Starts routerd on a manual clock reading `start_s`: nothing moves,
    /// and no tick runs, until [`Routerd::advance`].
    pub fn start_manual(data: &Path, start_s: f64, extra: &[&str]) -> Routerd {
        let start = start_s.to_string();
        Self::start(data, &[&["--manual-clock", start.as_str()], extra].concat())
    }

    /// Advances a manual clock by `s` seconds and runs one tick; returns
    /// the clock's new reading.
    pub fn advance(&self, s: f64) -> f64 {
        let (status, v) = self.send(
            "POST",
            "/v1/clock",
            &serde_json::json!({ "advance_s": s }).to_string(),
            true,
        );
        assert_eq!(status, 200, "{v}");
        v["now_s"].as_f64().expect("now_s")
    }

    /// Runs `n` ticks, each `step_s` seconds after the last.
    pub fn ticks(&self, n: usize, step_s: f64) -> f64 {
        let mut now = 0.0;
        for _ in 0..n {
            now = self.advance(step_s);
        }
        now
    }

    /// A counter or gauge of `/metrics` without labels (`router_` + `name`).
    pub fn metric(&self, name: &str) -> Option<f64> {
        let (_, m) = self.get("/metrics");
        let text = m.as_str().unwrap_or("").to_string();
        let key = format!("router_{name} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&key))
            .and_then(|v| v.trim().parse().ok())
    }

    /// Sends raw `body` to `path` with `method`; returns (status, JSON body).
    /// Panics when routerd cannot be reached.
    pub fn send(&self, method: &str, path: &str, body: &str, operator: bool) -> (u16, Value) {
        self.try_send(method, path, body, operator)
            .expect("the request reaches routerd")
    }

    /// As [`Routerd::send`], `None` when routerd cannot be reached.
    pub fn try_send(
        &self,
        method: &str,
        path: &str,
        body: &str,
        operator: bool,
    ) -> Option<(u16, Value)> {
        self.try_send_as(method, path, body, operator, Some("application/json"))
    }

    /// Sends `body` with `method` to `path` declared as `content_type`
    /// (`None`: no Content-Type header); returns (status, JSON body).
    pub fn send_as(
        &self,
        method: &str,
        path: &str,
        body: &str,
        content_type: Option<&str>,
    ) -> (u16, Value) {
        self.try_send_as(method, path, body, false, content_type)
            .expect("the request reaches routerd")
    }

    fn try_send_as(
        &self,
        method: &str,
        path: &str,
        body: &str,
        operator: bool,
        content_type: Option<&str>,
    ) -> Option<(u16, Value)> {
        let url = format!("{}{}", self.base, path);
        let mut resp = match method {
            "GET" => {
                let mut r = self.agent.get(&url);
                if operator {
                    r = r.header("x-operator-key", OPERATOR_KEY);
                }
                r.call()
            }
            m => {
                let mut r = if m == "PUT" {
                    self.agent.put(&url)
                } else {
                    self.agent.post(&url)
                };
                if let Some(t) = content_type {
                    r = r.header("content-type", t);
                }
                if operator {
                    r = r.header("x-operator-key", OPERATOR_KEY);
                }
                r.send(body.to_string())
            }
        }
        .ok()?;
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_string()
            .unwrap_or_default();
        Some((
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        ))
    }

    /// GETs `path`; returns (status, JSON body, the value of `header`).
    /// `None` when routerd cannot be reached.
    pub fn try_get_header(&self, path: &str, header: &str) -> Option<(u16, Value, Option<String>)> {
        let url = format!("{}{}", self.base, path);
        let mut resp = self
            .agent
            .get(&url)
            .header("x-operator-key", OPERATOR_KEY)
            .call()
            .ok()?;
        let status = resp.status().as_u16();
        let h = resp
            .headers()
            .get(header)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = resp.body_mut().read_to_string().unwrap_or_default();
        let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Some((status, v, h))
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send("POST", path, &body.to_string(), false)
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        self.send("GET", path, "", false)
    }

    /// Registers a device from a network of its own ([`network_for`]);
    /// returns its secret.
    pub fn register(&self, id: &str, archetype: &str) -> String {
        let (s, v) = self.register_from(
            &serde_json::json!({"device_id": id, "archetype": archetype, "adapter_version": "1.0", "registration_token": TOKEN}),
            network_for(id),
        );
        assert_eq!(s, 200, "{v}");
        v["device_secret"].as_str().unwrap().to_string()
    }

    /// POSTs `body` to `/v1/register` from the local address `source` (any
    /// 127.x.y.z reaches a loopback listener: each /24 is a network of its
    /// own to routerd); returns (status, JSON body).
    pub fn register_from(&self, body: &Value, source: std::net::Ipv4Addr) -> (u16, Value) {
        self.register_from_with(body, source, "")
    }

    /// As [`Routerd::register_from`], with `headers` (`Name: value\r\n`
    /// lines) added to the request.
    pub fn register_from_with(
        &self,
        body: &Value,
        source: std::net::Ipv4Addr,
        headers: &str,
    ) -> (u16, Value) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr: std::net::SocketAddr = self
            .base
            .trim_start_matches("http://")
            .parse()
            .expect("routerd's address");
        let body = body.to_string();
        let request = format!(
            "POST /v1/register HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{headers}Connection: close\r\n\r\n{body}",
            body.len()
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let raw = rt.block_on(async move {
            let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
            socket
                .bind(std::net::SocketAddr::new(source.into(), 0))
                .expect("binding the source address");
            let mut stream = socket.connect(addr).await.expect("connecting");
            stream.write_all(request.as_bytes()).await.expect("sending");
            let mut raw = Vec::new();
            stream.read_to_end(&mut raw).await.expect("reading");
            raw
        });
        let text = String::from_utf8_lossy(&raw).to_string();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("a status line");
        let json = text.split("\r\n\r\n").nth(1).unwrap_or("");
        (
            status,
            serde_json::from_str(json).unwrap_or(Value::String(json.into())),
        )
    }

    /// Stops with SIGINT (graceful: a final snapshot) and waits for the
    /// exit, at most a minute (a liveness bound, far above the milliseconds
    /// a stop takes): a routerd that outlives it is killed and the test
    /// fails saying so, instead of hanging until the runner's timeout.
    pub fn stop(mut self) {
        if let Some(c) = self.child.as_mut() {
            unsafe_kill(c.id(), "INT");
            if wait_bounded(c, Duration::from_secs(60)).is_none() {
                panic!("routerd (pid {}) still ran 60 s after SIGINT", c.id());
            }
        }
    }

    /// Kills with SIGKILL (no snapshot, nothing flushed) and waits.
    pub fn kill(mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits for `child` to exit, on the exit itself (a thread blocked in
/// `wait`), for at most `bound`; past it the child is killed, reaped, and
/// `None` returned. The pid cannot be reused before the wait reaps it.
pub fn wait_bounded(child: &mut Child, bound: Duration) -> Option<std::process::ExitStatus> {
    let pid = libc::pid_t::try_from(child.id()).expect("a pid");
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel();
        s.spawn(move || {
            let _ = tx.send(child.wait().expect("waiting for the child"));
        });
        match rx.recv_timeout(bound) {
            Ok(status) => Some(status),
            Err(_) => {
                // SAFETY: kill(2) with a pid of ours not yet reaped.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                None
            }
        }
    })
}

fn unsafe_kill(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}

impl Drop for Routerd {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A loopback address in a /24 of `id`'s own (127.a.b.1, from a hash of
/// the id): honest devices of a test live on networks of their own, so
/// routerd does not count them as one identity (docs/router.md "Threat
/// model").
pub fn network_for(id: &str) -> std::net::Ipv4Addr {
    let h = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    std::net::Ipv4Addr::new(127, 1 + (h % 250) as u8, (h >> 8) as u8, 1)
}

/// Facts: one source with `n` targets.
pub fn facts(n: usize) -> Value {
    let targets: Vec<Value> = (0..n)
        .map(|i| serde_json::json!({"target": format!("ad-{i}"), "source": "board"}))
        .collect();
    serde_json::json!({
        "sources": [{"source": "board", "host": "jobs.example", "binding": "html-v1", "bucket": [1000.0, 1000.0]}],
        "targets": targets,
    })
}

pub fn deposit_body(device: &str, secret: &str, lease: &str, item: &Value, hash: &str) -> Value {
    serde_json::json!({
        "device_id": device, "device_secret": secret, "lease_id": lease,
        "target": item["target"], "deposit_token": item["deposit_token"],
        "receipt_revision": 0, "adapter_id": "html", "adapter_version": "1.0",
        "outcome": {"ok": true, "content_hash": hash, "latency_ms": 900.0},
    })
}

pub fn lease(r: &Routerd, id: &str, secret: &str, n: usize) -> Value {
    let (s, v) = r.post(
        "/v1/lease",
        &serde_json::json!({"device_id": id, "device_secret": secret, "max_items": n}),
    );
    assert_eq!(s, 200, "{v}");
    v
}

/// A browser's registration body for `id`, with `token` and, to resume it, `secret`.
pub fn registration(id: &str, token: &str, secret: Option<&str>) -> Value {
    let mut v = json!({"device_id": id, "archetype": "browser", "adapter_version": "1.0", "registration_token": token});
    if let Some(s) = secret {
        v["device_secret"] = json!(s);
    }
    v
}

/// A one-item lease body, held `wait_s` when given.
pub fn lease_body(id: &str, secret: &str, wait_s: Option<f64>) -> Value {
    let mut v = json!({"device_id": id, "device_secret": secret, "max_items": 1});
    if let Some(w) = wait_s {
        v["wait_s"] = json!(w);
    }
    v
}
