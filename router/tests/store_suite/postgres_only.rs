//! Checks only the PostgreSQL store has: bad schemas and URLs, concurrent
//! first opens, use from plain threads and from inside a runtime, and
//! reconnecting after the connection drops.

use super::*;

fn server() -> Option<&'static support::pg::PgServer> {
    support::pg::shared()
}

fn exercise(url: &str, schema: &str) {
    let mut s = PgStore::connect_with_schema(url, schema).unwrap();
    s.upsert(Table::Meta, &[row("m", 1, "x")]).unwrap();
    assert_eq!(s.get(Table::Meta, "m").unwrap(), Some(row("m", 1, "x")));
    let n = s.last_seq().unwrap();
    assert!(s
        .append_deposit(&dep(n + 1, &format!("tok-{n}"), "{}"))
        .unwrap());
}

#[test]
fn from_a_plain_thread() {
    let Some(pg) = server() else { return };
    let g = pg.schema("thread");
    let (url, schema) = (pg.url().to_string(), g.name().to_string());
    std::thread::spawn(move || exercise(&url, &schema))
        .join()
        .unwrap();
}

#[test]
fn from_spawn_blocking_and_inside_a_runtime() {
    let Some(pg) = server() else { return };
    let g = pg.schema("blocking");
    let (url, schema) = (pg.url().to_string(), g.name().to_string());
    for flavor in ["multi", "current"] {
        let rt = match flavor {
            "multi" => tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap(),
            _ => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
        };
        let (u, sc) = (url.clone(), schema.clone());
        rt.block_on(async move {
            tokio::task::spawn_blocking(move || exercise(&u, &sc))
                .await
                .unwrap();
        });
        // Called (blocking) straight from an async context: works,
        // does not panic about nested runtimes.
        let (u, sc) = (url.clone(), schema.clone());
        rt.block_on(async move { exercise(&u, &sc) });
        // A store created outside, used inside and dropped inside.
        let mut s = PgStore::connect_with_schema(&url, &schema).unwrap();
        rt.block_on(async move {
            let h = tokio::task::spawn_blocking(move || {
                s.upsert(Table::Meta, &[row("moved", 1, "y")]).unwrap();
                s
            });
            let mut s = h.await.unwrap();
            assert!(s.get(Table::Meta, "moved").unwrap().is_some());
            drop(s);
        });
    }
}

#[test]
fn concurrent_first_opens_migrate_once() {
    let Some(pg) = server() else { return };
    let g = pg.schema("race");
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (url, schema) = (pg.url().to_string(), g.name().to_string());
            std::thread::spawn(move || {
                let mut s = PgStore::connect_with_schema(&url, &schema).unwrap();
                s.schema_version().unwrap()
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), SCHEMA_VERSION);
    }
    let rows = pg
        .query_text(&format!(
            "SELECT count(*)::text FROM \"{}\".schema_migrations",
            g.name()
        ))
        .unwrap();
    assert_eq!(rows, vec![vec![SCHEMA_VERSION.to_string()]]);
}

#[test]
fn reconnects_after_the_connection_drops() {
    let Some(pg) = server() else { return };
    let g = pg.schema("reconnect");
    let mut s = PgStore::connect_with_schema(pg.url(), g.name()).unwrap();
    s.upsert(Table::Meta, &[row("a", 1, "x")]).unwrap();
    pg.exec(&format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE pid <> pg_backend_pid() AND datname = current_database()
           AND query LIKE '%\"{}\"%'",
        g.name()
    ))
    .unwrap();
    // The call that finds the connection dead may fail; a retry (every
    // write is idempotent) succeeds on a new connection.
    let mut ok = false;
    for _ in 0..3 {
        if s.upsert(Table::Meta, &[row("b", 1, "y")]).is_ok() {
            ok = true;
            break;
        }
    }
    assert!(ok, "no reconnect");
    assert_eq!(s.load(Table::Meta).unwrap().len(), 2);
}

#[test]
fn bad_schema_and_url() {
    let Some(pg) = server() else { return };
    for bad in [
        "",
        "Upper",
        "semi;colon",
        "quo\"te",
        "1digit",
        &"x".repeat(64),
    ] {
        let err = PgStore::connect_with_schema(pg.url(), bad).unwrap_err();
        assert!(matches!(err, StoreError::Backend(_)), "{bad:?}: {err:?}");
    }
    let err = PgStore::connect("not a url ::").unwrap_err();
    assert!(matches!(err, StoreError::Backend(_)), "{err:?}");
    // Nothing listens on port 1.
    let err = PgStore::connect("postgres://postgres@127.0.0.1:1/postgres").unwrap_err();
    assert!(matches!(err, StoreError::Backend(_)), "{err:?}");
}
