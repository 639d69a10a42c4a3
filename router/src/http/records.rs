//! `GET /v1/device?id=…`, `GET /v1/target?name=…` and `GET
//! /v1/settled?after=…&limit=…` (operator key): one device's or one
//! target's record ([`crate::core::DeviceView`],
//! [`crate::core::TargetView`]), and the settled rows a page at a time
//! ([`crate::core::SettledPage`], `limit` default and most
//! [`crate::core::SETTLED_PAGE_MAX`]). An unknown id or name answers 404
//! `not_found`; a query with a missing, unknown or malformed parameter
//! answers 400 `malformed` or `unknown_field`, counted as refusals like
//! any other.

use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::{error, ok, operator, Shell};
use crate::api::{ApiError, ErrorBody};
use crate::core::{settled_page, SETTLED_PAGE_MAX};

/// The query of `GET /v1/device`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DeviceQuery {
    id: String,
}

/// The query of `GET /v1/settled`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SettledQuery {
    after: Option<String>,
    limit: Option<usize>,
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

/// The query of an operator read: the key checked, the query parsed, or
/// the refusal to answer with.
#[allow(clippy::result_large_err)] // the refusal is the handler's whole answer
fn admitted<Q>(
    shell: &Shell,
    headers: &HeaderMap,
    q: Result<Query<Q>, QueryRejection>,
) -> Result<Q, Response> {
    operator(shell, headers)?;
    q.map(|Query(q)| q).map_err(|r| refused(shell, r))
}

pub(super) async fn device(
    State(s): State<Arc<Shell>>,
    headers: HeaderMap,
    q: Result<Query<DeviceQuery>, QueryRejection>,
) -> Response {
    let q = match admitted(&s, &headers, q) {
        Ok(q) => q,
        Err(r) => return r,
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
    let q = match admitted(&s, &headers, q) {
        Ok(q) => q,
        Err(r) => return r,
    };
    let view = s.router.lock().target_view(&q.name);
    match view {
        Some(v) => ok(v),
        None => absent("target", &q.name),
    }
}

pub(super) async fn settled(
    State(s): State<Arc<Shell>>,
    headers: HeaderMap,
    q: Result<Query<SettledQuery>, QueryRejection>,
) -> Response {
    let q = match admitted(&s, &headers, q) {
        Ok(q) => q,
        Err(r) => return r,
    };
    let targets = s.router.lock().targets_table();
    let limit = q.limit.unwrap_or(SETTLED_PAGE_MAX);
    let page =
        tokio::task::spawn_blocking(move || settled_page(&targets, q.after.as_deref(), limit))
            .await;
    match page {
        Ok(p) => ok(p),
        Err(_) => error(&ApiError::Store("the request's worker failed".into())),
    }
}
