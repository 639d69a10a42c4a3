//! The SQLite store's log file: the deposit log and the leases' rows, in
//! a database file of their own beside the main one (`router-log.db` next
//! to `router.db`).
//!
//! SQLite lets one writer at a time into a file. A snapshot writes
//! thousands of target and device rows into the main file and held it for
//! 0.1–1.7 s at 100,000 devices (docs/router.md, "What the SQLite lease
//! max is"), and while it did, every lease with items and every deposit
//! waited for it: their rows must be durable before they are answered
//! (decision 0018, `ROUTING.md` §4). With these two tables in their own
//! file, the store writer's handle ([`super::SqliteStore`]'s
//! `concurrent_handle`) commits them beside a snapshot's write.
//!
//! What crosses the two files, and why a crash between them is safe:
//! * A deposit is logged (here) before it is folded; the snapshot's state
//!   row (main file) records the last folded seq, and a restart folds the
//!   logged deposits after it. The log is pruned only after the snapshot
//!   that covers the pruned deposits has committed.
//! * A snapshot deletes its ended leases' rows here after its main-file
//!   transaction commits. A crash between the two leaves rows of ended
//!   leases, which a restart reads as ended (their deposits still logged,
//!   their device gone) or expired and deletes with its next snapshot
//!   (decision 0018, "the row is deleted by the first snapshot written
//!   after the lease ends").
//!
//! The file records its layout in `PRAGMA user_version` ([`LOG_VERSION`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, TransactionBehavior};

use super::{be, to_u64, Synchronous};
use crate::store::{check_deposit, fill_failed, DepositEntry, StoreError};

/// The log file's layout version (`PRAGMA user_version`); a file of a
/// newer one is refused with [`StoreError::SchemaTooNew`].
pub const LOG_VERSION: u32 = 1;

/// The log file's tables, created at open where missing.
const LOG_SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS deposits (
        seq INTEGER PRIMARY KEY NOT NULL,
        token TEXT NOT NULL UNIQUE,
        payload TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS leases (
        key TEXT PRIMARY KEY NOT NULL,
        version INTEGER NOT NULL,
        payload TEXT NOT NULL
    );
";

/// The log file beside the main file `main`: its stem with `-log`, then
/// its extension (`dir/router.db` → `dir/router-log.db`).
pub fn log_path(main: &Path) -> PathBuf {
    let stem = main.file_stem().map(|s| s.to_string_lossy().into_owned());
    let name = match (stem, main.extension()) {
        (Some(stem), Some(ext)) => format!("{stem}-log.{}", ext.to_string_lossy()),
        (Some(stem), None) => format!("{stem}-log"),
        (None, _) => "router-log.db".to_string(),
    };
    main.with_file_name(name)
}

/// Opens (creating if absent) the log file at `path`: WAL journal,
/// `synchronous` as the main file's, its tables created.
///
/// Errors: [`StoreError::SchemaTooNew`] for a file of a newer layout (left
/// untouched); [`StoreError::Backend`] when it cannot be opened, is not a
/// database, or stays locked past 5 s.
pub(super) fn open(path: &Path, sync: Synchronous) -> Result<Connection, StoreError> {
    let conn = Connection::open(path)
        .map_err(|e| StoreError::Backend(format!("sqlite: open {}: {e}", path.display())))?;
    conn.busy_timeout(Duration::from_secs(5)).map_err(be)?;
    let found: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(be)?;
    if found > LOG_VERSION as i64 {
        return Err(StoreError::SchemaTooNew {
            found: u32::try_from(found).unwrap_or(u32::MAX),
            known: LOG_VERSION,
        });
    }
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(be)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Backend(format!(
            "sqlite: {}: journal_mode is {mode}, WAL refused",
            path.display()
        )));
    }
    conn.pragma_update(None, "synchronous", sync.pragma())
        .map_err(be)?;
    conn.set_prepared_statement_cache_capacity(16);
    // The log is written at its end and read back only at a restart: a
    // small page cache (512 KiB, against SQLite's 2 MiB) holds what its
    // commits touch, and each of its connections keeps one.
    conn.pragma_update(None, "cache_size", -512).map_err(be)?;
    conn.execute_batch(&format!(
        "BEGIN IMMEDIATE; {LOG_SCHEMA} PRAGMA user_version = {LOG_VERSION}; COMMIT;"
    ))
    .map_err(be)?;
    Ok(conn)
}

/// Moves the deposits and leases' rows a build before the log file kept in
/// the main file into the log: copied and committed here first, then
/// deleted from the main file, so a crash between the two leaves copies
/// the next open skips (a deposit by its token, a lease row by its
/// version). Returns how many rows the main file held.
pub(super) fn move_from_main(
    main: &mut Connection,
    log: &mut Connection,
) -> Result<u64, StoreError> {
    let held: i64 = main
        .query_row(
            "SELECT (SELECT COUNT(*) FROM deposits) + (SELECT COUNT(*) FROM leases)",
            [],
            |r| r.get(0),
        )
        .map_err(be)?;
    if held == 0 {
        return Ok(0);
    }
    let deposits = read_deposits(main, 0)?;
    let leases = super::sql::rows_of(main, super::sql::load_sql(crate::store::Table::Leases), [])?;
    let tx = log
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(be)?;
    for d in &deposits {
        tx.execute(
            "INSERT OR IGNORE INTO deposits (seq, token, payload) VALUES (?1, ?2, ?3)",
            params![d.seq as i64, d.token, d.payload],
        )
        .map_err(be)?;
    }
    for r in &leases {
        super::SqliteStore::upsert_one(&tx, crate::store::Table::Leases, r)?;
    }
    tx.commit().map_err(be)?;
    let tx = main
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(be)?;
    tx.execute_batch("DELETE FROM deposits; DELETE FROM leases;")
        .map_err(be)?;
    tx.commit().map_err(be)?;
    Ok(held as u64)
}

/// Inserts one checked deposit. `Err((e, true))`: only this statement
/// failed (its seq is logged under another token), a surrounding
/// transaction is intact.
fn insert_deposit(conn: &Connection, entry: &DepositEntry) -> Result<bool, (StoreError, bool)> {
    let mut st = conn
        .prepare_cached(
            "INSERT INTO deposits (seq, token, payload) VALUES (?1, ?2, ?3)
             ON CONFLICT(token) DO NOTHING",
        )
        .map_err(|e| (be(e), false))?;
    match st.execute(params![entry.seq as i64, entry.token, entry.payload]) {
        Ok(n) => Ok(n == 1),
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY =>
        {
            Err((
                StoreError::Backend(format!(
                    "deposit seq {} is already logged with another token",
                    entry.seq
                )),
                true,
            ))
        }
        Err(e) => Err((be(e), false)),
    }
}

/// Appends one deposit ([`crate::store::Store::append_deposit`]).
pub(super) fn append(conn: &Connection, entry: &DepositEntry) -> Result<bool, StoreError> {
    check_deposit(entry)?;
    insert_deposit(conn, entry).map_err(|(e, _)| e)
}

/// Appends several deposits in one immediate transaction: one commit, one
/// fsync. Entries apply in order as [`append`] would; an entry refused on
/// its own (bad value, seq taken) fails alone, and any other error or a
/// failed commit fails every entry that was not refused on its own, with
/// nothing written.
pub(super) fn append_all(
    conn: &mut Connection,
    entries: &[DepositEntry],
) -> Vec<Result<bool, StoreError>> {
    if entries.len() < 2 {
        return entries.iter().map(|e| append(conn, e)).collect();
    }
    let mut results: Vec<Option<Result<bool, StoreError>>> = entries
        .iter()
        .map(|e| check_deposit(e).err().map(Err))
        .collect();
    let tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(e) => return fill_failed(results, &be(e)),
    };
    for (e, slot) in entries.iter().zip(results.iter_mut()) {
        if slot.is_some() {
            continue;
        }
        match insert_deposit(&tx, e) {
            Ok(fresh) => *slot = Some(Ok(fresh)),
            Err((err, true)) => *slot = Some(Err(err)),
            Err((err, false)) => {
                drop(tx); // rolls back
                return fill_failed(only_refused(results), &err);
            }
        }
    }
    match tx.commit() {
        Ok(()) => fill_failed(results, &StoreError::Backend("entry skipped".into())),
        Err(e) => fill_failed(only_refused(results), &be(e)),
    }
}

/// Keeps the entries refused on their own; the rest are to be filled in.
fn only_refused(
    results: Vec<Option<Result<bool, StoreError>>>,
) -> Vec<Option<Result<bool, StoreError>>> {
    results
        .into_iter()
        .map(|r| r.filter(|r| r.is_err()))
        .collect()
}

/// Deposits with `seq > after`, ascending by `seq`.
pub(super) fn read_deposits(
    conn: &Connection,
    after: u64,
) -> Result<Vec<DepositEntry>, StoreError> {
    let Ok(after) = i64::try_from(after) else {
        return Ok(Vec::new()); // no stored seq exceeds i64::MAX
    };
    let mut st = conn
        .prepare_cached("SELECT seq, token, payload FROM deposits WHERE seq > ?1 ORDER BY seq")
        .map_err(be)?;
    let rows = st
        .query_map(params![after], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get(2)?))
        })
        .map_err(be)?;
    let mut out = Vec::new();
    for r in rows {
        let (seq, token, payload) = r.map_err(be)?;
        out.push(DepositEntry {
            seq: to_u64("seq", seq)?,
            token,
            payload,
        });
    }
    Ok(out)
}

/// Whether a deposit with `token` is logged (the caller checks the token).
pub(super) fn has(conn: &Connection, token: &str) -> Result<bool, StoreError> {
    let mut st = conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM deposits WHERE token = ?1)")
        .map_err(be)?;
    st.query_row(params![token], |r| r.get(0)).map_err(be)
}

/// The highest logged seq (0 when the log is empty).
pub(super) fn last_seq(conn: &Connection) -> Result<u64, StoreError> {
    let mut st = conn
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM deposits")
        .map_err(be)?;
    let v: i64 = st.query_row([], |r| r.get(0)).map_err(be)?;
    to_u64("seq", v)
}

/// Deletes the deposits with `seq ≤ up_to` except the highest logged one.
pub(super) fn prune(conn: &Connection, up_to: u64) -> Result<u64, StoreError> {
    let up_to = i64::try_from(up_to).unwrap_or(i64::MAX);
    let n = conn
        .execute(
            "DELETE FROM deposits WHERE seq <= ?1
             AND seq < (SELECT COALESCE(MAX(seq), 0) FROM deposits)",
            params![up_to],
        )
        .map_err(be)?;
    Ok(n as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_sits_beside_its_main_file() {
        let cases = [
            ("/data/router.db", "/data/router-log.db"),
            ("/data/store", "/data/store-log"),
            ("rel/x.sqlite", "rel/x-log.sqlite"),
            ("router.db", "router-log.db"),
        ];
        for (main, want) in cases {
            assert_eq!(log_path(Path::new(main)), PathBuf::from(want), "{main}");
        }
    }
}
