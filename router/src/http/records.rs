//! `GET /v1/device?id=…` and `GET /v1/target?name=…` (operator key): one
//! device's or one target's record ([`crate::core::DeviceView`],
//! [`crate::core::TargetView`]). An unknown id or name answers 404
//! `not_found`; a query that is not exactly the one parameter answers 400
//! `malformed` or `unknown_field`, counted as refusals like any other.

use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::{error, ok, operator, Shell};
use crate::api::{ApiError, ErrorBody};

/// The query of `GET /v1/device`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DeviceQuery {
    id: String,
}

/// The query of `GET /v1/target`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TargetQuery {
    name: String,
}

fn absent(what: &str, name: &str) -> Response {
    let body = ErrorBody {
        error: "not_found".into(),
        message: format!("no {what} `{name}` is known"),
        retry_after_s: None,
    };
    (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}

/// Refuses a query that does not parse, counted.
fn refused(shell: &Shell, r: QueryRejection) -> Response {
    let text = r.body_text();
    let e = if text.contains("unknown field") {
        ApiError::UnknownField(text)
    } else {
        ApiError::Malformed(text)
    };
    shell.router.lock().refused(&e);
    error(&e)
}

pub(super) async fn device(
    State(s): State<Arc<Shell>>,
    headers: HeaderMap,
    q: Result<Query<DeviceQuery>, QueryRejection>,
) -> Response {
    if let Err(r) = operator(&s, &headers) {
        return r;
    }
    let q = match q {
        Ok(Query(q)) => q,
        Err(r) => return refused(&s, r),
    };
    let view = s.router.lock().device_view(&q.id);
    match view {
        Some(v) => ok(v),
        None => absent("device", &q.id),
    }
}

pub(super) async fn target(
    State(s): State<Arc<Shell>>,
    headers: HeaderMap,
    q: Result<Query<TargetQuery>, QueryRejection>,
) -> Response {
    if let Err(r) = operator(&s, &headers) {
        return r;
    }
    let q = match q {
        Ok(Query(q)) => q,
        Err(r) => return refused(&s, r),
    };
    let view = s.router.lock().target_view(&q.name);
    match view {
        Some(v) => ok(v),
        None => absent("target", &q.name),
    }
}
