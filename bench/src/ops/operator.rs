//! The operator channel: a loopback HTTP endpoint on a live run that reads
//! and retunes the posture policy, and the client the `fleet-lab posture`
//! verbs use.
//!
//! Source: seed 000 §6 (the runtime retune channel); `DESIGN.md` §3
//! "Posture". `GET /posture` answers a [`PostureView`] (all six keys, the
//! posture, the counters). `POST /posture` takes a JSON partial patch over
//! the six keys ([`POSTURE_KEYS`]): the wire refuses an unknown key, an
//! empty patch or a value of the wrong type with HTTP 400; validation is
//! [`PostureOwner::retune`]'s, refused with its typed error's message and
//! HTTP 422, changing nothing; `"cordon_sim_intake_floor": null` restores
//! the default (half the sim slot cap). A success echoes the effective
//! [`PostureView`] and the owner logs one `warn` line with old → new; the
//! server keeps each applied retune ([`OperatorServer::retunes`]) so a run
//! puts it on its report's timeline.

use super::http::{self, HttpClientError};
use super::serve::{reply, Listener, ServeError};
use fleet::posture::{Posture, PostureCounters, PostureOwner, PosturePolicy, PosturePolicyPatch};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::io::Read;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use thiserror::Error;

/// The address the `posture` verbs try when none is given.
pub const DEFAULT_OPERATOR_ADDR: &str = "127.0.0.1:9465";

/// The one path the channel serves.
pub const POSTURE_PATH: &str = "/posture";

/// The six posture keys a patch may set (seed 000 §6).
pub const POSTURE_KEYS: [&str; 6] = [
    "cordon_enter_events",
    "cordon_enter_window_ms",
    "cordon_duty_percent",
    "cordon_duty_window_ms",
    "cordon_exit_clean_ms",
    "cordon_sim_intake_floor",
];

/// Largest request body read, bytes; a patch is well under 1 KiB.
pub const MAX_BODY_BYTES: u64 = 64 * 1024;

/// What `GET /posture` and a successful `POST /posture` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PostureView {
    /// The effective policy, all six keys.
    pub policy: PosturePolicy,
    /// `Nominal` or `Cordoned` now.
    pub posture: Posture,
    /// Enters, exits, dwell (ms) and intake suppressions so far.
    pub counters: PostureCounters,
}

impl PostureView {
    /// The view of `owner` now.
    pub fn of(owner: &PostureOwner) -> Self {
        PostureView {
            policy: owner.policy(),
            posture: owner.posture(),
            counters: owner.counters(),
        }
    }
}

/// The body of every refusal: a stable `kind` and the message to show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    /// `not_json`, `not_an_object`, `unknown_key`, `empty_patch`,
    /// `bad_value`, `invalid_policy`, `not_found` or `method_not_allowed`.
    pub kind: String,
    /// What was wrong and what to do.
    pub error: String,
}

/// A patch refused at the wire, before validation (HTTP 400).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// The body is not JSON.
    #[error("the patch is not JSON ({0}): send an object such as {{\"cordon_duty_percent\": 3}}")]
    NotJson(String),
    /// The body is JSON but not an object.
    #[error("the patch must be a JSON object of cordon_* keys")]
    NotAnObject,
    /// A key outside the six.
    #[error("unknown posture key {key:?}: use one of {}", POSTURE_KEYS.join(", "))]
    UnknownKey {
        /// The key sent.
        key: String,
    },
    /// No key at all.
    #[error("empty posture patch: set at least one of {}", POSTURE_KEYS.join(", "))]
    EmptyPatch,
    /// A value of the wrong type (e.g. a string, a negative or a fraction
    /// for an integer key).
    #[error("{key}: {reason}")]
    BadValue {
        /// The key.
        key: String,
        /// What serde found wrong.
        reason: String,
    },
}

impl WireError {
    /// The stable `kind` of the refusal.
    pub const fn kind(&self) -> &'static str {
        match self {
            WireError::NotJson(_) => "not_json",
            WireError::NotAnObject => "not_an_object",
            WireError::UnknownKey { .. } => "unknown_key",
            WireError::EmptyPatch => "empty_patch",
            WireError::BadValue { .. } => "bad_value",
        }
    }
}

/// Parse a `POST /posture` body into a patch with the wire checks (an
/// object, known keys only, at least one key, values of the key's type).
/// Errors: [`WireError`]. Validation of the values is not done here.
pub fn parse_patch(body: &[u8]) -> Result<PosturePolicyPatch, WireError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| WireError::NotJson(e.to_string()))?;
    let Value::Object(map) = value else {
        return Err(WireError::NotAnObject);
    };
    if let Some(key) = map.keys().find(|k| !POSTURE_KEYS.contains(&k.as_str())) {
        return Err(WireError::UnknownKey { key: key.clone() });
    }
    if map.is_empty() {
        return Err(WireError::EmptyPatch);
    }
    let mut patch = PosturePolicyPatch::default();
    for (key, v) in map {
        let bad = |e: serde_json::Error| WireError::BadValue {
            key: key.clone(),
            reason: e.to_string(),
        };
        match key.as_str() {
            "cordon_enter_events" => patch.cordon_enter_events = Some(typed(v).map_err(bad)?),
            "cordon_enter_window_ms" => patch.cordon_enter_window_ms = Some(typed(v).map_err(bad)?),
            "cordon_duty_percent" => patch.cordon_duty_percent = Some(typed(v).map_err(bad)?),
            "cordon_duty_window_ms" => patch.cordon_duty_window_ms = Some(typed(v).map_err(bad)?),
            "cordon_exit_clean_ms" => patch.cordon_exit_clean_ms = Some(typed(v).map_err(bad)?),
            "cordon_sim_intake_floor" => {
                patch.cordon_sim_intake_floor = Some(typed(v).map_err(bad)?)
            }
            _ => unreachable!("keys were checked against POSTURE_KEYS"),
        }
    }
    Ok(patch)
}

fn typed<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, serde_json::Error> {
    serde_json::from_value(v)
}

fn refusal(kind: &str, error: String) -> String {
    let body = ErrorReply {
        kind: kind.to_string(),
        error,
    };
    serde_json::to_string(&body).expect("an ErrorReply always serializes")
}

fn view_json(owner: &PostureOwner) -> String {
    serde_json::to_string(&PostureView::of(owner)).expect("a PostureView always serializes")
}

/// Answer one request: `(status, JSON body)`. No I/O; the server and the
/// tests call it. `GET /posture` → 200 view; `POST /posture` → 200 view,
/// 400 [`WireError`] or 422 with the [`fleet::posture::PostureRetuneError`]
/// message; another method → 405; another path → 404.
pub fn answer(owner: &PostureOwner, method: &str, path: &str, body: &[u8]) -> (u16, String) {
    if path.split('?').next() != Some(POSTURE_PATH) {
        let msg = format!("no such path {path:?}: use GET or POST {POSTURE_PATH}");
        return (404, refusal("not_found", msg));
    }
    match method {
        "GET" => (200, view_json(owner)),
        "POST" => {
            let patch = match parse_patch(body) {
                Ok(p) => p,
                Err(e) => {
                    tracing::info!(error = %e, "[fleet-posture] operator patch refused at the wire");
                    return (400, refusal(e.kind(), e.to_string()));
                }
            };
            match owner.retune(patch) {
                Ok(_) => (200, view_json(owner)),
                Err(e) => {
                    tracing::info!(error = %e, "[fleet-posture] operator retune refused");
                    (422, refusal("invalid_policy", e.to_string()))
                }
            }
        }
        other => {
            let msg = format!("method {other} not allowed: use GET or POST {POSTURE_PATH}");
            (405, refusal("method_not_allowed", msg))
        }
    }
}

/// One accepted retune: when it was applied and what it changed.
#[derive(Debug, Clone, PartialEq)]
pub struct AppliedRetune {
    /// When the channel applied it.
    pub at: Instant,
    /// `key: old -> new, …`, or `no change` for a patch that set every key
    /// to its live value.
    pub changes: String,
}

/// The text of a retune's changes: `key: old -> new` joined by `, `, or
/// `no change` when `old` and `new` are equal.
pub fn change_text(old: &PosturePolicy, new: &PosturePolicy) -> String {
    let changes = old.diff(new);
    if changes.is_empty() {
        return "no change".to_string();
    }
    changes
        .iter()
        .map(|(k, a, b)| format!("{k}: {a} -> {b}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The running operator channel. Dropping it stops the server.
#[derive(Debug)]
pub struct OperatorServer {
    listener: Listener,
    retunes: Arc<Mutex<Vec<AppliedRetune>>>,
}

impl OperatorServer {
    /// The bound address (the real port when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr()
    }

    /// Every retune the channel applied so far, in the order applied.
    pub fn retunes(&self) -> Vec<AppliedRetune> {
        self.retunes.lock().clone()
    }
}

/// [`answer`], noting an applied retune (its time and changes) in `log`.
fn answer_logged(
    owner: &PostureOwner,
    log: &Mutex<Vec<AppliedRetune>>,
    method: &str,
    path: &str,
    body: &[u8],
) -> (u16, String) {
    // The channel is the only writer of the policy and serves one request
    // at a time, so the policy read before is the one the retune replaced.
    let before = owner.policy();
    let (status, text) = answer(owner, method, path, body);
    if status == 200 && method == "POST" {
        log.lock().push(AppliedRetune {
            at: Instant::now(),
            changes: change_text(&before, &owner.policy()),
        });
    }
    (status, text)
}

/// Serve the operator channel for `owner` on `addr` (loopback only; port 0
/// picks a free port) until the returned server drops. Errors:
/// [`ServeError::NotLoopback`], or the address cannot be bound.
pub fn serve(addr: SocketAddr, owner: Arc<PostureOwner>) -> Result<OperatorServer, ServeError> {
    if !addr.ip().is_loopback() {
        return Err(ServeError::NotLoopback { addr });
    }
    let retunes = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&retunes);
    let listener = Listener::spawn(
        addr,
        "fleet-lab-operator",
        move |mut req| {
            let mut body = Vec::new();
            let read = req.as_reader().take(MAX_BODY_BYTES).read_to_end(&mut body);
            let (status, text) = match read {
                Ok(_) => answer_logged(&owner, &log, req.method().as_str(), req.url(), &body),
                Err(e) => (
                    400,
                    refusal("not_json", format!("cannot read the body: {e}")),
                ),
            };
            reply(req, status, "application/json", text);
        },
        || {},
    )?;
    Ok(OperatorServer { listener, retunes })
}

/// A `posture get|set` that did not come back with a view.
#[derive(Debug, Error)]
pub enum OperatorClientError {
    /// The channel could not be reached.
    #[error(transparent)]
    Http(#[from] HttpClientError),
    /// The channel refused the request (400 wire check, 422 validation).
    #[error("refused (HTTP {status}, {kind}): {message}")]
    Refused {
        /// HTTP status.
        status: u16,
        /// [`ErrorReply::kind`].
        kind: String,
        /// [`ErrorReply::error`]: the typed error's message.
        message: String,
    },
    /// The reply was not a view or a refusal.
    #[error("unexpected reply (HTTP {status}): {body}")]
    BadReply {
        /// HTTP status.
        status: u16,
        /// The body as received.
        body: String,
    },
}

fn view_or_refusal(r: http::HttpReply) -> Result<PostureView, OperatorClientError> {
    if r.status == 200 {
        if let Ok(v) = serde_json::from_str::<PostureView>(&r.body) {
            return Ok(v);
        }
    } else if let Ok(e) = serde_json::from_str::<ErrorReply>(&r.body) {
        return Err(OperatorClientError::Refused {
            status: r.status,
            kind: e.kind,
            message: e.error,
        });
    }
    Err(OperatorClientError::BadReply {
        status: r.status,
        body: r.body,
    })
}

/// `GET /posture` at `addr`. Errors: [`OperatorClientError`].
pub fn get(addr: SocketAddr) -> Result<PostureView, OperatorClientError> {
    view_or_refusal(http::request(addr, "GET", POSTURE_PATH, None)?)
}

/// `POST /posture` at `addr` with `patch` (sent as is; the server does the
/// checks). Errors: [`OperatorClientError::Refused`] carries the server's
/// message.
pub fn set(
    addr: SocketAddr,
    patch: &Map<String, Value>,
) -> Result<PostureView, OperatorClientError> {
    let body = serde_json::to_string(patch).expect("a JSON map always serializes");
    view_or_refusal(http::request(addr, "POST", POSTURE_PATH, Some(&body))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleet::posture::PostureRetuneError;

    #[test]
    fn wire_checks_each_have_their_own_kind() {
        let cases: [(&[u8], &str); 6] = [
            (b"{nope", "not_json"),
            (b"[1]", "not_an_object"),
            (b"{\"cordon_duty\": 3}", "unknown_key"),
            (b"{}", "empty_patch"),
            (b"{\"cordon_enter_events\": -1}", "bad_value"),
            (b"{\"cordon_enter_window_ms\": \"10\"}", "bad_value"),
        ];
        for (body, kind) in cases {
            let e = parse_patch(body).expect_err("refused");
            assert_eq!(e.kind(), kind, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn every_key_parses_and_null_floor_restores_the_default() {
        let p = parse_patch(
            br#"{"cordon_enter_events": 1, "cordon_enter_window_ms": 500,
                 "cordon_duty_percent": 0.5, "cordon_duty_window_ms": 2000,
                 "cordon_exit_clean_ms": 3000, "cordon_sim_intake_floor": 3}"#,
        )
        .unwrap();
        assert_eq!(p.cordon_enter_events, Some(1));
        assert_eq!(p.cordon_enter_window_ms, Some(500));
        assert_eq!(p.cordon_duty_percent, Some(0.5));
        assert_eq!(p.cordon_duty_window_ms, Some(2000));
        assert_eq!(p.cordon_exit_clean_ms, Some(3000));
        assert_eq!(p.cordon_sim_intake_floor, Some(Some(3)));
        let p = parse_patch(br#"{"cordon_sim_intake_floor": null}"#).unwrap();
        assert_eq!(p.cordon_sim_intake_floor, Some(None));
    }

    #[test]
    fn serve_refuses_a_non_loopback_address() {
        let owner = Arc::new(PostureOwner::new(PosturePolicy::default(), 4));
        let e = serve("0.0.0.0:0".parse().unwrap(), owner).unwrap_err();
        assert!(matches!(e, ServeError::NotLoopback { .. }), "{e}");
    }

    #[test]
    fn answer_routes_and_refuses_invalid_values_with_the_typed_message() {
        let owner = PostureOwner::new(PosturePolicy::default(), 4);
        let (s, _) = answer(&owner, "GET", "/nope", b"");
        assert_eq!(s, 404);
        let (s, _) = answer(&owner, "DELETE", POSTURE_PATH, b"");
        assert_eq!(s, 405);
        let (s, body) = answer(
            &owner,
            "POST",
            POSTURE_PATH,
            br#"{"cordon_duty_percent": 0}"#,
        );
        assert_eq!(s, 422);
        let e: ErrorReply = serde_json::from_str(&body).unwrap();
        let want = PostureRetuneError::DutyPercentOutOfRange { value: 0.0 }.to_string();
        assert_eq!(e.error, want);
        assert_eq!(owner.policy(), PosturePolicy::default());
    }
}
