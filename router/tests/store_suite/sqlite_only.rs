//! Checks only the SQLite store has: its file settings (WAL, synchronous),
//! a file that is not a database, a file of an older schema migrated, and
//! acknowledged deposits surviving a SIGKILL of the writing process.

use super::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn file_settings() {
    let b = SqliteBackend::new();
    let s = b.open().unwrap();
    let raw = b.raw();
    let mode: String = raw
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let versions: Vec<i64> = raw
        .prepare("SELECT version FROM schema_migrations ORDER BY version")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(versions, (1..=SCHEMA_VERSION as i64).collect::<Vec<_>>());
    drop(s);
}

/// A payload past the threshold is streamed into its row (stored as the
/// bytes of a blob, not bound as text), one at or under it bound as text;
/// both read back as the text written.
#[test]
fn a_large_payload_is_streamed_in_and_a_small_one_bound() {
    let b = SqliteBackend::new();
    let mut s = b.open().unwrap();
    let n = router::store::STREAMED_PAYLOAD;
    let (small, large) = ("s".repeat(n), "l".repeat(n + 1));
    s.upsert(Table::Meta, &[row("at", 1, &small), row("past", 1, &large)])
        .unwrap();
    let raw = b.raw();
    let kind = |key: &str| -> String {
        raw.query_row(
            "SELECT typeof(payload) FROM meta WHERE key = ?1",
            [key],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(
        (kind("at").as_str(), kind("past").as_str()),
        ("text", "blob")
    );
    assert_eq!(
        s.get(Table::Meta, "past").unwrap(),
        Some(row("past", 1, &large))
    );
    assert_eq!(
        s.get(Table::Meta, "at").unwrap(),
        Some(row("at", 1, &small))
    );
}

#[test]
fn not_a_database() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("router.db");
    std::fs::write(&f, vec![0x5a; 8192]).unwrap();
    let err = SqliteStore::open(&f).unwrap_err();
    assert!(matches!(err, StoreError::Backend(_)), "{err:?}");
    assert_eq!(std::fs::read(&f).unwrap(), vec![0x5a; 8192]);
    // A directory where the file should be.
    let err = SqliteStore::open(tmp.path()).unwrap_err();
    assert!(matches!(err, StoreError::Backend(_)), "{err:?}");
}

/// The child half of `acked_deposits_survive_sigkill`: appends deposits
/// forever, printing each acknowledged seq. Ignored unless run by it.
#[test]
#[ignore = "run by acked_deposits_survive_sigkill"]
fn sigkill_child() {
    let Some(dir) = std::env::var_os("ROUTER_SIGKILL_DIR") else {
        return;
    };
    let mut s = SqliteStore::open_dir(std::path::Path::new(&dir)).unwrap();
    let payload = "x".repeat(200);
    for seq in 1.. {
        s.append_deposit(&dep(seq, &format!("tok-{seq}"), &payload))
            .unwrap();
        s.upsert(
            Table::Targets,
            &[row(&format!("t{}", seq % 50), seq, &payload)],
        )
        .unwrap();
        println!("acked {seq}");
    }
}

/// The child test's full name in this binary: this module's path without
/// the crate's name.
fn sigkill_child_name() -> String {
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    format!("{module}::sigkill_child")
}

#[test]
fn acked_deposits_survive_sigkill() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let child_test = sigkill_child_name();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            child_test.as_str(),
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("ROUTER_SIGKILL_DIR", &dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let t0 = Instant::now();
    let mut acked = 0u64;
    for line in out.lines() {
        let line = line.unwrap();
        if let Some(n) = line.strip_prefix("acked ") {
            acked = n.parse().unwrap();
            if acked >= 300 || t0.elapsed() > Duration::from_secs(20) {
                break;
            }
        }
    }
    child.kill().unwrap(); // SIGKILL, mid-write
    child.wait().unwrap();
    assert!(acked >= 10, "the child acknowledged only {acked} deposits");
    let mut s = SqliteStore::open_dir(&dir).unwrap();
    let logged = s.deposits_after(0).unwrap();
    assert!(logged.len() as u64 >= acked, "{} < {acked}", logged.len());
    for (i, e) in logged.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1);
    }
    for seq in acked.saturating_sub(49)..=acked {
        let r = s
            .get(Table::Targets, &format!("t{}", seq % 50))
            .unwrap()
            .unwrap();
        assert!(r.version >= seq);
    }
    eprintln!(
        "SIGKILL after {acked} acknowledged deposits: all {} logged",
        logged.len()
    );
}

/// A file an older build wrote at schema version 1 (no `leases` table) is
/// migrated to this build's version at open, its rows and deposits kept.
#[test]
fn a_version_1_file_gains_the_leases_table_and_keeps_its_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("router.db");
    {
        let c = rusqlite::Connection::open(&f).unwrap();
        c.execute_batch(VERSION_1_TABLES).unwrap();
        c.execute_batch(
            "INSERT INTO schema_migrations (version) VALUES (1);
             INSERT INTO meta VALUES ('snapshot', 3, '{}');
             INSERT INTO deposits VALUES (7, 'tok-7', '{}');",
        )
        .unwrap();
    }
    let mut s = SqliteStore::open(&f).unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(s.get(Table::Meta, "snapshot").unwrap().unwrap().version, 3);
    assert!(s.has_deposit("tok-7").unwrap());
    assert!(s.load(Table::Leases).unwrap().is_empty());
    let row = Row {
        key: "lease-1".into(),
        version: 1,
        payload: "{}".into(),
    };
    s.upsert(Table::Leases, std::slice::from_ref(&row)).unwrap();
    assert_eq!(s.load(Table::Leases).unwrap(), vec![row]);
}

/// The tables of a file schema version 1 wrote (an older build's), in WAL
/// mode, empty.
pub(super) const VERSION_1_TABLES: &str = "PRAGMA journal_mode = WAL;
    CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY NOT NULL,
        applied_at TEXT NOT NULL DEFAULT 'then');
    CREATE TABLE devices (key TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL, payload TEXT NOT NULL);
    CREATE TABLE targets (key TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL, payload TEXT NOT NULL);
    CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL, payload TEXT NOT NULL);
    CREATE TABLE deposits (seq INTEGER PRIMARY KEY NOT NULL, token TEXT NOT NULL UNIQUE, payload TEXT NOT NULL);";
