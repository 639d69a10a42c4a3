//! Opening the store `routerd` serves from: SQLite in the data directory,
//! or PostgreSQL with its pool, timeouts and TLS (`--store postgres://…`).

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
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            let secs = |flag: &str, s: f64| -> Result<Duration> {
                if s.is_finite() && s > 0.0 && s <= 3600.0 {
                    Ok(Duration::from_secs_f64(s))
                } else {
                    bail!("{flag} must be in (0, 3600], got {s}")
                }
            };
            let opts = PgOptions {
                schema: args.store_schema.clone(),
                pool_size: args.store_pool,
                statement_timeout: secs("--store-timeout-s", args.store_timeout_s)?,
                connect_timeout: secs("--store-connect-timeout-s", args.store_connect_timeout_s)?,
                ca_file: args.store_ca_file.clone(),
            };
            // The URL is never printed: it may hold a password.
            Ok(Box::new(
                PgStore::open(url, &opts).context("connecting to PostgreSQL")?,
            ))
        }
        Some(_) => {
            bail!("--store must be a postgres:// or postgresql:// URL (or absent for SQLite); the value given is not repeated here, since it may hold a password")
        }
    }
}
