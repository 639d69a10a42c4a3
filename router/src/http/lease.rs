//! The lease path of the HTTP shell: a lease is prepared under the
//! router's lock ([`crate::Router::lease_prepare`]); when it holds items,
//! its row goes to the store writer ([`super::writer`]) and the answer
//! waits until the row is durable, so a lease a device was told about
//! outlives a kill of the process (docs/router.md "Durability and
//! restart"). An empty answer keeps no lease and writes nothing.

use std::sync::Arc;

use axum::response::Response;

use super::writer::WriterJob;
use super::{error, ok, Shell};
use crate::api::{ApiError, LeaseRequest, LeaseResponse};

/// One lease try at the clock's now, answered once its lease is durable.
/// Errors: the core's ([`crate::Router::lease`]); `store` when the
/// lease's row could not be written (the lease is undone).
pub(super) async fn lease_once(
    shell: &Arc<Shell>,
    req: Arc<LeaseRequest>,
) -> Result<LeaseResponse, ApiError> {
    let joined = super::on_router::with_router(shell, move |s, core, now| {
        let out = core.lease_prepare(&req, now).map(|p| {
            let written = p.row.map(|row| {
                let (tx, rx) = tokio::sync::oneshot::channel();
                let id = row.key.clone();
                if s.writer.lock().send(WriterJob::Lease(row, tx)).is_err() {
                    core.lease_abort(&id);
                    return Err(ApiError::Store("the store writer stopped".into()));
                }
                Ok(rx)
            });
            (p.response, written)
        });
        (out, core.drain_events())
    })
    .await;
    let (out, events) = joined?;
    shell.write_events(events);
    let (response, written) = out?;
    match written {
        None => Ok(response),
        Some(Err(e)) => Err(e),
        Some(Ok(rx)) => match rx.await {
            Ok(Ok(())) => Ok(response),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ApiError::Store("the store writer stopped".into())),
        },
    }
}

/// `POST /v1/lease` without a wait: one try.
pub(super) async fn lease_now(shell: Arc<Shell>, req: LeaseRequest) -> Response {
    match lease_once(&shell, Arc::new(req)).await {
        Ok(resp) => ok(resp),
        Err(e) => error(&e),
    }
}
