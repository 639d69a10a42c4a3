//! `GET /metrics`: the core's counters and gauges (Prometheus text,
//! version 0.0.4), the deposit queue's fill, the longest waits for and
//! holds of the store (`holds.rs`), the registrar's writes, and, on a replica, the term
//! of the lead it answers under.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::Shell;

pub(super) async fn metrics(State(s): State<Arc<Shell>>) -> Response {
    let mut text = s.router.lock().metrics_text();
    let pending = s.pending.load(std::sync::atomic::Ordering::Relaxed);
    text.push_str(&format!(
        "# HELP router_deposits_pending Deposits accepted and not yet answered (waiting for or in the store); at router_deposit_queue_cap a deposit is refused (503 overloaded).\n# TYPE router_deposits_pending gauge\nrouter_deposits_pending {pending}\n# HELP router_deposit_queue_cap Most deposits pending at once (--deposit-queue).\n# TYPE router_deposit_queue_cap gauge\nrouter_deposit_queue_cap {}\n",
        s.deposit_queue
    ));
    text.push_str(&format!(
        "# HELP router_held_polls Long polls held now; at router_held_polls_cap a long poll is answered at once, empty.\n# TYPE router_held_polls gauge\nrouter_held_polls {}\n# HELP router_held_polls_cap Most long polls held at once (--max-held-polls).\n# TYPE router_held_polls_cap gauge\nrouter_held_polls_cap {}\n# HELP router_held_polls_refused_total Long polls answered at once because the cap was reached.\n# TYPE router_held_polls_refused_total counter\nrouter_held_polls_refused_total {}\n",
        s.held.load(std::sync::atomic::Ordering::Relaxed),
        s.held_cap,
        s.held_refused.load(std::sync::atomic::Ordering::Relaxed)
    ));
    text.push_str(&format!(
        "# HELP router_registration_writes_total Durable writes of new identities' rows, one for every identity waiting when the registrar wrote.\n# TYPE router_registration_writes_total counter\nrouter_registration_writes_total {}\n",
        s.registration_writes.load(std::sync::atomic::Ordering::Relaxed)
    ));
    text.push_str(&format!(
        "# HELP router_lock_waits_total Leases and deposits that found the router's lock held and waited for it on the blocking pool.\n# TYPE router_lock_waits_total counter\nrouter_lock_waits_total {}\n",
        s.lock_waits()
    ));
    if let Some(c) = s.connections.get() {
        text.push_str(&format!(
            "# HELP router_connections_open Connections open now.\n# TYPE router_connections_open gauge\nrouter_connections_open {}\n# HELP router_connections_cap Most connections accepted now: --max-connections, or fewer where only fewer fit under the memory limit (--memory-limit-mib).\n# TYPE router_connections_cap gauge\nrouter_connections_cap {}\n",
            c.open(),
            c.cap()
        ));
    }
    text.push_str(&s.holds.metrics_text());
    if let Some(r) = s.replica.lock().as_ref() {
        text.push_str(&format!(
            "# HELP router_replica_term The term of the lead this replica answers under.\n# TYPE router_replica_term gauge\nrouter_replica_term{{replica=\"{}\"}} {}\n",
            r.name, r.term
        ));
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        Body::from(text),
    )
        .into_response()
}
