//! Durable state behind the router: a small, backend-neutral contract.
//!
//! The router keeps its working state in memory and writes through to a
//! [`Store`]. Every write is an idempotent upsert keyed by an id and a
//! version (so the same schema works on a PostgreSQL-compatible store that
//! has no transactions), and acknowledged deposits go to an append-only log
//! keyed by their deposit token (write-ahead: a deposit is in the log before
//! it is acknowledged). Source: `ROUTING.md` §4 Store.
//!
//! Backends: [`MemoryStore`] (tests and the in-process lab), `SqliteStore`
//! (embedded default) and `PgStore` (scale-out). All of them pass the same
//! suite (`router/tests/store_suite.rs`).
//!
//! Calls block; the service calls its store from one dedicated thread, never
//! from an async task.

mod memory;

pub use memory::MemoryStore;

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
}

impl Table {
    /// Every table, in a fixed order.
    pub const ALL: [Table; 3] = [Table::Devices, Table::Targets, Table::Meta];

    /// The table's SQL name.
    pub fn name(self) -> &'static str {
        match self {
            Table::Devices => "devices",
            Table::Targets => "targets",
            Table::Meta => "meta",
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
    /// an equal version overwrites (idempotent retry).
    pub version: u64,
    /// JSON text owned by the router; the store does not look inside.
    pub payload: String,
}

/// One acknowledged deposit in the append-only log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepositEntry {
    /// Router-assigned sequence number, strictly increasing.
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
    /// A key was empty or too long.
    #[error("invalid store key {0:?} (must be 1..=512 bytes)")]
    BadKey(String),
}

/// The newest schema version this build knows (migrations 1..=this).
pub const SCHEMA_VERSION: u32 = 1;

/// Checks a row key: non-empty and at most 512 bytes.
pub fn check_key(key: &str) -> Result<(), StoreError> {
    if key.is_empty() || key.len() > 512 {
        Err(StoreError::BadKey(key.chars().take(64).collect()))
    } else {
        Ok(())
    }
}

/// Durable state: keyed tables of versioned rows and the deposit log.
///
/// Every method blocks. A failed call changes nothing.
pub trait Store: Send {
    /// A short backend name for logs: `memory`, `sqlite`, `postgres`.
    fn backend(&self) -> &'static str;

    /// The schema version in the store after opening (migrations run at open).
    fn schema_version(&mut self) -> Result<u32, StoreError>;

    /// Upserts `rows` into `table`: each row replaces a stored row with the
    /// same key only if its version is ≥ the stored one. The batch applies
    /// atomically where the backend has transactions.
    fn upsert(&mut self, table: Table, rows: &[Row]) -> Result<(), StoreError>;

    /// The row with `key`, if any.
    fn get(&mut self, table: Table, key: &str) -> Result<Option<Row>, StoreError>;

    /// Every row of `table`, sorted by key.
    fn load(&mut self, table: Table) -> Result<Vec<Row>, StoreError>;

    /// Appends a deposit. Returns `true` when it was new, `false` when its
    /// token was already logged (the stored entry is kept unchanged).
    fn append_deposit(&mut self, entry: &DepositEntry) -> Result<bool, StoreError>;

    /// Deposits with `seq > after`, ascending by `seq`.
    fn deposits_after(&mut self, after: u64) -> Result<Vec<DepositEntry>, StoreError>;

    /// Whether a deposit with `token` is logged.
    fn has_deposit(&mut self, token: &str) -> Result<bool, StoreError>;

    /// The highest logged `seq` (0 when the log is empty).
    fn last_seq(&mut self) -> Result<u64, StoreError>;
}
