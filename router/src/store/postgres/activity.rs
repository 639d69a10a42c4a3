//! The server's own counters of the store's database, for figures: how
//! many transactions and row changes a workload cost
//! (`pg_stat_database`; cumulative since the server's statistics reset,
//! updated by the server at most every 500 ms or so, so a figure is taken
//! as the difference of two reads around a run of seconds).

use super::{pe, PgStore, StoreError};

/// `pg_stat_database`'s counters for the current database.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Activity {
    /// Transactions committed.
    pub commits: i64,
    /// Transactions rolled back.
    pub rollbacks: i64,
    /// Rows inserted.
    pub inserted: i64,
    /// Rows updated.
    pub updated: i64,
    /// Rows deleted.
    pub deleted: i64,
}

impl Activity {
    /// `self − before`, counter by counter.
    pub fn since(&self, before: &Activity) -> Activity {
        Activity {
            commits: self.commits - before.commits,
            rollbacks: self.rollbacks - before.rollbacks,
            inserted: self.inserted - before.inserted,
            updated: self.updated - before.updated,
            deleted: self.deleted - before.deleted,
        }
    }
}

impl PgStore {
    /// The server's counters for this store's database (after asking it
    /// to publish its pending statistics: `pg_stat_force_next_flush`, on
    /// PostgreSQL 15 and later; ignored where absent).
    ///
    /// Errors: the store's.
    pub fn activity(&self) -> Result<Activity, StoreError> {
        self.call(|c| {
            Box::pin(async move {
                let _ = c
                    .client()
                    .batch_execute("SELECT pg_stat_force_next_flush()")
                    .await;
                let r = c
                    .client()
                    .query_one(
                        "SELECT xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted
                         FROM pg_stat_database WHERE datname = current_database()",
                        &[],
                    )
                    .await
                    .map_err(pe)?;
                Ok(Activity {
                    commits: r.try_get(0).map_err(pe)?,
                    rollbacks: r.try_get(1).map_err(pe)?,
                    inserted: r.try_get(2).map_err(pe)?,
                    updated: r.try_get(3).map_err(pe)?,
                    deleted: r.try_get(4).map_err(pe)?,
                })
            })
        })
    }
}
