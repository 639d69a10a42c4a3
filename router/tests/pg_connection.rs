//! The PostgreSQL connection as production runs it: TLS in every `sslmode`
//! against a server with a certificate from a throwaway CA, the statement
//! timeout (a typed error, and the store serving again after it), the pool
//! (a second handle served while a first is blocked) and secrets kept out
//! of errors.
//!
//! The TLS checks need a server with TLS on and a certificate for
//! `localhost` only: the throwaway cluster of the tests (started with one
//! wherever openssl exists) or the CI's (`ci/pg-suite.sh`: `ROUTER_TEST_PG`
//! with `sslmode=verify-full`, `ROUTER_TEST_PG_CA` naming the CA); on a
//! server without TLS they say SKIPPED. The others run on any test server.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use router::store::{PgOptions, PgStore, Row, Store, StoreError, Table};

use crate::support;
use crate::support::pg::{admin_url, PgServer};
use crate::support::routerd::{registration, Routerd};

fn row(key: &str, version: u64) -> Row {
    Row {
        key: key.into(),
        version,
        payload: "{}".into(),
    }
}

/// The test server's `verify-full` URL (host `localhost`) and CA, or
/// `None` after saying why (a server without TLS: no openssl where the
/// throwaway cluster started, or `ROUTER_TEST_PG` without TLS).
fn tls_server() -> Option<(&'static PgServer, String, PathBuf)> {
    let pg = support::pg::shared()?;
    match pg.tls() {
        Some((url, ca)) => Some((pg, url, ca)),
        None => {
            eprintln!(
                "SKIPPED: the test server has no TLS (no openssl for the throwaway \
                 cluster's certificate, or ROUTER_TEST_PG without sslmode=verify-full \
                 and ROUTER_TEST_PG_CA); the TLS checks did not run"
            );
            None
        }
    }
}

/// `url` with its `sslmode` set to `mode`, its `sslrootcert` kept only when
/// `keep_ca`, and its host replaced by `host` when given.
fn variant(url: &str, mode: &str, keep_ca: bool, host: Option<&str>) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let base = match host {
        Some(h) => base.replace("@localhost:", &format!("@{h}:")),
        None => base.to_string(),
    };
    let mut kept: Vec<String> = query
        .split('&')
        .filter(|p| !p.is_empty() && !p.starts_with("sslmode="))
        .filter(|p| keep_ca || !p.starts_with("sslrootcert="))
        .map(str::to_string)
        .collect();
    kept.push(format!("sslmode={mode}"));
    format!("{base}?{}", kept.join("&"))
}

fn opts(schema: &str) -> PgOptions {
    PgOptions {
        schema: schema.into(),
        ..PgOptions::default()
    }
}

#[test]
fn every_call_of_the_suite_runs_over_tls_verified_by_name() {
    let Some((pg, url, _)) = tls_server() else {
        return;
    };
    let g = pg.schema("tls_full");
    let s = PgStore::open(&url, &opts(g.name())).unwrap();
    assert!(s.session_encrypted().unwrap());
}

#[test]
fn verify_full_checks_the_name_and_verify_ca_only_the_chain() {
    let Some((pg, url, _)) = tls_server() else {
        return;
    };
    let g = pg.schema("tls_name");
    // The certificate names localhost, not 127.0.0.1.
    let by_address = variant(&url, "verify-full", true, Some("127.0.0.1"));
    let e = PgStore::open(&by_address, &opts(g.name())).unwrap_err();
    assert!(matches!(e, StoreError::Backend(_)), "{e:?}");
    assert!(e.to_string().contains("certificate"), "{e}");
    let chain_only = variant(&url, "verify-ca", true, Some("127.0.0.1"));
    let s = PgStore::open(&chain_only, &opts(g.name())).unwrap();
    assert!(s.session_encrypted().unwrap());
}

#[test]
fn a_certificate_from_another_ca_is_refused() {
    let Some((pg, url, _)) = tls_server() else {
        return;
    };
    let g = pg.schema("tls_foreign");
    let dir = tempfile::tempdir().unwrap();
    let (key, crt) = (dir.path().join("other.key"), dir.path().join("other.crt"));
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=another CA", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let o = PgOptions {
        ca_file: Some(crt),
        ..opts(g.name())
    };
    let e = PgStore::open(&url, &o).unwrap_err();
    assert!(e.to_string().contains("certificate"), "{e}");
}

#[test]
fn disable_stays_plain_and_require_encrypts_without_a_ca() {
    let Some((pg, url, _)) = tls_server() else {
        return;
    };
    let g = pg.schema("tls_modes");
    let plain = PgStore::open(&variant(&url, "disable", false, None), &opts(g.name()));
    assert!(!plain.unwrap().session_encrypted().unwrap());
    for mode in ["require", "prefer"] {
        // No CA: encrypted, the certificate not checked (libpq's meaning),
        // so even the address the certificate does not name connects.
        let url = variant(&url, mode, false, Some("127.0.0.1"));
        let s = PgStore::open(&url, &opts(g.name())).unwrap();
        assert!(s.session_encrypted().unwrap(), "{mode}");
    }
}

/// A transaction on its own connection, begun with `sql` and held open
/// (its locks with it) until dropped.
struct Held {
    release: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// One row's lock (`SELECT … FOR UPDATE`): a write of that row waits;
/// other rows, reads, and a new connection preparing its statements do not.
fn row_lock(pg: &PgServer, table: &str, key: &str) -> Held {
    Held::take(
        pg,
        format!("BEGIN; SELECT 1 FROM {table} WHERE key = '{key}' FOR UPDATE"),
    )
}

impl Held {
    fn take(pg: &PgServer, sql: String) -> Held {
        let url = admin_url(pg.url());
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .unwrap();
                let h = tokio::spawn(conn);
                client.batch_execute(&sql).await.unwrap();
                held_tx.send(()).unwrap();
                let _ = tokio::task::spawn_blocking(move || release_rx.recv()).await;
                client.batch_execute("COMMIT").await.unwrap();
                drop(client);
                let _ = h.await;
            });
        });
        held_rx.recv().unwrap();
        Held {
            release: Some(release),
            thread: Some(thread),
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.release.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn a_call_past_the_statement_timeout_fails_typed_and_the_store_serves_again() {
    let Some(pg) = support::pg::shared() else {
        return;
    };
    let g = pg.schema("timeout");
    let o = PgOptions {
        statement_timeout: Duration::from_secs(1),
        ..opts(g.name())
    };
    let mut s = PgStore::open(pg.url(), &o).unwrap();
    s.upsert(Table::Devices, &[row("before", 1)]).unwrap();
    let lock = row_lock(pg, &format!("\"{}\".devices", g.name()), "before");
    // Blocked behind the row's lock until the timeout fires.
    let e = s
        .upsert(Table::Devices, &[row("blocked", 1), row("before", 2)])
        .unwrap_err();
    assert!(matches!(e, StoreError::Timeout(_)), "{e:?}");
    assert!(e.to_string().starts_with("store timed out:"), "{e}");
    drop(lock);
    // Served again on a fresh connection, nothing of the timed-out call
    // half-applied: the retry writes it once.
    assert_eq!(s.load(Table::Devices).unwrap(), [row("before", 1)]);
    s.upsert(Table::Devices, &[row("blocked", 1), row("before", 2)])
        .unwrap();
    assert_eq!(
        s.load(Table::Devices).unwrap(),
        [row("before", 2), row("blocked", 1)]
    );
}

#[test]
fn a_second_handle_is_served_while_the_first_waits_on_a_lock() {
    let Some(pg) = support::pg::shared() else {
        return;
    };
    let g = pg.schema("pool");
    let o = PgOptions {
        pool_size: 2,
        statement_timeout: Duration::from_secs(600),
        ..opts(g.name())
    };
    let mut first = PgStore::open(pg.url(), &o).unwrap();
    let mut second = first.concurrent_handle().unwrap();
    first.upsert(Table::Devices, &[row("a", 1)]).unwrap();
    let lock = row_lock(pg, &format!("\"{}\".devices", g.name()), "a");
    let blocked = std::thread::spawn(move || first.upsert(Table::Devices, &[row("a", 2)]));
    // Wait for the event (the first handle's statement waiting on the
    // lock), not for a time.
    let waiting = format!(
        "SELECT count(*)::text FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%\"{}\".devices%'",
        g.name()
    );
    while pg.query_text(&waiting).unwrap() != [["1"]] {
        std::thread::yield_now();
    }
    // The second handle runs on the pool's other connection meanwhile.
    second.upsert(Table::Devices, &[row("b", 1)]).unwrap();
    assert!(second.get(Table::Devices, "b").unwrap().is_some());
    assert!(!blocked.is_finished(), "the row's lock is still held");
    drop(lock);
    blocked.join().unwrap().unwrap();
    assert_eq!(
        second.load(Table::Devices).unwrap(),
        [row("a", 2), row("b", 1)]
    );
}

#[test]
fn no_error_repeats_the_password() {
    let secret = "s3cret-pw";
    for url in [
        // Nothing listens on port 1.
        format!("postgres://router:{secret}@127.0.0.1:1/postgres"),
        format!("postgres://router:{secret}@127.0.0.1:1/postgres?sslmode=allow"),
        format!("postgres://router:{secret}@127.0.0.1:1/postgres?sslmode=verify-full"),
        format!("postgres://router:{secret}@127.0.0.1:1/postgres?nonsense=1"),
        format!("postgres://router:{secret}@127.0.0.1:1/postgres?sslmode=verify-ca&sslrootcert=/no/such.pem"),
    ] {
        let e = PgStore::open(&url, &PgOptions::default()).unwrap_err();
        let shown = format!("{e} {e:?}");
        assert!(!shown.contains(secret), "{shown}");
    }
    // routerd: a refused connection and a store of another scheme, from
    // the flag and from the environment.
    for (flag, env) in [
        (
            Some(format!("postgres://router:{secret}@127.0.0.1:1/postgres")),
            None,
        ),
        (Some(format!("mysql://router:{secret}@127.0.0.1/db")), None),
        (
            None,
            Some(format!("postgres://router:{secret}@127.0.0.1:1/postgres")),
        ),
    ] {
        let data = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_routerd"));
        cmd.args(["--listen", "127.0.0.1:0", "--data"])
            .arg(data.path());
        if let Some(f) = &flag {
            cmd.args(["--store", f]);
        }
        if let Some(e) = &env {
            cmd.env("ROUTERD_STORE", e);
        }
        let o = cmd.output().unwrap();
        assert!(!o.status.success());
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            text.contains("PostgreSQL") || text.contains("--store"),
            "{text}"
        );
        assert!(!text.contains(secret), "{text}");
    }
}

#[test]
fn routerd_answers_a_typed_503_while_the_store_times_out_and_serves_after() {
    let Some(pg) = support::pg::shared() else {
        return;
    };
    let g = pg.schema("http_timeout");
    let dir = tempfile::tempdir().unwrap();
    let r = Routerd::start(
        dir.path(),
        &[
            "--store",
            pg.url(),
            "--store-schema",
            g.name(),
            "--store-timeout-s",
            "1",
        ],
    );
    r.register("d-before", "browser");
    // Every new device row waits behind this lock: the registration's
    // identity write times out.
    let lock = Held::take(
        pg,
        format!("BEGIN; LOCK TABLE \"{}\".devices IN SHARE MODE", g.name()),
    );
    let (status, body) = r.register_from(
        &registration("d-during", support::routerd::TOKEN, None),
        support::routerd::network_for("d-during"),
    );
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"], "store_unavailable", "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("timed out"),
        "{body}"
    );
    drop(lock);
    r.register("d-during", "browser");
    r.stop();
}
