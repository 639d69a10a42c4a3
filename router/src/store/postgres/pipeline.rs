//! Pipelined statements on one PostgreSQL connection: futures polled
//! together so tokio-postgres sends every statement of a chunk before the
//! first reply is awaited.

use std::future::Future;
use std::pin::Pin;

use tokio_postgres::types::ToSql;
use tokio_postgres::Statement;

use super::pe;
use crate::store::{Row, StoreError};

/// Polls every future to completion, concurrently (so tokio-postgres
/// pipelines their statements), and returns their results in input order.
pub(super) async fn join_all<F, T>(futs: Vec<Pin<Box<F>>>) -> Vec<T>
where
    F: Future<Output = T> + ?Sized,
{
    let mut futs: Vec<Option<Pin<Box<F>>>> = futs.into_iter().map(Some).collect();
    let mut results: Vec<Option<T>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (slot, out) in futs.iter_mut().zip(results.iter_mut()) {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(r) => {
                        *out = Some(r);
                        *slot = None;
                    }
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    results.into_iter().flatten().collect()
}

/// Rows of an upsert in flight at once: enough that the round trip is
/// paid once per 2,048 rows (a 20,000-row write is 10 round trips, well
/// inside the statement timeout on a slow link), few enough that a
/// snapshot of 100,000 changed targets is never encoded, boxed and polled
/// all at once (which held every statement in the connection's send
/// buffer; decision 0021, a small box bounds its transients).
pub(super) const PIPELINE_ROWS: usize = 2_048;

/// Upserts `rows` inside `tx` with the prepared upsert `st`, pipelined
/// [`PIPELINE_ROWS`] at a time: every statement of a chunk is sent before
/// its first reply is awaited. Rows still apply in order on the server.
pub(super) async fn upsert_rows(
    tx: &tokio_postgres::Transaction<'_>,
    st: &Statement,
    rows: &[Row],
) -> Result<(), StoreError> {
    for chunk in rows.chunks(PIPELINE_ROWS) {
        let versions: Vec<i64> = chunk.iter().map(|r| r.version as i64).collect();
        let pending: Vec<_> = chunk
            .iter()
            .zip(&versions)
            .map(|(r, v)| {
                let params: [&(dyn ToSql + Sync); 3] = [&r.key, v, &r.payload];
                Box::pin(tx.execute_raw(st, params))
            })
            .collect();
        for r in join_all(pending).await {
            r.map_err(pe)?;
        }
    }
    Ok(())
}
