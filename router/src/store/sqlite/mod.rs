//! The embedded default [`Store`]: SQLite in WAL mode, a main file and a
//! log file beside it.
//!
//! # Durability: `synchronous = FULL`
//!
//! A deposit is acknowledged to a device only after [`Store::append_deposit`]
//! returns, and the device then forgets it; so a returned append must
//! survive whatever can happen next.
//!
//! * A process kill (SIGKILL, OOM, panic with abort): in WAL mode a commit
//!   has `write()`n its frames into the `-wal` file before returning, under
//!   both `NORMAL` and `FULL`. Those bytes sit in the OS page cache, which
//!   belongs to the kernel, not to the process, so they survive the kill and
//!   the next open replays the WAL. `NORMAL` is enough for this case (the
//!   store suite's kill test checks it with `FULL`, the default).
//! * A kernel crash or power loss: the page cache is lost. Under `NORMAL` a
//!   WAL commit is not fsynced (only checkpoints are), so the last
//!   acknowledged transactions can roll back: the database stays
//!   consistent, but deposits the devices were told are safe are gone.
//!   Under `FULL` every commit fsyncs the WAL before returning.
//!
//! We choose `FULL`: "a restart loses no acknowledged deposit" (ROUTING.md
//! §4) covers a host reboot, not just a process restart, and the cost is
//! bounded. Measured with `examples/store_bench.rs` (release build, ext4 on
//! a virtual disk shared with concurrent builds; one op = one
//! `append_deposit` plus one single-row upsert, i.e. two commits):
//! `NORMAL` 21 000–46 000 ops/s, p50 ≈ 10 µs; `FULL` on a quiet disk
//! 3 400 ops/s, p50 ≈ 260 µs, p99 0.7–1 ms, and down to 140 ops/s, p50 ≈
//! 8 ms, while other builds saturate the disk (the cost is the two WAL
//! fsyncs, so it is the disk's fsync latency). A 1000-row batch upsert (one
//! transaction, one fsync) takes ≈ 4 ms under `FULL`, and
//! [`Store::append_deposits`] in groups of 32 (group commit: one fsync per
//! group) reaches ≈ 27 000 deposits/s under `FULL` even on the busy disk
//! (p50 ≈ 0.6 ms per group). A router acknowledges
//! deposits from devices that each spend seconds per item, so even a few
//! milliseconds per acknowledged deposit stay far below the rate it must
//! sustain. Callers that can accept losing the last commits on power loss
//! (the lab, tests) can pick [`Synchronous::Normal`] with
//! [`SqliteStore::open_with`].
//!
//! # Schema
//!
//! Two files. The main one (`router.db`): `schema_migrations(version,
//! applied_at)` records every applied migration; the keyed tables are
//! `devices`, `targets`, `meta` (`key TEXT PRIMARY KEY, version INTEGER,
//! payload TEXT`). The log file beside it (`router-log.db`, module `log`):
//! the deposit log `deposits(seq INTEGER PRIMARY KEY, token TEXT UNIQUE,
//! payload TEXT)` and the `leases` keyed table, so that what must be
//! durable before it is answered never waits for a snapshot's write to the
//! main file. The main file keeps empty `deposits` and `leases` tables from
//! its older versions; migration 4 marks the move, so a build before it
//! refuses the file instead of reading the emptied tables.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::blob::ZeroBlob;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior, MAIN_DB};

use super::{
    check_key, check_row, check_writes, DepositEntry, Row, Store, StoreError, Table, Write,
    SCHEMA_VERSION,
};

/// The file [`SqliteStore::open_dir`] keeps inside its directory.
pub const SQLITE_FILE: &str = "router.db";

/// Payloads longer than this (bytes) are streamed into their row instead
/// of bound as text: SQLite copies a bound text when it is bound and again
/// into the record it builds, so a row of N bytes cost 2·N beside the
/// caller's own copy while it was written. The state row, with the whole
/// field, is 15–21 MiB at 100,000 observed targets, and those copies were
/// the snapshot's spike in a box of 256 MiB (docs/router.md, "The small
/// box"). A streamed row is written as a zero-filled blob of its length,
/// then filled in place a page at a time; it reads back as the same text.
pub const STREAMED_PAYLOAD: usize = 1 << 20;

/// SQLite's `synchronous` setting for the WAL (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// fsync the WAL on every commit: a returned write survives power loss.
    #[default]
    Full,
    /// fsync only at checkpoints: a returned write survives a process kill
    /// but the last commits can be lost on power loss.
    Normal,
}

impl Synchronous {
    fn pragma(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        }
    }
}

/// Migrations, in order: `MIGRATIONS[i]` brings the schema to version `i + 1`.
const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE devices (
        key TEXT PRIMARY KEY NOT NULL,
        version INTEGER NOT NULL,
        payload TEXT NOT NULL
    );
    CREATE TABLE targets (
        key TEXT PRIMARY KEY NOT NULL,
        version INTEGER NOT NULL,
        payload TEXT NOT NULL
    );
    CREATE TABLE meta (
        key TEXT PRIMARY KEY NOT NULL,
        version INTEGER NOT NULL,
        payload TEXT NOT NULL
    );
    CREATE TABLE deposits (
        seq INTEGER PRIMARY KEY NOT NULL,
        token TEXT NOT NULL UNIQUE,
        payload TEXT NOT NULL
    );
",
    "
    CREATE TABLE leases (
        key TEXT PRIMARY KEY NOT NULL,
        version INTEGER NOT NULL,
        payload TEXT NOT NULL
    );
",
    // The replicas' lead: used on PostgreSQL; here for one schema history.
    "CREATE TABLE leadership (id INTEGER PRIMARY KEY NOT NULL CHECK (id = 1), term INTEGER NOT NULL,
        holder TEXT NOT NULL, url TEXT NOT NULL, expires_at REAL NOT NULL);",
    // Version 4: the deposits and the leases' rows live in the log file
    // (module `log`); their tables here stay, emptied into it at open. A
    // build before it would read the emptied tables and miss the log, so it
    // must refuse this file.
    "-- the log file holds deposits and leases",
];

/// A [`Store`] in a main SQLite file and its log file ([`log_path`]; WAL
/// journals, `synchronous` per [`Synchronous`], `FULL` by default). One
/// process should own the files; a second opener's write waits up to 5 s
/// on a lock, then fails.
#[derive(Debug)]
pub struct SqliteStore {
    /// The main file: devices, targets, meta, the schema's history.
    conn: Connection,
    /// The log file ([`log`]): deposits and the leases' rows.
    log: Connection,
    path: PathBuf,
    sync: Synchronous,
}

mod log;
mod sql;
pub use log::{log_path, LOG_VERSION};

/// The log file [`SqliteStore::open_dir`] keeps beside [`SQLITE_FILE`]
/// (module `log`: the deposits and the leases' rows).
pub const SQLITE_LOG_FILE: &str = "router-log.db";
use sql::{delete_keys, get_sql, load_sql, page_sql, row_of, rows_of, upsert_sql};

fn be(e: rusqlite::Error) -> StoreError {
    StoreError::Backend(format!("sqlite: {e}"))
}

fn to_u64(what: &str, v: i64) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|_| StoreError::Backend(format!("sqlite: stored {what} {v} < 0")))
}

/// The applied schema version (0 for a file without `schema_migrations`).
fn stored_version(conn: &Connection) -> Result<u32, StoreError> {
    let has: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master
                            WHERE type = 'table' AND name = 'schema_migrations')",
            [],
            |r| r.get(0),
        )
        .map_err(be)?;
    if !has {
        return Ok(0);
    }
    let v: i64 = conn
        .query_row(
            "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
            [],
            |r| r.get(0),
        )
        .map_err(be)?;
    u32::try_from(v).map_err(|_| StoreError::Backend(format!("sqlite: schema version {v}")))
}

impl SqliteStore {
    /// Opens (creating if absent) the store file at `path` with
    /// `synchronous = FULL`.
    ///
    /// Errors: [`StoreError::SchemaTooNew`] when the file was migrated by a
    /// newer build (the file is left untouched: the check runs before any
    /// write or pragma that persists); [`StoreError::Backend`] when the file
    /// cannot be opened, is not an SQLite database, or is locked by another
    /// writer for more than 5 s.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_with(path, Synchronous::Full)
    }

    /// Creates `dir` if needed and opens `dir/router.db` ([`SQLITE_FILE`])
    /// with `synchronous = FULL`. Errors as [`SqliteStore::open`], plus
    /// [`StoreError::Backend`] when the directory cannot be created.
    pub fn open_dir(dir: &Path) -> Result<SqliteStore, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| {
            StoreError::Backend(format!("sqlite: cannot create {}: {e}", dir.display()))
        })?;
        SqliteStore::open(&dir.join(SQLITE_FILE))
    }

    /// Opens the store file at `path` with the given `synchronous` setting.
    /// Errors as [`SqliteStore::open`].
    pub fn open_with(path: &Path, sync: Synchronous) -> Result<SqliteStore, StoreError> {
        let conn = Connection::open(path)
            .map_err(|e| StoreError::Backend(format!("sqlite: open {}: {e}", path.display())))?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(be)?;
        // Refuse a newer schema before anything persistent changes
        // (journal_mode = WAL is recorded in the file header).
        let found = stored_version(&conn)?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                found,
                known: SCHEMA_VERSION,
            });
        }
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(be)?;
        if !mode.eq_ignore_ascii_case("wal") && !mode.eq_ignore_ascii_case("memory") {
            return Err(StoreError::Backend(format!(
                "sqlite: journal_mode is {mode}, WAL refused"
            )));
        }
        conn.pragma_update(None, "synchronous", sync.pragma())
            .map_err(be)?;
        conn.set_prepared_statement_cache_capacity(32);
        let mut conn = conn;
        migrate(&mut conn)?;
        let mut log = log::open(&log_path(path), sync)?;
        log::move_from_main(&mut conn, &mut log)?;
        Ok(SqliteStore {
            conn,
            log,
            path: path.to_path_buf(),
            sync,
        })
    }

    /// The connection that holds `table`: the log file's for
    /// [`Table::Leases`], the main file's for the others.
    fn conn_of(&self, table: Table) -> &Connection {
        match table {
            Table::Leases => &self.log,
            _ => &self.conn,
        }
    }

    /// As [`SqliteStore::conn_of`], mutable (to open a transaction).
    fn conn_of_mut(&mut self, table: Table) -> &mut Connection {
        match table {
            Table::Leases => &mut self.log,
            _ => &mut self.conn,
        }
    }

    /// The path of the main database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of the log file beside it ([`log_path`]).
    pub fn log_path(&self) -> PathBuf {
        log_path(&self.path)
    }
}

/// Applies the missing migrations to the main file, each in its own
/// immediate transaction (a concurrent opener waits, then sees them
/// applied).
fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    for (i, sql) in MIGRATIONS.iter().enumerate() {
        let target = i as u32 + 1;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(be)?;
        tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                     version INTEGER PRIMARY KEY NOT NULL,
                     applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
                 )",
        )
        .map_err(be)?;
        let found = stored_version(&tx)?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                found,
                known: SCHEMA_VERSION,
            });
        }
        if found >= target {
            continue; // dropping `tx` rolls back the no-op
        }
        tx.execute_batch(sql).map_err(be)?;
        tx.execute(
            "INSERT INTO schema_migrations (version) VALUES (?1)",
            params![target],
        )
        .map_err(be)?;
        tx.commit().map_err(be)?;
    }
    Ok(())
}

impl SqliteStore {
    fn upsert_one(conn: &Connection, table: Table, r: &Row) -> Result<(), StoreError> {
        let mut st = conn.prepare_cached(upsert_sql(table)).map_err(be)?;
        if r.payload.len() <= STREAMED_PAYLOAD {
            st.execute(params![r.key, r.version as i64, r.payload])
                .map_err(be)?;
            return Ok(());
        }
        // A zero-filled blob of the payload's length, then the payload
        // written into it in place, a page at a time.
        let len = i32::try_from(r.payload.len())
            .map_err(|_| StoreError::Backend(format!("row {}: payload too large", r.key)))?;
        st.execute(params![r.key, r.version as i64, ZeroBlob(len)])
            .map_err(be)?;
        let rowid: i64 = conn
            .query_row(
                &format!("SELECT rowid FROM {} WHERE key = ?1", table.name()),
                params![r.key],
                |row| row.get(0),
            )
            .map_err(be)?;
        let mut blob = conn
            .blob_open(MAIN_DB, table.name(), "payload", rowid, false)
            .map_err(be)?;
        blob.write_all_at(r.payload.as_bytes(), 0).map_err(be)?;
        blob.close().map_err(be)
    }
}

impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    /// A second store on the same files, with connections of its own: the
    /// store writer's deposits and leases' rows commit to the log file
    /// while a snapshot holds the main file ([`log`]). `None` if it cannot
    /// be opened (the caller then shares this handle).
    fn concurrent_handle(&self) -> Option<Box<dyn Store>> {
        SqliteStore::open_with(&self.path, self.sync)
            .ok()
            .map(|s| Box::new(s) as Box<dyn Store>)
    }

    fn schema_version(&mut self) -> Result<u32, StoreError> {
        stored_version(&self.conn)
    }

    fn upsert(&mut self, table: Table, rows: &[Row]) -> Result<(), StoreError> {
        for r in rows {
            check_row(r)?;
        }
        let conn = self.conn_of_mut(table);
        match rows {
            [] => Ok(()),
            [r] => SqliteStore::upsert_one(conn, table, r),
            _ => {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(be)?;
                for r in rows {
                    SqliteStore::upsert_one(&tx, table, r)?;
                }
                tx.commit().map_err(be)
            }
        }
    }

    fn get(&mut self, table: Table, key: &str) -> Result<Option<Row>, StoreError> {
        if check_key(key).is_err() {
            return Ok(None);
        }
        let mut st = self
            .conn_of(table)
            .prepare_cached(get_sql(table))
            .map_err(be)?;
        let got = st.query_row(params![key], row_of).optional().map_err(be)?;
        match got {
            None => Ok(None),
            Some((key, version, payload)) => Ok(Some(Row {
                key,
                version: to_u64("version", version)?,
                payload,
            })),
        }
    }

    fn load(&mut self, table: Table) -> Result<Vec<Row>, StoreError> {
        rows_of(self.conn_of(table), load_sql(table), [])
    }

    fn load_page(
        &mut self,
        table: Table,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Row>, StoreError> {
        // Every key sorts after the empty string (keys are non-empty).
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let params = params![after.unwrap_or(""), limit];
        rows_of(self.conn_of(table), page_sql(table), params)
    }

    /// The main file's writes in one immediate transaction, then the log
    /// file's (the leases' rows) in another: atomic within each file, the
    /// main file first. A crash between the two leaves rows of leases that
    /// ended, which a restart reads as ended or expired ([`log`]).
    fn write_all(&mut self, writes: &[Write<'_>]) -> Result<(), StoreError> {
        check_writes(writes)?;
        let in_log = |w: &Write<'_>| {
            matches!(
                w,
                Write::Upsert(Table::Leases, _) | Write::Delete(Table::Leases, _)
            )
        };
        for (conn, log_side) in [(&mut self.conn, false), (&mut self.log, true)] {
            let mine: Vec<&Write<'_>> = writes.iter().filter(|w| in_log(w) == log_side).collect();
            if mine.is_empty() {
                continue;
            }
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(be)?;
            for w in mine {
                match *w {
                    Write::Upsert(table, rows) => {
                        for r in rows {
                            SqliteStore::upsert_one(&tx, table, r)?;
                        }
                    }
                    Write::Delete(table, keys) => delete_keys(&tx, table, keys)?,
                }
            }
            tx.commit().map_err(be)?;
        }
        Ok(())
    }

    fn append_deposit(&mut self, entry: &DepositEntry) -> Result<bool, StoreError> {
        log::append(&self.log, entry)
    }

    /// One immediate transaction for the batch: one commit, one fsync
    /// (`log::append_all`).
    fn append_deposits(&mut self, entries: &[DepositEntry]) -> Vec<Result<bool, StoreError>> {
        log::append_all(&mut self.log, entries)
    }

    fn deposits_after(&mut self, after: u64) -> Result<Vec<DepositEntry>, StoreError> {
        log::read_deposits(&self.log, after)
    }

    fn has_deposit(&mut self, token: &str) -> Result<bool, StoreError> {
        if check_key(token).is_err() {
            return Ok(false);
        }
        log::has(&self.log, token)
    }

    fn last_seq(&mut self) -> Result<u64, StoreError> {
        log::last_seq(&self.log)
    }

    fn prune_deposits(&mut self, up_to: u64) -> Result<u64, StoreError> {
        log::prune(&self.log, up_to)
    }

    fn delete(&mut self, table: Table, keys: &[String]) -> Result<(), StoreError> {
        let conn = self.conn_of_mut(table);
        let tx = conn.transaction().map_err(be)?;
        delete_keys(&tx, table, keys)?;
        tx.commit().map_err(be)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pragmas_as_documented() {
        let dir = tempfile::tempdir().unwrap();
        for (sync, want) in [(Synchronous::Full, 2), (Synchronous::Normal, 1)] {
            let s = SqliteStore::open_with(&dir.path().join(format!("{sync:?}.db")), sync).unwrap();
            let got: i64 = s
                .conn
                .query_row("PRAGMA synchronous", [], |r| r.get(0))
                .unwrap();
            assert_eq!(got, want, "{sync:?}");
            let mode: String = s
                .conn
                .query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .unwrap();
            assert_eq!(mode, "wal");
        }
        let s = SqliteStore::open_dir(&dir.path().join("a/b")).unwrap();
        assert_eq!(s.path(), dir.path().join("a/b").join(SQLITE_FILE));
    }
}
