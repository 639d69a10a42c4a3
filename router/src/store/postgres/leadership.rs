//! The replicas' lead: one row (`leadership`) that names the replica
//! allowed to write, its term and the URL it serves on, with an expiry on
//! the server's clock. A replica takes the lead only once the row has
//! lapsed, raising the term; it renews before the expiry; and every write
//! it makes checks its term in the same transaction ([`Fence`], module
//! `conn`). The server's clock is the only one that decides: replicas'
//! clocks may disagree. Source:
//! `docs/decisions/0020-replicas-over-one-postgresql.md`.

use std::time::Duration;

use super::{pe, PgStore, StoreError};

/// A leading replica's fencing token: the term it won and the holder name
/// it won it under (unique per process: a restarted replica is a new
/// holder). A [`PgStore`] opened with one writes only while the lead row
/// still holds both, unexpired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The term (1, 2, …; raised on every change of holder or lapse).
    pub term: i64,
    /// The holder's name.
    pub holder: String,
}

/// The lead as the store has it after a campaign.
#[derive(Debug, Clone, PartialEq)]
pub struct Leadership {
    /// The current term.
    pub term: i64,
    /// Who holds it.
    pub holder: String,
    /// The URL the holder serves on (its `--advertise`).
    pub url: String,
    /// Time left before the lead lapses, on the server's clock at the
    /// statement (zero once it has lapsed).
    pub remaining: Duration,
}

impl Leadership {
    /// The fence of this lead.
    pub fn fence(&self) -> Fence {
        Fence {
            term: self.term,
            holder: self.holder.clone(),
        }
    }
}

/// The lead's longest term length, seconds (an hour).
pub const MAX_LEAD_S: f64 = 3600.0;

impl PgStore {
    /// Takes the lead for `holder` (serving on `url`) for `ttl`, or renews
    /// it when `holder` holds it unexpired, in one statement; then answers
    /// who leads. Taking a lapsed or another's lapsed lead raises the term;
    /// a live lead of another holder is left alone. A renewal keeps the
    /// term.
    ///
    /// Errors: `ttl` outside (0, 3,600] s, `holder` or `url` empty
    /// or over 512 bytes ([`StoreError::BadValue`]); the store's errors.
    pub fn campaign(
        &self,
        holder: &str,
        url: &str,
        ttl: Duration,
    ) -> Result<Leadership, StoreError> {
        let secs = ttl.as_secs_f64();
        if !(secs > 0.0 && secs <= MAX_LEAD_S) {
            return Err(StoreError::BadValue(format!(
                "lead ttl {secs} s outside (0, {MAX_LEAD_S}]"
            )));
        }
        for (what, v) in [("holder", holder), ("url", url)] {
            if v.is_empty() || v.len() > 512 || v.contains('\0') {
                return Err(StoreError::BadValue(format!(
                    "lead {what} must be 1..=512 bytes without NUL"
                )));
            }
        }
        let q = format!("\"{}\"", self.schema());
        let sql = format!(
            "WITH won AS (
               INSERT INTO {q}.leadership AS l (id, term, holder, url, expires_at)
               VALUES (1, 1, $1, $2, clock_timestamp() + make_interval(secs => $3))
               ON CONFLICT (id) DO UPDATE SET
                 term = CASE WHEN l.holder = EXCLUDED.holder
                              AND l.expires_at > clock_timestamp()
                        THEN l.term ELSE l.term + 1 END,
                 holder = EXCLUDED.holder, url = EXCLUDED.url,
                 expires_at = EXCLUDED.expires_at
               WHERE l.holder = EXCLUDED.holder OR l.expires_at <= clock_timestamp()
               RETURNING term, holder, url, expires_at
             ), now_lead AS (
               SELECT term, holder, url, expires_at FROM won
               UNION ALL
               SELECT term, holder, url, expires_at FROM {q}.leadership
               WHERE id = 1 AND NOT EXISTS (SELECT 1 FROM won)
             )
             SELECT term, holder, url,
                    GREATEST(EXTRACT(EPOCH FROM (expires_at - clock_timestamp())), 0)::float8
             FROM now_lead"
        );
        let (holder, url) = (holder.to_string(), url.to_string());
        self.call(move |c| {
            Box::pin(async move {
                let row = c
                    .client()
                    .query_one(&sql, &[&holder, &url, &secs])
                    .await
                    .map_err(pe)?;
                let left: f64 = row.try_get(3).map_err(pe)?;
                Ok(Leadership {
                    term: row.try_get(0).map_err(pe)?,
                    holder: row.try_get(1).map_err(pe)?,
                    url: row.try_get(2).map_err(pe)?,
                    remaining: Duration::from_secs_f64(left.clamp(0.0, MAX_LEAD_S)),
                })
            })
        })
    }

    /// The lead row as it is, without campaigning (`None` when no replica
    /// ever led on this schema); `remaining` is zero once it has lapsed.
    ///
    /// Errors: the store's.
    pub fn lead(&self) -> Result<Option<Leadership>, StoreError> {
        let q = format!("\"{}\"", self.schema());
        let sql = format!(
            "SELECT term, holder, url,
                    GREATEST(EXTRACT(EPOCH FROM (expires_at - clock_timestamp())), 0)::float8
             FROM {q}.leadership WHERE id = 1"
        );
        self.call(move |c| {
            Box::pin(async move {
                let Some(row) = c.client().query_opt(&sql, &[]).await.map_err(pe)? else {
                    return Ok(None);
                };
                let left: f64 = row.try_get(3).map_err(pe)?;
                Ok(Some(Leadership {
                    term: row.try_get(0).map_err(pe)?,
                    holder: row.try_get(1).map_err(pe)?,
                    url: row.try_get(2).map_err(pe)?,
                    remaining: Duration::from_secs_f64(left.clamp(0.0, MAX_LEAD_S)),
                }))
            })
        })
    }

    /// Gives up the lead held under `fence` (its row lapses now, so another
    /// replica can take it at its next campaign); a lead no longer held
    /// under `fence` is left alone. Returns whether it was held.
    ///
    /// Errors: the store's.
    pub fn resign(&self, fence: &Fence) -> Result<bool, StoreError> {
        let q = format!("\"{}\"", self.schema());
        let sql = format!(
            "UPDATE {q}.leadership SET expires_at = clock_timestamp()
             WHERE id = 1 AND term = $1 AND holder = $2 AND expires_at > clock_timestamp()"
        );
        let f = fence.clone();
        self.call(move |c| {
            Box::pin(async move {
                let n = c
                    .client()
                    .execute(&sql, &[&f.term, &f.holder])
                    .await
                    .map_err(pe)?;
                Ok(n == 1)
            })
        })
    }
}
