//! One suite for every `Store` backend: each check is written once against
//! a [`Backend`] (how to open, reopen and poke the raw storage) and run for
//! `MemoryStore`, `SqliteStore` and `PgStore` (modules `memory::`,
//! `sqlite::`, `postgres::`). The PostgreSQL arm uses `ROUTER_TEST_PG` or a
//! throwaway cluster (`support::pg`), and skips with a printed message only
//! when no server binary exists.

use crate::support;

use std::path::PathBuf;

use router::store::{
    DepositEntry, MemoryStore, PgStore, Row, SqliteStore, Store, StoreError, Table, Write,
    SCHEMA_VERSION,
};
use sha2::{Digest, Sha256};

#[path = "store_suite/backends.rs"]
mod backends;
use backends::*;

#[path = "store_suite/deposits.rs"]
mod deposits;
// Payloads of a mebibyte and more (some streamed into their rows).
mod payloads;
use deposits::{deposit_batches, deposit_log, retention};
use payloads::{large_payload, streamed_payload};

// ---------------------------------------------------------------- helpers

fn row(key: &str, version: u64, payload: &str) -> Row {
    Row {
        key: key.to_string(),
        version,
        payload: payload.to_string(),
    }
}

fn dep(seq: u64, token: &str, payload: &str) -> DepositEntry {
    DepositEntry {
        seq,
        token: token.to_string(),
        payload: payload.to_string(),
    }
}

/// Everything a store holds, through its own API.
#[derive(Debug, PartialEq)]
struct Snapshot {
    tables: Vec<Vec<Row>>,
    deposits: Vec<DepositEntry>,
    last_seq: u64,
}

fn snapshot(s: &mut dyn Store) -> Snapshot {
    Snapshot {
        tables: Table::ALL.iter().map(|t| s.load(*t).unwrap()).collect(),
        deposits: s.deposits_after(0).unwrap(),
        last_seq: s.last_seq().unwrap(),
    }
}

fn seed(s: &mut dyn Store) {
    s.upsert(
        Table::Devices,
        &[row("dev-b", 3, r#"{"trust":0.5}"#), row("dev-a", 1, "{}")],
    )
    .unwrap();
    s.upsert(Table::Targets, &[row("t1", 7, r#"{"obs":[1,2]}"#)])
        .unwrap();
    s.upsert(Table::Meta, &[row("prices", 2, r#"{"p":1.5}"#)])
        .unwrap();
    assert!(s
        .append_deposit(&dep(1, "tok-1", r#"{"ok":true}"#))
        .unwrap());
    assert!(s
        .append_deposit(&dep(2, "tok-2", r#"{"ok":false}"#))
        .unwrap());
}

// ------------------------------------------------------------ the checks

fn upsert_get_load(b: &dyn Backend) {
    let mut s = b.open().unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    for t in Table::ALL {
        assert_eq!(s.load(t).unwrap(), vec![]);
    }
    s.upsert(Table::Targets, &[]).unwrap();
    let rows = vec![
        row("b", 1, r#"{"x":2}"#),
        row("a", 2, r#"{"x":1}"#),
        row("c", 0, ""),
        row("aa", u64::try_from(i64::MAX).unwrap(), "[]"),
    ];
    s.upsert(Table::Targets, &rows).unwrap();
    s.upsert(Table::Devices, &[row("a", 9, "dev")]).unwrap();
    assert_eq!(s.get(Table::Targets, "a").unwrap(), Some(rows[1].clone()));
    assert_eq!(s.get(Table::Targets, "c").unwrap(), Some(rows[2].clone()));
    assert_eq!(s.get(Table::Targets, "zz").unwrap(), None);
    assert_eq!(s.get(Table::Meta, "a").unwrap(), None);
    assert_eq!(
        s.get(Table::Devices, "a").unwrap(),
        Some(row("a", 9, "dev"))
    );
    let mut sorted = rows.clone();
    sorted.sort_by(|x, y| x.key.cmp(&y.key));
    assert_eq!(s.load(Table::Targets).unwrap(), sorted);
    assert_eq!(s.load(Table::Devices).unwrap(), vec![row("a", 9, "dev")]);
    assert_eq!(s.load(Table::Meta).unwrap(), vec![]);
}

fn version_guard(b: &dyn Backend) {
    let mut s = b.open().unwrap();
    s.upsert(Table::Devices, &[row("d", 5, "five")]).unwrap();
    // Stale: a no-op.
    s.upsert(Table::Devices, &[row("d", 4, "four")]).unwrap();
    assert_eq!(
        s.get(Table::Devices, "d").unwrap(),
        Some(row("d", 5, "five"))
    );
    // Equal: overwrites (idempotent retry).
    s.upsert(Table::Devices, &[row("d", 5, "five again")])
        .unwrap();
    assert_eq!(
        s.get(Table::Devices, "d").unwrap(),
        Some(row("d", 5, "five again"))
    );
    // Newer: replaces.
    s.upsert(Table::Devices, &[row("d", 6, "six")]).unwrap();
    assert_eq!(
        s.get(Table::Devices, "d").unwrap(),
        Some(row("d", 6, "six"))
    );
    // One batch, several writes to one key: applied in order.
    s.upsert(
        Table::Devices,
        &[
            row("e", 7, "a"),
            row("e", 7, "b"),
            row("e", 6, "c"),
            row("d", 1, "stale"),
        ],
    )
    .unwrap();
    assert_eq!(s.get(Table::Devices, "e").unwrap(), Some(row("e", 7, "b")));
    assert_eq!(
        s.get(Table::Devices, "d").unwrap(),
        Some(row("d", 6, "six"))
    );
    // The guard is per table.
    s.upsert(Table::Meta, &[row("d", 1, "meta")]).unwrap();
    assert_eq!(s.get(Table::Meta, "d").unwrap(), Some(row("d", 1, "meta")));
}

fn large_batch(b: &dyn Backend) {
    // A snapshot of many changed targets (PostgreSQL pipelines its rows a
    // chunk at a time): every row lands, in one transaction with the state
    // row, and reads back in key order a page at a time.
    let mut s = b.open().unwrap();
    let rows: Vec<Row> = (0..5_000)
        .map(|i| row(&format!("t-{i:05}"), 1 + i % 7, &format!("{{\"i\":{i}}}")))
        .collect();
    let state = [row("snapshot", 3, "{\"s\":3}")];
    s.write_all(&[
        Write::Upsert(Table::Meta, &state),
        Write::Upsert(Table::Targets, &rows),
    ])
    .unwrap();
    let mut read = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = s
            .load_page(Table::Targets, after.as_deref(), 1_700)
            .unwrap();
        let Some(last) = page.last() else { break };
        after = Some(last.key.clone());
        read.extend(page);
    }
    assert_eq!(read, rows);
    assert_eq!(
        s.get(Table::Meta, "snapshot").unwrap(),
        Some(state[0].clone())
    );
    // A poisoned row at the very end rolls back every chunk before it.
    if !b.poison() {
        return;
    }
    let before = snapshot(&mut *s);
    let mut newer: Vec<Row> = rows
        .iter()
        .map(|r| row(&r.key, r.version + 10, "{}"))
        .collect();
    newer.push(row("poison", 1, "x"));
    let err = s
        .write_all(&[
            Write::Upsert(Table::Meta, &[row("snapshot", 4, "{\"s\":4}")]),
            Write::Upsert(Table::Targets, &newer),
        ])
        .unwrap_err();
    assert!(matches!(err, StoreError::Backend(_)), "{err:?}");
    assert_eq!(snapshot(&mut *s), before);
}

fn batch_atomicity(b: &dyn Backend) {
    // A batch with a bad row: refused before anything is written, on
    // every backend.
    let mut s = b.open().unwrap();
    s.upsert(Table::Targets, &[row("keep", 1, "old")]).unwrap();
    let before = snapshot(&mut *s);
    let err = s
        .upsert(
            Table::Targets,
            &[row("keep", 2, "new"), row("fresh", 1, "x"), row("", 1, "x")],
        )
        .unwrap_err();
    assert!(matches!(err, StoreError::BadKey(_)), "{err:?}");
    assert_eq!(snapshot(&mut *s), before);
    drop(s);

    // A batch the backend itself fails half-way: rolled back.
    if !b.poison() {
        return;
    }
    let mut s = b.open().unwrap();
    let before = snapshot(&mut *s);
    let err = s
        .upsert(
            Table::Targets,
            &[
                row("keep", 2, "new"),
                row("fresh", 1, "x"),
                row("poison", 1, "x"),
            ],
        )
        .unwrap_err();
    assert!(matches!(err, StoreError::Backend(_)), "{err:?}");
    assert_eq!(snapshot(&mut *s), before);
    // A batch of several tables whose last statement fails: the state row
    // written first is rolled back with it (a snapshot, `write_all`).
    let before = snapshot(&mut *s);
    let keep = ["keep".to_string()];
    let err = s
        .write_all(&[
            Write::Upsert(Table::Meta, &[row("snapshot", 9, "{\"s\":9}")]),
            Write::Delete(Table::Targets, &keep),
            Write::Upsert(Table::Targets, &[row("poison", 1, "x")]),
        ])
        .unwrap_err();
    assert!(matches!(err, StoreError::Backend(_)), "{err:?}");
    assert_eq!(snapshot(&mut *s), before);
    // The store is still usable afterwards.
    s.upsert(Table::Targets, &[row("fresh", 1, "x")]).unwrap();
    assert_eq!(
        s.get(Table::Targets, "fresh").unwrap(),
        Some(row("fresh", 1, "x"))
    );
}

fn batch_isolation(b: &dyn Backend) {
    // Concurrent readers through a second handle never see half a batch.
    if !b.persistent() {
        return;
    }
    const KEYS: usize = 40;
    const ROUNDS: u64 = 30;
    let mut w = b.open().unwrap();
    let mut r = b.open().unwrap();
    let writer = std::thread::spawn(move || {
        for v in 1..=ROUNDS {
            let batch: Vec<Row> = (0..KEYS)
                .map(|i| row(&format!("k{i:03}"), v, &format!("{{\"v\":{v}}}")))
                .collect();
            w.upsert(Table::Targets, &batch).unwrap();
        }
    });
    let mut seen = 0;
    loop {
        let done = writer.is_finished();
        let rows = r.load(Table::Targets).unwrap();
        if !rows.is_empty() {
            assert_eq!(rows.len(), KEYS, "a reader saw part of a batch");
            let v = rows[0].version;
            assert!(
                rows.iter().all(|x| x.version == v),
                "mixed versions: {rows:?}"
            );
            seen += 1;
        }
        if done {
            break;
        }
    }
    writer.join().unwrap();
    assert!(seen > 0);
}

fn bad_input(b: &dyn Backend) {
    let mut s = b.open().unwrap();
    seed(&mut *s);
    let before = snapshot(&mut *s);
    let long = "k".repeat(513);
    let bad_keys = ["", long.as_str(), "nul\0key"];
    for k in bad_keys {
        for t in Table::ALL {
            let err = s
                .upsert(t, &[row("ok", 1, "x"), row(k, 1, "x")])
                .unwrap_err();
            assert!(matches!(err, StoreError::BadKey(_)), "{k:?}: {err:?}");
            assert_eq!(s.get(t, k).unwrap(), None);
        }
        let err = s.append_deposit(&dep(50, k, "x")).unwrap_err();
        assert!(matches!(err, StoreError::BadKey(_)), "{k:?}: {err:?}");
        assert!(!s.has_deposit(k).unwrap());
    }
    let big = u64::try_from(i64::MAX).unwrap() + 1;
    let err = s.upsert(Table::Meta, &[row("m", big, "x")]).unwrap_err();
    assert!(matches!(err, StoreError::BadValue(_)), "{err:?}");
    let err = s
        .upsert(Table::Meta, &[row("m", u64::MAX, "x")])
        .unwrap_err();
    assert!(matches!(err, StoreError::BadValue(_)), "{err:?}");
    let err = s
        .upsert(Table::Meta, &[row("m", 1, "nul\0payload")])
        .unwrap_err();
    assert!(matches!(err, StoreError::BadValue(_)), "{err:?}");
    let err = s.append_deposit(&dep(big, "tok-big", "x")).unwrap_err();
    assert!(matches!(err, StoreError::BadValue(_)), "{err:?}");
    let err = s.append_deposit(&dep(60, "tok-nul", "a\0b")).unwrap_err();
    assert!(matches!(err, StoreError::BadValue(_)), "{err:?}");
    assert_eq!(snapshot(&mut *s), before);
    // Boundaries that are fine: 512 bytes (multi-byte characters included).
    let k512 = format!("{}{}", "é".repeat(255), "ab");
    assert_eq!(k512.len(), 512);
    s.upsert(Table::Meta, &[row(&k512, 1, "x")]).unwrap();
    assert_eq!(s.get(Table::Meta, &k512).unwrap(), Some(row(&k512, 1, "x")));
    assert!(s.append_deposit(&dep(70, &k512, "x")).unwrap());
    assert!(s.has_deposit(&k512).unwrap());
}

fn reopen_persistence(b: &dyn Backend) {
    if !b.persistent() {
        return;
    }
    let mut s = b.open().unwrap();
    seed(&mut *s);
    s.upsert(Table::Targets, &[row("t1", 8, "newer")]).unwrap();
    let before = snapshot(&mut *s);
    drop(s);
    let mut s = b.open().unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(snapshot(&mut *s), before);
    assert!(!s.append_deposit(&dep(1, "tok-1", "again")).unwrap());
    assert!(s.append_deposit(&dep(3, "tok-3", "{}")).unwrap());
    drop(s);
    // Opening twice more: migrations are not re-applied.
    let mut s = b.open().unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(s.last_seq().unwrap(), 3);
    assert_eq!(
        s.get(Table::Targets, "t1").unwrap(),
        Some(row("t1", 8, "newer"))
    );
}

fn schema_too_new(b: &dyn Backend) {
    let mut s = b.open().unwrap();
    seed(&mut *s);
    drop(s);
    if !b.stamp(SCHEMA_VERSION + 1) {
        return;
    }
    let before = b.fingerprint();
    for _ in 0..2 {
        match b.open() {
            Err(StoreError::SchemaTooNew { found, known }) => {
                assert_eq!((found, known), (SCHEMA_VERSION + 1, SCHEMA_VERSION));
            }
            Err(e) => panic!("expected SchemaTooNew, got {e:?}"),
            Ok(_) => panic!("expected SchemaTooNew, the store opened"),
        }
        assert_eq!(b.fingerprint(), before, "a refused open changed the store");
    }
}

fn unicode_keys(b: &dyn Backend) {
    let mut s = b.open().unwrap();
    // Byte order differs from most locales' order ("B" < "a" < "é" < "日").
    let keys = [
        "a",
        "B",
        "é",
        "e\u{301}",
        "Z",
        "日本語",
        "😀 grin",
        "Ωmega",
        "ß",
        "a b",
        "A",
        "naïve/路径?q=1",
    ];
    let rows: Vec<Row> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| row(k, i as u64, &format!("{{\"k\":\"{k}\"}}")))
        .collect();
    s.upsert(Table::Targets, &rows).unwrap();
    for r in &rows {
        assert_eq!(s.get(Table::Targets, &r.key).unwrap(), Some(r.clone()));
        assert!(s
            .append_deposit(&dep(r.version + 1, &r.key, &r.payload))
            .unwrap());
        assert!(s.has_deposit(&r.key).unwrap());
    }
    let mut sorted = rows.clone();
    sorted.sort_by(|x, y| x.key.as_bytes().cmp(y.key.as_bytes()));
    assert_eq!(s.load(Table::Targets).unwrap(), sorted);
    // "é" precomposed and decomposed are different keys.
    assert_ne!(
        s.get(Table::Targets, "é").unwrap(),
        s.get(Table::Targets, "e\u{301}").unwrap()
    );
}

macro_rules! suite {
    ($($check:ident),* $(,)?) => {
        mod memory {
            $( #[test] fn $check() { super::$check(&super::MemoryBackend) } )*
        }
        mod sqlite {
            $( #[test] fn $check() { super::$check(&super::SqliteBackend::new()) } )*
        }
        mod postgres {
            $(
                #[test]
                fn $check() {
                    if let Some(b) = super::PgBackend::new() {
                        super::$check(&b)
                    }
                }
            )*
        }
    };
}

suite!(
    upsert_get_load,
    version_guard,
    batch_atomicity,
    large_batch,
    batch_isolation,
    deposit_log,
    deposit_batches,
    bad_input,
    reopen_persistence,
    schema_too_new,
    large_payload,
    streamed_payload,
    unicode_keys,
    retention,
);

// ------------------------------------------------- backend-specific checks

#[path = "store_suite/sqlite_log.rs"]
mod sqlite_log;
#[path = "store_suite/sqlite_only.rs"]
mod sqlite_only;

#[path = "store_suite/postgres_only.rs"]
mod postgres_only;

// ------------------------------------- model check: every backend = memory

#[path = "store_suite/model.rs"]
mod model;
