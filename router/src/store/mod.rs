//! Durable state behind the router: a small, backend-neutral contract.
//!
//! The router keeps its working state in memory and writes through to a
//! [`Store`]. Every write is an idempotent upsert keyed by an id and a
//! version; a snapshot's rows go in one atomic batch ([`Store::write_all`],
//! a transaction on both SQL backends), and acknowledged deposits go to an append-only log
//! keyed by their deposit token (write-ahead: a deposit is in the log before
//! it is acknowledged). Source: `ROUTING.md` §4 Store.
//!
//! Backends: [`MemoryStore`] (tests and the in-process lab), [`SqliteStore`]
//! (embedded default) and [`PgStore`] (scale-out). All of them pass the same
//! suite (`router/tests/store_suite.rs`).
//!
//! Value ranges shared by every backend (the SQL backends store signed
//! 64-bit integers and PostgreSQL text cannot hold NUL): keys are 1..=512
//! bytes without NUL ([`check_key`]), versions and sequence numbers are at
//! most `i64::MAX` and payloads contain no NUL ([`check_version`],
//! [`check_payload`]). Anything else is refused with a typed error before
//! the backend is touched.
//!
//! Calls block; the service calls its store from one dedicated thread, never
//! from an async task.

mod memory;
mod postgres;
mod sqlite;

pub use memory::MemoryStore;
pub use postgres::{Activity, Fence, Leadership, PgOptions, PgStore, SslMode};
pub use sqlite::{
    log_path, SqliteStore, Synchronous, LOG_VERSION, SQLITE_FILE, SQLITE_LOG_FILE, STREAMED_PAYLOAD,
};

use thiserror::Error;

/// The keyed tables of the store. Each holds rows of (key, version, payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    /// Durable device identity and earned trust; key = device id.
    Devices,
    /// Targets: last observations, settlement, open verifications; key = target id.
    Targets,
    /// Singletons: the field snapshot, prices, facts, counters; key = a name.
    Meta,
    /// Outstanding leases with their deposit tokens, written before the
    /// lease is answered and deleted by the snapshot after it ends; key =
    /// lease id (schema version 2).
    Leases,
}

impl Table {
    /// Every table, in a fixed order.
    pub const ALL: [Table; 4] = [Table::Devices, Table::Targets, Table::Meta, Table::Leases];

    /// The table's SQL name.
    pub fn name(self) -> &'static str {
        match self {
            Table::Devices => "devices",
            Table::Targets => "targets",
            Table::Meta => "meta",
            Table::Leases => "leases",
        }
    }
}

/// One row of a keyed table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The row's id (non-empty, ≤ 512 bytes).
    pub key: String,
    /// Monotonic version chosen by the writer; an upsert never replaces a
    /// row with a higher version (a stale or replayed write is a no-op), and
    /// an equal version overwrites (idempotent retry). At most `i64::MAX`.
    pub version: u64,
    /// JSON text owned by the router; the store does not look inside.
    pub payload: String,
}

/// One write of an atomic batch ([`Store::write_all`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write<'a> {
    /// Upserts rows into a table, as [`Store::upsert`].
    Upsert(Table, &'a [Row]),
    /// Deletes rows of a table by key, as [`Store::delete`].
    Delete(Table, &'a [String]),
}

/// One acknowledged deposit in the append-only log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepositEntry {
    /// Router-assigned sequence number, strictly increasing, at most
    /// `i64::MAX`. A second token with a sequence number already logged is
    /// refused with [`StoreError::Backend`] (a router bug, never overwritten).
    pub seq: u64,
    /// The deposit token (unique: a second append with the same token is a no-op).
    pub token: String,
    /// JSON text of the deposit as folded.
    pub payload: String,
}

/// Why a store call failed. The call changed nothing when it fails.
#[derive(Debug, Error)]
pub enum StoreError {
    /// The backend reported an error (I/O, SQL, connection).
    #[error("store backend error: {0}")]
    Backend(String),
    /// The stored schema is newer than this binary knows.
    #[error("store schema version {found} is newer than this build's {known}; upgrade routerd")]
    SchemaTooNew {
        /// Version found in the store.
        found: u32,
        /// Newest version this build knows.
        known: u32,
    },
    /// A key was empty, too long or held a NUL character.
    #[error("invalid store key {0:?} (must be 1..=512 bytes, no NUL)")]
    BadKey(String),
    /// A call or a connect took longer than the store's timeout. A write
    /// may or may not have been applied (every write is safe to retry).
    #[error("store timed out: {0}")]
    Timeout(String),
    /// A version or sequence number above `i64::MAX`, or a payload holding
    /// a NUL character (the SQL backends cannot store either).
    #[error("value out of the store's range: {0}")]
    BadValue(String),
    /// A replica's write under a [`Fence`] the store no longer honours:
    /// another replica leads now, or this one's lead lapsed. Nothing was
    /// written. Source: `docs/decisions/0020-replicas-over-one-postgresql.md`.
    #[error("this replica no longer leads: {0}")]
    Fenced(String),
}

/// The newest schema version this build knows (migrations 1..=this).
pub const SCHEMA_VERSION: u32 = 4;

/// Checks a row key or deposit token: non-empty, at most 512 bytes, no NUL.
pub fn check_key(key: &str) -> Result<(), StoreError> {
    if key.is_empty() || key.len() > 512 || key.contains('\0') {
        Err(StoreError::BadKey(key.chars().take(64).collect()))
    } else {
        Ok(())
    }
}

/// Checks a version or sequence number (`what` names it in the error): at
/// most `i64::MAX`. Returns it as the `i64` the SQL backends store.
pub fn check_version(what: &str, v: u64) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| StoreError::BadValue(format!("{what} {v} exceeds i64::MAX")))
}

/// Checks a payload: no NUL character (JSON text never needs one raw).
pub fn check_payload(payload: &str) -> Result<(), StoreError> {
    if payload.contains('\0') {
        Err(StoreError::BadValue("payload holds a NUL character".into()))
    } else {
        Ok(())
    }
}

/// Checks one row: key, version and payload.
pub fn check_row(row: &Row) -> Result<(), StoreError> {
    check_key(&row.key)?;
    check_version("version", row.version)?;
    check_payload(&row.payload)
}

/// Checks one deposit entry: token, seq and payload.
pub fn check_deposit(entry: &DepositEntry) -> Result<(), StoreError> {
    check_key(&entry.token)?;
    check_version("seq", entry.seq)?;
    check_payload(&entry.payload)
}

/// Completes a batch's per-entry results: every empty slot gets a
/// [`StoreError::Backend`] carrying `err`'s message.
pub(crate) fn fill_failed(
    results: Vec<Option<Result<bool, StoreError>>>,
    err: &StoreError,
) -> Vec<Result<bool, StoreError>> {
    let msg = match err {
        StoreError::Backend(m) => m.clone(),
        other => other.to_string(),
    };
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(StoreError::Backend(msg.clone()))))
        .collect()
}

/// Durable state: keyed tables of versioned rows and the deposit log.
///
/// Every method blocks. A failed call changes nothing.
pub trait Store: Send {
    /// A short backend name for logs: `memory`, `sqlite`, `postgres`.
    fn backend(&self) -> &'static str;

    /// Another handle on the same store whose calls can run beside this
    /// one's (a pooled backend), or `None` where every call must go
    /// through this one (the default).
    fn concurrent_handle(&self) -> Option<Box<dyn Store>> {
        None
    }

    /// The schema version in the store after opening (migrations run at open).
    fn schema_version(&mut self) -> Result<u32, StoreError>;

    /// Upserts `rows` into `table`: each row replaces a stored row with the
    /// same key only if its version is ≥ the stored one (rows of one batch
    /// apply in order). The batch applies atomically where the backend has
    /// transactions; every row is checked ([`check_row`]) before any is
    /// written, so a bad row fails the whole batch with nothing changed.
    fn upsert(&mut self, table: Table, rows: &[Row]) -> Result<(), StoreError>;

    /// The row with `key`, if any (`None` for a key [`check_key`] refuses:
    /// it cannot be stored).
    fn get(&mut self, table: Table, key: &str) -> Result<Option<Row>, StoreError>;

    /// Every row of `table`, sorted by key.
    fn load(&mut self, table: Table) -> Result<Vec<Row>, StoreError>;

    /// Appends a deposit. Returns `true` when it was new, `false` when its
    /// token was already logged (the stored entry is kept unchanged).
    fn append_deposit(&mut self, entry: &DepositEntry) -> Result<bool, StoreError>;

    /// Appends several deposits, in order; one result per entry as
    /// [`Store::append_deposit`]. Backends with transactions override it to
    /// commit the batch at once (group commit: one flush for the batch).
    fn append_deposits(&mut self, entries: &[DepositEntry]) -> Vec<Result<bool, StoreError>> {
        entries.iter().map(|e| self.append_deposit(e)).collect()
    }

    /// Deposits with `seq > after`, ascending by `seq`.
    fn deposits_after(&mut self, after: u64) -> Result<Vec<DepositEntry>, StoreError>;

    /// Whether a deposit with `token` is logged (`false` for a token
    /// [`check_key`] refuses).
    fn has_deposit(&mut self, token: &str) -> Result<bool, StoreError>;

    /// The highest logged `seq` (0 when the log is empty).
    fn last_seq(&mut self) -> Result<u64, StoreError>;

    /// Deletes the logged deposits with `seq ≤ up_to`, except the highest
    /// logged one (so [`Store::last_seq`] never goes back and a restart
    /// never reuses a seq). The caller passes a seq a written snapshot
    /// covers: a restart folds only deposits after it. Returns how many
    /// were deleted.
    fn prune_deposits(&mut self, up_to: u64) -> Result<u64, StoreError>;

    /// Deletes the rows of `table` keyed by `keys` (keys not stored, or
    /// that [`check_key`] refuses, are skipped). Atomic where the backend
    /// has transactions.
    fn delete(&mut self, table: Table, keys: &[String]) -> Result<(), StoreError>;

    /// Applies `writes` in order as one atomic batch where the backend has
    /// transactions: after a crash either all of them are in the store or
    /// none is (a snapshot's state row and the target rows it covers,
    /// `core::snapshot`). SQLite keeps [`Table::Leases`] in a file of its
    /// own: there the writes to the other tables are one atomic batch,
    /// committed first, and those to the leases another (decision 0030). Every row is checked ([`check_row`]) before any
    /// is written. The default applies them one call at a time (the
    /// memory store, which a crash empties anyway).
    fn write_all(&mut self, writes: &[Write<'_>]) -> Result<(), StoreError> {
        check_writes(writes)?;
        for w in writes {
            match *w {
                Write::Upsert(table, rows) => self.upsert(table, rows)?,
                Write::Delete(table, keys) => self.delete(table, keys)?,
            }
        }
        Ok(())
    }

    /// Up to `limit` rows of `table` whose keys sort after `after` (from
    /// the first when `None`), sorted by key: a table read a page at a
    /// time, so a restart never holds a large table's rows at once. The
    /// default pages over [`Store::load`].
    fn load_page(
        &mut self,
        table: Table,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Row>, StoreError> {
        Ok(self
            .load(table)?
            .into_iter()
            .filter(|r| after.is_none_or(|a| r.key.as_str() > a))
            .take(limit)
            .collect())
    }
}

/// Checks every row a batch of writes upserts ([`check_row`]).
pub fn check_writes(writes: &[Write<'_>]) -> Result<(), StoreError> {
    for w in writes {
        if let Write::Upsert(_, rows) = w {
            for r in *rows {
                check_row(r)?;
            }
        }
    }
    Ok(())
}
