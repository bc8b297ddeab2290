//! `appservice_txns`: the numbers of the transactions the homeserver sent, for
//! `appservice::gaps` to tell a skip in its numbering, whichever instance saw them and
//! however often richbot restarted in between.

use sqlx::Row;

use super::{Result, Store};

/// Transaction numbers kept below the newest.
const KEPT: i64 = 1000;

/// What is known about a transaction number when it is noted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnSeen {
    /// Not seen before (false: the homeserver sends it again).
    pub new: bool,
    /// The greatest number seen below it.
    pub previous: Option<i64>,
    /// Whether the number just below `previous` was seen too: the homeserver was numbering
    /// one by one up to it.
    pub previous_in_a_row: bool,
}

impl Store {
    /// Notes that transaction `number` was stored; what was seen around it.
    pub async fn note_transaction(&self, number: i64, now: i64) -> Result<TxnSeen> {
        let mut tx = self.writer.begin().await?;
        let new = sqlx::query("INSERT INTO appservice_txns (number, seen_at) VALUES ($1, $2) ON CONFLICT DO NOTHING")
            .bind(number)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected()
            > 0;
        let row = sqlx::query("SELECT MAX(number) AS previous FROM appservice_txns WHERE number < $1")
            .bind(number)
            .fetch_one(&mut *tx)
            .await?;
        let previous: Option<i64> = row.try_get("previous")?;
        let previous_in_a_row = match previous {
            Some(p) => sqlx::query("SELECT 1 AS seen FROM appservice_txns WHERE number = $1")
                .bind(p.saturating_sub(1))
                .fetch_optional(&mut *tx)
                .await?
                .is_some(),
            None => false,
        };
        sqlx::query("DELETE FROM appservice_txns WHERE number < $1")
            .bind(number.saturating_sub(KEPT))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(TxnSeen { new, previous, previous_in_a_row })
    }
}
