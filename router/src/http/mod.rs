//! The HTTP shell of `routerd`: axum over Tokio, thin over [`Router`].
//! Every handler reads its body with a size cap, parses it strictly
//! (unknown fields are refused), and runs the core on the blocking pool
//! (the core and its store block). Errors are JSON `{error, message}` with
//! the status of [`ApiError::status`]. Source: `ROUTING.md` §4.

use std::path::PathBuf;
use std::sync::Arc;

use axum::body::to_bytes;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::api::{ApiError, ErrorBody};
use crate::config::Facts;
use crate::events::Event;
use crate::Router;

pub mod clock;
mod deposit;
pub mod event_log;
pub mod headroom;
mod holds;
mod lease;
pub mod listener;
#[cfg(test)]
mod listener_tests;
mod long_poll;
mod metrics;
mod on_router;
mod records;
mod registrar;
pub mod serve;
mod writer;

pub use clock::{wall_clock, Clock, ManualClock};
use deposit::deposit;
use writer::WriterJob;
pub use writer::{OVERLOADED_RETRY_S, WRITER_BATCH};

/// The operator page (`GET /`).
pub const PAGE: &str = include_str!("page.html");

/// Header carrying the operator key.
pub const OPERATOR_HEADER: &str = "x-operator-key";

/// State shared by the handlers.
pub struct Shell {
    /// The core.
    pub router: Mutex<Router>,
    /// The clock.
    pub clock: Clock,
    /// Where events go as JSON lines (`None`: not written).
    pub event_log: Mutex<Option<event_log::EventLog>>,
    /// The body cap of the device endpoints, bytes.
    pub body_limit: usize,
    /// The body cap of the operator's facts, bytes.
    pub facts_body_limit: usize,
    /// The operator key.
    pub operator_key: String,
    /// The store (shared with the router; the writer appends outside the router's lock).
    store: crate::core::SharedStore,
    /// Leases' rows and prepared deposits for the store writer thread,
    /// deposits in sequence order.
    writer: Mutex<std::sync::mpsc::Sender<WriterJob>>,
    /// New identities waiting for their durable write, for the registrar
    /// thread (`registrar.rs`).
    registrar: Mutex<std::sync::mpsc::Sender<registrar::Job>>,
    /// The registrar's writes so far, one per batch of new identities.
    registration_writes: std::sync::atomic::AtomicU64,
    /// Requests that found the router's lock held and waited for it on
    /// the blocking pool (`on_router.rs`).
    lock_waits: std::sync::atomic::AtomicU64,
    /// Deposits accepted and not yet answered (queued for the writer or
    /// in its batch); raised under the router's lock, so it never passes
    /// [`Shell::deposit_queue`] and the queue's memory stays bounded.
    pending: std::sync::atomic::AtomicUsize,
    /// Most deposits pending at once (`RouterConfig::deposit_queue`);
    /// past it a deposit is refused with 503 and `Retry-After`.
    deposit_queue: usize,
    /// Long polls held now; past [`Shell::held_cap`] a long poll answers
    /// at once (`long_poll.rs`).
    held: std::sync::atomic::AtomicUsize,
    /// Most long polls held at once (`RouterConfig::held_polls`).
    held_cap: usize,
    /// Long polls answered at once because the cap was reached.
    held_refused: std::sync::atomic::AtomicU64,
    /// Counts ticks: held long polls wake on each (a refill may have made
    /// work admissible).
    ticks: tokio::sync::watch::Sender<u64>,
    /// Set when the service stops: held long polls answer at once.
    closing: tokio::sync::watch::Sender<bool>,
    /// The manual clock, when routerd runs on one (`POST /v1/clock`
    /// advances it); `None` on the wall clock.
    manual: Option<Arc<ManualClock>>,
    /// The replica this shell serves for, with its term (replicas only):
    /// named in `GET /v1/field` and `/metrics`.
    replica: Mutex<Option<crate::core::ReplicaLabel>>,
    /// The longest wait for and hold of the store, by operation.
    holds: holds::Holds,
    /// The listener's connection cap, when one is counted (`/metrics`).
    connections: std::sync::OnceLock<listener::CapHandle>,
}

impl Shell {
    /// A shell over `router`, appending events to `event_log` if given.
    ///
    /// Errors: the event log cannot be opened for appending.
    pub fn new(
        router: Router,
        clock: Clock,
        event_log: Option<PathBuf>,
    ) -> std::io::Result<Arc<Shell>> {
        Self::build(router, clock, None, event_log)
    }

    /// A shell over `router` on a manual clock: time moves, and a tick
    /// runs, only when `POST /v1/clock` advances it.
    ///
    /// Errors: the event log cannot be opened for appending.
    pub fn new_manual(
        router: Router,
        manual: Arc<ManualClock>,
        event_log: Option<PathBuf>,
    ) -> std::io::Result<Arc<Shell>> {
        let clock = manual.clock();
        Self::build(router, clock, Some(manual), event_log)
    }

    /// Whether this shell runs on a manual clock (no background ticker).
    pub fn is_manual(&self) -> bool {
        self.manual.is_some()
    }

    fn build(
        router: Router,
        clock: Clock,
        manual: Option<Arc<ManualClock>>,
        event_log: Option<PathBuf>,
    ) -> std::io::Result<Arc<Shell>> {
        let file = match event_log {
            Some(p) => Some(event_log::EventLog::open(&p, event_log::DEFAULT_MAX_BYTES)?),
            None => None,
        };
        let body_limit = router.config().body_limit;
        let facts_body_limit = router.config().facts_body_limit;
        let operator_key = router.config().operator_key.clone();
        let store = router.store_handle();
        let deposit_queue = router.config().deposit_queue.max(1);
        let held_cap = router.config().held_polls;
        let (tx, rx) = std::sync::mpsc::channel::<WriterJob>();
        let (reg_tx, reg_rx) = std::sync::mpsc::channel::<registrar::Job>();
        let shell = Arc::new(Shell {
            router: Mutex::new(router),
            clock,
            event_log: Mutex::new(file),
            body_limit,
            facts_body_limit,
            operator_key,
            store,
            writer: Mutex::new(tx),
            registrar: Mutex::new(reg_tx),
            registration_writes: std::sync::atomic::AtomicU64::new(0),
            lock_waits: std::sync::atomic::AtomicU64::new(0),
            pending: std::sync::atomic::AtomicUsize::new(0),
            deposit_queue,
            held: std::sync::atomic::AtomicUsize::new(0),
            held_cap,
            held_refused: std::sync::atomic::AtomicU64::new(0),
            ticks: tokio::sync::watch::Sender::new(0),
            closing: tokio::sync::watch::Sender::new(false),
            manual,
            replica: Mutex::new(None),
            holds: holds::Holds::default(),
            connections: std::sync::OnceLock::new(),
        });
        writer::spawn(&shell, rx)?;
        registrar::spawn(&shell, reg_rx)?;
        Ok(shell)
    }

    /// Reports `cap`'s open connections and cap in `/metrics` (the first
    /// call's; later calls change nothing).
    pub fn count_connections(&self, cap: listener::CapHandle) {
        let _ = self.connections.set(cap);
    }

    /// Writes drained events as JSON lines and logs them.
    pub fn write_events(&self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let mut log = self.event_log.lock();
        for e in events {
            tracing::info!(
                event = e.kind(),
                "{}",
                serde_json::to_string(&e).unwrap_or_default()
            );
            if let Some(f) = log.as_mut() {
                if let Ok(line) = serde_json::to_string(&e) {
                    if let Err(err) = f.append(&line) {
                        tracing::warn!("event log: {err}");
                    }
                }
            }
        }
    }

    /// Sets the event log's size cap, bytes ([`event_log::EventLog`]).
    pub fn set_events_max_bytes(&self, max_bytes: u64) {
        if let Some(log) = self.event_log.lock().as_mut() {
            log.set_max_bytes(max_bytes);
        }
    }

    /// Runs one tick now, writes its snapshot outside the router's lock,
    /// and writes its events. Errors are logged (the next tick retries).
    pub fn tick(&self) {
        self.tick_with(false)
    }

    /// The last tick of a clean stop: the snapshot is written whatever the period.
    pub fn final_tick(&self) {
        self.tick_with(true)
    }

    /// One tick at the clock's reading. Under the router's lock: the
    /// tick's bookkeeping, the refill's inputs and the snapshot's clone
    /// (O(1) clones); then, without it, the refill's walk over the targets
    /// and its decisions; under it again, briefly, the queues. The snapshot is serialized and written last, outside the
    /// lock (docs/router.md "Threat model": nothing of size on the lock).
    fn tick_with(&self, force: bool) {
        let now = (self.clock)();
        let (mut rep, inputs, snap, mut events) = {
            let mut r = self.router.lock();
            let (rep, inputs) = r.tick_begin(now);
            let snap = if force {
                r.take_snapshot_now(now)
            } else {
                r.take_snapshot(now)
            };
            (rep, inputs, snap, r.drain_events())
        };
        if let Some(inputs) = inputs {
            let work = inputs.run();
            let retired = {
                let mut r = self.router.lock();
                let retired = r.tick_finish(&mut rep, work, now);
                events.extend(r.drain_events());
                retired
            };
            drop(retired);
        }
        if let Some(snap) = snap {
            self.persist(&snap, now);
        }
        self.write_events(events);
        self.ticks.send_modify(|n| *n += 1);
    }

    /// Names the replica (and term) this shell answers for in `GET
    /// /v1/field` and `/metrics`.
    pub fn set_replica(&self, label: crate::core::ReplicaLabel) {
        *self.replica.lock() = Some(label);
    }

    /// Starts a stop: every held long poll answers now (with what it has),
    /// so a graceful shutdown does not wait out the polls.
    pub fn begin_close(&self) {
        self.closing.send_replace(true);
    }
}

/// The axum application for `shell`.
pub fn app(shell: Arc<Shell>) -> axum::Router {
    axum::Router::new()
        .route("/", get(page))
        .route("/v1/register", post(register))
        .route("/v1/lease", post(lease))
        .route("/v1/deposit", post(deposit))
        .route("/v1/protest", post(protest))
        .route("/v1/field", get(field))
        .route("/v1/device", get(records::device))
        .route("/v1/target", get(records::target))
        .route("/v1/settled", get(records::settled))
        .route("/v1/facts", get(facts_get).put(facts_put))
        .route("/metrics", get(metrics::metrics))
        .route("/v1/clock", post(clock_advance))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(shell)
}

pub(crate) fn error(e: &ApiError) -> Response {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
    let mut resp = (status, axum::Json(ErrorBody::from(e))).into_response();
    if let Some(s) = e.retry_after_s() {
        // Whole seconds, at least one (RFC 9110 §10.2.3).
        let secs = s.ceil().clamp(1.0, 86_400.0) as u64;
        resp.headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
    }
    resp
}

fn ok<T: Serialize>(v: T) -> Response {
    (StatusCode::OK, axum::Json(v)).into_response()
}

async fn not_found() -> Response {
    let body = ErrorBody {
        error: "not_found".into(),
        message: "no such endpoint".into(),
        retry_after_s: None,
    };
    (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}

/// Whether `headers` declare a JSON body: `application/json`, with or
/// without parameters (`; charset=utf-8`), in any case.
fn declares_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let given = headers.get(header::CONTENT_TYPE);
    let essence = given.and_then(|v| v.to_str().ok()).map(|v| {
        v.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    });
    match essence.as_deref() {
        Some("application/json") => Ok(()),
        _ => Err(ApiError::UnsupportedMediaType(match given {
            None => "(none)".into(),
            Some(v) => String::from_utf8_lossy(v.as_bytes())
                .chars()
                .take(64)
                .collect(),
        })),
    }
}

/// A known path asked with a method it does not answer: 405 in the
/// documented JSON shape, with an `Allow` header naming the methods the
/// path answers.
async fn method_not_allowed(State(s): State<Arc<Shell>>, req: Request) -> Response {
    let allowed = match req.uri().path() {
        "/v1/facts" => "GET, PUT",
        "/" | "/v1/field" | "/v1/device" | "/v1/target" | "/v1/settled" | "/metrics" => "GET",
        _ => "POST",
    };
    let e = ApiError::MethodNotAllowed(allowed.into());
    s.router.lock().refused(&e);
    let mut resp = error(&e);
    if let Ok(v) = header::HeaderValue::from_str(allowed) {
        resp.headers_mut().insert(header::ALLOW, v);
    }
    resp
}

/// Reads and strictly parses a JSON body within the cap; the body must be
/// declared as JSON.
async fn body<T: DeserializeOwned>(limit: usize, req: Request) -> Result<T, ApiError> {
    declares_json(req.headers())?;
    let bytes = to_bytes(req.into_body(), limit)
        .await
        .map_err(|_| ApiError::TooLarge(limit))?;
    serde_json::from_slice(&bytes).map_err(|e| {
        let msg = e.to_string();
        if msg.starts_with("unknown field") {
            ApiError::UnknownField(msg)
        } else {
            ApiError::Malformed(msg)
        }
    })
}

/// Runs `f` on the core in the blocking pool, writes its events, and answers.
async fn run<T, F>(shell: Arc<Shell>, f: F) -> Response
where
    T: Serialize + Send + 'static,
    F: FnOnce(&mut Router, f64) -> Result<T, ApiError> + Send + 'static,
{
    run_unlocked(shell, move |s, now| f(&mut s.router.lock(), now)).await
}

/// As [`run`], but `f` takes the router's lock itself, as briefly as it
/// can (for work that waits on the store between its holds).
async fn run_unlocked<T, F>(shell: Arc<Shell>, f: F) -> Response
where
    T: Serialize + Send + 'static,
    F: FnOnce(&Shell, f64) -> Result<T, ApiError> + Send + 'static,
{
    let s = shell.clone();
    let joined = tokio::task::spawn_blocking(move || {
        let now = (s.clock)();
        let out = f(&s, now);
        (out, s.router.lock().drain_events())
    })
    .await;
    match joined {
        Ok((out, events)) => {
            shell.write_events(events);
            match out {
                Ok(v) => ok(v),
                Err(e) => error(&e),
            }
        }
        Err(_) => error(&ApiError::Store("the request's worker failed".into())),
    }
}

/// Parses the body, or counts and answers the refusal.
async fn parsed<T: DeserializeOwned>(shell: &Arc<Shell>, req: Request) -> Result<T, Response> {
    parsed_within(shell, shell.body_limit, req).await
}

async fn parsed_within<T: DeserializeOwned>(
    shell: &Arc<Shell>,
    limit: usize,
    req: Request,
) -> Result<T, Response> {
    match body::<T>(limit, req).await {
        Ok(v) => Ok(v),
        Err(e) => {
            shell.router.lock().refused(&e);
            Err(error(&e))
        }
    }
}

#[allow(clippy::result_large_err)] // the refusal is the handler's whole answer
fn operator(shell: &Shell, headers: &HeaderMap) -> Result<(), Response> {
    let given = headers
        .get(OPERATOR_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if crate::ids::same(given, &shell.operator_key) {
        Ok(())
    } else {
        let e = ApiError::Unauthorized(format!("operator key (header {OPERATOR_HEADER})"));
        shell.router.lock().refused(&e);
        Err(error(&e))
    }
}

async fn page() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE).into_response()
}

async fn register(State(s): State<Arc<Shell>>, req: Request) -> Response {
    // The peer's address, where the server was started with connect info
    // (routerd is, over [`listener::Bounded`]): its registrations share
    // one budget.
    let source = req
        .extensions()
        .get::<axum::extract::ConnectInfo<listener::Peer>>()
        .map(|c| c.0 .0.ip().to_string());
    match parsed::<crate::api::RegisterRequest>(&s, req).await {
        Ok(r) => registrar::register(s, r, source).await,
        Err(resp) => resp,
    }
}

async fn lease(State(s): State<Arc<Shell>>, req: Request) -> Response {
    match parsed::<crate::api::LeaseRequest>(&s, req).await {
        Ok(r) if r.wait_s.is_some_and(|w| w > 0.0) => long_poll::lease(s, r).await,
        Ok(r) => lease::lease_now(s, r).await,
        Err(resp) => resp,
    }
}

async fn protest(State(s): State<Arc<Shell>>, req: Request) -> Response {
    match parsed::<crate::api::ProtestRequest>(&s, req).await {
        Ok(r) => run(s, move |core, now| core.protest(&r, now)).await,
        Err(resp) => resp,
    }
}

async fn field(State(s): State<Arc<Shell>>) -> Response {
    run_unlocked(s, |s, _| {
        let (mut view, tables) = s.router.lock().field_view_parts();
        tables.complete(&mut view);
        view.replica = s.replica.lock().clone();
        Ok(view)
    })
    .await
}

/// `POST /v1/clock` (operator): advances the manual clock (by `advance_s`,
/// or to `to_s`) and runs one tick at the new time unless `tick` is false. On the wall clock the endpoint does not exist
/// (404 `not_found`, as any unknown path).
async fn clock_advance(State(s): State<Arc<Shell>>, headers: HeaderMap, req: Request) -> Response {
    let Some(manual) = s.manual.clone() else {
        return not_found().await;
    };
    if let Err(r) = operator(&s, &headers) {
        return r;
    }
    let step = match parsed::<clock::AdvanceRequest>(&s, req).await {
        Ok(step) => step,
        Err(resp) => return resp,
    };
    let now_s = match step.apply(&manual) {
        Ok(t) => t,
        Err(e) => {
            s.router.lock().refused(&e);
            return error(&e);
        }
    };
    let ticker = s.clone();
    if step.tick
        && tokio::task::spawn_blocking(move || ticker.tick())
            .await
            .is_err()
    {
        return error(&ApiError::Store("the tick's worker failed".into()));
    }
    let ticks = *s.ticks.borrow();
    ok(clock::ClockResponse { now_s, ticks })
}

async fn facts_get(State(s): State<Arc<Shell>>, headers: HeaderMap) -> Response {
    if let Err(r) = operator(&s, &headers) {
        return r;
    }
    run(s, |core, _| Ok(core.get_facts())).await
}

async fn facts_put(State(s): State<Arc<Shell>>, headers: HeaderMap, req: Request) -> Response {
    if let Err(r) = operator(&s, &headers) {
        return r;
    }
    match parsed_within::<Facts>(&s, s.facts_body_limit, req).await {
        Ok(f) => run(s, move |core, now| core.put_facts(&f, now)).await,
        Err(resp) => resp,
    }
}
