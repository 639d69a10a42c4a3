//! The scale-out [`Store`]: PostgreSQL (or a server speaking its wire
//! protocol) through `tokio-postgres`.
//!
//! The [`Store`] trait blocks, `tokio-postgres` is async: a [`PgStore`]
//! owns one worker thread running a current-thread tokio runtime and the
//! connection; each call sends a job to it and waits on a std channel. So a
//! store works from a plain thread, from `tokio::task::spawn_blocking`, and
//! does not panic even when called from inside an async task (it blocks
//! that task's thread for the call, which the service never does). A call
//! that meets a dropped connection fails with [`StoreError::Backend`]; the
//! next call reconnects (every write is safe to retry).
//!
//! Every write is an idempotent upsert keyed by an id and a version
//! (`INSERT … ON CONFLICT (key) DO UPDATE … WHERE excluded.version >=
//! stored.version`; the deposit log `ON CONFLICT (token) DO NOTHING`), so
//! each row is correct on its own and a retried call is harmless. A batch
//! upsert runs in one transaction where the server has them; nothing needs
//! one for correctness.
//!
//! A call returns after the server has committed (a batch: after
//! `COMMIT`), so an acknowledged deposit is as durable as the server's
//! `synchronous_commit` / `fsync` settings make a commit (durable with the
//! defaults). A batch's statements are pipelined: one round trip per batch.
//!
//! Tables live in one schema (`public` by default): `schema_migrations`,
//! `devices`, `targets`, `meta`, `leases`, `deposits`, the same shape as the SQLite
//! store, with keys and tokens in collation `"C"` so [`Store::load`] sorts
//! by bytes whatever the database's locale.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, GenericClient, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::{
    check_deposit, check_key, check_row, check_writes, fill_failed, DepositEntry, Row, Store,
    StoreError, Table, Write, SCHEMA_VERSION,
};

mod activity;
mod batch;
mod conn;
mod leadership;
mod pipeline;
mod pool;
mod tls;
pub use activity::Activity;
use conn::Conn;
pub use leadership::{Fence, Leadership};
use pool::{worker, Connector};
pub use tls::SslMode;

/// Migrations, in order: `MIGRATIONS[i]` brings the schema to version
/// `i + 1`. `{s}` stands for the quoted schema name.
const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE {s}.devices (
        key TEXT COLLATE \"C\" PRIMARY KEY,
        version BIGINT NOT NULL,
        payload TEXT NOT NULL
    );
    CREATE TABLE {s}.targets (
        key TEXT COLLATE \"C\" PRIMARY KEY,
        version BIGINT NOT NULL,
        payload TEXT NOT NULL
    );
    CREATE TABLE {s}.meta (
        key TEXT COLLATE \"C\" PRIMARY KEY,
        version BIGINT NOT NULL,
        payload TEXT NOT NULL
    );
    CREATE TABLE {s}.deposits (
        seq BIGINT PRIMARY KEY,
        token TEXT COLLATE \"C\" NOT NULL UNIQUE,
        payload TEXT NOT NULL
    );
",
    "
    CREATE TABLE {s}.leases (
        key TEXT COLLATE \"C\" PRIMARY KEY,
        version BIGINT NOT NULL,
        payload TEXT NOT NULL
    );
",
    "
    CREATE TABLE {s}.leadership (
        id INT PRIMARY KEY CHECK (id = 1),
        term BIGINT NOT NULL,
        holder TEXT NOT NULL,
        url TEXT NOT NULL,
        expires_at TIMESTAMPTZ NOT NULL
    );
",
    // Version 4 moved SQLite's deposits and leases into a file of their
    // own; nothing changes here.
    "SELECT 1",
];

/// How a [`PgStore`] connects: its schema, pool, timeouts and CA file.
/// The connection string's own `sslmode` and `sslrootcert` (libpq's keys)
/// choose the TLS mode (module `tls`: `prefer` when absent).
#[derive(Debug, Clone, PartialEq)]
pub struct PgOptions {
    /// The schema holding the tables (`[a-z_][a-z0-9_]{0,62}`; default `public`).
    pub schema: String,
    /// Most connections open at once (1..=64; default 4). Calls from one
    /// handle run in order; handles from [`Store::concurrent_handle`] run
    /// side by side, one connection each.
    pub pool_size: usize,
    /// Longest a call may take, from the moment it has a connection: the
    /// server's `statement_timeout` and the client's own bound (a stalled
    /// network). Past it the call fails with [`StoreError::Timeout`] and
    /// its connection is dropped. (0, 1 h]; default 30 s.
    pub statement_timeout: Duration,
    /// Longest a connect may take (TCP, TLS, authentication, preparing the
    /// statements); past it [`StoreError::Timeout`]. (0, 1 h]; default
    /// 10 s, or the string's `connect_timeout` when it sets one.
    pub connect_timeout: Duration,
    /// CA certificates (PEM) for `verify-ca` / `verify-full`; overrides the
    /// string's `sslrootcert`.
    pub ca_file: Option<PathBuf>,
    /// A replica's lead: with one, every write runs in a transaction that
    /// first checks (and share-locks) the lead row for this term and
    /// holder, unexpired on the server's clock, and fails with
    /// [`StoreError::Fenced`] when it is not (default `None`: unfenced).
    pub fence: Option<Fence>,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            schema: "public".into(),
            pool_size: 4,
            statement_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            ca_file: None,
            fence: None,
        }
    }
}

impl PgOptions {
    /// Checks every field's range.
    ///
    /// Errors: [`StoreError::Backend`] naming the field and its range.
    pub fn check(&self) -> Result<(), StoreError> {
        check_schema(&self.schema)?;
        if !(1..=64).contains(&self.pool_size) {
            return Err(StoreError::Backend(format!(
                "postgres: pool size must be in 1..=64, got {}",
                self.pool_size
            )));
        }
        let hour = Duration::from_secs(3600);
        for (what, d) in [
            ("statement timeout", self.statement_timeout),
            ("connect timeout", self.connect_timeout),
        ] {
            if d.is_zero() || d > hour {
                return Err(StoreError::Backend(format!(
                    "postgres: {what} must be in (0, 3600] s, got {} s",
                    d.as_secs_f64()
                )));
            }
        }
        Ok(())
    }
}

/// A [`Store`] in a PostgreSQL schema, over a pool of connections owned by
/// one worker thread. Handles from [`Store::concurrent_handle`] share the
/// pool; dropping the last one closes the connections and joins the
/// worker.
pub struct PgStore {
    // Declared first, dropped first: the worker's channel closes once every
    // handle's sender is gone, before the last `Shared` joins it.
    jobs: UnboundedSender<Job>,
    shared: Arc<Shared>,
}

struct Shared {
    worker: parking_lot::Mutex<Option<JoinHandle<()>>>,
    schema: String,
    statement_timeout: Duration,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(w) = self.worker.lock().take() {
            let _ = w.join();
        }
    }
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("schema", &self.shared.schema)
            .finish_non_exhaustive()
    }
}

type JobFuture<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;
type Job = Box<dyn for<'a> FnOnce(Result<&'a mut Conn, StoreError>) -> JobFuture<'a> + Send>;
type CallFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + 'a>>;

fn make_job<F>(f: F) -> Job
where
    F: for<'a> FnOnce(Result<&'a mut Conn, StoreError>) -> JobFuture<'a> + Send + 'static,
{
    Box::new(f)
}

fn pe(e: tokio_postgres::Error) -> StoreError {
    if let Some(db) = e.as_db_error() {
        let msg = format!("postgres: {} ({})", db.message(), db.code().code());
        if db.code() == &SqlState::QUERY_CANCELED {
            return StoreError::Timeout(msg);
        }
        return StoreError::Backend(msg);
    }
    match std::error::Error::source(&e) {
        Some(src) => StoreError::Backend(format!("postgres: {e}: {src}")),
        None => StoreError::Backend(format!("postgres: {e}")),
    }
}

fn stopped() -> StoreError {
    StoreError::Backend("postgres: the store's worker thread has stopped".into())
}

fn to_u64(what: &str, v: i64) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|_| StoreError::Backend(format!("postgres: stored {what} {v} < 0")))
}

fn ti(table: Table) -> usize {
    match table {
        Table::Devices => 0,
        Table::Targets => 1,
        Table::Meta => 2,
        Table::Leases => 3,
    }
}

/// Checks a schema name: a lower-case SQL identifier of 1..=63 bytes.
fn check_schema(schema: &str) -> Result<(), StoreError> {
    let mut bytes = schema.bytes();
    let ok_first = matches!(bytes.next(), Some(b'a'..=b'z' | b'_'));
    let ok_rest = bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_'));
    if ok_first && ok_rest && schema.len() <= 63 {
        Ok(())
    } else {
        Err(StoreError::Backend(format!(
            "postgres: schema name {schema:?} must match [a-z_][a-z0-9_]{{0,62}}"
        )))
    }
}

impl PgStore {
    /// Connects to `url` with [`PgOptions::default`] (schema `public`).
    /// See [`PgStore::open`].
    pub fn connect(url: &str) -> Result<PgStore, StoreError> {
        PgStore::open(url, &PgOptions::default())
    }

    /// Connects to `url` with the default options and the tables in
    /// `schema`. See [`PgStore::open`].
    pub fn connect_with_schema(url: &str, schema: &str) -> Result<PgStore, StoreError> {
        let opts = PgOptions {
            schema: schema.into(),
            ..PgOptions::default()
        };
        PgStore::open(url, &opts)
    }

    /// Connects to `url` (a `postgres://` URL or a `key=value` string,
    /// with libpq's `sslmode` and `sslrootcert` keys), opens one connection
    /// of the pool and brings the schema to [`SCHEMA_VERSION`]; the pool's
    /// other connections open as calls need them.
    ///
    /// Errors: [`StoreError::SchemaTooNew`] when the schema was migrated by
    /// a newer build (nothing is written); [`StoreError::Timeout`] when the
    /// first connection is not up within the connect timeout;
    /// [`StoreError::Backend`] for an option out of range, a bad string or
    /// TLS setting, a refused certificate, or a failed connection or
    /// migration. No error repeats the connection string (it may hold a
    /// password).
    pub fn open(url: &str, opts: &PgOptions) -> Result<PgStore, StoreError> {
        opts.check()?;
        let (rest, keys) = tls::split_tls(url)?;
        let mut cfg = Config::from_str(&rest)
            .map_err(|e| StoreError::Backend(format!("postgres: bad connection string: {e}")))?;
        let mode = keys.mode.unwrap_or(SslMode::Prefer);
        let ca = opts.ca_file.as_deref().or(keys.root_cert.as_deref());
        let tls = tls::connector(mode, ca)?;
        cfg.ssl_mode(mode.negotiation());
        let connect_timeout = cfg
            .get_connect_timeout()
            .copied()
            .unwrap_or(opts.connect_timeout);
        cfg.connect_timeout(connect_timeout);
        let connector = Connector {
            cfg,
            tls,
            schema: opts.schema.clone(),
            pool_size: opts.pool_size,
            statement_timeout: opts.statement_timeout,
            connect_timeout,
            fence: opts.fence.clone(),
        };
        let (jobs, rx) = unbounded_channel();
        let (ready_tx, ready_rx) = sync_channel(1);
        let worker = std::thread::Builder::new()
            .name("router-pg".into())
            .spawn(move || worker(connector, rx, ready_tx))
            .map_err(|e| StoreError::Backend(format!("postgres: cannot spawn worker: {e}")))?;
        let started = ready_rx.recv().unwrap_or_else(|_| Err(stopped()));
        if let Err(e) = started {
            let _ = worker.join();
            return Err(e);
        }
        Ok(PgStore {
            jobs,
            shared: Arc::new(Shared {
                worker: parking_lot::Mutex::new(Some(worker)),
                schema: opts.schema.clone(),
                statement_timeout: opts.statement_timeout,
            }),
        })
    }

    /// The schema holding the tables.
    pub fn schema(&self) -> &str {
        &self.shared.schema
    }

    /// Whether the session of a pooled connection is encrypted (TLS), as
    /// the server sees it (`pg_stat_ssl`).
    ///
    /// Errors: as any call ([`StoreError::Backend`], [`StoreError::Timeout`]).
    pub fn session_encrypted(&self) -> Result<bool, StoreError> {
        self.call(|c| Box::pin(c.ssl()))
    }

    /// Runs `f` on a pooled connection and waits for its result, at most
    /// the statement timeout once the connection is in hand (past it the
    /// connection is dropped and the call fails with
    /// [`StoreError::Timeout`]).
    fn call<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> FnOnce(&'a mut Conn) -> CallFuture<'a, T> + Send + 'static,
    {
        let (tx, rx) = sync_channel(1);
        let limit = self.shared.statement_timeout;
        let job = make_job(move |conn| {
            Box::pin(async move {
                let r = match conn {
                    Ok(c) => match tokio::time::timeout(limit, f(&mut *c)).await {
                        Ok(r) => r,
                        Err(_) => {
                            c.broken = true;
                            Err(StoreError::Timeout(format!(
                                "postgres: no answer within the statement timeout ({} s)",
                                limit.as_secs_f64()
                            )))
                        }
                    },
                    Err(e) => Err(e),
                };
                let _ = tx.send(r);
            })
        });
        self.jobs.send(job).map_err(|_| stopped())?;
        rx.recv().unwrap_or_else(|_| Err(stopped()))
    }
}

impl Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    /// Another handle on the same pool: its calls run beside this one's,
    /// on another connection.
    fn concurrent_handle(&self) -> Option<Box<dyn Store>> {
        Some(Box::new(PgStore {
            jobs: self.jobs.clone(),
            shared: self.shared.clone(),
        }))
    }

    fn schema_version(&mut self) -> Result<u32, StoreError> {
        self.call(|c| Box::pin(c.version()))
    }

    fn upsert(&mut self, table: Table, rows: &[Row]) -> Result<(), StoreError> {
        for r in rows {
            check_row(r)?;
        }
        if rows.is_empty() {
            return Ok(());
        }
        let rows = rows.to_vec();
        self.call(move |c| Box::pin(async move { c.upsert(table, &rows).await }))
    }

    fn get(&mut self, table: Table, key: &str) -> Result<Option<Row>, StoreError> {
        if check_key(key).is_err() {
            return Ok(None);
        }
        let key = key.to_string();
        self.call(move |c| Box::pin(async move { c.get(table, &key).await }))
    }

    fn load(&mut self, table: Table) -> Result<Vec<Row>, StoreError> {
        self.call(move |c| Box::pin(c.load(table)))
    }

    fn append_deposit(&mut self, entry: &DepositEntry) -> Result<bool, StoreError> {
        check_deposit(entry)?;
        let entry = entry.clone();
        self.call(move |c| Box::pin(async move { c.append(&entry).await }))
    }

    /// One transaction for the batch (statements pipelined, one commit).
    /// Entries apply in order as [`Store::append_deposit`] would. When a
    /// statement fails (a seq logged under another token) the transaction
    /// is rolled back and the entries are appended one by one, so each gets
    /// its own result; a failed commit fails every entry not refused on its
    /// own.
    fn append_deposits(&mut self, entries: &[DepositEntry]) -> Vec<Result<bool, StoreError>> {
        if entries.len() < 2 {
            return entries.iter().map(|e| self.append_deposit(e)).collect();
        }
        let mut results: Vec<Option<Result<bool, StoreError>>> = entries
            .iter()
            .map(|e| check_deposit(e).err().map(Err))
            .collect();
        let valid: Vec<DepositEntry> = entries
            .iter()
            .zip(&results)
            .filter(|(_, r)| r.is_none())
            .map(|(e, _)| e.clone())
            .collect();
        let batch = self.call(move |c| {
            Box::pin(async move {
                let refs: Vec<&DepositEntry> = valid.iter().collect();
                Ok(c.append_batch(&refs).await)
            })
        });
        match batch {
            Ok(Some(Ok(fresh))) => {
                let mut fresh = fresh.into_iter();
                for slot in results.iter_mut().filter(|r| r.is_none()) {
                    *slot = fresh.next().map(Ok);
                }
                fill_failed(results, &StoreError::Backend("entry skipped".into()))
            }
            Ok(Some(Err(e))) | Err(e) => fill_failed(results, &e),
            Ok(None) => entries
                .iter()
                .zip(results)
                .map(|(e, r)| r.unwrap_or_else(|| self.append_deposit(e)))
                .collect(),
        }
    }

    fn deposits_after(&mut self, after: u64) -> Result<Vec<DepositEntry>, StoreError> {
        let Ok(after) = i64::try_from(after) else {
            return Ok(Vec::new()); // no stored seq exceeds i64::MAX
        };
        self.call(move |c| Box::pin(c.after(after)))
    }

    fn has_deposit(&mut self, token: &str) -> Result<bool, StoreError> {
        if check_key(token).is_err() {
            return Ok(false);
        }
        let token = token.to_string();
        self.call(move |c| Box::pin(async move { c.has(&token).await }))
    }

    fn last_seq(&mut self) -> Result<u64, StoreError> {
        self.call(|c| Box::pin(c.last()))
    }

    fn prune_deposits(&mut self, up_to: u64) -> Result<u64, StoreError> {
        let up_to = i64::try_from(up_to).unwrap_or(i64::MAX);
        self.call(move |c| Box::pin(c.prune(up_to)))
    }

    fn write_all(&mut self, writes: &[Write<'_>]) -> Result<(), StoreError> {
        check_writes(writes)?;
        let writes: Vec<batch::OwnedWrite> = writes.iter().map(batch::OwnedWrite::of).collect();
        self.call(move |c| Box::pin(async move { c.write_all(&writes).await }))
    }

    fn load_page(
        &mut self,
        table: Table,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Row>, StoreError> {
        // Every key sorts after the empty string (keys are non-empty).
        let after = after.unwrap_or("").to_string();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.call(move |c| Box::pin(async move { c.page(table, &after, limit).await }))
    }

    fn delete(&mut self, table: Table, keys: &[String]) -> Result<(), StoreError> {
        let keys: Vec<String> = keys
            .iter()
            .filter(|k| check_key(k).is_ok())
            .cloned()
            .collect();
        self.call(move |c| Box::pin(async move { c.delete(table, &keys).await }))
    }
}
