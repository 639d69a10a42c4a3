//! The worker thread and its connection pool: one current-thread runtime
//! owns up to `pool_size` connections; each job (one store call) runs as a
//! task of its own on an idle connection, so calls from different handles
//! of one store run concurrently, while a single handle's calls stay in
//! order (each blocks until its reply).
//!
//! A connection whose call timed out, or that the server closed, is
//! dropped instead of returned; the next job that finds no idle connection
//! opens a new one, so the store serves again as soon as the server does.

use std::cell::RefCell;
use std::rc::Rc;

use tokio::sync::Semaphore;
use tokio::task::LocalSet;

use super::conn::open_conn;
use super::*;

/// What the worker needs to open a connection.
pub(super) struct Connector {
    pub cfg: Config,
    pub tls: MakeRustlsConnect,
    pub schema: String,
    pub pool_size: usize,
    pub statement_timeout: Duration,
    pub connect_timeout: Duration,
    pub fence: Option<Fence>,
}

struct Pool {
    connector: Connector,
    quoted: String,
    idle: RefCell<Vec<Conn>>,
    permits: Semaphore,
}

impl Pool {
    /// Opens a connection, bounded by the connect timeout (the TCP connect,
    /// the TLS handshake, authentication and preparing the statements).
    async fn open(&self, migrate: bool) -> Result<Conn, StoreError> {
        let c = &self.connector;
        let ms = u64::try_from(c.statement_timeout.as_millis()).unwrap_or(u64::MAX);
        let opening = open_conn(
            &c.cfg,
            &c.tls,
            ms,
            (&c.schema, &self.quoted),
            c.fence.clone(),
            migrate,
        );
        match tokio::time::timeout(c.connect_timeout, opening).await {
            Ok(r) => r,
            Err(_) => Err(StoreError::Timeout(format!(
                "postgres: no connection within the connect timeout ({} s)",
                c.connect_timeout.as_secs_f64()
            ))),
        }
    }

    /// An idle usable connection, or a new one.
    async fn checkout(&self) -> Result<Conn, StoreError> {
        loop {
            let Some(c) = self.idle.borrow_mut().pop() else {
                break;
            };
            if c.usable() {
                return Ok(c);
            }
        }
        self.open(false).await
    }

    fn checkin(&self, c: Conn) {
        if c.usable() {
            self.idle.borrow_mut().push(c);
        }
    }
}

/// The worker thread: opens (and migrates) the first connection, reports
/// on `ready`, then runs every job on a pooled connection until every
/// handle is gone.
pub(super) fn worker(
    connector: Connector,
    mut jobs: UnboundedReceiver<Job>,
    ready: std::sync::mpsc::SyncSender<Result<(), StoreError>>,
) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(StoreError::Backend(format!(
                "postgres: cannot build the worker runtime: {e}"
            ))));
            return;
        }
    };
    let quoted = format!("\"{}\"", connector.schema);
    let permits = Semaphore::new(connector.pool_size);
    let pool = Rc::new(Pool {
        connector,
        quoted,
        idle: RefCell::new(Vec::new()),
        permits,
    });
    LocalSet::new().block_on(&rt, async move {
        match pool.open(true).await {
            Ok(c) => {
                pool.idle.borrow_mut().push(c);
                let _ = ready.send(Ok(()));
            }
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        }
        while let Some(job) = jobs.recv().await {
            let pool = pool.clone();
            tokio::task::spawn_local(async move {
                let Ok(_permit) = pool.permits.acquire().await else {
                    return;
                };
                match pool.checkout().await {
                    Ok(mut c) => {
                        job(Ok(&mut c)).await;
                        pool.checkin(c);
                    }
                    Err(e) => job(Err(e)).await,
                }
            });
        }
    });
}
