//! The deposit path of the HTTP shell: a deposit is prepared under the
//! router's lock, queued for the writer thread within the queue's cap
//! (past it: 503 `overloaded` with `Retry-After`, nothing kept), appended
//! to the store in batches, then committed in sequence order and answered
//! (docs/router.md "Durability and restart", "Threat model").

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::Response;

use super::{error, ok, parsed, Shell};
use crate::api::ApiError;

/// A prepared deposit on its way to the writer, with where to answer.
pub(super) type WriterJob = (
    crate::core::PreparedDeposit,
    tokio::sync::oneshot::Sender<Result<crate::api::DepositResponse, ApiError>>,
);

/// Most deposits appended in one batch by the writer.
pub const WRITER_BATCH: usize = 256;

/// Seconds a deposit refused at the queue's cap is told to wait
/// ([`ApiError::Overloaded`]): a few of the writer's batches.
pub const OVERLOADED_RETRY_S: f64 = 1.0;

/// The deposit writer: appends prepared deposits in batches (one flush per
/// batch where the store supports it) holding only the store, then commits
/// them in sequence order under the router's lock and answers each handler.
pub(super) fn writer(shell: std::sync::Weak<Shell>, rx: std::sync::mpsc::Receiver<WriterJob>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < WRITER_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let Some(shell) = shell.upgrade() else {
            return;
        };
        let entries: Vec<crate::store::DepositEntry> =
            batch.iter().map(|(p, _)| p.entry.clone()).collect();
        let results = shell.store.lock().append_deposits(&entries);
        let events = {
            let mut r = shell.router.lock();
            for ((p, reply), res) in batch.into_iter().zip(results) {
                let answer = match res {
                    Ok(true) => Ok(r.deposit_commit(p)),
                    Ok(false) => {
                        r.deposit_abort(&p);
                        Err(ApiError::Replayed)
                    }
                    Err(e) => {
                        r.deposit_abort(&p);
                        Err(ApiError::Store(e.to_string()))
                    }
                };
                if let Err(e) = &answer {
                    r.refused(e);
                }
                let _ = reply.send(answer);
                shell
                    .pending
                    .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            }
            r.drain_events()
        };
        shell.write_events(events);
    }
}

pub(super) async fn deposit(State(s): State<Arc<Shell>>, req: Request) -> Response {
    let body = match parsed::<crate::api::DepositRequest>(&s, req).await {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let shell = s.clone();
    let queued = tokio::task::spawn_blocking(move || {
        let now = (shell.clock)();
        let mut r = shell.router.lock();
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
        if shell.writer.lock().send((p.clone(), tx)).is_err() {
            shell.pending.fetch_sub(1, Relaxed);
            r.deposit_abort(&p);
            return Err(ApiError::Store("the deposit writer stopped".into()));
        }
        Ok(None)
    })
    .await;
    match queued {
        Ok(Ok(Some(answer))) => ok(answer),
        Ok(Ok(None)) => match rx.await {
            Ok(Ok(resp)) => ok(resp),
            Ok(Err(e)) => error(&e),
            Err(_) => error(&ApiError::Store("the deposit writer stopped".into())),
        },
        Ok(Err(e)) => error(&e),
        Err(_) => error(&ApiError::Store("the request's worker failed".into())),
    }
}
