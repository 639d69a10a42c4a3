//! The PostgreSQL store's atomic batch of writes ([`Store::write_all`]:
//! one transaction, behind the fence where there is one, every statement
//! pipelined) and its paged read of a table ([`Store::load_page`]).

use super::conn::{check_fence, row_of, Conn};
use super::pipeline::upsert_rows;
use super::*;

/// One write of a batch, owned (it crosses to the connection's worker).
pub(super) enum OwnedWrite {
    /// Rows upserted into a table.
    Upsert(Table, Vec<Row>),
    /// Keys deleted from a table.
    Delete(Table, Vec<String>),
}

impl OwnedWrite {
    /// The owned copy of `w`, keys [`check_key`] refuses dropped from a delete.
    pub(super) fn of(w: &Write<'_>) -> OwnedWrite {
        match *w {
            Write::Upsert(t, rows) => OwnedWrite::Upsert(t, rows.to_vec()),
            Write::Delete(t, keys) => OwnedWrite::Delete(
                t,
                keys.iter()
                    .filter(|k| check_key(k).is_ok())
                    .cloned()
                    .collect(),
            ),
        }
    }
}

impl Conn {
    /// Applies `writes` in one transaction (behind the fence, where the
    /// connection has one): all of them or, on any error, none.
    pub(super) async fn write_all(&mut self, writes: &[OwnedWrite]) -> Result<(), StoreError> {
        let tx = self.client.transaction().await.map_err(pe)?;
        if let Some(f) = &self.fence {
            check_fence(&tx, &self.st.fence, f).await?;
        }
        for w in writes {
            match w {
                OwnedWrite::Upsert(t, rows) => {
                    upsert_rows(&tx, &self.st.upsert[ti(*t)], rows).await?;
                }
                OwnedWrite::Delete(t, keys) => {
                    tx.execute(&self.st.delete[ti(*t)], &[keys])
                        .await
                        .map_err(pe)?;
                }
            }
        }
        tx.commit().await.map_err(pe)
    }

    /// Up to `limit` rows of `table` after `after`, in key order.
    pub(super) async fn page(
        &mut self,
        table: Table,
        after: &str,
        limit: i64,
    ) -> Result<Vec<Row>, StoreError> {
        let rows = self
            .client
            .query(&self.st.page[ti(table)], &[&after, &limit])
            .await
            .map_err(pe)?;
        rows.iter().map(row_of).collect()
    }
}
