//! Opening the store `routerd` serves from: SQLite in the data directory,
//! or PostgreSQL with its pool, timeouts and TLS (`--store postgres://…`);
//! and the data directory's lock, one routerd per directory.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use router::store::{PgOptions, PgStore, SqliteStore, Store, Synchronous};

use crate::ServeArgs;

pub(crate) fn open_store(args: &ServeArgs) -> Result<Box<dyn Store>> {
    match &args.store {
        None => {
            let normal = args.sqlite_synchronous == "normal";
            let sync = [Synchronous::Full, Synchronous::Normal][usize::from(normal)];
            std::fs::create_dir_all(&args.data)
                .with_context(|| format!("creating {}", args.data.display()))?;
            let path = args.data.join(router::store::SQLITE_FILE);
            Ok(Box::new(SqliteStore::open_with(&path, sync).with_context(
                || format!("opening the SQLite store in {}", args.data.display()),
            )?))
        }
        Some(url) if is_postgres(url) => {
            // The URL is never printed: it may hold a password.
            let store =
                PgStore::open(url, &pg_options(args)?).context("connecting to PostgreSQL")?;
            refuse_a_replicated_schema(&store)?;
            Ok(Box::new(store))
        }
        Some(_) => {
            bail!("--store must be a postgres:// or postgresql:// URL (or absent for SQLite); the value given is not repeated here, since it may hold a password")
        }
    }
}

/// A routerd without `--replica-id` writes unfenced: it must not serve a
/// schema that replicas serve. Refused while their lead is live (a guard
/// at start, not a fence: replicas started later cannot see it).
///
/// Errors: a replica leads on the schema now, or the store cannot say.
fn refuse_a_replicated_schema(store: &PgStore) -> Result<()> {
    let lead = store.lead().context("reading the schema's lead")?;
    if let Some(l) = lead.filter(|l| !l.remaining.is_zero()) {
        let name = l.holder.split('#').next().unwrap_or("");
        bail!(
            "replicas serve the schema {} (replica {name} leads, term {}): join them with --replica-id NAME, or use another --store-schema",
            store.schema(),
            l.term
        );
    }
    Ok(())
}

/// Whether `url` names a PostgreSQL server.
pub(crate) fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// The PostgreSQL options of the serve flags (unfenced).
///
/// Errors: a timeout flag out of (0, 3600] s.
pub(crate) fn pg_options(args: &ServeArgs) -> Result<PgOptions> {
    let secs = |flag: &str, s: f64| -> Result<Duration> {
        if s.is_finite() && s > 0.0 && s <= 3600.0 {
            Ok(Duration::from_secs_f64(s))
        } else {
            bail!("{flag} must be in (0, 3600], got {s}")
        }
    };
    Ok(PgOptions {
        schema: args.store_schema.clone(),
        pool_size: args.store_pool,
        statement_timeout: secs("--store-timeout-s", args.store_timeout_s)?,
        connect_timeout: secs("--store-connect-timeout-s", args.store_connect_timeout_s)?,
        ca_file: args.store_ca_file.clone(),
        fence: None,
    })
}

/// The lock file in the data directory.
pub(crate) const LOCK_FILE: &str = "routerd.lock";

/// Takes the data directory for this process: an exclusive lock on
/// `<data>/routerd.lock`, which then holds this process's pid. The lock
/// lasts as long as the returned file, and ends with the process however
/// it ends (the kernel drops it with the file, SIGKILL included).
///
/// Errors: another process holds the lock (a second routerd on the same
/// directory would write the same SQLite store, event log and operator
/// key: refused, naming the holder's pid), or the file cannot be opened.
pub(crate) fn lock_data_dir(dir: &Path) -> Result<File> {
    let path = dir.join(LOCK_FILE);
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    match f.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = f.read_to_string(&mut holder);
            let holder = holder.trim();
            let pid = if holder.is_empty() { "unknown" } else { holder };
            bail!(
                "another routerd (pid {pid}) serves the data directory {}: one routerd per data directory",
                dir.display()
            );
        }
        Err(TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("locking {}", path.display()))
        }
    }
    f.set_len(0)
        .and_then(|()| f.rewind())
        .and_then(|()| writeln!(f, "{}", std::process::id()))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(f)
}
