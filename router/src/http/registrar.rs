//! The registrar of the HTTP shell: one thread that writes new
//! identities' rows in groups. A registration of a new identity is checked
//! and reserved under the router's lock ([`crate::Router::register_prepare`]),
//! queued here, and answered only once its row is durable; every
//! identity queued meanwhile shares one atomic write, so one durable
//! commit answers them all ([`crate::Router::write_identities`]), then
//! each is committed under the router's lock
//! ([`crate::Router::register_commit`]). A known identity resuming writes
//! nothing and never queues (docs/router.md "Durability and restart").
//!
//! The rows go through the store's shared handle, not the store writer's:
//! on SQLite the devices' table lives in the main file, where a snapshot's
//! write holds the lock for seconds, and the store writer's leases and
//! deposits must not wait behind it.

use std::sync::Arc;

use axum::response::Response;

use crate::api::{ApiError, RegisterRequest, RegisterResponse};
use crate::core::{NewIdentity, Registration};
use crate::Router;

use super::holds::Op;
use super::writer::next_batch;
use super::{error, ok, Shell};

/// Where a registration's answer goes.
type Reply = tokio::sync::oneshot::Sender<Result<RegisterResponse, ApiError>>;

/// One new identity waiting for its durable write, and its handler.
pub(super) type Job = (NewIdentity, Reply);

/// Starts the registrar thread.
pub(super) fn spawn(shell: &Arc<Shell>, rx: std::sync::mpsc::Receiver<Job>) -> std::io::Result<()> {
    let weak = Arc::downgrade(shell);
    std::thread::Builder::new()
        .name("registrar".into())
        .spawn(move || registrar(weak, rx))?;
    Ok(())
}

/// The registrar: per batch (every job queued, at most
/// [`WRITER_BATCH`](super::writer::WRITER_BATCH)),
/// one write of every row, then each identity committed, or released on
/// a failed write, under the router's lock, and every handler answered
/// once the lock is released.
fn registrar(shell: std::sync::Weak<Shell>, rx: std::sync::mpsc::Receiver<Job>) {
    while let Some(batch) = next_batch(&rx) {
        let Some(shell) = shell.upgrade() else {
            return;
        };
        let identities: Vec<&NewIdentity> = batch.iter().map(|(n, _)| n).collect();
        let written = shell.holds.with(Op::Registrations, &shell.store, |s| {
            Router::write_identities(s, &identities)
        });
        shell
            .registration_writes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Committed under the lock, answered after it is released: a
        // handler woken by its answer finds the lock free.
        let (answers, events) = {
            let mut r = shell.router.lock();
            let answers: Vec<_> = batch
                .into_iter()
                .map(|(n, reply)| (reply, r.register_commit(n, written.clone())))
                .collect();
            (answers, r.drain_events())
        };
        for (reply, answer) in answers {
            let _ = reply.send(answer);
        }
        shell.write_events(events);
    }
}

/// `POST /v1/register`, parsed: a known identity is answered at once; a
/// new one once its row is durable (written by the registrar with the
/// others queued meanwhile). `source` is the peer's address, where the
/// server knows it ([`Router::register_from`]). Errors: the core's, and
/// `store` where the row could not be written (nothing of the identity
/// is kept).
pub(super) async fn register(
    shell: Arc<Shell>,
    req: RegisterRequest,
    source: Option<String>,
) -> Response {
    let s = shell.clone();
    let joined = tokio::task::spawn_blocking(move || {
        let now = (s.clock)();
        let mut core = s.router.lock();
        let out = core
            .register_prepare(&req, now, source.as_deref())
            .and_then(|p| match p {
                Registration::Done(resp) => Ok(Pending::Done(resp)),
                Registration::New(n) => {
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    match s.registrar.lock().send((n, tx)) {
                        Ok(()) => Ok(Pending::Queued(rx)),
                        Err(std::sync::mpsc::SendError((n, _))) => {
                            core.register_commit(n, Err(stopped())).map(Pending::Done)
                        }
                    }
                }
            });
        (out, core.drain_events())
    })
    .await;
    let (out, events) = match joined {
        Ok(v) => v,
        Err(_) => return error(&ApiError::Store("the request's worker failed".into())),
    };
    shell.write_events(events);
    let answer = match out {
        Ok(Pending::Done(resp)) => Ok(resp),
        Ok(Pending::Queued(rx)) => rx.await.unwrap_or_else(|_| Err(stopped())),
        Err(e) => Err(e),
    };
    match answer {
        Ok(resp) => ok(resp),
        Err(e) => error(&e),
    }
}

/// A registration checked: answered, or queued for the registrar.
enum Pending {
    Done(RegisterResponse),
    Queued(tokio::sync::oneshot::Receiver<Result<RegisterResponse, ApiError>>),
}

/// The error of a registration the registrar can no longer take.
fn stopped() -> ApiError {
    ApiError::Store("the registrar stopped".into())
}
