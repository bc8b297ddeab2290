//! `crypto_message_indices`: which event first carried each (megolm session, message
//! index), so a ciphertext pasted into another event is known for a copy.

use sqlx::Row;

use crate::store::{Result, Store};

impl Store {
    /// Records that `event_id` carried `index` of megolm session `session` (an encoded
    /// id), unless an event did before; returns the event that carried it first.
    pub async fn crypto_message_index(&self, session: &str, index: i64, event_id: &str, now: i64) -> Result<String> {
        sqlx::query(
            "INSERT INTO crypto_message_indices (session_id, message_index, event_id, seen_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (session_id, message_index) DO NOTHING",
        )
        .bind(session)
        .bind(index)
        .bind(event_id)
        .bind(now)
        .execute(&self.writer)
        .await?;
        let row =
            sqlx::query("SELECT event_id FROM crypto_message_indices WHERE session_id = $1 AND message_index = $2")
                .bind(session)
                .bind(index)
                .fetch_one(&self.writer)
                .await?;
        Ok(row.try_get("event_id")?)
    }
}
