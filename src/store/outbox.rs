//! `outbox`: writes to the homeserver with transaction ids fixed before the first attempt.

use sqlx::Row;

use super::{Result, Store};

/// The state of one write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRow {
    pub txn_id: String,
    pub state: String,
    pub event_id: Option<String>,
    pub error: Option<String>,
}

impl Store {
    /// The write `seq` of turn `turn_id`, creating it (state `pending`, with `txn_id`) if
    /// it is new. A resumed turn gets the row it made before the crash.
    pub async fn outbox_claim(
        &self,
        txn_id: &str,
        turn_id: i64,
        seq: i64,
        room_id: &str,
        sender: &str,
        now: i64,
    ) -> Result<OutboxRow> {
        sqlx::query(
            "INSERT INTO outbox (txn_id, turn_id, seq, room_id, sender, created_at) VALUES (?, ?, ?, ?, ?, ?)
             ON CONFLICT (turn_id, seq) DO NOTHING",
        )
        .bind(txn_id)
        .bind(turn_id)
        .bind(seq)
        .bind(room_id)
        .bind(sender)
        .bind(now)
        .execute(&self.pool)
        .await?;
        let row = sqlx::query("SELECT txn_id, state, event_id, error FROM outbox WHERE turn_id = ? AND seq = ?")
            .bind(turn_id)
            .bind(seq)
            .fetch_one(&self.pool)
            .await?;
        Ok(OutboxRow {
            txn_id: row.try_get("txn_id")?,
            state: row.try_get("state")?,
            event_id: row.try_get("event_id")?,
            error: row.try_get("error")?,
        })
    }

    /// Counts an attempt at a write.
    pub async fn outbox_attempt(&self, txn_id: &str) -> Result<()> {
        sqlx::query("UPDATE outbox SET attempts = attempts + 1 WHERE txn_id = ?")
            .bind(txn_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Records that a write landed as `event_id`.
    pub async fn outbox_sent(&self, txn_id: &str, event_id: &str) -> Result<()> {
        sqlx::query("UPDATE outbox SET state = 'sent', event_id = ?, error = NULL WHERE txn_id = ?")
            .bind(event_id)
            .bind(txn_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Records that the homeserver refused a write for good, with its reason.
    pub async fn outbox_failed(&self, txn_id: &str, reason: &str) -> Result<()> {
        sqlx::query("UPDATE outbox SET state = 'failed', error = ? WHERE txn_id = ?")
            .bind(reason)
            .bind(txn_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
