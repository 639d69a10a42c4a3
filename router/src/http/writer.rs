//! The store writer of the HTTP shell: one thread that takes what must be
//! durable before it is answered (leases' rows and deposits), writes each
//! batch with one flush per kind where the store supports it, holding only
//! the store, then settles the batch under the router's lock and answers
//! each handler (docs/router.md "Durability and restart").

use crate::api::{ApiError, DepositResponse};
use crate::core::{PreparedDeposit, SharedStore};
use crate::store::{Row, Table};

use super::holds::Op;
use super::Shell;

/// Where a writer job's answer goes.
type Reply<T> = tokio::sync::oneshot::Sender<Result<T, ApiError>>;

/// One write the writer makes durable before its handler answers.
pub(super) enum WriterJob {
    /// A prepared deposit, in sequence order.
    Deposit(PreparedDeposit, Reply<DepositResponse>),
    /// A prepared lease's row ([`crate::Router::lease_prepare`]); its key
    /// is the lease id.
    Lease(Row, Reply<()>),
}

/// Most jobs written in one batch by the writer.
pub const WRITER_BATCH: usize = 256;

/// Seconds a deposit refused at the queue's cap is told to wait
/// ([`ApiError::Overloaded`]): a few of the writer's batches.
pub const OVERLOADED_RETRY_S: f64 = 1.0;

/// Starts the writer thread. Its group commits go through a store handle
/// of their own where the store has a pool (PostgreSQL), so a snapshot
/// write or a lookup on the shared handle never holds them up.
pub(super) fn spawn(
    shell: &std::sync::Arc<Shell>,
    rx: std::sync::mpsc::Receiver<WriterJob>,
) -> std::io::Result<()> {
    let store = shell
        .store
        .lock()
        .concurrent_handle()
        .map(|h| std::sync::Arc::new(parking_lot::Mutex::new(h)))
        .unwrap_or_else(|| shell.store.clone());
    let weak = std::sync::Arc::downgrade(shell);
    std::thread::Builder::new()
        .name("store-writer".into())
        .spawn(move || writer(weak, rx, store))?;
    Ok(())
}

/// The writer: per batch, upserts the leases' rows in one call and
/// appends the deposits in one call, then, under the router's lock, undoes
/// the leases whose write failed and commits or aborts each deposit in
/// sequence order, and answers every handler.
fn writer(
    shell: std::sync::Weak<Shell>,
    rx: std::sync::mpsc::Receiver<WriterJob>,
    store: SharedStore,
) {
    while let Some(batch) = next_batch(&rx) {
        let Some(shell) = shell.upgrade() else {
            return;
        };
        let mut leases = Vec::new();
        let mut deposits = Vec::new();
        for job in batch {
            match job {
                WriterJob::Lease(row, reply) => leases.push((row, reply)),
                WriterJob::Deposit(p, reply) => deposits.push((p, reply)),
            }
        }
        write_leases(&shell, &store, leases);
        write_deposits(&shell, &store, deposits);
    }
}

/// The next batch of a writer thread's queue: the first job waited for,
/// then every job already queued, at most [`WRITER_BATCH`]; `None` once
/// every sender is gone.
pub(super) fn next_batch<T>(rx: &std::sync::mpsc::Receiver<T>) -> Option<Vec<T>> {
    let mut batch = vec![rx.recv().ok()?];
    while batch.len() < WRITER_BATCH {
        match rx.try_recv() {
            Ok(job) => batch.push(job),
            Err(_) => break,
        }
    }
    Some(batch)
}

/// Upserts the leases' rows at once; on failure every lease of the batch
/// is undone and its handler told `store`.
fn write_leases(shell: &Shell, store: &SharedStore, leases: Vec<(Row, Reply<()>)>) {
    if leases.is_empty() {
        return;
    }
    let rows: Vec<Row> = leases.iter().map(|(r, _)| r.clone()).collect();
    let written = shell
        .holds
        .with(Op::Leases, store, |s| s.upsert(Table::Leases, &rows));
    match written {
        Ok(()) => {
            for (_, reply) in leases {
                let _ = reply.send(Ok(()));
            }
        }
        Err(e) => {
            let e = ApiError::Store(e.to_string());
            let mut r = shell.router.lock();
            for (row, reply) in leases {
                r.lease_abort(&row.key);
                r.refused(&e);
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}

/// Appends the deposits at once (one flush where the store supports it),
/// then commits them in sequence order under the router's lock and
/// answers them once it is released.
fn write_deposits(
    shell: &Shell,
    store: &SharedStore,
    batch: Vec<(PreparedDeposit, Reply<DepositResponse>)>,
) {
    if batch.is_empty() {
        return;
    }
    let entries: Vec<crate::store::DepositEntry> =
        batch.iter().map(|(p, _)| p.entry.clone()).collect();
    let results = shell
        .holds
        .with(Op::Deposits, store, |s| s.append_deposits(&entries));
    // Committed under the lock, answered after it is released (a handler
    // woken by its answer finds the lock free), each counted off the
    // pending deposits before its answer goes.
    let (answers, events) = {
        let mut r = shell.router.lock();
        let mut answers = Vec::with_capacity(batch.len());
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
            answers.push((reply, answer));
        }
        (answers, r.drain_events())
    };
    for (reply, answer) in answers {
        shell
            .pending
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        let _ = reply.send(answer);
    }
    shell.write_events(events);
}
