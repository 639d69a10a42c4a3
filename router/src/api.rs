//! The wire types of the HTTP API (`ROUTING.md` §4), shared by the core and
//! the shell. Requests reject unknown fields; every failure is an
//! [`ApiError`] with a stable `kind` string.

use serde::{Deserialize, Serialize};

use routing::field::Receipt;

/// `POST /v1/register`: a device announces itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterRequest {
    /// Device id chosen by the device (1..=128 bytes of `[A-Za-z0-9._:-]`).
    pub device_id: String,
    /// Its archetype: one of the router's declared archetypes.
    pub archetype: String,
    /// Operator-gate capabilities it satisfies (`needs_js`, `residential`, …; ≤ 32).
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Version of the adapter code it runs (≤ 64 bytes).
    pub adapter_version: String,
    /// The fleet's registration token.
    pub registration_token: String,
    /// A returning device's secret (the one its first registration gave it):
    /// required to resume a known identity and its earned trust.
    #[serde(default)]
    pub device_secret: Option<String>,
}

/// Answer to a registration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisterResponse {
    /// The device id.
    pub device_id: String,
    /// Secret the device presents with every request and when it registers
    /// again (unguessable, 128 bits, hex; a returning device keeps its own).
    pub device_secret: String,
    /// Its trust τ ∈ [0, 1] (resumed when the device was known).
    pub trust: f64,
    /// Its trust state (`trusted`, `normal`, `limited`, `suspended`, `revoked`).
    pub state: String,
    /// Lease TTL in seconds: the heartbeat that keeps the device live.
    pub lease_ttl_s: f64,
}

/// `POST /v1/lease`: a live device asks for work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseRequest {
    /// The device id.
    pub device_id: String,
    /// The secret returned by registration.
    pub device_secret: String,
    /// Most items wanted (1..=64).
    pub max_items: usize,
    /// Long poll, seconds (0..=[`MAX_LEASE_WAIT_S`]; absent or 0: answer at
    /// once). When nothing is admissible, the service holds the request and
    /// answers as soon as work may be (at the empty answer's
    /// `retry_after_s`, or a queue refill), or with the empty answer when
    /// the wait runs out. A device that waits does not re-poll: its next
    /// item reaches it when it becomes admissible instead of a re-poll
    /// later. The pure core ([`crate::core::Router::lease`]) only checks the
    /// range; the HTTP shell does the waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_s: Option<f64>,
}

/// The longest long poll a lease may ask for, seconds.
pub const MAX_LEASE_WAIT_S: f64 = 30.0;

/// One granted item of a lease.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaseItem {
    /// Target id.
    pub target: String,
    /// Source of the target.
    pub source: String,
    /// Work kind: `first_observation`, `verification`, `reobservation`, `discovery`, `filler`.
    pub kind: String,
    /// Token to present with the deposit of this item (unguessable, single use).
    pub deposit_token: String,
}

/// Answer to a lease request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaseResponse {
    /// Lease id (unguessable; bound to the device). An empty lease is not
    /// kept: its id names nothing (a deposit against it is `unknown_lease`).
    pub lease_id: String,
    /// Granted items (may be empty: nothing admissible now).
    pub items: Vec<LeaseItem>,
    /// Expiry, seconds on the router's clock.
    pub expires_at: f64,
    /// The receipt of each item's decision, in item order.
    pub routing_trace: Vec<Receipt>,
    /// With no items: seconds until work may next be admissible for this
    /// device — the earliest of the next queue refill (from the router's
    /// tick cadence) and the next politeness token of a candidate its host's
    /// bucket held back. Absent when the router cannot tell (no tick yet)
    /// or items were granted; a device asks again then instead of at its
    /// own backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_s: Option<f64>,
}

/// What an executed attempt produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outcome {
    /// Whether the fetch succeeded.
    pub ok: bool,
    /// Hash of the content seen (required when `ok`; ≤ 128 bytes).
    #[serde(default)]
    pub content_hash: Option<String>,
    /// Wall time of the attempt in milliseconds (finite, ≥ 0, ≤ 1 day).
    #[serde(default)]
    pub latency_ms: Option<f64>,
    /// Failure class: `cors`, `js_required`, `antibot` write a false gate;
    /// others (`timeout`, `http_5xx`, `network`, …) are plain failures.
    #[serde(default)]
    pub error_class: Option<String>,
    /// A `Retry-After` or 429 the host sent, seconds (finite, ≥ 0, ≤ 1 day).
    #[serde(default)]
    pub retry_after_s: Option<f64>,
    /// The host's robots crawl-delay, seconds (finite, ≥ 0; capped at 300).
    #[serde(default)]
    pub crawl_delay_s: Option<f64>,
}

/// `POST /v1/deposit`: the result of one leased item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DepositRequest {
    /// The depositing device.
    pub device_id: String,
    /// Its device secret.
    pub device_secret: String,
    /// The lease the item came from.
    pub lease_id: String,
    /// The item's target.
    pub target: String,
    /// The item's deposit token.
    pub deposit_token: String,
    /// Field revision of the receipt the device acted on.
    pub receipt_revision: u64,
    /// Adapter id that scraped it.
    pub adapter_id: String,
    /// Adapter version that scraped it.
    pub adapter_version: String,
    /// What happened.
    pub outcome: Outcome,
    /// Targets a listing crawl found (≤ 1,000 ids): only a successful
    /// deposit of a listing target may carry any, within the device's
    /// discovery budget per price window.
    #[serde(default)]
    pub discovered: Vec<String>,
}

/// Answer to an accepted deposit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DepositResponse {
    /// Sequence number of the deposit in the durable log.
    pub seq: u64,
    /// The device's trust after the fold.
    pub trust: f64,
    /// Whether the target's row is settled after the fold.
    pub settled: bool,
}

/// `POST /v1/protest`: a preflight release (nothing is learned above the device).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtestRequest {
    /// The depositing device.
    pub device_id: String,
    /// Its device secret.
    pub device_secret: String,
    /// The lease the item came from.
    pub lease_id: String,
    /// The item's target.
    pub target: String,
    /// The item's deposit token.
    pub deposit_token: String,
    /// Why the device declined (≤ 256 bytes; logged only).
    pub reason: String,
}

/// Answer to a protest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProtestResponse {
    /// Always true: the item went back to the queue.
    pub released: bool,
}

/// Every way a request can be refused. Serialized as
/// `{"error": "<kind>", "message": "…"}`; each kind maps to one HTTP status.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// The body is not valid JSON for the endpoint (400).
    #[error("malformed request: {0}")]
    Malformed(String),
    /// The body names a field the endpoint does not know (400).
    #[error("{0}")]
    UnknownField(String),
    /// A body that is not declared as JSON (415): the `Content-Type` given,
    /// or `(none)`.
    #[error("the body must be JSON (Content-Type: application/json), got {0}")]
    UnsupportedMediaType(String),
    /// The endpoint exists but not for this method (405): the methods it has.
    #[error("method not allowed here; this endpoint answers {0}")]
    MethodNotAllowed(String),
    /// The body exceeds the size cap (413).
    #[error("request body larger than {0} bytes")]
    TooLarge(usize),
    /// A value is out of range (422): which field and why.
    #[error("bad value for `{field}`: {reason}")]
    BadValue {
        /// The field.
        field: String,
        /// Why it was refused.
        reason: String,
    },
    /// Missing or wrong registration token, device secret or operator key (401).
    #[error("not authorized: {0}")]
    Unauthorized(String),
    /// The device is suspended or revoked by the operator (403).
    #[error("device {0} is {1}")]
    Forbidden(String, String),
    /// Unknown archetype (422).
    #[error("unknown archetype `{0}`")]
    UnknownArchetype(String),
    /// The device is not registered or its live scope expired (404).
    #[error("device `{0}` is not live; register again")]
    UnknownDevice(String),
    /// No such lease, or not this device's (404: a foreign lease is not revealed).
    #[error("unknown lease")]
    UnknownLease,
    /// The lease expired (410).
    #[error("lease expired at {0}")]
    LeaseExpired(f64),
    /// The target is not an item of this lease, or the token does not match (404).
    #[error("no such item in this lease")]
    UnknownItem,
    /// The deposit token was already used (409).
    #[error("deposit token already used")]
    Replayed,
    /// Too many requests from this device (429).
    #[error("rate limited; retry after {0:.3} s")]
    RateLimited(f64),
    /// Too many registrations from this registration credential or source
    /// address (429): which budget, and the seconds until it refills.
    #[error("registrations limited per {0}; retry after {1:.3} s")]
    RegistrationLimited(String, f64),
    /// A device's discovered targets over its budget for the price window
    /// (429): the budget.
    #[error("discovered targets limited to {0} per device per price window")]
    DiscoveryLimited(usize),
    /// The store failed; nothing was acknowledged (503).
    #[error("store unavailable: {0}")]
    Store(String),
    /// Deposits waiting for the store are at their cap (503, with
    /// `Retry-After`): the cap, and the seconds to wait. Nothing of the
    /// deposit was kept; the same body may be sent again.
    #[error("{0} deposits are waiting for the store; retry after {1:.0} s")]
    Overloaded(usize, f64),
    /// Replicas: no replica leads now, or the leading one cannot be
    /// reached (503, `Retry-After`: the seconds until the next campaign).
    /// Nothing was done; the same request may be sent again, to any
    /// replica. Source: `docs/decisions/0020-replicas-over-one-postgresql.md`.
    #[error("no replica leads now ({0}); retry after {1:.0} s")]
    NoLeader(String, f64),
}

impl ApiError {
    /// The stable machine-readable kind.
    pub fn kind(&self) -> &'static str {
        match self {
            ApiError::Malformed(_) => "malformed",
            ApiError::UnknownField(_) => "unknown_field",
            ApiError::TooLarge(_) => "too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::MethodNotAllowed(_) => "method_not_allowed",
            ApiError::BadValue { .. } => "bad_value",
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::Forbidden(..) => "forbidden",
            ApiError::UnknownArchetype(_) => "unknown_archetype",
            ApiError::UnknownDevice(_) => "unknown_device",
            ApiError::UnknownLease => "unknown_lease",
            ApiError::LeaseExpired(_) => "lease_expired",
            ApiError::UnknownItem => "unknown_item",
            ApiError::Replayed => "replayed",
            ApiError::RateLimited(_) => "rate_limited",
            ApiError::RegistrationLimited(..) => "registration_limited",
            ApiError::DiscoveryLimited(_) => "discovery_limited",
            ApiError::Store(_) => "store_unavailable",
            ApiError::Overloaded(..) => "overloaded",
            ApiError::NoLeader(..) => "no_leader",
        }
    }

    /// The HTTP status code.
    pub fn status(&self) -> u16 {
        match self {
            ApiError::Malformed(_) | ApiError::UnknownField(_) => 400,
            ApiError::TooLarge(_) => 413,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::MethodNotAllowed(_) => 405,
            ApiError::BadValue { .. } | ApiError::UnknownArchetype(_) => 422,
            ApiError::Unauthorized(_) => 401,
            ApiError::Forbidden(..) => 403,
            ApiError::UnknownDevice(_) | ApiError::UnknownLease | ApiError::UnknownItem => 404,
            ApiError::LeaseExpired(_) => 410,
            ApiError::Replayed => 409,
            ApiError::RateLimited(_)
            | ApiError::RegistrationLimited(..)
            | ApiError::DiscoveryLimited(_) => 429,
            ApiError::Store(_) | ApiError::Overloaded(..) | ApiError::NoLeader(..) => 503,
        }
    }

    /// The seconds a client should wait before sending again, where the
    /// refusal says (HTTP's `Retry-After`): the request budgets' refill
    /// and the deposit queue's back-pressure.
    pub fn retry_after_s(&self) -> Option<f64> {
        match self {
            ApiError::RateLimited(s)
            | ApiError::RegistrationLimited(_, s)
            | ApiError::Overloaded(_, s)
            | ApiError::NoLeader(_, s) => Some(*s),
            _ => None,
        }
    }

    /// Shorthand for [`ApiError::BadValue`].
    pub fn bad(field: &str, reason: impl Into<String>) -> ApiError {
        ApiError::BadValue {
            field: field.to_string(),
            reason: reason.into(),
        }
    }
}

/// The JSON body of an error response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// [`ApiError::kind`].
    pub error: String,
    /// A sentence for humans.
    pub message: String,
    /// [`ApiError::retry_after_s`] to the millisecond and beyond (the
    /// `Retry-After` header rounds it up to whole seconds); absent where
    /// the refusal gives no hint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_s: Option<f64>,
}

impl From<&ApiError> for ErrorBody {
    fn from(e: &ApiError) -> Self {
        ErrorBody {
            error: e.kind().to_string(),
            message: e.to_string(),
            retry_after_s: e.retry_after_s(),
        }
    }
}

impl ErrorBody {
    /// The refusal this body answers, as a client reads it back: the kind
    /// and the retry hint round-trip exactly; a text payload (the device,
    /// the field, the reason) is the body's `message`, a number the body
    /// does not carry reads 0. `None` for a kind this version does not know.
    pub fn to_error(&self) -> Option<ApiError> {
        let m = || self.message.clone();
        let wait = self.retry_after_s.unwrap_or(0.0);
        Some(match self.error.as_str() {
            "malformed" => ApiError::Malformed(m()),
            "unknown_field" => ApiError::UnknownField(m()),
            "too_large" => ApiError::TooLarge(0),
            "unsupported_media_type" => ApiError::UnsupportedMediaType(m()),
            "method_not_allowed" => ApiError::MethodNotAllowed(m()),
            "bad_value" => ApiError::bad("", m()),
            "unauthorized" => ApiError::Unauthorized(m()),
            "forbidden" => ApiError::Forbidden(m(), String::new()),
            "unknown_archetype" => ApiError::UnknownArchetype(m()),
            "unknown_device" => ApiError::UnknownDevice(m()),
            "unknown_lease" => ApiError::UnknownLease,
            "lease_expired" => ApiError::LeaseExpired(0.0),
            "unknown_item" => ApiError::UnknownItem,
            "replayed" => ApiError::Replayed,
            "rate_limited" => ApiError::RateLimited(wait),
            "registration_limited" => ApiError::RegistrationLimited(m(), wait),
            "discovery_limited" => ApiError::DiscoveryLimited(0),
            "store_unavailable" => ApiError::Store(m()),
            "overloaded" => ApiError::Overloaded(0, wait),
            "no_leader" => ApiError::NoLeader(m(), wait),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every refusal with its kind and status, as docs/router.md ("Bad
    /// input") lists them: one row per variant, kinds distinct.
    #[test]
    fn every_refusal_has_its_kind_and_status() {
        let rows: Vec<(ApiError, &str, u16)> = vec![
            (ApiError::Malformed("x".into()), "malformed", 400),
            (ApiError::UnknownField("x".into()), "unknown_field", 400),
            (
                ApiError::UnsupportedMediaType("text/plain".into()),
                "unsupported_media_type",
                415,
            ),
            (
                ApiError::MethodNotAllowed("POST".into()),
                "method_not_allowed",
                405,
            ),
            (ApiError::TooLarge(1), "too_large", 413),
            (ApiError::bad("f", "r"), "bad_value", 422),
            (ApiError::Unauthorized("x".into()), "unauthorized", 401),
            (
                ApiError::Forbidden("d".into(), "revoked".into()),
                "forbidden",
                403,
            ),
            (
                ApiError::UnknownArchetype("x".into()),
                "unknown_archetype",
                422,
            ),
            (ApiError::UnknownDevice("d".into()), "unknown_device", 404),
            (ApiError::UnknownLease, "unknown_lease", 404),
            (ApiError::LeaseExpired(1.0), "lease_expired", 410),
            (ApiError::UnknownItem, "unknown_item", 404),
            (ApiError::Replayed, "replayed", 409),
            (ApiError::RateLimited(0.123_456_789), "rate_limited", 429),
            (
                ApiError::RegistrationLimited("source address".into(), 1.0),
                "registration_limited",
                429,
            ),
            (ApiError::DiscoveryLimited(3), "discovery_limited", 429),
            (ApiError::Store("x".into()), "store_unavailable", 503),
            (ApiError::Overloaded(4096, 1.0), "overloaded", 503),
            (ApiError::NoLeader("x".into(), 1.0), "no_leader", 503),
        ];
        let mut kinds = std::collections::BTreeSet::new();
        for (e, kind, status) in &rows {
            assert_eq!((e.kind(), e.status()), (*kind, *status), "{e:?}");
            assert!(kinds.insert(*kind), "{kind} twice");
            let body = ErrorBody::from(e);
            assert_eq!(body.error, *kind);
            assert!(!body.message.is_empty());
            // A client reads the kind and the exact hint back.
            let wire: ErrorBody =
                serde_json::from_str(&serde_json::to_string(&body).unwrap()).unwrap();
            let back = wire.to_error().expect("a known kind");
            assert_eq!(back.kind(), *kind);
            assert_eq!(back.retry_after_s(), e.retry_after_s(), "{e:?}");
        }
        // A new variant must get a row: this match fails to compile without one.
        for (e, _, _) in &rows {
            match e {
                ApiError::Malformed(_)
                | ApiError::UnknownField(_)
                | ApiError::UnsupportedMediaType(_)
                | ApiError::MethodNotAllowed(_)
                | ApiError::TooLarge(_)
                | ApiError::BadValue { .. }
                | ApiError::Unauthorized(_)
                | ApiError::Forbidden(..)
                | ApiError::UnknownArchetype(_)
                | ApiError::UnknownDevice(_)
                | ApiError::UnknownLease
                | ApiError::LeaseExpired(_)
                | ApiError::UnknownItem
                | ApiError::Replayed
                | ApiError::RateLimited(_)
                | ApiError::RegistrationLimited(..)
                | ApiError::DiscoveryLimited(_)
                | ApiError::Store(_)
                | ApiError::Overloaded(..)
                | ApiError::NoLeader(..) => {}
            }
        }
        assert_eq!(rows.len(), 20);
        let unknown = ErrorBody {
            error: "from_a_later_version".into(),
            message: "x".into(),
            retry_after_s: None,
        };
        assert_eq!(unknown.to_error(), None);
        retry_after_only_where_the_refusal_knows(&rows);
    }

    /// Retry-After where the refusal knows when to come back.
    fn retry_after_only_where_the_refusal_knows(rows: &[(ApiError, &str, u16)]) {
        for (e, kind, _) in rows {
            let hinted = [
                "rate_limited",
                "registration_limited",
                "overloaded",
                "no_leader",
            ]
            .contains(kind);
            assert_eq!(e.retry_after_s().is_some(), hinted, "{e:?}");
        }
    }
}
