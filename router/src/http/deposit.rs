//! The deposit path of the HTTP shell: a deposit is prepared under the
//! router's lock, queued for the writer thread ([`super::writer`]) within
//! the queue's cap (past it: 503 `overloaded` with `Retry-After`, nothing
//! kept), appended to the store in batches, then committed in sequence
//! order and answered (docs/router.md "Durability and restart", "Threat
//! model").

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::Response;

use super::writer::{WriterJob, OVERLOADED_RETRY_S};
use super::{error, ok, parsed, Shell};
use crate::api::ApiError;

pub(super) async fn deposit(State(s): State<Arc<Shell>>, req: Request) -> Response {
    let body = match parsed::<crate::api::DepositRequest>(&s, req).await {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let token = body.deposit_token.clone();
    let queued = super::on_router::with_router(&s, move |shell, r, now| {
        let p = match r.deposit_prepare(&body, now)? {
            crate::core::Prepared::Acknowledged(answer) => return Ok(Some(answer)),
            crate::core::Prepared::Fresh(p) => p,
        };
        // Back-pressure: at the cap nothing of this deposit is kept.
        use std::sync::atomic::Ordering::Relaxed;
        if shell.pending.load(Relaxed) >= shell.deposit_queue {
            r.deposit_abort(&p);
            let e = ApiError::Overloaded(shell.deposit_queue, OVERLOADED_RETRY_S);
            r.refused(&e);
            return Err(e);
        }
        // Sent under the router's lock: the writer sees sequence order.
        shell.pending.fetch_add(1, Relaxed);
        if shell
            .writer
            .lock()
            .send(WriterJob::Deposit(p.clone(), tx))
            .is_err()
        {
            shell.pending.fetch_sub(1, Relaxed);
            r.deposit_abort(&p);
            return Err(ApiError::Store("the store writer stopped".into()));
        }
        Ok(None)
    })
    .await;
    match queued {
        Ok(Ok(Some(answer))) => ok(answer),
        Ok(Ok(None)) => match rx.await {
            Ok(Ok(resp)) => ok(resp),
            Ok(Err(e)) => error(&e),
            Err(_) => error(&ApiError::Store("the store writer stopped".into())),
        },
        Ok(Err(ApiError::UnknownLease)) => error(&logged_or_unknown(&s, token).await),
        Ok(Err(e)) | Err(e) => error(&e),
    }
}

/// The answer to a deposit on a lease the router no longer holds (it
/// ended, and a restart or the acknowledgements' memory forgot it): a
/// token already in the deposit log is `replayed`, so a device retrying
/// after a lost answer learns its deposit is in; any other is
/// `unknown_lease`. The log is read outside the router's lock.
async fn logged_or_unknown(s: &Arc<Shell>, token: String) -> ApiError {
    let store = s.store.clone();
    let logged = tokio::task::spawn_blocking(move || store.lock().has_deposit(&token)).await;
    match logged {
        Ok(Ok(true)) => ApiError::Replayed,
        _ => ApiError::UnknownLease,
    }
}
