//! One PostgreSQL connection and the worker thread that owns it: the
//! prepared statements, the migration on first open, the reads and writes
//! the store's calls become, and the reconnect after a dropped connection.

use super::pipeline::{join_all, upsert_rows};
use super::*;

/// The statements of one connection, prepared once.
pub(super) struct Statements {
    pub(super) upsert: [Statement; 4],
    get: [Statement; 4],
    load: [Statement; 4],
    /// Up to `$2` rows after key `$1`, in key order.
    pub(super) page: [Statement; 4],
    append: Statement,
    after: Statement,
    has: Statement,
    last: Statement,
    prune: Statement,
    pub(super) delete: [Statement; 4],
    version: Statement,
    /// The fence check: the lead row for a term and holder, unexpired on
    /// the server's clock, share-locked to the end of the transaction.
    pub(super) fence: Statement,
}

/// One live connection and its statements (owned by the worker thread).
pub(super) struct Conn {
    pub(super) client: Client,
    pub(super) st: Statements,
    /// A call on it timed out: its state is unknown, so it is not reused.
    pub(super) broken: bool,
    /// With a fence, every write checks it first in its own transaction.
    pub(super) fence: Option<Fence>,
}

async fn stored_version<C: GenericClient>(client: &C, q: &str) -> Result<u32, StoreError> {
    let has: bool = client
        .query_one(
            "SELECT to_regclass($1) IS NOT NULL",
            &[&format!("{q}.schema_migrations")],
        )
        .await
        .map_err(pe)?
        .try_get(0)
        .map_err(pe)?;
    if !has {
        return Ok(0);
    }
    let v: i32 = client
        .query_one(
            &format!("SELECT COALESCE(MAX(version), 0) FROM {q}.schema_migrations"),
            &[],
        )
        .await
        .map_err(pe)?
        .try_get(0)
        .map_err(pe)?;
    u32::try_from(v).map_err(|_| StoreError::Backend(format!("postgres: schema version {v}")))
}

/// Brings the schema to [`SCHEMA_VERSION`] in one transaction, serialized
/// with other openers by an advisory lock. A newer schema is refused before
/// anything is written.
async fn migrate(client: &mut Client, schema: &str, q: &str) -> Result<(), StoreError> {
    let found = stored_version(client, q).await?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found,
            known: SCHEMA_VERSION,
        });
    }
    let tx = client.transaction().await.map_err(pe)?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext('router schema ' || $1::text))",
        &[&schema],
    )
    .await
    .map_err(pe)?;
    let exists: bool = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
            &[&schema],
        )
        .await
        .map_err(pe)?
        .try_get(0)
        .map_err(pe)?;
    if !exists {
        tx.batch_execute(&format!("CREATE SCHEMA {q}"))
            .await
            .map_err(pe)?;
    }
    tx.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS {q}.schema_migrations (
             version INTEGER PRIMARY KEY,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         )"
    ))
    .await
    .map_err(pe)?;
    let found = stored_version(&tx, q).await?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found,
            known: SCHEMA_VERSION,
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate() {
        let target = i as i32 + 1;
        if found as i32 >= target {
            continue;
        }
        tx.batch_execute(&sql.replace("{s}", q)).await.map_err(pe)?;
        tx.execute(
            &format!("INSERT INTO {q}.schema_migrations (version) VALUES ($1)"),
            &[&target],
        )
        .await
        .map_err(pe)?;
    }
    tx.commit().await.map_err(pe)
}

async fn prepare(client: &Client, q: &str) -> Result<Statements, StoreError> {
    let p = |sql: String| async move { client.prepare(&sql).await.map_err(pe) };
    let mut upsert = Vec::new();
    let mut get = Vec::new();
    let mut load = Vec::new();
    let mut page = Vec::new();
    let mut delete = Vec::new();
    for t in Table::ALL {
        let n = t.name();
        delete.push(p(format!("DELETE FROM {q}.{n} WHERE key = ANY($1)")).await?);
        upsert.push(
            p(format!(
                "INSERT INTO {q}.{n} AS t (key, version, payload) VALUES ($1, $2, $3)
                 ON CONFLICT (key) DO UPDATE
                 SET version = EXCLUDED.version, payload = EXCLUDED.payload
                 WHERE EXCLUDED.version >= t.version"
            ))
            .await?,
        );
        get.push(
            p(format!(
                "SELECT key, version, payload FROM {q}.{n} WHERE key = $1"
            ))
            .await?,
        );
        load.push(
            p(format!(
                "SELECT key, version, payload FROM {q}.{n} ORDER BY key"
            ))
            .await?,
        );
        page.push(
            p(format!(
                "SELECT key, version, payload FROM {q}.{n} WHERE key > $1 ORDER BY key LIMIT $2"
            ))
            .await?,
        );
    }
    let per_table = |v: Vec<Statement>| -> Result<[Statement; 4], StoreError> {
        v.try_into()
            .map_err(|_| StoreError::Backend("postgres: statement table".into()))
    };
    Ok(Statements {
        upsert: per_table(upsert)?,
        get: per_table(get)?,
        load: per_table(load)?,
        page: per_table(page)?,
        delete: per_table(delete)?,
        prune: p(format!(
            "DELETE FROM {q}.deposits WHERE seq <= $1
             AND seq < (SELECT COALESCE(MAX(seq), 0) FROM {q}.deposits)"
        ))
        .await?,
        append: p(format!(
            "INSERT INTO {q}.deposits (seq, token, payload) VALUES ($1, $2, $3)
             ON CONFLICT (token) DO NOTHING"
        ))
        .await?,
        after: p(format!(
            "SELECT seq, token, payload FROM {q}.deposits WHERE seq > $1 ORDER BY seq"
        ))
        .await?,
        has: p(format!(
            "SELECT EXISTS (SELECT 1 FROM {q}.deposits WHERE token = $1)"
        ))
        .await?,
        last: p(format!(
            "SELECT COALESCE(MAX(seq), 0)::BIGINT FROM {q}.deposits"
        ))
        .await?,
        version: p(format!(
            "SELECT COALESCE(MAX(version), 0) FROM {q}.schema_migrations"
        ))
        .await?,
        fence: p(format!(
            "SELECT term FROM {q}.leadership
             WHERE id = 1 AND term = $1 AND holder = $2 AND expires_at > clock_timestamp()
             FOR SHARE"
        ))
        .await?,
    })
}

/// Connects (TLS as `tls` negotiates), sets the server's
/// `statement_timeout` and `idle_in_transaction_session_timeout` to
/// `statement_ms` (a client cut off inside a transaction holds no lock
/// longer than that: a fence's share lock would stall a new lead),
/// optionally migrates, and prepares the statements. `schema` is the
/// schema's name and its quoted form.
pub(super) async fn open_conn(
    cfg: &Config,
    tls: &MakeRustlsConnect,
    statement_ms: u64,
    (schema, q): (&str, &str),
    fence: Option<Fence>,
    run_migrations: bool,
) -> Result<Conn, StoreError> {
    let (mut client, connection) = cfg.connect(tls.clone()).await.map_err(pe)?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!("postgres connection ended: {}", pe(e));
        }
    });
    client
        .batch_execute(&format!(
            "SET statement_timeout = {statement_ms}; SET idle_in_transaction_session_timeout = {statement_ms}"
        ))
        .await
        .map_err(pe)?;
    if run_migrations {
        migrate(&mut client, schema, q).await?;
    }
    let st = prepare(&client, q).await?;
    Ok(Conn {
        client,
        st,
        broken: false,
        fence,
    })
}

pub(super) fn row_of(r: &tokio_postgres::Row) -> Result<Row, StoreError> {
    let version: i64 = r.try_get(1).map_err(pe)?;
    Ok(Row {
        key: r.try_get(0).map_err(pe)?,
        version: to_u64("version", version)?,
        payload: r.try_get(2).map_err(pe)?,
    })
}

/// Checks `fence` inside `tx` with the prepared `st`: the lead row for its
/// term and holder, unexpired on the server's clock, is share-locked to
/// the transaction's end (a new lead's takeover waits for this write).
///
/// Errors: [`StoreError::Fenced`] when the lead moved or lapsed; the
/// server's errors as always.
pub(super) async fn check_fence(
    tx: &tokio_postgres::Transaction<'_>,
    st: &Statement,
    fence: &Fence,
) -> Result<(), StoreError> {
    match tx.query_opt(st, &[&fence.term, &fence.holder]).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(StoreError::Fenced(format!(
            "the lead of term {} has moved or lapsed",
            fence.term
        ))),
        Err(e) => Err(pe(e)),
    }
}

impl Conn {
    /// The connection's client, for statements not prepared per connection.
    pub(super) fn client(&self) -> &Client {
        &self.client
    }

    /// Whether the connection can take another call.
    pub(super) fn usable(&self) -> bool {
        !self.broken && !self.client.is_closed()
    }

    /// Whether the session is encrypted (PostgreSQL's `pg_stat_ssl`).
    pub(super) async fn ssl(&mut self) -> Result<bool, StoreError> {
        self.client
            .query_one(
                "SELECT COALESCE((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false)",
                &[],
            )
            .await
            .map_err(pe)?
            .try_get(0)
            .map_err(pe)
    }

    pub(super) async fn upsert(&mut self, table: Table, rows: &[Row]) -> Result<(), StoreError> {
        let st = &self.st.upsert[ti(table)];
        if let ([r], None) = (rows, &self.fence) {
            self.client
                .execute(st, &[&r.key, &(r.version as i64), &r.payload])
                .await
                .map_err(pe)?;
            return Ok(());
        }
        let tx = self.client.transaction().await.map_err(pe)?;
        if let Some(f) = &self.fence {
            check_fence(&tx, &self.st.fence, f).await?;
        }
        upsert_rows(&tx, st, rows).await?;
        tx.commit().await.map_err(pe)
    }

    pub(super) async fn get(&mut self, table: Table, key: &str) -> Result<Option<Row>, StoreError> {
        let got = self
            .client
            .query_opt(&self.st.get[ti(table)], &[&key])
            .await
            .map_err(pe)?;
        got.as_ref().map(row_of).transpose()
    }

    pub(super) async fn load(&mut self, table: Table) -> Result<Vec<Row>, StoreError> {
        let rows = self
            .client
            .query(&self.st.load[ti(table)], &[])
            .await
            .map_err(pe)?;
        rows.iter().map(row_of).collect()
    }

    pub(super) async fn append(&mut self, e: &DepositEntry) -> Result<bool, StoreError> {
        let params: [&(dyn ToSql + Sync); 3] = [&(e.seq as i64), &e.token, &e.payload];
        let r = match &self.fence {
            None => self.client.execute(&self.st.append, &params).await,
            Some(f) => {
                let tx = self.client.transaction().await.map_err(pe)?;
                check_fence(&tx, &self.st.fence, f).await?;
                match tx.execute(&self.st.append, &params).await {
                    Ok(n) => tx.commit().await.map(|()| n),
                    Err(e) => Err(e),
                }
            }
        };
        match r {
            Ok(n) => Ok(n == 1),
            Err(err) if err.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                Err(StoreError::Backend(format!(
                    "deposit seq {} is already logged with another token",
                    e.seq
                )))
            }
            Err(err) => Err(pe(err)),
        }
    }

    /// Appends checked entries in one pipelined transaction. `None`: some
    /// statement failed, the transaction was rolled back (nothing written)
    /// and the caller should append one by one for per-entry results.
    /// `Some(Err)`: the commit failed (outcome unknown to the caller).
    pub(super) async fn append_batch(
        &mut self,
        entries: &[&DepositEntry],
    ) -> Option<Result<Vec<bool>, StoreError>> {
        let tx = match self.client.transaction().await {
            Ok(tx) => tx,
            Err(e) => return Some(Err(pe(e))),
        };
        if let Some(f) = &self.fence {
            if let Err(e) = check_fence(&tx, &self.st.fence, f).await {
                return Some(Err(e));
            }
        }
        let seqs: Vec<i64> = entries.iter().map(|e| e.seq as i64).collect();
        let pending: Vec<_> = entries
            .iter()
            .zip(&seqs)
            .map(|(e, seq)| {
                let params: [&(dyn ToSql + Sync); 3] = [seq, &e.token, &e.payload];
                Box::pin(tx.execute_raw(&self.st.append, params))
            })
            .collect();
        let mut fresh = Vec::with_capacity(entries.len());
        for r in join_all(pending).await {
            match r {
                Ok(n) => fresh.push(n == 1),
                Err(_) => {
                    let _ = tx.rollback().await;
                    return None;
                }
            }
        }
        Some(tx.commit().await.map(|()| fresh).map_err(pe))
    }

    pub(super) async fn after(&mut self, after: i64) -> Result<Vec<DepositEntry>, StoreError> {
        let rows = self
            .client
            .query(&self.st.after, &[&after])
            .await
            .map_err(pe)?;
        rows.iter()
            .map(|r| {
                let seq: i64 = r.try_get(0).map_err(pe)?;
                Ok(DepositEntry {
                    seq: to_u64("seq", seq)?,
                    token: r.try_get(1).map_err(pe)?,
                    payload: r.try_get(2).map_err(pe)?,
                })
            })
            .collect()
    }

    pub(super) async fn has(&mut self, token: &str) -> Result<bool, StoreError> {
        self.client
            .query_one(&self.st.has, &[&token])
            .await
            .map_err(pe)?
            .try_get(0)
            .map_err(pe)
    }

    pub(super) async fn prune(&mut self, up_to: i64) -> Result<u64, StoreError> {
        let st = &self.st.prune;
        self.one_write(st, &[&up_to]).await
    }

    pub(super) async fn delete(&mut self, table: Table, keys: &[String]) -> Result<(), StoreError> {
        let st = &self.st.delete[ti(table)];
        self.one_write(st, &[&keys]).await.map(|_| ())
    }

    /// One write statement: as it is, or behind the fence in a
    /// transaction of its own. Returns the rows it touched.
    async fn one_write(
        &self,
        st: &Statement,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        let Some(f) = &self.fence else {
            return self.client.execute(st, params).await.map_err(pe);
        };
        // `Client::transaction` needs `&mut`; a plain BEGIN does the same
        // on this connection, whose calls run one at a time.
        self.client.batch_execute("BEGIN").await.map_err(pe)?;
        let done = async {
            let ok = self
                .client
                .query_opt(&self.st.fence, &[&f.term, &f.holder])
                .await
                .map_err(pe)?;
            if ok.is_none() {
                return Err(StoreError::Fenced(format!(
                    "the lead of term {} has moved or lapsed",
                    f.term
                )));
            }
            self.client.execute(st, params).await.map_err(pe)
        }
        .await;
        let end = if done.is_ok() { "COMMIT" } else { "ROLLBACK" };
        self.client.batch_execute(end).await.map_err(pe)?;
        done
    }

    pub(super) async fn last(&mut self) -> Result<u64, StoreError> {
        let v: i64 = self
            .client
            .query_one(&self.st.last, &[])
            .await
            .map_err(pe)?
            .try_get(0)
            .map_err(pe)?;
        to_u64("seq", v)
    }

    pub(super) async fn version(&mut self) -> Result<u32, StoreError> {
        let v: i32 = self
            .client
            .query_one(&self.st.version, &[])
            .await
            .map_err(pe)?
            .try_get(0)
            .map_err(pe)?;
        u32::try_from(v).map_err(|_| StoreError::Backend(format!("postgres: schema version {v}")))
    }
}
