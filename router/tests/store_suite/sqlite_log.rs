//! The SQLite store's log file (deposits and the leases' rows beside the
//! main file): it commits while another connection holds the main file's
//! write lock, a snapshot's batch writes both files, an older file's log
//! rows move into it at open (a second move after a crash between its two
//! steps is harmless), and a log file of a newer layout is refused.

use super::*;
use router::store::{log_path, LOG_VERSION, SQLITE_FILE, SQLITE_LOG_FILE};

#[test]
fn the_log_file_sits_beside_the_main_file() {
    let b = SqliteBackend::new();
    let s = SqliteStore::open_dir(&b.dir).unwrap();
    assert_eq!(s.path(), b.dir.join(SQLITE_FILE));
    assert_eq!(s.log_path(), b.dir.join(SQLITE_LOG_FILE));
    assert_eq!(
        log_path(&b.dir.join(SQLITE_FILE)),
        b.dir.join(SQLITE_LOG_FILE)
    );
    let log = b.raw_log();
    let mode: String = log
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let v: u32 = log
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, LOG_VERSION);
}

/// What a snapshot's long write did to the store writer: with the main
/// file's write lock held by another connection (as a snapshot's
/// transaction holds it), the writer's handle logs deposits and writes a
/// lease's row without waiting for it. Were they still in the main file,
/// each call would wait out the 5 s busy timeout and fail.
#[test]
fn deposits_and_leases_commit_while_the_main_file_is_held() {
    let b = SqliteBackend::new();
    let s = SqliteStore::open_dir(&b.dir).unwrap();
    let mut writer = s.concurrent_handle().expect("a second handle on the files");
    let holder = b.raw();
    holder
        .execute_batch("BEGIN IMMEDIATE; INSERT INTO targets VALUES ('held', 1, '{}');")
        .unwrap();
    let results = writer.append_deposits(&[dep(1, "tok-1", "{}"), dep(2, "tok-2", "{}")]);
    assert!(results.iter().all(|r| matches!(r, Ok(true))), "{results:?}");
    writer
        .upsert(Table::Leases, &[row("lease-1", 1, "{}")])
        .unwrap();
    assert!(writer.has_deposit("tok-2").unwrap());
    holder.execute_batch("COMMIT").unwrap();
    drop((s, writer));
    let mut s = SqliteStore::open_dir(&b.dir).unwrap();
    assert_eq!(s.last_seq().unwrap(), 2);
    assert_eq!(
        s.load(Table::Leases).unwrap(),
        vec![row("lease-1", 1, "{}")]
    );
    assert_eq!(
        s.get(Table::Targets, "held").unwrap(),
        Some(row("held", 1, "{}"))
    );
}

/// A snapshot's batch: its rows in the main file, its ended leases'
/// deletions in the log, both applied.
#[test]
fn a_batch_writes_both_files() {
    let b = SqliteBackend::new();
    let mut s = SqliteStore::open_dir(&b.dir).unwrap();
    s.upsert(
        Table::Leases,
        &[row("ended", 1, "{}"), row("open", 1, "{}")],
    )
    .unwrap();
    let targets = [row("t1", 5, "{}")];
    let meta = [row("snapshot", 5, "{}")];
    s.write_all(&[
        Write::Upsert(Table::Targets, &targets),
        Write::Upsert(Table::Meta, &meta),
        Write::Delete(Table::Leases, &["ended".to_string()]),
    ])
    .unwrap();
    assert_eq!(
        s.get(Table::Targets, "t1").unwrap(),
        Some(row("t1", 5, "{}"))
    );
    assert_eq!(s.load(Table::Leases).unwrap(), vec![row("open", 1, "{}")]);
    let in_main: i64 = b
        .raw()
        .query_row("SELECT COUNT(*) FROM leases", [], |r| r.get(0))
        .unwrap();
    assert_eq!(in_main, 0, "the main file's leases table stays empty");
}

/// Writes a file as a build before the log file left it (schema version
/// 3, deposits and leases in the main file).
fn version_3_file(f: &std::path::Path) {
    let c = rusqlite::Connection::open(f).unwrap();
    c.execute_batch(super::sqlite_only::VERSION_1_TABLES)
        .unwrap();
    c.execute_batch(
        "CREATE TABLE leases (key TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL, payload TEXT NOT NULL);
         CREATE TABLE leadership (id INTEGER PRIMARY KEY NOT NULL CHECK (id = 1), term INTEGER NOT NULL,
             holder TEXT NOT NULL, url TEXT NOT NULL, expires_at REAL NOT NULL);
         INSERT INTO schema_migrations (version) VALUES (1), (2), (3);
         INSERT INTO meta VALUES ('snapshot', 3, '{}');
         INSERT INTO deposits VALUES (6, 'tok-6', '{\"a\":6}'), (7, 'tok-7', '{\"a\":7}');
         INSERT INTO leases VALUES ('lease-1', 2, '{\"l\":1}');",
    )
    .unwrap();
}

#[test]
fn an_older_files_deposits_and_leases_move_into_the_log() {
    let b = SqliteBackend::new();
    std::fs::create_dir_all(&b.dir).unwrap();
    let f = b.dir.join(SQLITE_FILE);
    version_3_file(&f);
    let want_deposits = vec![dep(6, "tok-6", "{\"a\":6}"), dep(7, "tok-7", "{\"a\":7}")];
    let want_leases = vec![row("lease-1", 2, "{\"l\":1}")];
    {
        let mut s = SqliteStore::open(&f).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        assert_eq!(s.deposits_after(0).unwrap(), want_deposits);
        assert_eq!(s.last_seq().unwrap(), 7);
        assert_eq!(s.load(Table::Leases).unwrap(), want_leases);
        assert_eq!(s.get(Table::Meta, "snapshot").unwrap().unwrap().version, 3);
    }
    let count = |c: &rusqlite::Connection, t: &str| -> i64 {
        c.query_row(&format!("SELECT COUNT(*) FROM {t}"), [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(
        (count(&b.raw(), "deposits"), count(&b.raw(), "leases")),
        (0, 0)
    );
    assert_eq!(
        (
            count(&b.raw_log(), "deposits"),
            count(&b.raw_log(), "leases")
        ),
        (2, 1)
    );
    // A crash between the copy and the delete: the main file holds the
    // rows again beside their copies in the log. The next open skips the
    // copies and empties the main file; nothing doubles or fails.
    b.raw()
        .execute_batch(
            "INSERT INTO deposits VALUES (6, 'tok-6', '{\"a\":6}'), (7, 'tok-7', '{\"a\":7}');
             INSERT INTO leases VALUES ('lease-1', 1, '{\"stale\":1}');",
        )
        .unwrap();
    let mut s = SqliteStore::open(&f).unwrap();
    assert_eq!(s.deposits_after(0).unwrap(), want_deposits);
    assert_eq!(
        s.load(Table::Leases).unwrap(),
        want_leases,
        "the newer version kept"
    );
    assert_eq!(
        (count(&b.raw(), "deposits"), count(&b.raw(), "leases")),
        (0, 0)
    );
}

#[test]
fn a_log_file_of_a_newer_layout_is_refused_untouched() {
    let b = SqliteBackend::new();
    drop(SqliteStore::open_dir(&b.dir).unwrap());
    let newer = LOG_VERSION + 1;
    b.raw_log()
        .execute_batch(&format!("PRAGMA user_version = {newer}"))
        .unwrap();
    let before = std::fs::read(b.dir.join(SQLITE_LOG_FILE)).unwrap();
    match SqliteStore::open_dir(&b.dir) {
        Err(StoreError::SchemaTooNew { found, known }) => {
            assert_eq!((found, known), (newer, LOG_VERSION))
        }
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
    assert_eq!(std::fs::read(b.dir.join(SQLITE_LOG_FILE)).unwrap(), before);
}
