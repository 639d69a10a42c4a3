//! The SQL of the SQLite store's keyed tables: one statement per table
//! and operation (table names cannot be bound as parameters), and the
//! reads and deletes of rows that several calls share.

use rusqlite::{params, Connection};

use super::{be, to_u64};
use crate::store::{check_key, Row, StoreError, Table};

pub(super) fn upsert_sql(table: Table) -> &'static str {
    match table {
        Table::Devices => {
            "INSERT INTO devices (key, version, payload) VALUES (?1, ?2, ?3)
             ON CONFLICT(key) DO UPDATE SET version = excluded.version, payload = excluded.payload
             WHERE excluded.version >= devices.version"
        }
        Table::Targets => {
            "INSERT INTO targets (key, version, payload) VALUES (?1, ?2, ?3)
             ON CONFLICT(key) DO UPDATE SET version = excluded.version, payload = excluded.payload
             WHERE excluded.version >= targets.version"
        }
        Table::Meta => {
            "INSERT INTO meta (key, version, payload) VALUES (?1, ?2, ?3)
             ON CONFLICT(key) DO UPDATE SET version = excluded.version, payload = excluded.payload
             WHERE excluded.version >= meta.version"
        }
        Table::Leases => {
            "INSERT INTO leases (key, version, payload) VALUES (?1, ?2, ?3)
             ON CONFLICT(key) DO UPDATE SET version = excluded.version, payload = excluded.payload
             WHERE excluded.version >= leases.version"
        }
    }
}

pub(super) fn get_sql(table: Table) -> &'static str {
    match table {
        Table::Devices => "SELECT key, version, payload FROM devices WHERE key = ?1",
        Table::Targets => "SELECT key, version, payload FROM targets WHERE key = ?1",
        Table::Meta => "SELECT key, version, payload FROM meta WHERE key = ?1",
        Table::Leases => "SELECT key, version, payload FROM leases WHERE key = ?1",
    }
}

pub(super) fn load_sql(table: Table) -> &'static str {
    match table {
        Table::Devices => "SELECT key, version, payload FROM devices ORDER BY key",
        Table::Targets => "SELECT key, version, payload FROM targets ORDER BY key",
        Table::Meta => "SELECT key, version, payload FROM meta ORDER BY key",
        Table::Leases => "SELECT key, version, payload FROM leases ORDER BY key",
    }
}

/// Up to `?2` rows after key `?1`, in key order.
pub(super) fn page_sql(table: Table) -> &'static str {
    match table {
        Table::Devices => {
            "SELECT key, version, payload FROM devices WHERE key > ?1 ORDER BY key LIMIT ?2"
        }
        Table::Targets => {
            "SELECT key, version, payload FROM targets WHERE key > ?1 ORDER BY key LIMIT ?2"
        }
        Table::Meta => {
            "SELECT key, version, payload FROM meta WHERE key > ?1 ORDER BY key LIMIT ?2"
        }
        Table::Leases => {
            "SELECT key, version, payload FROM leases WHERE key > ?1 ORDER BY key LIMIT ?2"
        }
    }
}

pub(super) fn row_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<(String, i64, String)> {
    Ok((r.get(0)?, r.get(1)?, payload_at(r, 2)?))
}

/// The payload in column `i`: text, or the UTF-8 bytes of a payload that
/// was streamed in as a blob (`SqliteStore::upsert_one`).
fn payload_at(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<String> {
    use rusqlite::types::ValueRef;
    match r.get_ref(i)? {
        ValueRef::Text(bytes) | ValueRef::Blob(bytes) => {
            std::str::from_utf8(bytes).map(str::to_string).map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(
                    i,
                    rusqlite::types::Type::Blob,
                    Box::new(e),
                )
            })
        }
        other => Err(rusqlite::Error::InvalidColumnType(
            i,
            "payload".into(),
            other.data_type(),
        )),
    }
}

/// Deletes the rows of `table` keyed by `keys` (keys [`check_key`]
/// refuses are skipped).
pub(super) fn delete_keys(
    conn: &Connection,
    table: Table,
    keys: &[String],
) -> Result<(), StoreError> {
    let sql = format!("DELETE FROM {} WHERE key = ?1", table.name());
    let mut st = conn.prepare_cached(&sql).map_err(be)?;
    for k in keys.iter().filter(|k| check_key(k).is_ok()) {
        st.execute(params![k]).map_err(be)?;
    }
    Ok(())
}

/// The rows `sql` (a keyed table's `key, version, payload`) selects.
pub(super) fn rows_of<P: rusqlite::Params>(
    conn: &Connection,
    sql: &str,
    params: P,
) -> Result<Vec<Row>, StoreError> {
    let mut st = conn.prepare_cached(sql).map_err(be)?;
    let rows = st.query_map(params, row_of).map_err(be)?;
    let mut out = Vec::new();
    for r in rows {
        let (key, version, payload) = r.map_err(be)?;
        out.push(Row {
            key,
            version: to_u64("version", version)?,
            payload,
        });
    }
    Ok(out)
}
