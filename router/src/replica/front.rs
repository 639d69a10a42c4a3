//! The HTTP front every replica serves: a request is served by the router
//! when this replica leads, forwarded to the leader when another one does
//! (with the device's address and the forwarding key), and answered 503
//! `no_leader` with `Retry-After` when none does. A forwarded request that
//! reaches a replica which no longer leads is refused, never forwarded
//! again. `GET /v1/replica` answers what the called replica knows.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Uri};
use axum::response::Response;
use axum::routing::get;
use tower_service::Service;

use super::{
    Replica, Role, CLIENT_HEADER, ENTRY_HEADER, FORWARD_BOUND_S, FORWARD_KEY_HEADER, REPLICA_HEADER,
};
use crate::api::ApiError;
use crate::http::listener::Peer;

/// The front's application.
pub fn front(replica: Arc<Replica>) -> axum::Router {
    axum::Router::new()
        .route("/v1/replica", get(status))
        .fallback(serve)
        .with_state(replica)
}

async fn status(State(r): State<Arc<Replica>>) -> Response {
    use axum::response::IntoResponse;
    name(axum::Json(r.status()).into_response(), r.name())
}

/// Whether `headers` carry this cluster's forwarding key.
fn forwarded(r: &Replica, headers: &HeaderMap) -> bool {
    headers
        .get(FORWARD_KEY_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|k| crate::ids::same(k, &r.cfg.forward_key))
}

async fn serve(
    State(r): State<Arc<Replica>>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    mut req: Request,
) -> Response {
    let is_forwarded = forwarded(&r, req.headers());
    // The device's address: the socket's, or the one a replica vouches for.
    let client = match is_forwarded {
        true => req
            .headers()
            .get(CLIENT_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<SocketAddr>().ok())
            .unwrap_or(peer.0),
        false => peer.0,
    };
    // A device's own copies of these headers are never believed or passed on.
    req.headers_mut().remove(FORWARD_KEY_HEADER);
    req.headers_mut().remove(CLIENT_HEADER);
    match r.role() {
        Role::Leading { app, until, .. } if Instant::now() < until => {
            req.extensions_mut().insert(ConnectInfo(Peer(client)));
            let mut app = app;
            let resp = match app.call(req).await {
                Ok(resp) => resp,
                Err(never) => match never {},
            };
            name(resp, r.name())
        }
        _ if is_forwarded => refuse(
            &r,
            "this replica does not lead (a forwarded request is never forwarded again)".into(),
        ),
        Role::Following { url, leader, .. } => forward(&r, &url, &leader, req, client).await,
        Role::Leading { .. } => refuse(&r, "this replica's lead lapsed before a renewal".into()),
        Role::Unknown(why) => refuse(&r, why),
    }
}

fn name(mut resp: Response, replica: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(replica) {
        resp.headers_mut().insert(REPLICA_HEADER, v);
    }
    resp
}

fn refuse(r: &Replica, why: String) -> Response {
    name(
        crate::http::error(&ApiError::NoLeader(why, r.retry_s())),
        r.name(),
    )
}

/// Sends `req` to the leader at `url` and passes its answer back, with
/// [`ENTRY_HEADER`] naming this replica. An unreachable leader, or one
/// that does not answer within [`FORWARD_BOUND_S`], is `no_leader`.
async fn forward(
    r: &Replica,
    url: &str,
    leader: &str,
    mut req: Request,
    client: SocketAddr,
) -> Response {
    let pq = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let Ok(uri) = format!("{}{pq}", url.trim_end_matches('/')).parse::<Uri>() else {
        return refuse(r, format!("the leader {leader} advertises an unusable URL"));
    };
    *req.uri_mut() = uri;
    let h = req.headers_mut();
    h.remove(axum::http::header::HOST);
    if let Ok(v) = HeaderValue::from_str(&r.cfg.forward_key) {
        h.insert(FORWARD_KEY_HEADER, v);
    }
    if let Ok(v) = HeaderValue::from_str(&client.to_string()) {
        h.insert(CLIENT_HEADER, v);
    }
    let bound = Duration::from_secs_f64(FORWARD_BOUND_S);
    match tokio::time::timeout(bound, r.client.request(req)).await {
        Ok(Ok(resp)) => {
            let mut resp = resp.map(Body::new);
            if let Ok(v) = HeaderValue::from_str(r.name()) {
                resp.headers_mut().insert(ENTRY_HEADER, v);
            }
            resp
        }
        Ok(Err(e)) => refuse(r, format!("the leader {leader} cannot be reached: {e}")),
        Err(_) => refuse(
            r,
            format!("the leader {leader} did not answer within {FORWARD_BOUND_S} s"),
        ),
    }
}
